//! Event dispatchers (dat_evd_*) and consumer notification objects (dat_cno_*), translated to
//! the Rust [`Evd`] and [`Cno`], which keep every state (enabled, waitable, the attachment,
//! when a CNO fires). This file maps handles to Rust objects and back (a CNO names its EVD,
//! an EVD its CNO, by the Rust object's id).

use super::codes::{arg, err, guard, map, nonnull, put};
use super::event::convert;
use super::handles::{self, Kind, Object};
use super::objects::{Body, CnoObj, EvdObj};
use super::state::lock;
use crate::dat::ia_attr::check_evd_qlen;
use crate::dat::{Cno, Evd, EvdFlags};
use dat_sys as d;
use rustc_hash::FxHashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// DAT_TIMEOUT_INFINITE.
const TIMEOUT_INFINITE: u32 = u32::MAX;

fn evd_of(o: &Object) -> Result<&EvdObj, u32> {
    match &o.body {
        Body::Evd(e) => Ok(e),
        _ => Err(Kind::Evd.invalid()),
    }
}

fn cno_of(o: &Object) -> Result<&CnoObj, u32> {
    match &o.body {
        Body::Cno(c) => Ok(c),
        _ => Err(Kind::Cno.invalid()),
    }
}

/// The handle of the EVD or CNO whose Rust object has `id`, in `map` (`IaState::evds`,
/// `IaState::cnos`); 0 for none.
fn handle_of(map: &Mutex<FxHashMap<u64, usize>>, id: Option<u64>) -> usize {
    id.and_then(|id| lock(map).get(&id).copied()).unwrap_or(0)
}

pub(super) unsafe extern "C" fn evd_create(
    ia: d::DAT_IA_HANDLE,
    qlen: d::DAT_COUNT,
    cno: d::DAT_CNO_HANDLE,
    flags: d::DAT_EVD_FLAGS,
    out: *mut d::DAT_EVD_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        // The Rust limit, checked first as before (Evd::create checks it again).
        let qlen = usize::try_from(qlen).map_err(|_| arg(2))?;
        check_evd_qlen(qlen, 2).map_err(|e| map(&e, 2))?;
        let cno = handles::get_opt(cno, Kind::Cno, Kind::Cno.invalid())?;
        // The Rust flags carry dat.h's values; Evd::create decides which it takes.
        let f = EvdFlags::from_bits(flags).ok_or(arg(4))?;
        nonnull(out, 5)?;
        let evd = {
            let g = ia.ia.ia();
            let ia_ref = g.as_ref().ok_or(Kind::Ia.invalid())?;
            let cno = cno.as_ref().map(|c| cno_of(c)).transpose()?;
            let evd = Evd::create(ia_ref, qlen, f).map_err(|e| map(&e, 2))?;
            evd.modify_cno(cno.map(|c| &c.cno))
                .map_err(|e| map(&e, 3))?;
            evd
        };
        let id = evd.id();
        let o = handles::insert(ia.ia.provider(), Kind::Evd, ia.ia.clone(), |_| {
            Body::Evd(EvdObj { evd })
        });
        lock(&ia.ia.evds).insert(id, o.handle);
        // SAFETY: `evd_handle` out-pointer, dat_evd_create(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(out, 5, o.handle as d::DAT_EVD_HANDLE) }
    })
}

pub(super) unsafe extern "C" fn evd_query(
    evd: d::DAT_EVD_HANDLE,
    _mask: d::DAT_EVD_PARAM_MASK,
    param: *mut d::DAT_EVD_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        let e = evd_of(&o)?;
        let mut state = if e.evd.is_enabled() {
            d::DAT_EVD_STATE_ENABLED
        } else {
            d::DAT_EVD_STATE_DISABLED
        };
        state |= if e.evd.is_waitable() {
            d::DAT_EVD_STATE_WAITABLE
        } else {
            d::DAT_EVD_STATE_UNWAITABLE
        };
        let p = d::DAT_EVD_PARAM {
            ia_handle: o.ia.handle() as d::DAT_IA_HANDLE,
            evd_qlen: e.evd.size() as i32,
            evd_state: state,
            cno_handle: handle_of(&o.ia.cnos, e.evd.query().cno) as d::DAT_CNO_HANDLE,
            evd_flags: e.evd.flags().bits(),
        };
        // SAFETY: `evd_param` out-pointer, dat_evd_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

pub(super) unsafe extern "C" fn evd_modify_cno(
    evd: d::DAT_EVD_HANDLE,
    cno: d::DAT_CNO_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        let e = evd_of(&o)?;
        let cno = handles::get_opt(cno, Kind::Cno, Kind::Cno.invalid())?;
        let cno = cno.as_ref().map(|c| cno_of(c)).transpose()?;
        e.evd
            .modify_cno(cno.map(|c| &c.cno))
            .map_err(|err| map(&err, 2))
    })
}

