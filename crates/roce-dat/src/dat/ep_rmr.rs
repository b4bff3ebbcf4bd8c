//! EP posts that name an RMR of this side (DAT 2.0): dat_ep_post_send_with_invalidate (the
//! peer's RMR is invalidated on arrival, IBTA vol. 1 §9.4.1.1.1: SEND Last/Only with
//! Invalidate carrying the R_Key in an IETH) and dat_ep_post_rdma_read_to_rmr (the read's
//! local sink is an RMR triplet instead of LMR segments).

use super::ep::Ep;
use super::ep_attr::CompletionFlags;
use super::error::{AccessKind, DatError};
use super::triplet::{LmrTriplet, RmrTriplet};
use crate::mem::access::Access;
use crate::transport::types::SendOp;
use std::sync::Arc;

impl Ep {
    /// dat_ep_post_send_with_invalidate with `invalidate` = TRUE: a send whose arrival
    /// invalidates `rmr_context` at the peer (the peer's receive completion names it:
    /// [`DtoEvent::invalidated_rmr`](super::evd::DtoEvent::invalidated_rmr)). A context the peer
    /// cannot invalidate (unknown, of another PZ, already dead, or an LMR's own context: only
    /// memory windows can be invalidated) makes the peer answer with an Invalid Request NAK:
    /// this send completes in error and the connection breaks (IBTA vol. 1 §9.7.5.2.2).
    pub fn post_send_with_invalidate(
        &self,
        local: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
        rmr_context: u32,
    ) -> Result<(), DatError> {
        self.post_request(
            SendOp::SendWithInv { rkey: rmr_context },
            local,
            cookie,
            flags,
            5,
        )
    }

    /// dat_ep_post_rdma_read_to_rmr: reads `remote` into the range `local` of an RMR of this
    /// IA bound now. `local.rmr_context` resolves to the RMR's binding: the range must lie
    /// inside it (DAT_LENGTH_ERROR otherwise), the RMR must grant remote write — the read
    /// response is written into it as an RDMA write would be (DAT_PRIVILEGES_VIOLATION
    /// otherwise), an RMR of dat_rmr_create_for_ep only serves its own EP and the RMR's PZ is
    /// the EP's (DAT_PROTECTION_VIOLATION otherwise). The data lands in the bound LMR, which
    /// the RMR keeps registered; an unknown or unbound context is DAT_INVALID_PARAMETER
    /// (argument 2).
    pub fn post_rdma_read_to_rmr(
        &self,
        local: &RmrTriplet,
        remote: &RmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        let ia = self.inner.ia().clone();
        let sink = ia.lock_windows().get(&local.rmr_context).cloned();
        let bad = DatError::InvalidArg {
            arg: 2,
            what: "not the context of a bound RMR of this IA",
        };
        let Some(sink) = sink else {
            return Err(bad);
        };
        if !matches!(ia.mem.query(sink.window_lkey), Ok(i) if i.rkey == Some(local.rmr_context)) {
            // Unbound or invalidated meanwhile.
            return Err(bad);
        }
        if let Some(own) = &sink.ep {
            if !core::ptr::eq(own.as_ptr(), Arc::as_ptr(&self.inner)) {
                return Err(DatError::ProtectionViolation(AccessKind::Write));
            }
        }
        if self.inner.lock().pz.pz.id() != sink.pz_id {
            return Err(DatError::ProtectionViolation(AccessKind::Write));
        }
        if !sink.access.contains(Access::REMOTE_WRITE) {
            return Err(DatError::PrivilegesViolation(AccessKind::Write));
        }
        let start = sink.triplet.virtual_address;
        let end = start + u64::from(sink.triplet.segment_length);
        let want_end = local
            .target_address
            .checked_add(u64::from(local.segment_length));
        if local.target_address < start || want_end.is_none_or(|e| e > end) {
            return Err(DatError::LengthError("range outside the RMR's binding"));
        }
        let into = LmrTriplet {
            lmr_context: sink.triplet.lmr_context,
            virtual_address: local.target_address,
            segment_length: local.segment_length,
        };
        let op = SendOp::Read {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
        };
        self.post_request(op, std::slice::from_ref(&into), cookie, flags, 5)
    }
}
