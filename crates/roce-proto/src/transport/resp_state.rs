//! The responder's state of a QP (IBTA vol. 1 §9.7.5): the expected PSN and the MSN
//! (§9.7.5.1.5), the message being received across packets, the queue of responses to send
//! (ACKs coalesced, READ responses in PSN order), the READs and atomics kept to answer
//! duplicates (§9.7.5.1.1), and which queued responses still leave when the QP moves to ERROR.

use std::collections::VecDeque;

use super::limits::MAX_QUEUED_RESPONSES;
use super::wqe::RecvWqe;
use crate::time::Instant;
use crate::wire::aeth::Syndrome;
use crate::wire::psn::Psn;

/// A response waiting to be sent.
#[derive(Clone, Copy, Debug)]
pub(super) enum Response {
    Ack {
        psn: Psn,
        msn: u32,
    },
    Nak {
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    },
    Atomic {
        psn: Psn,
        orig: u64,
        msn: u32,
    },
    /// A READ response stream: packet `idx` of the responses to a request at `psn`.
    Read {
        psn: Psn,
        va: u64,
        rkey: u32,
        len: u32,
        idx: u32,
    },
}

impl Response {
    /// The PSN it answers (a READ response stream: its request's, where the stream starts).
    fn psn(&self) -> Psn {
        match *self {
            Response::Ack { psn, .. }
            | Response::Nak { psn, .. }
            | Response::Atomic { psn, .. }
            | Response::Read { psn, .. } => psn,
        }
    }
}

/// Requests closer together than this belong to one busy spell of the responder
/// (`RespState::note_request`): half the requester's shortest probe wait, so a probe that
/// follows a lost ACK always finds the responder quiet since the original.
pub const QUIET_GAP_NS: u64 = super::rto::PROBE_FLOOR.as_nanos() as u64 / 2;

/// A recently executed READ or atomic, kept to answer duplicates.
#[derive(Clone, Copy, Debug)]
pub(super) struct RdEntry {
    pub psn: Psn,
    pub npsn: u32,
    /// `Some(original value)` for an atomic.
    pub atomic: Option<u64>,
}

/// The message being received across packets.
#[derive(Debug, Default)]
pub(super) enum InMsg {
    #[default]
    None,
    Send {
        wqe: RecvWqe,
        off: u64,
    },
    Write {
        va: u64,
        rkey: u32,
        len: u32,
        off: u32,
    },
}

/// Responder state of a QP.
#[derive(Debug)]
pub(super) struct RespState {
    pub epsn: Psn,
    /// The first expected PSN of the connection (nothing executed while `epsn` is still it).
    pub start_psn: Psn,
    pub msn: u32,
    pub nak_sent: bool,
    pub in_msg: InMsg,
    pub queue: VecDeque<Response>,
    pub ring: VecDeque<RdEntry>,
    /// A queued ACK must leave now: it trailed one request packet already (`Qp::ack_may_trail`).
    pub ack_due: bool,
    /// When the last request arrived, and the expected PSN when the current busy spell began
    /// (the first request after a [`QUIET_GAP_NS`]).
    pub last_request_at: Instant,
    pub spell_psn: Psn,
}

impl RespState {
    pub fn new() -> RespState {
        RespState {
            epsn: Psn::new(0),
            start_psn: Psn::new(0),
            msn: 0,
            nak_sent: false,
            in_msg: InMsg::None,
            queue: VecDeque::with_capacity(MAX_QUEUED_RESPONSES),
            ring: VecDeque::new(),
            ack_due: false,
            last_request_at: Instant::from_nanos(0),
            spell_psn: Psn::new(0),
        }
    }

    /// A request arrived at `now` (before it is executed): a quiet gap before it starts a new
    /// busy spell at the expected PSN.
    #[inline(always)]
    pub fn note_request(&mut self, now: Instant) {
        if now.saturating_nanos_since(self.last_request_at) > QUIET_GAP_NS {
            self.spell_psn = self.epsn;
        }
        self.last_request_at = now;
    }

    pub fn reset(&mut self, rq_psn: Psn) {
        *self = RespState::new();
        self.epsn = rq_psn;
        self.start_psn = rq_psn;
    }

    /// True when the next response is a READ response (data, which the pacer holds).
    #[inline]
    pub fn front_is_read(&self) -> bool {
        matches!(self.queue.front(), Some(Response::Read { .. }))
    }

    /// True when the queue holds exactly one response and it is a plain ACK.
    #[inline]
    pub fn only_an_ack(&self) -> bool {
        self.queue.len() == 1 && matches!(self.queue.front(), Some(Response::Ack { .. }))
    }

    pub fn take_in_progress_recv(&mut self) -> Option<RecvWqe> {
        match core::mem::take(&mut self.in_msg) {
            InMsg::Send { wqe, .. } => Some(wqe),
            _ => None,
        }
    }

