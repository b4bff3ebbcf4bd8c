//! `MrTable`: the memory-region table shared by consumer threads (register, deregister, query)
//! and the poll-mode cores (every access checked). See the module documentation of
//! [`crate::mem`] for the concurrency design.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{fence, AtomicPtr, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use thiserror::Error;

use super::alloc::{Allocation, Allocator, HeapAllocator};
use super::key_field::KeyField;
use crate::mem::access::{Access, AtomicOp, KeyKind, MemError, MemRef, Memory};

/// Bit 31 of a key: set in R_Keys, clear in L_Keys.
pub const RKEY_BIT: u32 = 1 << 31;
/// Largest table capacity: keeps at least 8 generation bits in every key.
pub const MAX_CAPACITY: u32 = (1 << 23) - 1;
/// Capacity of [`MrTable::default`].
pub const DEFAULT_CAPACITY: u32 = 4096;
/// How long the engine's `deregister` waits for the pins in progress on a region
/// ([`MrTable::deregister_until`]).
pub const DEREGISTER_WAIT: Duration = Duration::from_secs(10);

// Slot state word: bits 63..32 generation, bit 31 live, bit 30 R_Key valid, bits 29..0 the
// number of accesses and pins in progress.
const LIVE: u64 = 1 << 31;
const RKEY_VALID: u64 = 1 << 30;
const COUNT_MASK: u64 = (1 << 30) - 1;
// Marks provider-allocated regions in the slot's access word.
const ALLOCATED: u32 = 1 << 31;
/// `Slot::access` flag: a memory window (its R_Key can be invalidated remotely).
const WINDOW: u32 = 1 << 30;

fn gen_of(state: u64) -> u32 {
    (state >> 32) as u32
}

/// The slot state `s` lets a key of generation `gen` and kind `kind` in: same generation,
/// live, and for an R_Key not invalidated.
#[inline(always)]
fn key_live(s: u64, kind: KeyKind, gen: u32) -> bool {
    gen_of(s) == gen && s & LIVE != 0 && (kind == KeyKind::Local || s & RKEY_VALID != 0)
}

static NEXT_TABLE_ID: AtomicU64 = AtomicU64::new(1);

/// The secret of a table's key fields, from the OS random source. Should the OS have none to
/// give (getrandom(2) does not fail on a Linux that runs DPDK), the table's address and
/// number stand in (no clock: this crate reads none), and the table says so in the log.
fn key_secret() -> u64 {
    crate::random::os_u64().unwrap_or_else(|e| {
        tracing::warn!(target: "dpdk_roce::mem", "memory keys from a weak seed: OS random source: {e}");
        let here = 0u8;
        let table = NEXT_TABLE_ID.load(Ordering::Relaxed);
        (&here as *const u8 as u64).rotate_left(17) ^ table.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    })
}

/// A protection zone (DAT PZ, IB protection domain, IBTA vol. 1 §10.6.1): an access succeeds only
/// when the region and the QP that accesses it belong to the same zone. The number is the `pd`
/// of a [`MemRef`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pz(pub u32);

impl Pz {
    /// The number the transport carries in `MemRef::pd` and `QpConfig::pd`.
    pub fn id(self) -> u32 {
        self.0
    }
}

/// Why a control-path operation (register, deregister, query, PZ management) failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum MrError {
    #[error("no free slot in the memory-region table")]
    TableFull,
    #[error("no live region with this key")]
    InvalidKey,
    #[error("no such protection zone")]
    InvalidPz,
    #[error("the protection zone still has registered regions")]
    PzInUse,
    #[error("the region is pinned or being accessed")]
    Busy,
    #[error("the allocator has no memory for this request")]
    NoMemory,
    #[error("invalid parameter (address range wraps, bad alignment, zero capacity)")]
    InvalidParameter,
}

/// What backs a region.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackingKind {
    /// Consumer memory registered as is (`DAT_MEM_TYPE_VIRTUAL`).
    Virtual,
    /// Memory the provider allocated through an [`Allocator`].
    Allocated,
}

/// A registered region as its owner sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub pz: Pz,
    pub lkey: u32,
    pub rkey: u32,
    /// Base virtual address (the address SGEs and RETHs name; the pointer value of the memory).
    pub addr: u64,
    pub len: u64,
}

/// A snapshot of a live region (`dat_lmr_query`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionInfo {
    pub pz: Pz,
    pub lkey: u32,
    /// `None` once the R_Key was invalidated (IBTA vol. 1 §10.6.6).
    pub rkey: Option<u32>,
    pub addr: u64,
    pub len: u64,
    pub access: Access,
    pub backing: BackingKind,
    /// Accesses and pins in progress at the time of the snapshot (not counting the query).
    pub pins: u32,
    /// I/O address of the first byte when the backing is DMA-able.
    pub iova: Option<u64>,
}

#[derive(Debug)]
struct Slot {
    state: AtomicU64,
    /// Registrations of this slot so far (control path only): the key field of the next one
    /// is `KeyField::of(slot, uses)`.
    uses: AtomicU32,
    // Published before `state` gets LIVE (Release) and read only by holders of a count
    // (Acquire), never changed while LIVE or while the count is non-zero.
    pd: AtomicU32,
    access: AtomicU32,
    /// A type 2 window's QP (0: usable on any QP).
    qp: AtomicU32,
    va: AtomicU64,
    len: AtomicU64,
    ptr: AtomicPtr<u8>,
    iova: AtomicU64,
}

const NO_IOVA: u64 = u64::MAX;

