//! The RC queue pair: state machine (IBTA vol. 1 §10.3), attribute changes (§11.2.5), the send
//! and receive queues (§10.8), completion ordering (§10.8.5) and the sans-IO driver surface.
//! The protocol work is split like Linux rxe: `requester.rs` (§9.7.4 requester side: packets
//! out), `responder.rs` (§9.7.5 responder side: requests in, responses out) and `completer.rs`
//! (§9.7.4.1 ACK/response processing, retries, completions). Their state (`req_state.rs`,
//! `resp_state.rs`) and the vocabulary they share (`wqe.rs`, `scatter.rs`, `limits.rs`) are
//! leaf files that import none of these four.
//!
//! Choices where IB leaves room:
//! - `post_send` is accepted in RTS and SQD; in SQD the WR is queued and starts after SQD->RTS
//!   (WRs already started in SQD run to completion, as the drain requires).
//! - Local SGEs are checked at post time; a failing WR is queued and, when it reaches the head
//!   of the send queue, completes with `LocProtErr` and moves the QP to ERROR (IB's asynchronous
//!   behaviour; the WRs before it complete normally).
//! - `max_rd_atomic == 0` is treated as 1.

use std::collections::VecDeque;

// Public here too: `transport::qp::MAX_MSG_SIZE` was its path before `limits.rs`.
pub use super::limits::MAX_MSG_SIZE;
use super::req_state::ReqState;
use super::resp_state::{KeepResponses, RespState};
use super::srq::RecvSource;
use super::timers::{Timer, TimerTable};
use super::transmit::Transmit;
use super::types::{
    QpAttr, QpConfig, QpError, QpState, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion,
    MAX_SGE,
};
use super::wqe::{flush_status, send_completion, RecvWqe, SendWqe};
use crate::cc::{wire_bytes, CcConfig, Congestion};
use crate::mem::access::{Access, KeyKind, MemRef, Memory};
use crate::time::Instant;
use crate::wire::bth::pkey_match;
use crate::wire::opcode::{OpFlags, Opcode, Transport};
use crate::wire::roce::{RoceHeaders, RocePacket, EXTENSION_HEADERS};

/// Counters of one QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpStats {
    pub packets_sent: u64,
    pub packets_received: u64,
    /// Payload bytes of the packets sent and received (headers not counted).
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Request packets sent again (go-back-N, timeout, RNR, implied NAK).
    pub retransmits: u64,
    /// Duplicate requests seen by the responder.
    pub duplicates: u64,
    /// Duplicate or stale responses dropped by the completer.
    pub duplicate_responses: u64,
    pub acks_sent: u64,
    pub acks_received: u64,
    pub seq_naks_sent: u64,
    pub seq_naks_received: u64,
    pub rnr_naks_sent: u64,
    pub rnr_naks_received: u64,
    /// Invalid request / remote access / remote operational NAKs (all kinds; each kind
    /// below).
    pub fatal_naks_sent: u64,
    pub fatal_naks_received: u64,
    pub invalid_request_naks_sent: u64,
    pub invalid_request_naks_received: u64,
    pub remote_access_naks_sent: u64,
    pub remote_access_naks_received: u64,
    pub remote_op_naks_sent: u64,
    pub remote_op_naks_received: u64,
    /// Local ACK timeouts that fired with requests outstanding.
    pub timeouts: u64,
    /// Of those, tail probes: the last packet sent again (`rto.rs`).
    pub tail_probes: u64,
    /// Probes proven spurious: the original's answer came, and at once a duplicate answer to
    /// the copy (`rto.rs`).
    pub spurious_retransmits: u64,
    /// Packets dropped silently (P_Key, malformed, unexpected, out of sequence after the NAK).
    pub dropped: u64,
}

