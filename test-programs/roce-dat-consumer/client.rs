//! The `client` role: bad input on connections to the server.

use super::*;

pub(crate) const ESTABLISHED: u32 = d::DAT_CONNECTION_EVENT_ESTABLISHED;
pub(crate) const BROKEN: u32 = d::DAT_CONNECTION_EVENT_BROKEN;
pub(crate) const EP_CONNECTED: u32 = d::DAT_EP_STATE_CONNECTED;
pub(crate) const EP_DISCONNECTED: u32 = d::DAT_EP_STATE_DISCONNECTED;
pub(crate) const SUCCESS: u32 = d::DAT_DTO_SUCCESS;
pub(crate) const FLUSHED: u32 = d::DAT_DTO_ERR_FLUSHED;

/// A new EP connected to the server, and what the server's private data advertises.
pub(crate) fn connect(
    x: &Ctx,
    server: IpAddr,
    qual: u64,
    attr: Option<c::EpAttr>,
) -> Result<(Handle, Info), String> {
    let ep = x.ep(attr)?;
    must(
        "dat_ep_connect",
        c::ep_connect(ep, server, qual, INFINITE, &[]),
    )?;
    match x.conn_event(T) {
        Some((n, pd)) if n == ESTABLISHED => {
            Ok((ep, Info::decode(&pd).ok_or("short accept private data")?))
        }
        other => Err(format!(
            "connect: {}",
            other.map_or("no event".into(), |e| event_name(e.0))
        )),
    }
}

/// Disconnects `ep` if it is still connected, drains its completions and frees it.
pub(crate) fn close(x: &Ctx, ep: Handle) -> Result<(), String> {
    if ep_state(ep) == Ok(EP_CONNECTED) {
        must("dat_ep_disconnect", c::ep_disconnect(ep, true))?;
        let _ = x.conn_event(T);
    }
    while x.dto_event(Duration::from_millis(100)).is_some() {}
    must("dat_ep_free", c::ep_free(ep))
}

/// The completion of the one DTO just posted (None when none came within `T`).
pub(crate) fn completion(x: &Ctx) -> Option<u32> {
    x.dto_event(T).map(|e| e.1)
}

pub(crate) fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
        .collect()
}

pub(crate) const VERIFIED: &str = "256 bytes written, read back equal, send completed";

/// RDMA write of a pattern to the start of the server's target, RDMA read back, compared;
/// then a send. `Ok(description)` of what moved.
pub(crate) fn verified_traffic(
    x: &Ctx,
    ep: Handle,
    info: &Info,
    local: &c::Lmr,
    seed: u8,
) -> Result<String, String> {
    let data = pattern(256, seed);
    let region_off = 0u64;
    local_region_write(local, region_off, &data);
    let dst = Remote {
        len: 256,
        ..info.target
    };
    must(
        "dat_ep_post_rdma_write",
        c::ep_post_rdma_write(ep, &[local.seg(0, 256)], 1, dst),
    )?;
    let s = completion(x);
    if s != Some(SUCCESS) {
        return Err(format!(
            "RDMA write: {}",
            s.map_or("none".into(), status_name)
        ));
    }
    must(
        "dat_ep_post_rdma_read",
        c::ep_post_rdma_read(ep, &[local.seg(PAGE as u64, 256)], 2, dst),
    )?;
    let s = completion(x);
    if s != Some(SUCCESS) {
        return Err(format!(
            "RDMA read: {}",
            s.map_or("none".into(), status_name)
        ));
    }
    let back = local_region_read(local, PAGE as u64, 256);
    if back != data {
        return Err("RDMA read returned other bytes than written".into());
    }
    must(
        "dat_ep_post_send",
        c::ep_post_send(ep, Some(&[local.seg(0, 64)]), 1, 3, 0),
    )?;
    let s = completion(x);
    if s != Some(SUCCESS) {
        return Err(format!("send: {}", s.map_or("none".into(), status_name)));
    }
    Ok(VERIFIED.into())
}

/// The client's local buffer (registered whole by `Ctx::lmr`).
pub(crate) static LOCAL: std::sync::OnceLock<&'static Region> = std::sync::OnceLock::new();

pub(crate) fn local_region() -> &'static Region {
    LOCAL.get_or_init(|| Region::new(4 * PAGE, 0))
}

pub(crate) fn local_region_write(lmr: &c::Lmr, off: u64, data: &[u8]) {
    let r = local_region();
    r.write((lmr.addr - r.addr() + off) as usize, data);
}

