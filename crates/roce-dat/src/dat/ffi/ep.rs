//! Endpoints (dat_ep_*): creation with the attribute checks of dat_ep_create(3DAT), connect /
//! disconnect / reset, the posts (with DAT_COMPLETION_SUPPRESS_FLAG honoured), status, query.

use super::codes::{arg, boolean, err, guard, handle_arg, map, nonnull, put, R};
use super::handles::{self, Kind, Object};
use super::objects::{Body, EpObj, EpView};
use super::state::{lock, IaState, SockAddr};
use crate::dat::{CompletionFlags, LmrTriplet, RmrTriplet};
use crate::dat::{Ep, EpAttr, EpParam, EpParamMask, EpState, Multipath};
use dat_sys as d;
use std::sync::{Arc, Mutex};

pub(super) fn ep_of(o: &Object) -> Result<&EpObj, u32> {
    match &o.body {
        Body::Ep(e) => Ok(e),
        _ => Err(Kind::Ep.invalid()),
    }
}

/// Drops an EP's QPN from its IA's map (before its handle goes).
pub(super) fn forget_ep(o: &Object) {
    if let Body::Ep(e) = &o.body {
        // Its entry is under its QPN (kept current by ep_reset); a scan only if it is not.
        let qpn = e.ep.qpn();
        o.ia.eps.change(|eps| {
            if eps.get(&qpn) == Some(&o.handle) {
                eps.remove(&qpn);
            } else {
                eps.retain(|_, h| *h != o.handle);
            }
        });
    }
}

fn state_code(s: EpState) -> d::DAT_EP_STATE {
    match s {
        EpState::Unconnected => d::DAT_EP_STATE_UNCONNECTED,
        EpState::Reserved => d::DAT_EP_STATE_RESERVED,
        EpState::PassiveConnectionPending => d::DAT_EP_STATE_PASSIVE_CONNECTION_PENDING,
        EpState::ActiveConnectionPending => d::DAT_EP_STATE_ACTIVE_CONNECTION_PENDING,
        EpState::TentativeConnectionPending => d::DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING,
        EpState::Connected => d::DAT_EP_STATE_CONNECTED,
        EpState::DisconnectPending => d::DAT_EP_STATE_DISCONNECT_PENDING,
        EpState::Disconnected => d::DAT_EP_STATE_DISCONNECTED,
        EpState::CompletionPending => d::DAT_EP_STATE_COMPLETION_PENDING,
    }
}

/// A consumer's DAT_EP_ATTR as the Rust attributes (NULL: `None`, the provider defaults).
/// What only the C form can get wrong (a negative count, a service type or QoS other than RC
/// and best effort, unknown completion flags) is DAT_INVALID_PARAMETER of argument `n`; the
/// limits and the meaning of zeros are the Rust EP's ([`EpAttr::with_zeros_resolved`]).
///
/// # Safety
/// `p` is NULL or valid for reads of a `DAT_EP_ATTR` (and aligned for it) for the duration of
/// the call.
unsafe fn attr_from(p: *const d::DAT_EP_ATTR, n: u32) -> Result<Option<EpAttr>, u32> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: `p` is a readable DAT_EP_ATTR (this fn's contract), non-NULL (checked above);
    // read once by value.
    let a = unsafe { p.read() };
    if a.service_type != d::DAT_SERVICE_TYPE_RC {
        return Err(arg(n));
    }
    let qos = crate::dat::Qos::from_dat(a.qos).ok_or(arg(n))?;
    let count = |v: i32| u32::try_from(v).map_err(|_| arg(n));
    let depth = |v: i32| u8::try_from(v).map_err(|_| arg(n));
    let flags = |v: u32| CompletionFlags::from_bits(v).ok_or(arg(n));
    Ok(Some(EpAttr {
        max_message_size: a.max_message_size,
        max_rdma_size: a.max_rdma_size,
        recv_completion_flags: flags(a.recv_completion_flags)?,
        request_completion_flags: flags(a.request_completion_flags)?,
        max_recv_dtos: count(a.max_recv_dtos)?,
        max_request_dtos: count(a.max_request_dtos)?,
        max_recv_iov: count(a.max_recv_iov)?,
        max_request_iov: count(a.max_request_iov)?,
        max_rdma_read_in: depth(a.max_rdma_read_in)?,
        max_rdma_read_out: depth(a.max_rdma_read_out)?,
        // DAT_HW_DEFAULT is (DAT_COUNT)~0: WATERMARK_INFINITE.
        srq_soft_hw: a.srq_soft_hw as u32,
        max_rdma_read_iov: count(a.max_rdma_read_iov)?,
        max_rdma_write_iov: count(a.max_rdma_write_iov)?,
        qos,
    }))
}

