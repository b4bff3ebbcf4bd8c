//! The provider table called directly, as libdat2 would, with garbage handles, stale handles
//! and NULL pointers: each entry answers the DAT code with the right subtype, never crashes.

use super::codes::{arg, err};
use super::handles::{self, Kind};
use super::objects::Body;
use super::state::IaState;
use super::table;
use dat_sys as d;

fn provider() -> d::DAT_PROVIDER {
    table::provider(c"dr-test")
}

fn garbage() -> *mut core::ffi::c_void {
    // A pointer nobody registered (never dereferenced by the provider).
    0xdead_beef_usize as *mut core::ffi::c_void
}

#[test]
fn every_entry_of_the_table_is_a_function_and_device_name_is_the_ia_name() {
    let p = provider();
    // SAFETY: DAT_PROVIDER is 2 pointers followed by 79 function pointers (asserted in
    // dat-sys), all 8 bytes on this target.
    let words: &[usize; 2 + d::DAT_PROVIDER_FUNCTIONS] = unsafe { core::mem::transmute(&p) };
    assert!(
        words[2..].iter().all(|&w| w != 0),
        "a NULL entry in the table"
    );
    // SAFETY: device_name is the static C string given above.
    assert_eq!(
        unsafe { std::ffi::CStr::from_ptr(p.device_name) },
        c"dr-test"
    );
}

#[test]
fn garbage_handles_are_invalid_handle_with_the_subtype_of_their_kind() {
    let p = provider();
    let g = garbage();
    let mut out: d::DAT_HANDLE = core::ptr::null_mut();
    // SAFETY (all calls below): the entries are this provider's; the arguments are what a
    // consumer may pass (garbage handles are never dereferenced).
    unsafe {
        assert_eq!(
            p.pz_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_PZ)
        );
        assert_eq!(
            p.ep_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
        assert_eq!(
            p.lmr_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_LMR)
        );
        assert_eq!(
            p.cno_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CNO)
        );
        assert_eq!(
            p.srq_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_SRQ)
        );
        assert_eq!(
            p.psp_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_PSP)
        );
        assert_eq!(
            p.rsp_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_RSP)
        );
        assert_eq!(
            p.rmr_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_RMR)
        );
        assert_eq!(
            p.csp_free_func.unwrap()(g),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CSP)
        );
        assert_eq!(
            p.cr_reject_func.unwrap()(g, 0, core::ptr::null_mut()),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CR)
        );
        assert_eq!(
            p.pz_create_func.unwrap()(g, &mut out),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_IA)
        );
        assert_eq!(
            p.ia_close_func.unwrap()(g, d::DAT_CLOSE_ABRUPT_FLAG),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_IA)
        );
        let mut ev = d::DAT_EVENT::default();
        assert_eq!(
            p.evd_dequeue_func.unwrap()(g, &mut ev),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EVD_REQUEST)
        );
        let mut ty = 0;
        assert_eq!(
            p.get_handle_type_func.unwrap()(g, &mut ty),
            err(d::DAT_INVALID_HANDLE, 0)
        );
        let lmr = d::DAT_LMR_TRIPLET::default();
        let mut lmrs = [lmr];
        let cookie = d::DAT_DTO_COOKIE { as_64: 1 };
        assert_eq!(
            p.ep_post_send_func.unwrap()(g, 1, lmrs.as_mut_ptr(), cookie, 0),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
        // NULL handles are invalid too.
        assert_eq!(
            p.ep_free_func.unwrap()(core::ptr::null_mut()),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
    }
}

#[test]
fn null_pointers_and_unknown_names_are_rejected_with_their_argument_number() {
    let p = provider();
    let mut evd: d::DAT_EVD_HANDLE = core::ptr::null_mut();
    let mut ia: d::DAT_IA_HANDLE = core::ptr::null_mut();
    // SAFETY: NULL and valid out-pointers, as a consumer may pass them; the extension handler
    // gets this test's argument block (its pointers all NULL).
    unsafe {
        assert_eq!(
            p.ia_open_func.unwrap()(core::ptr::null_mut(), 8, &mut evd, &mut ia),
            arg(1)
        );
        assert_eq!(
            p.ia_open_func.unwrap()(
                c"dr-test".as_ptr() as *mut _,
                8,
                core::ptr::null_mut(),
                &mut ia
            ),
            arg(3)
        );
        assert_eq!(
            p.ia_open_func.unwrap()(
                c"dr-test".as_ptr() as *mut _,
                8,
                &mut evd,
                core::ptr::null_mut()
            ),
            arg(4)
        );
        // async_evd_min_qlen: below 1, or above max_evd_qlen, before any profile is read.
        for qlen in [-1, 0, crate::dat::ia_attr::MAX_EVD_QLEN as i32 + 1] {
            assert_eq!(
                p.ia_open_func.unwrap()(c"dr-test".as_ptr() as *mut _, qlen, &mut evd, &mut ia),
                arg(2),
                "{qlen}"
            );
        }
        // A name never registered by dat_provider_init.
        assert_eq!(
            p.ia_open_func.unwrap()(c"no-such-ia".as_ptr() as *mut _, 8, &mut evd, &mut ia),
            err(d::DAT_PROVIDER_NOT_FOUND, 0)
        );
        // The extension handler: a garbage EP and a NULL argument block.
        let ext = d::shim_dat_ext_args::default();
        assert_eq!(
            super::ext::handler_for_tests(garbage(), &ext),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );
    }
}

#[test]
fn a_panic_inside_an_entry_becomes_internal_error() {
    let code = super::codes::guard(|| panic!("boom"));
    assert_eq!(code, err(d::DAT_INTERNAL_ERROR, 0));
}

/// An IA over an in-memory cable (no peer), registered as a C handle of `p`.
fn in_memory_ia(p: &'static d::DAT_PROVIDER) -> (d::DAT_IA_HANDLE, std::sync::Arc<IaState>) {
    let (io, _other) = crate::engine::channel_io::ChannelIo::pair(256);
    in_memory_ia_on(p, io, 1)
}

