//! The engine runtime of one port (one DAT interface adapter): N shards, each a `Host` on a
//! queue of the port, driven by pinned poll threads (`core` progress) or by the consumer
//! threads that wait on EVDs (`inline` progress) (docs/DESIGN.md "Progress", "The engine").
//!
//! - **Shards and QPNs.** QP `n` lives on shard `n % shards` ([`shard_of_qpn`]); each shard's
//!   `Host` allocates numbers in its own residue class. QPs that share an SRQ live on the SRQ's
//!   shard. Shard 0 also runs ARP and the CM (QP1) for the whole port; see [`worker`] for how
//!   the CM drives QPs of other shards.
//! - **Port queues.** Either one queue pair for the whole port — shard 0 receives and
//!   forwards by QPN, and sends the frames of the other shards (DPDK TX queues are not
//!   thread-safe; serializing through shard 0 needs no lock) — or one queue pair per shard
//!   (`ProfilePort::frame_ios` gives that when the profile's `port.rx_queues` and
//!   `port.tx_queues` are at least the shard count), in which case every shard receives and
//!   transmits on its own queue and forwards the frames that the port's spreading put on the
//!   wrong queue ([`shard_io`]). None of the PMDs here steers by BTH QPN: net_af_packet with
//!   `qpairs=N` spreads RX by the kernel's PACKET_FANOUT flow hash (UDP ports, so one QP's
//!   frames stay on one queue, but not on its owner's).
//! - **Submissions.** Consumer threads post into a bounded lock-free ring per shard
//!   ([`Command`]); a full ring is [`EngineError::RingFull`] for the poster
//!   (DAT_INSUFFICIENT_RESOURCES), never a silent drop. Control calls wait for their answer on a
//!   one-shot channel; in inline mode the waiting caller drives the shards meanwhile.
//! - **Events.** Completions and CM events go to the EVD rings named by each QP's
//!   [`QpRoute`]; connection requests to the listener's ring; everything else, and every EVD
//!   overflow, to the interface's async ring.
//! - **Capture.** With `EngineConfig::capture` (the profile's `engine.capture` or
//!   `DPDK_ROCE_CAPTURE`), every shard writes the frames it sends and receives to a pcap file:
//!   the path itself with one shard, `<stem>.shard<i>.<ext>` each with several ([`capture`]).
//! - **Away helper.** With inline progress and `away_after_us` > 0, a `roce-progress` thread
//!   drives a shard no consumer has driven for that long, so a peer's RDMA READ, WRITE or atomic
//!   is answered while the application computes or sleeps; it leaves alone a shard a consumer
//!   drives ([`away`]).
//! - **Idle pause.** A core-mode poll thread that found no work `idle_polls_before_pause` times
//!   in a row sleeps `idle_pause_us` microseconds (0 = always spin, the default: a wake-up
//!   costs about 40 us in this VM), so that a shared machine stays usable.

mod away;
pub mod capture;
pub mod command;
pub mod event;
pub mod shard_io;
pub mod steer;
pub mod worker;

pub use capture::capture_path;

/// How long an idle inline waiter sleeps between polls once its spin budget is spent: the
/// longest a frame that arrives after a quiet spell waits for its first poll (plus the
/// VM's wake-up, about 40 µs), against a core spent spinning for nothing.
pub const INLINE_IDLE_NAP: Duration = Duration::from_micros(50);
pub use command::{Command, EngineError, Reply};
pub use event::{
    AsyncEvent, AsyncListeners, ConnEvent, ConnRequest, DtoCounters, Event, EventSink, QpRoute,
};
pub use shard_io::{PortRings, ShardIo, ShardIoStats};
pub use steer::shard_of_qpn;
pub use worker::{RuntimeStats, Worker, WorkerStats};

