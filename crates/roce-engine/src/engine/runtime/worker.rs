//! One shard's poll loop around a [`Shard`]: drain the submission ring, apply what other shards
//! sent, poll the port (rx -> QPs/CM, timers, tx), then push completions and events to the EVD
//! rings (docs/DESIGN.md "Layers"). A pinned core calls [`Worker::poll_once`] in a loop; in inline
//! mode the consumer waiting on an EVD calls it.
//!
//! Shard 0 runs the IB CM for every QP of the port. For a QP of another shard it keeps a
//! *stand-in* QP with the same number in its own `Host`: the CM moves the stand-in through
//! INIT/RTR/RTS/ERROR exactly as it would move a local QP, and the worker replays each
//! transition on the owning shard through its inbox, followed by the connection event, so the
//! consumer never sees `Established` before the QP is in RTS. Data frames never reach a
//! stand-in: RX steering sends them to the owner.

use super::command::{Command, EngineError};
use super::event::{AsyncEvent, ConnEvent, ConnRequest, Event, EventSink, QpRoute};
use super::shard_io::{CrossShard, ShardIo, ShardIoStats};
use super::steer::shard_of_qpn;
use crate::cm::{AcceptParams, CmError, CmEvent, CmId, ConnectParams};
use crate::engine::shard::{Shard, ShardStats};
use crate::host::{HostError, HostEvent, QpOptions};
use crate::io::FrameIo;
use crate::mem::access::Memory;
use crate::time::Instant;
use crate::transport::types::{QpState, RecvWr, SendWr, WcOpcode, WcStatus, WorkCompletion};
use crossbeam_queue::ArrayQueue;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

/// Submissions applied per poll at most (bounds the loop's latency).
const COMMANDS_PER_POLL: usize = 64;
/// Inbox control messages applied per poll at most.
const CONTROL_PER_POLL: usize = 16;

/// Counters of the runtime around one shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    pub commands: u64,
    /// Posts the shard could not apply (completed with an error status).
    pub post_errors: u64,
    pub completions: u64,
    /// Completions of a QP whose EVD is DAT_HANDLE_NULL (the consumer is not interested).
    pub unrouted: u64,
    /// Events that did not fit their EVD (each also reported on the async EVD when it fits).
    pub evd_overflows: u64,
    /// Batches of several completions put on one EVD in one pass (a burst's, `Staged`).
    pub evd_batches: u64,
    /// CM transitions replayed on this shard / sent to other shards.
    pub transitions_applied: u64,
    pub transitions_sent: u64,
    /// Polls of the inline progress helper while no consumer drove the shard ([`super::away`]),
    /// those that found work, and the frames they received.
    pub away_polls: u64,
    pub away_busy_polls: u64,
    pub away_rx_frames: u64,
    /// The helper's sleeps longer than its period because no shard had work (a backed-off
    /// timer or the port's receive interrupt), those on the receive interrupt, and those a
    /// frame ended (counted on every shard the helper slept for).
    pub away_idle_sleeps: u64,
    pub away_irq_sleeps: u64,
    pub away_irq_wakes: u64,
}

/// Everything the runtime knows about one shard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    pub shard: ShardStats,
    pub io: ShardIoStats,
    pub worker: WorkerStats,
    /// The poll thread is pinned on its core (core mode).
    pub pinned: bool,
}

/// Shard 0's record of a stand-in QP.
struct StandIn {
    shard: usize,
    forwarded: QpState,
    peer: IpAddr,
}

/// The states an RC QP passes through from `from` to `to` (IBTA vol. 1 §10.3.1: no skipping
/// on the way up; ERROR and RESET are reachable from anywhere).
fn transition_path(from: QpState, to: QpState) -> impl Iterator<Item = QpState> {
    let rank = |s| match s {
        QpState::Init => Some(1),
        QpState::Rtr => Some(2),
        QpState::Rts => Some(3),
        _ => None,
    };
    let ladder = [QpState::Init, QpState::Rtr, QpState::Rts];
    let (lo, hi) = match (rank(from), rank(to)) {
        (Some(a), Some(b)) if b > a => (a, b),
        _ => (0, 0),
    };
    let direct = (lo == 0).then_some(to);
    ladder
        .into_iter()
        .enumerate()
        .filter(move |(i, _)| *i + 1 > lo && *i < hi)
        .map(|(_, s)| s)
        .chain(direct)
}