/// An IA on one end of an in-memory cable, with address 10.34.0.`host`.
fn in_memory_ia_on(
    p: &'static d::DAT_PROVIDER,
    io: crate::engine::channel_io::ChannelIo,
    host: u8,
) -> (d::DAT_IA_HANDLE, std::sync::Arc<IaState>) {
    let ia = crate::dat::Ia::open_with(
        crate::dat::IaConfig {
            mac: crate::wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 0x10 + host]),
            address: crate::config::PortAddresses::v4(std::net::Ipv4Addr::new(10, 34, 0, host), 24)
                .expect("a host address on its prefix"),
            routes: Default::default(),
            dscp: 0,
            cm: Default::default(),
            congestion: Default::default(),
            mtu: 1500,
            shards: 1,
            engine: crate::engine::runtime::EngineConfig {
                progress: crate::config::Progress::Inline,
                ..Default::default()
            },
        },
        vec![Box::new(io)],
    )
    .expect("in-memory IA");
    let state = std::sync::Arc::new(IaState::new(
        p as *const _ as usize,
        "dr-mem",
        "mem",
        ia,
        1024,
    ));
    let o = handles::insert(p, Kind::Ia, state.clone(), |_| Body::Ia);
    state
        .handle
        .store(o.handle, std::sync::atomic::Ordering::Relaxed);
    (o.handle as d::DAT_IA_HANDLE, state)
}

fn ok(code: d::DAT_RETURN) {
    assert_eq!(code, d::DAT_SUCCESS, "{code:#x}");
}

