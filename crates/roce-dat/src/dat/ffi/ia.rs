//! dat_ia_open / dat_ia_query / dat_ia_close, consumer contexts, handle types, HA relation.

use super::codes::{arg, boolean, err, guard, nonnull, put, R};
use super::handles::{self, Kind, Object};
use super::objects::{Body, EvdObj};
use super::state::{lock, IaState};
use crate::config::Profile;
use crate::dat::{ia_attr, Evd, Ia};
use dat_sys as d;
use std::ffi::{c_char, CStr};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An IA name as a Rust string (NULL: argument 1).
///
/// # Safety
/// `name` is NULL or a NUL-terminated C string readable for the duration of the call.
unsafe fn name_of(name: *const c_char) -> Result<String, u32> {
    if name.is_null() {
        return Err(arg(1));
    }
    // SAFETY: `name` is a readable C string (this fn's contract), non-NULL (checked above).
    Ok(unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned())
}

/// dat_ia_open: opens the IA on the profile named by the IA's `ia_params`.
pub(super) unsafe extern "C" fn ia_open(
    name: d::DAT_NAME_PTR,
    async_evd_qlen: d::DAT_COUNT,
    async_evd: *mut d::DAT_EVD_HANDLE,
    ia_handle: *mut d::DAT_IA_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        // SAFETY: `name`, dat_ia_open(3DAT): NULL or a C string (the entry's contract).
        let name = unsafe { name_of(name) }?;
        nonnull(async_evd, 3)?;
        nonnull(ia_handle, 4)?;
        // SAFETY: checked non-NULL; an IN/OUT handle of the consumer.
        let given = unsafe { *async_evd };
        // A consumer's async EVD (the Rust rules of Ia::open_with_async_evd), or a new one of
        // at least `async_evd_qlen` entries (checked only then, as in the OFA provider).
        let given = if given.is_null() {
            ia_attr::async_evd_qlen(async_evd_qlen.into()).map_err(|e| e.code())?;
            None
        } else {
            let async_invalid = err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_EVD_ASYNC);
            let o = handles::get(given, Kind::Evd).map_err(|_| async_invalid)?;
            Some(o)
        };
        let (provider, params) = super::lookup(&name).ok_or(err(d::DAT_PROVIDER_NOT_FOUND, 0))?;
        let profile = Profile::load_with_env(params.trim()).map_err(|e| {
            tracing::error!("IA {name}: profile {params:?}: {e}");
            arg(1)
        })?;
        let pmtu = profile.roce_pmtu().bytes();
        let (ia_h, evd_h) = match &given {
            Some(o) => {
                let Body::Evd(e) = &o.body else {
                    return Err(Kind::Evd.invalid());
                };
                let ia = Ia::open_with_async_evd(&profile, &e.evd).map_err(|e| e.code())?;
                let (ia_h, _) = register_sharing(provider, &name, &profile.name, ia, pmtu, o);
                (ia_h, o.handle)
            }
            None => {
                let ia = Ia::open(&profile).map_err(|e| {
                    tracing::error!("IA {name}: open: {e}");
                    err(d::DAT_INTERNAL_ERROR, 0)
                })?;
                ia.reserve_async_events(async_evd_qlen.into())
                    .map_err(|e| e.code())?;
                let (ia_h, evd_h, _) = register(provider, &name, &profile.name, ia, pmtu);
                (ia_h, evd_h)
            }
        };
        // SAFETY: `async_evd_handle` in/out-pointer, dat_ia_open(3DAT): writable (the entry's
        // contract).
        unsafe { put(async_evd, 3, evd_h as d::DAT_EVD_HANDLE) }?;
        // SAFETY: `ia_handle` out-pointer, dat_ia_open(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(ia_handle, 4, ia_h as d::DAT_IA_HANDLE) }
    })
}

/// Registers an IA opened with the async EVD of handle object `evd` (another IA's) as a handle
/// of `provider`; returns the IA handle and its state.
pub(super) fn register_sharing(
    provider: *const d::DAT_PROVIDER,
    name: &str,
    profile_name: &str,
    ia: Ia,
    pmtu: u32,
    evd: &Object,
) -> (usize, Arc<IaState>) {
    let (ia_h, state) = register_ia(provider, name, profile_name, ia, pmtu);
    state.async_evd.store(evd.handle, Ordering::Relaxed);
    evd.ia.add_async_sharer(&state);
    (ia_h, state)
}

