//! Per-EP receive-buffer accounting: the counts behind `dat_ep_recv_query` (seed 004) and the
//! watermarks of `dat_ep_set_watermark` (seed 002).
//!
//! Rules implemented (seed 004, `dat_ep_recv_query`):
//! - *allocated at take*: for an EP on an SRQ a buffer is allocated to the EP when the EP removes
//!   it from the SRQ ([`EpRecvAccount::allocate`]); for an EP with its own receive queue, as soon as
//!   it is posted ([`EpRecvAccount::allocate_posted`]);
//! - `nbufs_allocated` is the number of buffers allocated to the EP and not yet completed;
//! - `bufs_alloc_span` is the latest MSN of an allocated buffer minus the latest MSN for which a
//!   completion was generated; MSNs here count only the messages that consume receive buffers
//!   (Sends of the remote EP), so an in-order RC EP has span == count;
//! - *single consistent scan*: both numbers come from one snapshot (one 64-bit atomic word), so
//!   they always describe the same set of buffers;
//! - *span never smaller than count*: "the implementation must never report n buffers in a span
//!   that is less than n".
//!
//! Rules implemented (seed 002, `dat_ep_set_watermark`):
//! - a *soft high watermark* event is generated when the number of receive buffers at the EP
//!   exceeds the watermark, only once per setting; a new `set_watermark` re-arms it;
//! - a *hard high watermark* exceeded generates a connection-broken event, once the connection is
//!   established ("ready ... as soon as the connection is established");
//! - both can fire *during the call* (the new value is already below the current count) or when
//!   the EP takes a buffer; soft and hard are independent;
//! - [`WATERMARK_INFINITE`] (the default) generates no event. (It does not prevent the
//!   connection-broken event when a message arrives with no receive buffer: that is the
//!   transport's RNR / error path, not this module.)
//!
//! Concurrency: the EP's poll-mode core owns the writer half [`EpRecvAccount`] (`&mut self`: a
//! single writer by construction) and keeps the exact state privately; after every change it
//! publishes `(count, span)` in one atomic word. Consumers hold [`EpRecvHandle`]s (any thread,
//! any number). Watermarks are armed words (armed bit + arming sequence number + value) both
//! sides test and disarm with one CAS, so each arming fires at most once even when a consumer's
//! `set_watermark` races with a take on the core; the writer publishes the count before it tests
//! the watermarks and the consumer arms before it reads the count (all `SeqCst`), so an exceeded
//! arming is never missed by both.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use super::pool::{arm, fire_once};

/// `DAT_WATERMARK_INFINITE`: no watermark event.
pub const WATERMARK_INFINITE: u32 = u32::MAX;

const MSN_MASK: u32 = 0x00ff_ffff;

/// Whether `a` is later than `b` in 24-bit serial arithmetic.
fn msn_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & MSN_MASK;
    d != 0 && d < (1 << 23)
}

/// `dat_ep_recv_query` output.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RecvQuery {
    /// Buffers allocated to the EP and not yet completed.
    pub nbufs_allocated: u32,
    /// Buffers the EP needs to complete the messages it is receiving (never below
    /// `nbufs_allocated`).
    pub bufs_alloc_span: u32,
}

/// Events a change generated; the caller delivers them (soft: an async event on the IA's
/// async EVD; hard: break the connection, a connection-broken event on the EP's connect EVD).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct WatermarkEvents {
    pub soft: bool,
    pub hard: bool,
}

impl WatermarkEvents {
    /// True when any event fired.
    pub fn any(self) -> bool {
        self.soft || self.hard
    }
    /// Either event of `self` or `other`.
    pub fn or(self, other: WatermarkEvents) -> WatermarkEvents {
        WatermarkEvents {
            soft: self.soft || other.soft,
            hard: self.hard || other.hard,
        }
    }
}

#[derive(Debug)]
struct Shared {
    /// Low 32 bits count, high 32 bits span.
    snapshot: AtomicU64,
    soft: AtomicU64,
    hard: AtomicU64,
    connected: AtomicBool,
}

fn pack(q: RecvQuery) -> u64 {
    u64::from(q.nbufs_allocated) | (u64::from(q.bufs_alloc_span) << 32)
}

fn unpack(w: u64) -> RecvQuery {
    RecvQuery {
        nbufs_allocated: w as u32,
        bufs_alloc_span: (w >> 32) as u32,
    }
}

impl Shared {
    fn count(&self) -> u32 {
        unpack(self.snapshot.load(Ordering::SeqCst)).nbufs_allocated
    }

    fn check(&self, count: u32) -> WatermarkEvents {
        WatermarkEvents {
            soft: fire_once(&self.soft, |wm| count > wm),
            hard: self.connected.load(Ordering::SeqCst) && fire_once(&self.hard, |wm| count > wm),
        }
    }
}

/// The EP's core-side accounting (single writer).
#[derive(Debug)]
pub struct EpRecvAccount {
    shared: Arc<Shared>,
    /// MSNs of sequenced buffers allocated and not completed, in allocation order.
    outstanding: VecDeque<u32>,
    /// Buffers allocated at post time (EP without SRQ), not yet completed.
    posted: u32,
    /// Latest MSN of an allocated buffer.
    msn_hi: u32,
    /// Latest MSN for which a completion was generated.
    msn_done: u32,
}

/// A consumer's view of an EP's accounting (any thread; cheap to clone).
#[derive(Clone, Debug)]
pub struct EpRecvHandle {
    shared: Arc<Shared>,
}