/// The completions of one drain of the host, per EVD, delivered together at its end
/// ([`EventQueue::push_batch`](crate::engine::event_queue::EventQueue::push_batch)): one pass
/// and at most one wake-up per EVD and burst instead of one per completion. Each EVD's events
/// keep their order; the queues keep their capacity, so a steady stream allocates nothing.
#[derive(Default)]
struct Staged {
    sinks: Vec<(Arc<EventSink>, VecDeque<Event>)>,
    spare: Vec<VecDeque<Event>>,
}

impl Staged {
    fn add(&mut self, sink: &Arc<EventSink>, ev: Event) {
        if let Some((_, q)) = self.sinks.iter_mut().find(|(s, _)| Arc::ptr_eq(s, sink)) {
            q.push_back(ev);
        } else {
            let mut q = self.spare.pop().unwrap_or_default();
            q.push_back(ev);
            self.sinks.push((sink.clone(), q));
        }
    }
}

/// One shard with its runtime tables.
pub struct Worker<M: Memory, Io: FrameIo> {
    index: usize,
    shards: usize,
    pub shard: Shard<M, ShardIo<Io>>,
    commands: Arc<ArrayQueue<Command<M>>>,
    /// Where each QP's completions and events go. This and the maps below are keyed by this
    /// process's own QPNs and ids and looked up per completion and post: Fx hashing.
    routes: FxHashMap<u32, QpRoute>,
    async_sink: Arc<EventSink>,
    /// The async sink of each SRQ created with one (its IA's async EVD).
    srq_async: FxHashMap<u32, Arc<EventSink>>,
    /// Further sinks of the interface's own async events (the engine's, shared).
    pub async_listeners: Arc<super::event::AsyncListeners>,
    // Shard 0: the CM's tables.
    stand_ins: BTreeMap<u32, StandIn>,
    conn_qpn: FxHashMap<CmId, u32>,
    requests: FxHashMap<CmId, IpAddr>,
    listeners: FxHashMap<u16, Arc<EventSink>>,
    /// Shard 0: QPs whose connection was broken (their later DISCONNECTED is not reported).
    broken: HashSet<u32>,
    /// Completions routed in this drain, not yet on their EVDs.
    staged: Staged,
    stats: WorkerStats,
    pub pinned: bool,
}

impl<M: Memory, Io: FrameIo> Worker<M, Io> {
    pub fn new(
        index: usize,
        shards: usize,
        shard: Shard<M, ShardIo<Io>>,
        commands: Arc<ArrayQueue<Command<M>>>,
        async_sink: Arc<EventSink>,
    ) -> Self {
        Worker {
            index,
            shards,
            shard,
            commands,
            routes: FxHashMap::default(),
            async_sink,
            srq_async: FxHashMap::default(),
            async_listeners: Default::default(),
            stand_ins: BTreeMap::new(),
            conn_qpn: FxHashMap::default(),
            requests: FxHashMap::default(),
            listeners: FxHashMap::default(),
            broken: HashSet::new(),
            staged: Staged::default(),
            stats: WorkerStats::default(),
            pinned: false,
        }
    }

    /// Counters.
    pub fn stats(&self) -> RuntimeStats {
        RuntimeStats {
            shard: self.shard.stats(),
            io: self.shard.io.stats,
            worker: self.stats,
            pinned: self.pinned,
        }
    }

    /// One iteration, ending with everything on the wire (a poll core's, the away helper's);
    /// true if it did any work.
    pub fn poll_once(&mut self) -> bool {
        self.iterate(false)
    }

    /// One iteration of an inline consumer: with `hold_acks`, lone ACKs wait for the next
    /// frame the shard sends or its next turn ([`Shard::poll_holding_acks`]).
    pub fn poll_inline(&mut self, hold_acks: bool) -> bool {
        self.iterate(hold_acks)
    }

