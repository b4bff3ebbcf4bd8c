//! Registered memory: protection zones, the LMR/RMR key table and every checked access to
//! registered memory (IBTA vol. 1 §10.6: memory regions, L_Key/R_Key, protection domains, access
//! rights; §9.4.5 atomics).
//!
//! # What is checked
//!
//! Every access names a key, a protection zone, an address range and the rights it needs
//! ([`MemRef`](crate::mem::access::MemRef)); [`MrTable`] checks, in this order:
//! 1. the key: kind (bit 31 set in R_Keys only), slot index and generation match a live region,
//!    and for an R_Key that it was not invalidated (§10.6.6) → `InvalidKey`;
//! 2. the protection zone (§10.6.3.2) → `PdMismatch`;
//! 3. bounds, overflow-safe (`addr - base` and `+ len` in checked `u64` arithmetic; an
//!    `addr + len` that wraps is out of bounds) → `OutOfBounds`;
//! 4. the rights (§10.6.3.1: LOCAL_WRITE for local keys; REMOTE_READ/WRITE/ATOMIC for remote
//!    keys; local read is always granted) → `AccessDenied`;
//! 5. for atomics, 8-byte alignment (§9.4.5) → `Misaligned`.
//!
//! # Keys
//!
//! A key is `generation << idx_bits | (slot + 1)`, plus bit 31 for R_Keys, where `idx_bits` is
//! the width of the table's capacity. Freeing a region advances its slot's generation, so a freed
//! key never matches again, also after the slot is reused; a slot whose generations run out is
//! retired rather than reused (with the default 4096 slots: 2^18 registrations per slot).
//!
//! # Concurrency design
//!
//! Consumer threads register, deregister and query; poll-mode cores access. The table is a
//! fixed-capacity array of slots; each slot has one `AtomicU64` state word holding its
//! generation, a LIVE bit, an R_Key-valid bit and a count of accesses/pins in progress, plus
//! the region's metadata (PZ, rights, base, length, pointer) in atomics that are written only
//! while the slot is not LIVE and published by the Release store that sets LIVE.
//!
//! - **Data path (lock-free):** an access CASes the count up only if the state still shows the
//!   key's generation and LIVE (Acquire, so it sees the published metadata), checks, copies, and
//!   decrements the count (Release). No lock, no allocation; cores touching different regions
//!   never write the same cache line. Contention is one CAS on the slot word per access.
//! - **Registration:** takes a slot under a control-path `Mutex` (free-slot FIFO, owners, PZ
//!   counts), fills the metadata, publishes LIVE.
//! - **Deregistration:** clears LIVE with a CAS (no access can start after that: they fail with
//!   `InvalidKey`), then waits until the count drains to 0 (accesses are bounded memcpys; the
//!   Acquire load pairs with their Release decrements), then frees the backing and advances the
//!   generation. So after `deregister` returns no core ever touches the memory again, and an
//!   access racing with it either completes before it returns or fails with `InvalidKey`.
//! - **Pins** ([`MrTable::pin`], [`PinGuard`], [`PinToken`]) hold the same count for longer
//!   (an mbuf external buffer attached to registered memory until the NIC has sent it).
//!   [`MrTable::deregister`] waits for them; [`MrTable::try_deregister`] fails with
//!   [`MrError::Busy`] instead and leaves the region registered — the DAT layer uses it when a
//!   wait could be long (`dat_lmr_free` then reports `DAT_INVALID_STATE`).
//! - **Invalidation** clears the R_Key-valid bit atomically: remote accesses that start afterwards
//!   fail; one already checked completes (it was ordered before the invalidation). Local access
//!   and pins are unaffected.
//!
//! An `RwLock` around a map was the alternative; it makes every packet take a shared lock
//! (one contended cache line for all cores) and lets a registering consumer stall the cores, so
//! the per-slot count was chosen. Measured on the 2-core dev VM (test profile, opt-level 1): a
//! checked 64-byte read costs about 53 ns (the single-threaded `VecMemory`: 14 ns), a 1 KiB
//! write 46 ns, and two threads reading the same region 60 ns each.
//!
//! Bulk copies are plain `memcpy`s, as a NIC's DMA would be: bytes that a consumer (or two
//! remote requests) write while another access reads them have unspecified contents, as on a
//! hardware RNIC; atomics use `AtomicU64`, so they are atomic with respect to each other.
//!
//! # Backings
//!
//! Consumer memory registered as is (`DAT_MEM_TYPE_VIRTUAL`, [`MrTable::register_raw`], unsafe
//! with its contract), or memory the provider allocates through an [`Allocator`] (the heap, or
//! DPDK's hugepage heap through `dpdk::HugepageAllocator`). `unsafe` in this module is confined
//! to the raw registration, the allocator and the three raw accessors (copy out, copy in,
//! atomic), each with its `SAFETY` argument.

pub mod access;
#[allow(unsafe_code)]
pub mod alloc;
mod key_field;
#[allow(unsafe_code)]
pub mod table;
pub mod vec_memory;

pub use alloc::{Allocation, Allocator, FreeCheck, HeapAllocator, QuarantineAllocator};
pub use table::{
    BackingKind, MrError, MrTable, PinGuard, PinToken, Pz, Region, RegionInfo, DEFAULT_CAPACITY,
    MAX_CAPACITY, RKEY_BIT,
};

#[cfg(test)]
#[allow(unsafe_code)]
mod tests;