impl Slot {
    fn new() -> Slot {
        Slot {
            state: AtomicU64::new(0),
            uses: AtomicU32::new(0),
            pd: AtomicU32::new(0),
            access: AtomicU32::new(0),
            qp: AtomicU32::new(0),
            va: AtomicU64::new(0),
            len: AtomicU64::new(0),
            ptr: AtomicPtr::new(core::ptr::null_mut()),
            iova: AtomicU64::new(NO_IOVA),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Meta {
    pd: u32,
    access: Access,
    allocated: bool,
    window: bool,
    va: u64,
    len: u64,
    ptr: *mut u8,
    iova: Option<u64>,
}

#[derive(Debug)]
enum Owner {
    Virtual,
    Allocated {
        allocator: Arc<dyn Allocator>,
        block: Allocation,
    },
    /// A memory window over part of another region, which it keeps pinned (so not freed)
    /// until the window is deregistered.
    Window {
        parent: PinToken,
        /// A type 2 window's QP (0: any QP).
        qpn: u32,
    },
}

#[derive(Debug)]
struct Ctl {
    /// Slots never used yet are `next_fresh..capacity`; recycled ones queue here (FIFO, so
    /// generations wear evenly).
    free: VecDeque<u32>,
    next_fresh: u32,
    owners: HashMap<u32, (Owner, Pz)>,
    /// Live zones and how many regions each holds.
    pzs: HashMap<u32, u32>,
    next_pz: u32,
    retired: u32,
}

/// A count held on a live slot: the slot's generation cannot change and its memory cannot be
/// freed until it is dropped.
struct Held<'a> {
    table: &'a MrTable,
    idx: usize,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.table.slots[self.idx]
            .state
            .fetch_sub(1, Ordering::Release);
    }
}

/// An access pinned in place: the region cannot be freed while this guard (or the token made
/// from it) lives. For mbuf external buffers: pin, attach `as_ptr()`/`iova()`, turn the guard
/// into a [`PinToken`] stored with the mbuf, and `unpin` it in the mbuf's free callback.
pub struct PinGuard<'a> {
    held: Held<'a>,
    addr: usize,
    len: usize,
    iova: Option<u64>,
    /// Pinned by its owner for writing (`KeyKind::Local` with `LOCAL_WRITE` checked).
    writable: bool,
}

impl core::fmt::Debug for PinGuard<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PinGuard")
            .field("slot", &self.held.idx)
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .finish()
    }
}

impl PinGuard<'_> {
    /// First byte of the pinned range.
    pub fn as_ptr(&self) -> *const u8 {
        core::ptr::with_exposed_provenance(self.addr)
    }
    /// Length of the pinned range.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a zero-length pin.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// I/O address of the first pinned byte, when the backing is DMA-able.
    pub fn iova(&self) -> Option<u64> {
        self.iova
    }
    /// Byte `off` of the pinned range, read fresh from memory on every call (a volatile load):
    /// for a consumer polling the last byte an RDMA WRITE lands in, as `ib_write_lat` does.
    /// The pin keeps the region registered, so no key lookup or count is needed per read.
    pub fn load(&self, off: usize) -> Result<u8, MemError> {
        if off >= self.len {
            return Err(MemError::OutOfBounds);
        }
        // SAFETY: the guard holds a count on the region (it cannot be freed or re-registered
        // while the guard lives) and `off < len` was checked, so the byte lies inside the
        // pinned range of a live registration, valid for reads (register_raw's contract / the
        // Allocator contract).
        Ok(unsafe { core::ptr::read_volatile(self.as_ptr().add(off)) })
    }
    /// Writes `v` at byte `off` of the pinned range (a volatile store): the owner's own write,
    /// as [`MrTable::write_local`], for a range pinned by L_Key with `LOCAL_WRITE` (else
    /// `AccessDenied`). No key lookup or count per write.
    pub fn store(&self, off: usize, v: u8) -> Result<(), MemError> {
        if !self.writable {
            return Err(MemError::AccessDenied);
        }
        if off >= self.len {
            return Err(MemError::OutOfBounds);
        }
        let ptr = core::ptr::with_exposed_provenance_mut::<u8>(self.addr);
        // SAFETY: as in `load`, the byte lies inside the pinned range of a live registration
        // (the guard's count keeps it registered and `off < len` was checked); the region was
        // pinned by its owner with LOCAL_WRITE checked, and registered memory is valid for
        // writes (register_raw's contract / the Allocator contract), as `write_local` uses it.
        unsafe { core::ptr::write_volatile(ptr.add(off), v) };
        Ok(())
    }
    /// Keeps the pin past this guard's scope (e.g. in an mbuf's free-callback argument); give it
    /// back with [`MrTable::unpin`].
    pub fn into_token(self) -> PinToken {
        let t = PinToken {
            table: self.held.table.id,
            idx: self.held.idx as u32,
            addr: self.addr,
            len: self.len,
            iova: self.iova,
        };
        core::mem::forget(self);
        t
    }
}

/// A pin without a borrow of the table. Not `Clone`: exactly one `unpin` per pin. A leaked token
/// keeps the region pinned forever (`deregister` then never returns; `try_deregister` reports
/// `Busy`).
#[derive(Debug)]
#[must_use = "a dropped token keeps its region pinned; pass it to MrTable::unpin"]
pub struct PinToken {
    table: u64,
    idx: u32,
    addr: usize,
    len: usize,
    iova: Option<u64>,
}

impl PinToken {
    /// First byte of the pinned range.
    pub fn as_ptr(&self) -> *const u8 {
        core::ptr::with_exposed_provenance(self.addr)
    }
    /// Length of the pinned range.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a zero-length pin.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// I/O address of the first pinned byte, when the backing is DMA-able.
    pub fn iova(&self) -> Option<u64> {
        self.iova
    }
}

/// The memory-region table. Share it with `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct MrTable {
    id: u64,
    slots: Box<[Slot]>,
    idx_bits: u32,
    /// Registrations of a slot before its key fields repeat (`retire`: before it retires).
    gen_limit: u32,
    /// Retire a slot whose fields ran out instead of starting over (keys never repeat).
    retire: bool,
    /// The key fields' permutation (keyed from the OS random source).
    fields: KeyField,
    ctl: Mutex<Ctl>,
    allocator: Arc<dyn Allocator>,
}

impl Default for MrTable {
    fn default() -> Self {
        MrTable::new(DEFAULT_CAPACITY)
    }
}

impl MrTable {
    /// A table of `capacity` regions (clamped to `1..=MAX_CAPACITY`) whose provider-allocated
    /// regions come from the heap.
    pub fn new(capacity: u32) -> MrTable {
        MrTable::with_allocator(capacity, Arc::new(HeapAllocator))
    }