#[test]
fn ep_modify_and_rmr_bind_through_the_c_table_on_an_in_memory_ia() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    // SAFETY (all calls below): the entries are this provider's, with live handles and
    // pointers to local storage, as a consumer would call them.
    unsafe {
        // ia_query reports RMRs.
        let mut ia_attr = d::DAT_IA_ATTR::default();
        let mut async_evd = null;
        ok(p.ia_query_func.unwrap()(
            ia,
            &mut async_evd,
            0,
            &mut ia_attr,
            0,
            null as _,
        ));
        assert!(ia_attr.max_rmrs > 0);

        let mut pz = null;
        ok(p.pz_create_func.unwrap()(ia, &mut pz));
        let dto = d::DAT_EVD_DTO_FLAG | d::DAT_EVD_RMR_BIND_FLAG;
        let (mut recv, mut req, mut req2, mut conn) = (null, null, null, null);
        ok(p.evd_create_func.unwrap()(ia, 16, null, dto, &mut recv));
        ok(p.evd_create_func.unwrap()(ia, 16, null, dto, &mut req));
        ok(p.evd_create_func.unwrap()(ia, 16, null, dto, &mut req2));
        ok(p.evd_create_func.unwrap()(
            ia,
            16,
            null,
            d::DAT_EVD_CONNECTION_FLAG,
            &mut conn,
        ));
        let mut ep = null;
        ok(p.ep_create_func.unwrap()(
            ia,
            pz,
            recv,
            req,
            conn,
            core::ptr::null(),
            &mut ep,
        ));
        let modify = p.ep_modify_func.unwrap();
        let query = |ep| {
            let mut q = d::DAT_EP_PARAM::default();
            ok(p.ep_query_func.unwrap()(ep, 0, &mut q));
            q
        };
        let before = query(ep);

        // dat_ep_modify: mask 0 changes nothing; unmodifiable or unknown bits are argument 2;
        // NULL parameters argument 3; a negative count argument 3.
        let mut param = before;
        ok(modify(ep, 0, &param));
        assert_eq!(modify(ep, 0x01, &param), arg(2), "IA handle");
        assert_eq!(modify(ep, 0x0800, &param), arg(2), "SRQ handle");
        assert_eq!(modify(ep, 1 << 40, &param), arg(2), "unknown bit");
        assert_eq!(modify(ep, 0x0008_0000, core::ptr::null()), arg(3));
        param.ep_attr.max_request_dtos = -1;
        assert_eq!(modify(ep, 0x0008_0000, &param), arg(3));
        // Every modified attribute is checked against the limits dat_ia_query reports.
        let mut limits = d::DAT_IA_ATTR::default();
        ok(p.ia_query_func.unwrap()(
            ia,
            core::ptr::null_mut(),
            u64::MAX,
            &mut limits,
            0,
            core::ptr::null_mut(),
        ));
        let over = |f: fn(&mut d::DAT_EP_ATTR, i32), v: i32| {
            let mut bad = before;
            f(&mut bad.ep_attr, v);
            bad
        };
        for (mask, f, max, what) in [
            (
                0x0008_0000u64,
                (|a: &mut d::DAT_EP_ATTR, v| a.max_request_dtos = v) as fn(&mut _, i32),
                limits.max_dto_per_ep,
                "request DTOs",
            ),
            (
                0x0004_0000,
                |a, v| a.max_recv_dtos = v,
                limits.max_dto_per_ep,
                "recv DTOs",
            ),
            (
                0x0020_0000,
                |a, v| a.max_request_iov = v,
                limits.max_iov_segments_per_dto,
                "request IOVs",
            ),
            (
                0x0010_0000,
                |a, v| a.max_recv_iov = v,
                limits.max_iov_segments_per_dto,
                "recv IOVs",
            ),
            (
                0x0040_0000,
                |a, v| a.max_rdma_read_in = v,
                limits.max_rdma_read_in,
                "reads in",
            ),
            (
                0x0080_0000,
                |a, v| a.max_rdma_read_out = v,
                limits.max_rdma_read_out,
                "reads out",
            ),
            (
                0x0200_0000,
                |a, v| a.max_rdma_read_iov = v,
                limits.max_iov_segments_per_rdma_read,
                "read IOVs",
            ),
            (
                0x0400_0000,
                |a, v| a.max_rdma_write_iov = v,
                limits.max_iov_segments_per_rdma_write,
                "write IOVs",
            ),
        ] {
            assert!(max > 0, "{what}: limit {max}");
            assert_eq!(
                modify(ep, mask, &over(f, max + 1)),
                arg(3),
                "{what} above the limit"
            );
            ok(modify(ep, mask, &over(f, max)));
            ok(modify(ep, mask, &before));
        }
        let mut big = before;
        big.ep_attr.max_rdma_size = limits.max_rdma_size + 1;
        assert_eq!(
            modify(ep, 0x0000_4000, &big),
            arg(3),
            "RDMA size above the limit"
        );
        big.ep_attr.max_message_size = limits.max_message_size + 1;
        assert_eq!(
            modify(ep, 0x0000_2000, &big),
            arg(3),
            "message size above the limit"
        );
        param = before;
        assert_eq!(
            modify(garbage(), 0, &param),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EP)
        );

        // Only masked fields change: request DTOs and the request EVD.
        param.ep_attr.max_request_dtos = 64;
        param.ep_attr.max_recv_dtos = 7;
        param.request_evd_handle = req2;
        param.recv_evd_handle = null;
        ok(modify(ep, 0x0008_0000 | 0x0200, &param));
        let after = query(ep);
        assert_eq!(after.ep_attr.max_request_dtos, 64);
        assert_eq!(after.ep_attr.max_recv_dtos, before.ep_attr.max_recv_dtos);
        assert_eq!(after.request_evd_handle, req2);
        assert_eq!(after.recv_evd_handle, recv);
        // A garbage, wrong-type or NULL-where-needed handle inside ep_param is an invalid
        // parameter (argument 3), not DAT_INVALID_HANDLE (that is ep_handle's); nothing changed.
        for (mask, field, h, what) in [
            (0x0200u64, 0, garbage(), "garbage request EVD"),
            (0x0200, 0, pz, "a PZ as request EVD"),
            (0x0100, 1, ep, "an EP as recv EVD"),
            (0x0400, 2, pz, "a PZ as connect EVD"),
            (0x0080, 3, req2, "an EVD as PZ"),
            (0x0080, 3, garbage(), "garbage PZ"),
            (0x0080, 3, null, "NULL PZ"),
        ] {
            let mut bad = param;
            match field {
                0 => bad.request_evd_handle = h,
                1 => bad.recv_evd_handle = h,
                2 => bad.connect_evd_handle = h,
                _ => bad.pz_handle = h,
            }
            assert_eq!(modify(ep, mask, &bad), arg(3), "{what}");
        }
        assert_eq!(query(ep).request_evd_handle, req2);
        assert_eq!(query(ep).pz_handle, before.pz_handle);

        // RMR: bind a window over part of an LMR; the completion is an RMR bind event on the
        // EP's (modified) request EVD.
        let mut buf = vec![0u8; 4096];
        let privs = d::DAT_MEM_PRIV_LOCAL_WRITE_FLAG
            | d::DAT_MEM_PRIV_REMOTE_READ_FLAG
            | d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        let (mut lmr, mut lkey, mut rkey, mut size, mut addr) = (null, 0, 0, 0, 0);
        ok(p.lmr_create_func.unwrap()(
            ia,
            d::DAT_MEM_TYPE_VIRTUAL,
            d::DAT_REGION_DESCRIPTION {
                for_va: buf.as_mut_ptr() as _,
            },
            buf.len() as u64,
            pz,
            privs,
            d::DAT_VA_TYPE_VA,
            &mut lmr,
            &mut lkey,
            &mut rkey,
            &mut size,
            &mut addr,
        ));
        // dat_lmr_query reports what the Rust LMR holds: the privileges as asked, the
        // address and contexts of the registration.
        let mut lp = d::DAT_LMR_PARAM::default();
        ok(p.lmr_query_func.unwrap()(
            lmr,
            d::DAT_LMR_FIELD_ALL,
            &mut lp,
        ));
        assert_eq!(lp.mem_priv, privs);
        assert_eq!((lp.length, lp.registered_address), (4096, addr));
        assert_eq!(lp.region_desc.for_va as u64, buf.as_ptr() as u64);
        assert_eq!(
            (lp.lmr_context, lp.rmr_context, lp.pz_handle),
            (lkey, rkey, pz)
        );
        assert_eq!(lp.mem_type, d::DAT_MEM_TYPE_VIRTUAL);
        let mut rmr = null;
        assert_eq!(
            p.rmr_create_func.unwrap()(pz, core::ptr::null_mut()),
            arg(2)
        );
        ok(p.rmr_create_func.unwrap()(pz, &mut rmr));
        let bind = p.rmr_bind_func.unwrap();
        let triplet = d::DAT_LMR_TRIPLET {
            lmr_context: lkey,
            virtual_address: addr + 1024,
            segment_length: 512,
        };
        let cookie = d::DAT_RMR_COOKIE { as_64: 0x77 };
        let mut ctx = 0;
        let rw = d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        assert_eq!(
            bind(
                rmr,
                lmr,
                core::ptr::null(),
                rw,
                d::DAT_VA_TYPE_VA,
                ep,
                cookie,
                0,
                &mut ctx
            ),
            arg(3)
        );
        assert_eq!(
            bind(
                rmr,
                lmr,
                &triplet,
                rw,
                d::DAT_VA_TYPE_VA,
                ep,
                cookie,
                0,
                core::ptr::null_mut()
            ),
            arg(9)
        );
        assert_eq!(
            bind(
                garbage(),
                lmr,
                &triplet,
                rw,
                d::DAT_VA_TYPE_VA,
                ep,
                cookie,
                0,
                &mut ctx
            ),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_RMR)
        );
        let outside = d::DAT_LMR_TRIPLET {
            virtual_address: addr + 4000,
            ..triplet
        };
        assert_eq!(
            bind(
                rmr,
                lmr,
                &outside,
                rw,
                d::DAT_VA_TYPE_VA,
                ep,
                cookie,
                0,
                &mut ctx
            ),
            arg(3)
        );
        ok(bind(
            rmr,
            lmr,
            &triplet,
            rw,
            d::DAT_VA_TYPE_VA,
            ep,
            cookie,
            0,
            &mut ctx,
        ));
        assert_ne!(ctx, 0);
        assert_ne!(ctx, rkey, "the window has its own key");
        let mut ev = d::DAT_EVENT::default();
        ok(p.evd_dequeue_func.unwrap()(req2, &mut ev));
        assert_eq!(ev.event_number, d::DAT_RMR_BIND_COMPLETION_EVENT);
        let data = ev.event_data.rmr_completion_event_data;
        assert_eq!(data.rmr_handle, rmr);
        assert_eq!(data.user_cookie.as_64, 0x77);
        assert_eq!(data.status, d::DAT_DTO_SUCCESS);
        assert_eq!(
            p.evd_dequeue_func.unwrap()(req, &mut ev),
            d::DAT_QUEUE_EMPTY
        );
        let mut rq = d::DAT_RMR_PARAM::default();
        ok(p.rmr_query_func.unwrap()(rmr, 0, &mut rq));
        assert_eq!(rq.rmr_context, ctx);
        assert_eq!(rq.lmr_triplet.virtual_address, addr + 1024);
        assert_eq!(rq.lmr_triplet.segment_length, 512);
        assert_eq!(rq.mem_priv, rw);
        // The bound LMR cannot be freed; unbinding (NULL LMR) releases it.
        assert_eq!(
            p.lmr_free_func.unwrap()(lmr),
            err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_LMR_IN_USE)
        );
        let suppress = d::DAT_COMPLETION_SUPPRESS_FLAG;
        ok(bind(
            rmr,
            null,
            core::ptr::null(),
            0,
            d::DAT_VA_TYPE_VA,
            ep,
            cookie,
            suppress,
            &mut ctx,
        ));
        assert_eq!(
            p.evd_dequeue_func.unwrap()(req2, &mut ev),
            d::DAT_QUEUE_EMPTY
        );
        ok(p.rmr_query_func.unwrap()(rmr, 0, &mut rq));
        assert_eq!(rq.rmr_context, 0);
        ok(p.rmr_free_func.unwrap()(rmr));
        ok(p.lmr_free_func.unwrap()(lmr));

        // Wrong state: connecting (no peer answers) makes the EP ACTIVE CONNECTION PENDING.
        let peer = super::state::SockAddr::new(std::net::Ipv4Addr::new(10, 34, 0, 2));
        ok(p.ep_connect_func.unwrap()(
            ep,
            peer.as_dat(),
            45248,
            d::DAT_TIMEOUT::MAX,
            0,
            null,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        param.ep_attr.max_request_dtos = 32;
        assert_eq!(
            modify(ep, 0x0008_0000, &param),
            err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_ACTCONNPENDING)
        );
        assert_eq!(query(ep).ep_attr.max_request_dtos, 64);
    }
    drop(state.take());
}

