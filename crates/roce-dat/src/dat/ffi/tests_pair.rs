//! The provider table called as libdat2 would, over two in-memory IAs joined by a cable
//! (inline progress, driven by the test): the entries that map DAT 2.0 calls beyond the OFA
//! providers' — dat_srq_resize / dat_srq_set_lw, dat_cr_handoff, dat_ep_post_send_with_invalidate,
//! dat_ep_post_rdma_read_to_rmr, dat_rmr_create_for_ep.

use super::codes::{arg, err};
use super::state::{IaState, SockAddr};
use super::table;
use dat_sys as d;
use std::net::Ipv4Addr;
use std::sync::Arc;

const IP_A: Ipv4Addr = Ipv4Addr::new(10, 35, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 35, 0, 2);
const QUAL: u64 = 45248;
/// A qualifier wider than the CM's 16-bit port (dapltest listens on such): port 45249.
const OTHER_QUAL: u64 = 0x7_0000_b0c1;

fn ok(code: d::DAT_RETURN) {
    assert_eq!(code, d::DAT_SUCCESS, "{code:#x}");
}

struct Ias {
    p: &'static d::DAT_PROVIDER,
    a: (d::DAT_IA_HANDLE, d::DAT_EVD_HANDLE, Arc<IaState>),
    b: (d::DAT_IA_HANDLE, d::DAT_EVD_HANDLE, Arc<IaState>),
}

impl Ias {
    fn drive(&self) {
        for s in [&self.a.2, &self.b.2] {
            if let Some(ia) = s.ia().as_ref() {
                ia.progress();
            }
        }
    }

    /// The next event of `evd`, driving both IAs meanwhile (a hang guard, not a timing check).
    fn next(&self, evd: d::DAT_EVD_HANDLE) -> d::DAT_EVENT {
        let dequeue = self.p.evd_dequeue_func.unwrap();
        for _ in 0..200_000 {
            self.drive();
            let mut ev = d::DAT_EVENT::default();
            // SAFETY: a live EVD handle of this provider and local storage.
            match unsafe { dequeue(evd, &mut ev) } {
                d::DAT_SUCCESS => return ev,
                d::DAT_QUEUE_EMPTY => {}
                other => panic!("evd_dequeue: {other:#x}"),
            }
        }
        panic!("no event arrived");
    }

    /// Nothing on `evd` after driving both IAs a while.
    fn quiet(&self, evd: d::DAT_EVD_HANDLE) -> bool {
        for _ in 0..50 {
            self.drive();
        }
        let mut ev = d::DAT_EVENT::default();
        // SAFETY: as in `next`.
        unsafe { self.p.evd_dequeue_func.unwrap()(evd, &mut ev) == d::DAT_QUEUE_EMPTY }
    }
}

impl Drop for Ias {
    fn drop(&mut self) {
        drop(self.a.2.take());
        drop(self.b.2.take());
    }
}