    /// A table whose provider-allocated regions come from `allocator` (DPDK: hugepages).
    pub fn with_allocator(capacity: u32, allocator: Arc<dyn Allocator>) -> MrTable {
        let capacity = capacity.clamp(1, MAX_CAPACITY);
        let idx_bits = 32 - capacity.leading_zeros();
        let gen_bits = 31 - idx_bits;
        MrTable {
            id: NEXT_TABLE_ID.fetch_add(1, Ordering::Relaxed),
            slots: (0..capacity).map(|_| Slot::new()).collect(),
            idx_bits,
            gen_limit: 1 << gen_bits,
            retire: false,
            fields: KeyField::new(key_secret(), gen_bits),
            ctl: Mutex::new(Ctl {
                free: VecDeque::new(),
                next_fresh: 0,
                owners: HashMap::new(),
                pzs: HashMap::new(),
                next_pz: 1,
                retired: 0,
            }),
            allocator,
        }
    }

    /// A heap-backed table whose slots retire after `limit` (>= 1) registrations, at most the
    /// key layout's limit, instead of starting their key fields over: keys never repeat. For
    /// tests of key exhaustion.
    pub fn with_generation_limit(capacity: u32, limit: u32) -> MrTable {
        let mut t = MrTable::new(capacity);
        t.gen_limit = t.gen_limit.min(limit.max(1));
        t.retire = true;
        t
    }

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// A heap-backed table whose key fields are keyed by `secret` instead of the OS random
    /// source: the same registrations give the same keys in every run. For simulations and
    /// tests that compare runs frame by frame; never for memory a network can reach.
    pub fn with_key_secret(capacity: u32, secret: u64) -> MrTable {
        let mut t = MrTable::new(capacity);
        t.fields = KeyField::new(secret, t.fields.bits());
        t
    }

    /// A table whose slots start their key fields over after `cycle` registrations (the
    /// default tables do after 2^field bits).
    #[cfg(test)]
    pub(crate) fn with_key_cycle(capacity: u32, cycle: u32) -> MrTable {
        let mut t = MrTable::new(capacity);
        t.gen_limit = t.gen_limit.min(cycle.max(1));
        t
    }

    /// Registrations of a slot before its keys repeat: the quarantine of a freed key (with
    /// [`MrTable::with_generation_limit`], before the slot retires).
    pub fn generations_per_slot(&self) -> u32 {
        self.gen_limit
    }

    /// Number of slots retired because their generations ran out.
    pub fn retired_slots(&self) -> u32 {
        self.lock().retired
    }

    /// Number of live regions.
    pub fn live_regions(&self) -> usize {
        self.lock().owners.len()
    }

    fn lock(&self) -> MutexGuard<'_, Ctl> {
        // A panic while holding the lock leaves `Ctl` consistent (every update is a single
        // container operation), so poisoning is ignored.
        self.ctl.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ---- protection zones -------------------------------------------------------------

    /// Creates a protection zone (`dat_pz_create`).
    pub fn create_pz(&self) -> Pz {
        let mut c = self.lock();
        loop {
            let id = c.next_pz;
            c.next_pz = c.next_pz.wrapping_add(1).max(1);
            if let std::collections::hash_map::Entry::Vacant(v) = c.pzs.entry(id) {
                v.insert(0);
                return Pz(id);
            }
        }
    }

    /// Frees a protection zone (`dat_pz_free`): `PzInUse` while regions are registered in it.
    pub fn free_pz(&self, pz: Pz) -> Result<(), MrError> {
        let mut c = self.lock();
        match c.pzs.get(&pz.0) {
            None => Err(MrError::InvalidPz),
            Some(0) => {
                c.pzs.remove(&pz.0);
                Ok(())
            }
            Some(_) => Err(MrError::PzInUse),
        }
    }

    // ---- keys -------------------------------------------------------------------------

    fn key_of(&self, idx: u32, gen: u32) -> u32 {
        (gen << self.idx_bits) | (idx + 1)
    }

    /// Slot index and generation named by a key (either kind).
    fn decode(&self, key: u32) -> Option<(usize, u32)> {
        let key = key & !RKEY_BIT;
        let field = key & ((1 << self.idx_bits) - 1);
        let idx = field.checked_sub(1)? as usize;
        if idx >= self.slots.len() {
            return None;
        }
        Some((idx, key >> self.idx_bits))
    }

    // ---- registration -----------------------------------------------------------------

    /// Registers consumer memory as is (`dat_lmr_create` with `DAT_MEM_TYPE_VIRTUAL`). The
    /// region's address is the pointer value. Local read is always granted.
    ///
    /// # Safety
    ///
    /// Until [`deregister`](Self::deregister) (or `try_deregister`) of the returned region has
    /// returned `Ok`:
    /// - `ptr..ptr + len` must stay allocated and valid for reads and writes (do not free,
    ///   unmap or move it);
    /// - it must not be accessed through Rust references (`&[u8]`, `&mut [u8]`, `Vec`): the
    ///   poll-mode cores read and write it at any time from other threads, like a NIC's DMA. Use
    ///   raw pointers, [`read_local`](Self::read_local) / [`write_local`](Self::write_local),
    ///   or C. Concurrent conflicting accesses to the same bytes (a consumer store during an
    ///   RDMA read of them) leave their contents unspecified, as with a hardware RNIC.
    pub unsafe fn register_raw(
        &self,
        pz: Pz,
        ptr: core::ptr::NonNull<u8>,
        len: usize,
        access: Access,
    ) -> Result<Region, MrError> {
        let va = ptr.as_ptr().expose_provenance() as u64;
        va.checked_add(len as u64)
            .ok_or(MrError::InvalidParameter)?;
        self.install(pz, ptr.as_ptr(), len, access, None, Owner::Virtual)
    }

    /// Registers `len` zeroed bytes from the table's allocator (`dat_lmr_create` of
    /// provider memory), aligned to at least `align` (a power of two; 64 at least from the heap).
    pub fn register_alloc(
        &self,
        pz: Pz,
        len: usize,
        align: usize,
        access: Access,
    ) -> Result<Region, MrError> {
        self.register_with(&self.allocator.clone(), pz, len, align, access)
    }

    /// `register_alloc` from a given allocator.
    pub fn register_with(
        &self,
        allocator: &Arc<dyn Allocator>,
        pz: Pz,
        len: usize,
        align: usize,
        access: Access,
    ) -> Result<Region, MrError> {
        if !align.is_power_of_two() {
            return Err(MrError::InvalidParameter);
        }
        let block = allocator.alloc(len, align).ok_or(MrError::NoMemory)?;
        let ptr = block.ptr.as_ptr();
        let iova = allocator.iova(&block);
        let owner = Owner::Allocated {
            allocator: allocator.clone(),
            block,
        };
        self.install(pz, ptr, len, access, iova, owner)
    }