/// The Rust attributes as a DAT_EP_ATTR (dat_ep_query).
fn c_attr(a: &EpAttr) -> d::DAT_EP_ATTR {
    d::DAT_EP_ATTR {
        service_type: d::DAT_SERVICE_TYPE_RC,
        max_message_size: a.max_message_size,
        max_rdma_size: a.max_rdma_size,
        qos: a.qos.to_dat(),
        recv_completion_flags: a.recv_completion_flags.bits(),
        request_completion_flags: a.request_completion_flags.bits(),
        max_recv_dtos: a.max_recv_dtos as i32,
        max_request_dtos: a.max_request_dtos as i32,
        max_recv_iov: a.max_recv_iov as i32,
        max_request_iov: a.max_request_iov as i32,
        max_rdma_read_in: a.max_rdma_read_in.into(),
        max_rdma_read_out: a.max_rdma_read_out.into(),
        srq_soft_hw: a.srq_soft_hw as i32,
        max_rdma_read_iov: a.max_rdma_read_iov as i32,
        max_rdma_write_iov: a.max_rdma_write_iov as i32,
        ep_transport_specific_count: 0,
        ep_transport_specific: core::ptr::null_mut(),
        ep_provider_specific_count: 0,
        ep_provider_specific: core::ptr::null_mut(),
    }
}

/// Creates an EP (with or without SRQ); handle-argument numbers follow dat_ep_create.
///
/// # Safety
/// `attr` is NULL or valid for reads of a `DAT_EP_ATTR`, and `out` NULL or valid for writes of
/// a `DAT_EP_HANDLE` (each aligned), for the duration of the call.
#[allow(clippy::too_many_arguments)]
unsafe fn create(
    ia: d::DAT_IA_HANDLE,
    pz: d::DAT_PZ_HANDLE,
    recv_evd: d::DAT_EVD_HANDLE,
    request_evd: d::DAT_EVD_HANDLE,
    connect_evd: d::DAT_EVD_HANDLE,
    srq: d::DAT_SRQ_HANDLE,
    attr: *const d::DAT_EP_ATTR,
    out: *mut d::DAT_EP_HANDLE,
    attr_arg: u32,
) -> R {
    let ia = handles::get(ia, Kind::Ia)?;
    let pzo = handles::get(pz, Kind::Pz)?;
    let evd_code = |sub| err(d::DAT_INVALID_HANDLE, sub);
    let recv = handles::get_opt(
        recv_evd,
        Kind::Evd,
        evd_code(d::DAT_INVALID_HANDLE_EVD_RECV),
    )?;
    let req = handles::get_opt(
        request_evd,
        Kind::Evd,
        evd_code(d::DAT_INVALID_HANDLE_EVD_REQUEST),
    )?;
    let conn = handles::get_opt(
        connect_evd,
        Kind::Evd,
        evd_code(d::DAT_INVALID_HANDLE_EVD_CONN),
    )?;
    let srqo = handles::get_opt(srq, Kind::Srq, Kind::Srq.invalid())?;
    // SAFETY: `attr` is NULL or a readable DAT_EP_ATTR (this fn's contract).
    let a = unsafe { attr_from(attr, attr_arg) }?;
    nonnull(out, attr_arg + 1)?;
    fn evd(o: &Option<Arc<Object>>) -> Option<&crate::dat::Evd> {
        match o.as_deref().map(|o| &o.body) {
            Some(Body::Evd(e)) => Some(&e.evd),
            _ => None,
        }
    }
    let Body::Pz(pz) = &pzo.body else {
        return Err(Kind::Pz.invalid());
    };
    let srq_ref = match srqo.as_deref().map(|o| &o.body) {
        Some(Body::Srq(s)) => Some(&s.srq),
        _ => None,
    };
    let ep = {
        let g = ia.ia.ia();
        let ia_ref = g.as_ref().ok_or(Kind::Ia.invalid())?;
        Ep::create(ia_ref, pz, evd(&recv), evd(&req), evd(&conn), srq_ref, a)
            .map_err(|e| map(&e, attr_arg))?
    };
    let qpn = ep.qpn();
    let h = |o: &Option<Arc<Object>>| o.as_ref().map_or(0, |o| o.handle);
    let o = handles::insert(ia.ia.provider(), Kind::Ep, ia.ia.clone(), |_| {
        Body::Ep(EpObj {
            ep,
            view: Mutex::new(EpView {
                pz: pzo.handle,
                recv_evd: h(&recv),
                request_evd: h(&req),
                connect_evd: h(&conn),
            }),
            srq: h(&srqo),
            query_remote: Mutex::new(SockAddr::default()),
            pdata: Mutex::new(Vec::new()),
        })
    });
    ia.ia.eps.change(|eps| eps.insert(qpn, o.handle));
    // SAFETY: `out` is NULL or a writable DAT_EP_HANDLE (this fn's contract).
    unsafe { put(out, attr_arg + 1, o.handle as d::DAT_EP_HANDLE) }
}