fn ias() -> Ias {
    let p: &'static d::DAT_PROVIDER = Box::leak(Box::new(table::provider(c"dr-pair")));
    let (io_a, io_b) = crate::engine::channel_io::ChannelIo::pair(1024);
    let open = |mac: u8, ip, io: crate::engine::channel_io::ChannelIo| {
        let ia = crate::dat::Ia::open_with(
            crate::dat::IaConfig {
                mac: crate::wire::ethernet::EthernetAddress([2, 0, 0, 0, 2, mac]),
                address: crate::config::PortAddresses::v4(ip, 24)
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
        let (ia_h, evd_h, st) = super::ia::register(p, "dr-pair", "mem", ia, 1024);
        (ia_h as d::DAT_IA_HANDLE, evd_h as d::DAT_EVD_HANDLE, st)
    };
    Ias {
        p,
        a: open(0xa, IP_A, io_a),
        b: open(0xb, IP_B, io_b),
    }
}

/// One side's objects: PZ, a DTO+bind EVD, a connection EVD, a CR EVD, an EP and a 4 KiB LMR.
struct Side {
    pz: d::DAT_PZ_HANDLE,
    dto: d::DAT_EVD_HANDLE,
    conn: d::DAT_EVD_HANDLE,
    cr: d::DAT_EVD_HANDLE,
    ep: d::DAT_EP_HANDLE,
    lmr: d::DAT_LMR_HANDLE,
    lkey: u32,
    rkey: u32,
    addr: u64,
    buf: Vec<u8>,
}

const PRIVS: u32 = d::DAT_MEM_PRIV_LOCAL_WRITE_FLAG
    | d::DAT_MEM_PRIV_REMOTE_READ_FLAG
    | d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG;

/// # Safety
/// `ia` is a live IA handle of `p`.
unsafe fn side(p: &d::DAT_PROVIDER, ia: d::DAT_IA_HANDLE) -> Side {
    let null = core::ptr::null_mut();
    let mut s = Side {
        pz: null,
        dto: null,
        conn: null,
        cr: null,
        ep: null,
        lmr: null,
        lkey: 0,
        rkey: 0,
        addr: 0,
        buf: vec![0u8; 4096],
    };
    // SAFETY: this provider's entries with a live IA handle and local out-pointers.
    unsafe {
        ok(p.pz_create_func.unwrap()(ia, &mut s.pz));
        let dto = d::DAT_EVD_DTO_FLAG | d::DAT_EVD_RMR_BIND_FLAG;
        ok(p.evd_create_func.unwrap()(ia, 64, null, dto, &mut s.dto));
        let flag = d::DAT_EVD_CONNECTION_FLAG;
        ok(p.evd_create_func.unwrap()(ia, 16, null, flag, &mut s.conn));
        ok(p.evd_create_func.unwrap()(
            ia,
            16,
            null,
            d::DAT_EVD_CR_FLAG,
            &mut s.cr,
        ));
        ok(p.ep_create_func.unwrap()(
            ia,
            s.pz,
            s.dto,
            s.dto,
            s.conn,
            core::ptr::null(),
            &mut s.ep,
        ));
        let mut size = 0;
        ok(p.lmr_create_func.unwrap()(
            ia,
            d::DAT_MEM_TYPE_VIRTUAL,
            d::DAT_REGION_DESCRIPTION {
                for_va: s.buf.as_mut_ptr() as _,
            },
            s.buf.len() as u64,
            s.pz,
            PRIVS,
            d::DAT_VA_TYPE_VA,
            &mut s.lmr,
            &mut s.lkey,
            &mut s.rkey,
            &mut size,
            &mut s.addr,
        ));
    }
    s
}

impl Side {
    fn triplet(&self, off: u64, len: u32) -> d::DAT_LMR_TRIPLET {
        d::DAT_LMR_TRIPLET {
            lmr_context: self.lkey,
            virtual_address: self.addr + off,
            segment_length: len,
        }
    }
}

fn rmr_triplet(context: u32, address: u64, len: u32) -> d::DAT_RMR_TRIPLET {
    d::DAT_RMR_TRIPLET {
        rmr_context: context,
        virtual_address: address,
        segment_length: len,
    }
}

fn cookie(v: u64) -> d::DAT_DTO_COOKIE {
    d::DAT_DTO_COOKIE { as_64: v }
}

/// A's EP connected to B's through B's PSP on QUAL, the request handed off to a second PSP.
/// Returns the sides and B's two PSP handles.
fn connected_via_handoff(t: &Ias) -> (Side, Side) {
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let (a, b) = (side(p, t.a.0), side(p, t.b.0));
        let (mut psp, mut psp2, mut cr2) = (null, null, null);
        let flags = d::DAT_PSP_CONSUMER_FLAG;
        ok(p.psp_create_func.unwrap()(
            t.b.0, QUAL, b.cr, flags, &mut psp,
        ));
        ok(p.evd_create_func.unwrap()(
            t.b.0,
            16,
            null,
            d::DAT_EVD_CR_FLAG,
            &mut cr2,
        ));
        ok(p.psp_create_func.unwrap()(
            t.b.0, OTHER_QUAL, cr2, flags, &mut psp2,
        ));
        let peer = SockAddr::new(IP_B);
        let pdata = *b"handoff";
        ok(p.ep_connect_func.unwrap()(
            a.ep,
            peer.as_dat(),
            QUAL,
            d::DAT_TIMEOUT::MAX,
            pdata.len() as i32,
            pdata.as_ptr() as _,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let cr = ev.event_data.cr_arrival_event_data.cr_handle;
        assert_eq!(ev.event_data.cr_arrival_event_data.conn_qual, QUAL);
        let handoff = p.cr_handoff_func.unwrap();
        // No PSP on that qualifier: argument 2, the CR stays valid.
        assert_eq!(handoff(cr, OTHER_QUAL + 1), arg(2));
        assert_eq!(handoff(cr, 1 << 20), arg(2), "no PSP on port 0");
        assert_eq!(
            handoff(cr, OTHER_QUAL & 0xffff),
            arg(2),
            "the PSP is on the wide qualifier, not merely on its port"
        );
        let mut param = d::DAT_CR_PARAM::default();
        ok(p.cr_query_func.unwrap()(cr, 0, &mut param));
        ok(handoff(cr, OTHER_QUAL));
        // The old handle is gone; nothing more on the original EVD.
        assert_eq!(
            p.cr_query_func.unwrap()(cr, 0, &mut param),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CR)
        );
        assert!(t.quiet(b.cr));
        let ev = t.next(cr2);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let data = ev.event_data.cr_arrival_event_data;
        assert_eq!(data.conn_qual, OTHER_QUAL, "the PSP's whole qualifier");
        assert_eq!(data.sp_handle.psp_handle, psp2);
        let mut pp = d::DAT_PSP_PARAM::default();
        ok(p.psp_query_func.unwrap()(psp2, 0, &mut pp));
        assert_eq!(pp.conn_qual, OTHER_QUAL);
        ok(p.cr_query_func.unwrap()(data.cr_handle, 0, &mut param));
        let got = core::slice::from_raw_parts(param.private_data as *const u8, pdata.len());
        assert_eq!(got, pdata);
        ok(p.cr_accept_func.unwrap()(data.cr_handle, b.ep, 0, null));
        for evd in [a.conn, b.conn] {
            let ev = t.next(evd);
            assert_eq!(ev.event_number, d::DAT_CONNECTION_EVENT_ESTABLISHED);
        }
        (a, b)
    }
}

/// The DTO data of a DTO completion or an IB extension DTO event.
fn dto_of(ev: &d::DAT_EVENT) -> d::DAT_DTO_COMPLETION_EVENT_DATA {
    assert!(
        [d::DAT_DTO_COMPLETION_EVENT, d::DAT_IB_DTO_EVENT].contains(&ev.event_number),
        "{:#x}",
        ev.event_number
    );
    // SAFETY: the union variant of both (dat_ib_extensions.h).
    unsafe { ev.event_data.dto_completion_event_data }
}

#[test]
fn cr_handoff_send_with_invalidate_read_to_rmr_and_rmr_for_ep_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let (mut a, mut b) = connected_via_handoff(&t);
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffers stay alive (owned by the sides) while registered.
    unsafe {
        // B: an RMR of scope EP over 256 bytes at 1024 of its LMR, bound through its EP.
        let mut rmr = null;
        ok(p.rmr_create_for_ep_func.unwrap()(b.pz, &mut rmr));
        let mut q = d::DAT_RMR_PARAM::default();
        ok(p.rmr_query_func.unwrap()(rmr, 0, &mut q));
        assert_eq!(q.rmr_scope, d::DAT_RMR_SCOPE_EP);
        let bind = p.rmr_bind_func.unwrap();
        let rw = d::DAT_MEM_PRIV_REMOTE_READ_FLAG | d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        let mut ctx = 0;
        let rc = d::DAT_RMR_COOKIE { as_64: 5 };
        let window = b.triplet(1024, 256);
        // A bind is never fenced: the Rust RMR's rule (CompletionFlags::RMR_BIND), argument 8;
        // a bit that is no DAT completion flag is refused by the translation, argument 8 too.
        for bad in [d::DAT_COMPLETION_BARRIER_FENCE_FLAG, 0x40] {
            assert_eq!(
                bind(
                    rmr,
                    b.lmr,
                    &window,
                    rw,
                    d::DAT_VA_TYPE_VA,
                    b.ep,
                    rc,
                    bad,
                    &mut ctx
                ),
                arg(8)
            );
        }
        assert!(t.quiet(b.dto), "a refused bind completes nothing");
        ok(bind(
            rmr,
            b.lmr,
            &window,
            rw,
            d::DAT_VA_TYPE_VA,
            b.ep,
            rc,
            0,
            &mut ctx,
        ));
        assert_eq!(t.next(b.dto).event_number, d::DAT_RMR_BIND_COMPLETION_EVENT);
        // The query reports the privileges as given (the Rust RMR keeps them).
        ok(p.rmr_query_func.unwrap()(rmr, 0, &mut q));
        assert_eq!((q.mem_priv, q.rmr_context), (rw, ctx));
        // Another EP of B's PZ may not unbind it.
        let mut other = null;
        ok(p.ep_create_func.unwrap()(
            t.b.0,
            b.pz,
            b.dto,
            b.dto,
            b.conn,
            core::ptr::null(),
            &mut other,
        ));
        let mut ctx2 = 0;
        assert_eq!(
            bind(
                rmr,
                null,
                core::ptr::null(),
                0,
                d::DAT_VA_TYPE_VA,
                other,
                rc,
                0,
                &mut ctx2
            ),
            err(d::DAT_INVALID_STATE, 0)
        );

        // A writes into the window, then sends with invalidate naming it.
        a.buf[..4].copy_from_slice(b"inv!");
        let mut recv = [b.triplet(0, 64)];
        ok(p.ep_post_recv_func.unwrap()(
            b.ep,
            1,
            recv.as_mut_ptr(),
            cookie(30),
            0,
        ));
        let mut send = [a.triplet(0, 4)];
        let swi = p.ep_post_send_with_invalidate_func.unwrap();
        ok(swi(
            a.ep,
            1,
            send.as_mut_ptr(),
            cookie(31),
            0,
            d::DAT_TRUE,
            ctx,
        ));
        let s = dto_of(&t.next(a.dto));
        assert_eq!((s.user_cookie.as_64, s.status), (31, d::DAT_DTO_SUCCESS));
        let r = dto_of(&t.next(b.dto));
        assert_eq!((r.user_cookie.as_64, r.status), (30, d::DAT_DTO_SUCCESS));
        assert_eq!(r.transfered_length, 4);
        assert_eq!(
            (r.operation, r.rmr_context),
            (d::DAT_DTO_RECEIVE_WITH_INVALIDATE, ctx),
            "the receive names the RMR it invalidated"
        );
        assert_eq!(&b.buf[..4], b"inv!");
        ok(p.rmr_query_func.unwrap()(rmr, 0, &mut q));
        assert_eq!(q.rmr_context, 0, "invalidated by the peer");
        // With invalidate FALSE it is a plain send.
        ok(p.ep_post_recv_func.unwrap()(
            b.ep,
            1,
            recv.as_mut_ptr(),
            cookie(32),
            0,
        ));
        ok(swi(
            a.ep,
            1,
            send.as_mut_ptr(),
            cookie(33),
            0,
            d::DAT_FALSE,
            0xdead,
        ));
        assert_eq!(dto_of(&t.next(a.dto)).status, d::DAT_DTO_SUCCESS);
        let plain = dto_of(&t.next(b.dto));
        assert_eq!(
            (plain.user_cookie.as_64, plain.operation, plain.rmr_context),
            (32, d::DAT_DTO_RECEIVE, 0)
        );

        // A reads B's LMR into an RMR of its own.
        let mut sink = null;
        ok(p.rmr_create_func.unwrap()(a.pz, &mut sink));
        let mut sctx = 0;
        let sw = d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        let range = a.triplet(2048, 512);
        ok(bind(
            sink,
            a.lmr,
            &range,
            sw,
            d::DAT_VA_TYPE_VA,
            a.ep,
            rc,
            0,
            &mut sctx,
        ));
        assert_eq!(t.next(a.dto).event_number, d::DAT_RMR_BIND_COMPLETION_EVENT);
        let src = b.addr + 3000;
        b.buf[3000..3012].copy_from_slice(b"from b's lmr");
        let remote = rmr_triplet(b.rkey, src, 12);
        let local = rmr_triplet(sctx, a.addr + 2100, 12);
        let rtr = p.ep_post_rdma_read_to_rmr_func.unwrap();
        assert_eq!(rtr(a.ep, core::ptr::null(), cookie(40), &remote, 0), arg(2));
        assert_eq!(rtr(a.ep, &local, cookie(40), core::ptr::null(), 0), arg(4));
        let outside = rmr_triplet(sctx, a.addr + 2550, 12);
        assert_eq!(
            rtr(a.ep, &outside, cookie(40), &remote, 0),
            err(d::DAT_LENGTH_ERROR, 0)
        );
        ok(rtr(a.ep, &local, cookie(41), &remote, 0));
        let d = dto_of(&t.next(a.dto));
        assert_eq!(
            (d.user_cookie.as_64, d.status, d.transfered_length),
            (41, d::DAT_DTO_SUCCESS, 12)
        );
        assert_eq!(&a.buf[2100..2112], b"from b's lmr");
        ok(p.rmr_free_func.unwrap()(sink));
        ok(p.rmr_free_func.unwrap()(rmr));
    }
}

#[test]
fn srq_resize_and_set_lw_through_the_c_table() {
    let t = ias();
    let p = t.p;
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let s = side(p, t.a.0);
        let mut pr = d::DAT_PROVIDER_ATTR::default();
        let mut async_evd = core::ptr::null_mut();
        ok(p.ia_query_func.unwrap()(
            t.a.0,
            &mut async_evd,
            0,
            core::ptr::null_mut(),
            0,
            &mut pr,
        ));
        assert_eq!(async_evd, t.a.1);
        assert_eq!(pr.srq_watermarks_supported, d::DAT_TRUE as i32);
        assert_eq!(
            (pr.srq_info_supported, pr.ep_recv_info_supported),
            (d::DAT_TRUE as i32, d::DAT_TRUE as i32),
            "both queries always know their counts"
        );
        // The Rust ProviderAttr, translated: every completion flag a post takes.
        let all = d::DAT_COMPLETION_SUPPRESS_FLAG
            | d::DAT_COMPLETION_SOLICITED_WAIT_FLAG
            | d::DAT_COMPLETION_UNSIGNALLED_FLAG
            | d::DAT_COMPLETION_BARRIER_FENCE_FLAG
            | d::DAT_COMPLETION_EVD_THRESHOLD_FLAG
            | d::DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG;
        assert_eq!(pr.completion_flags_supported, all);
        assert_eq!(
            (pr.ep_creator, pr.pz_support, pr.rmr_scope_supported),
            (
                d::DAT_PSP_CREATES_EP_IFASKED,
                d::DAT_PZ_UNIQUE,
                d::DAT_RMR_SCOPE_ANY
            )
        );
        assert_eq!(
            (pr.dapl_version_major, pr.dapl_version_minor),
            crate::dat::provider_attr::PROVIDER_ATTR.dapl_version
        );
        let mut attr = d::DAT_SRQ_ATTR {
            max_recv_dtos: 4,
            max_recv_iov: 1,
            low_watermark: 0,
        };
        let mut srq = core::ptr::null_mut();
        ok(p.srq_create_func.unwrap()(t.a.0, s.pz, &mut attr, &mut srq));
        for i in 0..3u64 {
            let mut iov = [s.triplet(i * 64, 64)];
            ok(p.srq_post_recv_func.unwrap()(
                srq,
                1,
                iov.as_mut_ptr(),
                cookie(i),
            ));
        }
        let resize = p.srq_resize_func.unwrap();
        assert_eq!(resize(srq, 2), err(d::DAT_INVALID_STATE, 0), "3 posted");
        assert_eq!(resize(srq, 0), arg(2));
        assert_eq!(resize(srq, i32::MAX), err(d::DAT_INSUFFICIENT_RESOURCES, 0));
        ok(resize(srq, 8));
        let mut q = d::DAT_SRQ_PARAM::default();
        ok(p.srq_query_func.unwrap()(srq, 0, &mut q));
        assert_eq!((q.max_recv_dtos, q.available_dto_count), (8, 3));
        // No EP has taken one: none outstanding (a count, never DAT_VALUE_UNKNOWN).
        assert_eq!(q.outstanding_dto_count, 0);
        // The watermark above the posted count fires at once: one SRQ event on the async EVD.
        let set_lw = p.srq_set_lw_func.unwrap();
        assert_eq!(set_lw(srq, -1), arg(2));
        assert!(t.quiet(t.a.1));
        ok(set_lw(srq, 4));
        let ev = t.next(t.a.1);
        assert_eq!(ev.event_number, d::DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR);
        let data = ev.event_data.asynch_error_event_data;
        assert_eq!(data.dat_handle, srq as d::DAT_HANDLE);
        assert_eq!(data.reason, d::DAT_SRQ_LOW_WATERMARK_EVENT as i32);
        ok(p.srq_query_func.unwrap()(srq, 0, &mut q));
        assert_eq!(q.low_watermark, 4);
        assert!(t.quiet(t.a.1), "one event per setting");
        // Below the posted count: no event.
        ok(set_lw(srq, 2));
        assert!(t.quiet(t.a.1));
        ok(p.srq_free_func.unwrap()(srq));
        // A low watermark given at creation is armed: nothing is posted, so it fires.
        attr.low_watermark = 1;
        let mut srq2 = core::ptr::null_mut();
        ok(p.srq_create_func.unwrap()(
            t.a.0, s.pz, &mut attr, &mut srq2,
        ));
        let ev = t.next(t.a.1);
        let data = ev.event_data.asynch_error_event_data;
        assert_eq!(data.dat_handle, srq2 as d::DAT_HANDLE);
        assert_eq!(data.reason, d::DAT_SRQ_LOW_WATERMARK_EVENT as i32);
        ok(p.srq_query_func.unwrap()(srq2, 0, &mut q));
        assert_eq!((q.low_watermark, q.available_dto_count), (1, 0));
        ok(p.srq_free_func.unwrap()(srq2));
    }
}