fn set_flag(evd: d::DAT_EVD_HANDLE, f: impl FnOnce(&EvdObj)) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        f(evd_of(&o)?);
        Ok(())
    })
}

pub(super) unsafe extern "C" fn evd_enable(evd: d::DAT_EVD_HANDLE) -> d::DAT_RETURN {
    set_flag(evd, |e| e.evd.enable())
}

pub(super) unsafe extern "C" fn evd_disable(evd: d::DAT_EVD_HANDLE) -> d::DAT_RETURN {
    set_flag(evd, |e| e.evd.disable())
}

/// Also releases a thread waiting in dat_evd_wait (DAT_INVALID_STATE).
pub(super) unsafe extern "C" fn evd_set_unwaitable(evd: d::DAT_EVD_HANDLE) -> d::DAT_RETURN {
    set_flag(evd, |e| e.evd.set_unwaitable())
}

pub(super) unsafe extern "C" fn evd_clear_unwaitable(evd: d::DAT_EVD_HANDLE) -> d::DAT_RETURN {
    set_flag(evd, |e| e.evd.clear_unwaitable())
}

fn deadline(timeout: u32) -> Option<Instant> {
    (timeout != TIMEOUT_INFINITE).then(|| Instant::now() + Duration::from_micros(timeout.into()))
}

fn remaining(dl: Option<Instant>) -> Option<Duration> {
    dl.map(|t| t.saturating_duration_since(Instant::now()))
}

/// dat_evd_wait: waits for `threshold` events, dequeues one, reports how many remain.
pub(super) unsafe extern "C" fn evd_wait(
    evd: d::DAT_EVD_HANDLE,
    timeout: d::DAT_TIMEOUT,
    threshold: d::DAT_COUNT,
    event: *mut d::DAT_EVENT,
    nmore: *mut d::DAT_COUNT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        let e = evd_of(&o)?;
        // The threshold's range and the EVD's state are Evd::wait's rules.
        let threshold = usize::try_from(threshold).map_err(|_| arg(3))?;
        nonnull(event, 4)?;
        nonnull(nmore, 5)?;
        let ev = e
            .evd
            .wait(remaining(deadline(timeout)), threshold)
            .map_err(|err| map(&err, 0))?;
        let mut out = d::DAT_EVENT::default();
        convert(&o, ev, &mut out);
        // SAFETY: `event` out-pointer, dat_evd_wait(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(event, 4, out) }?;
        let more = e.evd.len() as i32;
        // SAFETY: `n_more_events` out-pointer, dat_evd_wait(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(nmore, 5, more) }
    })
}

/// dat_evd_dequeue: the bare DAT_QUEUE_EMPTY when nothing is queued (dtest -p compares it).
pub(super) unsafe extern "C" fn evd_dequeue(
    evd: d::DAT_EVD_HANDLE,
    event: *mut d::DAT_EVENT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        let e = evd_of(&o)?;
        nonnull(event, 2)?;
        let ev = e.evd.dequeue().map_err(|err| map(&err, 0))?;
        let mut out = d::DAT_EVENT::default();
        convert(&o, ev, &mut out);
        // SAFETY: `event` out-pointer, dat_evd_dequeue(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(event, 2, out) }
    })
}

/// dat_evd_resize: a size below the events queued now is DAT_INVALID_STATE (the Rust EVD
/// keeps every queued event across the resize).
pub(super) unsafe extern "C" fn evd_resize(
    evd: d::DAT_EVD_HANDLE,
    qlen: d::DAT_COUNT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        let e = evd_of(&o)?;
        let qlen = usize::try_from(qlen).map_err(|_| arg(2))?;
        e.evd.resize(qlen).map_err(|err| map(&err, 2))
    })
}

/// dat_evd_post_se over [`Evd::post_se`] (which refuses an EVD without
/// DAT_EVD_SOFTWARE_FLAG).
pub(super) unsafe extern "C" fn evd_post_se(
    evd: d::DAT_EVD_HANDLE,
    event: *const d::DAT_EVENT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        let e = evd_of(&o)?;
        if event.is_null() {
            return Err(arg(2));
        }
        // SAFETY: non-NULL DAT_EVENT of the consumer, read once by value.
        let ev = unsafe { event.read() };
        // dat_evd_post_se(3DAT): the event is a software event; its data is the consumer's
        // pointer, what the Rust call takes.
        if ev.event_number != d::DAT_SOFTWARE_EVENT {
            return Err(arg(2));
        }
        // SAFETY: a DAT_SOFTWARE_EVENT's data is the software event member (dat.h).
        let pointer = unsafe { ev.event_data.software_event_data.pointer } as u64;
        e.evd.post_se(pointer).map_err(|err| map(&err, 0))
    })
}

pub(super) unsafe extern "C" fn evd_free(evd: d::DAT_EVD_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(evd, Kind::Evd)?;
        let e = evd_of(&o)?;
        e.evd.can_free().map_err(|e| map(&e, 0))?;
        // The Rust EVD detaches from its CNO when it goes.
        lock(&o.ia.evds).remove(&e.evd.id());
        handles::remove(o.handle);
        Ok(())
    })
}

