//! The responder (IBTA vol. 1 §9.7.5 "responder side", Linux rxe `rxe_resp.c`).
//!
//! - PSN check (§9.7.5.1): the expected PSN executes; the 2^23 PSNs before it are duplicates,
//!   the 2^23 after it are out of sequence. Out of sequence: one PSN sequence error NAK per gap
//!   carrying the expected PSN (§9.7.5.2.1), then silent drops until it arrives.
//! - Duplicates (§9.7.5.1.1): SEND/WRITE are re-ACKed (when AckReq is set) without executing
//!   again. The re-ACK of a duplicate whose original this responder executed in the same busy
//!   spell (no [`QUIET_GAP_NS`](super::resp_state::QUIET_GAP_NS) between requests since) is an
//!   ACK of its own, not merged into the original's: the copy came right behind the original
//!   (the requester probed a peer that was merely slow) and the repeat tells the requester so
//!   (`rto.rs`); the re-ACK of an older
//!   one (the original's ACK was lost) merges as any ACK does. A duplicate READ is executed again from the retransmitted request, if it falls in
//!   one of the last `max_dest_rd_atomic` READs (its queued response restarts, or it goes
//!   before the responses to later PSNs: one response per READ is queued, in PSN order); a
//!   duplicate atomic is answered with the saved original value, never executed twice.
//! - Opcode sequence (§9.7.5.1.3), lengths (§9.7.5.1.4/§9.7.5.2.2), R_Key/bounds/rights via
//!   `Memory` (§9.7.5.2.3 → NAK remote access error), receive buffer too small (LocLenErr on the
//!   receive, NAK invalid request). These errors NAK and move the QP to ERROR.
//! - No receive WQE for a SEND or RDMA WRITE with immediate: RNR NAK with `min_rnr_timer`
//!   (§9.7.5.2.8); the PSN is not consumed.
//! - ACKs are coalesced: sent only for packets with AckReq (and always for NAKs); the AETH
//!   carries the MSN, the count of completed inbound messages (§9.7.5.1.5).
//! - No ACK waits on a timer. A lone ACK trails its QP's next request packet when one is
//!   ready (`Qp::ack_may_trail`), and an inline consumer's turn may leave lone ACKs for its next
//!   frame (`Shard::poll_holding_acks`); NAKs, atomic ACKs and READ responses always go first.
//! - READ responses are segmented by path MTU with an AETH on FIRST/LAST/ONLY (§9.7.5.1.6).

use super::limits::{MAX_MSG_SIZE, MAX_QUEUED_RESPONSES};
use super::qp::Qp;
use super::resp_state::{npsn_of, InMsg, KeepResponses, RdEntry, Response};
use super::scatter::scatter;
use super::srq::RecvSource;
use super::transmit::{Payload, Transmit};
use super::types::{QpState, WcOpcode, WcStatus, WorkCompletion};
use super::wqe::RecvWqe;
use crate::mem::access::{Access, AtomicOp, KeyKind, MemError, MemRef, Memory};
use crate::time::Instant;
use crate::wire::aeth::{AethRepr, NakCode, Syndrome, CREDITS_UNLIMITED};
use crate::wire::atomic_ack_eth::AtomicAckEthRepr;
use crate::wire::opcode::{OpFlags, Opcode};
use crate::wire::psn::Psn;
use crate::wire::roce::{RoceHeaders, RocePacket};

