//! [`HugepageAllocator`]: provider-allocated LMR memory from the DPDK heap (`rte_zmalloc`,
//! hugepages unless EAL runs `--no-huge`), with a known I/O address, so registered regions can be
//! attached to mbufs as external buffers (docs/DESIGN.md "Memory"; DPDK programmer's guide, "Memory
//! in DPDK" / `rte_malloc`).

use std::ffi::c_void;
use std::ptr::NonNull;

use super::Eal;
use crate::mem::{Allocation, Allocator};

/// `Allocation::cookie` of a block that is not IOVA-contiguous.
const NO_IOVA: u64 = u64::MAX;

/// Blocks from DPDK's malloc heap. A block's IOVA ([`Allocator::iova`]) is known when the EAL
/// runs in IOVA-as-VA mode (the I/O address is the virtual address) or, in IOVA-as-PA mode,
/// when every page of the block turned out physically contiguous at allocation time (checked
/// with `rte_mem_virt2iova` on every 4 KiB page); otherwise it is `None`.
#[derive(Debug, Clone, Copy)]
pub struct HugepageAllocator {
    _eal: &'static Eal,
}

/// Granularity of the contiguity check (the smallest page size).
const PAGE: usize = 4096;

impl HugepageAllocator {
    /// An allocator over the DPDK heap of the initialised `eal`.
    pub fn new(eal: &'static Eal) -> HugepageAllocator {
        HugepageAllocator { _eal: eal }
    }

    /// Whether the EAL runs IOVA as VA (every block's IOVA is then its address, contiguous).
    pub fn iova_as_va(&self) -> bool {
        // SAFETY: reads a global the EAL set at init.
        unsafe { dpdk_sys::rte_eal_iova_mode() == dpdk_sys::RTE_IOVA_VA }
    }

    /// The IOVA of `ptr`'s block when all of `len` bytes are IOVA-contiguous.
    fn contiguous_iova(ptr: *const c_void, len: usize) -> Option<u64> {
        // SAFETY: `ptr` is a live rte_malloc block; the call only looks the address up.
        let base = unsafe { dpdk_sys::rte_malloc_virt2iova(ptr) };
        if base == dpdk_sys::RTE_BAD_IOVA {
            return None;
        }
        // SAFETY: reads a global the EAL set at init.
        if unsafe { dpdk_sys::rte_eal_iova_mode() } == dpdk_sys::RTE_IOVA_VA {
            return Some(base);
        }
        let start = ptr as usize;
        let mut off = PAGE - start % PAGE;
        while off < len {
            // `rte_malloc_virt2iova` reads the block header, so it only takes block starts;
            // interior pages are translated by the generic lookup.
            // SAFETY: `start + off` lies inside the same live block (off < len); the call only
            // translates the address.
            let i = unsafe { dpdk_sys::rte_mem_virt2iova((start + off) as *const c_void) };
            if i != base + off as u64 {
                return None;
            }
            off += PAGE;
        }
        Some(base)
    }
}

// SAFETY: blocks come from rte_zmalloc with at least the requested alignment and size (zeroed,
// not shared), stay valid until rte_free, and DPDK heap memory is usable from any thread.
unsafe impl Allocator for HugepageAllocator {
    fn alloc(&self, len: usize, align: usize) -> Option<Allocation> {
        if !align.is_power_of_two() {
            return None;
        }
        let align = align.max(64);
        let c_align = u32::try_from(align).ok()?;
        // SAFETY: EAL is initialised (we hold &Eal); a NULL type is allowed; size > 0.
        let raw = unsafe { dpdk_sys::rte_zmalloc(c"dpdk-roce-lmr".as_ptr(), len.max(1), c_align) };
        let ptr = NonNull::new(raw.cast::<u8>())?;
        let iova = Self::contiguous_iova(raw, len.max(1)).unwrap_or(NO_IOVA);
        Some(Allocation {
            ptr,
            len,
            align,
            cookie: iova,
        })
    }

    unsafe fn free(&self, a: Allocation) {
        // SAFETY: the caller guarantees `a` came from `alloc` (rte_zmalloc) and is unused.
        unsafe { dpdk_sys::rte_free(a.ptr.as_ptr().cast::<c_void>()) }
    }

    fn iova(&self, block: &Allocation) -> Option<u64> {
        (block.cookie != NO_IOVA).then_some(block.cookie)
    }

    fn name(&self) -> &'static str {
        "hugepage"
    }
}