/// dat_ep_post_rdma_write's completion flags reach the Rust EP: suppressed WRITEs make no
/// event and free their queue slots all the same (many more of them than the DTO EVD holds),
/// every signaled one completes in order, and a suppressed WRITE that fails still reports
/// its error (DAT_COMPLETION_SUPPRESS_FLAG suppresses successful completions only).
#[test]
fn suppressed_rdma_writes_make_no_event_and_report_errors_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let (mut a, b) = connected_via_handoff(&t);
    let write = p.ep_post_rdma_write_func.unwrap();
    let suppress = d::DAT_COMPLETION_SUPPRESS_FLAG;
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffers stay alive (owned by the sides) while registered.
    unsafe {
        a.buf[..8].copy_from_slice(b"suppress");
        let remote = rmr_triplet(b.rkey, b.addr + 512, 8);
        let mut posted = 0u64;
        let mut tries = 0;
        while posted < 400 {
            let mut local = a.triplet(0, 8);
            let flags = if (posted + 1).is_multiple_of(100) {
                0
            } else {
                suppress
            };
            match write(a.ep, 1, &mut local, cookie(posted), &remote, flags) {
                d::DAT_SUCCESS => posted += 1,
                rc if rc & d::DAT_TYPE_MASK == d::DAT_INSUFFICIENT_RESOURCES => {
                    t.drive();
                    tries += 1;
                    assert!(tries < 1_000_000, "the request queue never drained");
                }
                rc => panic!("dat_ep_post_rdma_write: {rc:#x}"),
            }
        }
        for k in 1..=4u64 {
            let ev = t.next(a.dto);
            assert_eq!(ev.event_number, d::DAT_DTO_COMPLETION_EVENT);
            let c = dto_of(&ev);
            assert_eq!(c.status, d::DAT_DTO_SUCCESS);
            assert_eq!(
                c.user_cookie.as_64,
                k * 100 - 1,
                "only the signaled WRITEs complete"
            );
        }
        assert!(t.quiet(a.dto), "no event for a suppressed WRITE");
        assert_eq!(&b.buf[512..520], b"suppress");
        // A suppressed WRITE with a bad R_Key: its error is reported.
        let mut local = a.triplet(0, 8);
        let bad = rmr_triplet(b.rkey ^ 0x100, b.addr + 512, 8);
        ok(write(a.ep, 1, &mut local, cookie(7777), &bad, suppress));
        let ev = t.next(a.dto);
        let c = dto_of(&ev);
        assert_eq!(c.user_cookie.as_64, 7777);
        assert_ne!(
            c.status,
            d::DAT_DTO_SUCCESS,
            "the failed WRITE reports its error"
        );
    }
}

#[test]
fn a_soft_watermark_event_names_its_reason_and_ep_through_the_c_table() {
    let t = ias();
    let p = t.p;
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let a = side(p, t.a.0);
        for i in 0..2 {
            let mut iov = [a.triplet(i * 64, 64)];
            ok(p.ep_post_recv_func.unwrap()(
                a.ep,
                1,
                iov.as_mut_ptr(),
                cookie(i),
                d::DAT_COMPLETION_DEFAULT_FLAG,
            ));
        }
        let set = p.ep_set_watermark_func.unwrap();
        assert!(t.quiet(t.a.1));
        // Two buffers at the EP exceed a soft watermark of 1: the event comes at once
        // (dat_ep_set_watermark(3DAT)), on the IA's async EVD, naming the EP.
        ok(set(a.ep, 1, -1));
        let ev = t.next(t.a.1);
        assert_eq!(ev.event_number, d::DAT_ASYNC_ERROR_EP_BROKEN);
        let data = ev.event_data.asynch_error_event_data;
        assert_eq!(data.dat_handle, a.ep as d::DAT_HANDLE);
        assert_eq!(
            data.reason,
            d::DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT as i32,
            "a watermark, not DAT_EP_TRANSFER_TO_ERROR"
        );
        assert!(t.quiet(t.a.1), "one event per arming");
        // The EP is not broken by it.
        let mut state = 0;
        ok(p.ep_get_status_func.unwrap()(
            a.ep,
            &mut state,
            core::ptr::null_mut(),
            core::ptr::null_mut(),
        ));
        assert_eq!(state, d::DAT_EP_STATE_UNCONNECTED);
    }
}

/// An IA opened with another IA's async EVD (dat_ia_open given it; `ia::register_sharing` is
/// that entry's registration): ia_query reports that EVD, its EP's event arrives there naming
/// the new IA's EP handle, the EVD's IA cannot close gracefully while it is shared, and the
/// sharer's close leaves the EVD to its IA.
#[test]
fn an_ia_sharing_an_async_evd_reports_its_eps_there_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let shared = super::handles::get(t.a.1, super::handles::Kind::Evd).expect("async EVD");
    let super::objects::Body::Evd(e) = &shared.body else {
        panic!("not an EVD");
    };
    let ia = crate::dat::Ia::open_sharing_async_evd(&e.evd).expect("shared");
    let (ia2, st2) = super::ia::register_sharing(p, "dr-pair", "mem", ia, 1024, &shared);
    drop(shared);
    let ia2 = ia2 as d::DAT_IA_HANDLE;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let mut async_evd = null;
        ok(p.ia_query_func.unwrap()(
            ia2,
            &mut async_evd,
            0,
            core::ptr::null_mut(),
            0,
            core::ptr::null_mut(),
        ));
        assert_eq!(async_evd, t.a.1);
        let a2 = side(p, ia2);
        for i in 0..2 {
            let mut iov = [a2.triplet(i * 64, 64)];
            ok(p.ep_post_recv_func.unwrap()(
                a2.ep,
                1,
                iov.as_mut_ptr(),
                cookie(i),
                d::DAT_COMPLETION_DEFAULT_FLAG,
            ));
        }
        assert!(t.quiet(t.a.1));
        ok(p.ep_set_watermark_func.unwrap()(a2.ep, 1, -1));
        let ev = t.next(t.a.1);
        assert_eq!(ev.event_number, d::DAT_ASYNC_ERROR_EP_BROKEN);
        assert_eq!(
            ev.event_data.asynch_error_event_data.dat_handle, a2.ep as d::DAT_HANDLE,
            "the sharing IA's EP, by its handle"
        );
        let close = p.ia_close_func.unwrap();
        assert_eq!(
            close(t.a.0, d::DAT_CLOSE_GRACEFUL_FLAG),
            err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_IA_IN_USE),
            "its async EVD is in use"
        );
        ok(close(ia2, d::DAT_CLOSE_ABRUPT_FLAG));
        drop(st2);
        let mut ev = d::DAT_EVENT::default();
        assert_eq!(
            p.evd_dequeue_func.unwrap()(t.a.1, &mut ev),
            d::DAT_QUEUE_EMPTY,
            "the EVD stays with its IA"
        );
        ok(close(t.a.0, d::DAT_CLOSE_GRACEFUL_FLAG));
    }
}

/// The EP state through the C table.
fn state_of(p: &d::DAT_PROVIDER, ep: d::DAT_EP_HANDLE) -> u32 {
    let mut s = 0;
    // SAFETY: a live EP handle of this provider; NULL idle outputs are skipped.
    ok(unsafe {
        p.ep_get_status_func.unwrap()(ep, &mut s, core::ptr::null_mut(), core::ptr::null_mut())
    });
    s
}