use crate::cm::{AcceptParams, CmId, ConnectParams};
use crate::config::Progress;
use crate::engine::event_queue::{Idle, WaitError};
use crate::engine::shard::Shard;
use crate::host::{Host, QpOptions};
use crate::io::{FrameIo, RxInterrupt};
use crate::mem::access::Memory;
use crate::transport::types::{RecvWr, SendWr};
use crossbeam_queue::ArrayQueue;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How the engine runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    pub progress: Progress,
    /// Core mode: the core each shard's thread is pinned on (shard i on `poll_cores[i]`); a
    /// shard without an entry runs unpinned.
    pub poll_cores: Vec<usize>,
    /// Sleep of an idle poll thread, microseconds (0: never sleep).
    pub idle_pause_us: u32,
    /// Consecutive idle polls before the pause.
    pub idle_polls_before_pause: u32,
    /// Entries of each shard's submission ring.
    pub submission_ring: usize,
    /// Entries of each shard's inbox and of the relay ring.
    pub forward_ring: usize,
    /// Preallocated frame buffers for forwarding, relaying and loopback (frames to the port's
    /// own MAC).
    pub forward_buffers: usize,
    /// Largest frame forwarded (bytes, Ethernet header included).
    pub max_frame: usize,
    /// pcap capture of every frame sent and received: one file per shard, see [`capture`].
    pub capture: Option<PathBuf>,
    /// Inline progress: the `roce-progress` helper drives a shard no consumer thread drove for
    /// this many microseconds ([`away`]); 0: no helper. The default is 0 (in-memory engines
    /// that tests step by hand); a profile's `engine.away_after_us` defaults to
    /// [`crate::config::DEFAULT_AWAY_AFTER_US`].
    pub away_after_us: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            progress: Progress::Inline,
            poll_cores: Vec::new(),
            idle_pause_us: 0,
            idle_polls_before_pause: 1024,
            submission_ring: 4096,
            forward_ring: 1024,
            forward_buffers: 1024,
            max_frame: 9216,
            capture: None,
            away_after_us: 0,
        }
    }
}

impl EngineConfig {
    /// The engine settings of a profile (`engine.progress`, `engine.poll_cores`,
    /// `engine.idle_pause_us`, `engine.capture`, `engine.away_after_us` as overridden by the environment if the
    /// profile was loaded with it; frames up to the port's MTU).
    pub fn from_profile(p: &crate::config::Profile) -> EngineConfig {
        EngineConfig {
            progress: p.engine.progress,
            poll_cores: p.engine.poll_cores.iter().map(|&c| c as usize).collect(),
            idle_pause_us: p.engine.idle_pause_us,
            max_frame: usize::from(p.port.mtu) + 18,
            capture: p.engine.capture.clone(),
            away_after_us: p.engine.away_after_us,
            ..EngineConfig::default()
        }
    }
}

/// One shard as the consumer side sees it.
struct Slot<M: Memory, Io: FrameIo> {
    commands: Arc<ArrayQueue<Command<M>>>,
    /// The shard, held by whoever polls it: its core's thread for the thread's life, or
    /// (inline) one waiting consumer at a time. A spin lock: the inline path takes it on every
    /// poll, and its release is a plain store, where a std mutex's is an atomic swap (a full
    /// barrier behind the poll's stores; the lone completion through DAT polls 5-15 times).
    worker: spin::mutex::SpinMutex<Worker<M, Io>>,
    /// Consumer drives of this shard, for the away helper.
    turns: away::Turns,
    /// The away helper's long sleeps.
    away: away::AwayCounters,
}

struct Shared<M: Memory, Io: FrameIo> {
    slots: Vec<Slot<M, Io>>,
    stop: AtomicBool,
    progress: Progress,
    /// Inline consumers' turns leave lone ACKs for their next frame: only while the away
    /// helper turns a shard whose consumer does not come back.
    hold_acks: bool,
    /// A poll thread panicked: the engine takes no more submissions.
    failed: AtomicBool,
}

impl<M: Memory, Io: FrameIo> Shared<M, Io> {
    /// Inline progress: a consumer's poll of every shard no other thread is polling right now.
    fn drive(&self) -> bool {
        let mut work = false;
        if self.failed() {
            return false;
        }
        for slot in &self.slots {
            // Before the lock: a consumer that finds the helper polling makes it back off.
            slot.turns.mark();
            if let Some(mut w) = slot.worker.try_lock() {
                work |= w.poll_inline(self.hold_acks);
            }
        }
        work
    }

    fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }
}

/// Pops from a ring a poll loop looks at on every turn. An empty `ArrayQueue::pop` ends in a
/// full fence (crossbeam's `pop`); the emptiness check first is two plain loads, so an idle
/// turn stays cheap. A push racing the check is seen on the next turn.
#[inline]
pub(crate) fn pop_if_any<T>(ring: &ArrayQueue<T>) -> Option<T> {
    if ring.is_empty() {
        None
    } else {
        ring.pop()
    }
}

/// The engine of one port.
pub struct Engine<M: Memory, Io: FrameIo> {
    shared: Arc<Shared<M, Io>>,
    threads: Vec<JoinHandle<()>>,
    async_sink: Arc<EventSink>,
    listeners: Arc<AsyncListeners>,
}

impl<M, Io> Engine<M, Io>
where
    M: Memory + Send + 'static,
    Io: FrameIo + Send + 'static,
{
    /// An engine with one shard per host. `ports` holds either one queue pair (shared: shard 0
    /// receives and forwards, the others relay their frames through it) or one per shard.
    /// Events no EVD is named for (async errors, EVD overflows) go to `async_sink`; those of
    /// the interface itself also to every sink of [`Engine::async_listeners`].
    pub fn new(
        config: EngineConfig,
        hosts: Vec<Host<M>>,
        ports: Vec<Io>,
        async_sink: Arc<EventSink>,
    ) -> Result<Self, EngineError> {
        let n = hosts.len();
        if n == 0 {
            return Err(EngineError::InvalidArgument("no shard"));
        }
        if ports.len() != 1 && ports.len() != n {
            return Err(EngineError::InvalidArgument(
                "one port queue pair, or one per shard",
            ));
        }
        let listeners = Arc::new(AsyncListeners::default());
        let helper = config.progress == Progress::Inline && config.away_after_us > 0;
        // The away helper sleeps on the port queues' receive interrupts when all have one
        // (port queue i is shard i's, or shard 0's when there is one).
        let irqs: Vec<(usize, Box<dyn RxInterrupt>)> = if helper {
            ports
                .iter()
                .enumerate()
                .filter_map(|(i, p)| Some((i, p.rx_interrupt()?)))
                .collect()
        } else {
            Vec::new()
        };
        let irqs = if irqs.len() == ports.len() {
            irqs
        } else {
            Vec::new()
        };
        // The buffers carry frames between shards, and the frames a shard sends to its own MAC
        // (loopback: all the packets of a message in one burst): one shard needs them too.
        let rings = PortRings::new(
            n,
            config.forward_ring,
            config.forward_buffers,
            config.max_frame,
        );
        let mut ports = ports.into_iter();
        let per_shard = ports.len() == n;
        let mut slots = Vec::with_capacity(n);
        for (i, host) in hosts.into_iter().enumerate() {
            let port = if i == 0 || per_shard {
                ports.next()
            } else {
                None
            };
            let mut io = ShardIo::new(i, port, &rings);
            io.set_own_mac(host.net().config().mac.0);
            let commands = Arc::new(ArrayQueue::new(config.submission_ring.max(1)));
            let mut shard = Shard::new(host, io);
            if let Some(base) = &config.capture {
                let path = capture_path(base, i, n);
                shard
                    .capture_to(&path)
                    .map_err(|e| EngineError::Capture(format!("{}: {e}", path.display())))?;
            }
            let mut worker = Worker::new(i, n, shard, commands.clone(), async_sink.clone());
            worker.async_listeners = listeners.clone();
            slots.push(Slot {
                commands,
                worker: spin::mutex::SpinMutex::new(worker),
                turns: away::Turns::default(),
                away: away::AwayCounters::default(),
            });
        }
        let shared = Arc::new(Shared {
            slots,
            stop: AtomicBool::new(false),
            progress: config.progress,
            hold_acks: helper,
            failed: AtomicBool::new(false),
        });
        let mut threads = Vec::new();
        if config.progress == Progress::Core {
            for i in 0..n {
                let shared = shared.clone();
                let core = config.poll_cores.get(i).copied();
                let (pause, idle_limit) = (config.idle_pause_us, config.idle_polls_before_pause);
                let t = std::thread::Builder::new()
                    .name(format!("roce-shard{i}"))
                    .spawn(move || poll_thread(&shared, i, core, pause, idle_limit))
                    .map_err(|_| EngineError::Stopped)?;
                threads.push(t);
            }
        } else if helper {
            let shared = shared.clone();
            let period = Duration::from_micros(config.away_after_us.into());
            let t = std::thread::Builder::new()
                .name("roce-progress".into())
                .spawn(move || away::run(&shared, period, irqs))
                .map_err(|_| EngineError::Stopped)?;
            threads.push(t);
        }
        Ok(Engine {
            shared,
            threads,
            async_sink,
            listeners,
        })
    }
}

