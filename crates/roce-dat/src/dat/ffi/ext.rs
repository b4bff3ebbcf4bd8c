//! The IB extension operations (dat_ib_extensions.h) after dat-sys's shim unpacked the
//! `va_list`: RDMA write with immediate, compare-and-swap, fetch-and-add on an EP (their
//! completions are DAT_IB_DTO_EVENTs, [`super::event`]), and the counters of an IA or an EP
//! (dat_query_counters, dat_print_counters; [`crate::dat::counters`]).

use super::codes::{arg, guard, map};
use super::ep::{ep_of, post_with_flags};
use super::handles::{self, Kind};
use crate::dat::RmrTriplet;
use dat_sys as d;

/// Registers [`handler`] with the shim (idempotent).
pub(super) fn install() {
    // SAFETY: `handler` has the shim's handler signature and lives for the process.
    unsafe { d::shim_dat_set_extension_handler(Some(handler)) };
}

unsafe extern "C" fn handler(
    handle: d::DAT_HANDLE,
    args: *const d::shim_dat_ext_args,
) -> d::DAT_RETURN {
    guard(|| {
        if args.is_null() {
            return Err(arg(2));
        }
        // SAFETY: the shim passes its unpacked arguments, valid for this call.
        let a = unsafe { args.read() };
        if matches!(
            a.op,
            d::DAT_IB_QUERY_COUNTERS_OP | d::DAT_IB_PRINT_COUNTERS_OP
        ) {
            // SAFETY: `p_cntrs_out`, dat_ib_query_counters (dat_ib_extensions.h): room for the
            // counters `cntr` names (the entry's contract; the shim passes it on).
            return unsafe { counters(handle, &a) };
        }
        let o = handles::get(handle, Kind::Ep)?;
        let e = ep_of(&o)?;
        // The argument numbers of the dat_ib_extensions.h macros (the handle is 1): the
        // count (write immediate only: atomics take one triplet), the local IOV, the remote
        // triplet and the flags.
        let (count_arg, remote_arg, flags_arg) = match a.op {
            d::DAT_IB_RDMA_WRITE_IMMED_OP => (2, 5, 7),
            d::DAT_IB_CMP_AND_SWAP_OP => (3, 6, 7),
            d::DAT_IB_FETCH_AND_ADD_OP => (2, 5, 6),
            _ => return Err(d::DAT_NOT_IMPLEMENTED),
        };
        if a.remote_iov.is_null() {
            return Err(arg(remote_arg));
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
        // A bad count is `count_arg`, a NULL local IOV the argument after it.
        // SAFETY: `lbuf` of the dat_ib_post_* macros (dat_ib_extensions.h): `n` readable
        // triplets (the entry's contract; the shim passes it on).
        let local = unsafe { super::ep::triplets(n, a.local_iov, count_arg) }?;
        // SAFETY: 64 bits of consumer data.
        let cookie = unsafe { a.cookie.as_64 };
        post_with_flags(e, a.flags, flags_arg, |ep, f| match a.op {
            d::DAT_IB_RDMA_WRITE_IMMED_OP => {
                ep.post_rdma_write_imm_with(&local, &remote, a.immed_data, cookie, f)
            }
            d::DAT_IB_CMP_AND_SWAP_OP => {
                ep.post_cmp_and_swap_with(a.add_or_cmp, a.swap, &local[0], &remote, cookie, f)
            }
            _ => ep.post_fetch_add_with(a.add_or_cmp, &local[0], &remote, cookie, f),
        })
    })
}

/// The counters of `handle` (an IA or an EP) in `DCNT_*` order, as many as the kind has.
fn counter_values(handle: d::DAT_HANDLE, reset: bool) -> Result<Vec<u64>, u32> {
    let o = handles::get_any(handle)?;
    match o.kind {
        Kind::Ep => {
            let c = ep_of(&o)?.ep.counters(reset);
            let mut v = vec![0u64; d::DCNT_EP_ALL_COUNTERS as usize];
            for (i, n) in [
                (d::DCNT_EP_CONNECT, c.connect),
                (d::DCNT_EP_DISCONNECT, c.disconnect),
                (d::DCNT_EP_POST_SEND, c.post_send),
                (d::DCNT_EP_POST_SEND_DATA, c.post_send_data),
                (d::DCNT_EP_POST_RECV, c.post_recv),
                (d::DCNT_EP_POST_RECV_DATA, c.post_recv_data),
                (d::DCNT_EP_POST_WRITE, c.post_write),
                (d::DCNT_EP_POST_WRITE_DATA, c.post_write_data),
                (d::DCNT_EP_POST_WRITE_IMM, c.post_write_imm),
                (d::DCNT_EP_POST_WRITE_IMM_DATA, c.post_write_imm_data),
                (d::DCNT_EP_POST_READ, c.post_read),
                (d::DCNT_EP_POST_READ_DATA, c.post_read_data),
                (d::DCNT_EP_POST_CMP_SWAP, c.post_cmp_swap),
                (d::DCNT_EP_POST_FETCH_ADD, c.post_fetch_add),
                (d::DCNT_EP_RECV, c.recv),
                (d::DCNT_EP_RECV_DATA, c.recv_data),
                (d::DCNT_EP_RECV_IMM, c.recv_imm),
                (d::DCNT_EP_RECV_IMM_DATA, c.recv_imm_data),
                (d::DCNT_EP_RECV_RDMA_IMM, c.recv_rdma_imm),
                (d::DCNT_EP_RECV_RDMA_IMM_DATA, c.recv_rdma_imm_data),
            ] {
                v[i as usize] = n;
            }
            Ok(v)
        }
        Kind::Ia => {
            let c = {
                let g = o.ia.ia();
                let ia = g.as_ref().ok_or(Kind::Ia.invalid())?;
                ia.counters(reset).map_err(|err| map(&err, 0))?
            };
            let mut v = vec![0u64; d::DCNT_IA_ALL_COUNTERS as usize];
            for (i, n) in [
                (d::DCNT_IA_PZ_CREATE, c.pz_create),
                (d::DCNT_IA_PZ_FREE, c.pz_free),
                (d::DCNT_IA_LMR_CREATE, c.lmr_create),
                (d::DCNT_IA_LMR_FREE, c.lmr_free),
                (d::DCNT_IA_RMR_CREATE, c.rmr_create),
                (d::DCNT_IA_RMR_FREE, c.rmr_free),
                (d::DCNT_IA_PSP_CREATE, c.psp_create),
                (d::DCNT_IA_PSP_FREE, c.psp_free),
                (d::DCNT_IA_RSP_CREATE, c.rsp_create),
                (d::DCNT_IA_RSP_FREE, c.rsp_free),
                (d::DCNT_IA_EVD_CREATE, c.evd_create),
                (d::DCNT_IA_EVD_FREE, c.evd_free),
                (d::DCNT_IA_EP_CREATE, c.ep_create),
                (d::DCNT_IA_EP_FREE, c.ep_free),
                (d::DCNT_IA_SRQ_CREATE, c.srq_create),
                (d::DCNT_IA_SRQ_FREE, c.srq_free),
                (d::DCNT_IA_SP_CR, c.cr),
                (d::DCNT_IA_SP_CR_ACCEPTED, c.cr_accepted),
                (d::DCNT_IA_SP_CR_REJECTED, c.cr_rejected),
                (d::DCNT_IA_CM_REQ_TX, c.req_tx),
                (d::DCNT_IA_CM_REQ_RX, c.req_rx),
                (d::DCNT_IA_CM_REP_TX, c.rep_tx),
                (d::DCNT_IA_CM_REP_RX, c.rep_rx),
                (d::DCNT_IA_CM_RTU_TX, c.rtu_tx),
                (d::DCNT_IA_CM_RTU_RX, c.rtu_rx),
                (d::DCNT_IA_CM_USER_REJ_TX, c.rej_tx),
                (d::DCNT_IA_CM_USER_REJ_RX, c.rej_rx),
                (d::DCNT_IA_CM_ACTIVE_EST, c.active_est),
                (d::DCNT_IA_CM_PASSIVE_EST, c.passive_est),
                (d::DCNT_IA_CM_DREQ_TX, c.dreq_tx),
                (d::DCNT_IA_CM_DREQ_RX, c.dreq_rx),
                (d::DCNT_IA_CM_DREP_TX, c.drep_tx),
                (d::DCNT_IA_CM_DREP_RX, c.drep_rx),
                (d::DCNT_IA_CM_MRA_TX, c.mra_tx),
                (d::DCNT_IA_CM_MRA_RX, c.mra_rx),
                (d::DCNT_IA_CM_ERR, c.cm_err()),
                (d::DCNT_IA_CM_ERR_UNEXPECTED, c.unexpected),
            ] {
                v[i as usize] = n;
            }
            Ok(v)
        }
        // This provider keeps no EVD counters (nor does the OFA one without DAPL_COUNTERS).
        Kind::Evd => Err(d::DAT_NOT_IMPLEMENTED),
        k => Err(k.invalid()),
    }
}

/// dat_query_counters / dat_print_counters: one counter (`DCNT_*` index) or all
/// (`DCNT_*_ALL_COUNTERS`: the whole array), zeroed afterwards when `reset` is set.
///
/// # Safety
/// For DAT_IB_QUERY_COUNTERS_OP, `a.counters_out` is NULL or valid for writes of the counters
/// `a.counter` names (one `u64`, or the kind's `DCNT_*_ALL_COUNTERS`) for the duration of the
/// call.
unsafe fn counters(handle: d::DAT_HANDLE, a: &d::shim_dat_ext_args) -> Result<(), u32> {
    let v = counter_values(handle, a.reset != 0)?;
    let all = a.counter as usize == v.len();
    if a.counter < 0 || (a.counter as usize > v.len()) {
        return Err(arg(3));
    }
    let picked: &[u64] = if all {
        &v
    } else {
        &v[a.counter as usize..=a.counter as usize]
    };
    if a.op == d::DAT_IB_QUERY_COUNTERS_OP {
        if a.counters_out.is_null() {
            return Err(arg(4));
        }
        // SAFETY: room for one counter or all of the kind's (`picked`) at `counters_out` (this
        // fn's contract), non-NULL (checked above).
        unsafe { core::ptr::copy_nonoverlapping(picked.as_ptr(), a.counters_out, picked.len()) };
    } else {
        let first = if all { 0 } else { a.counter as usize };
        for (i, n) in picked.iter().enumerate() {
            println!("dpdk-roce counter {} = {n}", first + i);
        }
    }
    Ok(())
}

/// The handler as the shim calls it (tests).
///
/// # Safety
/// `args` is NULL or points at an argument block readable for the call whose pointers are
/// valid as its operation's dat_ib_extensions.h macro requires (the shim's contract); `handle`
/// may be anything (handles are looked up, never dereferenced).
#[cfg(test)]
pub(super) unsafe fn handler_for_tests(
    handle: d::DAT_HANDLE,
    args: *const d::shim_dat_ext_args,
) -> d::DAT_RETURN {
    // SAFETY: this fn's contract is the handler's.
    unsafe { handler(handle, args) }
}
