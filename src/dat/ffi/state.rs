//! The provider-side state of one open IA: the Rust [`Ia`], its address as a `sockaddr_in`
//! or `sockaddr_in6` the consumer can point at, the provider attributes the test programs read,
//! and the maps from engine identities (QPN, connection qualifier) back to handles.

pub(crate) use super::sockaddr::SockAddr;
use crate::dat::Ia;
use dat_sys as d;
use rustc_hash::FxHashMap;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, Weak};

/// Named attributes (DAT_NAMED_ATTR) over owned strings.
pub(crate) struct NamedAttrs {
    list: Vec<d::DAT_NAMED_ATTR>,
    _strings: Vec<CString>,
}

// SAFETY: the raw pointers in `list` point into `_strings`, owned by this value and never
// changed after construction; sharing read-only pointers to immutable bytes is thread-safe.
unsafe impl Send for NamedAttrs {}
// SAFETY: as above: immutable after construction.
unsafe impl Sync for NamedAttrs {}

impl NamedAttrs {
    pub fn new(pairs: &[(&str, String)]) -> NamedAttrs {
        let mut strings = Vec::new();
        let mut list = Vec::new();
        for (k, v) in pairs {
            let k = CString::new(*k).unwrap_or_default();
            let v = CString::new(v.as_str()).unwrap_or_default();
            list.push(d::DAT_NAMED_ATTR {
                name: k.as_ptr(),
                value: v.as_ptr(),
            });
            strings.push(k);
            strings.push(v);
        }
        NamedAttrs {
            list,
            _strings: strings,
        }
    }

    pub fn count(&self) -> i32 {
        self.list.len() as i32
    }

    pub fn as_ptr(&self) -> *mut d::DAT_NAMED_ATTR {
        self.list.as_ptr() as *mut d::DAT_NAMED_ATTR
    }
}

/// One open IA.
pub(crate) struct IaState {
    /// The `DAT_PROVIDER*` of the IA name (as an address: the table is static).
    pub provider: usize,
    pub name: String,
    pub profile_name: String,
    ia: RwLock<Option<Ia>>,
    pub addr: SockAddr,
    pub handle: AtomicUsize,
    pub async_evd: AtomicUsize,
    /// EP handles by QPN (events name their EP by QPN).
    pub eps: Mutex<FxHashMap<u32, usize>>,
    /// EVD and CNO handles by the id of their Rust object (a CNO names its EVDs, an EVD its
    /// CNO, by id).
    pub evds: Mutex<FxHashMap<u64, usize>>,
    pub cnos: Mutex<FxHashMap<u64, usize>>,
    /// RMR handles by [`Rmr::id`](crate::dat::Rmr::id) (bind completions name their RMR).
    pub rmrs: Mutex<FxHashMap<u64, usize>>,
    /// SRQ handles by (shard, SRQ number) (low-watermark events name their SRQ so).
    pub srqs: Mutex<HashMap<(usize, u32), usize>>,
    /// PSP/RSP handles by connection qualifier.
    pub sps: Mutex<HashMap<u16, usize>>,
    pub provider_attrs: NamedAttrs,
    /// The IAs opened with this IA's async EVD (dat_ia_open given it): their EPs' and SRQs'
    /// asynchronous events arrive on it and name their handles.
    pub async_sharers: Mutex<Vec<Weak<IaState>>>,
}

impl IaState {
    pub fn new(
        provider: usize,
        name: &str,
        profile_name: &str,
        ia: Ia,
        pmtu_bytes: u32,
    ) -> IaState {
        let attrs = NamedAttrs::new(&[
            ("DAT_IB_RDMA_READ", "TRUE".into()),
            ("DAT_IB_TRANSPORT_MTU", pmtu_bytes.to_string()),
            ("DAT_IB_CMP_AND_SWAP", "TRUE".into()),
            ("DAT_IB_FETCH_AND_ADD", "TRUE".into()),
            ("DAT_IB_IMMED_DATA", "TRUE".into()),
        ]);
        IaState {
            provider,
            name: name.to_string(),
            profile_name: profile_name.to_string(),
            addr: SockAddr::new(ia.address()),
            ia: RwLock::new(Some(ia)),
            handle: AtomicUsize::new(0),
            async_evd: AtomicUsize::new(0),
            eps: Mutex::new(FxHashMap::default()),
            evds: Mutex::new(FxHashMap::default()),
            cnos: Mutex::new(FxHashMap::default()),
            rmrs: Mutex::new(FxHashMap::default()),
            srqs: Mutex::new(HashMap::new()),
            sps: Mutex::new(HashMap::new()),
            provider_attrs: attrs,
            async_sharers: Mutex::new(Vec::new()),
        }
    }

    pub fn provider(&self) -> *const d::DAT_PROVIDER {
        self.provider as *const d::DAT_PROVIDER
    }

    /// The open IA (None after close).
    pub fn ia(&self) -> RwLockReadGuard<'_, Option<Ia>> {
        self.ia.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes the IA out (close).
    pub fn take(&self) -> Option<Ia> {
        self.ia.write().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Puts back an IA whose close was refused.
    pub fn restore(&self, ia: Ia) {
        *self.ia.write().unwrap_or_else(|p| p.into_inner()) = Some(ia);
    }

    pub fn ep_handle(&self, qpn: u32) -> usize {
        lock(&self.eps).get(&qpn).copied().unwrap_or(0)
    }

    pub fn rmr_handle(&self, id: u64) -> usize {
        lock(&self.rmrs).get(&id).copied().unwrap_or(0)
    }

    pub fn srq_handle(&self, id: (usize, u32)) -> usize {
        lock(&self.srqs).get(&id).copied().unwrap_or(0)
    }

    pub fn handle(&self) -> usize {
        self.handle.load(Ordering::Relaxed)
    }

    /// Records `sharer`, an IA opened with this IA's async EVD.
    pub fn add_async_sharer(&self, sharer: &Arc<IaState>) {
        let mut s = lock(&self.async_sharers);
        s.retain(|w| w.strong_count() > 0);
        s.push(Arc::downgrade(sharer));
    }

    /// The first non-zero handle `find` gives among the IAs whose events this IA's async EVD
    /// carries: this one, then those sharing it.
    pub fn async_handle(self: &Arc<Self>, find: impl Fn(&IaState) -> usize) -> usize {
        let own = find(self);
        if own != 0 {
            return own;
        }
        let sharers: Vec<Arc<IaState>> = lock(&self.async_sharers)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        sharers
            .iter()
            .map(|s| find(s))
            .find(|&h| h != 0)
            .unwrap_or(0)
    }
}

/// Locks a mutex, ignoring poisoning (a panicking entry left consistent state behind: every
/// critical section here is a single insert/remove/read).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
