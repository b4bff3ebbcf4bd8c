//! The responder's fast path for the receive path's common case: an RC RDMA WRITE Only without
//! immediate data that arrives in sequence on a QP in RTS (the ping-pong of `ib_write_lat`,
//! and every small one-sided put). It has exactly the effects `Qp::handle_packet` has for such
//! a packet (IBTA vol. 1 §9.7.5: PSN check, opcode sequence, length against the path MTU and
//! the RETH, R_Key/bounds/rights via `Memory::remote_write_on`, the MSN and expected PSN
//! advanced, an ACK queued when AckReq is set, the ACK delay armed), reached without the
//! general dispatch. Anything else (another state, a PSN out of sequence or duplicate, a
//! message in progress, an access error to NAK) is left unchanged to `handle_packet`.

use super::qp::Qp;
use super::resp_state::InMsg;
use super::types::QpState;
use crate::mem::access::{Access, KeyKind, MemRef, Memory};
use crate::time::Instant;
use crate::wire::bth::{pkey_match, BthRepr};
use crate::wire::opcode::Opcode;
use crate::wire::reth::RethRepr;

impl Qp {
    /// Executes the RC RDMA WRITE Only `bth` + `reth` + `payload` (checked by the frame
    /// layer, e.g. `wire::write_only::WriteOnlyFrame::predict`) if it is in sequence and
    /// executes cleanly; false, with nothing changed, for any packet `handle_packet` must see.
    #[inline(always)]
    pub fn handle_write_only(
        &mut self,
        now: Instant,
        bth: &BthRepr,
        reth: &RethRepr,
        payload: &[u8],
        mem: &mut dyn Memory,
    ) -> bool {
        let plen = payload.len();
        // `plen <= pmtu` also keeps the DMA length below `MAX_MSG_SIZE`.
        if self.state != QpState::Rts
            || bth.opcode != Opcode::RC_WRITE_ONLY
            || bth.dest_qp != self.config.qpn
            || !pkey_match(bth.pkey, self.attr.pkey)
            || bth.psn != self.resp.epsn
            || !matches!(self.resp.in_msg, InMsg::None)
            || plen == 0
            || plen > self.attr.pmtu.bytes() as usize
            || plen as u64 != u64::from(reth.dma_len)
            || !self.remote_ok(Access::REMOTE_WRITE)
        {
            return false;
        }
        let r = MemRef {
            kind: KeyKind::Remote,
            pd: self.config.pd,
            key: reth.rkey,
            addr: reth.va,
            len: plen as u32,
        };
        // Checks the key, its QP binding, bounds and rights before writing a byte; a refusal
        // is NAKed by the general path, which finds the same refusal.
        if mem.remote_write_on(&r, self.config.qpn, payload).is_err() {
            return false;
        }
        self.resp.note_request(now);
        self.stats.packets_received += 1;
        self.stats.bytes_received += plen as u64;
        self.resp.nak_sent = false;
        self.finish_message();
        self.advance(bth.psn, 1, bth.ack_req);
        true
    }
}
