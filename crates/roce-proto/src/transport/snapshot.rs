//! Where a QP stands: a snapshot of its requester's and responder's sequence state, for a
//! program that finds a connection stalled to say why (`roce-soak`, telemetry's `/roce/qp`).

use super::qp::Qp;
use super::timers::Timer;
use super::types::QpState;
use crate::time::Instant;
use crate::wire::psn::Psn;

/// A QP's sequence state at one moment ([`Qp::snapshot`]). The counters of what happened so
/// far are [`QpStats`](super::qp::QpStats); this is what is pending.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpSnapshot {
    pub state: QpState,
    /// Send WQEs not yet completed, and started READs/atomics among them.
    pub send_wqes: usize,
    pub reads_outstanding: u32,
    /// Oldest unacknowledged PSN, one past the highest sent, where the next new WQE starts.
    pub una: Psn,
    pub sent_hw: Psn,
    pub next_psn: Psn,
    /// The send window's limit in PSNs (`window.rs`).
    pub window: u32,
    /// Retries of `retry_cnt` and `rnr_retry` left; waiting out an RNR NAK's timer.
    pub retry_left: u8,
    pub rnr_left: u8,
    pub rnr_wait: bool,
    /// When the local ACK timeout fires next (`None`: not armed).
    pub ack_timer: Option<Instant>,
    /// The peer's longest proven turn-around, which the retransmission timer covers
    /// (`rto.rs`).
    pub turnaround: core::time::Duration,
    /// The path lost a packet lately: tail probes go out early (`rto.rs`; a calm path waits
    /// `CALM_WAIT`).
    pub lossy: bool,
    /// The responder's expected PSN, responses queued to leave, receives posted.
    pub epsn: Psn,
    pub responses_queued: usize,
    pub receives_posted: usize,
}

impl Qp {
    /// The QP's sequence state now (see [`QpSnapshot`]).
    pub fn snapshot(&self) -> QpSnapshot {
        QpSnapshot {
            state: self.state,
            send_wqes: self.req.sq.len(),
            reads_outstanding: self.req.rd_outstanding,
            una: self.req.una,
            sent_hw: self.req.sent_hw,
            next_psn: self.req.next_psn,
            window: self.req.window.limit(),
            retry_left: self.req.retry_left,
            rnr_left: self.req.rnr_left,
            rnr_wait: self.req.rnr_wait,
            ack_timer: self.timers.get(Timer::Ack),
            turnaround: self.req.rto.turnaround(),
            lossy: self.req.rto.lossy(),
            epsn: self.resp.epsn,
            responses_queued: self.resp.queue.len(),
            receives_posted: self.rq.len(),
        }
    }
}

impl core::fmt::Display for QpSnapshot {
    /// One line: `RTS sq=3 (reads 1) una=… sent=… next=… window=… retry=…/rnr=… [rnr wait]
    /// ack timer armed|off epsn=… responses=… receives=…`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "{:?} sq={} (reads {}) una={} sent={} next={} window={} retry={} rnr={}{} \
             ack timer {} turnaround={:?}{} epsn={} responses={} receives={}",
            self.state,
            self.send_wqes,
            self.reads_outstanding,
            self.una.value(),
            self.sent_hw.value(),
            self.next_psn.value(),
            self.window,
            self.retry_left,
            self.rnr_left,
            if self.rnr_wait { " (rnr wait)" } else { "" },
            if self.ack_timer.is_some() {
                "armed"
            } else {
                "off"
            },
            self.turnaround,
            if self.lossy { " lossy" } else { "" },
            self.epsn.value(),
            self.responses_queued,
            self.receives_posted,
        )
    }
}
