//! The `local` role: bad input that needs no peer.

use super::*;

pub(crate) fn local(name: &str, nobody: IpAddr, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let inv = |sub| err(d::DAT_INVALID_HANDLE, sub);
    let lmr = x.lmr(Region::new(MSG, 0))?;
    let one = [lmr.seg(0, 64)];

    // Handles: NULL, unissued, freed, forged, of the wrong type.
    r.code(
        "null_ep_post_send",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_send(Handle::NULL, Some(&one), 1, 1, 0),
    );
    r.code(
        "unissued_ia_pz_create",
        inv(d::DAT_INVALID_HANDLE_IA),
        c::pz_create(Handle::unissued_ia(77), Some(&mut scratch())),
    );
    let mut pz = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz)))?;
    must("dat_pz_free", c::pz_free(pz))?;
    r.code(
        "freed_pz_free",
        inv(d::DAT_INVALID_HANDLE_PZ),
        c::pz_free(pz),
    );
    let ep = x.ep(None)?;
    // Outputs the pages fill "if ... is not NULL": NULL ones are skipped, not refused.
    let (rc, _) = c::ep_get_status_some(ep, [false; 3]);
    r.code("ep_get_status_all_outputs_null", d::DAT_SUCCESS, rc);
    let (rc, got_state) = c::ep_get_status_some(ep, [true, false, false]);
    r.code("ep_get_status_state_only", d::DAT_SUCCESS, rc);
    r.state(
        "ep_get_status_state_only.state",
        d::DAT_EP_STATE_UNCONNECTED,
        got_state[0].ok_or(u32::MAX),
    );
    let (rc, idle) = c::ep_get_status_some(ep, [false, true, true]);
    r.code("ep_get_status_null_state", d::DAT_SUCCESS, rc);
    r.check(
        "ep_get_status_null_state.idle",
        "Some(1) Some(1)",
        &format!("{:?} {:?}", idle[1], idle[2]),
    );
    let (rc, _) = c::ep_recv_query_some(ep, [false, false]);
    r.code("ep_recv_query_both_outputs_null", d::DAT_SUCCESS, rc);
    let (rc, q) = c::ep_recv_query_some(ep, [false, true]);
    r.code("ep_recv_query_span_only", d::DAT_SUCCESS, rc);
    r.check(
        "ep_recv_query_span_only.span",
        "None Some(0)",
        &format!("{:?} {:?}", q[0], q[1]),
    );
    let forged = Forged::of(ep).ok_or("forge")?;
    r.code(
        "forged_ep_post_recv",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_recv(forged.handle(), Some(&one), 1, 1, 0),
    );
    r.code(
        "forged_ep_free",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_free(forged.handle()),
    );
    r.code(
        "pz_as_ep_post_send",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_send(x.pz, Some(&one), 1, 1, 0),
    );
    r.code(
        "evd_as_pz_free",
        inv(d::DAT_INVALID_HANDLE_PZ),
        c::pz_free(x.dto),
    );
    r.code(
        "lmr_as_ep_free",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_free(lmr.handle),
    );
    let freed = x.ep(None)?;
    must("dat_ep_free", c::ep_free(freed))?;
    r.code(
        "freed_ep_post_recv",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_post_recv(freed, Some(&one), 1, 1, 0),
    );
    r.code(
        "freed_ep_free",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_free(freed),
    );
    r.code(
        "freed_ep_connect",
        inv(d::DAT_INVALID_HANDLE_EP),
        c::ep_connect(freed, nobody, 4000, INFINITE, &[]),
    );
    let spare = x.lmr(Region::new(PAGE, 0))?;
    must("dat_lmr_free", c::lmr_free(spare.handle))?;
    r.code(
        "freed_lmr_free",
        inv(d::DAT_INVALID_HANDLE_LMR),
        c::lmr_free(spare.handle),
    );
    let mut psp = Handle::NULL;
    must(
        "dat_psp_create",
        c::psp_create(x.ia, 4001, x.cr, Some(&mut psp)),
    )?;
    must("dat_psp_free", c::psp_free(psp))?;
    r.code(
        "freed_psp_free",
        inv(d::DAT_INVALID_HANDLE_PSP),
        c::psp_free(psp),
    );
    r.code(
        "freed_ep_get_handle_type",
        err(d::DAT_INVALID_HANDLE, 0),
        c::get_handle_type(freed, Some(&mut 0)),
    );

    // The bad-handle matrix: the EP handle of every call of the five seed pages and every
    // post, NULL, forged, freed and of each other type: DAT_INVALID_HANDLE_EP, nothing done.
    // (Not an IA handle: libdat2's IA handles are indices into its own table, which libdat2
    // itself dereferences as a provider object when one is passed as another handle.)
    let param = c::ep_query(ep).map_err(code_name)?;
    let remote = Remote {
        addr: lmr.addr,
        len: 64,
        rmr_context: lmr.rmr_context,
    };
    for (kind, h) in [
        ("null", Handle::NULL),
        ("forged", forged.handle()),
        ("freed", freed),
        ("pz", x.pz),
        ("evd", x.dto),
        ("lmr", lmr.handle),
    ] {
        for (call, got) in [
            ("ep_get_status", c::ep_get_status_some(h, [true; 3]).0),
            ("ep_recv_query", c::ep_recv_query_some(h, [true; 2]).0),
            ("ep_set_watermark", c::ep_set_watermark(h, 1, 2)),
            ("ep_modify", c::ep_modify(h, 0x0008_0000, Some(&param))),
            ("ep_post_send", c::ep_post_send(h, Some(&one), 1, 1, 0)),
            ("ep_post_recv", c::ep_post_recv(h, Some(&one), 1, 1, 0)),
            (
                "ep_post_rdma_write",
                c::ep_post_rdma_write(h, &one, 1, remote),
            ),
            (
                "ep_post_rdma_read",
                c::ep_post_rdma_read(h, &one, 1, remote),
            ),
            ("ep_disconnect", c::ep_disconnect(h, false)),
            ("ep_free", c::ep_free(h)),
        ] {
            r.code(
                &format!("matrix.{call}.{kind}_ep"),
                inv(d::DAT_INVALID_HANDLE_EP),
                got,
            );
        }
    }
    // The handle of every other object's calls, NULL, forged, freed (of its own kind) and of
    // another type (an EP): DAT_INVALID_HANDLE with the subtype of the argument's kind,
    // nothing done.
    let mut freed_evd = Handle::NULL;
    must(
        "dat_evd_create",
        c::evd_create(x.ia, 8, d::DAT_EVD_DTO_FLAG, Some(&mut freed_evd)),
    )?;
    must("dat_evd_free", c::evd_free(freed_evd))?;
    let mut freed_rmr = Handle::NULL;
    must("dat_rmr_create", c::rmr_create(x.pz, Some(&mut freed_rmr)))?;
    must("dat_rmr_free", c::rmr_free(freed_rmr))?;
    let rsp_ep = x.ep(None)?;
    let mut freed_rsp = Handle::NULL;
    must(
        "dat_rsp_create",
        c::rsp_create(x.ia, 4002, rsp_ep, x.cr, Some(&mut freed_rsp)),
    )?;
    must("dat_rsp_free", c::rsp_free(freed_rsp))?;
    let qual = 4003;
    for (kind, pick) in [
        ("null", None),
        ("forged", Some(forged.handle())),
        ("freed", None),
        ("ep", Some(ep)),
    ] {
        // A freed handle of the call's own kind (none for a CR: no request came).
        let h = |own: Handle| pick.unwrap_or(if kind == "freed" { own } else { Handle::NULL });
        let mut out = Handle::NULL;
        let mut cases = vec![
            ("pz_free", d::DAT_INVALID_HANDLE_PZ, c::pz_free(h(pz))),
            (
                "lmr_free",
                d::DAT_INVALID_HANDLE_LMR,
                c::lmr_free(h(spare.handle)),
            ),
            (
                "rmr_create",
                d::DAT_INVALID_HANDLE_PZ,
                c::rmr_create(h(pz), Some(&mut out)),
            ),
            (
                "rmr_free",
                d::DAT_INVALID_HANDLE_RMR,
                c::rmr_free(h(freed_rmr)),
            ),
            (
                "evd_free",
                d::DAT_INVALID_HANDLE_EVD_REQUEST,
                c::evd_free(h(freed_evd)),
            ),
            (
                "evd_dequeue",
                d::DAT_INVALID_HANDLE_EVD_REQUEST,
                c::evd_dequeue(h(freed_evd)).err().unwrap_or(d::DAT_SUCCESS),
            ),
            (
                "evd_wait",
                d::DAT_INVALID_HANDLE_EVD_REQUEST,
                c::evd_wait(h(freed_evd), 0, true)
                    .err()
                    .unwrap_or(d::DAT_SUCCESS),
            ),
            (
                "evd_enable",
                d::DAT_INVALID_HANDLE_EVD_REQUEST,
                c::evd_set_enabled(h(freed_evd), true),
            ),
            (
                "evd_disable",
                d::DAT_INVALID_HANDLE_EVD_REQUEST,
                c::evd_set_enabled(h(freed_evd), false),
            ),
            (
                "psp_create",
                d::DAT_INVALID_HANDLE_EVD_CR,
                c::psp_create(x.ia, qual, h(freed_evd), Some(&mut out)),
            ),
            ("psp_free", d::DAT_INVALID_HANDLE_PSP, c::psp_free(h(psp))),
            (
                "rsp_create_evd",
                d::DAT_INVALID_HANDLE_EVD_CR,
                c::rsp_create(x.ia, qual, rsp_ep, h(freed_evd), Some(&mut out)),
            ),
            (
                "rsp_free",
                d::DAT_INVALID_HANDLE_RSP,
                c::rsp_free(h(freed_rsp)),
            ),
        ];
        if kind != "ep" {
            cases.push((
                "rsp_create_ep",
                d::DAT_INVALID_HANDLE_EP,
                c::rsp_create(x.ia, qual, h(freed), x.cr, Some(&mut out)),
            ));
        }
        if kind != "freed" {
            cases.push((
                "cr_accept",
                d::DAT_INVALID_HANDLE_CR,
                c::cr_accept(h(Handle::NULL), ep, &[]),
            ));
            cases.push((
                "cr_reject",
                d::DAT_INVALID_HANDLE_CR,
                c::cr_reject(h(Handle::NULL)),
            ));
        }
        for (call, sub, got) in cases {
            r.code(&format!("matrix.{call}.{kind}"), inv(sub), got);
        }
    }
    // Nothing was made on the qualifier the refused creates named.
    let mut psp2 = Handle::NULL;
    r.code(
        "matrix.psp_create.qualifier_still_free",
        d::DAT_SUCCESS,
        c::psp_create(x.ia, qual, x.cr, Some(&mut psp2)),
    );
    must("dat_psp_free", c::psp_free(psp2))?;
    must("dat_ep_free", c::ep_free(rsp_ep))?;

    // dat_ep_create's handles, each bad in turn (the others good): the subtype of the
    // argument; no EP is made.
    let create = |ia, pz, recv, req, conn| {
        let mut out = Handle::NULL;
        let rc = c::ep_create(ia, pz, recv, req, conn, None, Some(&mut out));
        if rc == d::DAT_SUCCESS {
            let _ = c::ep_free(out);
        }
        rc
    };
    for (kind, h) in [
        ("forged", forged.handle()),
        ("freed", freed),
        ("lmr", lmr.handle),
    ] {
        for (arg_name, got, sub) in [
            (
                "ia",
                create(h, x.pz, x.dto, x.dto, x.conn),
                d::DAT_INVALID_HANDLE_IA,
            ),
            (
                "pz",
                create(x.ia, h, x.dto, x.dto, x.conn),
                d::DAT_INVALID_HANDLE_PZ,
            ),
            (
                "recv_evd",
                create(x.ia, x.pz, h, x.dto, x.conn),
                d::DAT_INVALID_HANDLE_EVD_RECV,
            ),
            (
                "request_evd",
                create(x.ia, x.pz, x.dto, h, x.conn),
                d::DAT_INVALID_HANDLE_EVD_REQUEST,
            ),
            (
                "connect_evd",
                create(x.ia, x.pz, x.dto, x.dto, h),
                d::DAT_INVALID_HANDLE_EVD_CONN,
            ),
        ] {
            r.code(
                &format!("matrix.ep_create.{kind}_{arg_name}"),
                inv(sub),
                got,
            );
        }
    }
    // Counts out of range on the posts: DAT_INVALID_PARAMETER naming the count (argument 2).
    for (call, got) in [
        ("ep_post_send", c::ep_post_send(ep, Some(&one), -1, 1, 0)),
        ("ep_post_recv", c::ep_post_recv(ep, Some(&one), -1, 1, 0)),
        ("ep_set_watermark_soft", c::ep_set_watermark(ep, -2, 1)),
    ] {
        r.code(&format!("matrix.{call}.negative_count"), arg(2), got);
    }
    r.code(
        "matrix.ep_set_watermark_hard.negative_count",
        arg(3),
        c::ep_set_watermark(ep, 1, -2),
    );
    r.code(
        "matrix.ep_modify.null_param",
        arg(3),
        c::ep_modify(ep, 0x0008_0000, None),
    );
    // The pointer, count and flag arguments of the posts (on an UNCONNECTED EP: the
    // arguments are checked before the state): NULL IOV with a count, NULL remote triplet,
    // counts out of range, unknown completion flags.
    let many = vec![one[0]; 64];
    for (write, name) in [(true, "ep_post_rdma_write"), (false, "ep_post_rdma_read")] {
        let post = |count, iov, remote, flags| {
            c::ep_post_rdma_raw(ep, write, count, iov, 1, remote, flags)
        };
        for (what, expected, got) in [
            ("null_iov", arg(3), post(1, None, Some(remote), 0)),
            ("null_remote", arg(5), post(1, Some(&one[..]), None, 0)),
            (
                "negative_count",
                arg(2),
                post(-1, Some(&one[..]), Some(remote), 0),
            ),
            (
                "too_many_iovs",
                arg(2),
                post(64, Some(&many[..]), Some(remote), 0),
            ),
            (
                "unknown_flags",
                arg(6),
                post(1, Some(&one[..]), Some(remote), 0x8000),
            ),
        ] {
            r.code(&format!("matrix.{name}.{what}"), expected, got);
        }
    }
    r.code(
        "matrix.ep_post_send.null_iov",
        arg(3),
        c::ep_post_send(ep, None, 1, 1, 0),
    );
    r.code(
        "matrix.ep_post_send.too_many_iovs",
        arg(2),
        c::ep_post_send(ep, Some(&many), 64, 1, 0),
    );
    r.code(
        "matrix.ep_post_send.unknown_flags",
        arg(5),
        c::ep_post_send(ep, Some(&one), 1, 1, 0x8000),
    );
    r.code(
        "matrix.ep_post_recv.unknown_flags",
        arg(5),
        c::ep_post_recv(ep, Some(&one), 1, 1, 0x8000),
    );

    // NULL out-pointers: DAT_INVALID_PARAMETER naming the argument.
    r.code("null_pz_out", arg(2), c::pz_create(x.ia, None));
    r.code(
        "null_evd_out",
        arg(5),
        c::evd_create(x.ia, 8, d::DAT_EVD_DTO_FLAG, None),
    );
    r.code(
        "null_ep_out",
        arg(7),
        c::ep_create(x.ia, x.pz, x.dto, x.dto, x.conn, None, None),
    );
    r.code(
        "null_psp_out",
        arg(5),
        c::psp_create(x.ia, 9999, x.cr, None),
    );
    r.code(
        "null_handle_type_out",
        arg(2),
        c::get_handle_type(x.pz, None),
    );
    r.code(
        "null_event_evd_wait",
        arg(4),
        c::evd_wait(x.dto, 0, false).err().unwrap_or(d::DAT_SUCCESS),
    );
    r.code(
        "null_iov_post_recv",
        arg(3),
        c::ep_post_recv(ep, None, 1, 1, 0),
    );

    // Wrong sizes and depths on an UNCONNECTED EP (receives may be posted before connecting,
    // dat_ep_post_recv(3DAT)).
    let small = x.ep(Some(attr(4, 4, 2)))?;
    let three = [one[0], one[0], one[0]];
    r.code(
        "post_recv_too_many_iovs",
        arg(2),
        c::ep_post_recv(small, Some(&three), 3, 1, 0),
    );
    r.code(
        "post_recv_negative_count",
        arg(2),
        c::ep_post_recv(small, Some(&one), -1, 1, 0),
    );
    let mut pz2 = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz2)))?;
    let other = Region::new(MSG, 0);
    let lmr2 = c::lmr_create(x.ia, pz2, other, 0, MSG, PRIV_ALL).map_err(code_name)?;
    r.code(
        "post_recv_lmr_of_other_pz",
        err(d::DAT_PROTECTION_VIOLATION, d::DAT_PROTECTION_WRITE),
        c::ep_post_recv(small, Some(&[lmr2.seg(0, 64)]), 1, 1, 0),
    );
    r.code(
        "post_recv_unconnected_allowed",
        d::DAT_SUCCESS,
        c::ep_post_recv(small, Some(&one), 1, 10, 0),
    );
    for i in 1..4 {
        must(
            "dat_ep_post_recv",
            c::ep_post_recv(small, Some(&one), 1, 10 + i, 0),
        )?;
    }
    r.code(
        "post_recv_beyond_depth",
        err(d::DAT_INSUFFICIENT_RESOURCES, 0),
        c::ep_post_recv(small, Some(&one), 1, 99, 0),
    );

    // Posts in the wrong state.
    let unconnected = err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_UNCONNECTED);
    r.code(
        "post_send_unconnected",
        unconnected,
        c::ep_post_send(ep, Some(&one), 1, 1, 0),
    );
    let remote = lmr.remote(0, 64);
    r.code(
        "post_rdma_write_unconnected",
        unconnected,
        c::ep_post_rdma_write(ep, &one, 1, remote),
    );
    r.code(
        "post_rdma_read_unconnected",
        unconnected,
        c::ep_post_rdma_read(ep, &one, 1, remote),
    );

    // A connect nobody answers (ARP fails), with a timeout: TIMED_OUT, then DISCONNECTED.
    let lonely = x.ep(None)?;
    let start = Instant::now();
    must(
        "dat_ep_connect",
        c::ep_connect(lonely, nobody, 4000, 500_000, &[]),
    )?;
    r.event(
        "connect_timeout_nobody_answers",
        d::DAT_CONNECTION_EVENT_TIMED_OUT,
        x.conn_event(T).map(|e| e.0),
    );
    println!("INFO connect timeout 500 ms took {:?}", start.elapsed());
    r.state(
        "connect_timeout_ep_state",
        d::DAT_EP_STATE_DISCONNECTED,
        ep_state(lonely),
    );

    // The same without a timeout: ARP fails, so the request never left: UNREACHABLE.
    let lonelier = x.ep(None)?;
    must(
        "dat_ep_connect",
        c::ep_connect(lonelier, nobody, 4000, INFINITE, &[]),
    )?;
    r.event(
        "connect_nobody_answers_unreachable",
        d::DAT_CONNECTION_EVENT_UNREACHABLE,
        x.conn_event(T).map(|e| e.0),
    );
    r.state(
        "connect_nobody_answers_ep_state",
        d::DAT_EP_STATE_DISCONNECTED,
        ep_state(lonelier),
    );

    // dat_ia_open given an async EVD: an IA's own is shared (as the OFA provider does), any
    // other EVD is refused; the sharing IA's close leaves the EVD to its IA.
    let (mut wrong, mut ia2) = (x.dto, Handle::NULL);
    r.code(
        "ia_open_dto_evd_as_async_evd",
        inv(d::DAT_INVALID_HANDLE_EVD_ASYNC),
        c::ia_open(name, 8, Some(&mut wrong), Some(&mut ia2)),
    );
    let mut shared = x.async_evd;
    r.code(
        "ia_open_sharing_the_async_evd",
        d::DAT_SUCCESS,
        c::ia_open(name, 8, Some(&mut shared), Some(&mut ia2)),
    );
    r.check(
        "ia_open_sharing_the_async_evd.handle",
        &format!("{:?}", x.async_evd),
        &format!("{shared:?}"),
    );
    r.code(
        "ia_close_of_the_sharing_ia",
        d::DAT_SUCCESS,
        c::ia_close(ia2, false),
    );
    r.code(
        "shared_async_evd_stays_with_its_ia",
        d::DAT_QUEUE_EMPTY,
        // Its events so far (an unanswered ARP above) are dequeued, then it is empty.
        (0..1000)
            .find_map(|_| c::evd_dequeue(x.async_evd).err())
            .unwrap_or(d::DAT_SUCCESS),
    );

    // Closing the IA with live objects (abrupt) and using it afterwards.
    let ia = x.ia;
    must("dat_ia_close", c::ia_close(ia, true))?;
    r.code(
        "closed_ia_pz_create",
        inv(d::DAT_INVALID_HANDLE_IA),
        c::pz_create(ia, Some(&mut scratch())),
    );
    Ok(())
}