    /// Binds a memory window (`dat_rmr_bind`, IBTA vol. 1 §10.6.7): a new region over `len`
    /// bytes at `addr` of the live region `lkey` (of zone `pd`), in the same zone, whose R_Key
    /// reaches only that range with the remote rights `access` (a subset of the parent's).
    /// The parent stays pinned until the window is deregistered: `try_deregister` of the
    /// parent fails with `Busy` meanwhile (and `deregister` waits).
    pub fn bind_window(
        &self,
        lkey: u32,
        pd: u32,
        addr: u64,
        len: u32,
        access: Access,
    ) -> Result<Region, MrError> {
        self.bind_window_on_qp(lkey, pd, addr, len, access, 0)
    }

    /// [`bind_window`](Self::bind_window) for a type 2 window associated with QP `qpn` (IBTA
    /// vol. 1 §10.6.7): its R_Key serves requests arriving on that QP only
    /// ([`rkey_usable_on`](Self::rkey_usable_on)); `qpn` 0 means any QP.
    pub fn bind_window_on_qp(
        &self,
        lkey: u32,
        pd: u32,
        addr: u64,
        len: u32,
        access: Access,
        qpn: u32,
    ) -> Result<Region, MrError> {
        let remote = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        if !remote.contains(access) || len == 0 {
            return Err(MrError::InvalidParameter);
        }
        let r = MemRef {
            kind: KeyKind::Local,
            pd,
            key: lkey,
            addr,
            len,
        };
        let (held, m, off) = self.locate(&r, Access::LOCAL_READ).map_err(|e| match e {
            MemError::OutOfBounds => MrError::InvalidParameter,
            _ => MrError::InvalidKey,
        })?;
        if !m.access.contains(access) {
            return Err(MrError::InvalidParameter);
        }
        let ptr = m.ptr.wrapping_add(off);
        let iova = m.iova.map(|i| i + off as u64);
        let parent = PinGuard {
            held,
            addr: ptr.addr(),
            len: len as usize,
            iova,
            writable: false,
        }
        .into_token();
        self.install(
            Pz(m.pd),
            ptr,
            len as usize,
            access,
            iova,
            Owner::Window { parent, qpn },
        )
    }

    /// Test/consumer convenience: registers a provider-allocated copy of `bytes`.
    pub fn register_bytes(&self, pz: Pz, bytes: &[u8], access: Access) -> Result<Region, MrError> {
        let r = self.register_alloc(pz, bytes.len(), 8, access)?;
        self.write_local(r.lkey, r.addr, bytes)
            .map_err(|_| MrError::InvalidKey)?;
        Ok(r)
    }