/// Applies `$op` field by field to every counter of [`QpStats`] (the one list of them).
macro_rules! each_counter {
    ($a:expr, $b:expr, $op:tt) => {
        QpStats {
            packets_sent: $a.packets_sent $op $b.packets_sent,
            packets_received: $a.packets_received $op $b.packets_received,
            bytes_sent: $a.bytes_sent $op $b.bytes_sent,
            bytes_received: $a.bytes_received $op $b.bytes_received,
            retransmits: $a.retransmits $op $b.retransmits,
            duplicates: $a.duplicates $op $b.duplicates,
            duplicate_responses: $a.duplicate_responses $op $b.duplicate_responses,
            acks_sent: $a.acks_sent $op $b.acks_sent,
            acks_received: $a.acks_received $op $b.acks_received,
            seq_naks_sent: $a.seq_naks_sent $op $b.seq_naks_sent,
            seq_naks_received: $a.seq_naks_received $op $b.seq_naks_received,
            rnr_naks_sent: $a.rnr_naks_sent $op $b.rnr_naks_sent,
            rnr_naks_received: $a.rnr_naks_received $op $b.rnr_naks_received,
            fatal_naks_sent: $a.fatal_naks_sent $op $b.fatal_naks_sent,
            fatal_naks_received: $a.fatal_naks_received $op $b.fatal_naks_received,
            invalid_request_naks_sent: $a.invalid_request_naks_sent $op $b.invalid_request_naks_sent,
            invalid_request_naks_received: $a.invalid_request_naks_received
                $op $b.invalid_request_naks_received,
            remote_access_naks_sent: $a.remote_access_naks_sent $op $b.remote_access_naks_sent,
            remote_access_naks_received: $a.remote_access_naks_received
                $op $b.remote_access_naks_received,
            remote_op_naks_sent: $a.remote_op_naks_sent $op $b.remote_op_naks_sent,
            remote_op_naks_received: $a.remote_op_naks_received $op $b.remote_op_naks_received,
            timeouts: $a.timeouts $op $b.timeouts,
            tail_probes: $a.tail_probes $op $b.tail_probes,
            spurious_retransmits: $a.spurious_retransmits $op $b.spurious_retransmits,
            dropped: $a.dropped $op $b.dropped,
        }
    };
}

impl core::ops::Add for QpStats {
    type Output = QpStats;
    /// The counters of two QPs together.
    fn add(self, o: QpStats) -> QpStats {
        each_counter!(self, o, +)
    }
}

impl core::ops::AddAssign for QpStats {
    fn add_assign(&mut self, o: QpStats) {
        *self = *self + o;
    }
}

impl core::ops::Sub for QpStats {
    type Output = QpStats;
    /// What was counted between `o` and `self`, a later reading of the same QP.
    fn sub(self, o: QpStats) -> QpStats {
        each_counter!(self, o, -)
    }
}

impl QpStats {
    /// Counts a NAK other than PSN sequence error and RNR (`sent` by the responder, or received
    /// by the completer): in `fatal_naks_*` and under its kind.
    pub(super) fn count_fatal_nak(&mut self, code: crate::wire::aeth::NakCode, sent: bool) {
        use crate::wire::aeth::NakCode;
        let (all, kind) = match (code, sent) {
            (NakCode::InvalidRequest, true) => (
                &mut self.fatal_naks_sent,
                Some(&mut self.invalid_request_naks_sent),
            ),
            (NakCode::InvalidRequest, false) => (
                &mut self.fatal_naks_received,
                Some(&mut self.invalid_request_naks_received),
            ),
            (NakCode::RemoteAccessError, true) => (
                &mut self.fatal_naks_sent,
                Some(&mut self.remote_access_naks_sent),
            ),
            (NakCode::RemoteAccessError, false) => (
                &mut self.fatal_naks_received,
                Some(&mut self.remote_access_naks_received),
            ),
            (NakCode::RemoteOperationalError, true) => (
                &mut self.fatal_naks_sent,
                Some(&mut self.remote_op_naks_sent),
            ),
            (NakCode::RemoteOperationalError, false) => (
                &mut self.fatal_naks_received,
                Some(&mut self.remote_op_naks_received),
            ),
            (_, true) => (&mut self.fatal_naks_sent, None),
            (_, false) => (&mut self.fatal_naks_received, None),
        };
        *all += 1;
        if let Some(k) = kind {
            *k += 1;
        }
    }
}