#[test]
fn an_rsp_holds_its_ep_reserved_where_modify_follows_the_page_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let (a, b) = (side(p, t.a.0), side(p, t.b.0));
        let mut rsp = null;
        ok(p.rsp_create_func.unwrap()(
            t.b.0, QUAL, b.ep, b.cr, &mut rsp,
        ));
        assert_eq!(state_of(p, b.ep), d::DAT_EP_STATE_RESERVED);
        // A second RSP on the reserved EP: it is no longer UNCONNECTED.
        let mut rsp2 = null;
        assert_eq!(
            p.rsp_create_func.unwrap()(t.b.0, OTHER_QUAL, b.ep, b.cr, &mut rsp2),
            err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_RESERVED)
        );
        // dat_ep_modify(3DAT) in RESERVED: the EVDs and every EP attribute may change; the
        // PZ only in a quiescent state (UNCONNECTED, TENTATIVE_CONNECTION_PENDING).
        let modify = p.ep_modify_func.unwrap();
        let mut param = d::DAT_EP_PARAM::default();
        ok(p.ep_query_func.unwrap()(b.ep, 0, &mut param));
        for (mask, what) in [
            (0x0100u64, "recv EVD"),
            (0x0200, "request EVD"),
            (0x0400, "connect EVD"),
            (0x1000, "service type"),
            (0x2000, "max message size"),
            (0x4000, "max RDMA size"),
            (0x8000, "QoS"),
            (0x0001_0000, "recv completion flags"),
            (0x0002_0000, "request completion flags"),
            (0x0004_0000, "max recv DTOs"),
            (0x0008_0000, "max request DTOs"),
            (0x0010_0000, "max recv IOV"),
            (0x0020_0000, "max request IOV"),
            (0x0040_0000, "max RDMA read in"),
            (0x0080_0000, "max RDMA read out"),
            (0x0200_0000, "max RDMA read IOV"),
            (0x0400_0000, "max RDMA write IOV"),
        ] {
            ok(modify(b.ep, mask, &param));
            assert_eq!(state_of(p, b.ep), d::DAT_EP_STATE_RESERVED, "{what}");
        }
        assert_eq!(
            modify(b.ep, 0x0080, &param),
            err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_RESERVED),
            "PZ"
        );
        // A request on the RSP names the reserved EP, which waits for the answer in
        // PASSIVE_CONNECTION_PENDING; accepting with a NULL EP connects it.
        let peer = SockAddr::new(IP_B);
        ok(p.ep_connect_func.unwrap()(
            a.ep,
            peer.as_dat(),
            QUAL,
            d::DAT_TIMEOUT::MAX,
            0,
            null,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let data = ev.event_data.cr_arrival_event_data;
        assert_eq!(data.sp_handle.rsp_handle, rsp);
        let mut cr = d::DAT_CR_PARAM::default();
        ok(p.cr_query_func.unwrap()(data.cr_handle, 0, &mut cr));
        assert_eq!(cr.local_ep_handle, b.ep, "the CR names the reserved EP");
        assert_eq!(
            state_of(p, b.ep),
            d::DAT_EP_STATE_PASSIVE_CONNECTION_PENDING
        );
        ok(p.cr_accept_func.unwrap()(data.cr_handle, null, 0, null));
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_ESTABLISHED
            );
        }
        assert_eq!(state_of(p, b.ep), d::DAT_EP_STATE_CONNECTED);
        ok(p.rsp_free_func.unwrap()(rsp));
        // Freeing an RSP whose EP is still reserved returns the EP to UNCONNECTED.
        let mut ep2 = null;
        ok(p.ep_create_func.unwrap()(
            t.b.0,
            b.pz,
            b.dto,
            b.dto,
            b.conn,
            core::ptr::null(),
            &mut ep2,
        ));
        ok(p.rsp_create_func.unwrap()(
            t.b.0, OTHER_QUAL, ep2, b.cr, &mut rsp2,
        ));
        assert_eq!(state_of(p, ep2), d::DAT_EP_STATE_RESERVED);
        ok(p.rsp_free_func.unwrap()(rsp2));
        assert_eq!(state_of(p, ep2), d::DAT_EP_STATE_UNCONNECTED);
    }
}

/// Posts an RDMA READ of B's "fresh" bytes into A's buffer, then an RDMA WRITE of that buffer
/// to another place at B with `flags`; returns what the WRITE put there.
fn read_then_write_of_the_read_buffer(flags: u32) -> Vec<u8> {
    let t = ias();
    let p = t.p;
    let (mut a, mut b) = connected_via_handoff(&t);
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffers stay alive (owned by the sides) while registered.
    unsafe {
        b.buf[1024..1029].copy_from_slice(b"fresh");
        a.buf[64..69].copy_from_slice(b"stale");
        let mut x = a.triplet(64, 5);
        let read = p.ep_post_rdma_read_func.unwrap();
        ok(read(
            a.ep,
            1,
            &mut x,
            cookie(1),
            &rmr_triplet(b.rkey, b.addr + 1024, 5),
            0,
        ));
        let write = p.ep_post_rdma_write_func.unwrap();
        let to = rmr_triplet(b.rkey, b.addr + 2048, 5);
        ok(write(a.ep, 1, &mut x, cookie(2), &to, flags));
        for k in 1..=2 {
            let c = dto_of(&t.next(a.dto));
            assert_eq!((c.user_cookie.as_64, c.status), (k, d::DAT_DTO_SUCCESS));
        }
        b.buf[2048..2053].to_vec()
    }
}

/// DAT_COMPLETION_BARRIER_FENCE_FLAG on a post through the C table reaches the transport: the
/// fenced WRITE waits for the READ before it, so it carries the bytes the READ brought.
/// (Without the flag this transport sends the WRITE at once, with the stale bytes: a WRITE
/// need not wait for an earlier READ's response unless fenced.)
#[test]
fn a_fenced_write_after_a_read_carries_the_read_data_through_the_c_table() {
    assert_eq!(
        read_then_write_of_the_read_buffer(d::DAT_COMPLETION_BARRIER_FENCE_FLAG),
        b"fresh"
    );
}

/// dat_query_counters as libdat2 forwards it: the va_list unpacked by the shim, then the
/// handler. `counter`: one DCNT_* index or the kind's ALL value; `out` sized for it.
fn query_counters(h: *mut core::ffi::c_void, counter: u32, out: &mut [u64], reset: bool) -> u32 {
    let mut a = d::shim_dat_ext_args::default();
    // SAFETY: the shim reads exactly the arguments of dat_ib_query_counters.
    let rc = unsafe {
        d::shim_dat_unpack_variadic(
            &mut a,
            d::DAT_IB_QUERY_COUNTERS_OP as d::DAT_EXTENDED_OP,
            counter as core::ffi::c_int,
            out.as_mut_ptr(),
            core::ffi::c_int::from(reset),
        )
    };
    assert_eq!(rc, 0, "the shim unpacks DAT_QUERY_COUNTERS_OP");
    // SAFETY: `a` is this fn's block, its `counters_out` this test's `out`, which the callers
    // size for `counter` (one or the kind's ALL).
    unsafe { super::ext::handler_for_tests(h, &a) }
}

#[test]
fn ep_and_ia_counters_through_the_extension() {
    let t = ias();
    let p = t.p;
    let (mut a, b) = connected_via_handoff(&t);
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffers stay alive (owned by the sides) while registered.
    unsafe {
        let mut rx = b.triplet(0, 64);
        ok(p.ep_post_recv_func.unwrap()(b.ep, 1, &mut rx, cookie(9), 0));
        a.buf[..10].copy_from_slice(b"counted!!!");
        let mut tx = a.triplet(0, 10);
        ok(p.ep_post_send_func.unwrap()(a.ep, 1, &mut tx, cookie(1), 0));
        let mut w = a.triplet(0, 100);
        let write = p.ep_post_rdma_write_func.unwrap();
        for k in 0..3 {
            ok(write(
                a.ep,
                1,
                &mut w,
                cookie(2 + k),
                &rmr_triplet(b.rkey, b.addr + 1024, 100),
                0,
            ));
        }
        let mut r = a.triplet(512, 40);
        let read = p.ep_post_rdma_read_func.unwrap();
        ok(read(
            a.ep,
            1,
            &mut r,
            cookie(5),
            &rmr_triplet(b.rkey, b.addr, 40),
            0,
        ));
        for _ in 0..5 {
            assert_eq!(dto_of(&t.next(a.dto)).status, d::DAT_DTO_SUCCESS);
        }
        assert_eq!(dto_of(&t.next(b.dto)).transfered_length, 10);

        let mut ep = [u64::MAX; d::DCNT_EP_ALL_COUNTERS as usize];
        assert_eq!(
            query_counters(a.ep, d::DCNT_EP_ALL_COUNTERS, &mut ep, false),
            0
        );
        let at = |i: u32| ep[i as usize];
        assert_eq!((at(d::DCNT_EP_CONNECT), at(d::DCNT_EP_DISCONNECT)), (1, 0));
        assert_eq!(
            (at(d::DCNT_EP_POST_SEND), at(d::DCNT_EP_POST_SEND_DATA)),
            (1, 10)
        );
        assert_eq!(
            (at(d::DCNT_EP_POST_WRITE), at(d::DCNT_EP_POST_WRITE_DATA)),
            (3, 300)
        );
        assert_eq!(
            (at(d::DCNT_EP_POST_READ), at(d::DCNT_EP_POST_READ_DATA)),
            (1, 40)
        );
        assert_eq!(at(d::DCNT_EP_POST_SEND_UD), 0, "no UD here");
        let mut bep = [u64::MAX; d::DCNT_EP_ALL_COUNTERS as usize];
        assert_eq!(
            query_counters(b.ep, d::DCNT_EP_ALL_COUNTERS, &mut bep, false),
            0
        );
        let bt = |i: u32| bep[i as usize];
        assert_eq!(
            (bt(d::DCNT_EP_POST_RECV), bt(d::DCNT_EP_POST_RECV_DATA)),
            (1, 64)
        );
        assert_eq!((bt(d::DCNT_EP_RECV), bt(d::DCNT_EP_RECV_DATA)), (1, 10));
        assert_eq!(bt(d::DCNT_EP_CONNECT), 1, "the accepted connection");

        // One counter, then a reset: the next reading starts from zero.
        let mut one = [u64::MAX];
        assert_eq!(
            query_counters(a.ep, d::DCNT_EP_POST_WRITE, &mut one, true),
            0
        );
        assert_eq!(one, [3]);
        ok(write(
            a.ep,
            1,
            &mut w,
            cookie(6),
            &rmr_triplet(b.rkey, b.addr + 1024, 100),
            0,
        ));
        assert_eq!(dto_of(&t.next(a.dto)).status, d::DAT_DTO_SUCCESS);
        assert_eq!(
            query_counters(a.ep, d::DCNT_EP_ALL_COUNTERS, &mut ep, false),
            0
        );
        assert_eq!(
            (
                ep[d::DCNT_EP_POST_WRITE as usize],
                ep[d::DCNT_EP_POST_SEND as usize]
            ),
            (1, 0)
        );
        // Out of range: argument 3.
        assert_eq!(
            query_counters(a.ep, d::DCNT_EP_ALL_COUNTERS + 1, &mut ep, false),
            arg(3)
        );

        // The IAs: A requested the connection, B accepted it (after a handoff).
        let mut ia = [u64::MAX; d::DCNT_IA_ALL_COUNTERS as usize];
        assert_eq!(
            query_counters(t.a.0, d::DCNT_IA_ALL_COUNTERS, &mut ia, false),
            0
        );
        let ai = |i: u32| ia[i as usize];
        assert_eq!((ai(d::DCNT_IA_CM_REQ_TX), ai(d::DCNT_IA_CM_REP_RX)), (1, 1));
        assert_eq!(
            (ai(d::DCNT_IA_CM_RTU_TX), ai(d::DCNT_IA_CM_ACTIVE_EST)),
            (1, 1)
        );
        assert_eq!((ai(d::DCNT_IA_EP_CREATE), ai(d::DCNT_IA_PZ_CREATE)), (1, 1));
        // The async EVD dat_ia_open made and the side's three.
        assert_eq!(
            (ai(d::DCNT_IA_EVD_CREATE), ai(d::DCNT_IA_LMR_CREATE)),
            (4, 1)
        );
        let mut ib = [u64::MAX; d::DCNT_IA_ALL_COUNTERS as usize];
        assert_eq!(
            query_counters(t.b.0, d::DCNT_IA_ALL_COUNTERS, &mut ib, false),
            0
        );
        let bi = |i: u32| ib[i as usize];
        assert_eq!((bi(d::DCNT_IA_CM_REQ_RX), bi(d::DCNT_IA_CM_REP_TX)), (1, 1));
        assert_eq!(
            (bi(d::DCNT_IA_CM_RTU_RX), bi(d::DCNT_IA_CM_PASSIVE_EST)),
            (1, 1)
        );
        assert_eq!(
            (bi(d::DCNT_IA_PSP_CREATE), bi(d::DCNT_IA_SP_CR_ACCEPTED)),
            (2, 1)
        );
        // An EVD keeps no counters; a PZ is no counter handle.
        assert_eq!(
            query_counters(a.dto, d::DCNT_EVD_ALL_COUNTERS, &mut ia, false),
            d::DAT_NOT_IMPLEMENTED
        );
        assert_eq!(
            query_counters(a.pz, 0, &mut ia, false),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_PZ)
        );
    }
}

