//! `roce-bw --api dat`: the client's stream through the DAT C API, the way a uDAPL program
//! drives the provider. libdat2 loads the provider library through dat.conf (`--ia NAME`,
//! `DAT_OVERRIDE`); each message is one `dat_ep_post_rdma_write` / `_read` / `_send`, or one
//! `dat_ib_post_fetch_and_add` (the IB extension, through `dat_extension_op`), one in
//! `--cq-mod` without `DAT_COMPLETION_SUPPRESS_FLAG`; completions come from
//! `dat_evd_dequeue`. The server is the same Rust server as for `--api rust`, so the two APIs'
//! figures differ only by the front end.
//!
//! Every op, `-b` and `--verify` work as with the Rust API; `--raw` does not (a DAT consumer
//! has no port of its own to blast). A DAT SEND carries no immediate data, so this client's
//! control messages are RDMA WRITEs with immediate (`dat_ib_post_rdma_write_immed`) into the
//! server's control inboxes, and a verified WRITE's marker is a zero-length one.

use super::stream::{self, Poster, StreamSet};
use super::*;
use dat_sys as d;
use dat_sys::consumer::{self as c, Event, Handle, Lmr, Remote, Segment};
use dpdk_roce::dat::immediate;
use roce_bench::dat::{dat_err, evd, lmr, must, open_ia};
use roce_perf::perftest::RULE;
use roce_perf::progress::Progress;

/// The cookie bit of the receives (control messages from the server, its `-b` stream).
const RECV_COOKIE: u64 = 1 << 62;