    fn install(
        &self,
        pz: Pz,
        ptr: *mut u8,
        len: usize,
        access: Access,
        iova: Option<u64>,
        owner: Owner,
    ) -> Result<Region, MrError> {
        let mut c = self.lock();
        let fail = |c: MutexGuard<'_, Ctl>, owner: Owner, e: MrError| {
            drop(c);
            self.release_owner(owner);
            Err(e)
        };
        let Some(n) = c.pzs.get_mut(&pz.0) else {
            return fail(c, owner, MrError::InvalidPz);
        };
        *n += 1;
        let idx = if c.next_fresh < self.capacity() {
            c.next_fresh += 1;
            c.next_fresh - 1
        } else if let Some(i) = c.free.pop_front() {
            i
        } else {
            if let Some(n) = c.pzs.get_mut(&pz.0) {
                *n -= 1;
            }
            return fail(c, owner, MrError::TableFull);
        };
        let slot = &self.slots[idx as usize];
        let s = slot.state.load(Ordering::Acquire);
        debug_assert_eq!(s & (LIVE | COUNT_MASK), 0, "free slot in use");
        let gen = self.fields.of(idx, slot.uses.load(Ordering::Relaxed));
        let va = ptr.expose_provenance() as u64;
        let allocated = matches!(owner, Owner::Allocated { .. });
        let window = matches!(owner, Owner::Window { .. });
        let qpn = match owner {
            Owner::Window { qpn, .. } => qpn,
            _ => 0,
        };
        slot.pd.store(pz.0, Ordering::Relaxed);
        slot.qp.store(qpn, Ordering::Relaxed);
        slot.access.store(
            (access | Access::LOCAL_READ).bits()
                | if allocated { ALLOCATED } else { 0 }
                | if window { WINDOW } else { 0 },
            Ordering::Relaxed,
        );
        slot.va.store(va, Ordering::Relaxed);
        slot.len.store(len as u64, Ordering::Relaxed);
        slot.ptr.store(ptr, Ordering::Relaxed);
        slot.iova.store(iova.unwrap_or(NO_IOVA), Ordering::Relaxed);
        c.owners.insert(idx, (owner, pz));
        // Publish: the metadata stores above happen-before any access that sees LIVE.
        slot.state.store(
            (u64::from(gen) << 32) | LIVE | RKEY_VALID,
            Ordering::Release,
        );
        let lkey = self.key_of(idx, gen);
        Ok(Region {
            pz,
            lkey,
            rkey: lkey | RKEY_BIT,
            addr: va,
            len: len as u64,
        })
    }

    /// Frees a region by its L_Key (`dat_lmr_free`); its R_Key dies with it. Waits until the
    /// accesses and pins in progress on the region are over: after `Ok` returns no core touches
    /// the memory again, and every later access with either key fails with `InvalidKey`. The
    /// caller bounds the wait: once `expired()` says so (it is asked after each yield of the
    /// thread), a pin still held (a TX buffer a PMD never gives back, a [`PinGuard`] of the
    /// calling thread) gives `Busy`, the region registered and usable again, never a hang.
    /// The engine's `deregister` bounds it by [`DEREGISTER_WAIT`] on the process clock; this
    /// crate reads no clock.
    pub fn deregister_until(
        &self,
        lkey: u32,
        mut expired: impl FnMut() -> bool,
    ) -> Result<(), MrError> {
        let (idx, gen) = self.local_slot(lkey)?;
        let slot = &self.slots[idx];
        let mut s = slot.state.load(Ordering::Acquire);
        let rkey_valid = s & RKEY_VALID;
        loop {
            if gen_of(s) != gen || s & LIVE == 0 {
                return Err(MrError::InvalidKey);
            }
            match slot.state.compare_exchange_weak(
                s,
                s & !(LIVE | RKEY_VALID),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(x) => s = x,
            }
        }
        // No new access can start (they need LIVE); wait for the ones in progress. Acquire pairs
        // with their Release decrement, so their memory accesses happen-before the free below.
        let mut spins = 0u32;
        while slot.state.load(Ordering::Acquire) & COUNT_MASK != 0 {
            spins += 1;
            if spins < 64 {
                core::hint::spin_loop();
                continue;
            }
            std::thread::yield_now();
            if expired() {
                // Give the region back as it was: still pinned, nothing may be freed.
                let mut s = slot.state.load(Ordering::Acquire);
                loop {
                    if s & COUNT_MASK == 0 {
                        break;
                    }
                    match slot.state.compare_exchange_weak(
                        s,
                        s | LIVE | rkey_valid,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => return Err(MrError::Busy),
                        Err(x) => s = x,
                    }
                }
            }
        }
        self.finish_free(idx, gen);
        Ok(())
    }

    /// Frees a region only when no access or pin is in progress on it: `Busy` otherwise (the
    /// region then stays registered and usable).
    pub fn try_deregister(&self, lkey: u32) -> Result<(), MrError> {
        let (idx, gen) = self.local_slot(lkey)?;
        let slot = &self.slots[idx];
        let mut s = slot.state.load(Ordering::Acquire);
        loop {
            if gen_of(s) != gen || s & LIVE == 0 {
                return Err(MrError::InvalidKey);
            }
            if s & COUNT_MASK != 0 {
                return Err(MrError::Busy);
            }
            match slot.state.compare_exchange_weak(
                s,
                s & !(LIVE | RKEY_VALID),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(x) => s = x,
            }
        }
        self.finish_free(idx, gen);
        Ok(())
    }

    fn local_slot(&self, lkey: u32) -> Result<(usize, u32), MrError> {
        if lkey & RKEY_BIT != 0 {
            return Err(MrError::InvalidKey);
        }
        self.decode(lkey).ok_or(MrError::InvalidKey)
    }

    /// The slot is not LIVE and its count is 0, and only this caller cleared LIVE: free the
    /// backing, then make the slot reusable under the next generation.
    fn finish_free(&self, idx: usize, gen: u32) {
        let taken = self.lock().owners.remove(&(idx as u32));
        let pz = taken.map(|(owner, pz)| {
            self.release_owner(owner);
            pz
        });
        let slot = &self.slots[idx];
        slot.ptr.store(core::ptr::null_mut(), Ordering::Relaxed);
        let mut c = self.lock();
        if let Some(pz) = pz {
            if let Some(n) = c.pzs.get_mut(&pz.0) {
                *n = n.saturating_sub(1);
            }
        }
        let uses = slot.uses.load(Ordering::Relaxed) + 1;
        if self.retire && uses >= self.gen_limit {
            // Out of fields: the slot keeps its last one, never LIVE again, so its keys never
            // match.
            c.retired += 1;
        } else {
            // Past the last field a slot starts over: its first key comes back after
            // `gen_limit` registrations of the slot (the quarantine).
            let uses = if uses >= self.gen_limit { 0 } else { uses };
            slot.uses.store(uses, Ordering::Relaxed);
            let next = self.fields.of(idx as u32, uses);
            debug_assert_ne!(next, gen, "a field repeats only after a full cycle");
            slot.state.store(u64::from(next) << 32, Ordering::Release);
            c.free.push_back(idx as u32);
        }
    }

    // ---- data path ----------------------------------------------------------------------

    /// The slot and generation a key of `kind` names (an R_Key has `RKEY_BIT`, an L_Key not).
    #[inline(always)]
    fn key_slot(&self, kind: KeyKind, key: u32) -> Result<(usize, u32), MemError> {
        if (key & RKEY_BIT != 0) != (kind == KeyKind::Remote) {
            return Err(MemError::InvalidKey);
        }
        self.decode(key).ok_or(MemError::InvalidKey)
    }

    /// Takes a count on the slot `key` names when the key is live (and, for an R_Key, valid).
    fn acquire(&self, kind: KeyKind, key: u32) -> Result<Held<'_>, MemError> {
        let (idx, gen) = self.key_slot(kind, key)?;
        let slot = &self.slots[idx];
        let mut s = slot.state.load(Ordering::Acquire);
        loop {
            if !key_live(s, kind, gen) || s & COUNT_MASK == COUNT_MASK {
                return Err(MemError::InvalidKey);
            }
            match slot
                .state
                .compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return Ok(Held { table: self, idx }),
                Err(x) => s = x,
            }
        }
    }

    fn meta(&self, held: &Held<'_>) -> Meta {
        let slot = &self.slots[held.idx];
        let a = slot.access.load(Ordering::Relaxed);
        let iova = slot.iova.load(Ordering::Relaxed);
        Meta {
            pd: slot.pd.load(Ordering::Relaxed),
            access: Access::from_bits_truncate(a),
            allocated: a & ALLOCATED != 0,
            window: a & WINDOW != 0,
            va: slot.va.load(Ordering::Relaxed),
            len: slot.len.load(Ordering::Relaxed),
            ptr: slot.ptr.load(Ordering::Relaxed),
            iova: (iova != NO_IOVA).then_some(iova),
        }
    }

    /// Byte offset of `addr..addr+len` inside the region `va..va+region_len`, overflow-safe.
    #[inline(always)]
    fn offset(va: u64, region_len: u64, addr: u64, len: u64) -> Result<usize, MemError> {
        let start = addr.checked_sub(va).ok_or(MemError::OutOfBounds)?;
        let end = start.checked_add(len).ok_or(MemError::OutOfBounds)?;
        if end > region_len {
            return Err(MemError::OutOfBounds);
        }
        Ok(start as usize)
    }

    /// The full check of IBTA vol. 1 §10.6.3 / §10.6.4 (key, PZ, bounds, rights), in the order
    /// the transport's `VecMemory` uses, holding a count on success: the count, the region's
    /// base pointer and the offset of `r.addr` in it. Only the fields the checks need are
    /// loaded (the data path's form; [`locate`](Self::locate) adds the rest).
    #[inline(always)]
    fn locate_ptr(
        &self,
        r: &MemRef,
        access: Access,
    ) -> Result<(Held<'_>, *mut u8, usize), MemError> {
        let held = self.acquire(r.kind, r.key)?;
        let slot = &self.slots[held.idx];
        // Published before LIVE (Release) and read under the count just taken (Acquire).
        let off = Self::checks(slot, r, access)?;
        Ok((held, slot.ptr.load(Ordering::Relaxed), off))
    }

    /// The PZ, bounds and rights checks of [`locate_ptr`](Self::locate_ptr) on a slot whose
    /// key matched: the offset of `r.addr` in the region.
    #[inline(always)]
    fn checks(slot: &Slot, r: &MemRef, access: Access) -> Result<usize, MemError> {
        if slot.pd.load(Ordering::Relaxed) != r.pd {
            return Err(MemError::PdMismatch);
        }
        let off = Self::offset(
            slot.va.load(Ordering::Relaxed),
            slot.len.load(Ordering::Relaxed),
            r.addr,
            u64::from(r.len),
        )?;
        let mut need = access;
        need.remove(Access::LOCAL_READ);
        let allowed = match r.kind {
            KeyKind::Local => Access::LOCAL_WRITE,
            KeyKind::Remote => Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
        };
        let granted = Access::from_bits_truncate(slot.access.load(Ordering::Relaxed));
        if !allowed.contains(need) || !granted.contains(need) {
            return Err(MemError::AccessDenied);
        }
        Ok(off)
    }

    /// [`locate_ptr`](Self::locate_ptr) with the region's whole metadata.
    fn locate(&self, r: &MemRef, access: Access) -> Result<(Held<'_>, Meta, usize), MemError> {
        let (held, _, off) = self.locate_ptr(r, access)?;
        let m = self.meta(&held);
        Ok((held, m, off))
    }

    /// Checks `r` for `access` without touching memory, as of one instant: the same checks and
    /// errors as an access, without taking a count (no memory is touched, so none is needed).
    /// The slot's state is read before and after its metadata (a sequence lock): if the region
    /// was freed or re-registered in between, the key no longer names it and the check is
    /// `InvalidKey`, as an access starting then would be.
    pub fn check(&self, r: &MemRef, access: Access) -> Result<(), MemError> {
        let (idx, gen) = self.key_slot(r.kind, r.key)?;
        let slot = &self.slots[idx];
        let before = slot.state.load(Ordering::Acquire);
        if !key_live(before, r.kind, gen) {
            return Err(MemError::InvalidKey);
        }
        // Metadata is written only while the slot is not LIVE, before LIVE is published
        // (Release): read after `before` (Acquire), it is the live registration's unless the
        // state changed, which the second read (ordered after them by the fence) shows.
        let checked = Self::checks(slot, r, access);
        fence(Ordering::Acquire);
        let after = slot.state.load(Ordering::Relaxed);
        if (after ^ before) & !(COUNT_MASK | RKEY_VALID) != 0 {
            return Err(MemError::InvalidKey);
        }
        checked.map(|_| ())
    }

    /// Checked read of `out.len()` (= `r.len`) bytes at `r.addr`.
    pub fn read(&self, r: &MemRef, access: Access, out: &mut [u8]) -> Result<(), MemError> {
        if out.len() != r.len as usize {
            return Err(MemError::OutOfBounds);
        }
        let (_held, base, off) = self.locate_ptr(r, access)?;
        copy_out(base, off, out);
        Ok(())
    }

    /// Checked write of `data` (`data.len()` = `r.len`) at `r.addr`.
    pub fn write(&self, r: &MemRef, access: Access, data: &[u8]) -> Result<(), MemError> {
        if data.len() != r.len as usize {
            return Err(MemError::OutOfBounds);
        }
        let (_held, base, off) = self.locate_ptr(r, access)?;
        copy_in(base, off, data);
        Ok(())
    }

    /// Checked remote write of `data` (`data.len()` = `r.len`) arriving on QP `qpn`: the
    /// checks of [`rkey_usable_on`](Self::rkey_usable_on) (a window bound to another QP is
    /// `AccessDenied`) and of [`write`](Self::write) with `REMOTE_WRITE`, under one count.
    pub fn remote_write_on(&self, r: &MemRef, qpn: u32, data: &[u8]) -> Result<(), MemError> {
        if data.len() != r.len as usize {
            return Err(MemError::OutOfBounds);
        }
        let (held, base, off) = self.locate_ptr(r, Access::REMOTE_WRITE)?;
        // As in `rkey_usable_on`: published before LIVE, read under the count just taken.
        let qp = self.slots[held.idx].qp.load(Ordering::Relaxed);
        if r.kind == KeyKind::Remote && qp != 0 && qp != qpn {
            return Err(MemError::AccessDenied);
        }
        copy_in(base, off, data);
        Ok(())
    }

    /// Checked atomic on the 8 bytes at `r.addr` (IBTA vol. 1 §9.4.5): `r.len` must be 8, the
    /// region must grant REMOTE_ATOMIC and the address must be 8-byte aligned. Atomics are
    /// atomic with respect to each other on every core (a hardware `lock cmpxchg`/`xadd`).
    pub fn atomic(&self, r: &MemRef, op: AtomicOp) -> Result<u64, MemError> {
        if r.len != 8 {
            return Err(MemError::OutOfBounds);
        }
        let (_held, m, off) = self.locate(r, Access::REMOTE_ATOMIC)?;
        if !r.addr.is_multiple_of(8) || !(m.ptr.addr() + off).is_multiple_of(8) {
            return Err(MemError::Misaligned);
        }
        Ok(atomic_at(&m, off, op))
    }

    /// Invalidates the R_Key of a memory window (SEND with Invalidate, IBTA vol. 1 §9.4.1.1.1
    /// / §10.6.7: only a type 2 window's R_Key, never a region registered by Register
    /// Memory Region, which is `AccessDenied`) without freeing it: later remote accesses with
    /// it fail with `InvalidKey`; accesses already checked may complete. Local access is
    /// unaffected.
    pub fn invalidate(&self, pd: u32, rkey: u32) -> Result<(), MemError> {
        let held = self.acquire(KeyKind::Remote, rkey)?;
        let m = self.meta(&held);
        if m.pd != pd {
            return Err(MemError::PdMismatch);
        }
        if !m.window {
            return Err(MemError::AccessDenied);
        }
        let prev = self.slots[held.idx]
            .state
            .fetch_and(!RKEY_VALID, Ordering::AcqRel);
        if prev & RKEY_VALID == 0 {
            return Err(MemError::InvalidKey);
        }
        Ok(())
    }

    /// Whether requests arriving on QP `qpn` may use `rkey`: false only when `rkey` is the live
    /// R_Key of a window bound to another QP ([`bind_window_on_qp`](Self::bind_window_on_qp)).
    pub fn rkey_usable_on(&self, rkey: u32, qpn: u32) -> bool {
        let Ok(held) = self.acquire(KeyKind::Remote, rkey) else {
            return true;
        };
        // Published before LIVE (Release) and read under a count (Acquire), like the metadata.
        let qp = self.slots[held.idx].qp.load(Ordering::Relaxed);
        qp == 0 || qp == qpn
    }

    /// Pins a checked range (same checks as an access needing `access`): the region cannot be
    /// freed until the guard (or its token) is released. An invalidated R_Key does not revoke
    /// existing pins.
    pub fn pin(&self, r: &MemRef, access: Access) -> Result<PinGuard<'_>, MemError> {
        let (held, m, off) = self.locate(r, access)?;
        Ok(PinGuard {
            held,
            addr: m.ptr.addr() + off,
            len: r.len as usize,
            iova: m.iova.map(|i| i + off as u64),
            writable: r.kind == KeyKind::Local && access.contains(Access::LOCAL_WRITE),
        })
    }

    /// Copies bytes `off..off + out.len()` of a pinned range into `out` (the copy-out of a
    /// frame that could not go zero-copy, or a capture). Fails when the range is outside the pin.
    ///
    /// # Panics
    ///
    /// When the token comes from another table.
    pub fn read_pinned(
        &self,
        token: &PinToken,
        off: usize,
        out: &mut [u8],
    ) -> Result<(), MemError> {
        assert_eq!(token.table, self.id, "PinToken from another MrTable");
        let end = off.checked_add(out.len()).ok_or(MemError::OutOfBounds)?;
        if end > token.len {
            return Err(MemError::OutOfBounds);
        }
        if out.is_empty() {
            return Ok(());
        }
        let src: *const u8 = core::ptr::with_exposed_provenance(token.addr + off);
        // SAFETY: the token holds a count on its slot, so the region is registered and its
        // backing valid for reads; `off + out.len() <= token.len` keeps the range inside the
        // pinned range, which `pin` checked against the region's bounds. `out` is a distinct
        // Rust buffer.
        unsafe { core::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Feeds a pinned range to `f` in chunks of at most 1 KiB copied through a stack buffer
    /// (no Rust reference to registered memory is made: consumers may write it concurrently),
    /// e.g. to compute an ICRC over a payload that is sent zero-copy.
    pub fn for_each_pinned_chunk(&self, token: &PinToken, f: &mut dyn FnMut(&[u8])) {
        let mut chunk = [0u8; 1024];
        let mut off = 0;
        while off < token.len {
            let n = (token.len - off).min(chunk.len());
            if self.read_pinned(token, off, &mut chunk[..n]).is_err() {
                return;
            }
            f(&chunk[..n]);
            off += n;
        }
    }

    /// Releases a pin made by [`PinGuard::into_token`] on this table.
    ///
    /// # Panics
    ///
    /// When the token comes from another table.
    pub fn unpin(&self, token: PinToken) {
        assert_eq!(token.table, self.id, "PinToken from another MrTable");
        drop(Held {
            table: self,
            idx: token.idx as usize,
        });
    }

    // ---- consumer helpers ---------------------------------------------------------------

    /// Consumer read of its own region by L_Key (e.g. checking data after an RDMA read). No PZ
    /// or rights check: the consumer owns the memory; only liveness and bounds are checked.
    pub fn read_local(&self, lkey: u32, addr: u64, out: &mut [u8]) -> Result<(), MemError> {
        let (_held, base, off) = self.locate_own(lkey, addr, out.len() as u64)?;
        copy_out(base, off, out);
        Ok(())
    }

    /// Consumer write into its own region by L_Key (no rights check: LOCAL_WRITE governs the
    /// provider's writes, not the owner's).
    pub fn write_local(&self, lkey: u32, addr: u64, data: &[u8]) -> Result<(), MemError> {
        let (_held, base, off) = self.locate_own(lkey, addr, data.len() as u64)?;
        copy_in(base, off, data);
        Ok(())
    }

    /// The owner's access by L_Key: a count on the live region, its base pointer and the
    /// offset of `addr..addr + len` in it (bounds checked; only the fields needed are loaded).
    #[inline(always)]
    fn locate_own(
        &self,
        lkey: u32,
        addr: u64,
        len: u64,
    ) -> Result<(Held<'_>, *mut u8, usize), MemError> {
        let held = self.acquire(KeyKind::Local, lkey)?;
        let slot = &self.slots[held.idx];
        // Published before LIVE (Release) and read under the count just taken (Acquire).
        let off = Self::offset(
            slot.va.load(Ordering::Relaxed),
            slot.len.load(Ordering::Relaxed),
            addr,
            len,
        )?;
        Ok((held, slot.ptr.load(Ordering::Relaxed), off))
    }

    /// The protection zone of the live region `lkey` names, read without holding the region
    /// (two loads of its state word around the read, no atomic read-modify-write): a post's
    /// early PZ check (`dat_ep_post_*`: DAT_PROTECTION_VIOLATION). The QP's check at post time
    /// stays the one that guards the access. `None` when the key names no live region.
    pub fn local_pz(&self, lkey: u32) -> Option<Pz> {
        let (idx, gen) = self.key_slot(KeyKind::Local, lkey).ok()?;
        let slot = &self.slots[idx];
        if !key_live(slot.state.load(Ordering::Acquire), KeyKind::Local, gen) {
            return None;
        }
        let pd = slot.pd.load(Ordering::Acquire);
        // Still the same registration (a new one has another generation in the state word).
        key_live(slot.state.load(Ordering::Acquire), KeyKind::Local, gen).then_some(Pz(pd))
    }

    /// A snapshot of the live region `lkey` names (`dat_lmr_query`).
    pub fn query(&self, lkey: u32) -> Result<RegionInfo, MrError> {
        let held = self
            .acquire(KeyKind::Local, lkey)
            .map_err(|_| MrError::InvalidKey)?;
        let m = self.meta(&held);
        let s = self.slots[held.idx].state.load(Ordering::Acquire);
        Ok(RegionInfo {
            pz: Pz(m.pd),
            lkey,
            rkey: (s & RKEY_VALID != 0).then_some(lkey | RKEY_BIT),
            addr: m.va,
            len: m.len,
            access: m.access,
            backing: if m.allocated {
                BackingKind::Allocated
            } else {
                BackingKind::Virtual
            },
            pins: ((s & COUNT_MASK) as u32).saturating_sub(1),
            iova: m.iova,
        })
    }
}

impl MrTable {
    fn release_owner(&self, owner: Owner) {
        match owner {
            Owner::Allocated { allocator, block } => {
                // SAFETY: `block` came from `allocator.alloc` (see `register_with`) and is used
                // by no one: either it was never published, or its slot is no longer LIVE and
                // its access count reached 0 (so no access is in progress and none can start).
                unsafe { allocator.free(block) };
            }
            // The window is gone: its parent may be freed again.
            Owner::Window { parent, .. } => self.unpin(parent),
            Owner::Virtual => {}
        }
    }
}

/// Copies bytes `off..off + out.len()` of the region at `base` into `out`.
#[inline(always)]
fn copy_out(base: *mut u8, off: usize, out: &mut [u8]) {
    // SAFETY: the caller holds a count on the region (it cannot be freed), and `off + out.len()
    // <= region length` was checked, so the source range lies inside a live registration that
    // is valid for reads (register_raw's contract / the Allocator contract); `base + off` stays
    // inside it. `out` is a distinct Rust buffer, so the ranges do not overlap.
    unsafe { copy_bytes(base.add(off), out.as_mut_ptr(), out.len()) };
}

/// Copies `data` into bytes `off..off + data.len()` of the region at `base`.
#[inline(always)]
fn copy_in(base: *mut u8, off: usize, data: &[u8]) {
    // SAFETY: as in `copy_out`, with the destination inside a live registration valid for
    // writes; no Rust reference to registered memory exists (register_raw's contract; provider
    // memory is only reached through these accessors), so writing through the raw pointer
    // invalidates no reference.
    unsafe { copy_bytes(data.as_ptr(), base.add(off), data.len()) };
}

/// `copy_nonoverlapping(src, dst, n)`, with copies of up to 16 bytes (a polled flag, a small
/// payload) done inline as two possibly overlapping loads and stores instead of a `memcpy` call.
///
/// # Safety
///
/// As `core::ptr::copy_nonoverlapping`: `src` valid for reads and `dst` for writes of `n` bytes,
/// the ranges not overlapping (no alignment needed).
#[inline(always)]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    use core::ptr::{read_unaligned as rd, write_unaligned as wr};
    // SAFETY (every arm): each access lies in `0..n` of its range (the first and the last
    // `k <= n` bytes), which the caller guarantees valid; unaligned accesses are used.
    unsafe {
        match n {
            0 => {}
            1..=3 => {
                let (a, b, c) = (*src, *src.add(n / 2), *src.add(n - 1));
                *dst = a;
                *dst.add(n / 2) = b;
                *dst.add(n - 1) = c;
            }
            4..=8 => {
                let (a, b) = (rd(src.cast::<u32>()), rd(src.add(n - 4).cast::<u32>()));
                wr(dst.cast::<u32>(), a);
                wr(dst.add(n - 4).cast::<u32>(), b);
            }
            9..=16 => {
                let (a, b) = (rd(src.cast::<u64>()), rd(src.add(n - 8).cast::<u64>()));
                wr(dst.cast::<u64>(), a);
                wr(dst.add(n - 8).cast::<u64>(), b);
            }
            _ => core::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

/// Executes `op` on the 8-byte word at region offset `off` and returns the original value.
fn atomic_at(m: &Meta, off: usize, op: AtomicOp) -> u64 {
    // SAFETY: the caller holds a count on the region, checked `off + 8 <= m.len` and that the
    // address is 8-byte aligned; the word lies in memory valid for reads and writes for as
    // long as the count is held, and all atomic accesses to it go through `AtomicU64`.
    let word = unsafe { AtomicU64::from_ptr(m.ptr.add(off).cast::<u64>()) };
    match op {
        AtomicOp::CompareSwap { compare, swap } => {
            match word.compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst) {
                Ok(v) | Err(v) => v,
            }
        }
        AtomicOp::FetchAdd { add } => word.fetch_add(add, Ordering::SeqCst),
    }
}

/// `Memory` for a table reached through `$t`, every method the checked table method of the same
/// name; `$extra` adds methods (the `Arc` form lends its table for pinning).
macro_rules! memory_via_table {
    ($t:ty $(, $extra:item)*) => {
        impl Memory for $t {
            fn check(&self, r: &MemRef, access: Access) -> Result<(), MemError> {
                MrTable::check(self, r, access)
            }
            fn read(&self, r: &MemRef, access: Access, out: &mut [u8]) -> Result<(), MemError> {
                MrTable::read(self, r, access, out)
            }
            fn write(&mut self, r: &MemRef, access: Access, data: &[u8]) -> Result<(), MemError> {
                MrTable::write(self, r, access, data)
            }
            fn atomic(&mut self, r: &MemRef, op: AtomicOp) -> Result<u64, MemError> {
                MrTable::atomic(self, r, op)
            }
            fn invalidate(&mut self, pd: u32, rkey: u32) -> Result<(), MemError> {
                MrTable::invalidate(self, pd, rkey)
            }
            fn rkey_usable_on(&self, rkey: u32, qpn: u32) -> bool {
                MrTable::rkey_usable_on(self, rkey, qpn)
            }
            fn remote_write_on(
                &mut self,
                r: &MemRef,
                qpn: u32,
                data: &[u8],
            ) -> Result<(), MemError> {
                MrTable::remote_write_on(self, r, qpn, data)
            }
            $($extra)*
        }
    };
}

memory_via_table!(MrTable);

// The poll core's view: `let mut mem = &*table; qp.handle_packet(now, pkt, &mut mem, srq)`.
memory_via_table!(&MrTable);

// A port's memory shared with consumer threads: the engine's `Host<Arc<MrTable>>`.
memory_via_table!(
    Arc<MrTable>,
    fn pin_table(&self) -> Option<&Arc<MrTable>> {
        Some(self)
    }
);