/// A handle for the EP the provider made for a request on a PSP with DAT_PSP_PROVIDER_FLAG
/// ([`crate::dat::Cr::provider_ep`]): no EVDs and no PZ the consumer knows; it gives them
/// with dat_ep_modify and frees the EP with dat_ep_free (a reject frees the handle).
pub(super) fn provider_ep_handle(ia: &Arc<IaState>, ep: Ep) -> Arc<Object> {
    let qpn = ep.qpn();
    let o = handles::insert(ia.provider(), Kind::Ep, ia.clone(), |_| {
        Body::Ep(EpObj {
            ep,
            view: Mutex::new(EpView::default()),
            srq: 0,
            query_remote: Mutex::new(SockAddr::default()),
            pdata: Mutex::new(Vec::new()),
        })
    });
    ia.eps.change(|eps| eps.insert(qpn, o.handle));
    o
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn ep_create(
    ia: d::DAT_IA_HANDLE,
    pz: d::DAT_PZ_HANDLE,
    recv_evd: d::DAT_EVD_HANDLE,
    request_evd: d::DAT_EVD_HANDLE,
    connect_evd: d::DAT_EVD_HANDLE,
    attr: *const d::DAT_EP_ATTR,
    out: *mut d::DAT_EP_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        // SAFETY: `ep_attributes` and the `ep_handle` out-pointer, dat_ep_create(3DAT): NULL or
        // readable / writable (the entry's contract).
        unsafe {
            create(
                ia,
                pz,
                recv_evd,
                request_evd,
                connect_evd,
                core::ptr::null_mut(),
                attr,
                out,
                6,
            )
        }
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn ep_create_with_srq(
    ia: d::DAT_IA_HANDLE,
    pz: d::DAT_PZ_HANDLE,
    recv_evd: d::DAT_EVD_HANDLE,
    request_evd: d::DAT_EVD_HANDLE,
    connect_evd: d::DAT_EVD_HANDLE,
    srq: d::DAT_SRQ_HANDLE,
    attr: *const d::DAT_EP_ATTR,
    out: *mut d::DAT_EP_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        if srq.is_null() {
            return Err(Kind::Srq.invalid());
        }
        // SAFETY: `ep_attributes` and the `ep_handle` out-pointer, dat_ep_create_with_srq(3DAT):
        // NULL or readable / writable (the entry's contract).
        unsafe {
            create(
                ia,
                pz,
                recv_evd,
                request_evd,
                connect_evd,
                srq,
                attr,
                out,
                7,
            )
        }
    })
}

