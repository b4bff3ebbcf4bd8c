//! Protection zones, LMRs (consumer memory, `DAT_MEM_TYPE_VIRTUAL`, registered as is through
//! `MrTable::register_raw`), LMR sync, and RMRs.

use super::codes::{arg, err, guard, map, nonnull, put};
use super::ep::ep_of;
use super::handles::{self, Kind};
use super::objects::{Body, LmrObj, RmrObj};
use super::state::lock;
use crate::dat::{Lmr, LmrTriplet, MemPriv, Pz, Rmr};
use dat_sys as d;
use std::sync::{Arc, Mutex};

pub(super) unsafe extern "C" fn pz_create(
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
        // SAFETY: `pz_handle` out-pointer, dat_pz_create(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(out, 2, o.handle as d::DAT_PZ_HANDLE) }
    })
}

pub(super) unsafe extern "C" fn pz_query(
    pz: d::DAT_PZ_HANDLE,
    _mask: d::DAT_PZ_PARAM_MASK,
    param: *mut d::DAT_PZ_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(pz, Kind::Pz)?;
        let p = d::DAT_PZ_PARAM {
            ia_handle: o.ia.handle() as d::DAT_IA_HANDLE,
        };
        // SAFETY: `pz_param` out-pointer, dat_pz_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

pub(super) unsafe extern "C" fn pz_free(pz: d::DAT_PZ_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(pz, Kind::Pz)?;
        let Body::Pz(p) = &o.body else {
            return Err(Kind::Pz.invalid());
        };
        p.can_free().map_err(|e| map(&e, 0))?;
        handles::remove(o.handle);
        Ok(())
    })
}

/// The privileges of a `dat_lmr_create` or `dat_rmr_bind`: DAT's and the IB extension's
/// (`MemPriv`); an unknown bit is refused.
fn privileges(privs: u32, arg_no: u32) -> Result<MemPriv, d::DAT_RETURN> {
    MemPriv::from_bits(privs).ok_or(arg(arg_no))
}

/// dat_lmr_create of `DAT_MEM_TYPE_VIRTUAL` memory (the only type offered, as ia_query says).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn lmr_create(
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
        let privs = privileges(privs, 6)?;
        nonnull(lmr_out, 8)?;
        // SAFETY: for DAT_MEM_TYPE_VIRTUAL the region description is `for_va`.
        let va = unsafe { region.for_va } as *mut u8;
        let length = crate::dat::ia_attr::check_lmr_length(length).map_err(|e| map(&e, 0))?;
        let ptr = core::ptr::NonNull::new(va).ok_or(arg(3))?;
        // SAFETY: dat_lmr_create(3DAT): the consumer keeps the memory allocated and does not
        // move it until dat_lmr_free, and accesses it only through raw pointers (it is C code:
        // no Rust references exist to it); dat_lmr_free deregisters before returning, after
        // which no core touches it again (MrTable::deregister waits for accesses in flight).
        let region = unsafe {
            pz.inner
                .ia
                .mem
                .register_raw(pz.inner.pz, ptr, length, privs.access())
        }
        .map_err(|e| map(&crate::dat::lmr::registration_error(e), 0))?;
        let lmr = Lmr::from_region(pz, region, privs);
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
            })
        });
        // SAFETY: `lmr_handle` out-pointer, dat_lmr_create(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(lmr_out, 8, o.handle as d::DAT_LMR_HANDLE) }?;
        if !lmr_context.is_null() {
            // SAFETY: `lmr_context` out-pointer, dat_lmr_create(3DAT): NULL or writable (the
            // entry's contract).
            unsafe { put(lmr_context, 9, lkey) }?;
        }
        if !rmr_context.is_null() {
            // SAFETY: `rmr_context` out-pointer, dat_lmr_create(3DAT): NULL or writable (the
            // entry's contract).
            unsafe { put(rmr_context, 10, rkey) }?;
        }
        if !registered_size.is_null() {
            // SAFETY: `registered_length` out-pointer, dat_lmr_create(3DAT): NULL or writable
            // (the entry's contract).
            unsafe { put(registered_size, 11, len) }?;
        }
        if !registered_address.is_null() {
            // SAFETY: `registered_address` out-pointer, dat_lmr_create(3DAT): NULL or writable
            // (the entry's contract).
            unsafe { put(registered_address, 12, addr) }?;
        }
        Ok(())
    })
}