/// dat_ep_create's attributes go to the Rust EP, which keeps the only copy: what only the C
/// form can get wrong is refused as argument 6, the limits are the Rust EP's (argument 6
/// too), zeros read as the OFA providers read them, and dat_ep_query reports the EP's own.
#[test]
fn ep_attributes_are_the_rust_eps_through_the_c_table() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    // SAFETY (all calls below): the entries are this provider's, with live handles and
    // pointers to local storage, as a consumer would call them.
    unsafe {
        let mut pz = null;
        ok(p.pz_create_func.unwrap()(ia, &mut pz));
        let mut evd = null;
        ok(p.evd_create_func.unwrap()(
            ia,
            64,
            null,
            d::DAT_EVD_DTO_FLAG,
            &mut evd,
        ));
        let good = d::DAT_EP_ATTR {
            service_type: d::DAT_SERVICE_TYPE_RC,
            qos: d::DAT_QOS_BEST_EFFORT,
            max_recv_dtos: 8,
            max_request_dtos: 8,
            max_recv_iov: 2,
            max_request_iov: 3,
            max_rdma_read_in: 2,
            max_rdma_read_out: 2,
            ..Default::default()
        };
        let create = |a: &d::DAT_EP_ATTR, out: &mut d::DAT_EP_HANDLE| {
            p.ep_create_func.unwrap()(ia, pz, evd, evd, null, a, out)
        };
        for (what, bad) in [
            (
                "negative recv DTOs",
                d::DAT_EP_ATTR {
                    max_recv_dtos: -1,
                    ..good
                },
            ),
            (
                "negative read depth",
                d::DAT_EP_ATTR {
                    max_rdma_read_in: -1,
                    ..good
                },
            ),
            (
                "read depth past a byte",
                d::DAT_EP_ATTR {
                    max_rdma_read_out: 300,
                    ..good
                },
            ),
            (
                "not RC",
                d::DAT_EP_ATTR {
                    service_type: d::DAT_SERVICE_TYPE_RC + 1,
                    ..good
                },
            ),
            (
                "two QoS classes at once",
                d::DAT_EP_ATTR {
                    qos: d::DAT_QOS_LOW_LATENCY | d::DAT_QOS_PREMIUM,
                    ..good
                },
            ),
            (
                "unknown flags",
                d::DAT_EP_ATTR {
                    request_completion_flags: 0x400,
                    ..good
                },
            ),
            (
                "DTOs past the IA's",
                d::DAT_EP_ATTR {
                    max_request_dtos: 1 << 20,
                    ..good
                },
            ),
            (
                "IOVs past the IA's",
                d::DAT_EP_ATTR {
                    max_recv_iov: 1000,
                    ..good
                },
            ),
        ] {
            let mut ep = null;
            assert_eq!(
                create(&bad, &mut ep),
                err(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG6),
                "{what}"
            );
            assert!(ep.is_null(), "{what}: no EP");
        }
        let mut ep = null;
        ok(create(&good, &mut ep));
        let mut q = d::DAT_EP_PARAM::default();
        ok(p.ep_query_func.unwrap()(ep, 0, &mut q));
        let a = q.ep_attr;
        assert_eq!(
            a.max_message_size,
            crate::transport::MAX_MSG_SIZE,
            "0: the maximum"
        );
        assert_eq!(a.max_rdma_size, crate::transport::MAX_MSG_SIZE);
        assert_eq!(
            (a.max_rdma_read_iov, a.max_rdma_write_iov),
            (3, 3),
            "0: the request IOVs"
        );
        assert_eq!(
            (a.max_recv_dtos, a.max_recv_iov, a.max_rdma_read_in),
            (8, 2, 2)
        );
        // dat_ep_modify changes the Rust EP's, which the next query reports.
        let mut m = q;
        m.ep_attr.max_request_dtos = 16;
        ok(p.ep_modify_func.unwrap()(
            ep,
            crate::dat::ep_attr::EpParamMask::MAX_REQUEST_DTOS.bits(),
            &m,
        ));
        ok(p.ep_query_func.unwrap()(ep, 0, &mut q));
        assert_eq!(q.ep_attr.max_request_dtos, 16);
        assert_eq!(q.ep_attr.qos, d::DAT_QOS_BEST_EFFORT);
        // QoS: any one class, at creation or by dat_ep_modify before a connection.
        m.ep_attr.qos = d::DAT_QOS_ECONOMY;
        ok(p.ep_modify_func.unwrap()(
            ep,
            crate::dat::ep_attr::EpParamMask::QOS.bits(),
            &m,
        ));
        ok(p.ep_query_func.unwrap()(ep, 0, &mut q));
        assert_eq!(q.ep_attr.qos, d::DAT_QOS_ECONOMY);
        m.ep_attr.qos = 0x10;
        assert_eq!(
            p.ep_modify_func.unwrap()(ep, crate::dat::ep_attr::EpParamMask::QOS.bits(), &m),
            err(d::DAT_INVALID_PARAMETER, d::DAT_INVALID_ARG3)
        );
        ok(p.ep_free_func.unwrap()(ep));
        let low_latency = d::DAT_EP_ATTR {
            qos: d::DAT_QOS_LOW_LATENCY,
            ..good
        };
        ok(create(&low_latency, &mut ep));
        ok(p.ep_query_func.unwrap()(ep, 0, &mut q));
        assert_eq!(q.ep_attr.qos, d::DAT_QOS_LOW_LATENCY);
        ok(p.ep_free_func.unwrap()(ep));
        ok(p.evd_free_func.unwrap()(evd));
        ok(p.pz_free_func.unwrap()(pz));
    }
    drop(state.take());
}