pub(super) unsafe extern "C" fn ep_query(
    ep: d::DAT_EP_HANDLE,
    _mask: d::DAT_EP_PARAM_MASK,
    param: *mut d::DAT_EP_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        nonnull(param, 3)?;
        let v = e.view();
        let mut p = d::DAT_EP_PARAM::default();
        p.ia_handle = o.ia.handle() as d::DAT_IA_HANDLE;
        p.ep_state = state_code(e.ep.state());
        p.local_ia_address_ptr = o.ia.addr.as_dat();
        p.local_port_qual = 0;
        let (remote, qual) =
            e.ep.remote()
                .map_or((SockAddr::default(), 0), |(ip, q)| (SockAddr::new(ip), q));
        let mut slot = lock(&e.query_remote);
        *slot = remote;
        p.remote_ia_address_ptr = slot.as_dat();
        p.remote_port_qual = u64::from(qual);
        p.pz_handle = v.pz as d::DAT_PZ_HANDLE;
        p.recv_evd_handle = v.recv_evd as d::DAT_EVD_HANDLE;
        p.request_evd_handle = v.request_evd as d::DAT_EVD_HANDLE;
        p.connect_evd_handle = v.connect_evd as d::DAT_EVD_HANDLE;
        p.srq_handle = e.srq as d::DAT_SRQ_HANDLE;
        p.ep_attr = c_attr(&e.ep.attr());
        // SAFETY: `ep_param` out-pointer, dat_ep_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

/// dat_ep_modify(3DAT) over [`Ep::modify`]: only the parameters the mask names change. A mask
/// of 0 changes nothing and succeeds; unknown bits and unmodifiable parameters (IA, state,
/// communicator, addresses, port qualifiers, SRQ) are DAT_INVALID_PARAMETER of argument 2; a
/// parameter the EP's state does not allow is DAT_INVALID_STATE with the EP-state subtype.
pub(super) unsafe extern "C" fn ep_modify(
    ep: d::DAT_EP_HANDLE,
    mask: d::DAT_EP_PARAM_MASK,
    param: *const d::DAT_EP_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        if param.is_null() {
            return Err(arg(3));
        }
        let m = EpParamMask::from_bits(mask).ok_or(arg(2))?;
        // SAFETY: non-NULL DAT_EP_PARAM pointer of the consumer, read once by value.
        let p = unsafe { param.read() };
        // A PZ or EVD handle inside `ep_param` that is NULL where one is needed, freed, forged
        // or of another type is one of "the requested Endpoint parameters" that is invalid:
        // DAT_INVALID_PARAMETER (argument 3). DAT_INVALID_HANDLE is for `ep_handle` only
        // (dat_ep_modify(3DAT)).
        let masked = |bit: EpParamMask, h: *mut core::ffi::c_void| {
            if m.contains(bit) {
                h
            } else {
                core::ptr::null_mut()
            }
        };
        let pzo = if m.contains(EpParamMask::PZ_HANDLE) {
            Some(handles::get_or(p.pz_handle, Kind::Pz, arg(3))?)
        } else {
            None
        };
        let evd_of_param = |bit, h| handles::get_opt(masked(bit, h), Kind::Evd, arg(3));
        let recv = evd_of_param(EpParamMask::RECV_EVD_HANDLE, p.recv_evd_handle)?;
        let req = evd_of_param(EpParamMask::REQUEST_EVD_HANDLE, p.request_evd_handle)?;
        let conn = evd_of_param(EpParamMask::CONNECT_EVD_HANDLE, p.connect_evd_handle)?;
        fn evd(o: &Option<Arc<Object>>) -> Option<&crate::dat::Evd> {
            match o.as_deref().map(|o| &o.body) {
                Some(Body::Evd(e)) => Some(&e.evd),
                _ => None,
            }
        }
        let pz = match pzo.as_deref().map(|o| &o.body) {
            Some(Body::Pz(pz)) => Some(pz),
            Some(_) => return Err(arg(3)),
            None => None,
        };
        let a = &p.ep_attr;
        let read_depth = |v: i32| u8::try_from(v).map_err(|_| arg(3));
        // Only the masked fields are read (Ep::modify merges them over the EP's own).
        let mut attr = EpAttr::default();
        macro_rules! take {
            ($bit:ident, $field:ident, $conv:expr) => {
                if m.contains(EpParamMask::$bit) {
                    attr.$field = $conv(a.$field)?;
                }
            };
        }
        let same = |v| Ok::<_, u32>(v);
        let count = |v: i32| u32::try_from(v).map_err(|_| arg(3));
        // DAT_HW_DEFAULT is (DAT_COUNT)~0.
        let soft_hw = |v: i32| Ok::<_, u32>(v as u32);
        let flags = |v: u32| crate::dat::CompletionFlags::from_bits(v).ok_or(arg(3));
        take!(MAX_MESSAGE_SIZE, max_message_size, same);
        take!(MAX_RDMA_SIZE, max_rdma_size, same);
        take!(RECV_COMPLETION_FLAGS, recv_completion_flags, flags);
        take!(REQUEST_COMPLETION_FLAGS, request_completion_flags, flags);
        take!(MAX_RECV_DTOS, max_recv_dtos, count);
        take!(MAX_REQUEST_DTOS, max_request_dtos, count);
        take!(MAX_RECV_IOV, max_recv_iov, count);
        take!(MAX_REQUEST_IOV, max_request_iov, count);
        take!(MAX_RDMA_READ_IN, max_rdma_read_in, read_depth);
        take!(MAX_RDMA_READ_OUT, max_rdma_read_out, read_depth);
        take!(SRQ_SOFT_HW, srq_soft_hw, soft_hw);
        take!(MAX_RDMA_READ_IOV, max_rdma_read_iov, count);
        take!(MAX_RDMA_WRITE_IOV, max_rdma_write_iov, count);
        let rp = EpParam {
            pz,
            recv_evd: evd(&recv),
            request_evd: evd(&req),
            connect_evd: evd(&conn),
            attr,
            service_type: a.service_type,
            qos: a.qos,
            num_transport_attr: p.ep_attr.ep_transport_specific_count.max(0) as u32,
            num_provider_attr: p.ep_attr.ep_provider_specific_count.max(0) as u32,
        };
        if (m.contains(EpParamMask::NUM_TRANSPORT_ATTR) && a.ep_transport_specific_count < 0)
            || (m.contains(EpParamMask::NUM_PROVIDER_ATTR) && a.ep_provider_specific_count < 0)
        {
            return Err(arg(3));
        }
        let mut view = lock(&e.view);
        e.ep.modify(m, &rp).map_err(|e| e.code())?;
        let h = |o: &Option<Arc<Object>>| o.as_ref().map_or(0, |o| o.handle);
        if let Some(pzo) = &pzo {
            view.pz = pzo.handle;
        }
        if m.contains(EpParamMask::RECV_EVD_HANDLE) {
            view.recv_evd = h(&recv);
        }
        if m.contains(EpParamMask::REQUEST_EVD_HANDLE) {
            view.request_evd = h(&req);
        }
        if m.contains(EpParamMask::CONNECT_EVD_HANDLE) {
            view.connect_evd = h(&conn);
        }
        Ok(())
    })
}

/// The consumer's private data (a negative size is argument `size_arg`; the limit is the
/// Rust API's, `ia_attr::MAX_PRIVATE_DATA_SIZE`).
///
/// # Safety
/// When `size` > 0, `p` is NULL or valid for reads of `size` bytes for the duration of the
/// call.
pub(super) unsafe fn private_data(
    size: d::DAT_COUNT,
    p: d::DAT_PVOID,
    size_arg: u32,
) -> Result<Vec<u8>, u32> {
    if size < 0 {
        return Err(arg(size_arg));
    }
    if size == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(arg(size_arg + 1));
    }
    // SAFETY: `size` (> 0) readable bytes at `p` (this fn's contract), non-NULL (checked
    // above).
    Ok(unsafe { core::slice::from_raw_parts(p as *const u8, size as usize) }.to_vec())
}

/// A consumer's `sockaddr` (NULL: argument `n`; a family other than AF_INET and AF_INET6, or
/// a scoped IPv6 address: DAT_INVALID_ADDRESS).
///
/// # Safety
/// `addr` is NULL or a readable `sockaddr_in` / `sockaddr_in6` as its family says, for the
/// duration of the call.
unsafe fn sockaddr_of(addr: d::DAT_IA_ADDRESS_PTR, n: u32) -> Result<SockAddr, u32> {
    if addr.is_null() {
        return Err(arg(n));
    }
    // SAFETY: a readable sockaddr of its family's size (this fn's contract), non-NULL (checked
    // above).
    unsafe { SockAddr::read(addr) }.ok_or(err(d::DAT_INVALID_ADDRESS, 0))
}