/// An RC queue pair.
#[derive(Debug)]
pub struct Qp {
    pub(super) config: QpConfig,
    pub(super) attr: QpAttr,
    pub(super) state: QpState,
    pub(super) stats: QpStats,
    pub(super) cq: VecDeque<WorkCompletion>,
    /// Send WRs completed successfully without a completion (posted unsignaled, no `sig_all`),
    /// since the QP was created: what a consumer that counts its queue's slots (the DAT EP)
    /// learns without a completion per WR ([`unsignaled_done`](Self::unsignaled_done)).
    pub(super) unsignaled_done: u64,
    pub(super) timers: TimerTable,
    pub(super) req: ReqState,
    pub(super) resp: RespState,
    pub(super) rq: VecDeque<RecvWqe>,
    /// The state the QP left for ERROR, until the host takes it for its log
    /// ([`take_error_entry`](Self::take_error_entry)).
    pub(super) error_from: Option<QpState>,
    /// Congestion control: the pacer, the rate algorithm, CNPs due (`cc`).
    pub(super) cc: Congestion,
}

fn check_attr(a: &QpAttr) -> Result<(), QpError> {
    if a.retry_cnt > 7
        || a.rnr_retry > 7
        || a.timeout > 31
        || a.min_rnr_timer > 31
        || a.dest_qpn > 0x00ff_ffff
    {
        return Err(QpError::InvalidArgument);
    }
    Ok(())
}

impl Qp {
    /// A QP in the RESET state.
    pub fn new(config: QpConfig) -> Qp {
        let mut config = config;
        config.max_send_sge = config.max_send_sge.min(MAX_SGE as u32);
        config.max_recv_sge = config.max_recv_sge.min(MAX_SGE as u32);
        Qp {
            req: ReqState::new(config.sq_depth),
            resp: RespState::new(),
            rq: VecDeque::with_capacity(config.rq_depth.min(1 << 16) as usize),
            cq: VecDeque::new(),
            unsignaled_done: 0,
            config,
            attr: QpAttr::default(),
            state: QpState::Reset,
            stats: QpStats::default(),
            timers: TimerTable::default(),
            error_from: None,
            cc: Congestion::default(),
        }
    }

    /// Sets this QP's congestion control (`cc`; off by default): its mode, its parameters and
    /// the notification point's CNP interval. Its counters start again.
    pub fn set_congestion(&mut self, c: &CcConfig) {
        self.cc = Congestion::new(c);
        self.timers.stop(Timer::Pace);
    }

    /// PSNs that may be outstanding: the loss window's limit (`window`), within congestion
    /// control's window (the delay mode's).
    #[inline(always)]
    pub(super) fn send_window(&self) -> u32 {
        self.req.window.limit().min(self.cc.window_limit())
    }

    /// Congestion control's state: mode, rate, counters.
    pub fn congestion(&self) -> &Congestion {
        &self.cc
    }

    /// Changes the protection domain and queue depths of a QP that is not connected (RESET or
    /// INIT; DAT `dat_ep_modify` of the PZ and DTO counts in the quiescent states). Receives
    /// already posted stay; their segments are checked against the new PD when a message lands
    /// in them (a buffer of another PD then completes with a protection error). A depth below
    /// the work already queued is refused.
    pub fn reconfigure(
        &mut self,
        pd: Option<u32>,
        sq_depth: Option<u32>,
        rq_depth: Option<u32>,
    ) -> Result<(), QpError> {
        if !matches!(self.state, QpState::Reset | QpState::Init) {
            return Err(QpError::InvalidState);
        }
        if sq_depth.is_some_and(|d| (d as usize) < self.req.sq.len() || d == 0)
            || rq_depth.is_some_and(|d| (d as usize) < self.rq.len())
        {
            return Err(QpError::InvalidArgument);
        }
        if let Some(pd) = pd {
            self.config.pd = pd;
        }
        if let Some(d) = sq_depth {
            self.config.sq_depth = d;
            self.req
                .sq
                .reserve((d as usize).min(1 << 16).saturating_sub(self.req.sq.len()));
        }
        if let Some(d) = rq_depth {
            self.config.rq_depth = d;
            self.rq
                .reserve((d as usize).min(1 << 16).saturating_sub(self.rq.len()));
        }
        Ok(())
    }

    /// This QP's number.
    pub fn qpn(&self) -> u32 {
        self.config.qpn
    }

    /// Current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// Current attributes.
    pub fn attr(&self) -> &QpAttr {
        &self.attr
    }

    /// Creation parameters.
    pub fn config(&self) -> &QpConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> &QpStats {
        &self.stats
    }

