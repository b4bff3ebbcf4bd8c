//! A pool of packet mbufs (`rte_pktmbuf_pool_create`), freed on drop.

use std::ffi::CString;
use std::ptr::NonNull;

use super::eal::Eal;
use super::error::DpdkError;
use super::mbuf::Mbuf;

/// An owned pktmbuf pool. Mbufs allocated from it hold a raw pointer to it; dropping the pool
/// while any mbuf is still out (in flight, in a queue, in a ring) would free memory under them, so
/// then the pool is deliberately leaked instead of freed.
#[derive(Debug)]
pub struct Mempool {
    ptr: NonNull<dpdk_sys::rte_mempool>,
    name: String,
    size: u32,
}

// SAFETY: the default ring-based pktmbuf pool is multi-producer/multi-consumer safe; the handle is
// only a pointer to it.
unsafe impl Send for Mempool {}
// SAFETY: as above; every operation through `&Mempool` is thread-safe in DPDK.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// Data room of each mbuf that holds a full 2 KiB frame plus DPDK's headroom.
    pub const DEFAULT_DATA_ROOM: u16 = 2048 + 128;

    /// Creates a pool of `n` mbufs with `data_room` bytes of buffer each (including the
    /// `RTE_PKTMBUF_HEADROOM` of 128) and a per-lcore cache of `cache` mbufs. `name` must be
    /// unique in the process and shorter than `RTE_MEMPOOL_NAMESIZE` (26 bytes).
    pub fn new(
        _eal: &Eal,
        name: &str,
        n: u32,
        cache: u32,
        data_room: u16,
    ) -> Result<Mempool, DpdkError> {
        if name.len() >= dpdk_sys::RTE_MEMPOOL_NAMESIZE as usize {
            return Err(DpdkError::InvalidArgument(format!(
                "mempool name {name:?} longer than {} bytes",
                dpdk_sys::RTE_MEMPOOL_NAMESIZE - 1
            )));
        }
        let c = CString::new(name)
            .map_err(|_| DpdkError::InvalidArgument(format!("mempool name {name:?}")))?;
        // SAFETY: EAL is initialised (we hold &Eal); c is a valid NUL-terminated string that DPDK
        // copies into the pool header.
        let p = unsafe {
            dpdk_sys::rte_pktmbuf_pool_create(
                c.as_ptr(),
                n,
                cache,
                0,
                data_room,
                dpdk_sys::SOCKET_ID_ANY,
            )
        };
        let ptr = NonNull::new(p)
            .ok_or_else(|| DpdkError::last(format!("rte_pktmbuf_pool_create({name}, n={n})")))?;
        Ok(Mempool {
            ptr,
            name: name.to_owned(),
            size: n,
        })
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of mbufs the pool was created with.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Mbufs currently free in the pool (including per-lcore caches).
    pub fn available(&self) -> u32 {
        // SAFETY: ptr is a live pool; the call only reads counters.
        unsafe { dpdk_sys::rte_mempool_avail_count(self.ptr.as_ptr()) }
    }

    /// Mbufs currently allocated from the pool.
    pub fn in_use(&self) -> u32 {
        // SAFETY: ptr is a live pool; the call only reads counters.
        unsafe { dpdk_sys::rte_mempool_in_use_count(self.ptr.as_ptr()) }
    }

    /// Allocates one mbuf (empty, with the default headroom), or `None` when the pool is empty.
    pub fn alloc(&self) -> Option<Mbuf> {
        // SAFETY: ptr is a live pktmbuf pool; the returned mbuf (if any) is exclusively ours.
        let m = unsafe { dpdk_sys::shim_rte_pktmbuf_alloc(self.ptr.as_ptr()) };
        // SAFETY: a non-null result is a freshly allocated mbuf owned by nobody else.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_raw(m) })
    }

    /// Fills `out` with freshly allocated mbufs, all or nothing: `false` (and `out` untouched)
    /// when the pool has fewer than `out.len()` free. Slots that held mbufs are freed first.
    pub fn alloc_bulk(&self, out: &mut [Option<Mbuf>]) -> bool {
        for slot in out.iter_mut() {
            *slot = None;
        }
        let Ok(count) = u32::try_from(out.len()) else {
            return false;
        };
        // SAFETY: `Option<Mbuf>` has the layout of `*mut rte_mbuf` (Mbuf is a transparent
        // NonNull, so None is the null pointer) and every slot is None; DPDK writes `count`
        // pointers to mbufs that become exclusively ours, or nothing when it returns non-zero.
        let ret = unsafe {
            dpdk_sys::shim_rte_pktmbuf_alloc_bulk(
                self.ptr.as_ptr(),
                out.as_mut_ptr().cast::<*mut dpdk_sys::rte_mbuf>(),
                count,
            )
        };
        ret == 0
    }

    /// The raw pool, for queue set-up.
    pub(crate) fn as_ptr(&self) -> *mut dpdk_sys::rte_mempool {
        self.ptr.as_ptr()
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        let in_use = self.in_use();
        if in_use != 0 {
            tracing::warn!(
                target: "dpdk_roce::dpdk::mempool",
                pool = %self.name,
                in_use,
                "mempool dropped with mbufs still out: leaking it instead of freeing"
            );
            return;
        }
        // SAFETY: no mbuf of this pool is in use any more and we are the only owner of the pool.
        unsafe { dpdk_sys::rte_mempool_free(self.ptr.as_ptr()) }
    }
}