/// The loop of a core-mode shard thread: it holds its shard for its whole life.
fn poll_thread<M: Memory, Io: FrameIo>(
    shared: &Shared<M, Io>,
    i: usize,
    core: Option<usize>,
    idle_pause_us: u32,
    idle_polls_before_pause: u32,
) {
    let pinned =
        core.is_some_and(|id| core_affinity::set_for_current(core_affinity::CoreId { id }));
    let mut w = shared.slots[i].worker.lock();
    w.pinned = pinned;
    let mut idle = 0u32;
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        while !shared.stop.load(Ordering::Relaxed) {
            if w.poll_once() {
                idle = 0;
            } else {
                idle = idle.saturating_add(1);
                if idle_pause_us > 0 && idle >= idle_polls_before_pause {
                    std::thread::sleep(Duration::from_micros(idle_pause_us.into()));
                }
            }
        }
    }));
    if ran.is_ok() {
        return;
    }
    // A panic on the poll thread: the shard's state cannot be trusted. The engine refuses
    // every later submission, the IAs hear of it on their async EVDs, and whoever waits for
    // an answer of this shard is released with an error (the commands are dropped with their
    // reply channels) until the engine stops.
    // The event first: a waiter that sees the engine failed finds it queued.
    w.push_async(AsyncEvent::ShardFailed { shard: i });
    shared.failed.store(true, Ordering::Release);
    tracing::error!(target: "dpdk_roce::engine::runtime", shard = i, "poll thread panicked: the shard is stopped");
    let commands = shared.slots[i].commands.clone();
    while !shared.stop.load(Ordering::Relaxed) {
        while commands.pop().is_some() {}
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl<M: Memory, Io: FrameIo> Drop for Engine<M, Io> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            // The away helper parks between its looks.
            t.thread().unpark();
            let _ = t.join();
        }
        // Flush the capture files (the poll threads are gone).
        for slot in &self.shared.slots {
            let mut w = slot.worker.lock();
            if let Err(e) = w.shard.finish_capture() {
                tracing::warn!(target: "dpdk_roce::engine::runtime", "capture: {e}");
            }
        }
    }
}

impl<M: Memory, Io: FrameIo> Engine<M, Io> {
    /// Number of shards.
    pub fn shards(&self) -> usize {
        self.shared.slots.len()
    }

    /// The progress mode.
    pub fn progress_mode(&self) -> Progress {
        self.shared.progress
    }

    /// The interface's async event ring.
    pub fn async_sink(&self) -> &Arc<EventSink> {
        &self.async_sink
    }

    /// The further sinks that get the interface's own async events (neighbour events).
    pub fn async_listeners(&self) -> &Arc<AsyncListeners> {
        &self.listeners
    }

    /// Inline mode: polls every shard once (those another thread is not polling); false when
    /// no shard had work. Core mode: nothing to do (false).
    pub fn progress(&self) -> bool {
        match self.shared.progress {
            Progress::Inline => self.shared.drive(),
            Progress::Core => false,
        }
    }