pub(super) unsafe extern "C" fn lmr_query(
    lmr: d::DAT_LMR_HANDLE,
    _mask: d::DAT_LMR_PARAM_MASK,
    param: *mut d::DAT_LMR_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(lmr, Kind::Lmr)?;
        let Body::Lmr(l) = &o.body else {
            return Err(Kind::Lmr.invalid());
        };
        let lmr = lock(&l.lmr);
        let lmr = lmr.as_ref().ok_or(Kind::Lmr.invalid())?;
        let q = lmr.query().map_err(|_| Kind::Lmr.invalid())?;
        let mut p = d::DAT_LMR_PARAM::default();
        p.ia_handle = o.ia.handle() as d::DAT_IA_HANDLE;
        // The only type and address kind dat_lmr_create takes.
        p.mem_type = d::DAT_MEM_TYPE_VIRTUAL;
        p.va_type = d::DAT_VA_TYPE_VA;
        p.region_desc = d::DAT_REGION_DESCRIPTION {
            for_va: q.address as d::DAT_PVOID,
        };
        p.length = q.length;
        p.pz_handle = l.pz as d::DAT_PZ_HANDLE;
        p.mem_priv = q.privileges.bits();
        p.lmr_context = q.lmr_context;
        p.rmr_context = lmr.rmr_context();
        p.registered_size = q.length;
        p.registered_address = q.address;
        // SAFETY: `lmr_param` out-pointer, dat_lmr_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

pub(super) unsafe extern "C" fn lmr_free(lmr: d::DAT_LMR_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(lmr, Kind::Lmr)?;
        let Body::Lmr(l) = &o.body else {
            return Err(Kind::Lmr.invalid());
        };
        let mut slot = lock(&l.lmr);
        if let Some(m) = slot.take() {
            if let Err(refused) = m.free() {
                *slot = Some(refused.object);
                return Err(refused.error.code());
            }
        }
        drop(slot);
        handles::remove(o.handle);
        Ok(())
    })
}

/// dat_lmr_sync_rdma_read / _write over [`Lmr::sync_rdma_read`] / [`Lmr::sync_rdma_write`]
/// (`sync`): the C layer only reads the `n` triplets; a NULL IOV is argument 2, a count that
/// is no `DAT_COUNT` argument 3 (DAT 2.0 §6.5.5).
///
/// # Safety
/// `iov` is NULL or valid for reads of `n` `DAT_LMR_TRIPLET`s for the duration of the call.
unsafe fn lmr_sync(
    ia: d::DAT_IA_HANDLE,
    iov: *const d::DAT_LMR_TRIPLET,
    n: d::DAT_VLEN,
    sync: fn(&crate::dat::Ia, &[LmrTriplet]) -> Result<(), crate::dat::DatError>,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        if iov.is_null() {
            return Err(arg(2));
        }
        let n = usize::try_from(n)
            .ok()
            .filter(|&n| n <= i32::MAX as usize)
            .ok_or(arg(3))?;
        // SAFETY: `n` readable triplets at `iov` (this fn's contract), non-NULL (checked above).
        let segments = unsafe { super::ep::read_triplets(iov, n) };
        let g = ia.ia.ia();
        let ia_ref = g.as_ref().ok_or(Kind::Ia.invalid())?;
        sync(ia_ref, &segments).map_err(|e| map(&e, 0))
    })
}

pub(super) unsafe extern "C" fn lmr_sync_rdma_read(
    ia: d::DAT_IA_HANDLE,
    iov: *const d::DAT_LMR_TRIPLET,
    n: d::DAT_VLEN,
) -> d::DAT_RETURN {
    // SAFETY: `local_segments`, dat_lmr_sync_rdma_read(3DAT): NULL or `num_segments` readable
    // triplets (the entry's contract).
    unsafe { lmr_sync(ia, iov, n, Lmr::sync_rdma_read) }
}

pub(super) unsafe extern "C" fn lmr_sync_rdma_write(
    ia: d::DAT_IA_HANDLE,
    iov: *const d::DAT_LMR_TRIPLET,
    n: d::DAT_VLEN,
) -> d::DAT_RETURN {
    // SAFETY: `local_segments`, dat_lmr_sync_rdma_write(3DAT): NULL or `num_segments` readable
    // triplets (the entry's contract).
    unsafe { lmr_sync(ia, iov, n, Lmr::sync_rdma_write) }
}

