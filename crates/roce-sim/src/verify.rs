//! A verified workload over two engines (two ports connected by any wire): `n` connections,
//! QP `i` of each side on shard `i % shards`, SEND, RDMA WRITE with immediate, RDMA READ and
//! fetch-add on each, every byte and completion checked, then disconnect and destroy. Used by
//! the in-memory tests and by `roce-engine-pair` over real DPDK ports.

use crate::cm::{AcceptParams, ConnectParams};
use crate::engine::runtime::{ConnEvent, Engine, Event, EventSink, QpRoute};
use crate::host::QpOptions;
use crate::io::FrameIo;
use crate::mem::access::Access;
use crate::mem::vec_memory::{Region, VecMemory};
use crate::transport::types::{RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use crate::wire::psn::Psn;
use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Rights of every test region.
pub const ALL: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

/// One side of the workload.
pub struct Side<'a, Io: FrameIo> {
    pub engine: &'a Engine<VecMemory, Io>,
    /// Request, receive and connection events of every QP of this side.
    pub events: Arc<EventSink>,
    /// Connection requests (side B).
    pub requests: Arc<EventSink>,
}

/// What the workload did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub connections: usize,
    pub completions_a: usize,
    pub completions_b: usize,
    pub bytes_verified: usize,
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// Bytes of each SEND and WRITE.
pub const MSG: usize = 300;

fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 7 + j * 13 + 1) as u8).collect()
}

fn route<Io: FrameIo>(s: &Side<'_, Io>) -> QpRoute {
    QpRoute {
        request: Some(s.events.clone()),
        recv: Some(s.events.clone()),
        conn: Some(s.events.clone()),
        counters: None,
        async_events: None,
    }
}

/// Drives both engines (inline; core mode just waits) until `sink` has an event.
fn next_event<Io: FrameIo>(
    a: &Side<'_, Io>,
    b: &Side<'_, Io>,
    sink: &EventSink,
    what: &str,
) -> Result<Event, String> {
    let t0 = Instant::now();
    loop {
        if let Some(ev) = sink.queue.pop() {
            return Ok(ev);
        }
        let worked = a.engine.progress() | b.engine.progress();
        if !worked {
            std::thread::yield_now();
        }
        ensure!(
            t0.elapsed() < Duration::from_secs(60),
            "stalled waiting for {what}"
        );
    }
}

fn register<Io: FrameIo>(s: &Side<'_, Io>, shard: usize, len: usize) -> Result<Region, String> {
    s.engine
        .with_host(shard, move |h| h.register(1, len, ALL))
        .map_err(|e| e.to_string())
}

fn write_mem<Io: FrameIo>(
    s: &Side<'_, Io>,
    shard: usize,
    lkey: u32,
    at: usize,
    data: Vec<u8>,
) -> Result<(), String> {
    s.engine
        .with_host(shard, move |h| {
            h.mem
                .bytes_mut(lkey)
                .and_then(|b| b.get_mut(at..at + data.len()))
                .map(|b| b.copy_from_slice(&data))
                .is_some()
        })
        .map_err(|e| e.to_string())?
        .then_some(())
        .ok_or_else(|| "no such region".to_string())
}

fn read_mem<Io: FrameIo>(
    s: &Side<'_, Io>,
    shard: usize,
    lkey: u32,
    at: usize,
    len: usize,
) -> Result<Vec<u8>, String> {
    s.engine
        .with_host(shard, move |h| {
            h.mem
                .bytes(lkey)
                .and_then(|b| b.get(at..at + len))
                .map(<[u8]>::to_vec)
        })
        .map_err(|e| e.to_string())?
        .ok_or_else(|| "no such region".to_string())
}

struct Conn {
    qa: u32,
    qb: u32,
    ra: Region,
    rb: Region,
}

