//! Inline progress while the application is away: the engine's `roce-progress` thread drives a
//! shard that no consumer thread has driven for a while (docs/DESIGN.md "Progress").
//!
//! With inline progress the consumer threads drive the shards from inside their DAT calls. A
//! consumer that computes or sleeps makes no call, and a peer's RDMA READ, WRITE or atomic,
//! which needs no local work request, would wait for its next one (past the peer's retry
//! budget if it is long). The helper keeps them answered:
//!
//! - every consumer drive of a shard bumps the shard's turn counter ([`Turns`]: one relaxed
//!   load and store, no fence, on the consumer's path);
//! - the helper wakes every `away_after` and looks at each counter: a shard whose counter moved
//!   since its last look has a consumer, and the helper leaves it alone (it never takes the
//!   shard's lock then, so a consumer's `try_lock` never finds it taken by the helper);
//! - a shard whose counter stood still for a whole period is driven by the helper, one poll at
//!   a time under the shard's lock, as long as the polls find work and no consumer came back
//!   (the counter is read again before every poll).
//!
//! So a frame that reaches a shard whose application went away is handled between one and two
//! periods (plus the thread's wake-up) after the application's last call. While a consumer
//! waits in a DAT call (it drives the shard at least every [`DRIVEN_EVERY`], spinning or
//! napping) the helper looks less and less often, up to every [`SPINNING_RECHECK`]: a wake-up
//! of the helper costs the waiting consumer whose core it lands on (the ping-pong's tail would
//! show it), and what else shares the cores. An application that leaves such a wait and goes
//! away is covered after at most twice that long, then every period again.
//!
//! While nothing arrives (no consumer, and the helper's polls find no work) the helper sleeps
//! longer: where every port queue has a receive interrupt (`FrameIo::rx_interrupt`: net_tap),
//! after [`QUIET_LOOKS`] quiet looks it arms them, polls once more (a frame that came before the
//! arming signals nothing), and sleeps until a frame arrives or [`IDLE_RECHECK`] passed (the
//! shards' timers still need driving); elsewhere, once quiet for [`QUIET_SPELL`], it doubles
//! its sleep up to [`IDLE_RECHECK`].
//! Any work found, or a consumer's return, brings it back to the period. The helper's polls are
//! counted in the shard's [`WorkerStats`](super::WorkerStats) (`away_polls`, `away_busy_polls`,
//! `away_rx_frames`), its long sleeps in [`AwayCounters`] (`away_idle_sleeps`,
//! `away_irq_sleeps`, `away_irq_wakes`).

use super::{AsyncEvent, Shared, WorkerStats};
use crate::io::{FrameIo, RxInterrupt};
use crate::mem::access::Memory;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How many times consumer threads have driven one shard (wrapping): written by the
/// consumers, read by the helper.
#[derive(Default)]
pub(super) struct Turns(AtomicU64);