pub(super) unsafe extern "C" fn rmr_create(
    pz: d::DAT_PZ_HANDLE,
    out: *mut d::DAT_RMR_HANDLE,
) -> d::DAT_RETURN {
    // SAFETY: `rmr_handle` out-pointer, dat_rmr_create(3DAT): NULL or writable (the entry's
    // contract).
    unsafe { create_rmr(pz, out, Rmr::create) }
}

/// dat_rmr_create_for_ep: an RMR of scope EP (bound to at most one EP at a time).
pub(super) unsafe extern "C" fn rmr_create_for_ep(
    pz: d::DAT_PZ_HANDLE,
    out: *mut d::DAT_RMR_HANDLE,
) -> d::DAT_RETURN {
    // SAFETY: `rmr_handle` out-pointer, dat_rmr_create_for_ep(3DAT): NULL or writable (the
    // entry's contract).
    unsafe { create_rmr(pz, out, Rmr::create_for_ep) }
}

/// dat_rmr_create and dat_rmr_create_for_ep: an RMR made by `create` in the PZ of `pz`.
///
/// # Safety
/// `out` is NULL or valid for writes of a `DAT_RMR_HANDLE` (and aligned for it) for the
/// duration of the call.
unsafe fn create_rmr(
    pz: d::DAT_PZ_HANDLE,
    out: *mut d::DAT_RMR_HANDLE,
    create: fn(&crate::dat::Pz) -> Result<Rmr, crate::dat::DatError>,
) -> d::DAT_RETURN {
    guard(|| {
        let pzo = handles::get(pz, Kind::Pz)?;
        let Body::Pz(p) = &pzo.body else {
            return Err(Kind::Pz.invalid());
        };
        nonnull(out, 2)?;
        let rmr = create(p).map_err(|e| e.code())?;
        let id = rmr.id();
        let o = handles::insert(pzo.ia.provider(), Kind::Rmr, pzo.ia.clone(), |_| {
            Body::Rmr(RmrObj {
                rmr: Mutex::new(Some(rmr)),
                pz: pzo.handle,
            })
        });
        lock(&pzo.ia.rmrs).insert(id, o.handle);
        // SAFETY: `out` is NULL or a writable DAT_RMR_HANDLE (this fn's contract).
        unsafe { put(out, 2, o.handle as d::DAT_RMR_HANDLE) }
    })
}

fn rmr_of(o: &handles::Object) -> Result<&RmrObj, u32> {
    match &o.body {
        Body::Rmr(r) => Ok(r),
        _ => Err(Kind::Rmr.invalid()),
    }
}

