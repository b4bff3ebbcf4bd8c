//! Zero-copy transmit of pinned registered memory: a preallocated pool of external-buffer slots
//! (DPDK shared info + the pin it holds), so attaching a payload to an mbuf allocates nothing.
//! A slot is taken when a payload segment is attached (`rte_pktmbuf_attach_extbuf`) and given
//! back by DPDK's free callback when the PMD has sent the packet, which unpins the memory
//! (`MrTable::unpin`): until then `MrTable::deregister` waits and `try_deregister` reports
//! `Busy`.

use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;

use super::Mbuf;
use crate::mem::{MrTable, PinToken};

/// `RTE_ETH_TX_OFFLOAD_MULTI_SEGS` (`RTE_BIT64(15)` in rte_ethdev.h, a macro bindgen cannot
/// evaluate): the PMD transmits chained mbufs.
pub const TX_OFFLOAD_MULTI_SEGS: u64 = 1 << 15;

/// One external-buffer slot. `shinfo` is first, so the shared-info pointer DPDK hands to the
/// free callback's `opaque` is the slot itself.
#[repr(C)]
struct Slot {
    shinfo: UnsafeCell<dpdk_sys::rte_mbuf_ext_shared_info>,
    pin: UnsafeCell<Option<(PinToken, Arc<MrTable>)>>,
    index: u32,
    pool: *const SlotPool,
}

/// The slots and the free list. Shared by the I/O queue and every in-flight mbuf.
pub(crate) struct SlotPool {
    slots: Box<[Slot]>,
    free: ArrayQueue<u32>,
}

// SAFETY: a slot's cells are used only by the holder of its index (taken from `free` by the
// transmitting core, given back by the single free callback); `free` is a lock-free MPMC queue.
unsafe impl Send for SlotPool {}
// SAFETY: as above.
unsafe impl Sync for SlotPool {}

impl SlotPool {
    /// A pool of `n` slots.
    pub(crate) fn new(n: u32) -> Arc<SlotPool> {
        let n = n.max(1);
        let pool = Arc::new_cyclic(|weak: &std::sync::Weak<SlotPool>| {
            let ptr = weak.as_ptr();
            SlotPool {
                slots: (0..n)
                    .map(|i| Slot {
                        // SAFETY: plain C data; all zeroes is valid and filled in before use.
                        shinfo: UnsafeCell::new(unsafe { std::mem::zeroed() }),
                        pin: UnsafeCell::new(None),
                        index: i,
                        pool: ptr,
                    })
                    .collect(),
                free: ArrayQueue::new(n as usize),
            }
        });
        for i in 0..n {
            let _ = pool.free.push(i);
        }
        pool
    }

    /// Slots attached to mbufs that DPDK has not released yet.
    pub(crate) fn in_flight(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Attaches the pinned range of `token` to the empty mbuf `m`. Gives the token back when no
    /// slot is free or the range is longer than an mbuf segment can be.
    pub(crate) fn attach(
        &self,
        m: &mut Mbuf,
        token: PinToken,
        table: &Arc<MrTable>,
    ) -> Result<(), PinToken> {
        let Ok(len) = u16::try_from(token.len()) else {
            return Err(token);
        };
        let Some(i) = self.free.pop() else {
            return Err(token);
        };
        let slot = &self.slots[i as usize];
        let addr = token.as_ptr().cast_mut().cast::<c_void>();
        let iova = token.iova().unwrap_or_else(|| {
            // SAFETY: only translates an address (EAL is up: we own an mbuf).
            let i = unsafe { dpdk_sys::rte_mem_virt2iova(addr) };
            if i == dpdk_sys::RTE_BAD_IOVA {
                addr as u64
            } else {
                i
            }
        });
        // SAFETY: we hold slot `i` (popped from `free`), so nobody else touches its cells.
        unsafe { *slot.pin.get() = Some((token, table.clone())) };
        let shinfo = slot.shinfo.get();
        // SAFETY: `shinfo` is this slot's, unused while the slot is free; the callback and
        // opaque (the slot) stay valid while the pool lives, and the pool outlives every mbuf
        // (`DpdkFrameIo` leaks it when dropped with slots in flight).
        unsafe {
            dpdk_sys::shim_rte_mbuf_ext_shinfo_init(
                shinfo,
                Some(release_slot),
                std::ptr::from_ref(slot).cast_mut().cast::<c_void>(),
            );
        }
        // SAFETY: the pinned range stays registered and readable until `release_slot` unpins
        // it, which DPDK calls once the mbuf no longer references it; `shinfo` is this slot's.
        if unsafe { m.attach_extbuf_raw(addr, iova, len, shinfo) } {
            Ok(())
        } else {
            // SAFETY: the slot is still ours (never attached): take the pin back, free it.
            let (token, _) = unsafe { (*slot.pin.get()).take() }.expect("just stored");
            let _ = self.free.push(i);
            Err(token)
        }
    }
}

/// DPDK's free callback of an attached slot: unpins and returns the slot.
unsafe extern "C" fn release_slot(_addr: *mut c_void, opaque: *mut c_void) {
    // SAFETY: `opaque` is the `Slot` given to `shim_rte_mbuf_ext_shinfo_init` in `attach`;
    // its pool is alive (see there). DPDK calls this once per attachment, after the last mbuf
    // referencing it is gone, so the slot's cells are ours.
    let slot = unsafe { &*opaque.cast::<Slot>() };
    // SAFETY: as above.
    if let Some((token, table)) = unsafe { (*slot.pin.get()).take() } {
        table.unpin(token);
    }
    // SAFETY: the pool outlives its slots' attachments.
    let pool = unsafe { &*slot.pool };
    let _ = pool.free.push(slot.index);
}