/// The C CNO is the Rust CNO: dat_cno_wait names the EVD handle that got an event, once per
/// arrival (an event left queued does not fire it again until the EVD was emptied); a
/// disabled EVD does not fire it; dat_evd_query names the CNO handle; dat_cno_free is refused
/// while an EVD is attached.
#[test]
fn a_cno_names_the_evd_handle_once_per_arrival_through_the_c_table() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    let soft = |n: usize| {
        let mut ev = d::DAT_EVENT::default();
        ev.event_number = d::DAT_SOFTWARE_EVENT;
        ev.event_data.software_event_data.pointer = n as *mut core::ffi::c_void;
        ev
    };
    // SAFETY (all calls below): the entries are this provider's, with live handles and
    // pointers to local storage, as a consumer would call them.
    unsafe {
        let agent = d::DAT_OS_WAIT_PROXY_AGENT::default();
        let mut cno = null;
        ok(p.cno_create_func.unwrap()(ia, agent, &mut cno));
        let (mut e1, mut e2) = (null, null);
        let sw = d::DAT_EVD_SOFTWARE_FLAG;
        ok(p.evd_create_func.unwrap()(ia, 8, cno, sw, &mut e1));
        ok(p.evd_create_func.unwrap()(ia, 8, null, sw, &mut e2));
        ok(p.evd_modify_cno_func.unwrap()(e2, cno));
        let mut q = d::DAT_EVD_PARAM::default();
        ok(p.evd_query_func.unwrap()(e2, 0, &mut q));
        assert_eq!(q.cno_handle, cno);
        let wait = |timeout_us: u32| {
            let mut got = null;
            let rc = p.cno_wait_func.unwrap()(cno, timeout_us, &mut got);
            (rc, got)
        };
        let expired = err(d::DAT_TIMEOUT_EXPIRED, 0);
        assert_eq!(wait(1000).0, expired);
        ok(p.evd_post_se_func.unwrap()(e2, &soft(1)));
        assert_eq!(wait(1000), (d::DAT_SUCCESS, e2));
        // Still queued: reported already.
        assert_eq!(wait(1000).0, expired);
        let mut ev = d::DAT_EVENT::default();
        ok(p.evd_dequeue_func.unwrap()(e2, &mut ev));
        assert_eq!(ev.event_data.software_event_data.pointer as usize, 1);
        // Emptied, then a new arrival: reported again.
        ok(p.evd_post_se_func.unwrap()(e2, &soft(2)));
        assert_eq!(wait(1000), (d::DAT_SUCCESS, e2));
        ok(p.evd_dequeue_func.unwrap()(e2, &mut ev));
        // A disabled EVD does not fire its CNO until enabled.
        ok(p.evd_disable_func.unwrap()(e1));
        ok(p.evd_post_se_func.unwrap()(e1, &soft(3)));
        assert_eq!(wait(1000).0, expired);
        ok(p.evd_enable_func.unwrap()(e1));
        assert_eq!(wait(1000), (d::DAT_SUCCESS, e1));
        ok(p.evd_dequeue_func.unwrap()(e1, &mut ev));
        // Detached: no CNO named, and no wake-up.
        ok(p.evd_modify_cno_func.unwrap()(e2, null));
        ok(p.evd_query_func.unwrap()(e2, 0, &mut q));
        assert!(q.cno_handle.is_null());
        ok(p.evd_post_se_func.unwrap()(e2, &soft(4)));
        assert_eq!(wait(1000).0, expired);
        assert_eq!(
            p.cno_free_func.unwrap()(cno),
            err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_CNO_IN_USE)
        );
        ok(p.evd_free_func.unwrap()(e1));
        ok(p.cno_free_func.unwrap()(cno));
        assert!(state.cnos.lock().unwrap().is_empty());
        ok(p.evd_dequeue_func.unwrap()(e2, &mut ev));
        ok(p.evd_free_func.unwrap()(e2));
    }
    drop(state.take());
}

/// libdat2 reads the first word of every non-NULL handle and calls through it: a freed
/// handle's header must still hold the provider, so that a stale handle reaches the provider
/// and is answered DAT_INVALID_HANDLE instead of jumping through allocator metadata.
#[test]
fn a_freed_handle_still_points_at_the_provider_and_is_invalid() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, _state) = in_memory_ia(p);
    let mut pzs = Vec::new();
    // SAFETY: the provider's own entries with live or freed handles and local out-pointers;
    // a freed handle's header is never given back to the allocator (handles::remove), so
    // reading its first word is reading memory the provider keeps.
    unsafe {
        for _ in 0..64 {
            let mut pz = core::ptr::null_mut();
            ok(p.pz_create_func.unwrap()(ia, &mut pz));
            pzs.push(pz);
        }
        for &pz in &pzs {
            ok(p.pz_free_func.unwrap()(pz));
        }
        // Other allocations in between must not overwrite a quarantined header.
        let noise: Vec<Vec<u8>> = (0..256).map(|i| vec![0xee; 8 + i % 24]).collect();
        for &pz in &pzs {
            assert_eq!(
                (pz as *const usize).read(),
                p as *const d::DAT_PROVIDER as usize,
                "a freed header lost its provider"
            );
            assert_eq!(
                p.pz_free_func.unwrap()(pz),
                err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_PZ)
            );
        }
        drop(noise);
        // New handles do not reuse a recently freed header.
        let mut fresh = core::ptr::null_mut();
        ok(p.pz_create_func.unwrap()(ia, &mut fresh));
        assert!(!pzs.contains(&fresh));
        ok(p.pz_free_func.unwrap()(fresh));
    }
}

/// dat_ep_connect's timeout is in microseconds; DAT_TIMEOUT_INFINITE (~0) leaves the outcome
/// to the CM's retries.
#[test]
fn connect_timeout_is_microseconds_and_infinite_is_none() {
    assert_eq!(super::ep::connect_timeout(u32::MAX), None);
    assert_eq!(
        super::ep::connect_timeout(500_000),
        Some(std::time::Duration::from_millis(500))
    );
    assert_eq!(
        super::ep::connect_timeout(0),
        Some(std::time::Duration::ZERO)
    );
}

/// The next event of `evd`, driving the IAs `drive` (inline progress) meanwhile.
///
/// # Safety
/// `evd` is a live EVD handle of `p`.
unsafe fn next_event(
    p: &d::DAT_PROVIDER,
    evd: d::DAT_EVD_HANDLE,
    drive: &[&std::sync::Arc<IaState>],
) -> d::DAT_EVENT {
    let t0 = std::time::Instant::now();
    loop {
        for s in drive {
            if let Some(ia) = s.ia().as_ref() {
                ia.progress();
            }
        }
        let mut ev = d::DAT_EVENT::default();
        // SAFETY: the caller's EVD handle, a local event to fill in.
        if unsafe { p.evd_dequeue_func.unwrap()(evd, &mut ev) } == d::DAT_SUCCESS {
            return ev;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(30),
            "no event"
        );
    }
}