    /// State transitions (IBTA vol. 1 §10.3.1, attributes per §11.2.5.2 table 91):
    /// RESET->INIT (P_Key, access), INIT->INIT, INIT->RTR (path MTU, rq_psn, dest QPN,
    /// responder resources, min RNR timer, P_Key, access), RTR->RTS (sq_psn, timeout,
    /// retry_cnt, rnr_retry, initiator depth), RTS->RTS and SQD->SQD (timeout, retry
    /// counts, min RNR timer, access), RTS->SQD, SQD->RTS, SQE->RTS, any->ERROR (flush),
    /// any->RESET. SQE is never entered by an RC QP (IBTA §10.3.1.6: on RC a send error moves
    /// the whole QP to ERROR); the SQE->RTS recovery edge is accepted for completeness of the
    /// table, and sends posted in SQE are flushed.
    pub fn modify(&mut self, now: Instant, state: QpState, attr: &QpAttr) -> Result<(), QpError> {
        use QpState::*;
        let _ = now;
        match (self.state, state) {
            (_, Reset) => {
                let (stats, error_from) = (self.stats, self.error_from);
                *self = Qp::new(self.config.clone());
                self.stats = stats;
                self.error_from = error_from;
                Ok(())
            }
            (Error, Error) => Ok(()),
            (_, Error) => {
                self.enter_error(KeepResponses::Acknowledgements);
                Ok(())
            }
            (Reset, Init) | (Init, Init) => {
                self.attr.pkey = attr.pkey;
                self.attr.access = attr.access;
                self.state = Init;
                Ok(())
            }
            (Init, Rtr) => {
                check_attr(attr)?;
                self.attr.pmtu = attr.pmtu;
                self.attr.rq_psn = attr.rq_psn;
                self.attr.dest_qpn = attr.dest_qpn;
                self.attr.max_dest_rd_atomic = attr.max_dest_rd_atomic;
                self.attr.min_rnr_timer = attr.min_rnr_timer;
                self.attr.pkey = attr.pkey;
                self.attr.access = attr.access;
                self.resp.reset(attr.rq_psn);
                self.state = Rtr;
                Ok(())
            }
            (Rtr, Rts) => {
                check_attr(attr)?;
                self.attr.sq_psn = attr.sq_psn;
                self.attr.timeout = attr.timeout;
                self.attr.retry_cnt = attr.retry_cnt;
                self.attr.rnr_retry = attr.rnr_retry;
                self.attr.max_rd_atomic = attr.max_rd_atomic;
                self.req.start(attr.sq_psn, attr.retry_cnt, attr.rnr_retry);
                self.state = Rts;
                Ok(())
            }
            (Rts, Rts) | (Sqd, Sqd) => {
                check_attr(attr)?;
                self.attr.timeout = attr.timeout;
                self.attr.retry_cnt = attr.retry_cnt;
                self.attr.rnr_retry = attr.rnr_retry;
                self.attr.min_rnr_timer = attr.min_rnr_timer;
                self.attr.access = attr.access;
                Ok(())
            }
            (Rts, Sqd) => {
                self.state = Sqd;
                Ok(())
            }
            (Sqd, Rts) | (Sqe, Rts) => {
                self.state = Rts;
                Ok(())
            }
            _ => Err(QpError::InvalidTransition),
        }
    }

