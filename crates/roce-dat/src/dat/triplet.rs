//! The LMR and RMR triplets (DAT_LMR_TRIPLET, DAT_RMR_TRIPLET): the local segments of a
//! DTO's IOV and the remote range of an RDMA operation, as DTOs, SRQs and RMR binds take them.

/// An LMR triplet (DAT_LMR_TRIPLET): local memory of a DTO, one segment of its IOV. It must
/// lie inside the LMR `lmr_context` names ([`Lmr::triplet`](super::Lmr::triplet) makes one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LmrTriplet {
    /// The LMR's L_Key ([`Lmr::lmr_context`](super::Lmr::lmr_context)).
    pub lmr_context: u32,
    /// Start of the segment in the LMR's address space ([`Lmr::address`](super::Lmr::address)
    /// plus an offset).
    pub virtual_address: u64,
    /// Length of the segment, in bytes.
    pub segment_length: u32,
}

/// An RMR triplet (DAT_RMR_TRIPLET): remote memory of an RDMA operation, as the peer
/// advertised it ([`Lmr::rmr_triplet`](super::Lmr::rmr_triplet) makes one on the peer's side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmrTriplet {
    /// The peer's R_Key: the `rmr_context` of its LMR or of an RMR bound over it.
    pub rmr_context: u32,
    /// Start of the range in the peer's address space (DAT 2.0 `virtual_address`; DAT 1.x
    /// called it `target_address`).
    pub target_address: u64,
    /// Length of the range, in bytes.
    pub segment_length: u32,
}
