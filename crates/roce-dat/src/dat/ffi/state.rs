//! The provider-side state of one open IA: the Rust [`Ia`], its address as a `sockaddr_in`
//! or `sockaddr_in6` the consumer can point at, the provider attributes the test programs read,
//! and the maps from engine identities (QPN, connection qualifier) back to handles.

pub(crate) use super::sockaddr::SockAddr;
use crate::dat::Ia;
use dat_sys as d;
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, Weak};

/// EP handles by QPN, read for every DTO event (its EP handle) by the consumer's thread: each
/// thread remembers its last answer, good while the map has not changed since
/// ([`EpMap::generation`]), so a stream of completions of one EP takes no lock.
pub(crate) struct EpMap {
    map: Mutex<FxHashMap<u32, usize>>,
    /// Bumped (under the lock) by every change; each map starts in a range of its own, so an
    /// answer a thread remembers from a map since freed never matches a new map at the same
    /// address.
    generation: AtomicU64,
}

impl Default for EpMap {
    fn default() -> EpMap {
        static RANGES: AtomicU64 = AtomicU64::new(0);
        EpMap {
            map: Mutex::default(),
            generation: AtomicU64::new(RANGES.fetch_add(1 << 32, Ordering::Relaxed)),
        }
    }
}

thread_local! {
    /// (map address, generation, QPN, handle) of this thread's last `EpMap::get`.
    static LAST_EP: Cell<(usize, u64, u32, usize)> = const { Cell::new((0, u64::MAX, 0, 0)) };
}

impl EpMap {
    /// The handle of the EP of `qpn` (0: none).
    pub fn get(&self, qpn: u32) -> usize {
        let me = self as *const EpMap as usize;
        // Read before the map: a change after this read has a newer generation, so an answer
        // remembered under this one is never taken for a later map's.
        let generation = self.generation.load(Ordering::Acquire);
        let last = LAST_EP.try_with(Cell::get).ok();
        if let Some((m, g, q, h)) = last {
            if (m, g, q) == (me, generation, qpn) {
                return h;
            }
        }
        let h = lock(&self.map).get(&qpn).copied().unwrap_or(0);
        let _ = LAST_EP.try_with(|c| c.set((me, generation, qpn, h)));
        h
    }

    /// Changes the map under its lock (and its generation).
    pub fn change<T>(&self, f: impl FnOnce(&mut FxHashMap<u32, usize>) -> T) -> T {
        let mut m = lock(&self.map);
        let r = f(&mut m);
        self.generation.fetch_add(1, Ordering::AcqRel);
        r
    }
}

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
    pub eps: EpMap,
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
            eps: EpMap::default(),
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
        self.eps.get(qpn)
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

#[cfg(test)]
mod tests {
    use super::EpMap;

    /// A thread's remembered answer never outlives a change of the map: a reset EP's new QPN,
    /// a freed EP, another map.
    #[test]
    fn ep_map_answers_follow_every_change() {
        let m = EpMap::default();
        assert_eq!(m.get(7), 0);
        m.change(|e| e.insert(7, 0x70));
        assert_eq!((m.get(7), m.get(7)), (0x70, 0x70));
        m.change(|e| {
            e.remove(&7);
            e.insert(8, 0x70);
        });
        assert_eq!((m.get(7), m.get(8)), (0, 0x70));
        m.change(|e| e.remove(&8));
        assert_eq!(m.get(8), 0);
        let other = EpMap::default();
        other.change(|e| e.insert(8, 0x80));
        assert_eq!((other.get(8), m.get(8)), (0x80, 0));
    }
}