    /// Posts a send WR (IBTA vol. 1 §10.8.2, §11.4.1.1). See the module docs for SQD and for
    /// local protection errors. In ERROR the WR completes at once with `WrFlushErr`.
    pub fn post_send(&mut self, now: Instant, wr: SendWr, mem: &dyn Memory) -> Result<(), QpError> {
        let _ = now;
        match self.state {
            QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Error => {}
            _ => return Err(QpError::InvalidState),
        }
        if wr.sgl.len() > self.config.max_send_sge as usize {
            return Err(QpError::TooManySge);
        }
        let len: u64 = match &wr.sgl[..] {
            // One SGE (the common case): no loop.
            [s] => u64::from(s.len),
            sgl => sgl.iter().map(|s| u64::from(s.len)).sum(),
        };
        if len > u64::from(MAX_MSG_SIZE) {
            return Err(QpError::InvalidArgument);
        }
        let is_atomic = matches!(wr.op, SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. });
        if is_atomic && len != 8 {
            return Err(QpError::InvalidArgument);
        }
        if matches!(self.state, QpState::Error | QpState::Sqe) {
            self.cq.push_back(send_completion(
                wr.wr_id,
                &wr.op,
                WcStatus::WrFlushErr,
                0,
                self.config.qpn,
            ));
            return Ok(());
        }
        if self.req.sq.len() >= self.config.sq_depth as usize {
            return Err(QpError::QueueFull);
        }
        let access = match wr.op {
            SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => {
                Access::LOCAL_WRITE
            }
            _ => Access::empty(),
        };
        let pd = self.config.pd;
        let bad = wr.sgl.iter().any(|s| {
            mem.check(
                &MemRef {
                    kind: KeyKind::Local,
                    pd,
                    key: s.lkey,
                    addr: s.addr,
                    len: s.len,
                },
                access,
            )
            .is_err()
        });
        let wqe = SendWqe::new(wr, len as u32, self.attr.pmtu, bad);
        self.req.sq.push_back(wqe);
        Ok(())
    }

    /// Posts a receive WR (allowed from INIT on; IBTA vol. 1 §10.8.2). In ERROR it completes
    /// at once with `WrFlushErr`. A QP attached to an SRQ refuses (post to the SRQ).
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), QpError> {
        if self.state == QpState::Reset || self.config.srq.is_some() {
            return Err(QpError::InvalidState);
        }
        if wr.sgl.len() > self.config.max_recv_sge as usize {
            return Err(QpError::TooManySge);
        }
        if self.state == QpState::Error {
            self.cq.push_back(WorkCompletion {
                wr_id: wr.wr_id,
                status: WcStatus::WrFlushErr,
                opcode: WcOpcode::Recv,
                byte_len: 0,
                imm_data: None,
                invalidated_rkey: None,
                qp_num: self.config.qpn,
                srq: None,
            });
            return Ok(());
        }
        if self.rq.len() >= self.config.rq_depth as usize {
            return Err(QpError::QueueFull);
        }
        let len = wr.sgl.iter().map(|s| u64::from(s.len)).sum();
        self.rq.push_back(RecvWqe { wr, len, srq: None });
        Ok(())
    }

    /// An inbound packet for this QP, already ICRC-checked and demultiplexed by destination QPN.
    /// Requests go to the responder (§9.7.5), responses to the completer (§9.7.4.1). Packets
    /// whose headers do not match their opcode, other transports, a wrong destination QP or a
    /// foreign P_Key (§9.6.1.1, §10.9) are dropped silently.
    pub fn handle_packet(
        &mut self,
        now: Instant,
        pkt: &RocePacket<'_>,
        mem: &mut dyn Memory,
        srq: Option<&mut dyn RecvSource>,
    ) {
        self.stats.packets_received += 1;
        self.stats.bytes_received += pkt.payload.len() as u64;
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let rc_or_cnp = op.transport() == Transport::Rc || op == Opcode::CNP;
        if !rc_or_cnp || !op.is_known() || !headers_match(h, pkt.payload) {
            self.stats.dropped += 1;
            return;
        }
        if h.bth.dest_qp != self.config.qpn || !pkey_match(h.bth.pkey, self.attr.pkey) {
            self.stats.dropped += 1;
            return;
        }
        let flags = op.flags();
        if flags.contains(OpFlags::CNP) {
            self.handle_cnp(now);
        } else if flags.contains(OpFlags::REQUEST) {
            self.handle_request(now, pkt, mem, srq);
        } else if flags.contains(OpFlags::RESPONSE) {
            self.handle_response(now, pkt, mem);
        } else {
            self.stats.dropped += 1;
        }
    }

    /// Fires expired timers (local ACK timeout, RNR wait, the pacer's release: its expiry
    /// only makes the QP ask to send again).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.timers.expire(Timer::Pace, now);
        if self.timers.expire(Timer::Rnr, now) {
            self.on_rnr_timer(now);
        }
        if self.timers.expire(Timer::Ack, now) {
            self.on_ack_timeout(now);
        }
    }

    /// The earliest armed deadline.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_deadline()
    }

    /// No send work request outstanding: every one posted has completed (or none was).
    #[inline]
    pub fn send_queue_empty(&self) -> bool {
        self.req.sq.is_empty()
    }

    /// False when [`poll_transmit`](Self::poll_transmit) has nothing for sure (no response
    /// queued, no send WQE at or after the cursor), so a caller can skip asking. True only
    /// means it may have a packet (e.g. a held ACK, a full window).
    #[inline]
    pub fn has_output(&self) -> bool {
        !self.resp.queue.is_empty() || self.req.cur < self.req.sq.len() || self.cc.cnp_due()
    }

    /// True when all this QP may send is one ACK (no other response, no request at the
    /// cursor): an ACK that may wait for the next frame of its shard's turn.
    #[inline]
    pub fn output_is_lone_ack(&self) -> bool {
        self.req.cur >= self.req.sq.len()
            && (self.resp.queue.is_empty() || self.resp.only_an_ack())
            && !self.cc.cnp_due()
    }

    /// The next packet to send: responses first (they unblock the peer), then requests.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        if !self.has_output() {
            // The last call of a transmit loop: nothing queued, nothing at the cursor.
            return None;
        }
        self.next_packet(now)
    }

    /// [`poll_transmit`](Self::poll_transmit) with something queued.
    #[inline(never)]
    fn next_packet(&mut self, now: Instant) -> Option<Transmit> {
        if self.cc.cnp_due() {
            if let Some(t) = self.next_cnp() {
                return Some(t);
            }
        }
        // Data (requests, READ responses) waits while the pacer is closed; the release time
        // asks again (`Timer::Pace`).
        let paced = self.cc.wait_until(now);
        // Each branch hands its callee's value straight back (no copy of the packet here).
        let trails = self.ack_may_trail();
        let read_held = paced.is_some() && self.resp.front_is_read();
        if !trails && !read_held {
            let t = self.next_response();
            if t.is_some() {
                self.count_sent(now, &t);
                return t;
            }
        }
        if let Some(at) = paced {
            if self.req.cur < self.req.sq.len() || self.resp.front_is_read() {
                self.cc.note_wait();
                self.timers.set(Timer::Pace, at);
            }
            if !trails {
                return None;
            }
        } else {
            let t = self.next_request(now);
            if t.is_some() {
                self.count_sent(now, &t);
                if !self.resp.queue.is_empty() {
                    // A trailing ACK leaves right behind this request, in the same burst.
                    self.resp.ack_due = true;
                }
                return t;
            }
            if !trails {
                return None;
            }
        }
        // No request could leave after all (a full window, the pacer): the ACK goes alone.
        let t = self.next_response();
        self.count_sent(now, &t);
        t
    }

    #[inline(always)]
    fn count_sent(&mut self, now: Instant, t: &Option<Transmit>) {
        if let Some(p) = t {
            self.stats.packets_sent += 1;
            self.stats.bytes_sent += p.payload.len() as u64;
            self.cc.on_sent(now, wire_bytes(p.payload.len()));
        }
    }

    /// The CNP that is due (RoCEv2 annex A17.9.3): to the peer's QP, its P_Key, PSN 0, BECN
    /// set as ConnectX sends it, 16 reserved bytes (the wire layer writes them). Only once
    /// connected (RTR or later: the peer's QPN is known).
    fn next_cnp(&mut self) -> Option<Transmit> {
        if !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            // Not connected (any more): the CNP has nowhere to go.
            self.cc.drop_cnp();
            return None;
        }
        if !self.cc.take_cnp() {
            return None;
        }
        let mut h = self.headers(Opcode::CNP, crate::wire::psn::Psn::new(0));
        h.bth.becn = true;
        self.stats.packets_sent += 1;
        Some(Transmit {
            headers: h,
            payload: super::transmit::Payload::new(),
        })
    }

    /// A CNP for this QP (annex A17.9.3), its origin, QPN and ICRC checked by the host and
    /// its P_Key here: DCQCN's reaction point cuts the rate; counted and dropped when the QP
    /// runs no DCQCN or is not connected.
    fn handle_cnp(&mut self, now: Instant) {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) {
            self.cc.ignore_cnp();
            return;
        }
        self.cc.on_cnp(now);
    }

    /// A packet for this QP arrived marked congestion experienced (ECN CE, RFC 3168): the
    /// notification point sends the peer's QP a CNP, at most one per interval (`cc`).
    pub fn on_congestion_experienced(&mut self, now: Instant) {
        self.cc.on_ce(now);
    }

    /// True when the only response queued is a plain ACK and a request waits at the cursor:
    /// the ACK trails that request's next packet instead of going first. The packet the
    /// peer's application waits for (a ping-pong's answer) reaches it first; the ACK, which
    /// only retires the peer's work request, follows in the same burst (on net_af_packet each
    /// frame of a burst reaches the peer's ring some hundreds of nanoseconds after the one
    /// before). One packet at most: then the ACK is due.
    #[inline]
    pub(super) fn ack_may_trail(&self) -> bool {
        !self.resp.ack_due && self.req.cur < self.req.sq.len() && self.resp.only_an_ack()
    }

    /// Send WRs completed successfully without a completion since the QP was created (each
    /// unsignaled WR when its message is acknowledged, IBTA vol. 1 §10.8.3.1: the consumer
    /// sees no work completion for it, and its queue slot is free again).
    pub fn unsignaled_done(&self) -> u64 {
        self.unsignaled_done
    }

    /// True when [`poll_completion`](Self::poll_completion) has a completion.
    pub fn has_completion(&self) -> bool {
        !self.cq.is_empty()
    }

    /// True when the QP entered ERROR since the last [`take_error_entry`](Self::take_error_entry).
    #[inline]
    pub fn has_error_entry(&self) -> bool {
        self.error_from.is_some()
    }

    /// The state the QP left for ERROR since the last call, if it did: the QP does not log
    /// (it has no clock of its own); its host logs the transition, limited
    /// (`host::event_log`).
    pub fn take_error_entry(&mut self) -> Option<QpState> {
        self.error_from.take()
    }

    /// The next work completion, in posting order per queue.
    pub fn poll_completion(&mut self) -> Option<WorkCompletion> {
        self.cq.pop_front()
    }

    /// A BTH-complete header set for a packet to the peer.
    pub(super) fn headers(
        &self,
        opcode: crate::wire::opcode::Opcode,
        psn: crate::wire::psn::Psn,
    ) -> RoceHeaders {
        peer_headers(self.attr.pkey, self.attr.dest_qpn, opcode, psn)
    }

    /// Moves to ERROR (IBTA vol. 1 §10.3.1): every outstanding send and receive WR completes
    /// with `WrFlushErr`, in order. `keep` says which responses the responder already queued
    /// still leave (see [`KeepResponses`]).
    pub(super) fn enter_error(&mut self, keep: KeepResponses) {
        if self.state != QpState::Error {
            self.error_from = Some(self.state);
        }
        self.state = QpState::Error;
        self.timers.clear();
        let qpn = self.config.qpn;
        while let Some(w) = self.req.sq.pop_front() {
            self.cq.push_back(send_completion(
                w.wr_id,
                &w.op,
                WcStatus::WrFlushErr,
                0,
                qpn,
            ));
        }
        self.req.reset_cursor();
        if let Some(w) = self.resp.take_in_progress_recv() {
            self.cq.push_back(flush_status(&w, qpn));
        }
        while let Some(w) = self.rq.pop_front() {
            self.cq.push_back(flush_status(&w, qpn));
        }
        self.resp.on_error(keep);
    }
}

/// A BTH-complete header set for a packet to QP `dest_qp` with P_Key `pkey` (no extension
/// headers yet).
#[inline]
pub(super) fn peer_headers(
    pkey: u16,
    dest_qp: u32,
    opcode: crate::wire::opcode::Opcode,
    psn: crate::wire::psn::Psn,
) -> RoceHeaders {
    RoceHeaders::new(crate::wire::bth::BthRepr {
        pkey,
        ..crate::wire::bth::BthRepr::new(opcode, dest_qp, psn)
    })
}

/// Exactly the extension headers the opcode table names are present, and opcodes without a
/// payload carry none.
#[inline]
fn headers_match(h: &RoceHeaders, payload: &[u8]) -> bool {
    let f = h.bth.opcode.flags();
    f.intersection(EXTENSION_HEADERS) == h.present()
        && (f.contains(OpFlags::PAYLOAD) || payload.is_empty())
}
