//! Shared receive queues (dat_srq_*).

use super::codes::{arg, guard, map, nonnull, put};
use super::handles::{self, Kind, Object};
use super::objects::{Body, SrqObj};
use crate::dat::Srq;
use dat_sys as d;

use super::state::lock;
use std::sync::Arc;

fn srq_of(o: &Object) -> Result<&SrqObj, u32> {
    match &o.body {
        Body::Srq(s) => Ok(s),
        _ => Err(Kind::Srq.invalid()),
    }
}

pub(super) unsafe extern "C" fn srq_create(
    ia: d::DAT_IA_HANDLE,
    pz: d::DAT_PZ_HANDLE,
    attr: *mut d::DAT_SRQ_ATTR,
    out: *mut d::DAT_SRQ_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        let pzo = handles::get(pz, Kind::Pz)?;
        if !Arc::ptr_eq(&pzo.ia, &ia.ia) {
            return Err(Kind::Pz.invalid());
        }
        let a = nonnull(attr, 3)?;
        // SAFETY: non-NULL consumer DAT_SRQ_ATTR, read by value.
        let a = unsafe { a.read() };
        // Negative counts only C can pass; the limits are the Rust SRQ's.
        if a.max_recv_dtos < 0 || a.max_recv_iov < 0 || a.low_watermark < 0 {
            return Err(arg(3));
        }
        nonnull(out, 4)?;
        let Body::Pz(pz) = &pzo.body else {
            return Err(Kind::Pz.invalid());
        };
        let srq = Srq::create(pz, a.max_recv_dtos as u32, a.max_recv_iov as u32)
            .map_err(|e| map(&e, 3))?;
        let id = srq.id();
        let o = handles::insert(ia.ia.provider(), Kind::Srq, ia.ia.clone(), |_| {
            Body::Srq(SrqObj {
                srq,
                pz: pzo.handle,
            })
        });
        lock(&ia.ia.srqs).insert(id, o.handle);
        if a.low_watermark > 0 {
            // The creation attribute arms the watermark as dat_srq_set_lw would (nothing is
            // posted yet: its one event follows at once), once events can name the handle.
            if let Err(e) = srq_of(&o)?.srq.set_low_watermark(a.low_watermark as u32) {
                lock(&ia.ia.srqs).remove(&id);
                handles::remove(o.handle);
                return Err(map(&e, 3));
            }
        }
        // SAFETY: `srq_handle` out-pointer, dat_srq_create(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(out, 4, o.handle as d::DAT_SRQ_HANDLE) }
    })
}

pub(super) unsafe extern "C" fn srq_free(srq: d::DAT_SRQ_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(srq, Kind::Srq)?;
        let s = srq_of(&o)?;
        s.srq.can_free().map_err(|e| map(&e, 0))?;
        lock(&o.ia.srqs).remove(&s.srq.id());
        handles::remove(o.handle);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn srq_post_recv(
    srq: d::DAT_SRQ_HANDLE,
    n: d::DAT_COUNT,
    iov: *mut d::DAT_LMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(srq, Kind::Srq)?;
        let s = srq_of(&o)?;
        // SAFETY: `local_iov`, dat_srq_post_recv(3DAT): `num_segments` readable triplets (the
        // entry's contract).
        let t = unsafe { super::ep::triplets(n, iov, 2) }?;
        // SAFETY: 64 bits of consumer data.
        let c = unsafe { cookie.as_64 };
        s.srq.post_recv(&t, c).map_err(|e| map(&e, 2))
    })
}

pub(super) unsafe extern "C" fn srq_query(
    srq: d::DAT_SRQ_HANDLE,
    _mask: d::DAT_SRQ_PARAM_MASK,
    param: *mut d::DAT_SRQ_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(srq, Kind::Srq)?;
        let s = srq_of(&o)?;
        nonnull(param, 3)?;
        let c = s.srq.query().map_err(|e| map(&e, 1))?;
        let p = d::DAT_SRQ_PARAM {
            ia_handle: o.ia.handle() as d::DAT_IA_HANDLE,
            srq_state: d::DAT_SRQ_STATE_OPERATIONAL,
            pz_handle: s.pz as d::DAT_PZ_HANDLE,
            max_recv_dtos: c.max_recv_dtos as i32,
            max_recv_iov: s.srq.max_recv_iov() as i32,
            low_watermark: s.srq.low_watermark() as i32,
            available_dto_count: c.available as i32,
            outstanding_dto_count: c.outstanding.min(i32::MAX as u32) as i32,
        };
        // SAFETY: `srq_param` out-pointer, dat_srq_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

/// dat_srq_resize (DAT 2.0): the new maximum of posted receives; DAT_INVALID_STATE when more
/// are posted now than `size` allows.
pub(super) unsafe extern "C" fn srq_resize(
    srq: d::DAT_SRQ_HANDLE,
    size: d::DAT_COUNT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(srq, Kind::Srq)?;
        let s = srq_of(&o)?;
        if size < 0 {
            return Err(arg(2));
        }
        s.srq.resize(size as u32).map_err(|e| map(&e, 2))
    })
}

/// dat_srq_set_lw (DAT 2.0): arms the low watermark (DAT_SRQ_LW_DEFAULT, 0, disarms); one
/// asynchronous event (SRQ handle, DAT_SRQ_LOW_WATERMARK_EVENT) per setting when fewer
/// receives are posted.
pub(super) unsafe extern "C" fn srq_set_lw(
    srq: d::DAT_SRQ_HANDLE,
    lw: d::DAT_COUNT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(srq, Kind::Srq)?;
        let s = srq_of(&o)?;
        if lw < 0 {
            return Err(arg(2));
        }
        s.srq.set_low_watermark(lw as u32).map_err(|e| map(&e, 2))?;
        Ok(())
    })
}
