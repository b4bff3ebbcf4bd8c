//! Service points and connection requests: dat_psp_* (PSP-any scans the dynamic range),
//! dat_rsp_* (a PSP bound to one EP), dat_csp_* (not offered), dat_cr_*.

use super::codes::{arg, err, guard, map, nonnull, put, R};
use super::ep::ep_of;
use super::handles::{self, Kind, Object};
use super::objects::{Body, CrObj, SpObj};
use super::state::{lock, SockAddr};
use crate::dat::{ConnQual, DatError, Psp, PspFlag, RejectError, Rsp};
use dat_sys as d;
use std::sync::{Arc, Mutex};

/// The EVD object of a service point's `evd` handle (DAT_INVALID_HANDLE_EVD_CR for a handle
/// that is no EVD; the Rust PSP and RSP check it is a CR EVD of their IA).
fn cr_evd(evd: d::DAT_EVD_HANDLE) -> Result<Arc<Object>, u32> {
    handles::get_or(
        evd,
        Kind::Evd,
        err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EVD_CR),
    )
}

/// Registers a service point object on `qual` (its handle found by the qualifier's port).
fn register_sp(ia: &Arc<Object>, kind: Kind, qual: ConnQual, sp: SpObj) -> Arc<Object> {
    let port = qual.port();
    let o = handles::insert(ia.ia.provider(), kind, ia.ia.clone(), |_| Body::Sp(sp));
    lock(&ia.ia.sps).insert(port, o.handle);
    o
}

/// A PSP of `ia` made by `make` (Psp::create_with or Psp::create_any_with) on the CR EVD
/// `evd`.
fn listen(
    ia: &Arc<Object>,
    evd: d::DAT_EVD_HANDLE,
    make: impl FnOnce(&crate::dat::Ia, &crate::dat::Evd) -> Result<Psp, DatError>,
) -> Result<Arc<Object>, u32> {
    let evdo = cr_evd(evd)?;
    let Body::Evd(e) = &evdo.body else {
        return Err(Kind::Evd.invalid());
    };
    let psp = {
        let g = ia.ia.ia();
        let ia_ref = g.as_ref().ok_or(Kind::Ia.invalid())?;
        make(ia_ref, &e.evd).map_err(|err| map(&err, 0))?
    };
    let qual = psp.conn_qual();
    Ok(register_sp(
        ia,
        Kind::Psp,
        qual,
        SpObj {
            psp: Mutex::new(Some(psp)),
            rsp: Mutex::new(None),
            evd: evdo.handle,
            ep: 0,
        },
    ))
}

/// dat_psp_create(3DAT)'s `psp_flags` as the Rust PSP flag (argument 4 otherwise).
fn psp_flag(flags: d::DAT_PSP_FLAGS) -> Result<PspFlag, u32> {
    match flags {
        d::DAT_PSP_CONSUMER_FLAG => Ok(PspFlag::Consumer),
        d::DAT_PSP_PROVIDER_FLAG => Ok(PspFlag::Provider),
        _ => Err(arg(4)),
    }
}

/// The DAT_PSP_FLAGS of a Rust PSP flag.
fn psp_flags_of(flag: PspFlag) -> d::DAT_PSP_FLAGS {
    match flag {
        PspFlag::Consumer => d::DAT_PSP_CONSUMER_FLAG,
        PspFlag::Provider => d::DAT_PSP_PROVIDER_FLAG,
    }
}

pub(super) unsafe extern "C" fn psp_create(
    ia: d::DAT_IA_HANDLE,
    qual: d::DAT_CONN_QUAL,
    evd: d::DAT_EVD_HANDLE,
    flags: d::DAT_PSP_FLAGS,
    out: *mut d::DAT_PSP_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        let flag = psp_flag(flags)?;
        nonnull(out, 5)?;
        let o = listen(&ia, evd, |ia, evd| {
            Psp::create_with(ia, ConnQual::new(qual), evd, flag)
        })?;
        // SAFETY: `psp_handle` out-pointer, dat_psp_create(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(out, 5, o.handle as d::DAT_PSP_HANDLE) }
    })
}

