//! The verified workload over two engines (two ports connected by any wire): `n` connections,
//! QP `i` of each side on shard `i % shards`, a receive posted on A's QP in INIT, then on each
//! connection in turn the mixed workload of [`crate::workload`] (every operation, every byte
//! and completion checked), then disconnect (A's receive flushes) and destroy. Used by the
//! in-memory tests and by `roce-engine-pair` over real DPDK ports.

use crate::cm::{AcceptParams, ConnectParams};
use crate::engine::runtime::{ConnEvent, Engine, EngineError, Event, EventSink, QpRoute};
use crate::host::QpOptions;
use crate::io::FrameIo;
use crate::mem::access::Access;
use crate::mem::vec_memory::{Region, VecMemory};
use crate::transport::qp::QpStats;
use crate::transport::types::{RecvWr, SendWr, Sge, WcStatus, WorkCompletion};
use crate::wire::psn::Psn;
use crate::workload::endpoints::{missing, read_region, write_region};
use crate::workload::{self, run_verified, WorkloadError, WorkloadKind, WorkloadSpec};
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
    /// Payload bytes moved and checked (SEND, WRITE, READ).
    pub bytes_verified: u64,
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// Bytes of each SEND, WRITE and READ.
pub const MSG: usize = 300;

/// What each connection runs: every operation twice, two scatter/gather entries each.
pub const SPEC: WorkloadSpec = WorkloadSpec {
    kind: WorkloadKind::Mixed,
    size: MSG,
    count: 14,
    depth: 4,
    sges: 2,
    limit: STALL,
};

/// How long the engines may go without the event a step waits for.
const STALL: Duration = Duration::from_secs(60);

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
        ensure!(t0.elapsed() < STALL, "stalled waiting for {what}");
    }
}

/// One connection of the two engines, as the verified workload drives it: QP `qa` of A and
/// `qb` of B, both on `shard`.
struct EngineConn<'s, 'e, Io: FrameIo> {
    a: &'s Side<'e, Io>,
    b: &'s Side<'e, Io>,
    qa: u32,
    qb: u32,
    shard: usize,
    start: Instant,
}

fn engine_error(e: EngineError) -> WorkloadError {
    WorkloadError::Endpoints(e.to_string())
}

impl<'e, Io: FrameIo> EngineConn<'_, 'e, Io> {
    fn engine(&self, side: workload::Side) -> &Engine<VecMemory, Io> {
        match side {
            workload::Side::A => self.a.engine,
            workload::Side::B => self.b.engine,
        }
    }

    /// Every completion the two sides' sinks hold, B's first; any other event is an error.
    fn ready(&self) -> Result<Vec<(workload::Side, WorkCompletion)>, WorkloadError> {
        let mut got = Vec::new();
        for (side, s) in [(workload::Side::B, self.b), (workload::Side::A, self.a)] {
            while let Some(ev) = s.events.queue.pop() {
                match ev {
                    Event::Dto(wc) => got.push((side, wc)),
                    other => {
                        return Err(WorkloadError::Mismatch(format!(
                            "{side:?}: unexpected {other:?} during the workload"
                        )))
                    }
                }
            }
        }
        Ok(got)
    }

    /// Drives both engines once (inline; core mode: their threads do); false when neither had
    /// work.
    fn progress(&self) -> bool {
        let worked = self.a.engine.progress() | self.b.engine.progress();
        if !worked {
            std::thread::yield_now();
        }
        worked
    }
}

impl<Io: FrameIo> workload::Endpoints for EngineConn<'_, '_, Io> {
    fn qpns(&self) -> (u32, u32) {
        (self.qa, self.qb)
    }

    fn register(
        &mut self,
        side: workload::Side,
        len: usize,
        access: Access,
    ) -> Result<Region, WorkloadError> {
        self.engine(side)
            .with_host(self.shard, move |h| h.register(1, len, access))
            .map_err(engine_error)
    }

    fn deregister(&mut self, side: workload::Side, region: &Region) -> Result<(), WorkloadError> {
        let lkey = region.lkey;
        self.engine(side)
            .with_host(self.shard, move |h| h.mem.deregister(lkey))
            .map_err(engine_error)?
            .map_err(|e| WorkloadError::Endpoints(format!("{side:?}: {e:?}")))
    }

    fn write(
        &mut self,
        side: workload::Side,
        region: &Region,
        at: usize,
        data: &[u8],
    ) -> Result<(), WorkloadError> {
        let (lkey, data) = (region.lkey, data.to_vec());
        self.engine(side)
            .with_host(self.shard, move |h| {
                write_region(&mut h.mem, lkey, at, &data)
            })
            .map_err(engine_error)?
            .ok_or_else(|| missing(side, lkey))
    }

    fn read(
        &mut self,
        side: workload::Side,
        region: &Region,
        at: usize,
        len: usize,
    ) -> Result<Vec<u8>, WorkloadError> {
        let lkey = region.lkey;
        self.engine(side)
            .with_host(self.shard, move |h| read_region(&h.mem, lkey, at, len))
            .map_err(engine_error)?
            .ok_or_else(|| missing(side, lkey))
    }

    fn post_send(&mut self, wr: SendWr) -> Result<(), WorkloadError> {
        self.a.engine.post_send(self.qa, wr).map_err(engine_error)
    }

