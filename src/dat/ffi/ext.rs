//! The IB extension operations (dat_ib_extensions.h) after dat-sys's shim unpacked the
//! `va_list`: RDMA write with immediate, compare-and-swap, fetch-and-add on an EP. Their
//! completions are DAT_IB_DTO_EVENTs ([`super::event`]).

use super::codes::{arg, guard};
use super::ep::{ep_of, post_request};
use super::handles::{self, Kind};
use super::objects::Tag;
use crate::dat::{LmrTriplet, RmrTriplet};
use dat_sys as d;

/// Registers [`handler`] with the shim (idempotent).
pub(super) fn install() {
    // SAFETY: `handler` has the shim's handler signature and lives for the process.
    unsafe { d::shim_dat_set_extension_handler(Some(handler)) };
}

extern "C" fn handler(handle: d::DAT_HANDLE, args: *const d::shim_dat_ext_args) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(handle, Kind::Ep)?;
        let e = ep_of(&o)?;
        if args.is_null() {
            return Err(arg(2));
        }
        // SAFETY: the shim passes its unpacked arguments, valid for this call.
        let a = unsafe { args.read() };
        if a.remote_iov.is_null() {
            return Err(arg(5));
        }
        // SAFETY: non-NULL consumer RMR triplet.
        let r = unsafe { a.remote_iov.read() };
        let remote = RmrTriplet {
            rmr_context: r.rmr_context,
            target_address: r.virtual_address,
            segment_length: r.segment_length,
        };
        let n = if a.op == d::DAT_IB_RDMA_WRITE_IMMED_OP {
            a.segments
        } else {
            1
        };
        if n < 0 || n > e.attr().max_request_iov {
            return Err(arg(3));
        }
        if n > 0 && a.local_iov.is_null() {
            return Err(arg(4));
        }
        let local: Vec<LmrTriplet> = if n == 0 {
            Vec::new()
        } else {
            // SAFETY: `n` consumer triplets at local_iov (the extension macros' contract).
            unsafe { core::slice::from_raw_parts(a.local_iov, n as usize) }
                .iter()
                .map(|t| LmrTriplet {
                    lmr_context: t.lmr_context,
                    virtual_address: t.virtual_address,
                    segment_length: t.segment_length,
                })
                .collect()
        };
        // SAFETY: 64 bits of consumer data.
        let cookie = unsafe { a.cookie.as_64 };
        match a.op {
            d::DAT_IB_RDMA_WRITE_IMMED_OP => post_request(
                e,
                cookie,
                a.flags,
                7,
                Some(Tag::WriteImm { suppress: false }),
                |ep| ep.post_rdma_write_imm(&local, &remote, a.immed_data, cookie),
            ),
            d::DAT_IB_CMP_AND_SWAP_OP => post_request(e, cookie, a.flags, 7, None, |ep| {
                ep.post_cmp_and_swap(a.add_or_cmp, a.swap, &local[0], &remote, cookie)
            }),
            d::DAT_IB_FETCH_AND_ADD_OP => post_request(e, cookie, a.flags, 6, None, |ep| {
                ep.post_fetch_add(a.add_or_cmp, &local[0], &remote, cookie)
            }),
            _ => Err(d::DAT_NOT_IMPLEMENTED),
        }
    })
}

/// The handler as the shim calls it (tests).
#[cfg(test)]
pub(super) fn handler_for_tests(
    handle: d::DAT_HANDLE,
    args: *const d::shim_dat_ext_args,
) -> d::DAT_RETURN {
    handler(handle, args)
}
