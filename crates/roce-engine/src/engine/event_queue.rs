//! A bounded multi-producer queue of events with busy-poll and blocking waits: the ring behind
//! an event dispatcher (EVD). Poll-mode cores push without locks; a consumer waits by spinning,
//! by sleeping until woken (the core notifies only when someone sleeps), or by driving progress
//! itself (the inline mode of docs/DESIGN.md "Progress").

use crossbeam_queue::ArrayQueue;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

/// Why a wait returned without an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The timeout expired first (DAT_TIMEOUT_EXPIRED).
    #[error("timeout expired")]
    Timeout,
}

/// Why a gated wait ([`EventQueue::wait_gated`]) returned without an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatedWaitError<E> {
    /// The timeout expired first.
    Timeout,
    /// The gate refused the wait (e.g. the EVD became unwaitable).
    Gate(E),
}

/// What a wait gate says: go on waiting (`Ok`), or give up with the error.
pub type Gate<E> = Result<(), E>;

/// What a waiter does once its spin budget is spent and `progress` found nothing to do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Sleep until a push or `wake_all` (core mode: a poll thread drives the port and
    /// notifies), re-checking every 10 ms.
    UntilWoken,
    /// Nap this long, then drive `progress` again (inline mode: nobody else polls the port,
    /// so a waiter that slept until woken would leave arriving frames unread).
    Nap(Duration),
}

/// Rounds a waiter spins (driving `progress`) after the last work before it goes idle.
const SPIN_ROUNDS: u32 = 20_000;

/// A bounded event ring.
pub struct EventQueue<T> {
    /// Write-locked only by [`EventQueue::resize`]; pushes and pops share it.
    ring: RwLock<ArrayQueue<T>>,
    /// Events pushed or being pushed, less those popped: never below the ring's length, and
    /// 0 only when the ring is empty with no push under way. A poll of an empty queue reads
    /// this alone (no lock, no fence).
    queued: AtomicUsize,
    sleepers: AtomicUsize,
    /// Threads inside [`EventQueue::wait_gated`].
    waiting: AtomicUsize,
    lock: Mutex<()>,
    cond: Condvar,
    overflowed: AtomicBool,
}

impl<T> EventQueue<T> {
    /// A queue holding at most `capacity` events (at least 1).
    pub fn new(capacity: usize) -> Self {
        EventQueue {
            ring: RwLock::new(ArrayQueue::new(capacity.max(1))),
            queued: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            waiting: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cond: Condvar::new(),
            overflowed: AtomicBool::new(false),
        }
    }

