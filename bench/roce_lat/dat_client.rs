//! `roce-lat --api dat`: the client's iterations through the DAT C API against the same Rust
//! server, so a latency through the front end and through the Rust API differ only by it.
//! libdat2 loads the provider library through dat.conf (`--ia NAME`, `DAT_OVERRIDE`). RDMA
//! WRITE ping-pong (the WRITE posted with `DAT_COMPLETION_SUPPRESS_FLAG`, the peer's WRITE
//! seen in the buffer, the consumer calling `dat_evd_dequeue` meanwhile so that inline
//! progress runs), RDMA READ and the lone WRITE completion (`write-completion`: post, then
//! `dat_evd_dequeue` until its event). `--stages` times the loop's calls (`CallTimes`).

use super::*;
use dat_sys as d;
use dat_sys::consumer::{self as c, Event, Handle, Lmr, Remote, Segment};
use dpdk_roce::dpdk::Tsc;
use hdrhistogram::Histogram;
use roce_bench::dat::{dat_err, evd, lmr, must, open_ia};

/// `--stages` through DAT: how long each call of the client's loop takes, in TSC cycles, over
/// the measured iterations: the post, a `dat_evd_dequeue` that finds nothing (it drives the
/// port once: inline progress) and the one that returns the completion (it handles the
/// response frame, routes the completion to the EVD and converts the event).
struct CallTimes {
    post: Histogram<u64>,
    empty: Histogram<u64>,
    completing: Histogram<u64>,
    /// The TSC and the wall clock when the measured iterations began: the TSC's rate.
    start: (u64, Instant),
}

impl CallTimes {
    fn new() -> Self {
        let h = || Histogram::new(3).expect("3 significant digits");
        CallTimes {
            post: h(),
            empty: h(),
            completing: h(),
            start: (Tsc::read(), Instant::now()),
        }
    }

    /// The line `--stages` prints: medians in ns, and empty dequeues per operation.
    fn line(&self, size: usize) -> String {
        let ns_per_cycle = self.start.1.elapsed().as_nanos() as f64
            / Tsc::read().saturating_sub(self.start.0).max(1) as f64;
        let ns = |h: &Histogram<u64>| (h.value_at_quantile(0.5) as f64 * ns_per_cycle).round();
        let ops = self.post.len().max(1) as f64;
        let mut line = format!(
            "stages client {size} B (DAT): post {} ns, empty dequeue {} ns ({:.1} per op)",
            ns(&self.post),
            ns(&self.empty),
            self.empty.len() as f64 / ops
        );
        if !self.completing.is_empty() {
            line += &format!(", completing dequeue {} ns", ns(&self.completing));
        }
        line + " (medians)"
    }
}

/// Times `call` into `h` when `times` is on.
fn timed<T>(
    times: &mut Option<CallTimes>,
    h: fn(&mut CallTimes) -> &mut Histogram<u64>,
    call: impl FnOnce() -> T,
) -> T {
    let Some(t) = times.as_mut() else {
        return call();
    };
    let t0 = Tsc::read();
    let r = call();
    let _ = h(t).record(Tsc::read().saturating_sub(t0));
    r
}