    /// Waits for an event on `sink`: at least `threshold` queued, at most `timeout` (`None`:
    /// forever). Inline mode drives the shards meanwhile; core mode spins, then sleeps until
    /// the core's push wakes it.
    pub fn wait(
        &self,
        sink: &EventSink,
        timeout: Option<Duration>,
        threshold: usize,
    ) -> Result<Event, WaitError> {
        sink.queue
            .wait(timeout, threshold, || self.progress(), self.idle())
    }

    /// What an idle waiter does: inline mode naps [`INLINE_IDLE_NAP`] and drives again (no
    /// one else polls the port); core mode sleeps until the poll thread's push wakes it.
    pub fn idle(&self) -> Idle {
        match self.shared.progress {
            Progress::Inline => Idle::Nap(INLINE_IDLE_NAP),
            Progress::Core => Idle::UntilWoken,
        }
    }

    /// True once a poll thread panicked ([`AsyncEvent::ShardFailed`]): every call fails.
    pub fn failed(&self) -> bool {
        self.shared.failed()
    }

    /// Pushes a submission to shard `shard` (RingFull when its ring is full).
    pub fn submit(&self, shard: usize, cmd: Command<M>) -> Result<(), EngineError> {
        if self.failed() {
            return Err(EngineError::Stopped);
        }
        let slot = self
            .shared
            .slots
            .get(shard)
            .ok_or(EngineError::NoShard(shard))?;
        slot.commands
            .push(cmd)
            .map_err(|_| EngineError::RingFull(shard))
    }

    /// Submits a control command and waits for its answer.
    fn call<T>(
        &self,
        shard: usize,
        make: impl FnOnce(Reply<T>) -> Command<M>,
    ) -> Result<T, EngineError> {
        let (tx, rx) = sync_channel(1);
        self.submit(shard, make(tx))?;
        self.await_reply(rx)
    }

    fn await_reply<T>(&self, rx: Receiver<T>) -> Result<T, EngineError> {
        match self.shared.progress {
            Progress::Core => rx.recv().map_err(|_| EngineError::Stopped),
            Progress::Inline => loop {
                match rx.try_recv() {
                    Ok(v) => return Ok(v),
                    Err(TryRecvError::Disconnected) => return Err(EngineError::Stopped),
                    Err(TryRecvError::Empty) => {
                        if !self.shared.drive() {
                            core::hint::spin_loop();
                        }
                    }
                }
            },
        }
    }

    /// Posts a send work request to QP `qpn` (data path: no allocation, no answer; a WR the
    /// shard cannot apply completes with an error status).
    ///
    /// Inline progress: applied at once when no other thread polls the QP's shard right now
    /// ([`Worker::post_send_now`]: a lone request's frames leave inside the call), else queued
    /// like any submission for the next poll.
    pub fn post_send(&self, qpn: u32, wr: SendWr) -> Result<(), EngineError> {
        let shard = shard_of_qpn(qpn, self.shards());
        if self.shared.progress == Progress::Inline && !self.failed() {
            if let Some(slot) = self.shared.slots.get(shard) {
                slot.turns.mark();
                if let Some(mut w) = slot.worker.try_lock() {
                    w.post_send_now(qpn, wr);
                    return Ok(());
                }
            }
        }
        self.submit(shard, Command::PostSend { qpn, wr })
    }

    /// Posts a receive work request to QP `qpn`.
    pub fn post_recv(&self, qpn: u32, wr: RecvWr) -> Result<(), EngineError> {
        self.submit(
            shard_of_qpn(qpn, self.shards()),
            Command::PostRecv { qpn, wr },
        )
    }

    /// Posts a receive to SRQ `srqn` of shard `shard`.
    pub fn post_srq_recv(&self, shard: usize, srqn: u32, wr: RecvWr) -> Result<(), EngineError> {
        self.submit(shard, Command::PostSrqRecv { srqn, wr })
    }

