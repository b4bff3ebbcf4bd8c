//! DAT_PROVIDER_ATTR (dat_ia_query(3DAT)): what this provider supports, one fact each. The C
//! layer only copies it into dat.h's structure (with the IA name and the provider-specific
//! attributes, which are the C registry's).

use super::ep_attr::CompletionFlags;
use super::ia::Ia;
use super::limits::MAX_PRIVATE_DATA_SIZE;

/// What [`Ia::provider_attr`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProviderAttr {
    /// provider_version_major / _minor.
    pub provider_version: (u32, u32),
    /// dapl_version_major / _minor: the DAT API version implemented (2.0).
    pub dapl_version: (u32, u32),
    /// completion_flags_supported: every flag a post takes (`CompletionFlags`; any other
    /// bit is DAT_INVALID_PARAMETER).
    pub completion_flags_supported: CompletionFlags,
    /// max_private_data_size: the IP CM's REQ private data after its header.
    pub max_private_data_size: u32,
    /// is_thread_safe: false, as the dat.conf line says (`nonthreadsafe`).
    pub thread_safe: bool,
    /// supports_multipath: one port, one path.
    pub supports_multipath: bool,
    /// ep_creator: DAT_PSP_CREATES_EP_IFASKED when true (`PspFlag::Provider`), else
    /// DAT_PSP_CREATES_EP_NEVER.
    pub provider_creates_eps_if_asked: bool,
    /// pz_support: DAT_PZ_UNIQUE (an EP, LMR or SRQ belongs to one PZ).
    pub pz_unique: bool,
    /// optimal_buffer_alignment: a cache line.
    pub optimal_buffer_alignment: u32,
    /// srq_supported.
    pub srq_supported: bool,
    /// srq_watermarks_supported: dat_srq_set_lw and dat_ep_set_watermark.
    pub srq_watermarks_supported: bool,
    /// srq_ep_pz_difference_supported: an EP and its SRQ share a PZ (`Ep::create` refuses
    /// another).
    pub srq_ep_pz_difference_supported: bool,
    /// srq_info_supported: dat_srq_query's counts are always known.
    pub srq_info_supported: bool,
    /// ep_recv_info_supported: dat_ep_recv_query's counts are always known.
    pub ep_recv_info_supported: bool,
    /// lmr_sync_req: registered memory is the consumer's memory; no dat_lmr_sync_rdma_* is
    /// needed.
    pub lmr_sync_req: bool,
    /// dto_async_return_guaranteed: a post may complete before it returns.
    pub dto_async_return_guaranteed: bool,
    /// rdma_write_for_rdma_read_req: an RDMA READ's local buffer needs no RDMA write right.
    pub rdma_write_for_rdma_read_req: bool,
    /// rdma_read_lmr_rmr_context_exposure: an RDMA READ exposes no context.
    pub rdma_read_lmr_rmr_context_exposure: bool,
    /// rmr_scope_supported: DAT_RMR_SCOPE_ANY (an RMR context is valid on any EP of the PZ).
    pub rmr_scope_any: bool,
    /// is_signal_safe.
    pub signal_safe: bool,
    /// ha_supported: no high-availability failover.
    pub ha_supported: bool,
}

/// This provider's attributes.
pub const PROVIDER_ATTR: ProviderAttr = ProviderAttr {
    provider_version: (0, 1),
    dapl_version: (2, 0),
    completion_flags_supported: CompletionFlags::all(),
    max_private_data_size: MAX_PRIVATE_DATA_SIZE,
    thread_safe: false,
    supports_multipath: false,
    provider_creates_eps_if_asked: true,
    pz_unique: true,
    optimal_buffer_alignment: 64,
    srq_supported: true,
    srq_watermarks_supported: true,
    srq_ep_pz_difference_supported: false,
    srq_info_supported: true,
    ep_recv_info_supported: true,
    lmr_sync_req: false,
    dto_async_return_guaranteed: false,
    rdma_write_for_rdma_read_req: false,
    rdma_read_lmr_rmr_context_exposure: false,
    rmr_scope_any: true,
    signal_safe: false,
    ha_supported: false,
};

impl Ia {
    /// dat_ia_query's DAT_PROVIDER_ATTR.
    pub fn provider_attr(&self) -> ProviderAttr {
        PROVIDER_ATTR
    }
}

/// The multipath a connection asks for (dat_ep_connect's DAT_CONNECT_FLAGS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Multipath {
    /// DAT_CONNECT_DEFAULT_FLAG.
    None,
    /// DAT_CONNECT_MULTIPATH_FLAG (REQUESTED): a hint; one path serves.
    Requested,
    /// DAT_CONNECT_MULTIPATH_REQUIRED_FLAG.
    Required,
}

impl Multipath {
    /// Whether this provider can connect so: a required multipath needs
    /// [`ProviderAttr::supports_multipath`] (else DAT_MODEL_NOT_SUPPORTED); a requested one is
    /// a hint, served by one path.
    pub fn check(self) -> Result<(), super::DatError> {
        match self {
            Multipath::Required if !PROVIDER_ATTR.supports_multipath => Err(
                super::DatError::ModelNotSupported("multipath required: one port, one path"),
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Multipath;

    #[test]
    fn only_a_required_multipath_is_refused() {
        assert!(Multipath::None.check().is_ok());
        assert!(Multipath::Requested.check().is_ok());
        let e = Multipath::Required.check().unwrap_err();
        assert_eq!(e.dat_type(), dat_sys::DAT_MODEL_NOT_SUPPORTED);
    }
}