/// dat_ep_connect's `timeout` in microseconds; DAT_TIMEOUT_INFINITE waits for the CM.
pub(super) fn connect_timeout(t: d::DAT_TIMEOUT) -> Option<std::time::Duration> {
    // DAT_TIMEOUT_INFINITE is `((DAT_TIMEOUT) ~0)` (dat.h), a macro bindgen cannot see.
    (t != u32::MAX).then(|| std::time::Duration::from_micros(u64::from(t)))
}

#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn ep_connect(
    ep: d::DAT_EP_HANDLE,
    remote: d::DAT_IA_ADDRESS_PTR,
    conn_qual: d::DAT_CONN_QUAL,
    timeout: d::DAT_TIMEOUT,
    pdata_size: d::DAT_COUNT,
    pdata: d::DAT_PVOID,
    qos: d::DAT_QOS,
    flags: d::DAT_CONNECT_FLAGS,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // SAFETY: `remote_ia_address`, dat_ep_connect(3DAT): NULL or a readable sockaddr (the
        // entry's contract).
        let ip = unsafe { sockaddr_of(remote, 2) }?.ip();
        // SAFETY: `private_data`, dat_ep_connect(3DAT): readable for `private_data_size` bytes
        // (the entry's contract).
        let data = unsafe { private_data(pdata_size, pdata, 5) }?;
        let qos = crate::dat::Qos::from_dat(qos).ok_or(arg(7))?;
        let multipath = match flags {
            d::DAT_CONNECT_DEFAULT_FLAG => Multipath::None,
            d::DAT_CONNECT_MULTIPATH_FLAG => Multipath::Requested,
            d::DAT_CONNECT_MULTIPATH_REQUIRED_FLAG => Multipath::Required,
            _ => return Err(arg(8)),
        };
        multipath.check().map_err(|err| map(&err, 0))?;
        let qual = crate::dat::ConnQual::new(conn_qual);
        e.ep.set_qos(qos).map_err(|err| map(&err, 7))?;
        e.ep.connect_with_timeout(ip, qual, &data, connect_timeout(timeout))
            .map_err(|err| map(&err, 0))
    })
}

/// dat_ep_common_connect: connect without a port qualifier (the port is in the address).
pub(super) unsafe extern "C" fn ep_common_connect(
    ep: d::DAT_EP_HANDLE,
    remote: d::DAT_IA_ADDRESS_PTR,
    timeout: d::DAT_TIMEOUT,
    pdata_size: d::DAT_COUNT,
    pdata: d::DAT_PVOID,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // SAFETY: `remote_ia_address`, dat_ep_common_connect(3DAT): NULL or a readable sockaddr
        // (the entry's contract).
        let sa = unsafe { sockaddr_of(remote, 2) }?;
        let (ip, qual) = (sa.ip(), crate::dat::ConnQual::new(u64::from(sa.port())));
        // SAFETY: `private_data`, dat_ep_common_connect(3DAT): readable for `private_data_size`
        // bytes (the entry's contract).
        let data = unsafe { private_data(pdata_size, pdata, 4) }?;
        e.ep.connect_with_timeout(ip, qual, &data, connect_timeout(timeout))
            .map_err(|err| match err {
                // dat_ep_connect's private_data_size (argument 5) is this call's argument 4.
                crate::dat::DatError::InvalidArg { arg: 5, .. } => arg(4),
                err => map(&err, 0),
            })
    })
}

/// dat_ep_dup_connect(3DAT) over [`Ep::dup_connect_with_timeout`]: `ep` connects to the remote
/// end of `dup_ep` (the Rust EP decides which `dup_ep` has one).
pub(super) unsafe extern "C" fn ep_dup_connect(
    ep: d::DAT_EP_HANDLE,
    dup_ep: d::DAT_EP_HANDLE,
    timeout: d::DAT_TIMEOUT,
    pdata_size: d::DAT_COUNT,
    pdata: d::DAT_PVOID,
    qos: d::DAT_QOS,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        let dup = handles::get_or(dup_ep, Kind::Ep, handle_arg(2))?;
        let de = ep_of(&dup)?;
        // SAFETY: `private_data`, dat_ep_dup_connect(3DAT): readable for `private_data_size`
        // bytes (the entry's contract).
        let data = unsafe { private_data(pdata_size, pdata, 4) }?;
        let qos = crate::dat::Qos::from_dat(qos).ok_or(arg(6))?;
        e.ep.set_qos(qos).map_err(|err| map(&err, 6))?;
        e.ep.dup_connect_with_timeout(&de.ep, &data, connect_timeout(timeout))
            .map_err(|err| map(&err, 0))
    })
}

/// dat_ep_disconnect(3DAT): DAT_CLOSE_ABRUPT_FLAG is [`Ep::disconnect`],
/// DAT_CLOSE_GRACEFUL_FLAG [`Ep::disconnect_graceful`]; any other value is argument 2.
pub(super) unsafe extern "C" fn ep_disconnect(
    ep: d::DAT_EP_HANDLE,
    flags: d::DAT_CLOSE_FLAGS,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        let r = match flags {
            d::DAT_CLOSE_ABRUPT_FLAG => e.ep.disconnect(),
            d::DAT_CLOSE_GRACEFUL_FLAG => e.ep.disconnect_graceful(),
            _ => return Err(arg(2)),
        };
        r.map_err(|err| map(&err, 0))
    })
}

