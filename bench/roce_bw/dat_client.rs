//! `roce-bw --api dat`: the client's stream through the DAT C API, the way a uDAPL program
//! drives the provider. libdat2 loads the provider library through dat.conf (`--ia NAME`,
//! `DAT_OVERRIDE`); each message is one `dat_ep_post_rdma_write` / `_read`, or one
//! `dat_ib_post_fetch_and_add` (the IB extension, through `dat_extension_op`), one in
//! `--cq-mod` without `DAT_COMPLETION_SUPPRESS_FLAG`; completions come from
//! `dat_evd_dequeue`. The server is the same Rust server as for `--api rust`, so the two APIs'
//! figures differ only by the front end. RDMA WRITE, READ and fetch-and-add streams, one
//! direction, no `--verify` or `--raw` (the DAT side has no SEND with immediate for the verify
//! markers and no port of its own to blast).

use super::common::dat::{dat_err, evd, lmr, must, open_ia};
use super::report::{print_header, print_row};
use super::stream::{self, Poster, StreamSet};
use super::*;
use dat_sys as d;
use dat_sys::consumer::{self as c, Event, Handle, Lmr, Remote, Segment};

/// The cookie bit of the receives (control messages from the server).
const RECV_COOKIE: u64 = 1 << 62;

/// One IA with its PZ, EVDs and registered memory, and the test's EPs.
struct DatSide {
    ia: Handle,
    dto: Handle,
    conn: Handle,
    eps: Vec<Handle>,
    out: (Lmr, &'static c::Region),
    rx: (Lmr, &'static c::Region),
    layout: Layout,
    params: Params,
    peer: RemoteBuf,
    set: StreamSet,
    size: usize,
    ctl_sent: usize,
    ctl_in: VecDeque<Ctl>,
    timeout: Duration,
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

    /// A control message to the server on EP 0 (a plain SEND: DAT has no immediate data).
    fn send_ctl(&mut self, ctl: Ctl) -> Result<(), String> {
        let off = self.layout.ctl(self.ctl_sent);
        self.ctl_sent += 1;
        self.out.1.write(off as usize, &ctl.to_bytes());
        let seg = Segment {
            addr: self.out.0.addr + off,
            len: CTL_LEN as u32,
            lmr_context: self.out.0.lmr_context,
        };
        must(
            "dat_ep_post_send",
            c::ep_post_send(self.eps[0], Some(&[seg]), 1, CTL_WRID, 0),
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
                Ok(Event::Dto { cookie, status, .. }) => {
                    if status != d::DAT_DTO_SUCCESS {
                        return Err(format!("DTO {cookie:#x} completed with status {status}"));
                    }
                    if cookie & RECV_COOKIE != 0 {
                        let qp = (cookie & 0xffff) as usize;
                        let slot = ((cookie & !RECV_COOKIE) >> 16) as usize;
                        if qp >= self.eps.len() || slot >= self.layout.rx_per_qp {
                            return Err(format!("receive of an unknown buffer {cookie:#x}"));
                        }
                        let b = self.rx.1.read(self.layout.rx(qp, slot) as usize, CTL_LEN);
                        let ctl = Ctl::from_bytes(&b)
                            .ok_or_else(|| format!("unknown control message {b:?}"))?;
                        self.ctl_in.push_back(ctl);
                        self.post_recv(qp, slot)?;
                    } else if cookie != CTL_WRID {
                        if !self
                            .set
                            .completed_through((cookie & 0xffff) as usize, cookie >> 16)
                        {
                            return Err(format!("completion of an unknown EP: {cookie:#x}"));
                        }
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

    /// Starts the stream of one size (`-n` messages per EP, or until `-D` stops it).
    fn start(&mut self, size: usize) {
        self.size = size;
        self.set.start(if self.params.duration_s > 0 {
            u64::MAX
        } else {
            u64::from(self.params.iters)
        });
    }
}

impl Poster for DatSide {
    fn streams(&mut self) -> &mut StreamSet {
        &mut self.set
    }

    /// One `dat_ep_post_rdma_write` / `_read` / `dat_ib_post_fetch_and_add`, suppressed
    /// unless `signaled`.
    fn post_message(&mut self, qp: usize, seq: u64, signaled: bool) -> Result<(), String> {
        let off = self
            .layout
            .slot(qp, (seq % self.layout.slots as u64) as usize);
        let flags = if signaled {
            d::DAT_COMPLETION_DEFAULT_FLAG
        } else {
            d::DAT_COMPLETION_SUPPRESS_FLAG
        };
        if self.params.op == Op::Atomic {
            // The old value lands in the message slot; the counter is the QP's own.
            let rc = c::ep_post_fetch_add(
                self.eps[qp],
                1,
                Segment {
                    addr: self.out.0.addr + off,
                    len: 8,
                    lmr_context: self.out.0.lmr_context,
                },
                (seq << 16) | qp as u64,
                Remote {
                    addr: self.peer.addr + self.layout.counter(qp),
                    len: 8,
                    rmr_context: self.peer.rkey,
                },
                flags,
            );
            return must("dat_ib_post_fetch_and_add", rc);
        }
        let rc = c::ep_post_rdma_one(
            self.eps[qp],
            self.params.op == Op::Write,
            Segment {
                addr: self.out.0.addr + off,
                len: self.size as u32,
                lmr_context: self.out.0.lmr_context,
            },
            (seq << 16) | qp as u64,
            Remote {
                addr: self.peer.addr + off,
                len: self.size as u32,
                rmr_context: self.peer.rkey,
            },
            flags,
        );
        must("dat_ep_post_rdma", rc)
    }

    fn turn(&mut self) -> Result<(), String> {
        self.completions()
    }
}

pub(crate) fn client(args: &Args, p: Params, ia_name: &str) -> Result<(), String> {
    if !matches!(p.op, Op::Write | Op::Read | Op::Atomic) || p.verify || p.raw || p.bidirectional {
        return Err(
            "--api dat streams RDMA WRITE, READ or fetch-and-add one way (no --verify, \
                    --raw or -b)"
                .into(),
        );
    }
    let server_ip = args.server_ip.ok_or("--client needs --server-ip")?;
    let layout = Layout::new(&p)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    let (ia, pz) = open_ia(ia_name)?;
    let qps = usize::from(p.qps);
    // Room for every outstanding request and receive of every EP: the provider's EVD ring
    // carries suppressed completions too (it drops them at dequeue).
    let per_ep = u32::from(p.tx_depth) + CTL_SLOTS as u32 + p.recv_depth();
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
        rx,
        layout,
        params: p,
        peer: RemoteBuf { addr: 0, rkey: 0 },
        set: StreamSet::new(qps, &p),
        size: p.max_size(),
        ctl_sent: 0,
        ctl_in: VecDeque::new(),
        timeout,
    };
    let attr = c::EpAttr {
        max_recv_dtos: p.recv_depth() as i32,
        max_request_dtos: i32::from(p.tx_depth) + CTL_SLOTS as i32,
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
            c::ep_connect(ep, server_ip, u64::from(args.port), us, &pdata),
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
    print_header(&p, report::unit(args), None);
    let mut rows = Vec::new();
    let sizes = p.sizes();
    if sizes.is_empty() {
        return Err("-a needs -s of at least 2".into());
    }
    for size in sizes {
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
            received: 0,
            cpu_ns: mine.cpu_ns,
        })?;
        let server_done = side.wait_ctl("the server's end of the test")?;
        let row = report::row(args, &p, size, 1, &mine, server_done, None)?;
        print_row(&row);
        rows.push(row);
    }
    println!("{}", "-".repeat(95));
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
    report::write_json(args, &p, None, &rows)
}