/// dat_ep_dup_connect honours its timeout: B's IA is not driven, so nobody answers the
/// duplicate's REQ, and after the timeout the EP's connection EVD gets TIMED_OUT.
#[test]
fn dup_connect_times_out_when_nobody_answers_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let (a, _b) = connected_via_handoff(&t);
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let mut ep2 = core::ptr::null_mut();
        ok(p.ep_create_func.unwrap()(
            t.a.0,
            a.pz,
            a.dto,
            a.dto,
            a.conn,
            core::ptr::null(),
            &mut ep2,
        ));
        let timeout_us = 20_000;
        // The timeout runs from the call (the call itself may be descheduled).
        let t0 = std::time::Instant::now();
        ok(p.ep_dup_connect_func.unwrap()(
            ep2,
            a.ep,
            timeout_us,
            0,
            core::ptr::null_mut(),
            d::DAT_QOS_BEST_EFFORT,
        ));
        let dequeue = p.evd_dequeue_func.unwrap();
        let ev = loop {
            if let Some(ia) = t.a.2.ia().as_ref() {
                ia.progress();
            }
            let mut ev = d::DAT_EVENT::default();
            if dequeue(a.conn, &mut ev) == d::DAT_SUCCESS {
                break ev;
            }
            assert!(t0.elapsed().as_secs() < 10, "no connection event");
        };
        assert_eq!(ev.event_number, d::DAT_CONNECTION_EVENT_TIMED_OUT);
        assert_eq!(ev.event_data.connect_event_data.ep_handle, ep2);
        assert!(t0.elapsed() >= std::time::Duration::from_micros(timeout_us.into()));
        assert_eq!(state_of(p, ep2), d::DAT_EP_STATE_DISCONNECTED);
    }
}

/// Loopback: two EPs of one IA connect through the IA's own address (the frames to the
/// port's own MAC are delivered to it), move data both ways, and follow the seed pages'
/// connected-state rules; B's IA at the other end of the cable sees nothing.
#[test]
fn two_eps_of_one_ia_connect_over_loopback_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffers stay alive (owned by the sides) while registered.
    unsafe {
        let (mut a, mut b) = (side(p, t.a.0), side(p, t.a.0));
        let mut psp = null;
        let flags = d::DAT_PSP_CONSUMER_FLAG;
        ok(p.psp_create_func.unwrap()(
            t.a.0, QUAL, b.cr, flags, &mut psp,
        ));
        let own = SockAddr::new(IP_A);
        ok(p.ep_connect_func.unwrap()(
            a.ep,
            own.as_dat(),
            QUAL,
            d::DAT_TIMEOUT::MAX,
            4,
            b"self".as_ptr() as _,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let cr = ev.event_data.cr_arrival_event_data.cr_handle;
        let mut param = d::DAT_CR_PARAM::default();
        ok(p.cr_query_func.unwrap()(cr, 0, &mut param));
        let remote = (param.remote_ia_address_ptr as *const SockAddr).read_unaligned();
        assert_eq!(remote, own, "the request comes from our own address");
        ok(p.cr_accept_func.unwrap()(cr, b.ep, 0, null));
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_ESTABLISHED
            );
        }
        for ep in [a.ep, b.ep] {
            assert_eq!(state_of(p, ep), d::DAT_EP_STATE_CONNECTED);
        }
        // SEND/RECV, RDMA WRITE and READ between the two EPs.
        let mut rx = b.triplet(0, 64);
        ok(p.ep_post_recv_func.unwrap()(b.ep, 1, &mut rx, cookie(1), 0));
        a.buf[100..108].copy_from_slice(b"loopback");
        let mut tx = a.triplet(100, 8);
        ok(p.ep_post_send_func.unwrap()(a.ep, 1, &mut tx, cookie(2), 0));
        assert_eq!(dto_of(&t.next(a.dto)).status, d::DAT_DTO_SUCCESS);
        let got = dto_of(&t.next(b.dto));
        assert_eq!((got.user_cookie.as_64, got.transfered_length), (1, 8));
        assert_eq!(&b.buf[..8], b"loopback");
        let write = p.ep_post_rdma_write_func.unwrap();
        ok(write(
            a.ep,
            1,
            &mut tx,
            cookie(3),
            &rmr_triplet(b.rkey, b.addr + 2000, 8),
            0,
        ));
        assert_eq!(dto_of(&t.next(a.dto)).status, d::DAT_DTO_SUCCESS);
        assert_eq!(&b.buf[2000..2008], b"loopback");
        b.buf[3000..3004].copy_from_slice(b"back");
        let mut into = a.triplet(500, 4);
        let read = p.ep_post_rdma_read_func.unwrap();
        ok(read(
            a.ep,
            1,
            &mut into,
            cookie(4),
            &rmr_triplet(b.rkey, b.addr + 3000, 4),
            0,
        ));
        assert_eq!(dto_of(&t.next(a.dto)).status, d::DAT_DTO_SUCCESS);
        assert_eq!(&a.buf[500..504], b"back");
        // The seed pages in CONNECTED: dat_ep_modify refuses the attributes that change only
        // before a connection (DAT_INVALID_STATE); get_status, recv_query and set_watermark
        // answer.
        let mut q = d::DAT_EP_PARAM::default();
        ok(p.ep_query_func.unwrap()(b.ep, 0, &mut q));
        assert_eq!(
            p.ep_modify_func.unwrap()(b.ep, 0x0008_0000, &q) & !0xffff,
            err(d::DAT_INVALID_STATE, 0)
        );
        let (mut n, mut span) = (-1, -1);
        ok(p.ep_recv_query_func.unwrap()(b.ep, &mut n, &mut span));
        assert_eq!((n, span), (0, 0), "the one receive was consumed");
        ok(p.ep_set_watermark_func.unwrap()(b.ep, 4, -1));
        assert!(t.quiet(t.a.1), "no watermark event below it");
        // The peer IA saw none of it: nothing left the port.
        assert!(t.quiet(t.b.1));
        // Disconnecting one side disconnects the other, over loopback too.
        ok(p.ep_disconnect_func.unwrap()(
            a.ep,
            d::DAT_CLOSE_ABRUPT_FLAG,
        ));
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_DISCONNECTED
            );
        }
        ok(p.psp_free_func.unwrap()(psp));
    }
}

/// The EVD's enabled and waitable states are the Rust EVD's: dat_evd_set_unwaitable from
/// another thread releases a thread blocked in dat_evd_wait with DAT_INVALID_STATE, and
/// dat_evd_query reports the states the calls set.
#[test]
fn set_unwaitable_releases_a_waiter_in_dat_evd_wait_through_the_c_table() {
    let t = ias();
    let p = t.p;
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let a = side(p, t.a.0);
        let evd = a.dto as usize;
        let wait = p.evd_wait_func.unwrap();
        let waiter = std::thread::spawn(move || {
            let mut ev = d::DAT_EVENT::default();
            let mut nmore = 0;
            // A live EVD handle of the provider and local storage (the enclosing unsafe
            // block's contract). A bounded wait: left waiting, it ends with
            // DAT_TIMEOUT_EXPIRED and fails.
            wait(evd as d::DAT_EVD_HANDLE, 5_000_000, 1, &mut ev, &mut nmore)
        });
        // Released only once it waits: the EVD counts its waiters.
        let shared = super::handles::get(a.dto, super::handles::Kind::Evd).expect("DTO EVD");
        let super::objects::Body::Evd(e) = &shared.body else {
            panic!("not an EVD");
        };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
        while e.evd.waiters() == 0 {
            assert!(!waiter.is_finished(), "the waiter returned without waiting");
            assert!(
                std::time::Instant::now() < deadline,
                "the waiter never waited"
            );
            std::thread::yield_now();
        }
        ok(p.evd_set_unwaitable_func.unwrap()(a.dto));
        assert_eq!(
            waiter.join().unwrap(),
            err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EVD_UNWAITABLE)
        );
        let query = |evd| {
            let mut q = d::DAT_EVD_PARAM::default();
            ok(p.evd_query_func.unwrap()(evd, 0, &mut q));
            q.evd_state
        };
        assert_eq!(
            query(a.dto),
            d::DAT_EVD_STATE_ENABLED | d::DAT_EVD_STATE_UNWAITABLE
        );
        ok(p.evd_clear_unwaitable_func.unwrap()(a.dto));
        ok(p.evd_disable_func.unwrap()(a.dto));
        assert_eq!(
            query(a.dto),
            d::DAT_EVD_STATE_DISABLED | d::DAT_EVD_STATE_WAITABLE
        );
        ok(p.evd_enable_func.unwrap()(a.dto));
    }
}