/// Reads `n` consumer triplets at `iov` after checking them: a count outside
/// `0..=ia_attr::MAX_IOV_SEGMENTS` (more than any post takes: nothing beyond is read) is
/// argument `n_arg`, a NULL IOV with a count argument `n_arg + 1`.
///
/// # Safety
/// When `n` > 0, `iov` is NULL or valid for reads of `n` `DAT_LMR_TRIPLET`s for the duration
/// of the call.
pub(super) unsafe fn triplets(
    n: d::DAT_COUNT,
    iov: *const d::DAT_LMR_TRIPLET,
    n_arg: u32,
) -> Result<Triplets, u32> {
    let max = crate::dat::ia_attr::MAX_IOV_SEGMENTS;
    if !u32::try_from(n).is_ok_and(|n| n <= max) {
        return Err(arg(n_arg));
    }
    if n > 0 && iov.is_null() {
        return Err(arg(n_arg + 1));
    }
    // SAFETY: `n` readable triplets at `iov` when `n` > 0 (this fn's contract), non-NULL then
    // (checked above); `n` is not negative (checked above).
    Ok(unsafe { read_triplets(iov, n as usize) })
}

/// A post's copy of the consumer's triplets: up to four without an allocation (the data path
/// allocates nothing per message).
pub(super) type Triplets = smallvec::SmallVec<[LmrTriplet; 4]>;

/// Copies `n` consumer triplets from `iov`, read now: the IOV is the consumer's again when the
/// call returns (DAT_IOV_CONSUMER).
///
/// # Safety
/// `iov` points to `n` readable triplets, or `n` is 0.
pub(super) unsafe fn read_triplets(iov: *const d::DAT_LMR_TRIPLET, n: usize) -> Triplets {
    if n == 0 {
        return Triplets::new();
    }
    // SAFETY: the caller's contract.
    unsafe { core::slice::from_raw_parts(iov, n) }
        .iter()
        .map(|t| LmrTriplet {
            lmr_context: t.lmr_context,
            virtual_address: t.virtual_address,
            segment_length: t.segment_length,
        })
        .collect()
}

/// A consumer's DAT_RMR_TRIPLET as the Rust triplet (NULL: argument `n`).
///
/// # Safety
/// `p` is NULL or valid for reads of a `DAT_RMR_TRIPLET` (and aligned for it) for the
/// duration of the call.
unsafe fn rmr(p: *const d::DAT_RMR_TRIPLET, n: u32) -> Result<RmrTriplet, u32> {
    if p.is_null() {
        return Err(arg(n));
    }
    // SAFETY: `p` is a readable DAT_RMR_TRIPLET (this fn's contract), non-NULL (checked
    // above); read by value.
    let r = unsafe { p.read() };
    Ok(RmrTriplet {
        rmr_context: r.rmr_context,
        target_address: r.virtual_address,
        segment_length: r.segment_length,
    })
}

/// DAT_COMPLETION_FLAGS as the Rust flags (argument `n` when a bit is not a DAT flag).
pub(super) fn completion_flags(
    flags: d::DAT_COMPLETION_FLAGS,
    n: u32,
) -> Result<CompletionFlags, u32> {
    CompletionFlags::from_bits(flags).ok_or(arg(n))
}

/// Posts a request whose completion flags the Rust EP applies itself (`Ep::post_*_with`:
/// SUPPRESS and UNSIGNALLED make the work request unsignaled, so no completion is made at
/// all; SOLICITED_WAIT and BARRIER_FENCE reach the transport). `flags_arg`: its argument
/// number.
pub(super) fn post_with_flags(
    e: &EpObj,
    flags: u32,
    flags_arg: u32,
    post: impl FnOnce(&Ep, CompletionFlags) -> Result<(), crate::dat::DatError>,
) -> R {
    let flags = completion_flags(flags, flags_arg)?;
    post(&e.ep, flags).map_err(|err| {
        if super::codes::trace_on() {
            tracing::debug!(target: "dpdk_roce::dat::call", "post: {err}");
        }
        map(&err, 0)
    })
}

pub(super) unsafe extern "C" fn ep_post_send(
    ep: d::DAT_EP_HANDLE,
    n: d::DAT_COUNT,
    iov: *mut d::DAT_LMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
    flags: d::DAT_COMPLETION_FLAGS,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // SAFETY: `local_iov`, dat_ep_post_send(3DAT): `num_segments` readable triplets (the
        // entry's contract).
        let t = unsafe { triplets(n, iov, 2) }?;
        // SAFETY: a cookie is 64 bits of consumer data in any variant.
        let c = unsafe { cookie.as_64 };
        post_with_flags(e, flags, 5, |ep, f| ep.post_send_with(&t, c, f))
    })
}

