//! IA attributes (DAT_IA_ATTR, `dat_ia_query`): the resource limits of this provider. EP
//! creation and modification enforce them (dat_ep_create(3DAT): attributes beyond them are
//! DAT_INVALID_PARAMETER, more EPs than `max_eps` DAT_INSUFFICIENT_RESOURCES).

use super::ia::Ia;
use crate::transport::types::MAX_SGE;
use std::net::Ipv4Addr;

/// The limits and identity `dat_ia_query` reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IaAttr {
    pub adapter_name: &'static str,
    pub vendor_name: &'static str,
    pub address: Ipv4Addr,
    pub max_eps: u32,
    pub max_dto_per_ep: u32,
    pub max_rdma_read_per_ep: u32,
    pub max_evds: u32,
    pub max_evd_qlen: u32,
    pub max_iov_segments_per_dto: u32,
    pub max_lmrs: u32,
    pub max_lmr_block_size: u64,
    pub max_pzs: u32,
    pub max_message_size: u32,
    pub max_rdma_size: u32,
    pub max_rmrs: u32,
    pub max_srqs: u32,
    pub max_ep_per_srq: u32,
    pub max_recv_per_srq: u32,
    pub max_iov_segments_per_rdma_read: u32,
    pub max_iov_segments_per_rdma_write: u32,
    pub max_rdma_read_in: u32,
    pub max_rdma_read_out: u32,
    /// Largest private data of a connection request (the IB CM REQ's after the rdma_cm IP
    /// header).
    pub max_private_data_size: u32,
}

/// EPs of one IA at most.
pub const MAX_EPS: u32 = 16_384;
/// Outstanding DTOs per EP and direction at most.
pub const MAX_DTO_PER_EP: u32 = 16_384;
/// Outstanding RDMA reads / atomics per EP and direction at most.
pub const MAX_RDMA_READ_PER_EP: u32 = 16;
/// Events one EVD holds at most (its ring is allocated whole at creation).
pub const MAX_EVD_QLEN: u32 = 1 << 16;

impl Ia {
    /// dat_ia_query: the IA's attributes and limits.
    pub fn query(&self) -> IaAttr {
        let sge = MAX_SGE as u32;
        let msg = crate::transport::MAX_MSG_SIZE;
        IaAttr {
            adapter_name: "dpdk-roce",
            vendor_name: "dpdk-roce",
            address: self.address(),
            max_eps: MAX_EPS,
            max_dto_per_ep: MAX_DTO_PER_EP,
            max_rdma_read_per_ep: MAX_RDMA_READ_PER_EP,
            max_evds: 65_536,
            max_evd_qlen: MAX_EVD_QLEN,
            max_iov_segments_per_dto: sge,
            max_lmrs: self.inner.mem.capacity(),
            max_lmr_block_size: u64::from(msg),
            max_pzs: 65_536,
            max_message_size: msg,
            max_rdma_size: msg,
            max_rmrs: self.inner.mem.capacity(),
            max_srqs: 65_536,
            max_ep_per_srq: MAX_EPS,
            max_recv_per_srq: MAX_DTO_PER_EP,
            max_iov_segments_per_rdma_read: sge,
            max_iov_segments_per_rdma_write: sge,
            max_rdma_read_in: MAX_RDMA_READ_PER_EP,
            max_rdma_read_out: MAX_RDMA_READ_PER_EP,
            max_private_data_size: crate::cm::ip_cm::IP_CM_REQ_USER_LEN as u32,
        }
    }
}