/// One IA with its PZ, EVDs and registered memory, and the test's EPs.
struct DatSide {
    ia: Handle,
    dto: Handle,
    conn: Handle,
    eps: Vec<Handle>,
    out: (Lmr, &'static c::Region),
    inc: (Lmr, &'static c::Region),
    rx: (Lmr, &'static c::Region),
    layout: Layout,
    params: Params,
    peer: RemoteBuf,
    set: StreamSet,
    size: usize,
    ctl_sent: usize,
    ctl_in: VecDeque<Ctl>,
    timeout: Duration,
    /// `received_total` when the test of the current size started.
    received_base: u64,
}

impl DatSide {
    fn post_recv(&mut self, qp: usize, slot: usize) -> Result<(), String> {
        let seg = Segment {
            addr: self.rx.0.addr + self.layout.rx(qp, slot),
            len: self.layout.rx_stride as u32,
            lmr_context: self.rx.0.lmr_context,
        };
        let cookie = RECV_COOKIE | ((slot as u64) << 16) | qp as u64;
        must(
            "dat_ep_post_recv",
            c::ep_post_recv(self.eps[qp], Some(&[seg]), 1, cookie, 0),
        )
    }

    /// A control message to the server on EP 0: written into the server's inbox, with the
    /// immediate `CTL_BIT | inbox` (DAT has no SEND with immediate to mark it in a SEND stream).
    fn send_ctl(&mut self, ctl: Ctl) -> Result<(), String> {
        let i = self.ctl_sent % CTL_SLOTS;
        self.ctl_sent += 1;
        let off = self.layout.ctl(i);
        self.out.1.write(off as usize, &ctl.to_bytes());
        let seg = self.out.0.seg(off, CTL_LEN as u32);
        let remote = Remote {
            addr: self.peer.addr + self.layout.inbox(i),
            len: CTL_LEN as u32,
            rmr_context: self.peer.rkey,
        };
        must(
            "dat_ib_post_rdma_write_immed",
            c::ep_post_write_immed(
                self.eps[0],
                &[seg],
                CTL_WRID,
                remote,
                wire_imm(CTL_BIT | i as u32),
                d::DAT_COMPLETION_DEFAULT_FLAG,
            ),
        )
    }

    fn wait_ctl(&mut self, what: &str) -> Result<Ctl, String> {
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(c) = self.ctl_in.pop_front() {
                return Ok(c);
            }
            self.completions()?;
            if Instant::now() > deadline {
                return Err(format!("timed out waiting for {what}"));
            }
        }
    }

    /// Dequeues every DTO event there is.
    fn completions(&mut self) -> Result<(), String> {
        let mut any = false;
        loop {
            match c::evd_dequeue(self.dto) {
                Ok(Event::Dto {
                    cookie,
                    status,
                    len,
                    imm,
                    ..
                }) => {
                    if status != d::DAT_DTO_SUCCESS {
                        return Err(format!("DTO {cookie:#x} completed with status {status}"));
                    }
                    if cookie & RECV_COOKIE != 0 {
                        let queued = self.ctl_in.len();
                        self.received(cookie, len, imm.map(immediate::to_transport))?;
                        if self.ctl_in.len() > queued {
                            // The caller acts on it first: behind a READY come the
                            // server's messages of the next size.
                            break;
                        }
                    } else if cookie != CTL_WRID {
                        self.stream_done((cookie & 0xffff) as usize, cookie >> 16)?;
                        any = true;
                    }
                }
                Ok(other) => return Err(format!("unexpected event on the DTO EVD: {other:?}")),
                Err(rc) if rc & d::DAT_TYPE_MASK == d::DAT_QUEUE_EMPTY => break,
                Err(rc) => return Err(dat_err("dat_evd_dequeue", rc)),
            }
        }
        if any {
            self.set.sample();
        }
        Ok(())
    }

    /// A signaled message of the stream completed: it and every one before it on its EP.
    fn stream_done(&mut self, qp: usize, seq: u64) -> Result<(), String> {
        let Some(s) = self.set.streams.get(qp).copied() else {
            return Err(format!("completion of an unknown EP: {qp} {seq}"));
        };
        if self.params.verify {
            let off = self.slot(qp, seq) as usize;
            match self.params.op {
                Op::Read => {
                    let b = self.out.1.read(off, self.size);
                    check_read_source(&b, off).map_err(|e| {
                        format!("RDMA READ {seq} of EP {qp} ({} B): {e}", self.size)
                    })?;
                }
                Op::Atomic => {
                    let got = u64::from_ne_bytes(
                        self.out.1.read(off, 8).try_into().map_err(|_| "atomic")?,
                    );
                    if got != s.atomics_seen {
                        return Err(format!(
                            "fetch-and-add {seq} of EP {qp} returned {got}, expected {}",
                            s.atomics_seen
                        ));
                    }
                }
                _ => {}
            }
        }
        self.set.completed_through(qp, seq);
        if self.params.op == Op::Atomic {
            self.set.streams[qp].atomics_seen += 1;
        }
        Ok(())
    }

    /// A receive completed: a control message, or the server's `-b` stream (a SEND, or a
    /// WRITE's marker), as in the Rust side's `received`.
    fn received(&mut self, cookie: u64, len: u32, imm: Option<u32>) -> Result<(), String> {
        let qp = (cookie & 0xffff) as usize;
        let slot = ((cookie & !RECV_COOKIE) >> 16) as usize;
        if qp >= self.eps.len() || slot >= self.layout.rx_per_qp {
            return Err(format!("receive of an unknown buffer {cookie:#x}"));
        }
        let at = self.layout.rx(qp, slot) as usize;
        let seq = self.set.streams[qp].received;
        match imm {
            Some(i) if i & CTL_BIT != 0 => self.read_ctl(at)?,
            None if self.params.op != Op::Send => self.read_ctl(at)?,
            Some(marker) => {
                // A WRITE's marker: the WRITE before it has landed.
                let expect = seq & u64::from(!CTL_BIT);
                if u64::from(marker) != expect {
                    return Err(format!("EP {qp}: marker {marker}, expected {expect}"));
                }
                let off = self.slot(qp, seq) as usize;
                self.check_message(self.inc.1, off, qp, seq, "WRITE")?;
                self.set.streams[qp].received += 1;
            }
            None => {
                if len as usize != self.size {
                    return Err(format!(
                        "EP {qp}: a SEND of {len} B, expected {}",
                        self.size
                    ));
                }
                if self.params.verify {
                    self.check_message(self.rx.1, at, qp, seq, "SEND")?;
                }
                self.set.streams[qp].received += 1;
            }
        }
        self.post_recv(qp, slot)
    }

    fn read_ctl(&mut self, at: usize) -> Result<(), String> {
        let b = self.rx.1.read(at, CTL_LEN);
        let ctl = Ctl::from_bytes(&b).ok_or_else(|| format!("unknown control message {b:?}"))?;
        self.ctl_in.push_back(ctl);
        Ok(())
    }

    /// Message `seq` of EP `qp` must be at `off` of `r`.
    fn check_message(
        &self,
        r: &c::Region,
        off: usize,
        qp: usize,
        seq: u64,
        what: &str,
    ) -> Result<(), String> {
        let b = r.read(off, self.size);
        payload::check(&b, qp as u64, seq)
            .map_err(|e| format!("{what} {seq} of EP {qp} ({} B): {e}", self.size))
    }

    /// Offset of message `seq` of EP `qp` in `out` and in the peer's `inc`.
    fn slot(&self, qp: usize, seq: u64) -> u64 {
        self.layout
            .slot(qp, (seq % self.layout.slots as u64) as usize)
    }

    /// Starts the test of one size: `-n` messages per EP, or until `-D` stops it; none when
    /// only the server streams.
    fn start(&mut self, size: usize) {
        self.size = size;
        self.received_base = self.received_total();
        self.set.start(if self.params.duration_s > 0 {
            u64::MAX
        } else {
            u64::from(self.params.iters)
        });
    }

    fn received_total(&self) -> u64 {
        self.set.streams.iter().map(|s| s.received).sum()
    }

    fn received_now(&self) -> u64 {
        self.received_total() - self.received_base
    }
}

impl Poster for DatSide {
    fn streams(&mut self) -> &mut StreamSet {
        &mut self.set
    }

    /// One `dat_ep_post_rdma_write` / `_read` / `_send` / `dat_ib_post_fetch_and_add`,
    /// suppressed unless `signaled` (with `--verify`, a WRITE's marker behind it).
    fn post_message(&mut self, qp: usize, seq: u64, signaled: bool) -> Result<(), String> {
        let off = self.slot(qp, seq);
        let flags = |signaled: bool| {
            if signaled {
                d::DAT_COMPLETION_DEFAULT_FLAG
            } else {
                d::DAT_COMPLETION_SUPPRESS_FLAG
            }
        };
        let cookie = (seq << 16) | qp as u64;
        let verify = self.params.verify;
        match self.params.op {
            Op::Write | Op::Send if verify => {
                let msg = payload::message(qp as u64, seq, self.size);
                self.out.1.write(off as usize, &msg);
            }
            Op::Read if verify => self.out.1.write(off as usize, &vec![0u8; self.size]),
            _ => {}
        }
        let local = self.out.0.seg(off, self.size as u32);
        let remote = Remote {
            addr: self.peer.addr + off,
            len: self.size as u32,
            rmr_context: self.peer.rkey,
        };
        match self.params.op {
            Op::Atomic => {
                // The old value lands in the message slot; the counter is the EP's own.
                let rc = c::ep_post_fetch_add(
                    self.eps[qp],
                    1,
                    Segment { len: 8, ..local },
                    cookie,
                    Remote {
                        addr: self.peer.addr + self.layout.counter(qp),
                        len: 8,
                        rmr_context: self.peer.rkey,
                    },
                    flags(signaled),
                );
                must("dat_ib_post_fetch_and_add", rc)
            }
            Op::Send => must(
                "dat_ep_post_send",
                c::ep_post_send(self.eps[qp], Some(&[local]), 1, cookie, flags(signaled)),
            ),
            Op::Write | Op::Read => {
                let marker = verify && self.params.op == Op::Write;
                let rc = c::ep_post_rdma_one(
                    self.eps[qp],
                    self.params.op == Op::Write,
                    local,
                    cookie,
                    remote,
                    flags(signaled && !marker),
                );
                must("dat_ep_post_rdma", rc)?;
                if !marker {
                    return Ok(());
                }
                let rc = c::ep_post_write_immed(
                    self.eps[qp],
                    &[],
                    cookie,
                    Remote { len: 0, ..remote },
                    wire_imm((seq as u32) & !CTL_BIT),
                    flags(signaled),
                );
                must("dat_ib_post_rdma_write_immed", rc)
            }
        }
    }

    fn turn(&mut self) -> Result<(), String> {
        self.completions()
    }
}

pub(crate) fn client(args: &Args, p: Params, ia_name: &str) -> Result<(), String> {
    if p.raw {
        return Err("--raw needs --api rust (a DAT consumer has no port to blast)".into());
    }
    let server_ip = args.peer.server_ip.ok_or("--client needs --server-ip")?;
    let layout = Layout::new(&p)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let (ia, pz) = open_ia(ia_name)?;
    let qps = usize::from(p.qps);
    // Room for every outstanding request and receive of every EP: the provider's EVD ring
    // carries suppressed completions too (it drops them at dequeue).
    let requests = u32::from(p.tx_depth) * p.wrs_per_msg() + CTL_SLOTS as u32;
    let per_ep = requests + p.recv_depth();
    let qlen = i32::try_from(qps as u32 * per_ep)
        .unwrap_or(i32::MAX)
        .min(1 << 16);
    let dto = evd(ia, qlen, d::DAT_EVD_DTO_FLAG)?;
    let conn = evd(ia, qlen.min(8192), d::DAT_EVD_CONNECTION_FLAG)?;
    let out = lmr(ia, pz, layout.out_len())?;
    let inc = lmr(ia, pz, layout.inc_len())?;
    let rx = lmr(ia, pz, layout.rx_len())?;
    let mut side = DatSide {
        ia,
        dto,
        conn,
        eps: Vec::with_capacity(qps),
        out,
        inc,
        rx,
        layout,
        params: p,
        peer: RemoteBuf { addr: 0, rkey: 0 },
        set: StreamSet::new(qps, &p),
        size: p.max_size(),
        ctl_sent: 0,
        ctl_in: VecDeque::new(),
        timeout,
        received_base: 0,
    };
    let attr = c::EpAttr {
        max_recv_dtos: p.recv_depth() as i32,
        max_request_dtos: requests as i32,
        max_recv_iov: 1,
        max_request_iov: 1,
    };
    for idx in 0..p.qps {
        let mut ep = Handle::NULL;
        must(
            "dat_ep_create",
            c::ep_create(ia, pz, dto, dto, conn, Some(attr), Some(&mut ep)),
        )?;
        side.eps.push(ep);
        for slot in 0..side.layout.rx_per_qp {
            side.post_recv(usize::from(idx), slot)?;
        }
        let mut pdata = p.encode().to_vec();
        pdata.extend_from_slice(&idx.to_be_bytes());
        pdata.extend_from_slice(&encode_buf(inc.0.addr, inc.0.rmr_context));
        let us = u32::try_from(timeout.as_micros()).unwrap_or(c::INFINITE - 1);
        must(
            "dat_ep_connect",
            c::ep_connect(ep, server_ip, u64::from(args.peer.port), us, &pdata),
        )?;
    }
    let mut peer = None;
    for _ in 0..qps {
        match c::evd_wait(side.conn, timeout.as_micros() as u32, true) {
            Ok(Event::Connection {
                number,
                private_data,
                ..
            }) if number == d::DAT_CONNECTION_EVENT_ESTABLISHED => {
                let b = decode_buf(&private_data)?;
                if peer.is_some_and(|x| x != b) {
                    return Err("the server answered with two buffers".into());
                }
                peer = Some(b);
            }
            other => return Err(format!("connecting: {other:?}")),
        }
    }
    side.peer = peer.ok_or("no connection")?;
    eprintln!("{qps} connections up through libdat2 (IA {ia_name})");
    let device = format!("IA {ia_name} through libdat2");
    println!("{}", report::header(&p, args, &device, None));
    let mut rows = Vec::new();
    let sizes = p.sizes();
    let progress = Progress::sizes(sizes.len());
    for size in progress.wrap(sizes) {
        side.send_ctl(Ctl::Start { size: size as u64 })?;
        match side.wait_ctl("the server's READY")? {
            Ctl::Ready => {}
            other => return Err(format!("expected READY, got {other:?}")),
        }
        side.start(size);
        let mine = stream::run(&mut side, p.duration_s, timeout)?;
        side.send_ctl(Ctl::Done {
            sent: mine.sent,
            ns: mine.elapsed.as_nanos() as u64,
            received: side.received_now(),
            cpu_ns: mine.cpu_ns,
        })?;
        let server_done = side.wait_ctl("the server's end of the test")?;
        let received = side.received_now();
        let row = report::row(args, &p, size, 1, &mine, received, server_done, None)?;
        progress.println(&report::row_text(&row, args.cpu_util));
        rows.push(row);
    }
    drop(progress);
    println!("{RULE}");
    for &ep in &side.eps {
        let _ = c::ep_disconnect(ep, false);
    }
    for _ in 0..qps {
        match c::evd_wait(side.conn, timeout.as_micros() as u32, true) {
            Ok(_) => {}
            Err(_) => break,
        }
    }
    // What was still posted is flushed (an error status): drained, not checked.
    let _ = side.completions();
    for &ep in &side.eps {
        let _ = c::ep_free(ep);
    }
    let _ = c::ia_close(side.ia, true);
    report::write_json(args, &p, None, &rows)?;
    report::write_plot(args, &p, &rows)
}

/// The DAT immediate whose wire bytes carry `value` as the server (the Rust host API, IBTA's
/// big-endian ImmDt) reads it: the DAT layer puts a DAT value's host-order bytes on the wire,
/// as the OFA provider does (`dpdk_roce::dat::immediate`).
fn wire_imm(value: u32) -> u32 {
    immediate::from_transport(value)
}
