//! Provider-allocated backing memory for LMRs (`dat_lmr_create` with memory the provider
//! allocates). The heap implementation is here; DPDK hugepage memory (`rte_malloc`) is another
//! implementation of the same trait in `src/dpdk`.

use core::ptr::NonNull;
use std::alloc::Layout;

/// One block of memory handed out by an [`Allocator`].
#[derive(Debug)]
pub struct Allocation {
    /// Start of the block.
    pub ptr: NonNull<u8>,
    /// Usable length in bytes (at least the length asked for).
    pub len: usize,
    /// Alignment the block was allocated with.
    pub align: usize,
    /// Allocator-private word (e.g. a DPDK socket or heap id); the heap allocator leaves it 0.
    pub cookie: u64,
}

// SAFETY: an `Allocation` is the owner of its block (the `Allocator` contract: not tied to a
// thread, not used by anyone else); moving it moves ownership, and `&Allocation` only exposes the
// address.
unsafe impl Send for Allocation {}
// SAFETY: as above; shared references give out nothing but the address and length.
unsafe impl Sync for Allocation {}

/// Where registered memory for provider-allocated LMRs comes from.
///
/// # Safety
///
/// Implementors promise that a block returned by [`alloc`](Allocator::alloc) is valid for reads
/// and writes of `len` bytes, aligned to at least `align`, not used by anyone else, and stays so
/// until it is passed to [`free`](Allocator::free). The memory table reads and writes it from
/// any thread (poll-mode cores and consumer threads), so the memory must not be tied to a
/// thread.
pub unsafe trait Allocator: Send + Sync + core::fmt::Debug {
    /// A block of at least `len` bytes (`len` may be 0) aligned to `align` (a power of two),
    /// zero-filled, or `None` when out of memory or the arguments are not supported.
    fn alloc(&self, len: usize, align: usize) -> Option<Allocation>;

    /// Returns a block to the allocator.
    ///
    /// # Safety
    ///
    /// `a` was returned by `self.alloc` and nothing reads or writes it any more.
    unsafe fn free(&self, a: Allocation);

    /// The I/O virtual (bus) address of the first byte of `block`, a live block of this
    /// allocator, for attaching registered memory to mbufs as external buffers. Returning `Some`
    /// promises the block is IOVA-contiguous (byte `k` is at `iova + k`): DPDK
    /// `rte_malloc_virt2iova` in IOVA-as-VA mode, or an `RTE_MEMZONE_IOVA_CONTIG` memzone.
    /// `None` when the memory is not DMA-able (plain heap memory).
    fn iova(&self, block: &Allocation) -> Option<u64> {
        let _ = block;
        None
    }

    /// Short name for diagnostics ("heap", "hugepage").
    fn name(&self) -> &'static str;
}

/// Aligned, zeroed blocks from the Rust global allocator. No IOVA: fine for the simulator and
/// for `net_tap`/`af_packet` PMDs that copy, not for zero-copy external buffers on a real NIC.
#[derive(Clone, Copy, Debug, Default)]
pub struct HeapAllocator;

/// Smallest alignment the heap allocator hands out (atomics need 8).
pub const MIN_ALIGN: usize = 64;

// SAFETY: blocks come from `std::alloc::alloc_zeroed` with a non-zero size and the requested
// (power-of-two) alignment; they are owned by the caller until `free`, and global-allocator memory
// is not tied to a thread.
unsafe impl Allocator for HeapAllocator {
    fn alloc(&self, len: usize, align: usize) -> Option<Allocation> {
        if !align.is_power_of_two() {
            return None;
        }
        let align = align.max(MIN_ALIGN);
        // A zero-sized request still gets a real block, so the pointer is a unique address.
        let layout = Layout::from_size_align(len.max(1), align).ok()?;
        // SAFETY: `layout` has a non-zero size.
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)?;
        Some(Allocation {
            ptr,
            len,
            align,
            cookie: 0,
        })
    }

    unsafe fn free(&self, a: Allocation) {
        // The layout is the one `alloc` used: same rounding of len and align.
        if let Ok(layout) = Layout::from_size_align(a.len.max(1), a.align) {
            // SAFETY: the caller guarantees `a` came from `alloc` (so from `alloc_zeroed` with
            // this layout) and is no longer used.
            unsafe { std::alloc::dealloc(a.ptr.as_ptr(), layout) };
        }
    }

    fn name(&self) -> &'static str {
        "heap"
    }
}

