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
//! spins in a DAT call (many drives between two looks) the helper looks less and less often, up
//! to every [`SPINNING_RECHECK`]: a wake-up of the helper costs the spinning consumer whose
//! core it lands on, and the ping-pong's tail would show it. An application that leaves such a
//! spin and goes away is covered after at most that long, then every period again. The helper's polls are counted in the
//! shard's [`WorkerStats`](super::WorkerStats) (`away_polls`, `away_busy_polls`,
//! `away_rx_frames`).

use super::{AsyncEvent, Shared};
use crate::engine::io::FrameIo;
use crate::transport::memory::Memory;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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

/// Consumer drives of a shard between two looks from which the helper concludes that a
/// consumer is spinning in a DAT call (an EVD wait polls thousands of times in a period; an
/// application away between posts drives once per post).
const SPINNING: u64 = 64;

/// The longest the helper sleeps while a consumer spins in a DAT call. Each wake-up of the
/// helper delays the spinning consumer whose core it lands on by about 20 µs in this VM: one
/// every `away_after` (50 µs) moved the DAT ping-pong's p99 from 1 to 20 µs over net_memif,
/// one a millisecond still moved it over net_af_packet (a 9 µs round trip: one iteration in
/// 110), one in 5 ms leaves it alone. The price: an application that leaves a spinning wait and
/// goes away is covered after up to this long (then every `away_after` again), well inside a
/// peer's retry budget.
pub(super) const SPINNING_RECHECK: Duration = Duration::from_millis(5);

/// The helper thread's loop: until the engine stops, every `period`, drive each shard no
/// consumer drove since the last look; while a consumer spins in a DAT call, look less often
/// (doubling the sleep up to [`SPINNING_RECHECK`]).
pub(super) fn run<M: Memory, Io: FrameIo>(shared: &Shared<M, Io>, period: Duration) {
    let mut seen: Vec<u64> = shared.slots.iter().map(|s| s.turns.get()).collect();
    let mut sleep = period;
    let long = SPINNING_RECHECK.max(period);
    while !shared.stop.load(Ordering::Relaxed) {
        // Engine::drop unparks the thread to stop it at once.
        std::thread::park_timeout(sleep);
        let mut spinning = false;
        for (i, slot) in shared.slots.iter().enumerate() {
            let turns = slot.turns.get();
            if turns != seen[i] {
                spinning |= turns.wrapping_sub(seen[i]) >= SPINNING;
                seen[i] = turns;
                continue;
            }
            loop {
                if shared.stop.load(Ordering::Relaxed) || shared.failed() {
                    return;
                }
                let Some(mut w) = slot.worker.try_lock() else {
                    break;
                };
                let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.poll_away()));
                let Ok(work) = ran else {
                    // As on a core-mode poll thread: the shard's state cannot be trusted, the
                    // engine takes no more submissions and the IAs hear of it.
                    w.push_async(AsyncEvent::ShardFailed { shard: i });
                    shared.failed.store(true, Ordering::Release);
                    tracing::error!(shard = i, "progress helper panicked: the engine is stopped");
                    return;
                };
                drop(w);
                if !work || slot.turns.get() != seen[i] {
                    break;
                }
            }
        }
        sleep = if spinning {
            (sleep * 2).min(long)
        } else {
            period
        };
    }
}
