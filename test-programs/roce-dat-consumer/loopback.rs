//! The `loopback` role: two EPs of one IA connected through the IA's own address (the port
//! delivers frames to its own MAC to itself), SEND/RECV, RDMA WRITE and READ between them, the
//! seed pages' connected-state rules, and the disconnect seen by both.

use super::*;

const WAIT: Duration = Duration::from_secs(10);

pub(crate) fn loopback(name: &str, own: IpAddr, qual: u64, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let mut psp = Handle::NULL;
    must(
        "dat_psp_create",
        c::psp_create(x.ia, qual, x.cr, Some(&mut psp)),
    )?;
    let (a, b) = (x.ep(None)?, x.ep(None)?);
    let (src_r, dst_r) = (Region::new(MSG, 0), Region::new(MSG, 0));
    let (src, dst) = (x.lmr(src_r)?, x.lmr(dst_r)?);
    must(
        "dat_ep_post_recv",
        c::ep_post_recv(b, Some(&[dst.seg(0, 64)]), 1, 1, 0),
    )?;
    r.code(
        "loopback.connect_to_own_address",
        d::DAT_SUCCESS,
        c::ep_connect(a, own, qual, INFINITE, b"self"),
    );
    let cr = match c::evd_wait(x.cr, WAIT.as_micros() as u32, true) {
        Ok(Event::ConnectionRequest { cr }) => cr,
        other => return Err(format!("no connection request over loopback: {other:?}")),
    };
    r.code("loopback.accept", d::DAT_SUCCESS, c::cr_accept(cr, b, &[]));
    for side in ["first", "second"] {
        r.event(
            &format!("loopback.established.{side}"),
            d::DAT_CONNECTION_EVENT_ESTABLISHED,
            x.conn_event(WAIT).map(|e| e.0),
        );
    }
    r.state(
        "loopback.active_ep_state",
        d::DAT_EP_STATE_CONNECTED,
        ep_state(a),
    );
    r.state(
        "loopback.passive_ep_state",
        d::DAT_EP_STATE_CONNECTED,
        ep_state(b),
    );

    // SEND/RECV: both completions, the bytes in the receive buffer.
    src_r.write(0, b"loopback");
    must(
        "dat_ep_post_send",
        c::ep_post_send(a, Some(&[src.seg(0, 8)]), 1, 2, 0),
    )?;
    let mut done: Vec<(u64, u32, u32)> = (0..2).filter_map(|_| x.dto_event(WAIT)).collect();
    done.sort();
    r.check(
        "loopback.send_recv.completions",
        &format!(
            "{:?}",
            [(1, d::DAT_DTO_SUCCESS, 8), (2, d::DAT_DTO_SUCCESS, 8)]
        ),
        &format!("{done:?}"),
    );
    r.check(
        "loopback.send_recv.data",
        "loopback",
        &String::from_utf8_lossy(&dst_r.read(0, 8)),
    );
    // RDMA WRITE into the other EP's memory, RDMA READ back from it.
    must(
        "dat_ep_post_rdma_write",
        c::ep_post_rdma_write(a, &[src.seg(0, 8)], 3, dst.remote(1000, 8)),
    )?;
    r.status(
        "loopback.rdma_write",
        d::DAT_DTO_SUCCESS,
        x.dto_event(WAIT).map(|e| e.1),
    );
    r.check(
        "loopback.rdma_write.data",
        "loopback",
        &String::from_utf8_lossy(&dst_r.read(1000, 8)),
    );
    dst_r.write(2000, b"back");
    must(
        "dat_ep_post_rdma_read",
        c::ep_post_rdma_read(a, &[src.seg(100, 4)], 4, dst.remote(2000, 4)),
    )?;
    r.status(
        "loopback.rdma_read",
        d::DAT_DTO_SUCCESS,
        x.dto_event(WAIT).map(|e| e.1),
    );
    r.check(
        "loopback.rdma_read.data",
        "back",
        &String::from_utf8_lossy(&src_r.read(100, 4)),
    );

    // The seed pages in CONNECTED: dat_ep_modify refuses what changes only before a
    // connection; get_status, recv_query and set_watermark answer.
    let param = c::ep_query(b).map_err(code_name)?;
    r.code(
        "loopback.modify_connected",
        err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_EP_CONNECTED),
        c::ep_modify(b, 0x0008_0000, Some(&param)),
    );
    let (rc, q) = c::ep_recv_query_some(b, [true, true]);
    r.code("loopback.recv_query", d::DAT_SUCCESS, rc);
    r.check(
        "loopback.recv_query.values",
        "[Some(0), Some(0)]",
        &format!("{q:?}"),
    );
    r.code(
        "loopback.set_watermark",
        d::DAT_SUCCESS,
        c::ep_set_watermark(b, 4, -1),
    );
    let (rc, st) = c::ep_get_status_some(a, [true, true, true]);
    r.code("loopback.get_status", d::DAT_SUCCESS, rc);
    r.check(
        "loopback.get_status.idle",
        &format!("{:?}", [Some(d::DAT_EP_STATE_CONNECTED), Some(1), Some(1)]),
        &format!("{st:?}"),
    );

    // One side's disconnect reaches both.
    r.code(
        "loopback.disconnect",
        d::DAT_SUCCESS,
        c::ep_disconnect(a, true),
    );
    for side in ["first", "second"] {
        r.event(
            &format!("loopback.disconnected.{side}"),
            d::DAT_CONNECTION_EVENT_DISCONNECTED,
            x.conn_event(WAIT).map(|e| e.0),
        );
    }
    Ok(())
}
