//! The requester's and completer's state of a QP (IBTA vol. 1 §9.7.4): the send queue and its
//! transmit cursor, the PSNs sent and acknowledged, the retry budgets, the send window
//! (`window.rs`) and the retransmission timer (`rto.rs`), and the cursor moves of go-back-N
//! (§9.7.4.1.5) and of the tail probe.

use std::collections::VecDeque;

use super::window::SendWindow;
use super::wqe::SendWqe;
use crate::wire::psn::Psn;

/// Requester and completer state of a QP.
#[derive(Debug)]
pub(super) struct ReqState {
    /// Send WQEs not yet completed, in posting order.
    pub sq: VecDeque<SendWqe>,
    /// Index in `sq` of the WQE the next packet comes from, and its packet index.
    pub cur: usize,
    pub cur_pkt: u32,
    /// PSN the next new WQE starts at.
    pub next_psn: Psn,
    /// Oldest unacknowledged PSN.
    pub una: Psn,
    /// One past the highest PSN ever sent.
    pub sent_hw: Psn,
    pub retry_left: u8,
    pub rnr_left: u8,
    /// The PSN of the last go-back-N with no progress since (one retry per gap).
    pub retry_psn: Option<Psn>,
    /// Waiting for an RNR timer.
    pub rnr_wait: bool,
    /// Started READs/atomics not yet completed.
    pub rd_outstanding: u32,
    /// How many PSNs may be outstanding (shrinks after losses, see `window.rs`).
    pub window: SendWindow,
    /// `una` when the window last heard of progress.
    pub window_una: Psn,
    /// The window before the first probe or timeout since progress, given back if that
    /// probe proves spurious (`Qp::duplicate_answer`).
    pub window_before_timeout: Option<SendWindow>,
    /// Packets sent since the last one with AckReq.
    pub unrequested: u32,
    /// The retransmission timer's round-trip estimate (`rto.rs`).
    pub rto: super::rto::Rto,
    /// A tail probe's last packet, sent after the one at `una` (`start_probe`).
    pub probe_last: Option<Psn>,
    /// The probe's last packet, which goes out whatever the window (it adds nothing in
    /// flight).
    pub probe_pass: Option<Psn>,
    /// The packet just handed out ends the oldest signaled WR outstanding (`Qp::take_awaited`).
    pub awaited: bool,
    /// The last PSN of the newest signaled WR sent (`Qp::ends_awaited`).
    pub last_signaled: Option<Psn>,
}

impl ReqState {
    pub fn new(depth: u32) -> ReqState {
        ReqState {
            sq: VecDeque::with_capacity(depth.min(1 << 16) as usize),
            cur: 0,
            cur_pkt: 0,
            next_psn: Psn::new(0),
            una: Psn::new(0),
            sent_hw: Psn::new(0),
            retry_left: 0,
            rnr_left: 0,
            retry_psn: None,
            rnr_wait: false,
            rd_outstanding: 0,
            window: SendWindow::default(),
            window_una: Psn::new(0),
            window_before_timeout: None,
            unrequested: 0,
            rto: Default::default(),
            probe_last: None,
            probe_pass: None,
            awaited: false,
            last_signaled: None,
        }
    }

    /// PSNs in flight now: from the oldest unacknowledged to the cursor. After a go-back-N
    /// that is what went out again since, not everything ever sent (the window's measure).
    pub fn inflight(&self) -> u32 {
        let cursor = match self.sq.get(self.cur) {
            Some(w) if w.started => w.first_psn.add(self.cur_pkt),
            _ => self.next_psn,
        };
        cursor
            .distance_from(self.una)
            .min(self.sent_hw.distance_from(self.una))
    }

    /// RTR->RTS: the first PSN and the retry budgets.
    pub fn start(&mut self, sq_psn: Psn, retry_cnt: u8, rnr_retry: u8) {
        self.next_psn = sq_psn;
        self.una = sq_psn;
        self.sent_hw = sq_psn;
        self.retry_left = retry_cnt;
        self.rnr_left = rnr_retry;
        self.retry_psn = None;
        self.rnr_wait = false;
        self.window = SendWindow::default();
        self.window_una = sq_psn;
        self.last_signaled = None;
    }

    /// Forgets transmit progress (the send queue was emptied).
    pub fn reset_cursor(&mut self) {
        self.last_signaled = None;
        self.cur = 0;
        self.cur_pkt = 0;
        self.rd_outstanding = 0;
        self.rnr_wait = false;
        self.retry_psn = None;
        self.probe_last = None;
        self.probe_pass = None;
    }

    /// A tail probe (`rto.rs`): the oldest unacknowledged packet again, then the last one sent.
    /// The first is what a responder that sent its one sequence-error NAK (IBTA vol. 1
    /// §9.7.5.1.2) and drops everything after the gap still waits for (the NAK or the resend
    /// it asked for was lost); the second reveals a lost tail behind it, which the responder
    /// then names in a NAK. When the cursor is not at the end (a go-back-N waits for the
    /// window) only the first goes. False, nothing moved, when no started WQE holds `una`.
    pub fn start_probe(&mut self) -> bool {
        let una = self.una;
        let last = self.sent_hw.sub(1);
        let at_end = match self.sq.get(self.cur) {
            None => true,
            Some(w) => !w.started || w.first_psn.add(self.cur_pkt) == self.sent_hw,
        };
        if !self.rewind(una) {
            return false;
        }
        if at_end && last != una {
            self.probe_last = Some(last);
        }
        true
    }

    /// After a packet at `psn` went out: a probe's jump to its last packet (`start_probe`).
    #[inline(always)]
    pub fn after_probe_packet(&mut self, psn: Psn) {
        if let Some(last) = self.probe_last {
            if last.after(psn) && self.seek(last) {
                self.probe_pass = Some(last);
            }
            self.probe_last = None;
        } else if self.probe_pass == Some(psn) {
            self.probe_pass = None;
        }
    }

    /// Moves the cursor back to `psn` (go-back-N), ending a probe. False when no started WQE
    /// holds it.
    pub fn rewind(&mut self, psn: Psn) -> bool {
        self.rto.on_rewind();
        self.probe_last = None;
        self.probe_pass = None;
        self.seek(psn)
    }

    /// Moves the cursor to `psn`. False when no started WQE holds it.
    fn seek(&mut self, psn: Psn) -> bool {
        for (i, w) in self.sq.iter().enumerate() {
            if !w.started {
                break;
            }
            let k = psn.distance_from(w.first_psn);
            if k < w.npsn {
                self.cur = i;
                self.cur_pkt = k;
                return true;
            }
        }
        false
    }
}
