//! The requester (IBTA vol. 1 §9.7.4 "requester side", Linux rxe `rxe_req.c`): turns send WQEs
//! into request packets. Segmentation into FIRST/MIDDLE/LAST/ONLY by path MTU (§9.7.4.1.2),
//! PSN assignment (§9.7.1: one PSN per packet, an RDMA READ consumes ceil(len/MTU), min 1),
//! AckReq (§9.7.4.1.4, see `wants_ack`) on the last packet of every message (signaled or not:
//! nothing outstanding is ever left waiting for a later request or a timer), on READ/atomic
//! requests, every `ACK_REQ_EVERY` packets of a long message and when the queue or window
//! fills; the responder coalesces the ACKs of one receive burst into one. A bounded window of outstanding PSNs, at most `max_rd_atomic` READs/atomics outstanding
//! (§9.4.4 initiator depth), and fences (§10.8.3.3).
//!
//! Retransmission is go-back-N: the completer moves the cursor (`cur`, `cur_pkt`) back to the
//! first PSN to resend and this code walks forward again. A READ resumed from packet `k` is
//! re-requested for its remaining part: VA + k*MTU, length - k*MTU, PSN first + k (§9.7.4.1.5).

use super::limits::ACK_REQ_EVERY;
use super::qp::{peer_headers, Qp};
use super::scatter::sgl_payload;
use super::timers::{ack_timeout_duration, Timer};
use super::transmit::{Payload, Transmit};
use super::types::{QpState, SendOp};
use super::wqe::{is_rd_atomic, SendWqe};
use crate::mem::access::{KeyKind, MemRef};
use crate::time::Instant;
use crate::wire::atomic_eth::AtomicEthRepr;
use crate::wire::bth::BthRepr;
use crate::wire::opcode::Opcode;
use crate::wire::psn::Psn;
use crate::wire::reth::RethRepr;
use crate::wire::roce::RoceHeaders;

impl Qp {
    /// The next request packet, if the requester may send one now.
    pub(super) fn next_request(&mut self, now: Instant) -> Option<Transmit> {
        if !matches!(self.state, QpState::Rts | QpState::Sqd) || self.req.rnr_wait {
            return None;
        }
        let i = self.req.cur;
        let window = self.send_window();
        // One lookup of the WQE (a fence check, rare, looks it up again).
        let mut w = self.req.sq.get_mut(i)?;
        if !w.started {
            if self.state == QpState::Sqd {
                return None;
            }
            if let Some(st) = w.bad {
                // Completes in error once everything before it has completed.
                if i == 0 {
                    self.fail_head(st);
                }
                return None;
            }
            let rd = is_rd_atomic(&w.op);
            if w.fence {
                if self.req.sq.iter().take(i).any(|e| is_rd_atomic(&e.op)) {
                    return None;
                }
                w = self.req.sq.get_mut(i)?;
            }
            if rd && self.req.rd_outstanding >= u32::from(self.attr.max_rd_atomic.max(1)) {
                return None;
            }
            let inflight = self.req.next_psn.distance_from(self.req.una);
            let need = if rd { w.npsn } else { 1 };
            if inflight > 0 && inflight + need > window {
                self.cc.note_blocked();
                return None;
            }
            let first = self.req.next_psn;
            w.first_psn = first;
            w.started = true;
            self.req.next_psn = first.add(w.npsn);
            if rd {
                self.req.rd_outstanding += 1;
            }
        }
        let w = &*w;
        let k = self.req.cur_pkt;
        let psn = w.first_psn.add(k);
        if psn.distance_from(self.req.una) >= window && self.req.probe_pass != Some(psn) {
            self.cc.note_blocked();
            return None;
        }
        if is_rd_atomic(&w.op) {
            let (h, span) = rd_atomic_request(w, k, psn, self.attr.pkey, self.attr.dest_qpn);
            let ends = Some(w.signaled);
            self.note_request_sent(now, psn, span, ends, h.bth.ack_req);
            return Some(Transmit {
                headers: h,
                payload: Payload::new(),
            });
        }
        // SEND/WRITE (IBTA vol. 1 §9.7.4.1.2): one PSN per packet, segmented by path MTU. The
        // headers and the payload are built once, straight into the returned packet.
        let first = k == 0;
        let last = k + 1 == w.npsn;
        let off = u64::from(k) * u64::from(w.mtu);
        let plen = u64::from(w.len).saturating_sub(off).min(u64::from(w.mtu));
        let reth = match w.op {
            SendOp::Write { remote_addr, rkey }
            | SendOp::WriteWithImm {
                remote_addr, rkey, ..
            } if first => Some(RethRepr {
                va: remote_addr,
                rkey,
                dma_len: w.len,
            }),
            _ => None,
        };
        let (imm_dt, ieth) = match w.op {
            SendOp::SendWithImm { imm } | SendOp::WriteWithImm { imm, .. } if last => {
                (Some(imm), None)
            }
            SendOp::SendWithInv { rkey } if last => (None, Some(rkey)),
            _ => (None, None),
        };
        let opcode = segment_opcode(&w.op, first, last);
        let ends = last.then_some(w.signaled);
        let solicited = last && w.solicited;
        // One SGE (the common case): the payload is one slice of it.
        let one = match &w.sgl[..] {
            [s] => Some((s.lkey, s.addr)),
            _ => None,
        };
        let ack_req = last || self.wants_ack(psn, i);
        let bth = BthRepr {
            pkey: self.attr.pkey,
            solicited,
            ack_req,
            ..BthRepr::new(opcode, self.attr.dest_qpn, psn)
        };
        let headers = RoceHeaders {
            reth,
            imm_dt,
            ieth,
            ..RoceHeaders::new(bth)
        };
        let pd = self.config.pd;
        self.note_request_sent(now, psn, 1, ends, ack_req);
        if let Some((key, addr)) = one {
            return Some(Transmit {
                headers,
                payload: Payload::one(MemRef {
                    kind: KeyKind::Local,
                    pd,
                    key,
                    addr: addr.saturating_add(off),
                    len: plen as u32,
                }),
            });
        }
        let sgl = &self.req.sq.get(i)?.sgl;
        Some(Transmit {
            headers,
            payload: sgl_payload(sgl, pd, off, plen),
        })
    }

