//! The `stream` role: a long stream the test interrupts by killing the server (SIGKILL).

use super::*;

pub(crate) const STREAM_RECVS: u64 = 32;
pub(crate) const STREAM_WINDOW: u64 = 48;
pub(crate) const RECV_BIT: u64 = 1 << 63;

pub(crate) fn stream(name: &str, server: IpAddr, qual: u64, r: &mut Report) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let local = x.lmr(local_region())?;
    let rbufs = x.lmr(Region::new(MSG * STREAM_RECVS as usize, 0))?;
    let (ep, info) = connect(&x, server, qual, Some(attr(STREAM_RECVS as i32, 64, 2)))?;
    let (mut posted_req, mut posted_recv) = (0u64, 0u64);
    let mut done_req = std::collections::BTreeMap::<String, u64>::new();
    let mut done_recv = std::collections::BTreeMap::<String, u64>::new();
    let (mut n_req, mut n_recv) = (0u64, 0u64);
    for i in 0..STREAM_RECVS {
        must(
            "dat_ep_post_recv",
            c::ep_post_recv(
                ep,
                Some(&[rbufs.seg(i * MSG as u64, MSG as u32)]),
                1,
                RECV_BIT | i,
                0,
            ),
        )?;
        posted_recv += 1;
    }
    let mut ok = 0u64;
    let mut streaming = false;
    let mut first_error: Option<u32> = None;
    let mut after_first_error_not_flushed = 0u64;
    let mut event: Option<u32> = None;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut k = 0u64;
    loop {
        let outstanding = (posted_req - n_req) + (posted_recv - n_recv);
        if event.is_some() && outstanding == 0 {
            break;
        }
        if Instant::now() > deadline {
            break;
        }
        // Keep the window full while the connection is up.
        while first_error.is_none() && event.is_none() && posted_req - n_req < STREAM_WINDOW {
            let rc = if k.is_multiple_of(2) {
                c::ep_post_send(ep, Some(&[local.seg(0, MSG as u32)]), 1, k, 0)
            } else {
                let off = (k / 2 % 8) * MSG as u64;
                c::ep_post_rdma_write(
                    ep,
                    &[local.seg(0, MSG as u32)],
                    k,
                    Remote {
                        addr: info.target.addr + off,
                        len: MSG as u32,
                        ..info.target
                    },
                )
            };
            if rc != d::DAT_SUCCESS {
                break;
            }
            posted_req += 1;
            k += 1;
        }
        if let Some((cookie, status, _)) = x.dto_event(Duration::from_millis(20)) {
            let name = status_name(status);
            if cookie & RECV_BIT != 0 {
                n_recv += 1;
                *done_recv.entry(name).or_default() += 1;
            } else {
                n_req += 1;
                *done_req.entry(name).or_default() += 1;
            }
            if status == SUCCESS {
                ok += 1;
            } else if first_error.is_none() {
                first_error = Some(status);
            } else if status != FLUSHED {
                after_first_error_not_flushed += 1;
            }
        }
        if !streaming && ok >= 200 {
            streaming = true;
            println!("STREAMING");
            let _ = std::io::stdout().flush();
        }
        while let Ok(e) = c::evd_dequeue(x.conn) {
            if let Event::Connection { number, .. } = e {
                event.get_or_insert(number);
            }
        }
    }
    r.event("peer_killed.connection_event", BROKEN, event);
    r.check(
        "peer_killed.no_completion_lost",
        &format!("{posted_req} requests and {posted_recv} receives completed"),
        &format!("{n_req} requests and {n_recv} receives completed"),
    );
    println!(
        "INFO requests {done_req:?} receives {done_recv:?} first error {:?}",
        first_error.map(status_name)
    );
    let recv_flushed = done_recv.get("DAT_DTO_ERR_FLUSHED").copied().unwrap_or(0);
    r.check(
        "peer_killed.outstanding_flushed",
        "every completion after the first error DAT_DTO_ERR_FLUSHED, all receives flushed",
        &if after_first_error_not_flushed == 0 && recv_flushed == posted_recv && first_error.is_some() {
            "every completion after the first error DAT_DTO_ERR_FLUSHED, all receives flushed".to_string()
        } else {
            format!(
                "{after_first_error_not_flushed} not flushed after the first error, {recv_flushed} of {posted_recv} receives flushed"
            )
        },
    );
    r.state("peer_killed.state", EP_DISCONNECTED, ep_state(ep));
    must("dat_ep_free", c::ep_free(ep))?;
    println!("BROKEN");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    // The test started a new server: connect again and move verified data.
    let (ep, info) = connect(&x, server, qual, None)?;
    let got = verified_traffic(&x, ep, &info, &local, 3).unwrap_or_else(|e| e);
    r.check("reconnect_after_peer_killed", VERIFIED, &got);
    close(&x, ep)
}