/// dat_cno_create: the OS wait proxy agent is not kept, as no proxy runs here (dat_cno_query
/// reports DAT_PROXY_TYPE_NONE).
pub(super) unsafe extern "C" fn cno_create(
    ia: d::DAT_IA_HANDLE,
    _agent: d::DAT_OS_WAIT_PROXY_AGENT,
    out: *mut d::DAT_CNO_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let ia = handles::get(ia, Kind::Ia)?;
        nonnull(out, 3)?;
        let cno = {
            let g = ia.ia.ia();
            Cno::create(g.as_ref().ok_or(Kind::Ia.invalid())?).map_err(|e| map(&e, 1))?
        };
        let id = cno.id();
        let o = handles::insert(ia.ia.provider(), Kind::Cno, ia.ia.clone(), |_| {
            Body::Cno(CnoObj { cno })
        });
        lock(&ia.ia.cnos).insert(id, o.handle);
        // SAFETY: `cno_handle` out-pointer, dat_cno_create(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(out, 3, o.handle as d::DAT_CNO_HANDLE) }
    })
}

pub(super) unsafe extern "C" fn cno_fd_create(
    ia: d::DAT_IA_HANDLE,
    fd: *mut d::DAT_FD,
    out: *mut d::DAT_CNO_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let _ = handles::get(ia, Kind::Ia)?;
        nonnull(fd, 2)?;
        nonnull(out, 3)?;
        // No file descriptor signals completions here (the cores poll): not supported.
        Err(err(d::DAT_MODEL_NOT_SUPPORTED, 0))
    })
}

/// dat_cno_modify_agent: accepted and not kept (see `cno_create`).
pub(super) unsafe extern "C" fn cno_modify_agent(
    cno: d::DAT_CNO_HANDLE,
    _agent: d::DAT_OS_WAIT_PROXY_AGENT,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cno, Kind::Cno)?;
        cno_of(&o).map(|_| ())
    })
}

pub(super) unsafe extern "C" fn cno_query(
    cno: d::DAT_CNO_HANDLE,
    _mask: d::DAT_CNO_PARAM_MASK,
    param: *mut d::DAT_CNO_PARAM,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cno, Kind::Cno)?;
        let _ = cno_of(&o)?;
        let mut p = d::DAT_CNO_PARAM::default();
        p.ia_handle = o.ia.handle() as d::DAT_IA_HANDLE;
        p.proxy_type = d::DAT_PROXY_TYPE_NONE;
        // SAFETY: `cno_param` out-pointer, dat_cno_query(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(param, 3, p) }
    })
}

pub(super) unsafe extern "C" fn cno_free(cno: d::DAT_CNO_HANDLE) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cno, Kind::Cno)?;
        let c = cno_of(&o)?;
        c.cno.can_free().map_err(|e| map(&e, 0))?;
        lock(&o.ia.cnos).remove(&c.cno.id());
        handles::remove(o.handle);
        Ok(())
    })
}

/// dat_cno_wait: returns the handle of the attached EVD that triggered it (an event arrived
/// on it while enabled, [`Cno::wait`]), or DAT_TIMEOUT_EXPIRED.
pub(super) unsafe extern "C" fn cno_wait(
    cno: d::DAT_CNO_HANDLE,
    timeout: d::DAT_TIMEOUT,
    evd: *mut d::DAT_EVD_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cno, Kind::Cno)?;
        let c = cno_of(&o)?;
        nonnull(evd, 3)?;
        let timeout = (timeout != TIMEOUT_INFINITE).then(|| Duration::from_micros(timeout.into()));
        let id = c.cno.wait(timeout).map_err(|e| map(&e, 0))?;
        let h = handle_of(&o.ia.evds, Some(id)) as d::DAT_EVD_HANDLE;
        // SAFETY: `evd_handle` out-pointer, dat_cno_wait(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(evd, 3, h) }
    })
}

/// dat_cno_trigger: the EVD that made the CNO ready, without waiting ([`Cno::trigger`]).
pub(super) unsafe extern "C" fn cno_trigger(
    cno: d::DAT_CNO_HANDLE,
    evd: *mut d::DAT_EVD_HANDLE,
) -> d::DAT_RETURN {
    guard(|| {
        let o = handles::get(cno, Kind::Cno)?;
        let c = cno_of(&o)?;
        nonnull(evd, 2)?;
        let id = c.cno.trigger().map_err(|e| map(&e, 0))?;
        let h = handle_of(&o.ia.evds, Some(id)) as d::DAT_EVD_HANDLE;
        // SAFETY: `evd_handle` out-pointer, dat_cno_trigger(3DAT): NULL or writable (the entry's
        // contract).
        unsafe { put(evd, 2, h) }
    })
}
