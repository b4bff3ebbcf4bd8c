//! [`SharedSrq`]: the engine-level shared receive queue (IBTA vol. 1 §10.2.9) that consumer
//! threads post to and QPs on any poll-mode core draw from, with the SRQ limit (low watermark)
//! event (§10.2.9.3, §11.5.2.4; DAT `dat_srq_set_lw`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam_queue::SegQueue;

use crate::transport::types::{QpError, RecvWr, MAX_SGE};

const ARMED: u64 = 1 << 63;
const SEQ_SHIFT: u32 = 32;
const SEQ_MASK: u64 = (1 << 31) - 1;

/// Disarms `word` if it is armed at a level `fires(level)` accepts; true when this call fired.
/// The word carries an arming sequence number, so a stale view of an older arming can never
/// disarm a newer one.
pub(crate) fn fire_once(word: &AtomicU64, fires: impl Fn(u32) -> bool) -> bool {
    let w = word.load(Ordering::SeqCst);
    if w & ARMED == 0 || !fires(w as u32) {
        return false;
    }
    word.compare_exchange(w, w & !ARMED, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
}

/// Arms (`Some(level)`) or disarms (`None`) `word` with a fresh sequence number.
pub(crate) fn arm(word: &AtomicU64, level: Option<u32>) {
    let mut w = word.load(Ordering::SeqCst);
    loop {
        let seq = ((w >> SEQ_SHIFT) + 1) & SEQ_MASK;
        let new = (seq << SEQ_SHIFT) | level.map_or(0, |l| ARMED | u64::from(l));
        match word.compare_exchange(w, new, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return,
            Err(x) => w = x,
        }
    }
}

/// A shared receive queue as a bounded lock-free MPMC pool.
///
/// Concurrency: the WQEs live in a `crossbeam_queue::SegQueue` (lock-free, FIFO per producer);
/// one atomic word holds the number of WQEs posted and not yet taken (low 32 bits) and the depth
/// (high 32 bits). A post reserves a slot with a CAS that fails when the count has reached the
/// depth, then pushes; a take decrements after it pops, so the count is never below the queue's
/// length and never underflows; while posts are in flight it may briefly overcount, which can
/// only delay the limit event, never fire it early or twice. A resize
/// ([`resize`](Self::resize), `dat_srq_resize`) changes the depth with a CAS on the same word,
/// so it can never shrink the depth below the WQEs posted, however it races with posts.
///
/// Limit event (IBTA vol. 1 §10.2.9.3 / §11.5.2.4: "SRQ limit reached"; DAT `dat_srq_set_lw`):
/// armed by [`arm_limit`](Self::arm_limit), fires once when the number of posted WQEs drops below
/// the limit — on a take, or during the arm call itself when the count is already below it —
/// and stays disarmed until the next `arm_limit`.
#[derive(Debug)]
pub struct SharedSrq {
    srqn: u32,
    max_sge: u32,
    queue: SegQueue<RecvWr>,
    /// Posted count (low 32 bits) and depth (high 32 bits).
    posted: AtomicU64,
    limit: AtomicU64,
    limit_pending: AtomicBool,
    limit_fired: AtomicU64,
}

impl SharedSrq {
    /// An empty SRQ of `depth` (>= 1) WQEs of at most `max_sge` (<= MAX_SGE) entries.
    pub fn new(srqn: u32, depth: u32, max_sge: u32) -> SharedSrq {
        SharedSrq {
            srqn,
            max_sge: max_sge.min(MAX_SGE as u32),
            queue: SegQueue::new(),
            posted: AtomicU64::new(u64::from(depth.max(1)) << 32),
            limit: AtomicU64::new(0),
            limit_pending: AtomicBool::new(false),
            limit_fired: AtomicU64::new(0),
        }
    }

    /// This SRQ's number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// Maximum number of posted WQEs.
    pub fn depth(&self) -> usize {
        (self.posted.load(Ordering::SeqCst) >> 32) as usize
    }

    /// Changes the depth to `depth` (`dat_srq_resize`; >= 1). Refused with the number of WQEs
    /// posted when that is more than `depth` (DAT 2.0 `dat_srq_resize`: an SRQ cannot shrink
    /// below its outstanding posted receives, DAT_INVALID_STATE).
    pub fn resize(&self, depth: u32) -> Result<(), u32> {
        let depth = depth.max(1);
        let mut w = self.posted.load(Ordering::SeqCst);
        loop {
            let posted = w as u32;
            if posted > depth {
                return Err(posted);
            }
            let new = (u64::from(depth) << 32) | u64::from(posted);
            match self
                .posted
                .compare_exchange(w, new, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => return Ok(()),
                Err(x) => w = x,
            }
        }
    }

    /// Posts a receive WQE (`dat_srq_post_recv`); any thread. `QueueFull` when `depth` WQEs
    /// are posted already.
    pub fn post_recv(&self, wr: RecvWr) -> Result<(), QpError> {
        if wr.sgl.len() > self.max_sge as usize {
            return Err(QpError::TooManySge);
        }
        let mut w = self.posted.load(Ordering::SeqCst);
        loop {
            if w as u32 >= (w >> 32) as u32 {
                return Err(QpError::QueueFull);
            }
            match self
                .posted
                .compare_exchange(w, w + 1, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(x) => w = x,
            }
        }
        self.queue.push(wr);
        Ok(())
    }

    /// WQEs posted and not yet taken (may briefly include posts still in progress).
    pub fn len(&self) -> usize {
        self.count() as usize
    }

    fn count(&self) -> u32 {
        self.posted.load(Ordering::SeqCst) as u32
    }

    /// Removes one from the posted count (after a pop); the new count.
    fn uncount(&self) -> u32 {
        (self.posted.fetch_sub(1, Ordering::SeqCst) as u32).wrapping_sub(1)
    }

    /// True when no WQE is posted.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Arms the limit event at `limit` WQEs (0 disarms). Returns true when the event fired
    /// during this call because fewer than `limit` WQEs are posted already.
    pub fn arm_limit(&self, limit: u32) -> bool {
        arm(&self.limit, (limit != 0).then_some(limit));
        let n = self.count();
        self.fire_if_below(n)
    }

    /// The limit currently armed, if any.
    pub fn armed_limit(&self) -> Option<u32> {
        let w = self.limit.load(Ordering::SeqCst);
        (w & ARMED != 0).then_some(w as u32)
    }

    /// True once per fired limit event (then cleared).
    pub fn poll_limit_event(&self) -> bool {
        self.limit_pending.swap(false, Ordering::SeqCst)
    }

    /// How many limit events have fired in total.
    pub fn limit_events_fired(&self) -> u64 {
        self.limit_fired.load(Ordering::SeqCst)
    }

    fn fire_if_below(&self, n: u32) -> bool {
        if fire_once(&self.limit, |l| n < l) {
            self.limit_fired.fetch_add(1, Ordering::SeqCst);
            self.limit_pending.store(true, Ordering::SeqCst);
            true
        } else {
            false
        }
    }

    /// Takes the oldest available WQE (a responder consuming it for an inbound message); any
    /// poll-mode core. May fire the limit event.
    pub fn take(&self) -> Option<RecvWr> {
        let wr = self.queue.pop()?;
        let n = self.uncount();
        self.fire_if_below(n);
        Some(wr)
    }

    /// Drops every posted WQE (`dat_srq_free`) and returns them (to flush as completions).
    pub fn drain(&self) -> Vec<RecvWr> {
        let mut out = Vec::new();
        while let Some(wr) = self.queue.pop() {
            self.uncount();
            out.push(wr);
        }
        out
    }
}
