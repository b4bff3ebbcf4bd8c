//! The IA's record of a bound memory window (dat_rmr_bind(3DAT)), by its `rmr_context`: the
//! LMR range, rights and scope EP that dat_ep_post_rdma_read_to_rmr resolves it to.

use super::ep::EpInner;
use super::triplet::LmrTriplet;
use crate::mem::access::Access;
use std::sync::Weak;

/// What a bound RMR's `rmr_context` resolves to for dat_ep_post_rdma_read_to_rmr: the bound
/// range of its LMR, the RMR's rights and the EP it is confined to, if any.
#[derive(Clone, Debug)]
pub(crate) struct WindowSink {
    /// The window's own L_Key (to see whether the R_Key is still valid).
    pub window_lkey: u32,
    pub pz_id: u32,
    pub triplet: LmrTriplet,
    pub access: Access,
    pub ep: Option<Weak<EpInner>>,
}