    fn iterate(&mut self, hold_acks: bool) -> bool {
        let mut work = false;
        let mut cm_moved = false;
        // The clock is read only when a command or a stand-in needs it (a waiting consumer
        // spins through here).
        let mut now: Option<Instant> = None;
        for _ in 0..COMMANDS_PER_POLL {
            let Some(cmd) = super::pop_if_any(&self.commands) else {
                break;
            };
            let at = *now.get_or_insert_with(|| self.shard.clock().now());
            cm_moved |= self.apply(at, cmd);
            work = true;
        }
        if self.index == 0 && !self.stand_ins.is_empty() && {
            let at = *now.get_or_insert_with(|| self.shard.clock().now());
            self.shard.host.cm().poll_timeout().is_some_and(|t| t <= at)
        } {
            cm_moved = true;
        }
        let cm_frames = self.shard.io.stats.cm_frames;
        for _ in 0..CONTROL_PER_POLL {
            if let Some(msg) = self.shard.io.take_stash() {
                self.apply_cross(msg);
                work = true;
            }
            work |= if hold_acks {
                self.shard.poll_holding_acks()
            } else {
                self.shard.poll()
            };
            if !self.shard.io.has_stash() {
                break;
            }
        }
        cm_moved |= self.shard.io.stats.cm_frames != cm_frames;
        if cm_moved && !self.stand_ins.is_empty() {
            self.sync_stand_ins();
        }
        work | self.drain_host()
    }

    /// [`poll_once`](Self::poll_once) by the inline progress helper, counted apart.
    pub fn poll_away(&mut self) -> bool {
        let rx = self.shard.stats().rx_frames;
        let work = self.poll_once();
        self.stats.away_polls += 1;
        self.stats.away_busy_polls += u64::from(work);
        self.stats.away_rx_frames += self.shard.stats().rx_frames - rx;
        work
    }

    /// Inline progress, a consumer's send post applied without the submission ring: the
    /// submissions queued before it (they keep one thread's posts in order), then the post. A
    /// post to a QP with no send work outstanding (a lone request: what an application waiting
    /// for its completion posts) also rings the doorbell: its frames leave inside the post,
    /// not on the consumer's next poll. Posts behind outstanding work leave on the next poll,
    /// in one burst with the others (sending each at once cost a 64 B stream through DAT 30 %
    /// of its message rate).
    pub fn post_send_now(&mut self, qpn: u32, wr: SendWr) {
        let lone = self
            .shard
            .host
            .qp(qpn)
            .is_some_and(|q| q.send_queue_empty());
        let now = self.shard.clock().now();
        let mut cm_moved = false;
        while let Some(queued) = super::pop_if_any(&self.commands) {
            cm_moved |= self.apply(now, queued);
        }
        cm_moved |= self.apply(now, Command::PostSend { qpn, wr });
        if cm_moved && !self.stand_ins.is_empty() {
            self.sync_stand_ins();
        }
        if lone {
            self.shard.send_now();
        }
    }

    /// One submission, counted; true if it may have moved a QP through the CM.
    fn apply(&mut self, now: Instant, cmd: Command<M>) -> bool {
        self.stats.commands += 1;
        self.execute(now, cmd)
    }

    fn reply<T>(reply: std::sync::mpsc::SyncSender<T>, v: T) {
        // The caller may have given up waiting; nothing else to do then.
        let _ = reply.send(v);
    }