    /// Creates an RC QP (in INIT) on `shard`, its events routed to `route`.
    pub fn create_qp(
        &self,
        shard: usize,
        opts: QpOptions,
        route: QpRoute,
    ) -> Result<u32, EngineError> {
        self.call(shard, |reply| Command::CreateQp { opts, route, reply })?
    }

    /// Changes where the events of QP `qpn` go.
    pub fn set_route(&self, qpn: u32, route: QpRoute) -> Result<(), EngineError> {
        self.call(shard_of_qpn(qpn, self.shards()), |reply| {
            Command::SetRoute { qpn, route, reply }
        })?
    }

    /// Destroys QP `qpn` (and the CM's stand-in of it); outstanding work is discarded.
    pub fn destroy_qp(&self, qpn: u32) -> Result<(), EngineError> {
        let owner = shard_of_qpn(qpn, self.shards());
        let r = self.call(owner, |reply| Command::DestroyQp { qpn, reply })?;
        if owner != 0 {
            self.call(0, |reply| Command::DestroyQp { qpn, reply })??;
        }
        r
    }

    /// Creates an SRQ on `shard`.
    pub fn create_srq(&self, shard: usize, depth: u32) -> Result<u32, EngineError> {
        self.create_srq_routed(shard, depth, None)
    }

    /// Creates an SRQ on `shard` whose asynchronous events (limit reached, refused posts) go to
    /// `async_events` (the async EVD of the SRQ's IA) instead of the engine's async sink.
    pub fn create_srq_routed(
        &self,
        shard: usize,
        depth: u32,
        async_events: Option<Arc<EventSink>>,
    ) -> Result<u32, EngineError> {
        self.call(shard, |reply| Command::CreateSrq {
            depth,
            async_events,
            reply,
        })
    }

    /// Destroys an SRQ no QP uses.
    pub fn destroy_srq(&self, shard: usize, srqn: u32) -> Result<(), EngineError> {
        self.call(shard, |reply| Command::DestroySrq { srqn, reply })?
    }

    /// Starts connecting `params.local_qpn`; the outcome arrives on the QP's connection EVD.
    pub fn connect(&self, params: ConnectParams) -> Result<CmId, EngineError> {
        self.call(0, |reply| Command::Connect { params, reply })?
    }

    /// Accepts connection request `id` on `params.local_qpn`.
    pub fn accept(&self, id: CmId, params: AcceptParams) -> Result<(), EngineError> {
        self.call(0, |reply| Command::Accept { id, params, reply })?
    }

    /// Rejects connection request `id`.
    pub fn reject(&self, id: CmId, private_data: Vec<u8>) -> Result<(), EngineError> {
        self.call(0, |reply| Command::Reject {
            id,
            private_data,
            reply,
        })?
    }

    /// Disconnects QP `qpn` (DREQ; the QP goes to ERROR and its outstanding work flushes).
    pub fn disconnect(&self, qpn: u32) -> Result<(), EngineError> {
        self.call(0, |reply| Command::Disconnect { qpn, reply })?
    }

    /// Breaks the connection of QP `qpn` (DREQ, QP to ERROR, outstanding work flushes) and
    /// reports DAT_CONNECTION_EVENT_BROKEN on its connection EVD instead of DISCONNECTED.
    pub fn break_connection(&self, qpn: u32) -> Result<(), EngineError> {
        self.call(0, |reply| Command::BreakConnection { qpn, reply })?
    }

    /// Listens on `port`; connection requests go to `sink`.
    pub fn listen(&self, port: u16, sink: Arc<EventSink>) -> Result<(), EngineError> {
        self.call(0, |reply| Command::Listen { port, sink, reply })??;
        // A server is ready for its clients from here: scripts and tests wait for this line
        // (`DPDK_ROCE_LOG=dpdk_roce::cm::listen=info`).
        tracing::info!(target: crate::log::LISTEN_TARGET, port, "listening");
        Ok(())
    }

    /// Stops listening on `port`.
    pub fn unlisten(&self, port: u16) -> Result<(), EngineError> {
        self.call(0, |reply| Command::Unlisten { port, reply })?
    }