impl Qp {
    /// A request packet for this QP's responder.
    #[inline(always)]
    pub(super) fn handle_request(
        &mut self,
        now: Instant,
        pkt: &RocePacket<'_>,
        mem: &mut dyn Memory,
        srq: Option<&mut dyn RecvSource>,
    ) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            self.stats.dropped += 1;
            return;
        }
        let h = &pkt.headers;
        let psn = h.bth.psn;
        self.resp.note_request(now);
        let d = psn.diff(self.resp.epsn);
        if d > 0 {
            if self.resp.nak_sent {
                self.stats.dropped += 1;
            } else {
                self.resp.nak_sent = true;
                self.stats.seq_naks_sent += 1;
                self.nak(Syndrome::Nak(NakCode::PsnSequenceError));
            }
            return;
        }
        if d < 0 {
            self.stats.duplicates += 1;
            self.duplicate(pkt, mem);
            return;
        }
        self.resp.nak_sent = false;
        let f = h.bth.opcode.flags();
        let seq_ok = match self.resp.in_msg {
            InMsg::None => f.intersects(OpFlags::FIRST | OpFlags::ONLY),
            InMsg::Send { .. } => {
                f.contains(OpFlags::SEND) && f.intersects(OpFlags::MIDDLE | OpFlags::LAST)
            }
            InMsg::Write { .. } => {
                f.contains(OpFlags::WRITE) && f.intersects(OpFlags::MIDDLE | OpFlags::LAST)
            }
        };
        if !seq_ok {
            self.fatal(NakCode::InvalidRequest, None);
            return;
        }
        if f.contains(OpFlags::SEND) {
            self.recv_send(pkt, mem, srq);
        } else if f.contains(OpFlags::WRITE) {
            self.recv_write(pkt, mem, srq);
        } else if f.contains(OpFlags::READ) {
            self.recv_read(pkt, mem);
        } else if f.contains(OpFlags::ATOMIC) {
            self.recv_atomic(pkt, mem);
        } else {
            self.fatal(NakCode::InvalidRequest, None);
        }
    }

    fn nak(&mut self, syndrome: Syndrome) {
        let r = Response::Nak {
            psn: self.resp.epsn,
            syndrome,
            msn: self.resp.msn,
        };
        self.resp.push(r);
    }

    /// An executed request packet: the PSN advances by `npsn`; ACK when asked.
    #[inline]
    pub(super) fn advance(&mut self, psn: Psn, npsn: u32, ack_req: bool) {
        self.resp.epsn = psn.add(npsn);
        if ack_req {
            let r = Response::Ack {
                psn,
                msn: self.resp.msn,
            };
            self.resp.push(r);
        }
    }

    pub(super) fn finish_message(&mut self) {
        self.resp.msn = (self.resp.msn + 1) & 0x00ff_ffff;
    }

    /// A responder error: NAK the expected PSN, complete the in-progress receive with
    /// `recv_status` when given, move to ERROR (IBTA vol. 1 §9.7.5.2.2-6, §10.3.1).
    fn fatal(&mut self, code: NakCode, recv_status: Option<WcStatus>) {
        self.stats.count_fatal_nak(code, true);
        self.nak(Syndrome::Nak(code));
        if let Some(st) = recv_status {
            if let Some(w) = self.resp.take_in_progress_recv() {
                self.recv_completion(&w, st, WcOpcode::Recv, 0, None, None);
            }
        }
        self.enter_error(KeepResponses::Naks);
    }

    fn recv_completion(
        &mut self,
        w: &RecvWqe,
        status: WcStatus,
        opcode: WcOpcode,
        byte_len: u32,
        imm: Option<u32>,
        inv: Option<u32>,
    ) {
        self.cq.push_back(WorkCompletion {
            wr_id: w.wr.wr_id,
            status,
            opcode,
            byte_len,
            imm_data: imm,
            invalidated_rkey: inv,
            qp_num: self.config.qpn,
            srq: w.srq,
        });
    }

    fn take_recv(&mut self, srq: Option<&mut dyn RecvSource>) -> Option<RecvWqe> {
        match self.config.srq {
            Some(n) => {
                let s = srq.filter(|s| s.srqn() == n)?;
                let wr = s.take_recv(self.config.qpn)?;
                let len = wr.sgl.iter().map(|s| u64::from(s.len)).sum();
                Some(RecvWqe {
                    wr,
                    len,
                    srq: Some(n),
                })
            }
            None => self.rq.pop_front(),
        }
    }

    fn rnr(&mut self) {
        self.stats.rnr_naks_sent += 1;
        let timer = self.attr.min_rnr_timer;
        self.nak(Syndrome::RnrNak { timer });
    }

    /// Path MTU payload rule: FIRST/MIDDLE exactly one MTU, LAST/ONLY at most one.
    fn payload_len_ok(&self, f: OpFlags, len: usize) -> bool {
        let mtu = self.attr.pmtu.bytes() as usize;
        if f.intersects(OpFlags::FIRST | OpFlags::MIDDLE) {
            len == mtu
        } else {
            len <= mtu
        }
    }

    fn recv_send(
        &mut self,
        pkt: &RocePacket<'_>,
        mem: &mut dyn Memory,
        srq: Option<&mut dyn RecvSource>,
    ) {
        let h = &pkt.headers;
        let f = h.bth.opcode.flags();
        if !self.payload_len_ok(f, pkt.payload.len()) {
            self.fatal(NakCode::InvalidRequest, None);
            return;
        }
        let (wqe, off) = match core::mem::take(&mut self.resp.in_msg) {
            InMsg::Send { wqe, off } => (wqe, off),
            _ => match self.take_recv(srq) {
                Some(w) => (w, 0),
                None => {
                    self.rnr();
                    return;
                }
            },
        };
        let end = off + pkt.payload.len() as u64;
        if end > wqe.len {
            self.resp.in_msg = InMsg::Send { wqe, off };
            self.fatal(NakCode::InvalidRequest, Some(WcStatus::LocLenErr));
            return;
        }
        if scatter(mem, self.config.pd, &wqe.wr.sgl, off, pkt.payload).is_err() {
            self.resp.in_msg = InMsg::Send { wqe, off };
            self.fatal(NakCode::RemoteOperationalError, Some(WcStatus::LocProtErr));
            return;
        }
        if f.intersects(OpFlags::LAST | OpFlags::ONLY) {
            let mut inv = None;
            if let Some(rkey) = h.ieth {
                if mem.invalidate(self.config.pd, rkey).is_err() {
                    self.resp.in_msg = InMsg::Send { wqe, off };
                    self.fatal(NakCode::InvalidRequest, Some(WcStatus::LocProtErr));
                    return;
                }
                inv = Some(rkey);
            }
            self.finish_message();
            self.recv_completion(
                &wqe,
                WcStatus::Success,
                WcOpcode::Recv,
                end as u32,
                h.imm_dt,
                inv,
            );
        } else {
            self.resp.in_msg = InMsg::Send { wqe, off: end };
        }
        self.advance(h.bth.psn, 1, h.bth.ack_req);
    }

    pub(super) fn remote_ok(&self, need: Access) -> bool {
        self.attr.access.contains(need)
    }

    #[inline(always)]
    fn recv_write(
        &mut self,
        pkt: &RocePacket<'_>,
        mem: &mut dyn Memory,
        srq: Option<&mut dyn RecvSource>,
    ) {
        let h = &pkt.headers;
        let f = h.bth.opcode.flags();
        let plen = pkt.payload.len();
        if !self.payload_len_ok(f, plen) {
            self.fatal(NakCode::InvalidRequest, None);
            return;
        }
        let pd = self.config.pd;
        let by_write = checked_by_write(f, h);
        let (va, rkey, len, off) = match (h.reth, &self.resp.in_msg) {
            (Some(reth), InMsg::None) => {
                let len = reth.dma_len;
                let shape_ok = if f.contains(OpFlags::ONLY) {
                    plen as u64 == u64::from(len)
                } else {
                    u64::from(len) > plen as u64
                };
                if len > MAX_MSG_SIZE || !shape_ok {
                    self.fatal(NakCode::InvalidRequest, None);
                    return;
                }
                if len > 0 {
                    // A WRITE Only without immediate is written below over exactly this
                    // range with the same checks (`remote_write_on`, nothing else happens in
                    // between): checking here too would only look the region up twice more.
                    let r = || MemRef {
                        kind: KeyKind::Remote,
                        pd,
                        key: reth.rkey,
                        addr: reth.va,
                        len,
                    };
                    if !self.remote_ok(Access::REMOTE_WRITE)
                        || (!by_write
                            && (!mem.rkey_usable_on(reth.rkey, self.config.qpn)
                                || mem.check(&r(), Access::REMOTE_WRITE).is_err()))
                    {
                        self.fatal(NakCode::RemoteAccessError, None);
                        return;
                    }
                }
                (reth.va, reth.rkey, len, 0u32)
            }
            (None, InMsg::Write { va, rkey, len, off }) => (*va, *rkey, *len, *off),
            _ => {
                self.fatal(NakCode::InvalidRequest, None);
                return;
            }
        };
        let end = u64::from(off) + plen as u64;
        let last = f.intersects(OpFlags::LAST | OpFlags::ONLY);
        if (last && end != u64::from(len)) || (!last && end >= u64::from(len)) {
            self.fatal(NakCode::InvalidRequest, None);
            return;
        }
        // WRITE with immediate consumes a receive WQE: find it before touching memory.
        let recv = if last && h.imm_dt.is_some() {
            match self.take_recv(srq) {
                Some(w) => Some(w),
                None => {
                    self.resp.in_msg = if f.contains(OpFlags::ONLY) {
                        InMsg::None
                    } else {
                        InMsg::Write { va, rkey, len, off }
                    };
                    self.rnr();
                    return;
                }
            }
        } else {
            None
        };
        if plen > 0 {
            let r = MemRef {
                kind: KeyKind::Remote,
                pd,
                key: rkey,
                addr: va.wrapping_add(u64::from(off)),
                len: plen as u32,
            };
            let written = if by_write {
                mem.remote_write_on(&r, self.config.qpn, pkt.payload)
            } else {
                mem.write(&r, Access::REMOTE_WRITE, pkt.payload)
            };
            if written.is_err() {
                if let Some(w) = recv {
                    self.recv_completion(
                        &w,
                        WcStatus::LocAccessErr,
                        WcOpcode::RecvRdmaWithImm,
                        0,
                        None,
                        None,
                    );
                }
                self.fatal(NakCode::RemoteAccessError, None);
                return;
            }
        }
        if last {
            self.resp.in_msg = InMsg::None;
            self.finish_message();
            if let Some(w) = recv {
                self.recv_completion(
                    &w,
                    WcStatus::Success,
                    WcOpcode::RecvRdmaWithImm,
                    len,
                    h.imm_dt,
                    None,
                );
            }
        } else {
            self.resp.in_msg = InMsg::Write {
                va,
                rkey,
                len,
                off: end as u32,
            };
        }
        self.advance(h.bth.psn, 1, h.bth.ack_req);
    }

    fn check_read(&self, mem: &dyn Memory, va: u64, rkey: u32, len: u32) -> Result<(), MemError> {
        if len == 0 {
            return Ok(());
        }
        if !self.remote_ok(Access::REMOTE_READ) || !mem.rkey_usable_on(rkey, self.config.qpn) {
            return Err(MemError::AccessDenied);
        }
        let r = MemRef {
            kind: KeyKind::Remote,
            pd: self.config.pd,
            key: rkey,
            addr: va,
            len,
        };
        mem.check(&r, Access::REMOTE_READ)
    }

    fn remember(&mut self, e: RdEntry) {
        let cap = usize::from(self.attr.max_dest_rd_atomic.max(1));
        while self.resp.ring.len() >= cap {
            self.resp.ring.pop_front();
        }
        self.resp.ring.push_back(e);
    }

    fn recv_read(&mut self, pkt: &RocePacket<'_>, mem: &mut dyn Memory) {
        let h = &pkt.headers;
        let Some(reth) = h.reth else { return };
        if self.resp.queue.len() >= MAX_QUEUED_RESPONSES {
            self.stats.dropped += 1;
            return;
        }
        if reth.dma_len > MAX_MSG_SIZE {
            self.fatal(NakCode::InvalidRequest, None);
            return;
        }
        if self
            .check_read(mem, reth.va, reth.rkey, reth.dma_len)
            .is_err()
        {
            self.fatal(NakCode::RemoteAccessError, None);
            return;
        }
        let psn = h.bth.psn;
        let npsn = npsn_of(reth.dma_len, self.attr.pmtu.bytes());
        self.remember(RdEntry {
            psn,
            npsn,
            atomic: None,
        });
        self.finish_message();
        self.resp.push(Response::Read {
            psn,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
            idx: 0,
        });
        self.advance(psn, npsn, false);
    }

    fn recv_atomic(&mut self, pkt: &RocePacket<'_>, mem: &mut dyn Memory) {
        let h = &pkt.headers;
        let Some(ae) = h.atomic_eth else { return };
        if self.resp.queue.len() >= MAX_QUEUED_RESPONSES {
            self.stats.dropped += 1;
            return;
        }
        if !self.remote_ok(Access::REMOTE_ATOMIC) {
            self.fatal(NakCode::RemoteAccessError, None);
            return;
        }
        let op = if h.bth.opcode == Opcode::RC_COMPARE_SWAP {
            AtomicOp::CompareSwap {
                compare: ae.compare,
                swap: ae.swap_add,
            }
        } else {
            AtomicOp::FetchAdd { add: ae.swap_add }
        };
        if !mem.rkey_usable_on(ae.rkey, self.config.qpn) {
            self.fatal(NakCode::RemoteAccessError, None);
            return;
        }
        let r = MemRef {
            kind: KeyKind::Remote,
            pd: self.config.pd,
            key: ae.rkey,
            addr: ae.va,
            len: 8,
        };
        let orig = match mem.atomic(&r, op) {
            Ok(v) => v,
            Err(MemError::Misaligned) => {
                self.fatal(NakCode::InvalidRequest, None);
                return;
            }
            Err(_) => {
                self.fatal(NakCode::RemoteAccessError, None);
                return;
            }
        };
        let psn = h.bth.psn;
        self.remember(RdEntry {
            psn,
            npsn: 1,
            atomic: Some(orig),
        });
        self.finish_message();
        let msn = self.resp.msn;
        self.resp.push(Response::Atomic { psn, orig, msn });
        self.advance(psn, 1, false);
    }

    /// A duplicate request (IBTA vol. 1 §9.7.5.1.1).
    fn duplicate(&mut self, pkt: &RocePacket<'_>, mem: &mut dyn Memory) {
        let h = &pkt.headers;
        let psn = h.bth.psn;
        let f = h.bth.opcode.flags();
        if f.contains(OpFlags::READ) {
            let Some(reth) = h.reth else { return };
            let mtu = self.attr.pmtu.bytes();
            let found = self.resp.ring.iter().any(|e| {
                e.atomic.is_none() && {
                    let k = psn.distance_from(e.psn);
                    k < e.npsn && npsn_of(reth.dma_len, mtu) <= e.npsn - k
                }
            });
            if !found
                || self.resp.queue.len() >= MAX_QUEUED_RESPONSES
                || self
                    .check_read(mem, reth.va, reth.rkey, reth.dma_len)
                    .is_err()
            {
                self.stats.dropped += 1;
                return;
            }
            self.resp
                .restart_read(psn, reth.va, reth.rkey, reth.dma_len, mtu);
        } else if f.contains(OpFlags::ATOMIC) {
            let saved = self
                .resp
                .ring
                .iter()
                .find(|e| e.psn == psn && e.atomic.is_some())
                .and_then(|e| e.atomic);
            match saved {
                Some(orig) => {
                    let msn = self.resp.msn;
                    self.resp.push(Response::Atomic { psn, orig, msn });
                }
                None => self.stats.dropped += 1,
            }
        } else if h.bth.ack_req {
            let r = Response::Ack {
                psn: self.resp.epsn.sub(1),
                msn: self.resp.msn,
            };
            // Executed in this busy spell: the copy came right behind its original.
            if psn.diff(self.resp.spell_psn) >= 0 {
                self.resp.push_repeat(r);
            } else {
                self.resp.push(r);
            }
        }
    }

    /// The next queued response packet.
    pub(super) fn next_response(&mut self) -> Option<Transmit> {
        if matches!(self.state, QpState::Reset | QpState::Init) {
            return None;
        }
        // An empty queue (the common case on a requester's turn) is the first thing ruled out.
        let r = *self.resp.queue.front()?;
        let ack = |syndrome, msn| Some(AethRepr { syndrome, msn });
        let unlimited = Syndrome::Ack {
            credits: CREDITS_UNLIMITED,
        };
        let t = match r {
            Response::Ack { psn, msn } => {
                self.resp.queue.pop_front();
                self.stats.acks_sent += 1;
                if self.resp.queue.is_empty() {
                    self.resp.ack_due = false;
                }
                let mut h = self.headers(Opcode::RC_ACK, psn);
                h.aeth = ack(unlimited, msn);
                Transmit {
                    headers: h,
                    payload: Payload::new(),
                }
            }
            Response::Nak { psn, syndrome, msn } => {
                self.resp.queue.pop_front();
                let mut h = self.headers(Opcode::RC_ACK, psn);
                h.aeth = ack(syndrome, msn);
                Transmit {
                    headers: h,
                    payload: Payload::new(),
                }
            }
            Response::Atomic { psn, orig, msn } => {
                self.resp.queue.pop_front();
                let mut h = self.headers(Opcode::RC_ATOMIC_ACK, psn);
                h.aeth = ack(unlimited, msn);
                h.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: orig });
                Transmit {
                    headers: h,
                    payload: Payload::new(),
                }
            }
            Response::Read {
                psn,
                va,
                rkey,
                len,
                idx,
            } => {
                let mtu = self.attr.pmtu.bytes();
                let total = npsn_of(len, mtu);
                let off = u64::from(idx) * u64::from(mtu);
                let plen = u64::from(len).saturating_sub(off).min(u64::from(mtu)) as u32;
                let op = if total == 1 {
                    Opcode::RC_READ_RESPONSE_ONLY
                } else if idx == 0 {
                    Opcode::RC_READ_RESPONSE_FIRST
                } else if idx + 1 == total {
                    Opcode::RC_READ_RESPONSE_LAST
                } else {
                    Opcode::RC_READ_RESPONSE_MIDDLE
                };
                let mut h = self.headers(op, psn.add(idx));
                if op != Opcode::RC_READ_RESPONSE_MIDDLE {
                    h.aeth = ack(unlimited, self.resp.msn);
                }
                let mut payload = Payload::new();
                payload.push(MemRef {
                    kind: KeyKind::Remote,
                    pd: self.config.pd,
                    key: rkey,
                    addr: va.wrapping_add(off),
                    len: plen,
                });
                if idx + 1 >= total {
                    self.resp.queue.pop_front();
                } else if let Some(Response::Read { idx: i, .. }) = self.resp.queue.front_mut() {
                    *i += 1;
                }
                Transmit {
                    headers: h,
                    payload,
                }
            }
        };
        Some(t)
    }
}

/// Whether a WRITE request's checks are all left to its single `Memory::remote_write_on`: a
/// WRITE Only without immediate, whose one payload covers the whole RETH range and which
/// consumes no receive WQE.
#[inline(always)]
fn checked_by_write(f: OpFlags, h: &RoceHeaders) -> bool {
    f.contains(OpFlags::ONLY) && h.imm_dt.is_none()
}