    fn ring(&self) -> RwLockReadGuard<'_, ArrayQueue<T>> {
        self.ring.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.ring().capacity()
    }

    /// Events queued now.
    pub fn len(&self) -> usize {
        self.ring().len()
    }

    /// True when no event is queued.
    pub fn is_empty(&self) -> bool {
        self.ring().is_empty()
    }

    /// Changes the capacity to `capacity` (at least 1), keeping the queued events in order;
    /// refused with the queued count when more events are queued than would fit
    /// (dat_evd_resize: DAT_INVALID_STATE).
    pub fn resize(&self, capacity: usize) -> Result<(), usize> {
        let mut ring = self.ring.write().unwrap_or_else(|e| e.into_inner());
        let queued = ring.len();
        if queued > capacity.max(1) {
            return Err(queued);
        }
        let new = ArrayQueue::new(capacity.max(1));
        while let Some(ev) = ring.pop() {
            // Fits: checked above, and no push can race the write lock.
            let _ = new.push(ev);
        }
        *ring = new;
        Ok(())
    }

    /// Wakes every sleeping waiter so it re-evaluates its gate (an EVD changed state).
    pub fn wake_all(&self) {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        self.cond.notify_all();
    }

    /// Queues an event; a full queue hands it back and remembers the overflow (DAT reports it
    /// as DAT_EVD_OVERFLOW on the async EVD: an event is never dropped silently).
    pub fn push(&self, ev: T) -> Result<(), T> {
        let pushed = self.ring_push(ev);
        match pushed {
            Ok(()) => {
                if self.sleepers.load(Ordering::SeqCst) > 0 {
                    let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                    self.cond.notify_all();
                }
                Ok(())
            }
            Err(ev) => {
                self.overflowed.store(true, Ordering::SeqCst);
                Err(ev)
            }
        }
    }

    /// Queues a batch in order (a receive burst's completions for one EVD): one pass for the
    /// whole batch and at most one wake-up. Events that do not fit stay in `batch`, the first
    /// refused one in front, and the overflow is remembered as for [`EventQueue::push`].
    pub fn push_batch(&self, batch: &mut VecDeque<T>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len();
        // Counted before the pushes, as `ring_push` does: `queued` never falls below the
        // ring's length.
        self.queued.fetch_add(n, Ordering::AcqRel);
        {
            let ring = self.ring();
            while let Some(ev) = batch.pop_front() {
                if let Err(ev) = ring.push(ev) {
                    batch.push_front(ev);
                    break;
                }
            }
        }
        if !batch.is_empty() {
            self.queued.fetch_sub(batch.len(), Ordering::AcqRel);
            self.overflowed.store(true, Ordering::SeqCst);
        }
        if batch.len() < n && self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cond.notify_all();
        }
    }

    /// Queues an event unless the queue is full (then hands it back without recording an
    /// overflow: the caller reports the refusal itself, as dat_evd_post_se's DAT_QUEUE_FULL).
    pub fn try_push(&self, ev: T) -> Result<(), T> {
        self.ring_push(ev)?;
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.cond.notify_all();
        }
        Ok(())
    }

    /// True (once) if a push failed because the queue was full since the last call.
    pub fn take_overflow(&self) -> bool {
        self.overflowed.swap(false, Ordering::SeqCst)
    }

    /// Pushes into the ring, counted in [`EventQueue::queued`] from before the push.
    fn ring_push(&self, ev: T) -> Result<(), T> {
        self.queued.fetch_add(1, Ordering::AcqRel);
        let pushed = self.ring().push(ev);
        if pushed.is_err() {
            self.queued.fetch_sub(1, Ordering::AcqRel);
        }
        pushed
    }

    /// Pops from `ring`, counted out of [`EventQueue::queued`]; with whether nothing else is
    /// queued or being pushed now.
    fn ring_pop(&self, ring: &ArrayQueue<T>) -> Option<(T, bool)> {
        let ev = ring.pop()?;
        let before = self.queued.fetch_sub(1, Ordering::AcqRel);
        Some((ev, before == 1))
    }

    /// Dequeues an event without waiting (DAT_QUEUE_EMPTY when `None`).
    pub fn pop(&self) -> Option<T> {
        self.pop_noting_empty().map(|(ev, _)| ev)
    }

    /// [`EventQueue::pop`], and whether the queue was empty after it. An empty queue costs
    /// one load.
    pub fn pop_noting_empty(&self) -> Option<(T, bool)> {
        if self.queued.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.ring_pop(&self.ring())
    }

    /// Waits until at least `threshold` events are queued (at least 1), then dequeues one.
    /// `progress` is called while waiting: it drives the poll loop in inline mode and returns
    /// false when there was nothing to do; after `SPIN_ROUNDS` such rounds in a row the
    /// waiter goes `idle`. `None` as timeout waits forever.
    pub fn wait(
        &self,
        timeout: Option<Duration>,
        threshold: usize,
        progress: impl FnMut() -> bool,
        idle: Idle,
    ) -> Result<T, WaitError> {
        self.wait_gated(timeout, threshold, progress, || Gate::<()>::Ok(()), idle)
            .map_err(|_| WaitError::Timeout)
    }

    /// Threads waiting in [`EventQueue::wait_gated`] now (what a test waits for before it
    /// releases a waiter).
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// [`EventQueue::wait`] with a gate consulted on every round: `Err(e)` ends the wait with
    /// `e` (an unwaitable EVD releases its waiters).
    /// Call [`EventQueue::wake_all`] after changing what the gate reads.
    pub fn wait_gated<E>(
        &self,
        timeout: Option<Duration>,
        threshold: usize,
        mut progress: impl FnMut() -> bool,
        gate: impl Fn() -> Gate<E>,
        idle: Idle,
    ) -> Result<T, GatedWaitError<E>> {
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let _left = Leave(&self.waiting);
        let deadline = timeout.map(|t| Instant::now() + t);
        let expired = |now: Instant| deadline.is_some_and(|d| now >= d);
        // Met: the threshold (clamped to the current capacity, which a resize may change).
        let met = || {
            let ring = self.ring();
            ring.len() >= threshold.clamp(1, ring.capacity())
        };
        // Spin briefly: one kernel wake-up costs ~40 us here (docs/REFERENCE-dpdk.md).
        let mut spins = 0u32;
        loop {
            gate().map_err(GatedWaitError::Gate)?;
            if met() {
                if let Some((ev, _)) = self.ring_pop(&self.ring()) {
                    return Ok(ev);
                }
            }
            if progress() {
                // Work was done: the spin budget starts again.
                spins = 0;
            }
            if spins < SPIN_ROUNDS {
                spins += 1;
                if spins.is_multiple_of(256) && expired(Instant::now()) {
                    return Err(GatedWaitError::Timeout);
                }
                core::hint::spin_loop();
                continue;
            }
            let now = Instant::now();
            if expired(now) {
                return Err(GatedWaitError::Timeout);
            }
            let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if !met() {
                // Re-checked under the lock: a push or wake_all after this point notifies us.
                // Sleep in short slices so a threshold reached by several pushes is seen
                // promptly.
                let slice = match idle {
                    Idle::UntilWoken => Duration::from_millis(10),
                    Idle::Nap(d) => d,
                };
                let d = deadline.map_or(slice, |d| d.saturating_duration_since(now).min(slice));
                let _ = self
                    .cond
                    .wait_timeout(g, d)
                    .unwrap_or_else(|e| e.into_inner());
            } else {
                drop(g);
            }
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Decrements a waiter count when a wait ends, however it ends.
struct Leave<'a>(&'a AtomicUsize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn push_pop_and_overflow_is_reported_not_lost() {
        let q = EventQueue::new(2);
        assert!(q.pop().is_none());
        q.push(1).unwrap();
        q.push(2).unwrap();
        assert_eq!(q.push(3), Err(3), "full queue hands the event back");
        assert!(q.take_overflow());
        assert!(!q.take_overflow(), "reported once");
        assert_eq!(q.pop(), Some(1));
        assert_eq!(q.pop(), Some(2));
    }

    #[test]
    fn pop_noting_empty_follows_pushes_pops_refusals_and_resizes() {
        let q = EventQueue::new(2);
        assert_eq!(q.pop_noting_empty(), None);
        q.push(1).unwrap();
        q.push(2).unwrap();
        assert_eq!(q.push(3), Err(3));
        assert_eq!(q.try_push(4), Err(4));
        assert_eq!(q.pop_noting_empty(), Some((1, false)));
        q.resize(8).unwrap();
        q.push(5).unwrap();
        assert_eq!(q.pop_noting_empty(), Some((2, false)));
        assert_eq!(
            q.pop_noting_empty(),
            Some((5, true)),
            "the refused pushes left no count"
        );
        assert_eq!(q.pop_noting_empty(), None);
        assert!(q.is_empty());
    }

    #[test]
    fn a_batch_is_queued_in_order_and_what_does_not_fit_stays_in_it() {
        let q = EventQueue::new(4);
        q.push(0).unwrap();
        let mut batch: VecDeque<u32> = (1..=5).collect();
        q.push_batch(&mut batch);
        assert_eq!(batch, [4, 5], "the refused events stay, in order");
        assert!(q.take_overflow());
        q.push_batch(&mut VecDeque::new());
        assert!(!q.take_overflow(), "an empty batch is no overflow");
        let got: Vec<_> = std::iter::from_fn(|| q.pop_noting_empty()).collect();
        assert_eq!(
            got,
            [(0, false), (1, false), (2, false), (3, true)],
            "the refused events left no count"
        );
        q.push_batch(&mut batch);
        assert!(batch.is_empty());
        assert!(!q.take_overflow());
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn a_sleeping_waiter_is_woken_by_a_batch() {
        let q = Arc::new(EventQueue::new(8));
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            q2.push_batch(&mut VecDeque::from([7u32, 8]));
        });
        let got = q.wait(Some(Duration::from_secs(5)), 2, || false, Idle::UntilWoken);
        assert_eq!(got, Ok(7));
        assert_eq!(q.pop(), Some(8));
        t.join().unwrap();
    }

    #[test]
    fn wait_times_out_when_nothing_comes() {
        let q: EventQueue<u32> = EventQueue::new(4);
        let t0 = Instant::now();
        let r = q.wait(
            Some(Duration::from_millis(30)),
            1,
            || false,
            Idle::UntilWoken,
        );
        assert_eq!(r, Err(WaitError::Timeout));
        assert!(t0.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_sleeping_waiter_is_woken_by_a_push_from_another_thread() {
        let q = Arc::new(EventQueue::new(8));
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            q2.push(42u32).unwrap();
        });
        let got = q.wait(Some(Duration::from_secs(5)), 1, || false, Idle::UntilWoken);
        assert_eq!(got, Ok(42));
        t.join().unwrap();
    }

    #[test]
    fn threshold_waits_for_enough_events() {
        let q = Arc::new(EventQueue::new(8));
        let q2 = q.clone();
        let t = std::thread::spawn(move || {
            for i in 0..3u32 {
                std::thread::sleep(Duration::from_millis(5));
                q2.push(i).unwrap();
            }
        });
        assert_eq!(
            q.wait(Some(Duration::from_secs(5)), 3, || false, Idle::UntilWoken),
            Ok(0)
        );
        assert_eq!(q.len(), 2);
        t.join().unwrap();
    }

    #[test]
    fn inline_progress_produces_the_event_while_waiting() {
        let q = EventQueue::new(8);
        let mut calls = 0;
        let r = q.wait(
            Some(Duration::from_secs(1)),
            1,
            || {
                calls += 1;
                if calls == 100 {
                    q.push(7u32).unwrap();
                }
                true
            },
            Idle::UntilWoken,
        );
        assert_eq!(r, Ok(7));
        assert_eq!(calls, 100);
    }

    /// An inline waiter past its spin budget naps and drives again: a frame that arrives
    /// while it is idle (the event its later `progress` call produces) still reaches it.
    #[test]
    fn an_idle_inline_waiter_keeps_driving_progress() {
        let q = EventQueue::new(8);
        let mut calls = 0u32;
        let target = SPIN_ROUNDS + 20;
        let r = q.wait(
            Some(Duration::from_secs(30)),
            1,
            || {
                calls += 1;
                if calls == target {
                    q.push(9u32).unwrap();
                }
                false
            },
            Idle::Nap(Duration::from_micros(50)),
        );
        assert_eq!(r, Ok(9));
        assert_eq!(calls, target);
    }

    /// Work restarts the spin budget: a waiter whose progress keeps finding work never
    /// goes idle, however long it waits.
    #[test]
    fn work_restarts_the_spin_budget() {
        let q = EventQueue::new(8);
        let mut calls = 0u32;
        let target = 3 * SPIN_ROUNDS;
        let r = q.wait(
            Some(Duration::from_secs(30)),
            1,
            || {
                calls += 1;
                if calls == target {
                    q.push(1u32).unwrap();
                }
                // Work every 1000th round only: idle stretches shorter than the budget.
                calls.is_multiple_of(1000)
            },
            // A nap longer than the test's timeout would fail it if the waiter ever idled.
            Idle::Nap(Duration::from_secs(60)),
        );
        assert_eq!(r, Ok(1));
    }
}