/// The IA, its DTO EVD, the connected EP and both buffers.
struct Dat {
    ia: Handle,
    dto: Handle,
    conn: Handle,
    ep: Handle,
    src: (Lmr, &'static c::Region),
    dst: (Lmr, &'static c::Region),
    peer: Remote,
    timeout: Duration,
}

impl Dat {
    /// One `dat_evd_dequeue`: the next DTO event (an error status is an error), or None.
    fn dequeue(&self) -> Result<Option<u64>, String> {
        match c::evd_dequeue(self.dto) {
            Ok(Event::Dto { cookie, status, .. }) if status == d::DAT_DTO_SUCCESS => {
                Ok(Some(cookie))
            }
            Ok(other) => Err(format!("unexpected DTO event: {other:?}")),
            Err(rc) if rc & d::DAT_TYPE_MASK == d::DAT_QUEUE_EMPTY => Ok(None),
            Err(rc) => Err(dat_err("dat_evd_dequeue", rc)),
        }
    }

    /// Dequeues until the completion of `cookie` arrives.
    fn wait_completion(
        &self,
        cookie: u64,
        what: &str,
        times: &mut Option<CallTimes>,
    ) -> Result<(), String> {
        let deadline = Instant::now() + self.timeout;
        let mut n = 0u32;
        loop {
            let t0 = Tsc::read();
            let got = self.dequeue()?;
            if let Some(t) = times.as_mut() {
                let h = if got.is_some() {
                    &mut t.completing
                } else {
                    &mut t.empty
                };
                let _ = h.record(Tsc::read().saturating_sub(t0));
            }
            match got {
                Some(c) if c == cookie => return Ok(()),
                Some(c) => return Err(format!("completion {c} while waiting for {cookie}")),
                None => {}
            }
            n = n.wrapping_add(1);
            if n.is_multiple_of(CLOCK_EVERY) && Instant::now() > deadline {
                return Err(format!("timed out waiting for {what}"));
            }
        }
    }

    /// Polls the last byte of the destination for `v`, dequeueing meanwhile (inline progress).
    fn wait_byte(&self, size: usize, v: u8, times: &mut Option<CallTimes>) -> Result<(), String> {
        let deadline = Instant::now() + self.timeout;
        let mut n = 0u32;
        loop {
            if let Some(c) = timed(times, |t| &mut t.empty, || self.dequeue())? {
                return Err(format!(
                    "unexpected completion {c} (the WRITEs are suppressed)"
                ));
            }
            if self.dst.1.read(size - 1, 1).first() == Some(&v) {
                return Ok(());
            }
            n = n.wrapping_add(1);
            if n.is_multiple_of(CLOCK_EVERY) && Instant::now() > deadline {
                return Err("timed out waiting for the peer's RDMA WRITE".into());
            }
        }
    }

    fn post(&self, write: bool, size: usize, cookie: u64, flags: u32) -> Result<(), String> {
        let (lmr, what) = if write {
            (&self.src.0, "dat_ep_post_rdma_write")
        } else {
            (&self.dst.0, "dat_ep_post_rdma_read")
        };
        let seg = Segment {
            addr: lmr.addr,
            len: size as u32,
            lmr_context: lmr.lmr_context,
        };
        let remote = Remote {
            len: size as u32,
            ..self.peer
        };
        must(
            what,
            c::ep_post_rdma_one(self.ep, write, seg, cookie, remote, flags),
        )
    }
}

/// Opens the IA, connects one EP to the server and exchanges buffers as the Rust client does.
fn connect(args: &Args, ia_name: &str) -> Result<Dat, String> {
    let server_ip = args.peer.server_ip.ok_or("--client needs --server-ip")?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let (ia, pz) = open_ia(ia_name)?;
    let dto = evd(ia, 64, d::DAT_EVD_DTO_FLAG)?;
    let conn = evd(ia, 64, d::DAT_EVD_CONNECTION_FLAG)?;
    let src = lmr(ia, pz, MAX_SIZE)?;
    let dst = lmr(ia, pz, MAX_SIZE)?;
    let mut ep = Handle::NULL;
    let attr = c::EpAttr {
        max_recv_dtos: 8,
        max_request_dtos: 64,
        max_recv_iov: 1,
        max_request_iov: 1,
    };
    must(
        "dat_ep_create",
        c::ep_create(ia, pz, dto, dto, conn, Some(attr), Some(&mut ep)),
    )?;
    // What the Rust client sends: its destination buffer (address, R_Key, length).
    let mut pdata = Vec::with_capacity(16);
    pdata.extend_from_slice(&dst.0.addr.to_be_bytes());
    pdata.extend_from_slice(&dst.0.rmr_context.to_be_bytes());
    pdata.extend_from_slice(&dst.0.len.to_be_bytes());
    let us = u32::try_from(timeout.as_micros()).unwrap_or(c::INFINITE - 1);
    must(
        "dat_ep_connect",
        c::ep_connect(ep, server_ip, u64::from(args.peer.port), us, &pdata),
    )?;
    let peer = match c::evd_wait(conn, us, true) {
        Ok(Event::Connection {
            number,
            private_data,
            ..
        }) if number == d::DAT_CONNECTION_EVENT_ESTABLISHED => {
            let (addr, rkey) = decode_buffer(&private_data)?;
            Remote {
                addr,
                len: 0,
                rmr_context: rkey,
            }
        }
        other => return Err(format!("connecting: {other:?}")),
    };
    eprintln!("connected through libdat2 (IA {ia_name})");
    Ok(Dat {
        ia,
        dto,
        conn,
        ep,
        src,
        dst,
        peer,
        timeout,
    })
}

pub(crate) fn client(args: &Args, ia_name: &str) -> Result<(), String> {
    if args.op == Op::Send || args.raw || args.with_raw || args.payload.verify {
        return Err("--api dat measures write, read and write-completion \
                    (no --raw, --with-raw or --verify)"
            .into());
    }
    if args.capture.is_some() {
        return Err("--api dat: capture through the profile's [engine] capture key".into());
    }
    let x = connect(args, ia_name)?;
    let scale = if args.op.passive_peer() {
        Scale::Full
    } else {
        Scale::HalfRoundTrip
    };
    let mut series = Vec::new();
    let sizes = sizes(args);
    let progress = Progress::sizes(sizes.len());
    for size in progress.wrap(sizes) {
        let mut s = LatencySeries::new(size, scale);
        let mut times = None;
        for i in 1..=args.warmup + args.iters {
            if args.stages && i == args.warmup + 1 {
                times = Some(CallTimes::new());
            }
            let t0 = Instant::now();
            let post = |times: &mut Option<CallTimes>, write, flags| {
                timed(
                    times,
                    |t| &mut t.post,
                    || x.post(write, size, i as u64, flags),
                )
            };
            match args.op {
                Op::Write => {
                    x.src.1.write(size - 1, &[tag(i)]);
                    post(&mut times, true, d::DAT_COMPLETION_SUPPRESS_FLAG)?;
                    x.wait_byte(size, tag(i), &mut times)?;
                }
                Op::Read => {
                    post(&mut times, false, d::DAT_COMPLETION_DEFAULT_FLAG)?;
                    x.wait_completion(i as u64, "the RDMA READ", &mut times)?;
                }
                Op::WriteCompletion => {
                    post(&mut times, true, d::DAT_COMPLETION_DEFAULT_FLAG)?;
                    x.wait_completion(i as u64, "the RDMA WRITE's completion", &mut times)?;
                }
                Op::Send => unreachable!("refused above"),
            }
            if i > args.warmup {
                s.record(t0.elapsed().as_nanos() as u64);
            }
        }
        if let Some(t) = &times {
            progress.println(&t.line(size));
        }
        series.push(s);
    }
    // The server ends on the disconnect.
    must("dat_ep_disconnect", c::ep_disconnect(x.ep, false))?;
    let _ = c::evd_wait(x.conn, x.timeout.as_micros() as u32, true);
    while x.dequeue().is_ok_and(|c| c.is_some()) {}
    let _ = c::ep_free(x.ep);
    let _ = c::ia_close(x.ia, true);
    report(args, args.op.label(), "DAT LMR (consumer heap)", &series)
}