/// The extension data of a DAT_IB_DTO_EVENT.
fn ext_of(ev: &d::DAT_EVENT) -> d::DAT_IB_EXTENSION_EVENT_DATA {
    assert_eq!(ev.event_number, d::DAT_IB_DTO_EVENT);
    // SAFETY: a DAT_IB_DTO_EVENT's extension area holds a DAT_IB_EXTENSION_EVENT_DATA
    // (dat_ib_extensions.h), written by this provider.
    unsafe {
        (ev.event_extension_data.as_ptr() as *const d::DAT_IB_EXTENSION_EVENT_DATA).read_unaligned()
    }
}

/// An IB extension operation as libdat2 forwards it (the shim unpacks the va_list).
fn extension(ep: d::DAT_EP_HANDLE, unpack: impl FnOnce(&mut d::shim_dat_ext_args) -> i32) -> u32 {
    let mut a = d::shim_dat_ext_args::default();
    assert_eq!(unpack(&mut a), 0, "the shim unpacks the operation");
    // SAFETY: `a` is this fn's block, unpacked by the shim from the callers' live local
    // triplets.
    unsafe { super::ext::handler_for_tests(ep, &a) }
}

/// The completion flags of the extension operations and of dat_rmr_bind are the Rust EP's
/// and RMR's: a write with immediate is a DAT_IB_DTO_EVENT on both sides whether or not its
/// own completion is suppressed; a suppressed bind makes no event while a signaled unbind
/// names its RMR; a suppressed fetch-and-add that fails reports its error.
#[test]
fn completion_flags_of_extension_ops_and_binds_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let (mut a, b) = connected_via_handoff(&t);
    let null = core::ptr::null_mut();
    let suppress = d::DAT_COMPLETION_SUPPRESS_FLAG;
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffers stay alive (owned by the sides) while registered.
    unsafe {
        for k in 0..2u64 {
            let mut rx = b.triplet(64 * k, 64);
            ok(p.ep_post_recv_func.unwrap()(
                b.ep,
                1,
                &mut rx,
                cookie(20 + k),
                0,
            ));
        }
        let write_immed = |lbuf: &mut d::DAT_LMR_TRIPLET, c: u64, imm: u32, flags: u32| {
            let remote = rmr_triplet(b.rkey, b.addr + 256 + 8 * (c % 2), 8);
            extension(a.ep, |args| {
                d::shim_dat_unpack_variadic(
                    args,
                    d::DAT_IB_RDMA_WRITE_IMMED_OP as d::DAT_EXTENDED_OP,
                    1 as d::DAT_COUNT,
                    lbuf as *mut d::DAT_LMR_TRIPLET,
                    cookie(c),
                    &remote as *const d::DAT_RMR_TRIPLET,
                    imm,
                    flags as d::DAT_COMPLETION_FLAGS,
                )
            })
        };
        a.buf[..8].copy_from_slice(b"immedia1");
        let mut l = a.triplet(0, 8);
        ok(write_immed(&mut l, 1, 0xabc, 0));
        let ev = t.next(a.dto);
        assert_eq!(ext_of(&ev).type_, d::DAT_IB_RDMA_WRITE_IMMED);
        assert_eq!(dto_of(&ev).user_cookie.as_64, 1);
        let ev = t.next(b.dto);
        let x = ext_of(&ev);
        assert_eq!(x.type_, d::DAT_IB_RDMA_WRITE_IMMED_DATA);
        assert_eq!(x.val.immed.data, 0xabc);
        assert_eq!(dto_of(&ev).user_cookie.as_64, 20);
        assert_eq!(&b.buf[264..272], b"immedia1");
        // Suppressed: nothing here, the receive there all the same.
        ok(write_immed(&mut l, 2, 0xdef, suppress));
        let ev = t.next(b.dto);
        assert_eq!(ext_of(&ev).val.immed.data, 0xdef);
        assert_eq!(dto_of(&ev).user_cookie.as_64, 21);
        assert!(
            t.quiet(a.dto),
            "a suppressed write with immediate makes no event"
        );

        // B binds an RMR suppressed (no event), then unbinds it signaled (an event naming it).
        let mut rmr = null;
        ok(p.rmr_create_func.unwrap()(b.pz, &mut rmr));
        let bind = p.rmr_bind_func.unwrap();
        let window = b.triplet(1024, 256);
        let rw = d::DAT_MEM_PRIV_REMOTE_READ_FLAG | d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG;
        let (mut ctx, rc) = (0, d::DAT_RMR_COOKIE { as_64: 31 });
        let va = d::DAT_VA_TYPE_VA;
        ok(bind(
            rmr, b.lmr, &window, rw, va, b.ep, rc, suppress, &mut ctx,
        ));
        assert!(t.quiet(b.dto), "a suppressed bind makes no event");
        let rc = d::DAT_RMR_COOKIE { as_64: 32 };
        ok(bind(
            rmr,
            null,
            core::ptr::null(),
            0,
            va,
            b.ep,
            rc,
            0,
            &mut ctx,
        ));
        let ev = t.next(b.dto);
        assert_eq!(ev.event_number, d::DAT_RMR_BIND_COMPLETION_EVENT);
        let r = ev.event_data.rmr_completion_event_data;
        assert_eq!((r.rmr_handle, r.user_cookie.as_64), (rmr, 32));
        ok(p.rmr_free_func.unwrap()(rmr));

        let fetch_add = |rkey: u32, c: u64, l: &mut d::DAT_LMR_TRIPLET| {
            let remote = rmr_triplet(rkey, b.addr + 512, 8);
            extension(a.ep, |args| {
                d::shim_dat_unpack_variadic(
                    args,
                    d::DAT_IB_FETCH_AND_ADD_OP as d::DAT_EXTENDED_OP,
                    1u64,
                    l as *mut d::DAT_LMR_TRIPLET,
                    cookie(c),
                    &remote as *const d::DAT_RMR_TRIPLET,
                    suppress as d::DAT_COMPLETION_FLAGS,
                )
            })
        };
        // A suppressed fetch-and-add: done, no event.
        let mut l = a.triplet(64, 8);
        ok(fetch_add(b.rkey, 4, &mut l));
        assert!(t.quiet(a.dto), "a suppressed fetch-and-add makes no event");
        assert_eq!(b.buf[512], 1, "the fetch-and-add was done");
        // One with a bad R_Key fails, and says so.
        let rc = fetch_add(b.rkey ^ 0x100, 3, &mut l);
        ok(rc);
        let ev = t.next(a.dto);
        let c = dto_of(&ev);
        assert_eq!(c.user_cookie.as_64, 3);
        assert_ne!(
            c.status,
            d::DAT_DTO_SUCCESS,
            "the failed atomic reports its error"
        );
    }
}

/// A's and B's sides, B listening on [`QUAL`] with a consumer PSP on its CR EVD.
///
/// # Safety
/// `t`'s provider entries are called with live handles.
unsafe fn b_listening(t: &Ias) -> (Side, Side, d::DAT_PSP_HANDLE) {
    let p = t.p;
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let (a, b) = (side(p, t.a.0), side(p, t.b.0));
        let mut psp = core::ptr::null_mut();
        ok(p.psp_create_func.unwrap()(
            t.b.0,
            QUAL,
            b.cr,
            d::DAT_PSP_CONSUMER_FLAG,
            &mut psp,
        ));
        (a, b, psp)
    }
}

/// Two EPs of IA A connected over loopback (A's side `a` active, `b` passive through a PSP on
/// QUAL); returns the sides and the PSP.
///
/// # Safety
/// `t`'s provider entries are called with live handles.
unsafe fn connected_over_loopback(t: &Ias) -> (Side, Side, d::DAT_PSP_HANDLE) {
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let (a, b) = (side(p, t.a.0), side(p, t.a.0));
        let mut psp = null;
        ok(p.psp_create_func.unwrap()(
            t.a.0,
            QUAL,
            b.cr,
            d::DAT_PSP_CONSUMER_FLAG,
            &mut psp,
        ));
        let own = SockAddr::new(IP_A);
        ok(p.ep_connect_func.unwrap()(
            a.ep,
            own.as_dat(),
            QUAL,
            d::DAT_TIMEOUT::MAX,
            0,
            null,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let cr = ev.event_data.cr_arrival_event_data.cr_handle;
        ok(p.cr_accept_func.unwrap()(cr, b.ep, 0, null));
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_ESTABLISHED
            );
        }
        (a, b, psp)
    }
}

/// dat_ep_disconnect(3DAT): DAT_CLOSE_GRACEFUL_FLAG lets the requests in flight complete
/// before the connection goes (`Ep::disconnect_graceful`); a flag value that is neither
/// graceful nor abrupt is argument 2.
#[test]
fn a_graceful_disconnect_completes_the_requests_in_flight_through_the_c_table() {
    let t = ias();
    let p = t.p;
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffers stay alive (owned by the sides) while registered.
    unsafe {
        let (mut a, b, psp) = connected_over_loopback(&t);
        let disconnect = p.ep_disconnect_func.unwrap();
        assert_eq!(disconnect(a.ep, 2), arg(2));
        assert_eq!(state_of(p, a.ep), d::DAT_EP_STATE_CONNECTED);
        a.buf[..8].copy_from_slice(b"graceful");
        let mut tx = a.triplet(0, 8);
        ok(p.ep_post_rdma_write_func.unwrap()(
            a.ep,
            1,
            &mut tx,
            cookie(7),
            &rmr_triplet(b.rkey, b.addr + 64, 8),
            0,
        ));
        // Nothing drove the IA since the post: the write is still outstanding.
        ok(disconnect(a.ep, d::DAT_CLOSE_GRACEFUL_FLAG));
        let mut idle = d::DAT_FALSE;
        let mut state = 0;
        ok(p.ep_get_status_func.unwrap()(
            a.ep,
            &mut state,
            core::ptr::null_mut(),
            &mut idle,
        ));
        assert_eq!(
            idle,
            d::DAT_TRUE,
            "the write completed before the disconnect"
        );
        let done = dto_of(&t.next(a.dto));
        assert_eq!(
            (done.user_cookie.as_64, done.status),
            (7, d::DAT_DTO_SUCCESS)
        );
        assert_eq!(&b.buf[64..72], b"graceful");
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_DISCONNECTED
            );
        }
        ok(p.psp_free_func.unwrap()(psp));
    }
}

