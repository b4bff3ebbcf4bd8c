//! A bounded multi-producer queue of events with busy-poll and blocking waits: the ring behind
//! an event dispatcher (EVD). Poll-mode cores push without locks; a consumer waits by spinning,
//! by sleeping until woken (the core notifies only when someone sleeps), or by driving progress
//! itself (the inline mode of DESIGN.md "Progress").

use crossbeam_queue::ArrayQueue;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Why a wait returned without an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WaitError {
    /// The timeout expired first (DAT_TIMEOUT_EXPIRED).
    #[error("timeout expired")]
    Timeout,
}

/// A bounded event ring.
pub struct EventQueue<T> {
    ring: ArrayQueue<T>,
    sleepers: AtomicUsize,
    lock: Mutex<()>,
    cond: Condvar,
    overflowed: AtomicBool,
}

impl<T> EventQueue<T> {
    /// A queue holding at most `capacity` events (at least 1).
    pub fn new(capacity: usize) -> Self {
        EventQueue {
            ring: ArrayQueue::new(capacity.max(1)),
            sleepers: AtomicUsize::new(0),
            lock: Mutex::new(()),
            cond: Condvar::new(),
            overflowed: AtomicBool::new(false),
        }
    }

    /// Capacity.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Events queued now.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// True when no event is queued.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Queues an event; a full queue hands it back and remembers the overflow (DAT reports it
    /// as DAT_EVD_OVERFLOW on the async EVD: an event is never dropped silently).
    pub fn push(&self, ev: T) -> Result<(), T> {
        match self.ring.push(ev) {
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

    /// True (once) if a push failed because the queue was full since the last call.
    pub fn take_overflow(&self) -> bool {
        self.overflowed.swap(false, Ordering::SeqCst)
    }

    /// Dequeues an event without waiting (DAT_QUEUE_EMPTY when `None`).
    pub fn pop(&self) -> Option<T> {
        self.ring.pop()
    }

    /// Waits until at least `threshold` events are queued (at least 1), then dequeues one.
    /// `progress` is called while waiting: it drives the poll loop in inline mode and returns
    /// false when there is nothing to drive (then the caller sleeps until woken). `None` as
    /// timeout waits forever.
    pub fn wait(
        &self,
        timeout: Option<Duration>,
        threshold: usize,
        mut progress: impl FnMut() -> bool,
    ) -> Result<T, WaitError> {
        let threshold = threshold.clamp(1, self.capacity());
        let deadline = timeout.map(|t| Instant::now() + t);
        let expired = |now: Instant| deadline.is_some_and(|d| now >= d);
        // Spin briefly: one kernel wake-up costs ~40 us here (REFERENCE-dpdk.md).
        let mut spins = 0u32;
        loop {
            if self.ring.len() >= threshold {
                if let Some(ev) = self.ring.pop() {
                    return Ok(ev);
                }
            }
            let drove = progress();
            if drove || spins < 20_000 {
                spins = spins.saturating_add(1);
                if spins.is_multiple_of(256) && expired(Instant::now()) {
                    return Err(WaitError::Timeout);
                }
                core::hint::spin_loop();
                continue;
            }
            let now = Instant::now();
            if expired(now) {
                return Err(WaitError::Timeout);
            }
            let g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            if self.ring.len() < threshold {
                // Re-checked under the lock: a push after this point notifies us. Sleep in short
                // slices so a threshold reached by several pushes is seen promptly.
                let slice = Duration::from_millis(10);
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
    fn wait_times_out_when_nothing_comes() {
        let q: EventQueue<u32> = EventQueue::new(4);
        let t0 = Instant::now();
        let r = q.wait(Some(Duration::from_millis(30)), 1, || false);
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
        let got = q.wait(Some(Duration::from_secs(5)), 1, || false);
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
        assert_eq!(q.wait(Some(Duration::from_secs(5)), 3, || false), Ok(0));
        assert_eq!(q.len(), 2);
        t.join().unwrap();
    }

    #[test]
    fn inline_progress_produces_the_event_while_waiting() {
        let q = EventQueue::new(8);
        let mut calls = 0;
        let r = q.wait(Some(Duration::from_secs(1)), 1, || {
            calls += 1;
            if calls == 100 {
                q.push(7u32).unwrap();
            }
            true
        });
        assert_eq!(r, Ok(7));
        assert_eq!(calls, 100);
    }
}