/// The DAT_MEM_PRIV flags of remote rights.
pub(super) unsafe extern "C" fn rmr_query(
    rmr: d::DAT_RMR_HANDLE,
    _mask: d::DAT_RMR_PARAM_MASK,
    param: *mut d::DAT_RMR_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(rmr, Kind::Rmr)?;
        let r = rmr_of(&o)?;
        nonnull(param, 3)?;
        let q = lock(&r.rmr)
            .as_ref()
            .map(|r| r.query())
            .ok_or(Kind::Rmr.invalid())?;
        let mut p = d::DAT_RMR_PARAM::default();
        p.ia_handle = o.ia.handle() as d::DAT_IA_HANDLE;
        p.pz_handle = r.pz as d::DAT_PZ_HANDLE;
        if let Some(t) = q.lmr_triplet {
            p.lmr_triplet.lmr_context = t.lmr_context;
            p.lmr_triplet.virtual_address = t.virtual_address;
            p.lmr_triplet.segment_length = t.segment_length;
        }
        p.mem_priv = q.mem_priv.bits();
        p.rmr_context = q.rmr_context.unwrap_or(0);
        p.rmr_scope = if q.scope_ep {
            d::DAT_RMR_SCOPE_EP
        } else {
            d::DAT_RMR_SCOPE_PZ
        };
        p.va_type = d::DAT_VA_TYPE_VA;
        // SAFETY: `rmr_param` out-pointer, dat_rmr_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

/// dat_rmr_bind(3DAT) over [`Rmr::bind`] / [`Rmr::unbind`] (a NULL LMR unbinds): the new
/// `rmr_context` is written to `context`; the completion is a DAT_RMR_BIND_COMPLETION_EVENT
/// on the EP's request EVD (none for a successful bind with DAT_COMPLETION_SUPPRESS_FLAG).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn rmr_bind(
    rmr: d::DAT_RMR_HANDLE,
    lmr: d::DAT_LMR_HANDLE,
    triplet: *const d::DAT_LMR_TRIPLET,
    privs: d::DAT_MEM_PRIV_FLAGS,
    va_type: d::DAT_VA_TYPE,
    ep: d::DAT_EP_HANDLE,
    cookie: d::DAT_RMR_COOKIE,
    flags: d::DAT_COMPLETION_FLAGS,
    context: *mut d::DAT_RMR_CONTEXT,
) -> d::DAT_RETURN {
    guard(|| {
        let ro = handles::get(rmr, Kind::Rmr)?;
        let r = rmr_of(&ro)?;
        let lo = handles::get_opt(lmr, Kind::Lmr, Kind::Lmr.invalid())?;
        let eo = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&eo)?;
        // SAFETY: DAT_RMR_COOKIE is a union of a 64-bit integer and a pointer; every bit
        // pattern is a valid u64.
        let cookie = unsafe { cookie.as_64 };
        let flags = super::ep::completion_flags(flags, 8)?;
        let slot = lock(&r.rmr);
        let rust = slot.as_ref().ok_or(Kind::Rmr.invalid())?;
        let Some(lo) = lo else {
            return rust.unbind_with(&e.ep, cookie, flags).map_err(|x| x.code());
        };
        let Body::Lmr(l) = &lo.body else {
            return Err(Kind::Lmr.invalid());
        };
        if triplet.is_null() {
            return Err(arg(3));
        }
        let privs = privileges(privs, 4)?;
        if va_type != d::DAT_VA_TYPE_VA {
            return Err(err(d::DAT_MODEL_NOT_SUPPORTED, 0));
        }
        nonnull(context, 9)?;
        // SAFETY: non-NULL DAT_LMR_TRIPLET of the consumer, read once by value.
        let t = unsafe { triplet.read() };
        let t = LmrTriplet {
            lmr_context: t.lmr_context,
            virtual_address: t.virtual_address,
            segment_length: t.segment_length,
        };
        let lg = lock(&l.lmr);
        let lmr_ref = lg.as_ref().ok_or(Kind::Lmr.invalid())?;
        let rkey = rust
            .bind_privileges(lmr_ref, t, privs, &e.ep, cookie, flags)
            .map_err(|x| x.code())?;
        // SAFETY: `context` out-pointer, dat_rmr_bind(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(context, 9, rkey) }
    })
}

/// dat_rmr_free: unbinds (the key dies) and frees.
pub(super) unsafe extern "C" fn rmr_free(rmr: d::DAT_RMR_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(rmr, Kind::Rmr)?;
        let r = rmr_of(&o)?;
        if let Some(rust) = lock(&r.rmr).take() {
            lock(&o.ia.rmrs).remove(&rust.id());
            rust.free();
        }
        handles::remove(o.handle);
        Ok(())
    })
}

#[cfg(test)]
mod privilege_tests {
    use super::*;

    /// The Rust privileges carry dat.h's values.
    #[test]
    fn mem_priv_has_the_values_of_dat_h() {
        for (p, c) in [
            (MemPriv::LOCAL_READ, d::DAT_MEM_PRIV_LOCAL_READ_FLAG),
            (MemPriv::REMOTE_READ, d::DAT_MEM_PRIV_REMOTE_READ_FLAG),
            (MemPriv::LOCAL_WRITE, d::DAT_MEM_PRIV_LOCAL_WRITE_FLAG),
            (MemPriv::REMOTE_WRITE, d::DAT_MEM_PRIV_REMOTE_WRITE_FLAG),
            (MemPriv::ALL, d::DAT_MEM_PRIV_ALL_FLAG),
            (MemPriv::REMOTE_ATOMIC, d::DAT_MEM_PRIV_EXTENSION_BASE),
        ] {
            assert_eq!(p.bits(), c, "{p:?}");
        }
        assert_eq!(privileges(0x80, 6), Err(arg(6)));
    }
}