impl Turns {
    /// A consumer is about to drive the shard. Not a read-modify-write: two consumers racing
    /// may count once, but the counter still moves, which is all the helper looks at.
    #[inline]
    pub(super) fn mark(&self) {
        let n = self.0.load(Ordering::Relaxed);
        self.0.store(n.wrapping_add(1), Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// The helper's long sleeps, counted on every shard it slept for (written by the helper only,
/// read without the shard's lock, so that reading them does not drive the shard).
#[derive(Default)]
pub(super) struct AwayCounters {
    /// Sleeps longer than the period because every shard was quiet (timer or interrupt).
    idle_sleeps: AtomicU64,
    /// Of those, sleeps on the port's receive interrupt.
    irq_sleeps: AtomicU64,
    /// Of those, ended by a frame rather than by the timeout.
    irq_wakes: AtomicU64,
}

impl AwayCounters {
    fn bump(c: &AtomicU64) {
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    /// Copies the counters into `w`.
    pub(super) fn fill(&self, w: &mut WorkerStats) {
        w.away_idle_sleeps = self.idle_sleeps.load(Ordering::Relaxed);
        w.away_irq_sleeps = self.irq_sleeps.load(Ordering::Relaxed);
        w.away_irq_wakes = self.irq_wakes.load(Ordering::Relaxed);
    }
}

/// A consumer that drives a shard at least once this often (over the time between two looks)
/// is taken for one waiting in a DAT call, spinning or napping between polls (an EVD wait polls
/// thousands of times a millisecond spinning, every 50-100 µs napping); an application away
/// between posts drives once per post. Counting only spinning (64 drives a look) left the
/// helper looking every period beside a napping waiter, and those wake-ups starved a TCG guest
/// on two vCPUs (`tests/interop_rxe.rs`).
const DRIVEN_EVERY: Duration = Duration::from_millis(1);

/// The longest the helper sleeps while a consumer waits in a DAT call. Each wake-up of the
/// helper delays the spinning consumer whose core it lands on by about 20 µs in this VM: one
/// every `away_after` (50 µs) moved the DAT ping-pong's p99 from 1 to 20 µs over net_memif,
/// one a millisecond still moved it over net_af_packet (a 9 µs round trip: one iteration in
/// 110), one in 5 ms leaves it alone. The price: an application that leaves a spinning wait and
/// goes away is covered after up to this long (then every `away_after` again), well inside a
/// peer's retry budget.
pub(super) const SPINNING_RECHECK: Duration = Duration::from_millis(5);

/// Looks in a row that found every shard quiet (no consumer drove it, the helper's polls found
/// no work) before the helper sleeps on the receive interrupts.
pub(super) const QUIET_LOOKS: u32 = 4;

/// How long every shard stays quiet before the helper without receive interrupts backs off:
/// until then it keeps its period, so that a peer reading every few hundred microseconds is
/// answered within it (backing off at once made a READ every 200 µs over net_af_packet wait
/// 1.3 ms at p50); an idle engine pays about 20 more wake-ups after its last frame.
pub(super) const QUIET_SPELL: Duration = Duration::from_millis(1);

/// The longest the helper sleeps while every shard is quiet: the timeout of its sleep on the
/// receive interrupts (the shards' timers, retransmissions of the away application's own
/// requests, still need driving), and the cap of its doubling sleep where there is no
/// interrupt (net_memif, net_af_packet). There, a frame that reaches an engine quiet for a
/// while is handled up to this long (plus the wake-up) after it arrives: a peer's first READ
/// after a quiet spell waits up to 10 ms, against a requester's retry timeout of 4.096 µs *
/// 2^timeout (67 ms at 14, the provider's default) and 7 retries. An
/// idle engine's helper so wakes 100 times a second.
pub(super) const IDLE_RECHECK: Duration = Duration::from_millis(10);

/// What the helper's next sleep is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sleep {
    /// `park_timeout`: the period, or longer while a consumer waits in a DAT call.
    Timer,
    /// `park_timeout` longer than the period because every shard is quiet.
    IdleTimer,
    /// On the receive interrupts, armed, with [`IDLE_RECHECK`] as timeout.
    Interrupt,
}

/// The helper thread's loop: until the engine stops, every `period`, drive each shard no
/// consumer drove since the last look; while a consumer waits in a DAT call, look less often
/// (doubling the sleep up to [`SPINNING_RECHECK`]); while nothing arrives, sleep on the
/// receive interrupts `irqs` (one per port queue, by shard index: all or none) or back off up
/// to [`IDLE_RECHECK`].
pub(super) fn run<M: Memory, Io: FrameIo>(
    shared: &Shared<M, Io>,
    period: Duration,
    mut irqs: Vec<(usize, Box<dyn RxInterrupt>)>,
) {
    let mut seen: Vec<u64> = shared.slots.iter().map(|s| s.turns.get()).collect();
    let mut armed = vec![false; shared.slots.len()];
    let mut sleep = period;
    let mut kind = Sleep::Timer;
    let mut quiet = 0u32;
    let spin_max = SPINNING_RECHECK.max(period);
    let idle_max = IDLE_RECHECK.max(period);
    let spell = u32::try_from(QUIET_SPELL.as_micros() / period.as_micros().max(1)).unwrap_or(1);
    let backoff = |quiet: u32, sleep: Duration| {
        if quiet >= spell {
            (Sleep::IdleTimer, (sleep * 2).min(idle_max))
        } else {
            (Sleep::Timer, period)
        }
    };
    let mut looked = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        let by_frame = match (kind, irqs.first_mut()) {
            (Sleep::Interrupt, Some((_, irq))) => irq.wait(sleep),
            _ => {
                // Engine::drop unparks the thread to stop it at once.
                std::thread::park_timeout(sleep);
                false
            }
        };
        if kind != Sleep::Timer {
            for slot in &shared.slots {
                AwayCounters::bump(&slot.away.idle_sleeps);
                if kind == Sleep::Interrupt {
                    AwayCounters::bump(&slot.away.irq_sleeps);
                    if by_frame {
                        AwayCounters::bump(&slot.away.irq_wakes);
                    }
                }
            }
        }
        let now = Instant::now();
        let waiting_drives =
            (now.duration_since(looked).as_micros() / DRIVEN_EVERY.as_micros()).max(1) as u64;
        looked = now;
        let mut spinning = false;
        let mut busy = false;
        for (i, slot) in shared.slots.iter().enumerate() {
            let turns = slot.turns.get();
            if turns != seen[i] {
                spinning |= turns.wrapping_sub(seen[i]) >= waiting_drives;
                busy = true;
                seen[i] = turns;
                continue;
            }
            let mut first = true;
            loop {
                let Some(mut w) = slot.worker.try_lock() else {
                    busy = true;
                    break;
                };
                if std::mem::take(&mut armed[i]) {
                    if let Some((_, irq)) = irqs.iter_mut().find(|(s, _)| *s == i) {
                        irq.disarm();
                    }
                }
                let Some(work) = poll(shared, i, &mut w) else {
                    return;
                };
                drop(w);
                busy |= work && first;
                first = false;
                if !work || slot.turns.get() != seen[i] {
                    break;
                }
            }
        }
        (kind, sleep) = if spinning {
            quiet = 0;
            (Sleep::Timer, (sleep * 2).clamp(period, spin_max))
        } else if busy {
            quiet = 0;
            (Sleep::Timer, period)
        } else {
            quiet += 1;
            if quiet >= QUIET_LOOKS && !irqs.is_empty() {
                match arm(shared, &mut irqs, &mut armed, &seen) {
                    Armed::Yes => (Sleep::Interrupt, idle_max),
                    Armed::Busy => {
                        quiet = 0;
                        (Sleep::Timer, period)
                    }
                    Armed::Refused => {
                        tracing::debug!(target: "dpdk_roce::engine::runtime::away", "receive interrupt refused: the helper sleeps on a timer");
                        irqs.clear();
                        backoff(quiet, sleep)
                    }
                    Armed::Stop => return,
                }
            } else {
                backoff(quiet, sleep)
            }
        };
    }
}

/// One `poll_away` of shard `i` (whose lock `w` is), a panic stopping the engine; `None`
/// then.
fn poll<M: Memory, Io: FrameIo>(
    shared: &Shared<M, Io>,
    i: usize,
    w: &mut super::Worker<M, Io>,
) -> Option<bool> {
    if shared.stop.load(Ordering::Relaxed) || shared.failed() {
        return None;
    }
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.poll_away()));
    match ran {
        Ok(work) => Some(work),
        Err(_) => {
            // As on a core-mode poll thread: the shard's state cannot be trusted, the
            // engine takes no more submissions and the IAs hear of it.
            w.push_async(AsyncEvent::ShardFailed { shard: i });
            shared.failed.store(true, Ordering::Release);
            tracing::error!(target: "dpdk_roce::engine::runtime::away", shard = i, "progress helper panicked: the engine is stopped");
            None
        }
    }
}

/// How arming the receive interrupts went.
enum Armed {
    /// All armed, and a last poll of their shards found nothing: sleep on them.
    Yes,
    /// A consumer came back or a poll found work (what was armed is disarmed at the next look).
    Busy,
    /// The device refused: sleep on a timer from now on.
    Refused,
    /// The engine stops.
    Stop,
}

/// Arms every receive interrupt, each under its shard's lock, then polls the shard once: a
/// frame that arrived before the arming raised nothing.
fn arm<M: Memory, Io: FrameIo>(
    shared: &Shared<M, Io>,
    irqs: &mut [(usize, Box<dyn RxInterrupt>)],
    armed: &mut [bool],
    seen: &[u64],
) -> Armed {
    for (i, irq) in irqs.iter_mut() {
        let i = *i;
        let slot = &shared.slots[i];
        if slot.turns.get() != seen[i] {
            return Armed::Busy;
        }
        let Some(mut w) = slot.worker.try_lock() else {
            return Armed::Busy;
        };
        if !irq.arm() {
            return Armed::Refused;
        }
        armed[i] = true;
        match poll(shared, i, &mut w) {
            None => return Armed::Stop,
            Some(true) => return Armed::Busy,
            Some(false) => {}
        }
    }
    Armed::Yes
}
