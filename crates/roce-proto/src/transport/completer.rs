//! The completer (IBTA vol. 1 §9.7.4.1 "requester: response processing", Linux rxe
//! `rxe_comp.c`): ACKs, NAKs, READ responses and atomic ACKs.
//!
//! - An ACK or response for PSN n acknowledges every older request (§9.7.4.1.3, coalescing).
//!   An ACK or response beyond an unfinished READ/atomic means its responses were lost
//!   (implied NAK, §9.7.4.1.5): the READ is re-requested for its remaining part.
//! - PSN sequence error NAK: ACK of everything before, then go-back-N from its PSN
//!   (§9.7.4.1.6), once per gap; local ACK timeout (§9.7.6.1.2) likewise from the oldest
//!   unacknowledged PSN. Both consume `retry_cnt`; exhaustion completes the WR with
//!   `RetryExcErr` and moves the QP to ERROR.
//! - RNR NAK (§9.7.5.2.8): wait the advertised timer, then resend from its PSN; `rnr_retry`
//!   7 is infinite; exhaustion gives `RnrRetryExcErr`. An RNR NAK is an answer: it resets
//!   `retry_cnt`'s budget, which counts timeouts without any answer.
//! - Any progress resets both retry budgets.
//! - Fatal NAKs (invalid request, remote access, remote operational; §9.7.5.2.4-6) complete
//!   the WR in error and move the QP to ERROR.
//! - Completions are delivered in posting order: only the head of the send queue completes.

use super::limits::MAX_OUTSTANDING_PSNS;
use super::qp::Qp;
use super::resp_state::KeepResponses;
use super::scatter::scatter;
use super::timers::{ack_timeout_duration, rnr_timer_duration, Timer};
use super::types::{QpState, SendOp, WcStatus};
use super::wqe::{is_rd_atomic, send_completion};
use crate::mem::access::Memory;
use crate::time::Instant;
use crate::wire::aeth::{NakCode, Syndrome};
use crate::wire::opcode::{OpFlags, Opcode};
use crate::wire::psn::Psn;
use crate::wire::roce::RocePacket;