/// dat_psp_create_any over [`Psp::create_any`]: the qualifier the Rust PSP chose.
pub(super) unsafe extern "C" fn psp_create_any(
    ia: d::DAT_IA_HANDLE,
    qual: *mut d::DAT_CONN_QUAL,
    evd: d::DAT_EVD_HANDLE,
    flags: d::DAT_PSP_FLAGS,
    out: *mut d::DAT_PSP_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        nonnull(qual, 2)?;
        let flag = psp_flag(flags)?;
        nonnull(out, 5)?;
        let o = listen(&ia, evd, |ia, evd| Psp::create_any_with(ia, evd, flag))?;
        let Body::Sp(sp) = &o.body else {
            return Err(Kind::Psp.invalid());
        };
        let q = sp.conn_qual(Kind::Psp)?.value();
        // SAFETY: `conn_qual` out-pointer, dat_psp_create_any(3DAT): NULL or writable (the
        // entry's contract).
        unsafe { put(qual, 2, q) }?;
        // SAFETY: `psp_handle` out-pointer, dat_psp_create_any(3DAT): NULL or writable (the
        // entry's contract).
        unsafe { put(out, 5, o.handle as d::DAT_PSP_HANDLE) }
    })
}

fn sp_query(
    h: d::DAT_HANDLE,
    kind: Kind,
) -> Result<(Arc<Object>, ConnQual, usize, u32, usize), u32> {
    let o = handles::get(h, kind)?;
    let (q, e, f, ep) = match &o.body {
        Body::Sp(s) => (s.conn_qual(kind)?, s.evd, psp_flags_of(s.flag()), s.ep),
        _ => return Err(kind.invalid()),
    };
    Ok((o, q, e, f, ep))
}

pub(super) unsafe extern "C" fn psp_query(
    psp: d::DAT_PSP_HANDLE,
    _mask: d::DAT_PSP_PARAM_MASK,
    param: *mut d::DAT_PSP_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let (o, q, e, f, _) = sp_query(psp, Kind::Psp)?;
        let p = d::DAT_PSP_PARAM {
            ia_handle: o.ia.handle() as d::DAT_IA_HANDLE,
            conn_qual: q.value(),
            evd_handle: e as d::DAT_EVD_HANDLE,
            psp_flags: f,
        };
        // SAFETY: `psp_param` out-pointer, dat_psp_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

fn sp_free(h: d::DAT_HANDLE, kind: Kind) -> R {
    let (o, q, _, _, _) = sp_query(h, kind)?;
    if let Body::Sp(s) = &o.body {
        drop(lock(&s.psp).take());
        drop(lock(&s.rsp).take());
    }
    let port = q.port();
    lock(&o.ia.sps).retain(|p, h| !(*p == port && *h == o.handle));
    handles::remove(o.handle);
    Ok(())
}

pub(super) unsafe extern "C" fn psp_free(psp: d::DAT_PSP_HANDLE) -> d::DAT_RETURN {
    guard(|| sp_free(psp, Kind::Psp))
}

/// dat_rsp_create: a service point for one UNCONNECTED EP, which it holds RESERVED (the Rust
/// [`Rsp`]); its CRs name the EP.
pub(super) unsafe extern "C" fn rsp_create(
    ia: d::DAT_IA_HANDLE,
    qual: d::DAT_CONN_QUAL,
    ep: d::DAT_EP_HANDLE,
    evd: d::DAT_EVD_HANDLE,
    out: *mut d::DAT_RSP_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        let epo = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&epo)?;
        let evdo = cr_evd(evd)?;
        let Body::Evd(cr_evd) = &evdo.body else {
            return Err(Kind::Evd.invalid());
        };
        nonnull(out, 5)?;
        let rsp = {
            let g = ia.ia.ia();
            let ia_ref = g.as_ref().ok_or(Kind::Ia.invalid())?;
            Rsp::create(ia_ref, ConnQual::new(qual), &e.ep, &cr_evd.evd)
                .map_err(|err| map(&err, 0))?
        };
        let o = register_sp(
            &ia,
            Kind::Rsp,
            rsp.conn_qual(),
            SpObj {
                psp: Mutex::new(None),
                rsp: Mutex::new(Some(rsp)),
                evd: evdo.handle,
                ep: epo.handle,
            },
        );
        // SAFETY: `rsp_handle` out-pointer, dat_rsp_create(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(out, 5, o.handle as d::DAT_RSP_HANDLE) }
    })
}