#[test]
fn a_psp_with_the_provider_flag_creates_the_ep_of_each_request() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (io_a, io_b) = crate::engine::channel_io::ChannelIo::pair(256);
    let (ia_a, sa) = in_memory_ia_on(p, io_a, 1);
    let (ia_b, sb) = in_memory_ia_on(p, io_b, 2);
    let null = core::ptr::null_mut();
    let both = [&sa, &sb];
    // SAFETY (all calls below): the entries are this provider's, with live handles and
    // pointers to local storage, as a consumer would call them.
    unsafe {
        let evd = |ia, flags| {
            let mut e = null;
            ok(p.evd_create_func.unwrap()(ia, 16, null, flags, &mut e));
            e
        };
        let pz = |ia| {
            let mut z = null;
            ok(p.pz_create_func.unwrap()(ia, &mut z));
            z
        };
        let query = |ep| {
            let mut q = d::DAT_EP_PARAM::default();
            let r = p.ep_query_func.unwrap()(ep, 0, &mut q);
            (r, q)
        };
        // B listens with DAT_PSP_PROVIDER_FLAG and says it creates EPs when asked.
        let mut prov = d::DAT_PROVIDER_ATTR::default();
        ok(p.ia_query_func.unwrap()(
            ia_b,
            null as _,
            0,
            null as _,
            u64::MAX,
            &mut prov,
        ));
        assert_eq!(prov.ep_creator, d::DAT_PSP_CREATES_EP_IFASKED);
        let cr_evd = evd(ia_b, d::DAT_EVD_CR_FLAG);
        let mut psp = null;
        ok(p.psp_create_func.unwrap()(
            ia_b,
            45248,
            cr_evd,
            d::DAT_PSP_PROVIDER_FLAG,
            &mut psp,
        ));
        let mut pp = d::DAT_PSP_PARAM::default();
        ok(p.psp_query_func.unwrap()(psp, 0, &mut pp));
        assert_eq!(
            (pp.conn_qual, pp.psp_flags),
            (45248, d::DAT_PSP_PROVIDER_FLAG)
        );

        // A connects twice: the first request is accepted, the second rejected.
        let (pz_a, conn_a) = (pz(ia_a), evd(ia_a, d::DAT_EVD_CONNECTION_FLAG));
        let dto_a = evd(ia_a, d::DAT_EVD_DTO_FLAG);
        let peer = super::state::SockAddr::new(std::net::Ipv4Addr::new(10, 34, 0, 2));
        let mut eps_a = [null, null];
        for ep in eps_a.iter_mut() {
            ok(p.ep_create_func.unwrap()(
                ia_a,
                pz_a,
                dto_a,
                dto_a,
                conn_a,
                core::ptr::null(),
                ep,
            ));
        }
        let request = |ep_a| {
            ok(p.ep_connect_func.unwrap()(
                ep_a,
                peer.as_dat(),
                45248,
                d::DAT_TIMEOUT::MAX,
                0,
                null,
                d::DAT_QOS_BEST_EFFORT,
                d::DAT_CONNECT_DEFAULT_FLAG,
            ));
            let ev = next_event(p, cr_evd, &both);
            assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
            let cr = ev.event_data.cr_arrival_event_data.cr_handle;
            let mut cp = d::DAT_CR_PARAM::default();
            ok(p.cr_query_func.unwrap()(cr, 0, &mut cp));
            assert!(!cp.local_ep_handle.is_null(), "the provider created an EP");
            (cr, cp.local_ep_handle)
        };

        let (cr, ep_b) = request(eps_a[0]);
        let (r, q) = query(ep_b);
        ok(r);
        assert_eq!(q.ep_state, d::DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING);
        assert!(q.pz_handle.is_null() && q.connect_evd_handle.is_null());
        assert_eq!(q.ia_handle, ia_b);
        // The consumer gives it its PZ and EVDs, then accepts on it (NULL: the CR's EP).
        let mut param = q;
        param.pz_handle = pz(ia_b);
        param.recv_evd_handle = evd(ia_b, d::DAT_EVD_DTO_FLAG);
        param.request_evd_handle = param.recv_evd_handle;
        param.connect_evd_handle = evd(ia_b, d::DAT_EVD_CONNECTION_FLAG);
        ok(p.ep_modify_func.unwrap()(
            ep_b,
            0x80 | 0x100 | 0x200 | 0x400,
            &param,
        ));
        assert_eq!(query(ep_b).1.pz_handle, param.pz_handle);
        ok(p.cr_accept_func.unwrap()(cr, null, 0, null));
        let ev = next_event(p, param.connect_evd_handle, &both);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_EVENT_ESTABLISHED);
        assert_eq!(ev.event_data.connect_event_data.ep_handle, ep_b);
        let ev = next_event(p, conn_a, &both);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_EVENT_ESTABLISHED);
        assert_eq!(query(ep_b).1.ep_state, d::DAT_EP_STATE_CONNECTED);

        // A rejected request's EP is destroyed by the provider.
        let (cr, ep_b2) = request(eps_a[1]);
        assert_ne!(ep_b2, ep_b);
        ok(p.cr_reject_func.unwrap()(cr, 0, null));
        assert_eq!(query(ep_b2).0, Kind::Ep.invalid());
        let ev = next_event(p, conn_a, &both);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_EVENT_PEER_REJECTED);
    }
    drop((sa.take(), sb.take()));
}

/// dat_lmr_sync_rdma_read / _write are the Rust `Lmr::sync_rdma_*`: a range inside a
/// registered LMR syncs, one past its end or under another key is argument 2, no triplets
/// argument 3 (DAT 2.0 §6.5.5).
#[test]
fn lmr_sync_checks_the_ranges_of_the_rust_lmr_through_the_c_table() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    let mut buf = vec![0u8; 4096];
    // SAFETY (all calls): this provider's entries with live handles and pointers to local
    // storage (the LMR's buffer outlives the IA).
    unsafe {
        let mut pz = null;
        ok(p.pz_create_func.unwrap()(ia, &mut pz));
        let (mut lmr, mut lkey, mut rkey, mut size, mut addr) = (null, 0, 0, 0, 0);
        ok(p.lmr_create_func.unwrap()(
            ia,
            d::DAT_MEM_TYPE_VIRTUAL,
            d::DAT_REGION_DESCRIPTION {
                for_va: buf.as_mut_ptr() as _,
            },
            buf.len() as u64,
            pz,
            d::DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
            d::DAT_VA_TYPE_VA,
            &mut lmr,
            &mut lkey,
            &mut rkey,
            &mut size,
            &mut addr,
        ));
        let t = |off: u64, len: u32, key: u32| d::DAT_LMR_TRIPLET {
            lmr_context: key,
            virtual_address: addr + off,
            segment_length: len,
        };
        for sync in [
            p.lmr_sync_rdma_read_func.unwrap(),
            p.lmr_sync_rdma_write_func.unwrap(),
        ] {
            let good = [t(0, 4096, lkey), t(100, 8, lkey)];
            ok(sync(ia, good.as_ptr(), 2));
            let past_end = [t(0, 8, lkey), t(4000, 97, lkey)];
            assert_eq!(sync(ia, past_end.as_ptr(), 2), arg(2));
            let other_key = [t(0, 8, lkey.wrapping_add(0x0010_0000))];
            assert_eq!(sync(ia, other_key.as_ptr(), 1), arg(2));
            assert_eq!(sync(ia, good.as_ptr(), 0), arg(3));
            assert_eq!(sync(ia, core::ptr::null(), 1), arg(2));
        }
        ok(p.lmr_free_func.unwrap()(lmr));
    }
    drop(state.take());
}