/// dat_ep_dup_connect(3DAT) is the Rust `Ep::dup_connect_with_timeout`: a `dup_ep` that never
/// connected has no remote end to copy (argument 2); one still connecting has, and the new EP
/// connects to the same address and qualifier.
#[test]
fn dup_connect_copies_the_remote_end_the_rust_ep_knows_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let a = side(p, t.a.0);
        let mut ep2 = null;
        ok(p.ep_create_func.unwrap()(
            t.a.0,
            a.pz,
            a.dto,
            a.dto,
            a.conn,
            core::ptr::null(),
            &mut ep2,
        ));
        let dup = p.ep_dup_connect_func.unwrap();
        let inf = d::DAT_TIMEOUT::MAX;
        assert_eq!(
            dup(ep2, a.ep, inf, 0, null, d::DAT_QOS_BEST_EFFORT),
            arg(2),
            "a.ep never connected"
        );
        assert_eq!(state_of(p, ep2), d::DAT_EP_STATE_UNCONNECTED);
        // A dup_ep of another IA, or one that is no EP, is the second handle.
        let b = side(p, t.b.0);
        let second = err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE2);
        assert_eq!(dup(ep2, b.ep, inf, 0, null, d::DAT_QOS_BEST_EFFORT), second);
        assert_eq!(dup(ep2, a.pz, inf, 0, null, d::DAT_QOS_BEST_EFFORT), second);
        let peer = SockAddr::new(IP_B);
        ok(p.ep_connect_func.unwrap()(
            a.ep,
            peer.as_dat(),
            QUAL,
            inf,
            0,
            null,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        assert_eq!(state_of(p, a.ep), d::DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        ok(dup(ep2, a.ep, inf, 0, null, d::DAT_QOS_BEST_EFFORT));
        assert_eq!(state_of(p, ep2), d::DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
        let mut q = d::DAT_EP_PARAM::default();
        ok(p.ep_query_func.unwrap()(ep2, 0, &mut q));
        let remote = (q.remote_ia_address_ptr as *const SockAddr).read_unaligned();
        assert_eq!((remote, q.remote_port_qual), (peer, QUAL));
    }
}

/// dat_cr_accept(3DAT): with DAT_HANDLE_NULL the EP is the one the request names
/// (`Cr::accept_reserved`), and a consumer PSP's request names none (argument 2); a refused
/// accept leaves the request pending ("without any effect on ... Pending Connection
/// Request"), so it can still be accepted on a suitable EP.
#[test]
fn a_refused_accept_leaves_the_request_pending_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let (a, b, psp) = b_listening(&t);
        let peer = SockAddr::new(IP_B);
        ok(p.ep_connect_func.unwrap()(
            a.ep,
            peer.as_dat(),
            QUAL,
            d::DAT_TIMEOUT::MAX,
            0,
            null,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let cr = ev.event_data.cr_arrival_event_data.cr_handle;
        let accept = p.cr_accept_func.unwrap();
        let mut param = d::DAT_CR_PARAM::default();
        assert_eq!(
            accept(cr, null, 0, null),
            arg(2),
            "a PSP's request names no EP"
        );
        ok(p.cr_query_func.unwrap()(cr, 0, &mut param));
        assert_eq!(
            accept(cr, a.ep, 0, null),
            err(d::DAT_INVALID_HANDLE, 0),
            "an EP of another IA"
        );
        ok(p.cr_query_func.unwrap()(cr, 0, &mut param));
        ok(accept(cr, b.ep, 0, null));
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_ESTABLISHED
            );
        }
        assert_eq!(
            p.cr_query_func.unwrap()(cr, 0, &mut param),
            err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CR)
        );
        ok(p.psp_free_func.unwrap()(psp));
    }
}

/// The remote address and qualifier (`remote_ia_address_ptr`) of an EP's query.
///
/// # Safety
/// `ep` is a live EP handle of `p`.
unsafe fn remote_of(p: &d::DAT_PROVIDER, ep: d::DAT_EP_HANDLE) -> (SockAddr, u64) {
    let mut q = d::DAT_EP_PARAM::default();
    // SAFETY: as the caller promises, with local storage; the address is read while the EP
    // handle lives.
    unsafe {
        ok(p.ep_query_func.unwrap()(ep, 0, &mut q));
        (
            (q.remote_ia_address_ptr as *const SockAddr).read_unaligned(),
            q.remote_port_qual,
        )
    }
}

/// dat_ep_query(3DAT) reports the remote end the Rust EP knows (`Ep::remote`): the requester's
/// address from PASSIVE_CONNECTION_PENDING on, the peer's address and qualifier on the active
/// side, and none again once dat_ep_reset made the EP UNCONNECTED.
#[test]
fn ep_query_reports_the_remote_end_of_the_rust_ep_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let (a, b) = (side(p, t.a.0), side(p, t.b.0));
        let none = (SockAddr::default(), 0);
        assert_eq!(remote_of(p, b.ep), none);
        let mut rsp = null;
        ok(p.rsp_create_func.unwrap()(
            t.b.0, QUAL, b.ep, b.cr, &mut rsp,
        ));
        let peer = SockAddr::new(IP_B);
        ok(p.ep_connect_func.unwrap()(
            a.ep,
            peer.as_dat(),
            QUAL,
            d::DAT_TIMEOUT::MAX,
            0,
            null,
            d::DAT_QOS_BEST_EFFORT,
            d::DAT_CONNECT_DEFAULT_FLAG,
        ));
        assert_eq!(remote_of(p, a.ep), (peer, QUAL));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        assert_eq!(
            state_of(p, b.ep),
            d::DAT_EP_STATE_PASSIVE_CONNECTION_PENDING
        );
        let requester = SockAddr::new(IP_A);
        assert_eq!(remote_of(p, b.ep).0, requester);
        ok(p.cr_accept_func.unwrap()(
            ev.event_data.cr_arrival_event_data.cr_handle,
            null,
            0,
            null,
        ));
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_ESTABLISHED
            );
        }
        assert_eq!(remote_of(p, b.ep).0, requester);
        assert_eq!(remote_of(p, a.ep), (peer, QUAL));
        ok(p.ep_disconnect_func.unwrap()(
            a.ep,
            d::DAT_CLOSE_ABRUPT_FLAG,
        ));
        for evd in [a.conn, b.conn] {
            assert_eq!(
                t.next(evd).event_number,
                d::DAT_CONNECTION_EVENT_DISCONNECTED
            );
        }
        ok(p.ep_reset_func.unwrap()(a.ep));
        assert_eq!(state_of(p, a.ep), d::DAT_EP_STATE_UNCONNECTED);
        assert_eq!(remote_of(p, a.ep), none, "no remote end after the reset");
        ok(p.rsp_free_func.unwrap()(rsp));
    }
}

/// dat_pz_free, dat_evd_free, dat_srq_free and dat_cno_free are refused by the Rust `can_free`
/// with the subtype of dat_error.h while objects use them (PZ/EVD/SRQ/CNO_IN_USE), the IA's
/// async EVD always (EVD_ASYNC); each goes once its users are gone.
#[test]
fn frees_of_objects_in_use_are_refused_by_the_rust_objects_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    let state = |sub| err(d::DAT_INVALID_STATE, sub);
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // LMR buffer stays alive (owned by the side) while registered.
    unsafe {
        let s = side(p, t.a.0);
        assert_eq!(
            p.evd_free_func.unwrap()(t.a.1),
            state(d::DAT_INVALID_STATE_EVD_ASYNC)
        );
        let mut attr = d::DAT_SRQ_ATTR {
            max_recv_dtos: 4,
            max_recv_iov: 1,
            low_watermark: 0,
        };
        let mut srq = null;
        ok(p.srq_create_func.unwrap()(t.a.0, s.pz, &mut attr, &mut srq));
        let mut ep = null;
        ok(p.ep_create_with_srq_func.unwrap()(
            t.a.0,
            s.pz,
            s.dto,
            s.dto,
            s.conn,
            srq,
            core::ptr::null(),
            &mut ep,
        ));
        let mut cno = null;
        ok(p.cno_create_func.unwrap()(
            t.a.0,
            d::DAT_OS_WAIT_PROXY_AGENT::default(),
            &mut cno,
        ));
        ok(p.evd_modify_cno_func.unwrap()(s.cr, cno));
        assert_eq!(
            p.srq_free_func.unwrap()(srq),
            state(d::DAT_INVALID_STATE_SRQ_IN_USE)
        );
        assert_eq!(
            p.evd_free_func.unwrap()(s.conn),
            state(d::DAT_INVALID_STATE_EVD_IN_USE)
        );
        assert_eq!(
            p.cno_free_func.unwrap()(cno),
            state(d::DAT_INVALID_STATE_CNO_IN_USE)
        );
        assert_eq!(
            p.pz_free_func.unwrap()(s.pz),
            state(d::DAT_INVALID_STATE_PZ_IN_USE)
        );
        ok(p.ep_free_func.unwrap()(ep));
        ok(p.srq_free_func.unwrap()(srq));
        ok(p.evd_modify_cno_func.unwrap()(s.cr, null));
        ok(p.cno_free_func.unwrap()(cno));
        ok(p.evd_free_func.unwrap()(s.cr));
        // The side's EP (with its EVDs) and LMR still use the PZ.
        assert_eq!(
            p.pz_free_func.unwrap()(s.pz),
            state(d::DAT_INVALID_STATE_PZ_IN_USE)
        );
        ok(p.ep_free_func.unwrap()(s.ep));
        ok(p.lmr_free_func.unwrap()(s.lmr));
        for evd in [s.dto, s.conn] {
            ok(p.evd_free_func.unwrap()(evd));
        }
        ok(p.pz_free_func.unwrap()(s.pz));
    }
}

