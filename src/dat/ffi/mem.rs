//! Protection zones, LMRs (consumer memory, `DAT_MEM_TYPE_VIRTUAL`, registered as is through
//! `MrTable::register_raw`), LMR sync, and RMRs.

use super::codes::{arg, err, guard, map, nonnull, put};
use super::handles::{self, Kind};
use super::objects::{Body, LmrObj, RmrObj};
use super::state::lock;
use crate::dat::{Lmr, Pz};
use crate::transport::memory::Access;
use dat_sys as d;
use std::sync::Arc;

pub(super) extern "C" fn pz_create(
    ia: d::DAT_IA_HANDLE,
    out: *mut d::DAT_PZ_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        nonnull(out, 2)?;
        let pz = {
            let g = ia.ia.ia();
            let ia_ref = g.as_ref().ok_or(Kind::Ia.invalid())?;
            Pz::create(ia_ref).map_err(|e| map(&e, 0))?
        };
        let o = handles::insert(ia.ia.provider(), Kind::Pz, ia.ia.clone(), |_| Body::Pz(pz));
        put(out, 2, o.handle as d::DAT_PZ_HANDLE)
    })
}

pub(super) extern "C" fn pz_query(
    pz: d::DAT_PZ_HANDLE,
    _mask: d::DAT_PZ_PARAM_MASK,
    param: *mut d::DAT_PZ_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(pz, Kind::Pz)?;
        put(
            param,
            3,
            d::DAT_PZ_PARAM {
                ia_handle: o.ia.handle() as d::DAT_IA_HANDLE,
            },
        )
    })
}

pub(super) extern "C" fn pz_free(pz: d::DAT_PZ_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(pz, Kind::Pz)?;
        let Body::Pz(p) = &o.body else {
            return Err(Kind::Pz.invalid());
        };
        if Arc::strong_count(&p.inner) > 1 {
            return Err(err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_PZ_IN_USE));
        }
        handles::remove(o.handle);
        Ok(())
    })
}

/// DAT_IB_MEM_PRIV_REMOTE_ATOMIC (dat_ib_extensions.h: the first DAT_MEM_PRIV extension bit):
/// remote compare-and-swap / fetch-and-add on the region (IB verbs' REMOTE_ATOMIC access).
const IB_MEM_PRIV_REMOTE_ATOMIC: u32 = d::DAT_MEM_PRIV_EXTENSION_BASE;

/// Every privilege flag an LMR may ask for: DAT's and the IB extension's.
const MEM_PRIV_KNOWN: u32 = d::DAT_MEM_PRIV_ALL_FLAG | IB_MEM_PRIV_REMOTE_ATOMIC;

/// DAT_MEM_PRIV_* to the table's access rights (local read is always granted).
fn access_of(privs: u32) -> Access {
    let mut a = Access::LOCAL_READ;
    if privs & d::DAT_MEM_PRIV_LOCAL_WRITE_FLAG != 0 {
        a |= Access::LOCAL_WRITE;
    }
    if privs & d::DAT_MEM_PRIV_REMOTE_READ_FLAG != 0 {
        a |= Access::REMOTE_READ;
    }
    if privs & d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG != 0 {
        a |= Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    }
    if privs & IB_MEM_PRIV_REMOTE_ATOMIC != 0 {
        a |= Access::REMOTE_ATOMIC;
    }
    a
}