/// The LMR length limit is one rule (`ia_attr::check_lmr_length`): 0 bytes and more than
/// `max_lmr_block_size` are DAT_LENGTH_ERROR through both APIs, and dat_ia_query reports the
/// Rust limit, saturated to udat.h's 32-bit DAT_SEG_LENGTH.
#[test]
fn the_lmr_length_limit_is_the_rust_one_through_the_c_table() {
    use crate::dat::ia_attr::MAX_LMR_BLOCK_SIZE;
    use crate::dat::{DatError, Lmr, Pz};
    use crate::mem::access::Access;
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    {
        let g = state.ia();
        let ia_ref = g.as_ref().unwrap();
        assert_eq!(ia_ref.query().max_lmr_block_size, MAX_LMR_BLOCK_SIZE);
        let pz = Pz::create(ia_ref).unwrap();
        assert!(matches!(
            Lmr::create(&pz, 0, Access::LOCAL_WRITE).map(drop),
            Err(DatError::LengthError(_))
        ));
        assert!(Lmr::create(&pz, 64, Access::LOCAL_WRITE).is_ok());
    }
    let mut buf = vec![0u8; 64];
    // SAFETY (all calls): this provider's entries with live handles and pointers to local
    // storage (the LMR's buffer outlives the IA).
    unsafe {
        let mut attr = d::DAT_IA_ATTR::default();
        let mut evd = null;
        ok(p.ia_query_func.unwrap()(
            ia, &mut evd, 0, &mut attr, 0, null as _,
        ));
        assert_eq!(u64::from(attr.max_lmr_block_size), u64::from(u32::MAX));
        let mut pz = null;
        ok(p.pz_create_func.unwrap()(ia, &mut pz));
        let mut create = |len: u64, out: &mut d::DAT_LMR_HANDLE| {
            p.lmr_create_func.unwrap()(
                ia,
                d::DAT_MEM_TYPE_VIRTUAL,
                d::DAT_REGION_DESCRIPTION {
                    for_va: buf.as_mut_ptr() as _,
                },
                len,
                pz,
                d::DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
                d::DAT_VA_TYPE_VA,
                out,
                null as _,
                null as _,
                null as _,
                null as _,
            )
        };
        let mut lmr = null;
        for bad in [0, MAX_LMR_BLOCK_SIZE + 1, u64::MAX] {
            assert_eq!(create(bad, &mut lmr), err(d::DAT_LENGTH_ERROR, 0), "{bad}");
        }
        ok(create(64, &mut lmr));
        ok(p.lmr_free_func.unwrap()(lmr));
        // A region whose range wraps is refused by the memory table: DAT_INVALID_PARAMETER
        // (the Rust `lmr::registration_error`), not a resource shortage. Nothing is accessed.
        let wraps = p.lmr_create_func.unwrap()(
            ia,
            d::DAT_MEM_TYPE_VIRTUAL,
            d::DAT_REGION_DESCRIPTION {
                for_va: (usize::MAX - 15) as _,
            },
            64,
            pz,
            d::DAT_MEM_PRIV_LOCAL_WRITE_FLAG,
            d::DAT_VA_TYPE_VA,
            &mut lmr,
            null as _,
            null as _,
            null as _,
            null as _,
        );
        assert_eq!(wraps & 0x3fff_0000, d::DAT_INVALID_PARAMETER, "{wraps:#x}");
    }
    drop(state.take());
}

/// dat_psp_create_any is the Rust `Psp::create_any`: a qualifier of `Psp::ANY_RANGE`, a new one
/// each time (not the lowest free one again), what dat_psp_query reports; both PSP flags of
/// dat_psp_create(3DAT) are taken, others are argument 4.
#[test]
fn psp_create_any_is_the_rust_psps_choice_through_the_c_table() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let mut cr_evd = null;
        ok(p.evd_create_func.unwrap()(
            ia,
            16,
            null,
            d::DAT_EVD_CR_FLAG,
            &mut cr_evd,
        ));
        let any = p.psp_create_any_func.unwrap();
        let range = crate::dat::Psp::ANY_RANGE;
        let mut quals = Vec::new();
        for flags in [d::DAT_PSP_CONSUMER_FLAG, d::DAT_PSP_PROVIDER_FLAG] {
            let (mut qual, mut psp) = (0u64, null);
            ok(any(ia, &mut qual, cr_evd, flags, &mut psp));
            assert!(range.contains(&(qual as u16)) && qual <= 0xffff, "{qual}");
            let mut q = d::DAT_PSP_PARAM::default();
            ok(p.psp_query_func.unwrap()(psp, 0, &mut q));
            assert_eq!((q.conn_qual, q.psp_flags), (qual, flags));
            // Freed, its qualifier is free again; the next choice is another one.
            ok(p.psp_free_func.unwrap()(psp));
            quals.push(qual);
        }
        assert_ne!(quals[0], quals[1]);
        let (mut qual, mut psp) = (0u64, null);
        assert_eq!(any(ia, &mut qual, cr_evd, 7, &mut psp), arg(4));
    }
    drop(state.take());
}