impl EpRecvAccount {
    /// A fresh account whose last completed MSN is `msn_done` (0 on a new connection: the
    /// first message has MSN 1). Watermarks start at `WATERMARK_INFINITE`.
    pub fn new(msn_done: u32) -> (EpRecvAccount, EpRecvHandle) {
        let shared = Arc::new(Shared {
            snapshot: AtomicU64::new(0),
            soft: AtomicU64::new(0),
            hard: AtomicU64::new(0),
            connected: AtomicBool::new(false),
        });
        let a = EpRecvAccount {
            shared: shared.clone(),
            outstanding: VecDeque::new(),
            posted: 0,
            msn_hi: msn_done & MSN_MASK,
            msn_done: msn_done & MSN_MASK,
        };
        (a, EpRecvHandle { shared })
    }

    /// Another consumer handle.
    pub fn handle(&self) -> EpRecvHandle {
        EpRecvHandle {
            shared: self.shared.clone(),
        }
    }

    fn current(&self) -> RecvQuery {
        let seq = self.outstanding.len() as u32;
        let span = if seq == 0 {
            0
        } else {
            self.msn_hi.wrapping_sub(self.msn_done) & MSN_MASK
        };
        RecvQuery {
            nbufs_allocated: seq + self.posted,
            bufs_alloc_span: span.max(seq) + self.posted,
        }
    }

    fn publish(&mut self) -> WatermarkEvents {
        let q = self.current();
        self.shared.snapshot.store(pack(q), Ordering::SeqCst);
        self.shared.check(q.nbufs_allocated)
    }

    /// The state as the writer knows it (same as the last published snapshot).
    pub fn query(&self) -> RecvQuery {
        self.current()
    }

    /// The EP took a buffer from the SRQ for the message with sequence number `msn` (24 bits;
    /// out-of-order allocation allowed). May fire watermark events.
    pub fn allocate(&mut self, msn: u32) -> WatermarkEvents {
        let msn = msn & MSN_MASK;
        if self.outstanding.is_empty() || msn_after(msn, self.msn_hi) {
            self.msn_hi = msn;
        }
        self.outstanding.push_back(msn);
        self.publish()
    }

    /// The EP took a buffer for the next message in order (MSN = latest allocated + 1, or
    /// last completed + 1): what an in-order RC responder does. Returns the MSN assigned.
    pub fn allocate_next(&mut self) -> (u32, WatermarkEvents) {
        let base = if self.outstanding.is_empty() {
            self.msn_done
        } else {
            self.msn_hi
        };
        let msn = base.wrapping_add(1) & MSN_MASK;
        (msn, self.allocate(msn))
    }

    /// A buffer was posted to the EP's own receive queue (no SRQ): allocated at once.
    pub fn allocate_posted(&mut self) -> WatermarkEvents {
        self.posted += 1;
        self.publish()
    }

    /// A completion was generated for the buffer of message `msn`. False (and no change) when
    /// no buffer for `msn` is outstanding.
    pub fn complete(&mut self, msn: u32) -> bool {
        let msn = msn & MSN_MASK;
        let Some(i) = self.outstanding.iter().position(|&m| m == msn) else {
            return false;
        };
        self.outstanding.remove(i);
        if msn_after(msn, self.msn_done) {
            self.msn_done = msn;
        }
        if self.outstanding.is_empty() {
            self.msn_done = self.msn_hi;
        }
        self.publish();
        true
    }

    /// Completes the oldest sequenced buffer (in-order RC); its MSN, or `None` when none.
    pub fn complete_oldest(&mut self) -> Option<u32> {
        let msn = *self.outstanding.front()?;
        self.complete(msn);
        Some(msn)
    }

    /// A buffer of the EP's own receive queue completed. False when none was outstanding.
    pub fn complete_posted(&mut self) -> bool {
        if self.posted == 0 {
            return false;
        }
        self.posted -= 1;
        self.publish();
        true
    }

    /// Every allocated buffer was completed in error (flush on disconnect / EP reset).
    pub fn flush_all(&mut self) -> RecvQuery {
        let before = self.current();
        self.outstanding.clear();
        self.posted = 0;
        self.msn_done = self.msn_hi;
        self.publish();
        before
    }

    /// The connection is established: from now on the hard watermark can break it; fires it at
    /// once when already exceeded (seed 002, USAGE).
    pub fn connected(&mut self) -> WatermarkEvents {
        self.shared.connected.store(true, Ordering::SeqCst);
        self.publish()
    }

    /// The connection is gone: no more hard-watermark events.
    pub fn disconnected(&mut self) {
        self.shared.connected.store(false, Ordering::SeqCst);
    }
}

impl EpRecvHandle {
    /// `dat_ep_recv_query`: one consistent snapshot of (nbufs_allocated, bufs_alloc_span).
    pub fn recv_query(&self) -> RecvQuery {
        unpack(self.shared.snapshot.load(Ordering::SeqCst))
    }

    /// `dat_ep_set_watermark`: replaces both watermarks and arms both (a value of
    /// `WATERMARK_INFINITE` disarms that one). Returns the events that fired during the call
    /// because the current count already exceeds a new value.
    pub fn set_watermark(&self, soft: u32, hard: u32) -> WatermarkEvents {
        let level = |v: u32| (v != WATERMARK_INFINITE).then_some(v);
        arm(&self.shared.soft, level(soft));
        arm(&self.shared.hard, level(hard));
        self.shared.check(self.shared.count())
    }

    /// The armed soft watermark (`None` when infinite or already fired).
    pub fn armed_soft(&self) -> Option<u32> {
        armed_value(&self.shared.soft)
    }

    /// The armed hard watermark (`None` when infinite or already fired).
    pub fn armed_hard(&self) -> Option<u32> {
        armed_value(&self.shared.hard)
    }
}

fn armed_value(w: &AtomicU64) -> Option<u32> {
    let w = w.load(Ordering::SeqCst);
    (w >> 63 != 0).then_some(w as u32)
}
