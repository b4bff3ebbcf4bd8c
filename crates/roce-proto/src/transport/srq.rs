//! Shared receive queue (IBTA vol. 1 §10.2.9): receive WQEs several QPs draw from, with a limit
//! (low watermark) event that fires once when the number of WQEs drops below it (§11.5.2.4).

use std::collections::VecDeque;

use super::types::{QpError, RecvWr, MAX_SGE};

/// A source of receive WQEs for a QP's responder (IBTA vol. 1 §10.2.9: a QP associated with an
/// SRQ takes a WQE when a message that consumes one arrives). Implemented by [`Srq`] here and,
/// in `crate::srq`, by the engine's shared pool and its per-EP ports.
pub trait RecvSource {
    /// The SRQ number (checked against the QP's `QpConfig::srq`).
    fn srqn(&self) -> u32;
    /// Takes a WQE for the next inbound message of QP `qpn` that consumes one (SEND, or
    /// RDMA WRITE with immediate); `None` means no buffer (the responder sends an RNR NAK).
    fn take_recv(&mut self, qpn: u32) -> Option<RecvWr>;
}

/// A shared receive queue.
#[derive(Debug)]
pub struct Srq {
    srqn: u32,
    depth: u32,
    max_sge: u32,
    queue: VecDeque<RecvWr>,
    limit: Option<u32>,
    limit_event: bool,
}

impl Srq {
    /// An empty SRQ holding up to `depth` WQEs of at most `max_sge` (<= MAX_SGE) entries.
    pub fn new(srqn: u32, depth: u32, max_sge: u32) -> Srq {
        Srq {
            srqn,
            depth,
            max_sge: max_sge.min(MAX_SGE as u32),
            queue: VecDeque::with_capacity(depth as usize),
            limit: None,
            limit_event: false,
        }
    }

    /// This SRQ's number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// Posts a receive WQE.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), QpError> {
        if wr.sgl.len() > self.max_sge as usize {
            return Err(QpError::TooManySge);
        }
        if self.queue.len() >= self.depth as usize {
            return Err(QpError::QueueFull);
        }
        self.queue.push_back(wr);
        Ok(())
    }

    /// WQEs posted and not yet consumed.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// True when no WQE is posted.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Arms the limit: one event when the WQE count drops below `limit` (0 disarms).
    pub fn arm_limit(&mut self, limit: u32) {
        self.limit = if limit == 0 { None } else { Some(limit) };
    }

    /// True once after the armed limit was crossed (the limit is then disarmed, as in IB).
    pub fn poll_limit_event(&mut self) -> bool {
        core::mem::take(&mut self.limit_event)
    }

    /// Takes the oldest WQE (the responder consuming it for an inbound SEND).
    pub(crate) fn take(&mut self) -> Option<RecvWr> {
        let wr = self.queue.pop_front()?;
        if let Some(l) = self.limit {
            if (self.queue.len() as u64) < u64::from(l) {
                self.limit = None;
                self.limit_event = true;
            }
        }
        Some(wr)
    }

    /// Drops every WQE (SRQ destruction).
    pub fn clear(&mut self) {
        self.queue.clear();
    }
}

impl RecvSource for Srq {
    fn srqn(&self) -> u32 {
        Srq::srqn(self)
    }
    fn take_recv(&mut self, _qpn: u32) -> Option<RecvWr> {
        self.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wr(id: u64) -> RecvWr {
        RecvWr {
            wr_id: id,
            sgl: crate::sgl![],
        }
    }

    #[test]
    fn depth_sge_and_limit_event() {
        let mut s = Srq::new(9, 3, 1);
        assert_eq!(s.srqn(), 9);
        s.post_recv(wr(1)).unwrap();
        s.post_recv(wr(2)).unwrap();
        s.post_recv(wr(3)).unwrap();
        assert_eq!(s.post_recv(wr(4)), Err(QpError::QueueFull));
        let two = RecvWr {
            wr_id: 5,
            sgl: crate::sgl![
                super::super::types::Sge {
                    addr: 0,
                    len: 0,
                    lkey: 0
                };
                2
            ],
        };
        assert_eq!(s.post_recv(two), Err(QpError::TooManySge));
        s.arm_limit(2);
        assert_eq!(s.take().unwrap().wr_id, 1);
        assert!(!s.poll_limit_event(), "2 left, not below 2");
        assert_eq!(s.take().unwrap().wr_id, 2);
        assert!(s.poll_limit_event());
        assert!(!s.poll_limit_event(), "fires once");
        assert_eq!(s.len(), 1);
    }
}