pub(super) unsafe extern "C" fn rsp_query(
    rsp: d::DAT_RSP_HANDLE,
    _mask: d::DAT_RSP_PARAM_MASK,
    param: *mut d::DAT_RSP_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let (o, q, e, _, ep) = sp_query(rsp, Kind::Rsp)?;
        let p = d::DAT_RSP_PARAM {
            ia_handle: o.ia.handle() as d::DAT_IA_HANDLE,
            conn_qual: q.value(),
            evd_handle: e as d::DAT_EVD_HANDLE,
            ep_handle: ep as d::DAT_EP_HANDLE,
        };
        // SAFETY: `rsp_param` out-pointer, dat_rsp_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

pub(super) unsafe extern "C" fn rsp_free(rsp: d::DAT_RSP_HANDLE) -> d::DAT_RETURN {
    guard(|| sp_free(rsp, Kind::Rsp))
}

/// dat_csp_create: common service points (DAT 2.0 CSP) are not offered; the arguments are
/// validated, then DAT_MODEL_NOT_SUPPORTED.
pub(super) unsafe extern "C" fn csp_create(
    ia: d::DAT_IA_HANDLE,
    comm: *mut d::DAT_COMM,
    addr: d::DAT_IA_ADDRESS_PTR,
    evd: d::DAT_EVD_HANDLE,
    out: *mut d::DAT_CSP_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let _ = handles::get(ia, Kind::Ia)?;
        nonnull(comm, 2)?;
        if addr.is_null() {
            return Err(arg(3));
        }
        let _ = handles::get(evd, Kind::Evd)?;
        nonnull(out, 5)?;
        Err(err(d::DAT_MODEL_NOT_SUPPORTED, 0))
    })
}

/// No CSP handle ever exists: every one is invalid.
pub(super) unsafe extern "C" fn csp_query(
    _csp: d::DAT_CSP_HANDLE,
    _mask: d::DAT_CSP_PARAM_MASK,
    _param: *mut d::DAT_CSP_PARAM,
) -> d::DAT_RETURN {
    err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CSP)
}

pub(super) unsafe extern "C" fn csp_free(_csp: d::DAT_CSP_HANDLE) -> d::DAT_RETURN {
    err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_CSP)
}

fn cr_of(o: &Object) -> Result<&CrObj, u32> {
    match &o.body {
        Body::Cr(c) => Ok(c),
        _ => Err(Kind::Cr.invalid()),
    }
}

/// dat_cr_query: the Rust CR's remote address and port; the private data pointer is into the
/// CR (writable: dtest edits it).
pub(super) unsafe extern "C" fn cr_query(
    cr: d::DAT_CR_HANDLE,
    _mask: d::DAT_CR_PARAM_MASK,
    param: *mut d::DAT_CR_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cr, Kind::Cr)?;
        let c = cr_of(&o)?;
        nonnull(param, 3)?;
        let mut slot = lock(&c.cr);
        let cr = slot.as_mut().ok_or(Kind::Cr.invalid())?;
        let mut remote = lock(&c.query_remote);
        *remote = SockAddr::new(cr.remote_address());
        let remote_port_qual = u64::from(cr.remote_port());
        let pd = cr.private_data_mut();
        let p = d::DAT_CR_PARAM {
            remote_ia_address_ptr: remote.as_dat(),
            remote_port_qual,
            private_data_size: pd.len() as i32,
            private_data: pd.as_mut_ptr() as d::DAT_PVOID,
            local_ep_handle: c.ep as d::DAT_EP_HANDLE,
        };
        // SAFETY: `cr_param` out-pointer, dat_cr_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