/// dat_cr_query(3DAT) reports the Rust CR's remote end: `remote_ia_address_ptr` is
/// `Cr::remote_address` and `remote_port_qual` the requester's port, `Cr::remote_port` (the
/// C layer kept its own copy of the address and reported port 0). The request is put on the
/// CR EVD as the engine would, with a source port our own connects never send.
#[test]
fn cr_query_reports_the_remote_end_of_the_rust_cr_through_the_c_table() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let mut cr_evd = null;
        ok(p.evd_create_func.unwrap()(
            ia,
            16,
            null,
            d::DAT_EVD_CR_FLAG,
            &mut cr_evd,
        ));
        let mut psp = null;
        ok(p.psp_create_func.unwrap()(
            ia,
            45250,
            cr_evd,
            d::DAT_PSP_CONSUMER_FLAG,
            &mut psp,
        ));
        let o = handles::get(cr_evd, Kind::Evd).unwrap();
        let Body::Evd(e) = &o.body else {
            panic!("not an EVD")
        };
        let requester = std::net::Ipv4Addr::new(10, 34, 0, 9);
        let req = crate::engine::runtime::ConnRequest {
            id: crate::cm::CmId(77),
            port: 45250,
            src_ip: requester.into(),
            src_port: 40123,
            remote_qpn: 0x123,
            private_data: b"hello".to_vec(),
        };
        assert!(e
            .evd
            .inner
            .sink
            .queue
            .try_push(crate::engine::runtime::Event::Request(req))
            .is_ok());
        let ev = next_event(p, cr_evd, &[&state]);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let cr = ev.event_data.cr_arrival_event_data.cr_handle;
        let mut param = d::DAT_CR_PARAM::default();
        ok(p.cr_query_func.unwrap()(cr, 0, &mut param));
        let remote =
            (param.remote_ia_address_ptr as *const super::state::SockAddr).read_unaligned();
        assert_eq!(remote, super::state::SockAddr::new(requester));
        assert_eq!(param.remote_port_qual, 40123);
        assert_eq!(param.private_data_size, 5);
        // The CM never saw this request: the reject reaches no one, the handle goes anyway.
        let _ = p.cr_reject_func.unwrap()(cr, 0, null);
        ok(p.psp_free_func.unwrap()(psp));
    }
    drop(state.take());
}

/// The EVD rules of dat_evd_create / dat_evd_resize / dat_evd_wait / dat_evd_post_se are the
/// Rust `Evd`'s (`ia_attr::check_evd_qlen`, `Evd::create`, `Evd::wait`, `Evd::post_se`): the
/// Rust API refuses what the C table refuses, with the same codes. Before, only the C layer
/// refused a size above max_evd_qlen, the async flag or a zero wait threshold. (A wait on a
/// disabled EVD is still refused by the C layer alone: the Rust API waits.)
#[test]
fn evd_rules_are_the_rust_evds_in_both_apis() {
    use crate::dat::{DatError, Evd, EvdFlags, StateKind};
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    let max = crate::dat::ia_attr::MAX_EVD_QLEN as usize;
    let long = Some(std::time::Duration::from_secs(5));
    {
        let g = state.ia();
        let ia_ref = g.as_ref().unwrap();
        let arg_of = |r: Result<(), DatError>| match r {
            Err(DatError::InvalidArg { arg, .. }) => arg,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            arg_of(Evd::create(ia_ref, max + 1, EvdFlags::DTO).map(drop)),
            2
        );
        assert_eq!(arg_of(Evd::create(ia_ref, 0, EvdFlags::DTO).map(drop)), 2);
        let async_flags = EvdFlags::ASYNC | EvdFlags::DTO;
        assert_eq!(arg_of(Evd::create(ia_ref, 4, async_flags).map(drop)), 4);
        let e = Evd::create(ia_ref, max, EvdFlags::DTO).unwrap();
        assert_eq!(arg_of(e.resize(max + 1)), 2);
        assert_eq!(arg_of(e.wait(long, 0).map(drop)), 3);
        assert_eq!(arg_of(e.post_se(1)), 1);
        e.set_unwaitable();
        match e.wait(long, 1) {
            Err(DatError::InvalidStateOf {
                kind: StateKind::EvdUnwaitable,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let create = p.evd_create_func.unwrap();
        let mut evd = null;
        let big = max as i32 + 1;
        assert_eq!(create(ia, big, null, d::DAT_EVD_DTO_FLAG, &mut evd), arg(2));
        let async_flag = d::DAT_EVD_ASYNC_FLAG;
        assert_eq!(create(ia, 4, null, async_flag, &mut evd), arg(4));
        ok(create(ia, 4, null, d::DAT_EVD_DTO_FLAG, &mut evd));
        assert_eq!(p.evd_resize_func.unwrap()(evd, big), arg(2));
        let mut se = d::DAT_EVENT::default();
        // Not a software event: the event is argument 2.
        assert_eq!(p.evd_post_se_func.unwrap()(evd, &se), arg(2));
        // A software event on an EVD without DAT_EVD_SOFTWARE_FLAG: the EVD is argument 1.
        se.event_number = d::DAT_SOFTWARE_EVENT;
        assert_eq!(p.evd_post_se_func.unwrap()(evd, &se), arg(1));
        let (mut ev, mut n) = (d::DAT_EVENT::default(), 0);
        assert_eq!(
            p.evd_wait_func.unwrap()(evd, 5_000_000, 5, &mut ev, &mut n),
            arg(3)
        );
        // A disabled EVD is waited on like any other (only its CNO is silenced): the Rust
        // Evd::wait's rule, the software event ends the wait.
        ok(p.evd_disable_func.unwrap()(evd));
        assert_eq!(
            p.evd_wait_func.unwrap()(evd, 1_000, 1, &mut ev, &mut n),
            err(d::DAT_TIMEOUT_EXPIRED, 0)
        );
        ok(p.evd_free_func.unwrap()(evd));
    }
    drop(state.take());
}

/// dat_ia_close(DAT_CLOSE_GRACEFUL_FLAG) is refused while an object of the IA is open: the
/// Rust `Ia::can_close` rule (DAT_INVALID_STATE_IA_IN_USE), for a PZ and for a CNO alike;
/// once they are freed the close goes through and the handle is gone.
#[test]
fn a_graceful_ia_close_follows_the_rust_ias_rule_through_the_c_table() {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(provider()));
    let (ia, state) = in_memory_ia(p);
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let close = p.ia_close_func.unwrap();
        let in_use = err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_IA_IN_USE);
        let mut pz = null;
        ok(p.pz_create_func.unwrap()(ia, &mut pz));
        assert_eq!(close(ia, d::DAT_CLOSE_GRACEFUL_FLAG), in_use);
        ok(p.pz_free_func.unwrap()(pz));
        let mut cno = null;
        let agent = d::DAT_OS_WAIT_PROXY_AGENT::default();
        ok(p.cno_create_func.unwrap()(ia, agent, &mut cno));
        assert_eq!(close(ia, d::DAT_CLOSE_GRACEFUL_FLAG), in_use);
        ok(p.cno_free_func.unwrap()(cno));
        assert_eq!(close(ia, 7), arg(2));
        ok(close(ia, d::DAT_CLOSE_GRACEFUL_FLAG));
        assert_eq!(
            close(ia, d::DAT_CLOSE_GRACEFUL_FLAG),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_IA)
        );
    }
    drop(state.take());
}