    /// Applies one submission; true if it may have moved a QP through the CM.
    fn execute(&mut self, now: Instant, cmd: Command<M>) -> bool {
        match cmd {
            Command::PostSend { qpn, wr } => self.post_send(now, qpn, wr),
            Command::PostRecv { qpn, wr } => self.post_recv(qpn, wr),
            Command::PostSrqRecv { srqn, wr } => self.post_srq_recv(srqn, wr),
            Command::CreateQp { opts, route, reply } => {
                Self::reply(reply, self.create_qp(now, opts, route))
            }
            Command::SetRoute { qpn, route, reply } => {
                Self::reply(reply, self.set_route(qpn, route))
            }
            Command::DestroyQp { qpn, reply } => Self::reply(reply, self.destroy_qp(qpn)),
            Command::CreateSrq {
                depth,
                async_events,
                reply,
            } => Self::reply(reply, self.create_srq(depth, async_events)),
            Command::DestroySrq { srqn, reply } => Self::reply(reply, self.destroy_srq(srqn)),
            Command::Connect { params, reply } => {
                Self::reply(reply, self.connect(now, params));
                return true;
            }
            Command::Accept { id, params, reply } => {
                Self::reply(reply, self.accept(now, id, params));
                return true;
            }
            Command::Reject {
                id,
                private_data,
                reply,
            } => {
                let r = self.shard.host.reject(now, id, &private_data);
                self.requests.remove(&id);
                Self::reply(reply, r.map_err(EngineError::from))
            }
            Command::Disconnect { qpn, reply } => {
                let r = self.shard.host.disconnect(now, qpn);
                Self::reply(reply, r.map_err(EngineError::from));
                return true;
            }
            Command::BreakConnection { qpn, reply } => {
                Self::reply(reply, self.break_connection(now, qpn))
            }
            Command::Listen { port, sink, reply } => Self::reply(reply, self.listen(port, sink)),
            Command::Unlisten { port, reply } => {
                let r = self.shard.host.unlisten(port);
                self.listeners.remove(&port);
                Self::reply(reply, r.map_err(EngineError::from))
            }
            Command::Stats { reply } => Self::reply(reply, self.stats()),
            Command::WithHost(f) => f(&mut self.shard.host),
        }
        false
    }

    // Work requests: a refused one completes in error (or, for an SRQ, is an async event),
    // never silently dropped.

    fn post_send(&mut self, now: Instant, qpn: u32, wr: SendWr) {
        let (wr_id, opcode) = (wr.wr_id, wr.op.wc_opcode());
        if let Err(e) = self.shard.host.post_send(now, qpn, wr) {
            self.stats.post_errors += 1;
            self.failed_post(qpn, wr_id, opcode, e.work_request_error());
        }
    }

    fn post_recv(&mut self, qpn: u32, wr: RecvWr) {
        let wr_id = wr.wr_id;
        if let Err(e) = self.shard.host.post_recv(qpn, wr) {
            self.stats.post_errors += 1;
            self.failed_post(qpn, wr_id, WcOpcode::Recv, e.work_request_error());
        }
    }

    fn post_srq_recv(&mut self, srqn: u32, wr: RecvWr) {
        let wr_id = wr.wr_id;
        if let Err(e) = self.shard.host.post_srq_recv(srqn, wr) {
            self.stats.post_errors += 1;
            let error = e.work_request_error();
            self.push_async(AsyncEvent::SrqPostFailed { srqn, wr_id, error });
        }
    }

    // QPs and SRQs.

    fn create_qp(
        &mut self,
        now: Instant,
        opts: QpOptions,
        route: QpRoute,
    ) -> Result<u32, EngineError> {
        let host = &mut self.shard.host;
        let qpn = host.create_qp_in_space(now, opts, self.index as u32, self.shards as u32)?;
        if let Some(c) = &route.counters {
            let _ = host.count_unsignaled_into(qpn, c.unsignaled.clone());
        }
        self.routes.insert(qpn, route);
        Ok(qpn)
    }

    fn set_route(&mut self, qpn: u32, route: QpRoute) -> Result<(), EngineError> {
        let host = &mut self.shard.host;
        if host.qp(qpn).is_none() {
            return Err(EngineError::Host(HostError::UnknownQp));
        }
        if let Some(c) = &route.counters {
            let _ = host.count_unsignaled_into(qpn, c.unsignaled.clone());
        }
        self.routes.insert(qpn, route);
        Ok(())
    }

    fn destroy_qp(&mut self, qpn: u32) -> Result<(), EngineError> {
        let host = &mut self.shard.host;
        let r = if self.index == 0 && shard_of_qpn(qpn, self.shards) != 0 {
            // The CM's stand-in of another shard's QP (absent if it never connected).
            if self.stand_ins.remove(&qpn).is_some() {
                let _ = host.destroy_qp(qpn);
            }
            Ok(())
        } else {
            self.routes.remove(&qpn);
            host.destroy_qp(qpn).map_err(EngineError::from)
        };
        self.broken.remove(&qpn);
        self.conn_qpn.retain(|_, q| *q != qpn);
        r
    }

    fn create_srq(&mut self, depth: u32, async_events: Option<Arc<EventSink>>) -> u32 {
        let srqn = self.shard.host.create_srq(depth);
        if let Some(sink) = async_events {
            self.srq_async.insert(srqn, sink);
        }
        srqn
    }

