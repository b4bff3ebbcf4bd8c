//! Roles for a peer that dies (the test kills it with SIGKILL):
//!
//! * `sink --qual Q [--echo]`: the passive side of a `stream` connection. It receives (and,
//!   with `--echo`, answers each message with a send); the test kills the streaming client.
//!   With `--echo` its sends go unanswered and the connection breaks; with only receives
//!   posted nothing it sends can fail, so, like an application's own timeout, it disconnects
//!   after a second without traffic. Either way every posted DTO must complete (flushed after
//!   the first error, none lost), the EP end DISCONNECTED, and the process then serves a new
//!   connection (`server` with one connection).
//! * `hold --qual Q`: takes a connection request, prints `REQUEST`, waits for a line on stdin
//!   (the test kills the requester meanwhile), then accepts: the REP goes unanswered and the
//!   EP must end without ESTABLISHED; then it serves a new connection.
//! * `verify --server IP --qual Q [--timeout-ms T]`: connects (with a timeout) and moves
//!   verified data. When the connection does not come up (the server died during set-up),
//!   it reports the event, prints `NO_CONNECTION`, waits for a line on stdin (the test starts
//!   a new server) and connects again.

use super::*;

/// Quiet time after which a receive-only survivor gives the peer up.
const IDLE: Duration = Duration::from_secs(1);
/// Longest wait for the end of a connection whose peer died.
const END_WAIT: Duration = Duration::from_secs(120);
const SINK_RECVS: u64 = 32;
const ECHO_BIT: u64 = 1 << 62;

fn flush_stdout(line: &str) {
    println!("{line}");
    let _ = std::io::stdout().flush();
}

fn read_stdin_line() -> Result<(), String> {
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    Ok(())
}

/// Waits for connection request on a fresh PSP of `qual`; the PSP is freed again.
fn take_request(x: &Ctx, qual: u64) -> Result<Handle, String> {
    let mut psp = Handle::NULL;
    must(
        "dat_psp_create",
        c::psp_create(x.ia, qual, x.cr, Some(&mut psp)),
    )?;
    flush_stdout("READY");
    let cr = match c::evd_wait(x.cr, INFINITE, true) {
        Ok(Event::ConnectionRequest { cr }) => cr,
        Ok(e) => return Err(format!("CR EVD: {e:?}")),
        Err(e) => return Err(format!("dat_evd_wait(CR): {}", code_name(e))),
    };
    must("dat_psp_free", c::psp_free(psp))?;
    Ok(cr)
}

pub(crate) fn sink(name: &str, qual: u64, echo: bool, r: &mut Report) -> Result<(), String> {
    let case = if echo {
        "dead_active.echo"
    } else {
        "dead_active.receives_only"
    };
    {
        let x = Ctx::open(name)?;
        let bufs = x.lmr(Region::new(MSG * SINK_RECVS as usize, 0))?;
        let seg = |i: u64| bufs.seg(i * MSG as u64, MSG as u32);
        // Where the stream's RDMA writes land.
        let target = x.lmr(Region::new(8 * MSG, 0))?;
        let info = Info {
            target: target.remote(0, 8 * MSG as u32),
            ..Info::default()
        };
        let cr = take_request(&x, qual)?;
        let ep = x.ep(Some(attr(SINK_RECVS as i32, SINK_RECVS as i32, 2)))?;
        for i in 0..SINK_RECVS {
            must(
                "dat_ep_post_recv",
                c::ep_post_recv(ep, Some(&[seg(i)]), 1, i, 0),
            )?;
        }
        must("dat_cr_accept", c::cr_accept(cr, ep, &info.encode()))?;
        let (mut posted, mut done) = (SINK_RECVS, 0u64);
        let (mut received, mut first_error, mut not_flushed) = (0u64, None, 0u64);
        let (mut event, mut disconnected_by_us) = (None, false);
        let mut last = Instant::now();
        let deadline = Instant::now() + END_WAIT;
        while (event.is_none() || done < posted) && Instant::now() < deadline {
            if let Some((cookie, status, _)) = x.dto_event(Duration::from_millis(20)) {
                done += 1;
                last = Instant::now();
                if status != SUCCESS {
                    if first_error.is_none() {
                        first_error = Some(status);
                    } else if status != FLUSHED {
                        not_flushed += 1;
                    }
                } else if cookie & ECHO_BIT == 0 && first_error.is_none() && event.is_none() {
                    received += 1;
                    if received == 100 {
                        flush_stdout("STREAMING");
                    }
                    if c::ep_post_recv(ep, Some(&[seg(cookie)]), 1, cookie, 0) == d::DAT_SUCCESS {
                        posted += 1;
                    }
                    if echo
                        && c::ep_post_send(
                            ep,
                            Some(&[bufs.seg(cookie * MSG as u64, 64)]),
                            1,
                            ECHO_BIT | cookie,
                            0,
                        ) == d::DAT_SUCCESS
                    {
                        posted += 1;
                    }
                }
            }
            while let Ok(e) = c::evd_dequeue(x.conn) {
                if let Event::Connection { number, .. } = e {
                    if number != ESTABLISHED {
                        event.get_or_insert(number);
                    }
                }
            }
            if !echo && !disconnected_by_us && received >= 100 && last.elapsed() > IDLE {
                // An application's own timeout: the peer is gone, give the connection up.
                must("dat_ep_disconnect", c::ep_disconnect(ep, true))?;
                disconnected_by_us = true;
            }
        }
        let want = if echo {
            BROKEN
        } else {
            d::DAT_CONNECTION_EVENT_DISCONNECTED
        };
        r.event(&format!("{case}.connection_event"), want, event);
        r.check(
            &format!("{case}.no_completion_lost"),
            &format!("{posted} DTOs completed"),
            &format!("{done} DTOs completed"),
        );
        r.check(
            &format!("{case}.outstanding_flushed"),
            "the rest flushed after the first error",
            &if first_error.is_some() && not_flushed == 0 {
                "the rest flushed after the first error".to_string()
            } else {
                format!(
                    "first error {:?}, {not_flushed} not flushed",
                    first_error.map(status_name)
                )
            },
        );
        r.state(&format!("{case}.state"), EP_DISCONNECTED, ep_state(ep));
        println!(
            "INFO {case}: {received} received, then {:?}",
            event.map(event_name)
        );
        must("dat_ep_free", c::ep_free(ep))?;
    }
    flush_stdout("SURVIVED");
    server(name, qual, 1, r)
}