/// Registers an open IA as a handle of `provider`; returns the handle and its state.
fn register_ia(
    provider: *const d::DAT_PROVIDER,
    name: &str,
    profile_name: &str,
    ia: Ia,
    pmtu: u32,
) -> (usize, Arc<IaState>) {
    let state = Arc::new(IaState::new(
        provider as usize,
        name,
        profile_name,
        ia,
        pmtu,
    ));
    let ia_obj = handles::insert(provider, Kind::Ia, state.clone(), |_| Body::Ia);
    state.handle.store(ia_obj.handle, Ordering::Relaxed);
    (ia_obj.handle, state)
}

/// Registers an open IA as a handle of `provider`, with its async EVD; returns both handles.
pub(super) fn register(
    provider: *const d::DAT_PROVIDER,
    name: &str,
    profile_name: &str,
    ia: Ia,
    pmtu: u32,
) -> (usize, usize, Arc<IaState>) {
    let async_evd_obj = Evd {
        inner: ia.async_evd().inner.clone(),
    };
    let async_id = async_evd_obj.id();
    let (ia_h, state) = register_ia(provider, name, profile_name, ia, pmtu);
    let evd = handles::insert(provider, Kind::Evd, state.clone(), |_| {
        Body::Evd(EvdObj { evd: async_evd_obj })
    });
    lock(&state.evds).insert(async_id, evd.handle);
    state.async_evd.store(evd.handle, Ordering::Relaxed);
    (ia_h, evd.handle, state)
}

/// Frees the objects of an IA (DAT_CLOSE_ABRUPT_FLAG) in the Rust order.
fn free_all(state: &Arc<IaState>) {
    let objs = handles::of_ia(state);
    for kind in Kind::ABRUPT_CLOSE_ORDER {
        for o in objs.iter().filter(|o| o.kind == kind) {
            super::ep::forget_ep(o);
            handles::remove(o.handle);
        }
    }
}

/// dat_ia_close: graceful (refused while objects other than the async EVD are open) or abrupt
/// (frees everything of the IA).
pub(super) unsafe extern "C" fn ia_close(
    ia: d::DAT_IA_HANDLE,
    flags: d::DAT_CLOSE_FLAGS,
) -> d::DAT_RETURN {
    guard(|| {
        let obj = handles::get(ia, Kind::Ia)?;
        let state = obj.ia.clone();
        let abrupt = match flags {
            d::DAT_CLOSE_GRACEFUL_FLAG => false,
            d::DAT_CLOSE_ABRUPT_FLAG => true,
            _ => return Err(arg(2)),
        };
        if abrupt {
            free_all(&state);
        }
        // The Rust IA decides (Ia::close: refused while an object of it is open); a refused
        // graceful close leaves the IA as it was.
        let ia = state.take().ok_or(Kind::Ia.invalid())?;
        let shares_async_evd = ia.shares_async_evd();
        match ia.close() {
            Ok(()) => {}
            Err(refused) if !abrupt => {
                let code = refused.error.code();
                state.restore(refused.object);
                return Err(code);
            }
            // Objects a concurrent call still holds end when it lets them go.
            Err(_) => {}
        }
        // A shared async EVD stays with the IA that made it.
        if !shares_async_evd {
            handles::remove(state.async_evd.load(Ordering::Relaxed));
        }
        handles::remove(obj.handle);
        Ok(())
    })
}

fn copy_name(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len() - 1);
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
    dst[n] = 0;
}

