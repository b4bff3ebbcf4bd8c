//! Handles of the C provider: every handle the consumer holds is the address of a small heap
//! header whose first word is the `DAT_PROVIDER*` (libdat2 dispatches through it,
//! udat_redirection.h), and a process-wide registry maps live addresses to their objects. A
//! handle is only ever looked up, never dereferenced, so a stale or garbage pointer is
//! DAT_INVALID_HANDLE with the subtype of the expected kind, not a crash.

use super::codes::err;
use super::objects::Body;
use super::state::IaState;
use dat_sys as d;
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};

/// The header a handle points at (`DAT_PROVIDER*` first, as libdat2 requires).
#[repr(C)]
pub(crate) struct Header {
    pub provider: *const d::DAT_PROVIDER,
}

/// Kinds of handles: the Rust object kinds (DAT_HANDLE_TYPE_*).
pub(crate) use crate::dat::ObjectKind as Kind;

impl Kind {
    /// dat_get_handle_type(3DAT).
    pub fn handle_type(self) -> d::DAT_HANDLE_TYPE {
        match self {
            Kind::Ia => d::DAT_HANDLE_TYPE_IA,
            Kind::Pz => d::DAT_HANDLE_TYPE_PZ,
            Kind::Lmr => d::DAT_HANDLE_TYPE_LMR,
            Kind::Rmr => d::DAT_HANDLE_TYPE_RMR,
            Kind::Evd => d::DAT_HANDLE_TYPE_EVD,
            Kind::Cno => d::DAT_HANDLE_TYPE_CNO,
            Kind::Ep => d::DAT_HANDLE_TYPE_EP,
            Kind::Srq => d::DAT_HANDLE_TYPE_SRQ,
            Kind::Psp => d::DAT_HANDLE_TYPE_PSP,
            Kind::Rsp => d::DAT_HANDLE_TYPE_RSP,
            Kind::Cr => d::DAT_HANDLE_TYPE_CR,
        }
    }

    /// The DAT_INVALID_HANDLE subtype of this kind (dat_error.h).
    pub fn invalid(self) -> d::DAT_RETURN {
        let sub = match self {
            Kind::Ia => d::DAT_INVALID_HANDLE_IA,
            Kind::Pz => d::DAT_INVALID_HANDLE_PZ,
            Kind::Lmr => d::DAT_INVALID_HANDLE_LMR,
            Kind::Rmr => d::DAT_INVALID_HANDLE_RMR,
            Kind::Evd => d::DAT_INVALID_HANDLE_EVD_REQUEST,
            Kind::Cno => d::DAT_INVALID_HANDLE_CNO,
            Kind::Ep => d::DAT_INVALID_HANDLE_EP,
            Kind::Srq => d::DAT_INVALID_HANDLE_SRQ,
            Kind::Psp => d::DAT_INVALID_HANDLE_PSP,
            Kind::Rsp => d::DAT_INVALID_HANDLE_RSP,
            Kind::Cr => d::DAT_INVALID_HANDLE_CR,
        };
        err(d::DAT_INVALID_HANDLE, sub)
    }
}

/// One live object behind a handle.
pub(crate) struct Object {
    pub kind: Kind,
    /// The handle (the header's address).
    pub handle: usize,
    /// The IA the object belongs to (an IA: itself).
    pub ia: Arc<IaState>,
    /// The consumer context (dat_set_consumer_context), a DAT_CONTEXT's 64 bits.
    pub context: AtomicU64,
    pub body: Body,
}

/// Handles by address. Fx hashing: the keys are this process's own allocations, and the
/// lookup is on every DAT call's path.
type Map = FxHashMap<usize, Arc<Object>>;

fn registry() -> &'static RwLock<Map> {
    static REG: OnceLock<RwLock<Map>> = OnceLock::new();
    REG.get_or_init(|| RwLock::new(FxHashMap::default()))
}

fn read() -> std::sync::RwLockReadGuard<'static, Map> {
    registry().read().unwrap_or_else(|p| p.into_inner())
}

fn write() -> std::sync::RwLockWriteGuard<'static, Map> {
    registry().write().unwrap_or_else(|p| p.into_inner())
}

/// Freed handle headers, oldest first. libdat2 reads the first word of every non-NULL handle
/// a consumer passes and calls through it (udat_redirection.h), so a header is never given
/// back to the allocator (whose free-list word would replace the `DAT_PROVIDER*`): a freed
/// handle keeps pointing at its table and is answered DAT_INVALID_HANDLE. Headers are reused
/// only after [`QUARANTINE`] newer ones were freed, so a recently freed handle never aliases a
/// new object.
fn freed() -> &'static std::sync::Mutex<std::collections::VecDeque<usize>> {
    static FREED: OnceLock<std::sync::Mutex<std::collections::VecDeque<usize>>> = OnceLock::new();
    FREED.get_or_init(Default::default)
}

/// How many freed headers wait before one is reused (8 bytes each).
pub(crate) const QUARANTINE: usize = 4096;