    fn destroy_srq(&mut self, srqn: u32) -> Result<(), EngineError> {
        self.shard.host.destroy_srq(srqn)?;
        self.srq_async.remove(&srqn);
        Ok(())
    }

    // Connections (shard 0 runs the CM).

    fn connect(&mut self, now: Instant, params: ConnectParams) -> Result<CmId, EngineError> {
        let qpn = params.local_qpn;
        self.ensure_stand_in(now, qpn, params.dst_ip, params.access)?;
        let id = self.shard.host.connect(now, params)?;
        self.conn_qpn.insert(id, qpn);
        Ok(id)
    }

    fn accept(&mut self, now: Instant, id: CmId, params: AcceptParams) -> Result<(), EngineError> {
        let qpn = params.local_qpn;
        let src = *self
            .requests
            .get(&id)
            .ok_or(EngineError::Host(HostError::Cm(CmError::UnknownId)))?;
        self.ensure_stand_in(now, qpn, src, params.access)?;
        self.shard.host.accept(now, id, params)?;
        self.requests.remove(&id);
        self.conn_qpn.insert(id, qpn);
        Ok(())
    }

    fn listen(&mut self, port: u16, sink: Arc<EventSink>) -> Result<(), EngineError> {
        self.shard.host.listen(port)?;
        self.listeners.insert(port, sink);
        Ok(())
    }

    /// Shard 0: makes sure the CM has a QP numbered `qpn` to drive (a stand-in when the QP
    /// lives on another shard).
    fn ensure_stand_in(
        &mut self,
        now: Instant,
        qpn: u32,
        peer: IpAddr,
        access: crate::mem::access::Access,
    ) -> Result<(), EngineError> {
        let owner = shard_of_qpn(qpn, self.shards);
        if owner == self.index {
            return Ok(());
        }
        if let Some(s) = self.stand_ins.get_mut(&qpn) {
            s.peer = peer;
            return Ok(());
        }
        let opts = QpOptions {
            srq: None,
            access,
            ..QpOptions::default()
        };
        self.shard.host.create_qp_numbered(now, qpn, opts)?;
        self.stand_ins.insert(
            qpn,
            StandIn {
                shard: owner,
                forwarded: QpState::Init,
                peer,
            },
        );
        Ok(())
    }

    /// Shard 0: sends every transition the CM made on a stand-in to the QP's shard.
    fn sync_stand_ins(&mut self) {
        let host = &self.shard.host;
        let io = &mut self.shard.io;
        for (&qpn, s) in self.stand_ins.iter_mut() {
            let Some(qp) = host.qp(qpn) else { continue };
            let state = qp.state();
            if state == s.forwarded {
                continue;
            }
            for step in transition_path(s.forwarded, state) {
                io.send_control(
                    s.shard,
                    CrossShard::Modify {
                        qpn,
                        state: step,
                        attr: *qp.attr(),
                        peer: s.peer,
                    },
                );
                self.stats.transitions_sent += 1;
            }
            s.forwarded = state;
        }
    }

    /// Applies a control message from shard 0.
    fn apply_cross(&mut self, msg: CrossShard) {
        match msg {
            CrossShard::Frame(_) => {}
            CrossShard::Modify {
                qpn,
                state,
                attr,
                peer,
            } => {
                let now = self.shard.clock().now();
                let host = &mut self.shard.host;
                let ok = host.set_peer(qpn, peer).is_ok()
                    && host.modify_qp(now, qpn, state, &attr).is_ok();
                if ok {
                    self.stats.transitions_applied += 1;
                } else if host.qp(qpn).is_some() {
                    self.push_async(AsyncEvent::QpTransitionFailed { qpn });
                }
            }
            CrossShard::Event(Event::Connection { qpn, event }) => self.deliver_conn(qpn, event),
            CrossShard::Break { qpn } => {
                let now = self.shard.clock().now();
                let _ = self.break_connection(now, qpn);
            }
            CrossShard::Event(Event::Async(ev)) => self.push_async(ev),
            CrossShard::Event(other) => {
                let sink = self.async_sink.clone();
                self.push(&sink, other);
            }
        }
    }