    /// Transmit bookkeeping of a request packet at `psn` covering `span` PSNs: the AckReq
    /// count, the cursor (to the next WQE after the message's last packet: `ends` is then
    /// `Some(signaled)`, the WQE's flag), the awaited mark (`ends_awaited`), the highest PSN
    /// sent and the local ACK timer (IBTA vol. 1 §9.7.6.1.2).
    #[inline(always)]
    pub(super) fn note_request_sent(
        &mut self,
        now: Instant,
        psn: Psn,
        span: u32,
        ends: Option<bool>,
        ack_req: bool,
    ) {
        if ack_req {
            self.req.unrequested = 0;
        } else {
            self.req.unrequested += 1;
        }
        if let Some(signaled) = ends {
            self.req.awaited = self.ends_awaited(signaled, psn.add(span - 1));
            self.req.cur += 1;
            self.req.cur_pkt = 0;
        } else {
            self.req.cur_pkt += 1;
        }
        let end = psn.add(span);
        let resend = psn.before(self.req.sent_hw);
        if resend {
            self.stats.retransmits += 1;
        } else {
            self.req.rto.on_new_packet(end, now);
        }
        // A round trip is timed on packets one answer covers (a READ of several packets is
        // answered after its whole transfer, which is no round trip).
        if span == 1 {
            self.cc.on_request_sent(now, psn.value(), resend);
        }
        if end.after(self.req.sent_hw) {
            self.req.sent_hw = end;
        }
        self.req.after_probe_packet(psn);
        if !self.timers.is_set(Timer::Ack) {
            if let Some(d) = self
                .req
                .rto
                .timeout(ack_timeout_duration(self.attr.timeout))
            {
                self.timers.set(Timer::Ack, now + d);
            }
        }
    }
}

impl Qp {
    /// Whether the WQE whose last packet (PSN `last`) is going out, `signaled` or not, is the
    /// one the consumer's next completion comes from: it is signaled (or the QP signals all)
    /// and every signaled WR sent before it is acknowledged. A consumer whose send queue is
    /// full of unsignaled WRs waits for this completion to post again (IBTA vol. 1 §10.8.3.1:
    /// unsignaled WRs complete only with a later signaled one), so its packet should not wait
    /// behind the rest of a burst. O(1): the last PSN of the newest signaled WR sent is kept.
    #[inline]
    fn ends_awaited(&mut self, signaled: bool, last: Psn) -> bool {
        if !(signaled || self.config.sig_all) {
            return false;
        }
        let una = self.req.una;
        match self.req.last_signaled {
            // A resend behind a newer signaled WR, or the same WR again.
            Some(p) if p.after(last) => false,
            Some(p) if p == last => true,
            // An older signaled WR is still unacknowledged.
            Some(p) if !p.before(una) => {
                self.req.last_signaled = Some(last);
                false
            }
            _ => {
                self.req.last_signaled = Some(last);
                true
            }
        }
    }

    /// True once after [`poll_transmit`](Qp::poll_transmit) or
    /// [`next_write_only`](Qp::next_write_only) handed out the last packet of the WR the
    /// consumer's next completion comes from (see `ends_awaited`): the caller sends it at once,
    /// not behind the other frames it builds in the same turn, so the completion that
    /// reopens the consumer's window comes back a burst sooner. At most one packet in flight
    /// is awaited at a time, so a stream of signaled WRs keeps its bursts.
    pub fn take_awaited(&mut self) -> bool {
        std::mem::take(&mut self.req.awaited)
    }
}