fn new_header(provider: *const d::DAT_PROVIDER) -> usize {
    let reuse = {
        let mut f = freed().lock().unwrap_or_else(|p| p.into_inner());
        if f.len() > QUARANTINE {
            f.pop_front()
        } else {
            None
        }
    };
    match reuse {
        Some(h) => {
            // SAFETY: `h` is a header leaked by `insert` and unregistered by `remove`; no
            // registry entry refers to it, so this thread is its only writer.
            unsafe { (h as *mut Header).write(Header { provider }) };
            h
        }
        None => Box::into_raw(Box::new(Header { provider })) as usize,
    }
}

/// Allocates a handle for a new object of `kind` and registers it.
pub(crate) fn insert(
    provider: *const d::DAT_PROVIDER,
    kind: Kind,
    ia: Arc<IaState>,
    body: impl FnOnce(usize) -> Body,
) -> Arc<Object> {
    let handle = new_header(provider);
    let obj = Arc::new(Object {
        kind,
        handle,
        ia,
        context: AtomicU64::new(0),
        body: body(handle),
    });
    write().insert(handle, obj.clone());
    obj
}

/// Bumped by every [`remove`]: a thread's [`RECENT`] lookups are valid while it is unchanged
/// (a handle only names another object after its old one was removed).
static REMOVALS: AtomicU64 = AtomicU64::new(0);

/// Slots of a thread's lookup cache (direct-mapped by handle address).
const RECENT_SLOTS: usize = 16;
const _: () = assert!(RECENT_SLOTS.is_power_of_two());

/// A thread's recent lookups and the [`REMOVALS`] count they were made at. The data path
/// (a post and a dequeue per message) looks up the same few handles again and again; the
/// cache spares it the registry's lock. It holds weak references: an object still goes with
/// its last user (an EP's QP with dat_ep_free), never with a thread's cache.
struct Recent {
    removals: u64,
    slots: [Option<(usize, Weak<Object>)>; RECENT_SLOTS],
}

thread_local! {
    static RECENT: RefCell<Recent> = const {
        RefCell::new(Recent {
            removals: 0,
            slots: [const { None }; RECENT_SLOTS],
        })
    };
}

/// A handle's slot: a multiplicative hash (headers are small allocations a fixed stride
/// apart, so their low bits repeat).
fn recent_slot(handle: usize) -> usize {
    (handle as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) as usize
        >> (usize::BITS - RECENT_SLOTS.trailing_zeros())
}

/// The live object of `handle`, from this thread's cache or the registry.
fn lookup(handle: usize) -> Option<Arc<Object>> {
    let removals = REMOVALS.load(Ordering::Acquire);
    let cached = RECENT.try_with(|r| {
        let mut r = r.borrow_mut();
        if r.removals != removals {
            r.slots = [const { None }; RECENT_SLOTS];
            r.removals = removals;
            return None;
        }
        match &r.slots[recent_slot(handle)] {
            Some((h, o)) if *h == handle => o.upgrade(),
            _ => None,
        }
    });
    if let Ok(Some(o)) = cached {
        return Some(o);
    }
    let o = read().get(&handle).cloned()?;
    // Cached only if no removal ran since `removals` was read: the registry's answer may
    // predate a removal whose count is newer.
    let _ = RECENT.try_with(|r| {
        let mut r = r.borrow_mut();
        if r.removals == removals && REMOVALS.load(Ordering::Acquire) == removals {
            r.slots[recent_slot(handle)] = Some((handle, Arc::downgrade(&o)));
        }
    });
    Some(o)
}

/// The live object of `handle` if it is of `kind` (else DAT_INVALID_HANDLE of `kind`).
pub(crate) fn get(handle: *mut core::ffi::c_void, kind: Kind) -> Result<Arc<Object>, u32> {
    match lookup(handle as usize) {
        Some(o) if o.kind == kind => Ok(o),
        _ => Err(kind.invalid()),
    }
}

/// `get` with another error code (e.g. an EVD argument's subtype).
pub(crate) fn get_or(
    handle: *mut core::ffi::c_void,
    kind: Kind,
    code: u32,
) -> Result<Arc<Object>, u32> {
    get(handle, kind).map_err(|_| code)
}

/// `get` for an optional handle (DAT_HANDLE_NULL is `None`).
pub(crate) fn get_opt(
    handle: *mut core::ffi::c_void,
    kind: Kind,
    code: u32,
) -> Result<Option<Arc<Object>>, u32> {
    if handle.is_null() {
        Ok(None)
    } else {
        get_or(handle, kind, code).map(Some)
    }
}

/// Any live object (for the calls that take a DAT_HANDLE of any kind).
pub(crate) fn get_any(handle: *mut core::ffi::c_void) -> Result<Arc<Object>, u32> {
    lookup(handle as usize).ok_or(err(d::DAT_INVALID_HANDLE, 0))
}

/// Unregisters `handle` and quarantines its header, which keeps its `DAT_PROVIDER*` (see
/// [`freed`]); the object itself goes with its last user.
pub(crate) fn remove(handle: usize) -> Option<Arc<Object>> {
    let obj = write().remove(&handle)?;
    REMOVALS.fetch_add(1, Ordering::AcqRel);
    freed()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push_back(handle);
    Some(obj)
}

/// The live objects of an IA other than the IA itself.
pub(crate) fn of_ia(ia: &Arc<IaState>) -> Vec<Arc<Object>> {
    read()
        .values()
        .filter(|o| Arc::ptr_eq(&o.ia, ia) && o.kind != Kind::Ia)
        .cloned()
        .collect()
}