/// Checks a block's contents when it is freed (true = intact).
pub type FreeCheck = Box<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// A debugging allocator: heap blocks that, when freed, are checked (optional [`FreeCheck`]),
/// filled with a poison byte and kept (never reused) until the allocator is dropped, so a late
/// write through a stale pointer shows up in [`verify`](Self::verify). Like a sanitizer's
/// quarantine, for tests of the table's "no access after deregister" guarantee.
pub struct QuarantineAllocator {
    poison: u8,
    check: Option<FreeCheck>,
    held: std::sync::Mutex<Vec<Allocation>>,
    failed_checks: core::sync::atomic::AtomicUsize,
}

impl core::fmt::Debug for QuarantineAllocator {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QuarantineAllocator")
            .field("poison", &self.poison)
            .finish_non_exhaustive()
    }
}

impl QuarantineAllocator {
    /// Poisons freed blocks with `poison`; `check` (if any) sees each block's contents at free.
    pub fn new(poison: u8, check: Option<FreeCheck>) -> QuarantineAllocator {
        QuarantineAllocator {
            poison,
            check,
            held: std::sync::Mutex::new(Vec::new()),
            failed_checks: core::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Vec<Allocation>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Blocks freed so far.
    pub fn freed(&self) -> usize {
        self.held().len()
    }

    /// Blocks whose `FreeCheck` failed.
    pub fn failed_checks(&self) -> usize {
        self.failed_checks
            .load(core::sync::atomic::Ordering::SeqCst)
    }

    /// Number of freed blocks whose poison was overwritten after they were freed.
    pub fn verify(&self) -> usize {
        let held = self.held();
        held.iter()
            .filter(|a| {
                // SAFETY: quarantined blocks stay allocated until `drop` and nothing may access
                // them (they were freed); reading them here is the point of the check.
                let bytes = unsafe { core::slice::from_raw_parts(a.ptr.as_ptr(), a.len) };
                bytes.iter().any(|&b| b != self.poison)
            })
            .count()
    }
}

// SAFETY: blocks come from `HeapAllocator` (whose contract holds) and are only released to it
// in `drop`.
unsafe impl Allocator for QuarantineAllocator {
    fn alloc(&self, len: usize, align: usize) -> Option<Allocation> {
        HeapAllocator.alloc(len, align)
    }

    unsafe fn free(&self, a: Allocation) {
        // SAFETY: the caller guarantees nothing accesses `a` any more, so a temporary exclusive
        // view of its `len` bytes (valid: from `HeapAllocator::alloc`) aliases nothing.
        let bytes = unsafe { core::slice::from_raw_parts_mut(a.ptr.as_ptr(), a.len) };
        if let Some(check) = &self.check {
            if !check(bytes) {
                self.failed_checks
                    .fetch_add(1, core::sync::atomic::Ordering::SeqCst);
            }
        }
        bytes.fill(self.poison);
        self.held().push(a);
    }

    fn name(&self) -> &'static str {
        "quarantine"
    }
}

impl Drop for QuarantineAllocator {
    fn drop(&mut self) {
        for a in self.held().drain(..) {
            // SAFETY: every held block came from `HeapAllocator::alloc` and was freed by the
            // table, so nothing uses it.
            unsafe { HeapAllocator.free(a) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_blocks_are_aligned_zeroed_and_sized() {
        let h = HeapAllocator;
        for (len, align) in [(0, 8), (1, 8), (100, 4096), (4096, 64)] {
            let a = h.alloc(len, align).expect("heap alloc");
            assert_eq!(a.len, len);
            assert!(a.align >= align);
            assert_eq!(a.ptr.as_ptr() as usize % align, 0);
            assert_eq!(h.iova(&a), None);
            // SAFETY: from `h.alloc`, not used after.
            unsafe { h.free(a) };
        }
        assert!(h.alloc(8, 3).is_none(), "non-power-of-two alignment");
        assert_eq!(h.name(), "heap");
    }
}
