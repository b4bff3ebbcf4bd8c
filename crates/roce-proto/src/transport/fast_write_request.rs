//! The requester's fast path for the transmit path's common case: the next packet of a QP in
//! RTS is a new RC RDMA WRITE Only (a WRITE without immediate data that fits one path MTU, from
//! one SGE; the ping-pong of `ib_write_lat`, every small one-sided put). It has exactly the
//! effects `Qp::poll_transmit` has for such a packet (IBTA vol. 1 §9.7.4: the PSN assigned and
//! the WQE started, the send window and AckReq rules of `requester`, the local ACK timer, a held
//! ACK let go behind the request), reached without the general header
//! set: the frame writer gets the BTH, the RETH and the payload's place in registered memory.
//! Anything else (responses to send first, a resend, a WQE already started or failed at post
//! time, a fence, WRITE with immediate, SEND, READ, atomics, several SGEs, several packets, an
//! empty payload, a full window, a closed pacer, a CNP due) is left unchanged to
//! `poll_transmit`.

use super::qp::Qp;
use super::types::{QpState, SendOp};
use crate::mem::access::{KeyKind, MemRef};
use crate::time::Instant;
use crate::wire::bth::BthRepr;
use crate::wire::opcode::Opcode;
use crate::wire::reth::RethRepr;

/// An RC RDMA WRITE Only request packet: its headers (the BTH's pad count left to the frame
/// writer) and its payload, one range of the sender's registered memory (an L_Key reference:
/// the frame writer reads it through the checked accessor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOnlyRequest {
    pub bth: BthRepr,
    pub reth: RethRepr,
    pub payload: MemRef,
}

impl Qp {
    /// The next packet, if it is a new RC RDMA WRITE Only of at most `max_len` payload bytes
    /// (see the module documentation), with the transmit bookkeeping `poll_transmit` does for
    /// it; `None`, with nothing changed, when `poll_transmit` must build the next packet.
    #[inline(always)]
    pub fn next_write_only(&mut self, now: Instant, max_len: u32) -> Option<WriteOnlyRequest> {
        if self.state != QpState::Rts || self.req.rnr_wait || self.cc.cnp_due() {
            return None;
        }
        // The pacer closed: `poll_transmit` arms its release timer.
        if self.cc.wait_until(now).is_some() {
            return None;
        }
        // Responses go first (`next_packet`); only a trailing ACK lets a request pass.
        if !self.resp.queue.is_empty() && !self.ack_may_trail() {
            return None;
        }
        let i = self.req.cur;
        let w = self.req.sq.get(i)?;
        let SendOp::Write { remote_addr, rkey } = w.op else {
            return None;
        };
        let [sge] = &w.sgl[..] else {
            return None;
        };
        if w.started || w.bad.is_some() || w.fence || w.npsn != 1 || w.len == 0 || w.len > max_len {
            return None;
        }
        // The window of `next_request`: a new WQE starts when nothing is in flight or one
        // more PSN fits (the window is at least one PSN, `window::MIN_WINDOW`).
        let psn = self.req.next_psn;
        if psn.distance_from(self.req.una) >= self.send_window() {
            return None;
        }
        let (solicited, signaled, len) = (w.solicited, w.signaled, w.len);
        let payload = MemRef {
            kind: KeyKind::Local,
            pd: self.config.pd,
            key: sge.lkey,
            addr: sge.addr,
            len,
        };
        // From here on, what `next_request` and `next_packet` do for this packet.
        if let Some(w) = self.req.sq.get_mut(i) {
            w.first_psn = psn;
            w.started = true;
        }
        self.req.next_psn = psn.add(1);
        // A WRITE Only is its message's last packet: it always asks (`requester`).
        let ack_req = true;
        let bth = BthRepr {
            pkey: self.attr.pkey,
            solicited,
            ack_req,
            ..BthRepr::new(Opcode::RC_WRITE_ONLY, self.attr.dest_qpn, psn)
        };
        self.note_request_sent(now, psn, 1, Some(signaled), ack_req);
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += u64::from(len);
        self.cc.on_sent(now, crate::cc::wire_bytes(len as usize));
        if !self.resp.queue.is_empty() {
            // A trailing ACK leaves right behind this request, in the same burst.
            self.resp.ack_due = true;
        }
        Some(WriteOnlyRequest {
            bth,
            reth: RethRepr {
                va: remote_addr,
                rkey,
                dma_len: len,
            },
            payload,
        })
    }
}