impl Qp {
    /// A response packet (ACK, NAK, READ response, atomic ACK) for this QP's requester.
    pub(super) fn handle_response(
        &mut self,
        now: Instant,
        pkt: &RocePacket<'_>,
        mem: &mut dyn Memory,
    ) {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            self.stats.dropped += 1;
            return;
        }
        let h = &pkt.headers;
        let psn = h.bth.psn;
        // Only PSNs sent and not yet acknowledged carry news.
        if !psn.before(self.req.sent_hw) {
            self.stats.dropped += 1;
            return;
        }
        if psn.before(self.req.una) {
            self.stats.duplicate_responses += 1;
            self.duplicate_answer(now);
            return;
        }
        let Some(aeth) = h.aeth else {
            // READ response middle: no AETH.
            self.read_response(now, pkt, mem);
            return;
        };
        let op = h.bth.opcode;
        if op == Opcode::RC_ACK {
            self.stats.acks_received += 1;
            match aeth.syndrome {
                Syndrome::Ack { .. } => self.ack_upto(now, psn),
                Syndrome::RnrNak { timer } => {
                    self.stats.rnr_naks_received += 1;
                    self.ack_upto(now, psn.sub(1));
                    self.rnr_nak(now, psn, timer);
                }
                Syndrome::Nak(NakCode::PsnSequenceError) => {
                    self.stats.seq_naks_received += 1;
                    self.ack_upto(now, psn.sub(1));
                    // When an unanswered READ/atomic precedes the NAKed PSN, `ack_upto` has
                    // already gone back to it; going back to `psn` would skip it.
                    if self.is_sending() && !self.req.rnr_wait && self.req.una == psn {
                        self.retry(psn);
                    }
                }
                Syndrome::Nak(code) => {
                    self.stats.count_fatal_nak(code, false);
                    self.ack_upto(now, psn.sub(1));
                    if self.is_sending() && !self.req.sq.is_empty() {
                        let st = match code {
                            NakCode::InvalidRequest => WcStatus::RemInvReqErr,
                            NakCode::RemoteAccessError => WcStatus::RemAccessErr,
                            _ => WcStatus::RemOpErr,
                        };
                        self.fail_head(st);
                    }
                }
                Syndrome::Reserved(_) => self.stats.dropped += 1,
            }
        } else if op == Opcode::RC_ATOMIC_ACK {
            if !matches!(aeth.syndrome, Syndrome::Ack { .. }) {
                self.stats.dropped += 1;
                return;
            }
            self.ack_upto(now, psn.sub(1));
            let Some(w) = self.req.sq.front() else { return };
            let is_atomic = matches!(w.op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. });
            if !(self.is_sending() && w.started && is_atomic && w.first_psn == psn) {
                self.stats.dropped += 1;
                return;
            }
            let orig = h.atomic_ack_eth.map_or(0, |a| a.orig_data);
            let res = scatter(mem, self.config.pd, &w.sgl, 0, &orig.to_ne_bytes());
            match res {
                Ok(()) => {
                    self.req.una = psn.next();
                    self.complete_head(8);
                    self.progress(now);
                }
                Err(_) => self.fail_head(WcStatus::LocProtErr),
            }
        } else if op.flags().contains(OpFlags::READ) {
            if !matches!(aeth.syndrome, Syndrome::Ack { .. }) {
                self.stats.dropped += 1;
                return;
            }
            self.read_response(now, pkt, mem);
        } else {
            self.stats.dropped += 1;
        }
    }

    fn is_sending(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Sqd)
    }

    /// An RDMA READ response packet (IBTA vol. 1 §9.7.4.1.5): any response implies all older
    /// requests were done; its payload is placed at its offset in the local SGL.
    fn read_response(&mut self, now: Instant, pkt: &RocePacket<'_>, mem: &mut dyn Memory) {
        let psn = pkt.headers.bth.psn;
        let flags = pkt.headers.bth.opcode.flags();
        self.ack_upto(now, psn.sub(1));
        if !self.is_sending() {
            return;
        }
        let Some(w) = self.req.sq.front() else { return };
        let ok_head = w.started
            && matches!(w.op, SendOp::Read { .. })
            && w.first_psn.add(w.acked_pkts) == psn
            && w.acked_pkts < w.npsn;
        if !ok_head {
            self.stats.dropped += 1;
            return;
        }
        let k = w.acked_pkts;
        let off = u64::from(k) * u64::from(w.mtu);
        let expect = u64::from(w.len).saturating_sub(off).min(u64::from(w.mtu));
        let last = k + 1 == w.npsn;
        let pos_ok = if last {
            flags.intersects(OpFlags::LAST | OpFlags::ONLY)
        } else {
            flags.intersects(OpFlags::FIRST | OpFlags::MIDDLE)
        };
        if !pos_ok || pkt.payload.len() as u64 != expect {
            self.stats.dropped += 1;
            return;
        }
        if scatter(mem, self.config.pd, &w.sgl, off, pkt.payload).is_err() {
            self.fail_head(WcStatus::LocProtErr);
            return;
        }
        let len = w.len;
        if let Some(w) = self.req.sq.front_mut() {
            w.acked_pkts += 1;
        }
        self.req.una = psn.next();
        if last {
            self.complete_head(len);
        }
        self.sync_cursor();
        self.progress(now);
    }

    /// Acknowledges every request with a PSN up to and including `n` (IBTA vol. 1 §9.7.4.1.3).
    pub(super) fn ack_upto(&mut self, now: Instant, n: Psn) {
        // Nothing in the loop below leaves RTS/SQD except `retry`, after which it stops.
        if n.before(self.req.una) || !self.is_sending() {
            return;
        }
        let (sig_all, qpn) = (self.config.sig_all, self.config.qpn);
        // One pass over the queue finds the acknowledged WQEs (delivering the completions of
        // the signaled ones, in order); they leave the queue together afterwards.
        let mut done = 0usize;
        let mut una = None;
        let mut resume = None;
        for w in &self.req.sq {
            if !w.started {
                break;
            }
            if is_rd_atomic(&w.op) {
                // Acknowledged past an unanswered READ/atomic: its responses were lost.
                let r = w.first_psn.add(w.acked_pkts);
                if !n.before(r) {
                    resume = Some(r);
                }
                break;
            }
            let last = w.last_psn();
            if n.before(last) {
                una = Some(n.next());
                break;
            }
            una = Some(last.next());
            done += 1;
            if w.signaled || sig_all {
                self.cq.push_back(send_completion(
                    w.wr_id,
                    &w.op,
                    WcStatus::Success,
                    w.len,
                    qpn,
                ));
            } else {
                self.unsignaled_done += 1;
            }
        }
        if done > 0 {
            // SEND/WRITE WQEs only: no READ/atomic resource to give back.
            self.req.sq.drain(..done);
            if self.req.cur >= done {
                self.req.cur -= done;
            } else {
                self.req.cur = 0;
                self.req.cur_pkt = 0;
            }
        }
        let progressed = una.is_some();
        if let Some(u) = una {
            self.req.una = u;
        }
        if let Some(r) = resume {
            self.retry(r);
        }
        if progressed {
            self.sync_cursor();
            self.progress(now);
        }
    }

    /// Keeps the transmit cursor at or after the oldest unacknowledged PSN.
    fn sync_cursor(&mut self) {
        if self.req.cur != 0 {
            return;
        }
        if let Some(w) = self.req.sq.front() {
            if w.started {
                let done = self.req.una.distance_from(w.first_psn).min(w.npsn);
                if self.req.cur_pkt < done {
                    self.req.cur_pkt = done;
                }
            }
        }
    }

    /// Progress: retry budgets reset, ACK timer restarted while requests are outstanding.
    fn progress(&mut self, now: Instant) {
        let idle = !self.req.una.before(self.req.sent_hw);
        self.req.rto.on_progress(self.req.una, now, idle);
        let acked = self.req.una.distance_from(self.req.window_una);
        if acked < MAX_OUTSTANDING_PSNS * 2 {
            self.req.window.on_ack(acked);
            if acked > 0 {
                if let Some(rtt) = self.cc.on_acked(now, self.req.una.sub(1).value()) {
                    self.req.rto.on_rtt_sample(rtt);
                }
            }
        }
        self.req.window_una = self.req.una;
        self.req.retry_left = self.attr.retry_cnt;
        self.req.rnr_left = self.attr.rnr_retry;
        self.req.retry_psn = None;
        if self.req.una.before(self.req.sent_hw) && !self.req.rnr_wait {
            if let Some(d) = self
                .req
                .rto
                .timeout(ack_timeout_duration(self.attr.timeout))
            {
                self.timers.set(Timer::Ack, now + d);
            }
        } else {
            self.timers.stop(Timer::Ack);
        }
    }

    /// An answer to an acknowledged PSN: if it proves the last probe spurious
    /// (`Rto::on_duplicate_answer`), the timer now covers the silence it broke and the window
    /// it shrank comes back (RFC 4015's response: undo what a spurious timeout did).
    fn duplicate_answer(&mut self, now: Instant) {
        if self.req.rto.on_duplicate_answer(now).is_some() {
            self.stats.spurious_retransmits += 1;
            if let Some(w) = self.req.window_before_timeout.take() {
                if w.limit() > self.req.window.limit() {
                    self.req.window = w;
                }
            }
        }
    }

    /// Go-back-N from `psn`, once per gap, consuming the retry budget.
    fn retry(&mut self, psn: Psn) {
        if self.req.retry_psn == Some(psn) {
            return;
        }
        if self.req.retry_left == 0 {
            self.fail_head(WcStatus::RetryExcErr);
            return;
        }
        self.req.retry_left -= 1;
        self.req.retry_psn = Some(psn);
        let inflight = self.req.inflight();
        // A NAK is a loss: nothing of an earlier timeout is undone after it.
        self.req.window_before_timeout = None;
        self.req.rto.on_loss();
        self.req.window.on_nak(inflight);
        self.req.rewind(psn);
    }

    fn rnr_nak(&mut self, now: Instant, psn: Psn, timer: u8) {
        if !self.is_sending() || self.req.rnr_wait {
            return;
        }
        let holds = self
            .req
            .sq
            .front()
            .is_some_and(|w| w.started && psn.distance_from(w.first_psn) < w.npsn);
        if !holds {
            self.stats.dropped += 1;
            return;
        }
        if self.attr.rnr_retry != 7 {
            if self.req.rnr_left == 0 {
                self.fail_head(WcStatus::RnrRetryExcErr);
                return;
            }
            self.req.rnr_left -= 1;
        }
        // The responder answered: the retries of `retry_cnt` count timeouts without any
        // answer in a row, so a lost RNR NAK among answered ones spends none for long.
        self.req.rto.on_answer(now);
        self.req.retry_left = self.attr.retry_cnt;
        self.req.rewind(psn);
        self.req.retry_psn = None;
        self.req.rnr_wait = true;
        self.timers.stop(Timer::Ack);
        self.timers.set(Timer::Rnr, now + rnr_timer_duration(timer));
    }

    pub(super) fn on_rnr_timer(&mut self, _now: Instant) {
        self.req.rnr_wait = false;
    }

    /// The retransmission timer (`rto.rs`; IBTA vol. 1 §9.7.6.1.2): first the tail probe, then
    /// resend from the oldest unacknowledged PSN. A retry of the budget is spent per negotiated local ACK timeout
    /// without progress, so `retry_cnt` keeps its meaning.
    pub(super) fn on_ack_timeout(&mut self, now: Instant) {
        if !self.is_sending() || !self.req.una.before(self.req.sent_hw) {
            return;
        }
        self.stats.timeouts += 1;
        // The last probe's recovery is past its window now: settled before this one starts.
        self.req.rto.settle_probe(now);
        let inflight = self.req.inflight();
        if !self.req.rto.retransmitted() {
            self.req.window_before_timeout = Some(self.req.window);
        }
        if self.req.rto.probe_due() && self.req.start_probe() {
            // A tail probe (rto.rs, `ReqState::start_probe`): the oldest unacknowledged packet
            // and the last one again, no retry spent, no back-off. The window shrinks as for
            // any timeout (the silence may be a full queue; the probe passes it), and the next
            // wait runs from now.
            self.stats.tail_probes += 1;
            self.req.rto.on_probe();
            self.req.window.on_timeout(inflight);
            if let Some(d) = self
                .req
                .rto
                .timeout(ack_timeout_duration(self.attr.timeout))
            {
                self.timers.set(Timer::Ack, now + d);
            }
            return;
        }
        self.req.rto.on_timeout();
        if self
            .req
            .rto
            .spend_retry(now, ack_timeout_duration(self.attr.timeout))
        {
            if self.req.retry_left == 0 {
                self.fail_head(WcStatus::RetryExcErr);
                return;
            }
            self.req.retry_left -= 1;
        }
        self.req.window.on_timeout(inflight);
        let una = self.req.una;
        self.req.retry_psn = Some(una);
        self.req.rewind(una);
    }

    /// Completes the head WQE successfully (delivering a completion when signaled). Inlined:
    /// it runs once per retired WQE, in `ack_upto`'s loop.
    #[inline(always)]
    pub(super) fn complete_head(&mut self, byte_len: u32) {
        // What the completion needs is read in place; the WQE itself is dropped, not moved out.
        let Some(w) = self.req.sq.front() else {
            return;
        };
        let (op, wr_id, signaled) = (w.op, w.wr_id, w.signaled);
        drop(self.req.sq.pop_front());
        if is_rd_atomic(&op) {
            self.req.rd_outstanding = self.req.rd_outstanding.saturating_sub(1);
        }
        if self.req.cur > 0 {
            self.req.cur -= 1;
        } else {
            self.req.cur_pkt = 0;
        }
        if signaled || self.config.sig_all {
            self.cq.push_back(send_completion(
                wr_id,
                &op,
                WcStatus::Success,
                byte_len,
                self.config.qpn,
            ));
        } else {
            self.unsignaled_done += 1;
        }
    }

    /// Completes the head WQE with `status` and moves the QP to ERROR (the rest is flushed).
    pub(super) fn fail_head(&mut self, status: WcStatus) {
        if let Some(w) = self.req.sq.pop_front() {
            self.cq
                .push_back(send_completion(w.wr_id, &w.op, status, 0, self.config.qpn));
        }
        self.enter_error(KeepResponses::None);
    }
}
