//! IA attributes (DAT_IA_ATTR, `dat_ia_query`): the resource limits of this provider. EP
//! creation and modification enforce them (dat_ep_create(3DAT): attributes beyond them are
//! DAT_INVALID_PARAMETER, more EPs than `max_eps` DAT_INSUFFICIENT_RESOURCES).

use super::ia::Ia;
use std::net::IpAddr;

pub use super::limits::{
    async_evd_qlen, check_evd_qlen, check_lmr_length, DEFAULT_ASYNC_EVD_QLEN, MAX_DTO_PER_EP,
    MAX_EPS, MAX_EVD_QLEN, MAX_IOV_SEGMENTS, MAX_LMR_BLOCK_SIZE, MAX_PRIVATE_DATA_SIZE,
    MAX_RDMA_READ_PER_EP,
};

/// The limits and identity `dat_ia_query` reports (DAT_IA_ATTR of udat.h; the C layer copies
/// each field into the field of the same name). Counts are objects or work requests, sizes
/// bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IaAttr {
    /// DAT_IA_ATTR.adapter_name: "dpdk-roce" (the C layer appends the profile's name).
    pub adapter_name: &'static str,
    /// DAT_IA_ATTR.vendor_name: "dpdk-roce".
    pub vendor_name: &'static str,
    /// DAT_IA_ATTR.ia_address_ptr: the port's IPv4 address, what peers connect to.
    pub address: IpAddr,
    /// DAT_IA_ATTR.max_eps: EPs open at once on this IA ([`MAX_EPS`]); one more is
    /// DAT_INSUFFICIENT_RESOURCES (dat_ep_create(3DAT)).
    pub max_eps: u32,
    /// DAT_IA_ATTR.max_dto_per_ep: the largest `max_recv_dtos` / `max_request_dtos` an EP
    /// may ask for ([`MAX_DTO_PER_EP`]).
    pub max_dto_per_ep: u32,
    /// DAT_IA_ATTR.max_rdma_read_per_ep_in and `_out` (the C layer reports this one value
    /// for both): the largest `max_rdma_read_in` / `max_rdma_read_out` of an EP
    /// ([`MAX_RDMA_READ_PER_EP`]).
    pub max_rdma_read_per_ep: u32,
    /// DAT_IA_ATTR.max_evds: EVDs the IA reports it can create (not counted by the provider).
    pub max_evds: u32,
    /// DAT_IA_ATTR.max_evd_qlen: the largest EVD, in events ([`MAX_EVD_QLEN`]; a larger
    /// size is refused by [`check_evd_qlen`]).
    pub max_evd_qlen: u32,
    /// DAT_IA_ATTR.max_iov_segments_per_dto: LMR triplets of one send or receive (the
    /// transport's scatter/gather limit, 16).
    pub max_iov_segments_per_dto: u32,
    /// DAT_IA_ATTR.max_lmrs: memory regions the IA's registration table holds (its slot
    /// count, shared by LMRs and RMRs).
    pub max_lmrs: u32,
    /// DAT_IA_ATTR.max_lmr_block_size: the largest LMR, in bytes ([`MAX_LMR_BLOCK_SIZE`];
    /// the C layer reports at most `u32::MAX`, the width of udat.h's DAT_SEG_LENGTH field).
    pub max_lmr_block_size: u64,
    /// DAT_IA_ATTR.max_pzs: protection zones the IA reports it can create (not counted by
    /// the provider).
    pub max_pzs: u32,
    /// DAT_IA_ATTR.max_message_size: the largest send, in bytes (1 GiB).
    pub max_message_size: u32,
    /// DAT_IA_ATTR.max_rdma_size: the largest RDMA read or write, in bytes (1 GiB).
    pub max_rdma_size: u32,
    /// DAT_IA_ATTR.max_rmrs: memory windows, from the same registration table as
    /// [`IaAttr::max_lmrs`].
    pub max_rmrs: u32,
    /// DAT_IA_ATTR.max_srqs: shared receive queues the IA reports it can create (not counted
    /// by the provider).
    pub max_srqs: u32,
    /// DAT_IA_ATTR.max_ep_per_srq: EPs sharing one SRQ (at most every EP of the IA).
    pub max_ep_per_srq: u32,
    /// DAT_IA_ATTR.max_recv_per_srq: receives one SRQ holds (its `max_recv_dtos`, at most
    /// [`MAX_DTO_PER_EP`]).
    pub max_recv_per_srq: u32,
    /// DAT_IA_ATTR.max_iov_segments_per_rdma_read: LMR triplets an RDMA read scatters into.
    pub max_iov_segments_per_rdma_read: u32,
    /// DAT_IA_ATTR.max_iov_segments_per_rdma_write: LMR triplets an RDMA write gathers from.
    pub max_iov_segments_per_rdma_write: u32,
    /// DAT_IA_ATTR.max_rdma_read_in: RDMA reads and atomics outstanding as the target, per EP
    /// (the CM REQ's responder resources).
    pub max_rdma_read_in: u32,
    /// DAT_IA_ATTR.max_rdma_read_out: RDMA reads and atomics outstanding as the originator,
    /// per EP (the CM REQ's initiator depth).
    pub max_rdma_read_out: u32,
    /// DAT_PROVIDER_ATTR.max_private_data_size: [`MAX_PRIVATE_DATA_SIZE`].
    pub max_private_data_size: u32,
    /// DAT_IA_ATTR.max_lmr_virtual_address: any address of the process (an LMR is a slice
    /// of its memory).
    pub max_lmr_virtual_address: u64,
    /// DAT_IA_ATTR.max_rmr_target_address: any address inside the bound LMR.
    pub max_rmr_target_address: u64,
    /// DAT_IA_ATTR.max_rdma_read_per_ep_in_guaranteed and `_out_guaranteed`: an EP gets the
    /// RDMA read depths it asks for up to [`MAX_RDMA_READ_PER_EP`], not shared with others.
    pub max_rdma_read_per_ep_guaranteed: bool,
    /// DAT_IA_ATTR.zb_supported: zero-based virtual addresses for LMRs are not offered.
    pub zb_supported: bool,
}

impl Ia {
    /// dat_ia_query: the IA's attributes and limits.
    pub fn query(&self) -> IaAttr {
        let sge = MAX_IOV_SEGMENTS;
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
            max_lmr_block_size: MAX_LMR_BLOCK_SIZE,
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
            max_private_data_size: MAX_PRIVATE_DATA_SIZE,
            max_lmr_virtual_address: u64::MAX,
            max_rmr_target_address: u64::MAX,
            max_rdma_read_per_ep_guaranteed: true,
            zb_supported: false,
        }
    }
}
