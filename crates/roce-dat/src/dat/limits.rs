//! The resource limits of this provider and the checks that enforce them: what
//! `dat_ia_query` reports ([`IaAttr`](super::IaAttr)) and what dat_ep_create(3DAT),
//! dat_evd_create(3DAT), dat_lmr_create(3DAT) and the calls that carry private data refuse
//! beyond them.

use super::error::DatError;
use crate::transport::types::MAX_SGE;

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