    /// Completions, CM and neighbour events, SRQ limits of the host, to their EVDs.
    fn drain_host(&mut self) -> bool {
        let mut work = false;
        // One completion ahead: the last of a drain with nothing staged (a lone completion)
        // goes to its EVD at once, without staging.
        let mut next = self.shard.host.poll_completion();
        while let Some(wc) = next {
            next = self.shard.host.poll_completion();
            self.stats.completions += 1;
            let (qpn, status) = (wc.qp_num, wc.status);
            self.route_dto(wc, next.is_none());
            if !matches!(status, WcStatus::Success | WcStatus::WrFlushErr) {
                // The error's completion reaches its EVD before the connection event.
                self.deliver_staged();
                self.break_after_dto_error(qpn);
            }
            work = true;
        }
        self.deliver_staged();
        while let Some(ev) = self.shard.host.poll_host_event() {
            work = true;
            match ev {
                HostEvent::Cm(ev) => self.route_cm(ev),
                // A resolution that succeeded is no error; failures and conflicts are.
                HostEvent::Net(crate::net::NetEvent::Resolved { .. }) => {}
                HostEvent::Net(ev) => self.push_async(AsyncEvent::Net(ev)),
                HostEvent::SrqLimit { srqn } => self.push_async(AsyncEvent::SrqLimit {
                    shard: self.index,
                    srqn,
                }),
                HostEvent::EpWatermark { qpn, soft, hard } => {
                    // Soft: one asynchronous event on the IA's async EVD (per arming: the
                    // account fires each arming once). Hard: the connection breaks.
                    if soft {
                        self.push_async(AsyncEvent::EpWatermark { qpn, soft, hard });
                    }
                    if hard {
                        if self.index == 0 {
                            let now = self.shard.clock().now();
                            let _ = self.break_connection(now, qpn);
                        } else {
                            self.shard.io.send_control(0, CrossShard::Break { qpn });
                        }
                    }
                }
            }
        }
        work
    }