    /// The counters of shard `shard`.
    pub fn stats(&self, shard: usize) -> Result<RuntimeStats, EngineError> {
        self.call(shard, |reply| Command::Stats { reply })
            .map(|s| self.with_away_counters(shard, s))
    }

    /// `s` with the away helper's sleep counters of `shard` (kept outside the shard).
    fn with_away_counters(&self, shard: usize, mut s: RuntimeStats) -> RuntimeStats {
        if let Some(slot) = self.shared.slots.get(shard) {
            slot.away.fill(&mut s.worker);
        }
        s
    }

    /// The away helper's sleep counters of `shard` (`away_idle_sleeps`, `away_irq_sleeps`,
    /// `away_irq_wakes`; the rest of the stats zero), read without driving the shard: the
    /// helper takes this caller for no consumer.
    pub fn away_stats(&self, shard: usize) -> Option<WorkerStats> {
        let slot = self.shared.slots.get(shard)?;
        let mut w = WorkerStats::default();
        slot.away.fill(&mut w);
        Some(w)
    }

    /// [`with_host`](Self::with_host) for an observer that must not wait long (DPDK telemetry's
    /// thread): fails with [`EngineError::TimedOut`] when `shard` has not answered within
    /// `timeout`; `f` may still run later, its answer then dropped. In inline mode the caller
    /// drives the shards meanwhile, as every inline caller does.
    pub fn with_host_within<R: Send + 'static>(
        &self,
        shard: usize,
        timeout: Duration,
        f: impl FnOnce(&mut Host<M>) -> R + Send + 'static,
    ) -> Result<R, EngineError> {
        let (command, rx) = with_host_command(f);
        self.submit(shard, command)?;
        self.await_reply_within(rx, shard, timeout)
    }

    /// [`stats`](Self::stats), waiting at most `timeout` (see [`Engine::with_host_within`]).
    pub fn stats_within(
        &self,
        shard: usize,
        timeout: Duration,
    ) -> Result<RuntimeStats, EngineError> {
        let (tx, rx) = sync_channel(1);
        self.submit(shard, Command::Stats { reply: tx })?;
        self.await_reply_within(rx, shard, timeout)
            .map(|s| self.with_away_counters(shard, s))
    }

    fn await_reply_within<T>(
        &self,
        rx: Receiver<T>,
        shard: usize,
        timeout: Duration,
    ) -> Result<T, EngineError> {
        let deadline = std::time::Instant::now() + timeout;
        match self.shared.progress {
            Progress::Core => rx.recv_timeout(timeout).map_err(|e| match e {
                std::sync::mpsc::RecvTimeoutError::Timeout => EngineError::TimedOut(shard),
                std::sync::mpsc::RecvTimeoutError::Disconnected => EngineError::Stopped,
            }),
            Progress::Inline => loop {
                match rx.try_recv() {
                    Ok(v) => return Ok(v),
                    Err(TryRecvError::Disconnected) => return Err(EngineError::Stopped),
                    Err(TryRecvError::Empty) => {
                        if std::time::Instant::now() >= deadline {
                            return Err(EngineError::TimedOut(shard));
                        }
                        if !self.shared.drive() {
                            core::hint::spin_loop();
                        }
                    }
                }
            },
        }
    }

    /// Runs `f` on the host of `shard` (control path) and returns its result.
    pub fn with_host<R: Send + 'static>(
        &self,
        shard: usize,
        f: impl FnOnce(&mut Host<M>) -> R + Send + 'static,
    ) -> Result<R, EngineError> {
        let (command, rx) = with_host_command(f);
        self.submit(shard, command)?;
        self.await_reply(rx)
    }
}

/// The command that runs `f` on a shard's host, and where its result arrives.
fn with_host_command<M: Memory, R: Send + 'static>(
    f: impl FnOnce(&mut Host<M>) -> R + Send + 'static,
) -> (Command<M>, Receiver<R>) {
    let (tx, rx) = sync_channel(1);
    let command = Command::WithHost(Box::new(move |h| {
        let _ = tx.send(f(h));
    }));
    (command, rx)
}