    pub fn on_error(&mut self, keep: KeepResponses) {
        self.in_msg = InMsg::None;
        self.ring.clear();
        match keep {
            KeepResponses::None => self.queue.clear(),
            KeepResponses::Naks => self.queue.retain(|r| matches!(r, Response::Nak { .. })),
            KeepResponses::Acknowledgements => {
                self.queue.retain(|r| !matches!(r, Response::Read { .. }));
                if self.epsn != self.start_psn {
                    // Coalesces into a queued ACK of the same PSN (one frame either way).
                    self.push(Response::Ack {
                        psn: self.epsn.sub(1),
                        msn: self.msn,
                    });
                }
                // Nothing may hold them any more (the QP's timers are cleared).
                self.ack_due = !self.queue.is_empty();
            }
        }
    }

    /// A duplicate READ from `psn` (its whole response, or its rest: `len` bytes at `va`). The
    /// requester went back to `psn` (go-back-N, an implied NAK, a probe, IBTA vol. 1
    /// §9.7.4.1.5), or the wire delivered its request again. The queue stays in PSN order
    /// and holds at most one response per READ:
    /// - a queued response that holds `psn` is that READ's: it restarts in place from `psn`;
    /// - otherwise the response goes before every queued response to a later PSN, and the
    ///   READ responses among those start again from their first packet. A requester that
    ///   went back needs all of them again, in order; one given a stale duplicate drops the
    ///   packets it has (they are duplicates) and still gets the rest. Dropping them instead
    ///   would leave the requester, whose go-back-N requests a reordering wire may deliver
    ///   newest first, waiting out a timeout for each.
    pub fn restart_read(&mut self, psn: Psn, va: u64, rkey: u32, len: u32, mtu: u32) {
        let read = Response::Read {
            psn,
            va,
            rkey,
            len,
            idx: 0,
        };
        let holds = |r: &Response| match *r {
            Response::Read { psn: p, len, .. } => {
                !psn.before(p) && psn.distance_from(p) < npsn_of(len, mtu)
            }
            _ => false,
        };
        if let Some(r) = self.queue.iter_mut().find(|r| holds(r)) {
            *r = read;
            return;
        }
        let Some(at) = self.queue.iter().position(|r| psn.before(r.psn())) else {
            self.push(read);
            return;
        };
        if self.queue.len() >= MAX_QUEUED_RESPONSES {
            return;
        }
        for r in self.queue.range_mut(at..) {
            if let Response::Read { idx, .. } = r {
                *idx = 0;
            }
        }
        self.queue.insert(at, read);
    }

    pub fn push(&mut self, r: Response) {
        if let (Response::Ack { .. }, Some(Response::Ack { .. })) = (&r, self.queue.back()) {
            // Coalesce: the newer ACK covers the older one.
            if let Some(b) = self.queue.back_mut() {
                *b = r;
            }
            return;
        }
        self.push_separate(r);
    }

    /// Queues the re-ACK of a duplicate as a packet of its own after an ACK queued before it
    /// (the original's), so the requester sees the repeat; more repeats merge into that one,
    /// so a burst full of duplicates queues two ACKs, not one each.
    pub fn push_repeat(&mut self, r: Response) {
        let n = self.queue.len();
        let ack = |k: usize| matches!(self.queue.get(k), Some(Response::Ack { .. }));
        if n >= 2 && ack(n - 2) && ack(n - 1) {
            self.push(r);
        } else {
            self.push_separate(r);
        }
    }

    /// Queues `r` as a packet of its own.
    fn push_separate(&mut self, r: Response) {
        if self.queue.len() < MAX_QUEUED_RESPONSES {
            self.queue.push_back(r);
        }
    }
}

/// Which queued responses still leave when the QP moves to ERROR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeepResponses {
    /// None (a requester error: the connection is gone).
    None,
    /// The NAK of the request that caused a responder error (IBTA vol. 1 §9.7.5.2).
    Naks,
    /// ACKs, NAKs and atomic ACKs of requests this responder already executed: a modify to
    /// ERROR (a disconnect) must not make the peer flush sends that completed here, so their
    /// acknowledgements still leave, and the ACK of the last
    /// executed PSN is sent once more (a peer whose ACK of its last request was lost would
    /// otherwise flush that request when the disconnect reaches it; a repeated ACK is a
    /// duplicate the requester ignores, IBTA vol. 1 §9.7.5.1.5, and one past an unanswered
    /// READ re-requests it, §9.7.4.1.5). READ response streams are dropped: their memory may
    /// be going away.
    Acknowledgements,
}

pub(super) fn npsn_of(len: u32, mtu: u32) -> u32 {
    len.div_ceil(mtu).max(1)
}