/// dat_lmr_create of `DAT_MEM_TYPE_VIRTUAL` memory (the only type offered, as ia_query says).
#[allow(clippy::too_many_arguments)]
pub(super) extern "C" fn lmr_create(
    ia: d::DAT_IA_HANDLE,
    mem_type: d::DAT_MEM_TYPE,
    region: d::DAT_REGION_DESCRIPTION,
    length: d::DAT_VLEN,
    pz: d::DAT_PZ_HANDLE,
    privs: d::DAT_MEM_PRIV_FLAGS,
    va_type: d::DAT_VA_TYPE,
    lmr_out: *mut d::DAT_LMR_HANDLE,
    lmr_context: *mut d::DAT_LMR_CONTEXT,
    rmr_context: *mut d::DAT_RMR_CONTEXT,
    registered_size: *mut d::DAT_VLEN,
    registered_address: *mut d::DAT_VADDR,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        let pzo = handles::get(pz, Kind::Pz)?;
        if !Arc::ptr_eq(&pzo.ia, &ia.ia) {
            return Err(Kind::Pz.invalid());
        }
        let Body::Pz(pz) = &pzo.body else {
            return Err(Kind::Pz.invalid());
        };
        if mem_type != d::DAT_MEM_TYPE_VIRTUAL {
            return Err(err(d::DAT_MODEL_NOT_SUPPORTED, 0));
        }
        if va_type != d::DAT_VA_TYPE_VA {
            return Err(err(d::DAT_MODEL_NOT_SUPPORTED, 0));
        }
        if privs & !MEM_PRIV_KNOWN != 0 {
            return Err(arg(6));
        }
        nonnull(lmr_out, 8)?;
        // SAFETY: for DAT_MEM_TYPE_VIRTUAL the region description is `for_va`.
        let va = unsafe { region.for_va } as *mut u8;
        let ptr = core::ptr::NonNull::new(va).ok_or(arg(3))?;
        if length == 0 || length > isize::MAX as u64 {
            return Err(arg(4));
        }
        // SAFETY: dat_lmr_create(3DAT): the consumer keeps the memory allocated and does not
        // move it until dat_lmr_free, and accesses it only through raw pointers (it is C code:
        // no Rust references exist to it); dat_lmr_free deregisters before returning, after
        // which no core touches it again (MrTable::deregister waits for accesses in flight).
        let region = unsafe {
            pz.inner
                .ia
                .mem
                .register_raw(pz.inner.pz, ptr, length as usize, access_of(privs))
        }
        .map_err(|_| err(d::DAT_INSUFFICIENT_RESOURCES, 0))?;
        let lmr = Lmr::from_region(pz, region);
        let (lkey, rkey, addr, len) = (
            lmr.lmr_context(),
            lmr.rmr_context(),
            lmr.address(),
            lmr.length(),
        );
        let o = handles::insert(ia.ia.provider(), Kind::Lmr, ia.ia.clone(), |_| {
            Body::Lmr(LmrObj {
                lmr: std::sync::Mutex::new(Some(lmr)),
                pz: pzo.handle,
                mem_type,
                address: addr,
                length: len,
                privileges: privs,
                va_type,
                lmr_context: lkey,
                rmr_context: rkey,
            })
        });
        put(lmr_out, 8, o.handle as d::DAT_LMR_HANDLE)?;
        if !lmr_context.is_null() {
            put(lmr_context, 9, lkey)?;
        }
        if !rmr_context.is_null() {
            put(rmr_context, 10, rkey)?;
        }
        if !registered_size.is_null() {
            put(registered_size, 11, len)?;
        }
        if !registered_address.is_null() {
            put(registered_address, 12, addr)?;
        }
        Ok(())
    })
}

pub(super) extern "C" fn lmr_query(
    lmr: d::DAT_LMR_HANDLE,
    _mask: d::DAT_LMR_PARAM_MASK,
    param: *mut d::DAT_LMR_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(lmr, Kind::Lmr)?;
        let Body::Lmr(l) = &o.body else {
            return Err(Kind::Lmr.invalid());
        };
        let mut p = d::DAT_LMR_PARAM::default();
        p.ia_handle = o.ia.handle() as d::DAT_IA_HANDLE;
        p.mem_type = l.mem_type;
        p.region_desc = d::DAT_REGION_DESCRIPTION {
            for_va: l.address as d::DAT_PVOID,
        };
        p.length = l.length;
        p.pz_handle = l.pz as d::DAT_PZ_HANDLE;
        p.mem_priv = l.privileges;
        p.va_type = l.va_type;
        p.lmr_context = l.lmr_context;
        p.rmr_context = l.rmr_context;
        p.registered_size = l.length;
        p.registered_address = l.address;
        put(param, 3, p)
    })
}

pub(super) extern "C" fn lmr_free(lmr: d::DAT_LMR_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(lmr, Kind::Lmr)?;
        let Body::Lmr(l) = &o.body else {
            return Err(Kind::Lmr.invalid());
        };
        let mut slot = lock(&l.lmr);
        if let Some(m) = slot.take() {
            if let Err(refused) = m.free() {
                *slot = Some(refused.object);
                return Err(err(d::DAT_INVALID_STATE, d::DAT_INVALID_STATE_LMR_IN_USE));
            }
        }
        drop(slot);
        handles::remove(o.handle);
        Ok(())
    })
}