/// dat_ia_query: the IA attributes (address = the profile's IPv4 address) and the provider
/// attributes with the provider-specific ones the DAT test programs read.
pub(super) unsafe extern "C" fn ia_query(
    ia: d::DAT_IA_HANDLE,
    async_evd: *mut d::DAT_EVD_HANDLE,
    ia_mask: d::DAT_IA_ATTR_MASK,
    ia_attr: *mut d::DAT_IA_ATTR,
    prov_mask: d::DAT_PROVIDER_ATTR_MASK,
    prov_attr: *mut d::DAT_PROVIDER_ATTR,
) -> d::DAT_RETURN {
    guard(|| {
        let obj = handles::get(ia, Kind::Ia)?;
        // dat_ia_query(3DAT): a mask asking for attributes needs somewhere to put them (dapltest
        // fft queryinfo case 10 expects DAT_INVALID_PARAMETER); a zero mask may come with NULL.
        if ia_mask != 0 && ia_attr.is_null() {
            return Err(arg(4));
        }
        if prov_mask != 0 && prov_attr.is_null() {
            return Err(arg(6));
        }
        let st = &obj.ia;
        if !async_evd.is_null() {
            let h = st.async_evd.load(Ordering::Relaxed) as d::DAT_EVD_HANDLE;
            // SAFETY: `async_evd_handle` out-pointer, dat_ia_query(3DAT): NULL or writable (the
            // entry's contract).
            unsafe { put(async_evd, 2, h) }?;
        }
        if !ia_attr.is_null() {
            let mut a = d::DAT_IA_ATTR::default();
            let q = st
                .ia()
                .as_ref()
                .map(Ia::query)
                .ok_or(err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_IA))?;
            copy_name(
                &mut a.adapter_name,
                &format!("{} {}", q.adapter_name, st.profile_name),
            );
            copy_name(&mut a.vendor_name, q.vendor_name);
            a.hardware_version_major = 0;
            a.firmware_version_major = 0;
            a.ia_address_ptr = st.addr.as_dat();
            let c = |v: u32| i32::try_from(v).unwrap_or(i32::MAX);
            a.max_eps = c(q.max_eps);
            a.max_dto_per_ep = c(q.max_dto_per_ep);
            a.max_rdma_read_per_ep_in = c(q.max_rdma_read_per_ep);
            a.max_rdma_read_per_ep_out = c(q.max_rdma_read_per_ep);
            a.max_evds = c(q.max_evds);
            a.max_evd_qlen = c(q.max_evd_qlen);
            a.max_iov_segments_per_dto = c(q.max_iov_segments_per_dto);
            a.max_lmrs = c(q.max_lmrs);
            a.max_lmr_block_size = u32::try_from(q.max_lmr_block_size).unwrap_or(u32::MAX);
            a.max_lmr_virtual_address = q.max_lmr_virtual_address;
            a.max_pzs = c(q.max_pzs);
            a.max_message_size = q.max_message_size;
            a.max_rdma_size = q.max_rdma_size;
            a.max_rmrs = c(q.max_rmrs);
            a.max_rmr_target_address = q.max_rmr_target_address;
            a.max_srqs = c(q.max_srqs);
            a.max_ep_per_srq = c(q.max_ep_per_srq);
            a.max_recv_per_srq = c(q.max_recv_per_srq);
            a.max_iov_segments_per_rdma_read = c(q.max_iov_segments_per_rdma_read);
            a.max_iov_segments_per_rdma_write = c(q.max_iov_segments_per_rdma_write);
            a.max_rdma_read_in = c(q.max_rdma_read_in);
            a.max_rdma_read_out = c(q.max_rdma_read_out);
            a.max_rdma_read_per_ep_in_guaranteed = boolean(q.max_rdma_read_per_ep_guaranteed);
            a.max_rdma_read_per_ep_out_guaranteed = boolean(q.max_rdma_read_per_ep_guaranteed);
            a.zb_supported = boolean(q.zb_supported);
            a.extension_supported = d::DAT_EXTENSION_IB;
            a.extension_version = 1;
            // SAFETY: checked non-NULL; consumer storage for a DAT_IA_ATTR.
            unsafe { ia_attr.write(a) };
        }
        if !prov_attr.is_null() {
            let mut p = d::DAT_PROVIDER_ATTR::default();
            copy_name(&mut p.provider_name, &st.name);
            let pa = st
                .ia()
                .as_ref()
                .map(Ia::provider_attr)
                .ok_or(err(d::DAT_INVALID_HANDLE, d::DAT_INVALID_HANDLE_IA))?;
            (p.provider_version_major, p.provider_version_minor) = pa.provider_version;
            (p.dapl_version_major, p.dapl_version_minor) = pa.dapl_version;
            p.lmr_mem_types_supported = d::DAT_MEM_TYPE_VIRTUAL;
            p.iov_ownership_on_return = d::DAT_IOV_CONSUMER;
            p.dat_qos_supported = crate::dat::Qos::SUPPORTED;
            p.completion_flags_supported = pa.completion_flags_supported.bits();
            p.is_thread_safe = boolean(pa.thread_safe);
            p.max_private_data_size = pa.max_private_data_size as i32;
            p.supports_multipath = boolean(pa.supports_multipath);
            p.ep_creator = if pa.provider_creates_eps_if_asked {
                d::DAT_PSP_CREATES_EP_IFASKED
            } else {
                d::DAT_PSP_CREATES_EP_NEVER
            };
            p.pz_support = if pa.pz_unique {
                d::DAT_PZ_UNIQUE
            } else {
                d::DAT_PZ_SHAREABLE
            };
            p.optimal_buffer_alignment = pa.optimal_buffer_alignment;
            p.srq_supported = boolean(pa.srq_supported);
            p.srq_watermarks_supported = boolean(pa.srq_watermarks_supported) as i32;
            p.srq_ep_pz_difference_supported = boolean(pa.srq_ep_pz_difference_supported);
            p.srq_info_supported = boolean(pa.srq_info_supported) as i32;
            p.ep_recv_info_supported = boolean(pa.ep_recv_info_supported) as i32;
            p.lmr_sync_req = boolean(pa.lmr_sync_req);
            p.dto_async_return_guaranteed = boolean(pa.dto_async_return_guaranteed);
            p.rdma_write_for_rdma_read_req = boolean(pa.rdma_write_for_rdma_read_req);
            p.rdma_read_lmr_rmr_context_exposure = boolean(pa.rdma_read_lmr_rmr_context_exposure);
            p.rmr_scope_supported = if pa.rmr_scope_any {
                d::DAT_RMR_SCOPE_ANY
            } else {
                d::DAT_RMR_SCOPE_EP
            };
            p.is_signal_safe = boolean(pa.signal_safe);
            p.ha_supported = boolean(pa.ha_supported);
            p.num_provider_specific_attr = st.provider_attrs.count();
            p.provider_specific_attr = st.provider_attrs.as_ptr();
            // SAFETY: checked non-NULL; consumer storage for a DAT_PROVIDER_ATTR.
            unsafe { prov_attr.write(p) };
        }
        Ok(())
    })
}