pub(crate) fn local_region_read(lmr: &c::Lmr, off: u64, len: usize) -> Vec<u8> {
    let r = local_region();
    r.read((lmr.addr - r.addr() + off) as usize, len)
}

/// A DTO that must break the connection: its completion status, the connection event, the
/// EP's state, then the EP is freed.
pub(crate) fn breaking_case(
    x: &Ctx,
    r: &mut Report,
    case: &str,
    expected_status: u32,
    ep: Handle,
    post: impl FnOnce() -> u32,
) -> Result<(), String> {
    let rc = post();
    if rc != d::DAT_SUCCESS {
        r.code(&format!("{case}.post"), d::DAT_SUCCESS, rc);
    } else {
        r.status(&format!("{case}.status"), expected_status, completion(x));
        r.event(
            &format!("{case}.event"),
            BROKEN,
            x.conn_event(T).map(|e| e.0),
        );
        r.state(&format!("{case}.state"), EP_DISCONNECTED, ep_state(ep));
    }
    close(x, ep)
}

pub(crate) fn client(name: &str, server: IpAddr, qual: u64, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let local = x.lmr(local_region())?;
    let mut pz2 = Handle::NULL;
    must("dat_pz_create", c::pz_create(x.ia, Some(&mut pz2)))?;
    let other =
        c::lmr_create(x.ia, pz2, Region::new(PAGE, 0), 0, PAGE, PRIV_ALL).map_err(code_name)?;
    let freed = x.lmr(Region::new(PAGE, 0))?;
    must("dat_lmr_free", c::lmr_free(freed.handle))?;

    // One connection for the cases that are refused at the call and do not break it.
    let (ep, info) = connect(&x, server, qual, Some(attr(8, 4, 2)))?;
    let got = verified_traffic(&x, ep, &info, &local, 1).unwrap_or_else(|e| e);
    r.check("baseline_traffic", VERIFIED, &got);
    let seg = local.seg(0, 64);
    r.code(
        "post_send_too_many_iovs",
        arg(2),
        c::ep_post_send(ep, Some(&[seg, seg, seg]), 3, 1, 0),
    );
    r.code(
        "post_send_lmr_of_other_pz",
        err(d::DAT_PROTECTION_VIOLATION, d::DAT_PROTECTION_READ),
        c::ep_post_send(ep, Some(&[other.seg(0, 64)]), 1, 1, 0),
    );
    r.code(
        "post_send_null_iov",
        arg(3),
        c::ep_post_send(ep, None, 1, 1, 0),
    );
    for i in 0..4 {
        must(
            "dat_ep_post_send",
            c::ep_post_send(ep, Some(&[seg]), 1, 100 + i, 0),
        )?;
    }
    r.code(
        "post_send_beyond_request_depth",
        err(d::DAT_INSUFFICIENT_RESOURCES, 0),
        c::ep_post_send(ep, Some(&[seg]), 1, 104, 0),
    );
    let done: Vec<u32> = (0..4).filter_map(|_| completion(&x)).collect();
    r.check(
        "post_send_beyond_request_depth.completions",
        "4 x DAT_DTO_SUCCESS",
        &if done.iter().all(|&s| s == SUCCESS) {
            format!("{} x DAT_DTO_SUCCESS", done.len())
        } else {
            format!(
                "{:?}",
                done.iter().map(|&s| status_name(s)).collect::<Vec<_>>()
            )
        },
    );
    r.state(
        "still_connected_after_refused_posts",
        EP_CONNECTED,
        ep_state(ep),
    );
    close(&x, ep)?;

    // RDMA to memory the server did not register for it: each breaks its connection.
    let bad: [(&str, bool, Remote); 7] = [
        (
            "rdma_write_unregistered_rkey",
            true,
            Remote {
                rmr_context: info.target.rmr_context ^ 0x5a5a_0000,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_write_freed_rkey",
            true,
            Remote {
                len: 64,
                ..info.freed
            },
        ),
        (
            "rdma_write_other_pz_rkey",
            true,
            Remote {
                len: 64,
                ..info.other_pz
            },
        ),
        (
            "rdma_write_out_of_bounds",
            true,
            Remote {
                addr: info.target.addr + u64::from(info.target.len) - 16,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_write_wrapping_address",
            true,
            Remote {
                addr: u64::MAX - 15,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_read_unregistered_rkey",
            false,
            Remote {
                rmr_context: info.target.rmr_context ^ 0x5a5a_0000,
                len: 64,
                ..info.target
            },
        ),
        (
            "rdma_read_out_of_bounds",
            false,
            Remote {
                addr: info.target.addr + u64::from(info.target.len) - 16,
                len: 64,
                ..info.target
            },
        ),
    ];
    for (case, write, remote) in bad {
        let (ep, _) = connect(&x, server, qual, None)?;
        breaking_case(&x, r, case, d::DAT_DTO_ERR_REMOTE_ACCESS, ep, || {
            if write {
                c::ep_post_rdma_write(ep, &[local.seg(0, 64)], 7, remote)
            } else {
                c::ep_post_rdma_read(ep, &[local.seg(0, 64)], 7, remote)
            }
        })?;
    }

    // Local segments the provider cannot use: reported in the completion (the provider checks
    // them when the request is processed), and the connection breaks.
    let local_bad: [(&str, Segment); 3] = [
        (
            "post_send_segment_longer_than_lmr",
            Segment {
                len: local.len + 1,
                ..local.seg(0, 0)
            },
        ),
        (
            "post_send_unknown_lmr_context",
            Segment {
                lmr_context: local.lmr_context ^ 0x5a5a_0000,
                ..local.seg(0, 64)
            },
        ),
        ("post_send_freed_lmr", freed.seg(0, 64)),
    ];
    for (case, seg) in local_bad {
        let (ep, _) = connect(&x, server, qual, None)?;
        breaking_case(&x, r, case, d::DAT_DTO_ERR_LOCAL_PROTECTION, ep, || {
            c::ep_post_send(ep, Some(&[seg]), 1, 9, 0)
        })?;
    }

    // A message longer than the receive buffer the peer posted (4096 bytes): the peer's
    // receive completes with DAT_DTO_ERR_LOCAL_LENGTH and NAKs (invalid request), the send
    // completes with DAT_DTO_ERR_REMOTE_RESPONDER.
    // The peer breaks its end too (its receive failed), so whichever side's teardown arrives
    // first decides between BROKEN (ours) and DISCONNECTED (the peer's DREQ).
    let (ep, _) = connect(&x, server, qual, None)?;
    must(
        "dat_ep_post_send",
        c::ep_post_send(ep, Some(&[local.seg(0, 2 * MSG as u32)]), 1, 11, 0),
    )?;
    r.status(
        "send_longer_than_peer_receive.status",
        d::DAT_DTO_ERR_REMOTE_RESPONDER,
        completion(&x),
    );
    let ev = x.conn_event(T).map(|e| e.0);
    let either = [BROKEN, d::DAT_CONNECTION_EVENT_DISCONNECTED];
    r.line(
        "send_longer_than_peer_receive.event",
        "DAT_CONNECTION_EVENT_BROKEN|DAT_CONNECTION_EVENT_DISCONNECTED",
        &ev.map_or("no event".into(), event_name),
        ev.is_some_and(|e| either.contains(&e)),
    );
    r.state(
        "send_longer_than_peer_receive.state",
        EP_DISCONNECTED,
        ep_state(ep),
    );
    // Posts in the wrong state: requests on the DISCONNECTED EP.
    r.code(
        "post_send_disconnected",
        err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_DISCONNECTED),
        c::ep_post_send(ep, Some(&[local.seg(0, 64)]), 1, 12, 0),
    );
    r.code(
        "post_rdma_write_disconnected",
        err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_DISCONNECTED),
        c::ep_post_rdma_write(ep, &[local.seg(0, 64)], 13, info.target),
    );
    close(&x, ep)?;

    // A connection qualifier nobody listens on: the remote provider rejects.
    let ep = x.ep(None)?;
    must(
        "dat_ep_connect",
        c::ep_connect(ep, server, qual + 1, INFINITE, &[]),
    )?;
    r.event(
        "connect_no_listener",
        d::DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
        x.conn_event(T).map(|e| e.0),
    );
    r.state("connect_no_listener.state", EP_DISCONNECTED, ep_state(ep));
    close(&x, ep)?;

    // And the server still serves.
    let (ep, info) = connect(&x, server, qual, None)?;
    let got = verified_traffic(&x, ep, &info, &local, 2).unwrap_or_else(|e| e);
    r.check("traffic_after_bad_input", VERIFIED, &got);
    close(&x, ep)
}