pub(crate) fn hold(name: &str, qual: u64, r: &mut Report) -> Result<(), String> {
    {
        let x = Ctx::open(name)?;
        let bufs = x.lmr(Region::new(MSG, 0))?;
        let cr = take_request(&x, qual)?;
        flush_stdout("REQUEST");
        read_stdin_line()?;
        let ep = x.ep(None)?;
        must(
            "dat_ep_post_recv",
            c::ep_post_recv(ep, Some(&[bufs.seg(0, MSG as u32)]), 1, 1, 0),
        )?;
        must(
            "dat_cr_accept",
            c::cr_accept(cr, ep, &Info::default().encode()),
        )?;
        let event = x.conn_event(END_WAIT).map(|e| e.0);
        r.check(
            "dead_during_setup.passive_event",
            "an end other than ESTABLISHED",
            match event {
                None => "no event",
                Some(ESTABLISHED) => "ESTABLISHED with a dead peer",
                Some(_) => "an end other than ESTABLISHED",
            },
        );
        // The receive posted before the accept is flushed, not lost.
        let recv = x.dto_event(T).map(|e| e.1);
        r.status("dead_during_setup.passive_receive_flushed", FLUSHED, recv);
        r.check(
            "dead_during_setup.passive_state",
            "not connected",
            &match ep_state(ep) {
                Ok(EP_CONNECTED) => "connected".into(),
                Ok(_) => "not connected".into(),
                Err(e) => format!("query failed: {}", code_name(e)),
            },
        );
        println!("INFO hold: {:?}", event.map(event_name));
        must("dat_ep_free", c::ep_free(ep))?;
    }
    flush_stdout("SURVIVED");
    server(name, qual, 1, r)
}

pub(crate) fn verify(
    name: &str,
    server: IpAddr,
    qual: u64,
    timeout: Duration,
    r: &mut Report,
) -> Result<(), String> {
    let x = Ctx::open(name)?;
    let local = x.lmr(local_region())?;
    let ep = x.ep(None)?;
    must(
        "dat_ep_connect",
        c::ep_connect(ep, server, qual, timeout.as_micros() as u32, &[]),
    )?;
    let ep = match x.conn_event(timeout + T) {
        Some((ESTABLISHED, pd)) => {
            let info = Info::decode(&pd).ok_or("short accept private data")?;
            let got = verified_traffic(&x, ep, &info, &local, 9).unwrap_or_else(|e| e);
            r.check("verify.traffic", VERIFIED, &got);
            ep
        }
        other => {
            let event = other.map(|e| e.0);
            r.check(
                "dead_during_setup.active_event",
                "TIMED_OUT or UNREACHABLE",
                &match event {
                    Some(d::DAT_CONNECTION_EVENT_TIMED_OUT)
                    | Some(d::DAT_CONNECTION_EVENT_UNREACHABLE) => {
                        "TIMED_OUT or UNREACHABLE".into()
                    }
                    e => format!("{:?}", e.map(event_name)),
                },
            );
            r.state(
                "dead_during_setup.active_state",
                EP_DISCONNECTED,
                ep_state(ep),
            );
            must("dat_ep_free", c::ep_free(ep))?;
            flush_stdout("NO_CONNECTION");
            read_stdin_line()?;
            let (ep, info) = connect(&x, server, qual, None)?;
            let got = verified_traffic(&x, ep, &info, &local, 10).unwrap_or_else(|e| e);
            r.check("reconnect_after_dead_server", VERIFIED, &got);
            ep
        }
    };
    close(&x, ep)
}