/// The headers of a READ or atomic request resumed at packet `k` of `w` (PSN `psn`) and the
/// PSNs it covers: a READ re-requests its remaining part (VA + k*MTU, length - k*MTU;
/// IBTA vol. 1 §9.7.4.1.5). Always with AckReq.
fn rd_atomic_request(
    w: &SendWqe,
    k: u32,
    psn: Psn,
    pkey: u16,
    dest_qpn: u32,
) -> (RoceHeaders, u32) {
    let headers = |op| peer_headers(pkey, dest_qpn, op, psn);
    let (mut h, span) = match w.op {
        SendOp::Read { remote_addr, rkey } => {
            let off = u64::from(k) * u64::from(w.mtu);
            let mut h = headers(Opcode::RC_READ_REQUEST);
            h.reth = Some(RethRepr {
                va: remote_addr.wrapping_add(off),
                rkey,
                dma_len: w.len.saturating_sub(off as u32),
            });
            (h, w.npsn - k)
        }
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => {
            let mut h = headers(Opcode::RC_COMPARE_SWAP);
            h.atomic_eth = Some(AtomicEthRepr {
                va: remote_addr,
                rkey,
                swap_add: swap,
                compare,
            });
            (h, 1)
        }
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => {
            let mut h = headers(Opcode::RC_FETCH_ADD);
            h.atomic_eth = Some(AtomicEthRepr {
                va: remote_addr,
                rkey,
                swap_add: add,
                compare: 0,
            });
            (h, 1)
        }
        // Not a READ/atomic: callers never get here; an empty SEND keeps this total.
        _ => (headers(Opcode::RC_SEND_ONLY), 1),
    };
    h.bth.ack_req = true;
    (h, span)
}

impl Qp {
    /// AckReq for a SEND/WRITE packet before its message's last one (IBTA vol. 1 §9.7.4.1.4
    /// leaves the choice to the requester): after `ACK_REQ_EVERY - 1` packets without one, so
    /// a long message keeps the window moving; when the send queue is half full of unretired
    /// WQEs or the PSN window half used; and on a resend of the last packet sent (a go-back-N
    /// must be answered) or of a probe's first one; and on every packet of a QP its pacer
    /// limits (`cc`): spaced packets would otherwise leave a round trip's silence between
    /// acknowledgements, which the retransmission timer takes for a lost tail.
    #[inline(always)]
    pub(super) fn wants_ack(&self, psn: Psn, wqe: usize) -> bool {
        let half_sq = (self.config.sq_depth / 2).max(1) as usize;
        self.req.unrequested + 1 >= ACK_REQ_EVERY
            || wqe + 1 >= half_sq
            || psn.distance_from(self.req.una) + 1 >= (self.send_window() / 2).max(1)
            || psn.next() == self.req.sent_hw
            || self.req.probe_last.is_some()
            || self.cc.rate_bps().is_some()
    }
}

/// The opcode of a SEND/WRITE packet by its position in the message (IBTA vol. 1 §9.2 table 38).
#[inline(always)]
fn segment_opcode(op: &SendOp, first: bool, last: bool) -> Opcode {
    match (op, first, last) {
        (SendOp::Send, true, true) => Opcode::RC_SEND_ONLY,
        (SendOp::SendWithImm { .. }, true, true) => Opcode::RC_SEND_ONLY_IMM,
        (SendOp::SendWithInv { .. }, true, true) => Opcode::RC_SEND_ONLY_INV,
        (SendOp::Send, false, true) => Opcode::RC_SEND_LAST,
        (SendOp::SendWithImm { .. }, false, true) => Opcode::RC_SEND_LAST_IMM,
        (SendOp::SendWithInv { .. }, false, true) => Opcode::RC_SEND_LAST_INV,
        (SendOp::Write { .. }, true, true) => Opcode::RC_WRITE_ONLY,
        (SendOp::WriteWithImm { .. }, true, true) => Opcode::RC_WRITE_ONLY_IMM,
        (SendOp::Write { .. }, false, true) => Opcode::RC_WRITE_LAST,
        (SendOp::WriteWithImm { .. }, false, true) => Opcode::RC_WRITE_LAST_IMM,
        (SendOp::Write { .. } | SendOp::WriteWithImm { .. }, true, false) => Opcode::RC_WRITE_FIRST,
        (SendOp::Write { .. } | SendOp::WriteWithImm { .. }, false, false) => {
            Opcode::RC_WRITE_MIDDLE
        }
        (_, true, false) => Opcode::RC_SEND_FIRST,
        (_, false, false) => Opcode::RC_SEND_MIDDLE,
        // READ/atomics are built elsewhere; SEND last keeps the table total.
        (_, _, true) => Opcode::RC_SEND_LAST,
    }
}