/// Runs the workload: A connects `n` QPs to B's listener on `port` at `ip_b`.
pub fn run<Io: FrameIo>(
    a: &Side<'_, Io>,
    b: &Side<'_, Io>,
    ip_b: Ipv4Addr,
    port: u16,
    n: usize,
) -> Result<Report, String> {
    let shards = a.engine.shards().min(b.engine.shards());
    let mut report = Report::default();
    let e = |e: crate::engine::runtime::EngineError| e.to_string();
    b.engine.listen(port, b.requests.clone()).map_err(e)?;
    let mut conns = Vec::new();
    for i in 0..n {
        let s = i % shards;
        let qa = a
            .engine
            .create_qp(s, QpOptions::default(), route(a))
            .map_err(e)?;
        let qb = b
            .engine
            .create_qp(s, QpOptions::default(), route(b))
            .map_err(e)?;
        ensure!(
            crate::engine::runtime::shard_of_qpn(qa, a.engine.shards()) == s,
            "QPN {qa:#x} is not in shard {s}'s space"
        );
        let ra = register(a, s, 4096)?;
        let rb = register(b, s, 4096)?;
        write_mem(a, s, ra.lkey, 0, pattern(i, MSG))?;
        write_mem(b, s, rb.lkey, 3072, pattern(i + 1000, 8))?;
        // Receives before connecting (INIT accepts them): SEND, WRITE-imm, one left over.
        for k in 0..3u64 {
            let wr = RecvWr {
                wr_id: (i as u64) << 8 | k,
                sgl: crate::sgl![Sge {
                    addr: rb.addr + k * 512,
                    len: 512,
                    lkey: rb.lkey,
                }],
            };
            b.engine.post_recv(qb, wr).map_err(e)?;
        }
        conns.push(Conn { qa, qb, ra, rb });
    }
    for (i, c) in conns.iter().enumerate() {
        let mut p = ConnectParams::new(ip_b, port, c.qa, Psn::new(100 + i as u32));
        p.access = ALL;
        p.private_data = (i as u32).to_be_bytes().to_vec();
        a.engine.connect(p).map_err(e)?;
    }
    // B accepts each request on the QP its private data names.
    for _ in 0..n {
        let Event::Request(req) = next_event(a, b, &b.requests, "connection request")? else {
            return Err("B: not a connection request".into());
        };
        let i = req
            .private_data
            .get(..4)
            .map(|p| u32::from_be_bytes([p[0], p[1], p[2], p[3]]) as usize)
            .filter(|&i| i < n)
            .ok_or("request without our private data")?;
        let mut ap = AcceptParams::new(conns[i].qb, Psn::new(5000 + i as u32));
        ap.access = ALL;
        ap.private_data = vec![0xAB, i as u8];
        b.engine.accept(req.id, ap).map_err(e)?;
    }
    let mut up = HashSet::new();
    while up.len() < n {
        match next_event(a, b, &a.events, "A established")? {
            Event::Connection {
                qpn,
                event: ConnEvent::Established { private_data },
            } => {
                let i = conns
                    .iter()
                    .position(|c| c.qa == qpn)
                    .ok_or("A: event of a foreign QP")?;
                ensure!(
                    private_data.get(..2) == Some(&[0xAB, i as u8][..]),
                    "A {i}: REP private data {private_data:?}"
                );
                up.insert(qpn);
            }
            other => return Err(format!("A: unexpected {other:?}")),
        }
    }
    let mut up_b = 0;
    while up_b < n {
        match next_event(a, b, &b.events, "B established")? {
            Event::Connection {
                qpn,
                event: ConnEvent::Established { .. },
            } if conns.iter().any(|c| c.qb == qpn) => up_b += 1,
            other => return Err(format!("B: unexpected {other:?}")),
        }
    }
    report.connections = n;
    for (i, c) in conns.iter().enumerate() {
        let sge = |at: u64, len: u32| {
            vec![Sge {
                addr: c.ra.addr + at,
                len,
                lkey: c.ra.lkey,
            }]
        };
        let wrs = [
            (SendOp::Send, sge(0, MSG as u32)),
            (
                SendOp::WriteWithImm {
                    remote_addr: c.rb.addr + 1024,
                    rkey: c.rb.rkey,
                    imm: i as u32,
                },
                sge(0, MSG as u32),
            ),
            (
                SendOp::Read {
                    remote_addr: c.rb.addr + 3072,
                    rkey: c.rb.rkey,
                },
                sge(2048, 8),
            ),
            (
                SendOp::FetchAdd {
                    remote_addr: c.rb.addr + 3584,
                    rkey: c.rb.rkey,
                    add: i as u64 + 1,
                },
                sge(2560, 8),
            ),
        ];
        for (k, (op, sgl)) in wrs.into_iter().enumerate() {
            let wr = SendWr {
                wr_id: (i as u64) << 8 | k as u64,
                op,
                sgl: sgl.into(),
                signaled: true,
                fence: true,
                solicited: false,
            };
            a.engine.post_send(c.qa, wr).map_err(e)?;
        }
    }
    let want = [
        WcOpcode::Send,
        WcOpcode::RdmaWrite,
        WcOpcode::RdmaRead,
        WcOpcode::FetchAdd,
    ];
    while report.completions_a < 4 * n {
        let Event::Dto(wc) = next_event(a, b, &a.events, "A completions")? else {
            return Err("A: not a DTO".into());
        };
        let i = (wc.wr_id >> 8) as usize;
        ensure!(wc.status == WcStatus::Success, "A: {wc:?}");
        ensure!(i < n && wc.qp_num == conns[i].qa, "A: foreign {wc:?}");
        ensure!(
            want.get((wc.wr_id & 0xff) as usize) == Some(&wc.opcode),
            "A: opcode {wc:?}"
        );
        report.completions_a += 1;
    }
    while report.completions_b < 2 * n {
        let Event::Dto(wc) = next_event(a, b, &b.events, "B completions")? else {
            return Err("B: not a DTO".into());
        };
        let i = (wc.wr_id >> 8) as usize;
        ensure!(wc.status == WcStatus::Success, "B: {wc:?}");
        ensure!(i < n && wc.qp_num == conns[i].qb, "B: foreign {wc:?}");
        ensure!(wc.byte_len as usize == MSG, "B: length {wc:?}");
        match wc.opcode {
            WcOpcode::Recv => ensure!(wc.wr_id & 0xff == 0, "B: SEND in {wc:?}"),
            WcOpcode::RecvRdmaWithImm => ensure!(wc.imm_data == Some(i as u32), "B: {wc:?}"),
            _ => return Err(format!("B: {wc:?}")),
        }
        report.completions_b += 1;
    }
    for (i, c) in conns.iter().enumerate() {
        let s = i % shards;
        ensure!(
            read_mem(b, s, c.rb.lkey, 0, MSG)? == pattern(i, MSG),
            "SEND {i} data"
        );
        ensure!(
            read_mem(b, s, c.rb.lkey, 1024, MSG)? == pattern(i, MSG),
            "WRITE {i} data"
        );
        ensure!(
            read_mem(a, s, c.ra.lkey, 2048, 8)? == pattern(i + 1000, 8),
            "READ {i} data"
        );
        ensure!(
            read_mem(a, s, c.ra.lkey, 2560, 8)? == vec![0; 8],
            "fetch-add {i} original"
        );
        let sum = read_mem(b, s, c.rb.lkey, 3584, 8)?;
        ensure!(
            sum.as_slice() == (i as u64 + 1).to_le_bytes(),
            "fetch-add {i} result {sum:?}"
        );
        report.bytes_verified += 2 * MSG + 8 + 8 + 8;
    }
    // Disconnect from A: both sides see it; B's unused receive flushes.
    for c in &conns {
        a.engine.disconnect(c.qa).map_err(e)?;
    }
    let mut down_a = 0;
    while down_a < n {
        if let Event::Connection {
            event: ConnEvent::Disconnected,
            ..
        } = next_event(a, b, &a.events, "A disconnected")?
        {
            down_a += 1;
        }
    }
    let (mut down_b, mut flushed_b) = (0, 0);
    while down_b < n || flushed_b < n {
        match next_event(a, b, &b.events, "B disconnected")? {
            Event::Connection {
                event: ConnEvent::Disconnected,
                ..
            } => down_b += 1,
            Event::Dto(wc) if wc.status == WcStatus::WrFlushErr && wc.wr_id & 0xff == 2 => {
                flushed_b += 1
            }
            other => return Err(format!("B: unexpected {other:?}")),
        }
    }
    for c in &conns {
        a.engine.destroy_qp(c.qa).map_err(e)?;
        b.engine.destroy_qp(c.qb).map_err(e)?;
    }
    b.engine.unlisten(port).map_err(e)?;
    Ok(report)
}