    /// Counts a completion for its QP's `dat_ep_get_status` idleness.
    fn count_dto(&self, wc: &WorkCompletion) {
        let recv = matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm);
        let route = self.routes.get(&wc.qp_num);
        if let Some(c) = route.and_then(|r| r.counters.as_ref()) {
            use std::sync::atomic::Ordering::{Relaxed, Release};
            if recv && wc.status == WcStatus::Success {
                let (n, bytes) = match (wc.opcode, wc.imm_data) {
                    (WcOpcode::RecvRdmaWithImm, _) => (&c.recv_rdma_imm, &c.recv_rdma_imm_bytes),
                    (_, Some(_)) => (&c.recv_imm, &c.recv_imm_bytes),
                    _ => (&c.recv_plain, &c.recv_plain_bytes),
                };
                // One writer (this shard): no read-modify-write needed.
                n.store(n.load(Relaxed) + 1, Relaxed);
                bytes.store(bytes.load(Relaxed) + u64::from(wc.byte_len), Relaxed);
            }
            let n = if recv { &c.recvs } else { &c.requests };
            n.fetch_add(1, Release);
        }
    }

    /// Routes a completion to its EVD: staged for the end of the drain, or pushed at once when
    /// it is `last` of the drain and nothing is staged.
    fn route_dto(&mut self, wc: WorkCompletion, last: bool) {
        self.count_dto(&wc);
        let route = self.routes.get(&wc.qp_num);
        let recv = matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm);
        let sink = route.and_then(|r| if recv { &r.recv } else { &r.request }.as_ref());
        match sink {
            Some(sink) if last && self.staged.sinks.is_empty() => {
                if sink.queue.push(Event::Dto(wc)).is_err() {
                    let sink = sink.clone();
                    self.overflowed(&sink);
                }
            }
            Some(sink) => self.staged.add(sink, Event::Dto(wc)),
            None => self.stats.unrouted += 1,
        }
    }

    /// Puts the staged completions on their EVDs; each one that does not fit is an overflow.
    fn deliver_staged(&mut self) {
        if self.staged.sinks.is_empty() {
            return;
        }
        let mut sinks = std::mem::take(&mut self.staged.sinks);
        for (sink, mut q) in sinks.drain(..) {
            self.stats.evd_batches += u64::from(q.len() > 1);
            sink.queue.push_batch(&mut q);
            for _ in 0..q.len() {
                self.overflowed(&sink);
            }
            q.clear();
            self.staged.spare.push(q);
        }
        self.staged.sinks = sinks;
    }

    fn route_cm(&mut self, ev: CmEvent) {
        let now = self.shard.clock().now();
        let conn = |id: &CmId| self.conn_qpn.get(id).copied();
        let (qpn, event) = match ev {
            CmEvent::ConnectRequest {
                id,
                port,
                src_ip,
                src_port,
                remote_qpn,
                private_data,
                ..
            } => {
                let Some(sink) = self.listeners.get(&port).cloned() else {
                    // The listener went away after the REQ was accepted by the CM.
                    let _ = self.shard.host.reject(now, id, &[]);
                    return;
                };
                self.requests.insert(id, src_ip);
                let req = ConnRequest {
                    id,
                    port,
                    src_ip,
                    src_port,
                    remote_qpn,
                    private_data,
                };
                if sink.queue.push(Event::Request(req)).is_err() {
                    // The listener's EVD is full: the request is refused, not kept unseen.
                    self.overflowed(&sink);
                    self.requests.remove(&id);
                    let _ = self.shard.host.reject(now, id, &[]);
                }
                return;
            }
            CmEvent::Established { id, private_data } => {
                (conn(&id), ConnEvent::Established { private_data })
            }
            CmEvent::Rejected {
                id,
                reason,
                private_data,
            } => {
                self.requests.remove(&id);
                (
                    conn(&id),
                    ConnEvent::PeerRejected {
                        reason,
                        private_data,
                    },
                )
            }
            CmEvent::Unreachable { id } => {
                self.requests.remove(&id);
                (conn(&id), ConnEvent::Unreachable)
            }
            CmEvent::TimedOut { id } => {
                self.requests.remove(&id);
                (conn(&id), ConnEvent::TimedOut)
            }
            CmEvent::Disconnected { id } => {
                let qpn = conn(&id);
                if qpn.is_some_and(|q| self.broken.remove(&q)) {
                    // Already reported as BROKEN.
                    return;
                }
                (qpn, ConnEvent::Disconnected)
            }
            CmEvent::ConnectError { id, error } => (conn(&id), ConnEvent::Broken(error)),
        };
        if let Some(qpn) = qpn {
            // Transitions first: the event must not overtake them.
            if !self.stand_ins.is_empty() {
                self.sync_stand_ins();
            }
            self.deliver_conn(qpn, event);
        }
    }

    /// A DTO of `qpn` completed in error (not flushed): its QP is in ERROR, so its connection
    /// is broken (DAT 2.0 §6.6: a DTO completion error moves the EP to DISCONNECTED with
    /// DAT_CONNECTION_EVENT_BROKEN; the peer gets a DREQ). The CM lives on shard 0.
    fn break_after_dto_error(&mut self, qpn: u32) {
        if self.index == 0 {
            let now = self.shard.clock().now();
            let _ = self.break_connection(now, qpn);
        } else {
            self.shard.io.send_control(0, CrossShard::Break { qpn });
        }
    }

    /// Shard 0: breaks the connection of `qpn` (hard receive watermark, seed 002; a DTO error):
    /// DREQ and QP to ERROR through the CM, then DAT_CONNECTION_EVENT_BROKEN (its DISCONNECTED
    /// is not reported). A connection that is not up (already going down, or being set up) is
    /// left alone: its consumer gets its DISCONNECTED or connect outcome instead.
    fn break_connection(&mut self, now: Instant, qpn: u32) -> Result<(), EngineError> {
        if !self.shard.host.connection_up(qpn) {
            return Ok(());
        }
        let r = self
            .shard
            .host
            .disconnect(now, qpn)
            .map_err(EngineError::from);
        if r.is_ok() {
            self.broken.insert(qpn);
            if !self.stand_ins.is_empty() {
                self.sync_stand_ins();
            }
            let error = crate::transport::types::QpError::QueueFull;
            self.deliver_conn(qpn, ConnEvent::Broken(error));
        }
        r
    }

    fn deliver_conn(&mut self, qpn: u32, event: ConnEvent) {
        let owner = shard_of_qpn(qpn, self.shards);
        if owner != self.index {
            self.shard
                .io
                .send_control(owner, CrossShard::Event(Event::Connection { qpn, event }));
            return;
        }
        // The owner's receive accounting arms (or disarms) the hard watermark (seed 002).
        match event {
            ConnEvent::Established { .. } => self.shard.host.set_ep_connected(qpn, true),
            _ => self.shard.host.set_ep_connected(qpn, false),
        }
        let last_wqe = matches!(event, ConnEvent::Disconnected | ConnEvent::Broken(_))
            && self.shard.host.qp_uses_srq(qpn);
        match self.routes.get(&qpn).and_then(|r| r.conn.clone()) {
            Some(sink) => self.push(&sink, Event::Connection { qpn, event }),
            None => self.stats.unrouted += 1,
        }
        if last_wqe {
            self.push_async(AsyncEvent::LastWqeReached { qpn });
        }
    }

    /// A post the host refused: its completion carries the error (DAT: the DTO completes in
    /// error; nothing is lost silently).
    fn failed_post(
        &mut self,
        qpn: u32,
        wr_id: u64,
        opcode: WcOpcode,
        error: crate::transport::types::QpError,
    ) {
        let status = match error {
            crate::transport::types::QpError::InvalidState => WcStatus::WrFlushErr,
            _ => WcStatus::LocQpOpErr,
        };
        self.route_dto(
            WorkCompletion {
                wr_id,
                status,
                opcode,
                byte_len: 0,
                imm_data: None,
                invalidated_rkey: None,
                qp_num: qpn,
                srq: None,
            },
            true,
        );
        self.push_async(AsyncEvent::PostFailed { qpn, error });
    }

    /// Pushes an asynchronous event to the async EVD of the IA it concerns: a QP's events to
    /// its route's `async_events`, an SRQ's to the sink it was created with, the rest (neighbour
    /// events) to every listener and the engine's own async sink.
    pub(super) fn push_async(&mut self, ev: AsyncEvent) {
        let named = match &ev {
            AsyncEvent::PostFailed { qpn, .. }
            | AsyncEvent::QpTransitionFailed { qpn }
            | AsyncEvent::EpWatermark { qpn, .. }
            | AsyncEvent::LastWqeReached { qpn } => {
                self.routes.get(qpn).and_then(|r| r.async_events.clone())
            }
            AsyncEvent::SrqLimit { srqn, .. } | AsyncEvent::SrqPostFailed { srqn, .. } => {
                self.srq_async.get(srqn).cloned()
            }
            _ => None,
        };
        if let Some(sink) = named {
            self.push(&sink, Event::Async(ev));
            return;
        }
        for sink in self.async_listeners.live() {
            self.push(&sink, Event::Async(ev.clone()));
        }
        let sink = self.async_sink.clone();
        self.push(&sink, Event::Async(ev));
    }

    /// Pushes to an EVD; an overflow is counted, flagged on the EVD (`take_overflow`) and
    /// reported on the async EVD.
    fn push(&mut self, sink: &Arc<EventSink>, ev: Event) {
        if sink.queue.push(ev).is_err() {
            self.overflowed(sink);
        }
    }

    /// An event did not fit `sink`: counted, and reported on its overflow sink (DAT: the
    /// async EVD's DAT_ASYNC_ERROR_EVD_OVERFLOW).
    fn overflowed(&mut self, sink: &Arc<EventSink>) {
        self.stats.evd_overflows += 1;
        let report = sink
            .overflow_sink()
            .unwrap_or_else(|| self.async_sink.clone());
        if !Arc::ptr_eq(sink, &report) {
            let _ = report
                .queue
                .push(Event::Async(AsyncEvent::EvdOverflow { evd: sink.id() }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use QpState::*;

    #[test]
    fn transitions_are_replayed_without_skipping_states() {
        let p = |a, b| transition_path(a, b).collect::<Vec<_>>();
        assert_eq!(p(Init, Rts), vec![Rtr, Rts]);
        assert_eq!(p(Init, Rtr), vec![Rtr]);
        assert_eq!(p(Rtr, Rts), vec![Rts]);
        assert_eq!(p(Rts, Error), vec![Error]);
        assert_eq!(p(Init, Error), vec![Error]);
        assert_eq!(p(Error, Reset), vec![Reset]);
    }
}