/// dat_ep_post_send_with_invalidate: with `invalidate` TRUE a send that invalidates the
/// peer's `rmr_context` on arrival (SEND with Invalidate, IBTA vol. 1 §9.4.1.1.1); else a
/// plain send.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe extern "C" fn ep_post_send_with_invalidate(
    ep: d::DAT_EP_HANDLE,
    n: d::DAT_COUNT,
    iov: *mut d::DAT_LMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
    flags: d::DAT_COMPLETION_FLAGS,
    invalidate: d::DAT_BOOLEAN,
    rmr_context: d::DAT_RMR_CONTEXT,
) -> d::DAT_RETURN {
    if invalidate == d::DAT_FALSE {
        // SAFETY: the caller's contract for this entry is ep_post_send's (the same arguments).
        return unsafe { ep_post_send(ep, n, iov, cookie, flags) };
    }
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // SAFETY: `local_iov`, dat_ep_post_send_with_invalidate(3DAT): `num_segments` readable
        // triplets (the entry's contract).
        let t = unsafe { triplets(n, iov, 2) }?;
        // SAFETY: a cookie is 64 bits of consumer data in any variant.
        let c = unsafe { cookie.as_64 };
        post_with_flags(e, flags, 5, |ep, f| {
            ep.post_send_with_invalidate(&t, c, f, rmr_context)
        })
    })
}

pub(super) unsafe extern "C" fn ep_post_recv(
    ep: d::DAT_EP_HANDLE,
    n: d::DAT_COUNT,
    iov: *mut d::DAT_LMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
    flags: d::DAT_COMPLETION_FLAGS,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // SAFETY: `local_iov`, dat_ep_post_recv(3DAT): `num_segments` readable triplets (the
        // entry's contract).
        let t = unsafe { triplets(n, iov, 2) }?;
        let f = completion_flags(flags, 5)?;
        // SAFETY: a cookie is 64 bits of consumer data.
        let c = unsafe { cookie.as_64 };
        e.ep.post_recv_with(&t, c, f).map_err(|err| map(&err, 2))
    })
}

pub(super) unsafe extern "C" fn ep_post_rdma_read(
    ep: d::DAT_EP_HANDLE,
    n: d::DAT_COUNT,
    iov: *mut d::DAT_LMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
    remote: *const d::DAT_RMR_TRIPLET,
    flags: d::DAT_COMPLETION_FLAGS,
) -> d::DAT_RETURN {
    // SAFETY: `local_iov` and `remote_iov`, dat_ep_post_rdma_read(3DAT): `num_segments`
    // readable triplets and NULL or a readable RMR triplet (the entry's contract).
    unsafe { post_rdma(ep, n, iov, cookie, remote, flags, Ep::post_rdma_read_with) }
}

/// What dat_ep_post_rdma_read and dat_ep_post_rdma_write share: the handle, IOV (argument 2),
/// remote triplet (5) and flag (6) checks, then `op` with the flags ([`post_with_flags`]).
///
/// # Safety
/// When `n` > 0, `iov` is NULL or valid for reads of `n` `DAT_LMR_TRIPLET`s; `remote` is NULL
/// or valid for reads of a `DAT_RMR_TRIPLET` (aligned); both for the duration of the call.
unsafe fn post_rdma(
    ep: d::DAT_EP_HANDLE,
    n: d::DAT_COUNT,
    iov: *mut d::DAT_LMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
    remote: *const d::DAT_RMR_TRIPLET,
    flags: d::DAT_COMPLETION_FLAGS,
    op: impl FnOnce(
        &Ep,
        &[LmrTriplet],
        &RmrTriplet,
        u64,
        CompletionFlags,
    ) -> Result<(), crate::dat::DatError>,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // SAFETY: `iov` holds `n` readable triplets (this fn's contract).
        let t = unsafe { triplets(n, iov, 2) }?;
        // SAFETY: `remote` is NULL or a readable RMR triplet (this fn's contract).
        let r = unsafe { rmr(remote, 5) }?;
        // SAFETY: a cookie is 64 bits of consumer data.
        let c = unsafe { cookie.as_64 };
        post_with_flags(e, flags, 6, |ep, f| op(ep, &t, &r, c, f))
    })
}

/// dat_ep_post_rdma_read_to_rmr: an RDMA read whose local sink is a bound RMR of this IA
/// (`local`: rmr_context, address, length).
pub(super) unsafe extern "C" fn ep_post_rdma_read_to_rmr(
    ep: d::DAT_EP_HANDLE,
    local: *const d::DAT_RMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
    remote: *const d::DAT_RMR_TRIPLET,
    flags: d::DAT_COMPLETION_FLAGS,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // SAFETY: `local_iov` and `remote_iov`, dat_ep_post_rdma_read_to_rmr(3DAT): NULL or a
        // readable RMR triplet each (the entry's contract).
        let l = unsafe { rmr(local, 2) }?;
        // SAFETY: as for `local_iov` above.
        let r = unsafe { rmr(remote, 4) }?;
        // SAFETY: a cookie is 64 bits of consumer data.
        let c = unsafe { cookie.as_64 };
        post_with_flags(e, flags, 5, |ep, f| ep.post_rdma_read_to_rmr(&l, &r, c, f))
    })
}