/// Private data up to `ia_attr::MAX_PRIVATE_DATA_SIZE` (56: an IB CM REQ's 92 bytes less the
/// 36-byte IP CM header, IBTA annex A11.6), what dat_ia_query reports, goes through
/// dat_ep_connect, dat_ep_dup_connect, dat_cr_accept and dat_cr_reject; one byte more is
/// DAT_INVALID_PARAMETER naming the call's `private_data_size` (a refused accept or reject
/// leaves the request pending).
#[test]
fn private_data_at_the_limit_passes_and_one_byte_more_is_refused_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    let limit = crate::dat::ia_attr::MAX_PRIVATE_DATA_SIZE as usize;
    assert_eq!(limit, 56);
    let data: Vec<u8> = (0..=limit as u8).collect();
    let (at, over) = (limit as i32, limit as i32 + 1);
    let pd = data.as_ptr() as d::DAT_PVOID;
    // SAFETY (all calls): this provider's entries with live handles and local storage; `data`
    // outlives every call that reads it.
    unsafe {
        let mut pr = d::DAT_PROVIDER_ATTR::default();
        ok(p.ia_query_func.unwrap()(
            t.a.0,
            core::ptr::null_mut(),
            0,
            core::ptr::null_mut(),
            u64::MAX,
            &mut pr,
        ));
        assert_eq!(pr.max_private_data_size, at);
        let (a, b, psp) = b_listening(&t);
        let mut ep2 = null;
        ok(p.ep_create_func.unwrap()(
            t.a.0,
            a.pz,
            a.dto,
            a.dto,
            a.conn,
            core::ptr::null(),
            &mut ep2,
        ));
        let peer = SockAddr::new(IP_B);
        let connect = |ep, size| {
            p.ep_connect_func.unwrap()(
                ep,
                peer.as_dat(),
                QUAL,
                d::DAT_TIMEOUT::MAX,
                size,
                pd,
                d::DAT_QOS_BEST_EFFORT,
                d::DAT_CONNECT_DEFAULT_FLAG,
            )
        };
        assert_eq!(connect(a.ep, over), arg(5));
        assert_eq!(state_of(p, a.ep), d::DAT_EP_STATE_UNCONNECTED);
        ok(connect(a.ep, at));
        let dup = p.ep_dup_connect_func.unwrap();
        let inf = d::DAT_TIMEOUT::MAX;
        assert_eq!(
            dup(ep2, a.ep, inf, over, pd, d::DAT_QOS_BEST_EFFORT),
            arg(4)
        );
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let cr = ev.event_data.cr_arrival_event_data.cr_handle;
        let mut param = d::DAT_CR_PARAM::default();
        ok(p.cr_query_func.unwrap()(cr, 0, &mut param));
        assert_eq!(param.private_data_size, at);
        let accept = p.cr_accept_func.unwrap();
        assert_eq!(accept(cr, b.ep, over, pd), arg(3));
        ok(p.cr_query_func.unwrap()(cr, 0, &mut param));
        ok(accept(cr, b.ep, at, pd));
        let ev = t.next(a.conn);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_EVENT_ESTABLISHED);
        // The REP's private data field comes whole (IB CM carries no length): the accepted
        // bytes first.
        let got = ev.event_data.connect_event_data;
        assert!(got.private_data_size >= at, "{}", got.private_data_size);
        assert_eq!(
            core::slice::from_raw_parts(got.private_data as *const u8, limit),
            &data[..limit]
        );
        assert_eq!(
            t.next(b.conn).event_number,
            d::DAT_CONNECTION_EVENT_ESTABLISHED
        );
        // dat_cr_reject: one byte more is argument 2 and the request stays pending; a
        // reject at the limit then answers it.
        ok(connect(ep2, at));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
        let cr = ev.event_data.cr_arrival_event_data.cr_handle;
        assert_eq!(p.cr_reject_func.unwrap()(cr, over, pd), arg(2));
        ok(p.cr_reject_func.unwrap()(cr, at, pd));
        assert_eq!(
            p.cr_reject_func.unwrap()(cr, 0, core::ptr::null_mut()) & d::DAT_TYPE_MASK,
            d::DAT_INVALID_HANDLE,
            "the CR handle is gone once the request is answered"
        );
        let ev = t.next(a.conn);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_EVENT_PEER_REJECTED);
        assert_eq!(ev.event_data.connect_event_data.ep_handle, ep2);
        ok(p.psp_free_func.unwrap()(psp));
    }
}

/// The argument numbers of entries whose arguments are laid out unlike their neighbours':
/// the IB extension macros (dat_ib_extensions.h: the handle is 1, the operation code not
/// counted), dat_ep_common_connect (dat.h: private_data_size is 4) and dat_cno_trigger (its
/// EVD is 2).
#[test]
fn argument_numbers_of_the_extension_ops_common_connect_and_cno_trigger() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage; the
    // shim reads as many variadic arguments as each operation takes.
    unsafe {
        let a = side(p, t.a.0);
        let mut l = a.triplet(0, 8);
        let remote = rmr_triplet(1, 0, 8);
        let r = &remote as *const d::DAT_RMR_TRIPLET;
        let no_r: *const d::DAT_RMR_TRIPLET = core::ptr::null();
        let lp = &mut l as *mut d::DAT_LMR_TRIPLET;
        let no_l: *mut d::DAT_LMR_TRIPLET = null as *mut _;
        let write_immed =
            |n: d::DAT_COUNT, l: *mut d::DAT_LMR_TRIPLET, r: *const d::DAT_RMR_TRIPLET| {
                extension(a.ep, |args| {
                    d::shim_dat_unpack_variadic(
                        args,
                        d::DAT_IB_RDMA_WRITE_IMMED_OP as d::DAT_EXTENDED_OP,
                        n,
                        l,
                        cookie(1),
                        r,
                        7u32,
                        0 as d::DAT_COMPLETION_FLAGS,
                    )
                })
            };
        assert_eq!(write_immed(-1, lp, r), arg(2), "count");
        assert_eq!(write_immed(1, no_l, r), arg(3), "local IOV");
        assert_eq!(write_immed(1, lp, no_r), arg(5), "remote");
        let cmp_swap = |l: *mut d::DAT_LMR_TRIPLET, r: *const d::DAT_RMR_TRIPLET| {
            extension(a.ep, |args| {
                d::shim_dat_unpack_variadic(
                    args,
                    d::DAT_IB_CMP_AND_SWAP_OP as d::DAT_EXTENDED_OP,
                    1u64,
                    2u64,
                    l,
                    cookie(2),
                    r,
                    0 as d::DAT_COMPLETION_FLAGS,
                )
            })
        };
        assert_eq!(cmp_swap(no_l, r), arg(4), "local IOV");
        assert_eq!(cmp_swap(lp, no_r), arg(6), "remote");
        let fetch_add = |l: *mut d::DAT_LMR_TRIPLET, r: *const d::DAT_RMR_TRIPLET, flags: u32| {
            extension(a.ep, |args| {
                d::shim_dat_unpack_variadic(
                    args,
                    d::DAT_IB_FETCH_AND_ADD_OP as d::DAT_EXTENDED_OP,
                    1u64,
                    l,
                    cookie(3),
                    r,
                    flags as d::DAT_COMPLETION_FLAGS,
                )
            })
        };
        assert_eq!(fetch_add(no_l, r, 0), arg(3), "local IOV");
        assert_eq!(fetch_add(lp, no_r, 0), arg(5), "remote");
        assert_eq!(fetch_add(lp, r, 0x8000_0000), arg(6), "flags");

        let common = p.ep_common_connect_func.unwrap();
        let peer = SockAddr::new(IP_B);
        let long = [0u8; 64];
        let pd = long.as_ptr() as d::DAT_PVOID;
        assert_eq!(common(a.ep, core::ptr::null_mut(), 0, 0, null), arg(2));
        assert_eq!(
            common(a.ep, peer.as_dat(), 0, -1, pd),
            arg(4),
            "negative size"
        );
        assert_eq!(common(a.ep, peer.as_dat(), 0, 4, null), arg(5), "NULL data");
        assert_eq!(common(a.ep, peer.as_dat(), 0, 64, pd), arg(4), "too long");

        let mut cno = null;
        let agent = d::DAT_OS_WAIT_PROXY_AGENT::default();
        ok(p.cno_create_func.unwrap()(t.a.0, agent, &mut cno));
        assert_eq!(p.cno_trigger_func.unwrap()(cno, null as *mut _), arg(2));
        let mut evd = null;
        assert_eq!(
            p.cno_trigger_func.unwrap()(cno, &mut evd),
            err(d::DAT_TIMEOUT_EXPIRED, 0),
            "nothing made it ready"
        );
        ok(p.cno_free_func.unwrap()(cno));
    }
}

/// dat_ep_connect's flags: a required multipath is DAT_MODEL_NOT_SUPPORTED (one port, one
/// path: `Multipath::check`), a value dat.h does not define is argument 8; a requested
/// multipath is a hint and connects.
#[test]
fn connect_flags_refuse_a_required_multipath_and_unknown_values_through_the_c_table() {
    let t = ias();
    let p = t.p;
    let null = core::ptr::null_mut();
    // SAFETY (all calls): this provider's entries with live handles and local storage.
    unsafe {
        let (a, b, _psp) = b_listening(&t);
        let peer = SockAddr::new(IP_B);
        let connect = |flags| {
            p.ep_connect_func.unwrap()(
                a.ep,
                peer.as_dat(),
                QUAL,
                d::DAT_TIMEOUT::MAX,
                0,
                null,
                d::DAT_QOS_BEST_EFFORT,
                flags,
            )
        };
        assert_eq!(
            connect(d::DAT_CONNECT_MULTIPATH_REQUIRED_FLAG),
            err(d::DAT_MODEL_NOT_SUPPORTED, 0)
        );
        assert_eq!(connect(4), arg(8));
        assert_eq!(
            state_of(p, a.ep),
            d::DAT_EP_STATE_UNCONNECTED,
            "nothing sent"
        );
        ok(connect(d::DAT_CONNECT_MULTIPATH_FLAG));
        let ev = t.next(b.cr);
        assert_eq!(ev.event_number, d::DAT_CONNECTION_REQUEST_EVENT);
    }
}