/// dat_set_consumer_context.
pub(super) unsafe extern "C" fn set_consumer_context(
    h: d::DAT_HANDLE,
    ctx: d::DAT_CONTEXT,
) -> d::DAT_RETURN {
    guard(|| {
        let o: Arc<Object> = handles::get_any(h)?;
        // SAFETY: every DAT_CONTEXT variant fits in its 64 bits; reading as_64 reads them all.
        o.context.store(unsafe { ctx.as_64 }, Ordering::Relaxed);
        Ok(())
    })
}

/// dat_get_consumer_context.
pub(super) unsafe extern "C" fn get_consumer_context(
    h: d::DAT_HANDLE,
    ctx: *mut d::DAT_CONTEXT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get_any(h)?;
        let v = d::DAT_CONTEXT {
            as_64: o.context.load(Ordering::Relaxed),
        };
        // SAFETY: `context` out-pointer, dat_get_consumer_context(3DAT): NULL or writable (the
        // entry's contract).
        unsafe { put(ctx, 2, v) }
    })
}

/// dat_get_handle_type.
pub(super) unsafe extern "C" fn get_handle_type(
    h: d::DAT_HANDLE,
    ty: *mut d::DAT_HANDLE_TYPE,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get_any(h)?;
        // SAFETY: `handle_type` out-pointer, dat_get_handle_type(3DAT): NULL or writable (the
        // entry's contract).
        unsafe { put(ty, 2, o.kind.handle_type()) }
    })
}

/// dat_ia_ha_related: whether another IA name reaches the same port (HA is not supported:
/// only the IA's own name is related).
pub(super) unsafe extern "C" fn ia_ha_related(
    ia: d::DAT_IA_HANDLE,
    name: d::DAT_NAME_PTR,
    answer: *mut d::DAT_BOOLEAN,
) -> d::DAT_RETURN {
    guard(|| -> R {
        let obj = handles::get(ia, Kind::Ia)?;
        // SAFETY: `name` (argument 2), dat_ia_ha_related(3DAT): NULL or a C string (the entry's
        // contract).
        let name = unsafe { name_of(name) }.map_err(|_| arg(2))?;
        let same = name == obj.ia.name;
        // SAFETY: `answer` out-pointer, dat_ia_ha_related(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(answer, 3, boolean(same)) }
    })
}