pub(super) unsafe extern "C" fn ep_post_rdma_write(
    ep: d::DAT_EP_HANDLE,
    n: d::DAT_COUNT,
    iov: *mut d::DAT_LMR_TRIPLET,
    cookie: d::DAT_DTO_COOKIE,
    remote: *const d::DAT_RMR_TRIPLET,
    flags: d::DAT_COMPLETION_FLAGS,
) -> d::DAT_RETURN {
    // SAFETY: `local_iov` and `remote_iov`, dat_ep_post_rdma_write(3DAT): `num_segments`
    // readable triplets and NULL or a readable RMR triplet (the entry's contract).
    unsafe { post_rdma(ep, n, iov, cookie, remote, flags, Ep::post_rdma_write_with) }
}

pub(super) unsafe extern "C" fn ep_get_status(
    ep: d::DAT_EP_HANDLE,
    state: *mut d::DAT_EP_STATE,
    recv_idle: *mut d::DAT_BOOLEAN,
    request_idle: *mut d::DAT_BOOLEAN,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        let (s, r, q) = e.ep.get_status();
        // Each output is written only when not NULL, as the reference provider does.
        if !state.is_null() {
            // SAFETY: `ep_state` out-pointer, dat_ep_get_status(3DAT): NULL or writable (the
            // entry's contract).
            unsafe { put(state, 2, state_code(s)) }?;
        }
        if !recv_idle.is_null() {
            // SAFETY: `recv_idle` out-pointer, dat_ep_get_status(3DAT): NULL or writable (the
            // entry's contract).
            unsafe { put(recv_idle, 3, boolean(r)) }?;
        }
        if !request_idle.is_null() {
            // SAFETY: `request_idle` out-pointer, dat_ep_get_status(3DAT): NULL or writable (the
            // entry's contract).
            unsafe { put(request_idle, 4, boolean(q)) }?;
        }
        Ok(())
    })
}

pub(super) unsafe extern "C" fn ep_free(ep: d::DAT_EP_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        forget_ep(&o);
        handles::remove(o.handle);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn ep_reset(ep: d::DAT_EP_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        let old = e.ep.qpn();
        e.ep.reset().map_err(|err| map(&err, 0))?;
        let new = e.ep.qpn();
        o.ia.eps.change(|eps| {
            eps.remove(&old);
            eps.insert(new, o.handle);
        });
        Ok(())
    })
}

/// dat_ep_recv_query (seed 004): both values from one snapshot of the EP's receive
/// accounting; each is written "if ... is not NULL" (both NULL: nothing to report, success).
pub(super) unsafe extern "C" fn ep_recv_query(
    ep: d::DAT_EP_HANDLE,
    nbufs: *mut d::DAT_COUNT,
    span: *mut d::DAT_COUNT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        let q = e.ep.recv_query().map_err(|err| map(&err, 0))?;
        if !nbufs.is_null() {
            // SAFETY: `nbufs_allocated` out-pointer, dat_ep_recv_query(3DAT): NULL or writable
            // (the entry's contract).
            unsafe { put(nbufs, 2, q.nbufs_allocated as d::DAT_COUNT) }?;
        }
        if !span.is_null() {
            // SAFETY: `bufs_alloc_span` out-pointer, dat_ep_recv_query(3DAT): NULL or writable
            // (the entry's contract).
            unsafe { put(span, 3, q.bufs_alloc_span as d::DAT_COUNT) }?;
        }
        Ok(())
    })
}

/// dat_ep_set_watermark (seed 002): soft and hard high watermarks of the receive buffers at
/// the EP; DAT_WATERMARK_INFINITE ((DAT_COUNT)~0) turns one off.
pub(super) unsafe extern "C" fn ep_set_watermark(
    ep: d::DAT_EP_HANDLE,
    soft: d::DAT_COUNT,
    hard: d::DAT_COUNT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(ep, Kind::Ep)?;
        let e = ep_of(&o)?;
        // (DAT_COUNT)~0 is -1: as u32 it is the Rust API's WATERMARK_INFINITE; other negative
        // counts are refused there as invalid arguments.
        e.ep.set_watermark(soft as u32, hard as u32)
            .map_err(|err| map(&err, 0))
    })
}

#[cfg(test)]
mod flag_tests {
    use super::*;

    /// The Rust completion flags carry dat.h's values, and only those translate.
    #[test]
    fn completion_flags_have_the_values_of_dat_h() {
        for (f, c) in [
            (CompletionFlags::SUPPRESS, d::DAT_COMPLETION_SUPPRESS_FLAG),
            (
                CompletionFlags::SOLICITED_WAIT,
                d::DAT_COMPLETION_SOLICITED_WAIT_FLAG,
            ),
            (
                CompletionFlags::UNSIGNALLED,
                d::DAT_COMPLETION_UNSIGNALLED_FLAG,
            ),
            (
                CompletionFlags::BARRIER_FENCE,
                d::DAT_COMPLETION_BARRIER_FENCE_FLAG,
            ),
            (
                CompletionFlags::EVD_THRESHOLD,
                d::DAT_COMPLETION_EVD_THRESHOLD_FLAG,
            ),
            (
                CompletionFlags::LMR_INVALIDATE_FENCE,
                d::DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG,
            ),
        ] {
            assert_eq!(completion_flags(c, 5), Ok(f), "{f:?}");
        }
        assert_eq!(completion_flags(0x40, 5), Err(arg(5)));
        assert_eq!(completion_flags(0x3f, 7), Ok(CompletionFlags::all()));
    }
}