    fn post_recv(&mut self, wr: RecvWr) -> Result<(), WorkloadError> {
        self.b.engine.post_recv(self.qb, wr).map_err(engine_error)
    }

    fn completions(
        &mut self,
        limit: Duration,
    ) -> Result<Vec<(workload::Side, WorkCompletion)>, WorkloadError> {
        let t0 = Instant::now();
        loop {
            let got = self.ready()?;
            if !got.is_empty() {
                return Ok(got);
            }
            if t0.elapsed() >= limit.min(STALL) {
                return Err(WorkloadError::Mismatch(format!(
                    "no completion within {:?}",
                    limit.min(STALL)
                )));
            }
            self.progress();
        }
    }

    fn settle(&mut self) -> Result<Vec<(workload::Side, WorkCompletion)>, WorkloadError> {
        // Real time never goes quiet for sure: drive both engines until neither had work
        // for a few rounds in a row (inline), for a bounded time.
        let t0 = Instant::now();
        let mut idle = 0;
        while idle < SETTLE_ROUNDS && t0.elapsed() < SETTLE {
            idle = if self.progress() { 0 } else { idle + 1 };
        }
        self.ready()
    }

    fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    fn qp_stats(&mut self) -> Result<QpStats, WorkloadError> {
        let stats = |s: &Side<'_, Io>, qpn: u32| {
            s.engine
                .with_host(self.shard, move |h| {
                    h.qp(qpn).map(|q| *q.stats()).unwrap_or_default()
                })
                .map_err(engine_error)
        };
        Ok(stats(self.a, self.qa)? + stats(self.b, self.qb)?)
    }
}

/// After a connection's workload the engines run until they had no work for this many rounds
/// in a row, at most [`SETTLE`]; then nothing more may complete. (A late completion would
/// still show up in a later connection's run, naming a QP that is not its own.)
const SETTLE_ROUNDS: u32 = 100;
const SETTLE: Duration = Duration::from_millis(20);

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
    let e = |e: EngineError| e.to_string();
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
        // A receive on A's QP in INIT (RESET -> INIT accepts receives); nothing is ever sent
        // to A, so it flushes when the connection goes down.
        let ra = a
            .engine
            .with_host(s, |h| h.register(1, 64, ALL))
            .map_err(e)?;
        let wr = RecvWr {
            wr_id: i as u64,
            sgl: crate::sgl![Sge {
                addr: ra.addr,
                len: 64,
                lkey: ra.lkey,
            }],
        };
        a.engine.post_recv(qa, wr).map_err(e)?;
        conns.push((qa, qb));
    }
    for (i, &(qa, _)) in conns.iter().enumerate() {
        let mut p = ConnectParams::new(ip_b, port, qa, Psn::new(100 + i as u32));
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
        let mut ap = AcceptParams::new(conns[i].1, Psn::new(5000 + i as u32));
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
                    .position(|c| c.0 == qpn)
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
            } if conns.iter().any(|c| c.1 == qpn) => up_b += 1,
            other => return Err(format!("B: unexpected {other:?}")),
        }
    }
    report.connections = n;
    for (i, &(qa, qb)) in conns.iter().enumerate() {
        let mut ends = EngineConn {
            a,
            b,
            qa,
            qb,
            shard: i % shards,
            start: Instant::now(),
        };
        let r = run_verified(&mut ends, &SPEC).map_err(|e| format!("connection {i}: {e}"))?;
        report.completions_a += r.completions_a;
        report.completions_b += r.completions_b;
        report.bytes_verified += r.bytes;
    }
    // Disconnect from A: both sides see it; A's receive flushes.
    for &(qa, _) in &conns {
        a.engine.disconnect(qa).map_err(e)?;
    }
    let (mut down_a, mut flushed_a) = (HashSet::new(), HashSet::new());
    while down_a.len() < n || flushed_a.len() < n {
        match next_event(a, b, &a.events, "A disconnected")? {
            Event::Connection {
                qpn,
                event: ConnEvent::Disconnected,
            } => {
                ensure!(down_a.insert(qpn), "A: QP {qpn:#x} disconnected twice")
            }
            Event::Dto(wc)
                if wc.status == WcStatus::WrFlushErr
                    && conns.get(wc.wr_id as usize).map(|c| c.0) == Some(wc.qp_num) =>
            {
                ensure!(flushed_a.insert(wc.qp_num), "A: flushed twice {wc:?}")
            }
            other => return Err(format!("A: unexpected {other:?}")),
        }
    }
    let mut down_b = HashSet::new();
    while down_b.len() < n {
        match next_event(a, b, &b.events, "B disconnected")? {
            Event::Connection {
                qpn,
                event: ConnEvent::Disconnected,
            } => {
                ensure!(down_b.insert(qpn), "B: QP {qpn:#x} disconnected twice")
            }
            other => return Err(format!("B: unexpected {other:?}")),
        }
    }
    for &(qa, qb) in &conns {
        a.engine.destroy_qp(qa).map_err(e)?;
        b.engine.destroy_qp(qb).map_err(e)?;
    }
    b.engine.unlisten(port).map_err(e)?;
    Ok(report)
}