/// dat_cr_accept(3DAT): on `ep` ([`Cr::try_accept`]) or, NULL, on the EP the request names
/// ([`Cr::accept_reserved`]); the CR handle is gone afterwards, and stays when refused.
pub(super) unsafe extern "C" fn cr_accept(
    cr: d::DAT_CR_HANDLE,
    ep: d::DAT_EP_HANDLE,
    size: d::DAT_COUNT,
    p: d::DAT_PVOID,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cr, Kind::Cr)?;
        let c = cr_of(&o)?;
        let epo = if ep.is_null() {
            None
        } else {
            Some(handles::get(ep, Kind::Ep)?)
        };
        let e = epo.as_deref().map(ep_of).transpose()?;
        // SAFETY: `private_data`, dat_cr_accept(3DAT): readable for `private_data_size` bytes
        // (the entry's contract).
        let data = unsafe { super::ep::private_data(size, p, 3) }?;
        let mut slot = lock(&c.cr);
        let taken = slot.take().ok_or(Kind::Cr.invalid())?;
        let r = match e {
            Some(e) => taken.try_accept(&e.ep, &data),
            None => taken.accept_reserved(&data),
        };
        if let Err(refused) = r {
            *slot = Some(refused.object);
            return Err(map(&refused.error, 0));
        }
        drop(slot);
        handles::remove(o.handle);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn cr_reject(
    cr: d::DAT_CR_HANDLE,
    size: d::DAT_COUNT,
    p: d::DAT_PVOID,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cr, Kind::Cr)?;
        let c = cr_of(&o)?;
        // SAFETY: `private_data`, dat_cr_reject(3DAT): readable for `private_data_size` bytes
        // (the entry's contract).
        let data = unsafe { super::ep::private_data(size, p, 2) }?;
        let mut slot = lock(&c.cr);
        let taken = slot.take().ok_or(Kind::Cr.invalid())?;
        let r = match taken.reject(&data) {
            Ok(()) => Ok(()),
            Err(RejectError::Pending(refused)) => {
                *slot = Some(refused.object);
                return Err(map(&refused.error, 0));
            }
            Err(RejectError::Ended(e)) => Err(map(&e, 0)),
        };
        drop(slot);
        handles::remove(o.handle);
        if c.provider_ep {
            // dat_psp_create(3DAT): the EP the provider created for a rejected request is the
            // provider's to destroy.
            if let Some(ep) = handles::remove(c.ep) {
                super::ep::forget_ep(&ep);
            }
        }
        r
    })
}

/// dat_cr_handoff (DAT 2.0): the request moves to the PSP of `qual` in the same IA (a new
/// DAT_CONNECTION_REQUEST_EVENT on that PSP's EVD, with a new CR handle); this CR handle is
/// gone. DAT_INVALID_PARAMETER when no PSP of the IA listens on `qual` (the CR stays valid).
pub(super) unsafe extern "C" fn cr_handoff(
    cr: d::DAT_CR_HANDLE,
    qual: d::DAT_CONN_QUAL,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cr, Kind::Cr)?;
        let c = cr_of(&o)?;
        let mut slot = lock(&c.cr);
        let taken = slot.take().ok_or(Kind::Cr.invalid())?;
        match taken.handoff(ConnQual::new(qual)) {
            Ok(()) => {
                drop(slot);
                handles::remove(o.handle);
                Ok(())
            }
            Err(refused) => {
                *slot = Some(refused.object);
                Err(map(&refused.error, 0))
            }
        }
    })
}