/// dat_lmr_sync_rdma_read / _write: memory is coherent here (the cores write registered
/// memory with ordinary stores), so a sync only validates its triplets.
fn lmr_sync(ia: d::DAT_IA_HANDLE, iov: *const d::DAT_LMR_TRIPLET, n: d::DAT_VLEN) -> d::DAT_RETURN {
    guard(|| {
        let _ = handles::get(ia, Kind::Ia)?;
        if iov.is_null() {
            return Err(arg(2));
        }
        if n == 0 || n > i32::MAX as u64 {
            return Err(arg(3));
        }
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    })
}

pub(super) extern "C" fn lmr_sync_rdma_read(
    ia: d::DAT_IA_HANDLE,
    iov: *const d::DAT_LMR_TRIPLET,
    n: d::DAT_VLEN,
) -> d::DAT_RETURN {
    lmr_sync(ia, iov, n)
}

pub(super) extern "C" fn lmr_sync_rdma_write(
    ia: d::DAT_IA_HANDLE,
    iov: *const d::DAT_LMR_TRIPLET,
    n: d::DAT_VLEN,
) -> d::DAT_RETURN {
    lmr_sync(ia, iov, n)
}

pub(super) extern "C" fn rmr_create(
    pz: d::DAT_PZ_HANDLE,
    out: *mut d::DAT_RMR_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let pzo = handles::get(pz, Kind::Pz)?;
        nonnull(out, 2)?;
        let o = handles::insert(pzo.ia.provider(), Kind::Rmr, pzo.ia.clone(), |_| {
            Body::Rmr(RmrObj { pz: pzo.handle })
        });
        put(out, 2, o.handle as d::DAT_RMR_HANDLE)
    })
}

pub(super) extern "C" fn rmr_create_for_ep(
    pz: d::DAT_PZ_HANDLE,
    out: *mut d::DAT_RMR_HANDLE,
) -> d::DAT_RETURN {
    rmr_create(pz, out)
}

pub(super) extern "C" fn rmr_query(
    rmr: d::DAT_RMR_HANDLE,
    _mask: d::DAT_RMR_PARAM_MASK,
    param: *mut d::DAT_RMR_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(rmr, Kind::Rmr)?;
        let Body::Rmr(r) = &o.body else {
            return Err(Kind::Rmr.invalid());
        };
        let mut p = d::DAT_RMR_PARAM::default();
        p.ia_handle = o.ia.handle() as d::DAT_IA_HANDLE;
        p.pz_handle = r.pz as d::DAT_PZ_HANDLE;
        p.rmr_scope = d::DAT_RMR_SCOPE_PZ;
        p.va_type = d::DAT_VA_TYPE_VA;
        put(param, 3, p)
    })
}

/// dat_rmr_bind: memory windows are not in the Rust API yet (issue 4, src/dat RMR): the
/// arguments are validated, then DAT_NOT_IMPLEMENTED (ia_query reports max_rmrs = 0).
#[allow(clippy::too_many_arguments)]
pub(super) extern "C" fn rmr_bind(
    rmr: d::DAT_RMR_HANDLE,
    lmr: d::DAT_LMR_HANDLE,
    triplet: *const d::DAT_LMR_TRIPLET,
    _privs: d::DAT_MEM_PRIV_FLAGS,
    _va_type: d::DAT_VA_TYPE,
    ep: d::DAT_EP_HANDLE,
    _cookie: d::DAT_RMR_COOKIE,
    _flags: d::DAT_COMPLETION_FLAGS,
    context: *mut d::DAT_RMR_CONTEXT,
) -> d::DAT_RETURN {
    guard(|| {
        let _ = handles::get(rmr, Kind::Rmr)?;
        if !lmr.is_null() {
            let _ = handles::get(lmr, Kind::Lmr)?;
            if triplet.is_null() {
                return Err(arg(3));
            }
        }
        let _ = handles::get(ep, Kind::Ep)?;
        nonnull(context, 9)?;
        Err(d::DAT_NOT_IMPLEMENTED)
    })
}

pub(super) extern "C" fn rmr_free(rmr: d::DAT_RMR_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(rmr, Kind::Rmr)?;
        handles::remove(o.handle);
        Ok(())
    })
}
