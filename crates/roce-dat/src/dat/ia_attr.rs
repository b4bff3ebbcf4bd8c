//! IA attributes (DAT_IA_ATTR, `dat_ia_query`): the resource limits of this provider. EP
//! creation and modification enforce them (dat_ep_create(3DAT): attributes beyond them are
//! DAT_INVALID_PARAMETER, more EPs than `max_eps` DAT_INSUFFICIENT_RESOURCES).

use super::error::DatError;
use super::ia::Ia;
use crate::transport::types::MAX_SGE;
use std::net::IpAddr;

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

/// EPs of one IA at most.
pub const MAX_EPS: u32 = 16_384;
/// LMR triplets of one work request at most (the transport's scatter/gather limit):
/// `max_iov_segments_per_dto` and the RDMA read/write IOV limits.
pub const MAX_IOV_SEGMENTS: u32 = MAX_SGE as u32;
/// Outstanding DTOs per EP and direction at most.
pub const MAX_DTO_PER_EP: u32 = 16_384;
/// Outstanding RDMA reads / atomics per EP and direction at most.
pub const MAX_RDMA_READ_PER_EP: u32 = 16;
/// Events one EVD holds at most (its ring is allocated whole at creation).
pub const MAX_EVD_QLEN: u32 = 1 << 16;
/// The async EVD's size when the consumer asks for less (dat_ia_open's `async_evd_min_qlen`
/// is a minimum).
pub const DEFAULT_ASYNC_EVD_QLEN: usize = 1024;
/// dat_ia_open: the async EVD's size for `async_evd_min_qlen` = `min_qlen` (a minimum, so at
/// least [`DEFAULT_ASYNC_EVD_QLEN`]); DAT_INVALID_PARAMETER of argument 2 outside
/// 1..=[`MAX_EVD_QLEN`], as for any EVD (the OFA provider refuses a length below 1 too).
pub fn async_evd_qlen(min_qlen: i64) -> Result<usize, DatError> {
    let qlen = usize::try_from(min_qlen)
        .ok()
        .filter(|&q| q >= 1 && q <= MAX_EVD_QLEN as usize)
        .ok_or(DatError::InvalidArg {
            arg: 2,
            what: "async_evd_min_qlen outside 1..=max_evd_qlen",
        })?;
    Ok(qlen.max(DEFAULT_ASYNC_EVD_QLEN))
}
/// dat_evd_create(3DAT) / dat_evd_resize(3DAT): an EVD holds 1..=[`MAX_EVD_QLEN`] events
/// ("evd_min_qlen ... must not exceed max_evd_qlen"); else DAT_INVALID_PARAMETER of argument
/// `arg`.
pub fn check_evd_qlen(qlen: usize, arg: u8) -> Result<(), DatError> {
    if qlen == 0 || qlen > MAX_EVD_QLEN as usize {
        return Err(DatError::InvalidArg {
            arg,
            what: "EVD size outside 1..=max_evd_qlen",
        });
    }
    Ok(())
}

/// The largest LMR, in bytes: what the registration table addresses (a region is a Rust
/// slice, at most `isize::MAX` bytes). An LMR is not bounded by the largest message: a post
/// moves part of it.
pub const MAX_LMR_BLOCK_SIZE: u64 = isize::MAX as u64;

/// dat_lmr_create(3DAT): DAT_LENGTH_ERROR for a length "beyond the provider's limits",
/// 1..=[`MAX_LMR_BLOCK_SIZE`] (dapltest's fft mem case 2 registers 0 bytes and expects
/// exactly this). The length as a `usize`.
pub fn check_lmr_length(length: u64) -> Result<usize, DatError> {
    if length == 0 || length > MAX_LMR_BLOCK_SIZE {
        return Err(DatError::LengthError(
            "LMR length outside 1..=max_lmr_block_size",
        ));
    }
    usize::try_from(length)
        .map_err(|_| DatError::LengthError("LMR length beyond the address space"))
}

/// The largest private data of dat_ep_connect, dat_ep_dup_connect, dat_cr_accept and
/// dat_cr_reject, in bytes: the 92 of an IB CM REQ (IBTA vol. 1 §12.6.5) less the 36-byte
/// IP CM header in front of it (annex A11.6). One limit for every call, as dat_ia_query
/// reports one.
pub const MAX_PRIVATE_DATA_SIZE: u32 = crate::cm::ip_cm::IP_CM_REQ_USER_LEN as u32;

/// Private data longer than [`MAX_PRIVATE_DATA_SIZE`]: DAT_INVALID_PARAMETER naming `arg`,
/// the call's `private_data_size`.
pub(crate) fn check_private_data(data: &[u8], arg: u8) -> Result<(), DatError> {
    if data.len() > MAX_PRIVATE_DATA_SIZE as usize {
        return Err(DatError::InvalidArg {
            arg,
            what: "private data longer than max_private_data_size",
        });
    }
    Ok(())
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
