//! `Mbuf`: an owned DPDK packet buffer (possibly a chain of segments), freed on drop unless it is
//! handed to a TX queue. External buffers (zero-copy payloads from registered memory) are attached
//! with [`Mbuf::attach_extbuf`] and reported back through an [`ExtBufTracker`] when the NIC is done.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use dpdk_sys::rte_mbuf;

/// An owned mbuf chain. `Option<Mbuf>` has the layout of a (nullable) `struct rte_mbuf *`, which
/// the burst functions rely on to pass arrays of them to DPDK without copying.
#[repr(transparent)]
#[derive(Debug)]
pub struct Mbuf(NonNull<rte_mbuf>);

// SAFETY: an Mbuf exclusively owns its chain; DPDK mbufs may be freed or sent from any thread
// (the pool's ring is multi-producer safe).
unsafe impl Send for Mbuf {}

const _: () = assert!(std::mem::size_of::<Option<Mbuf>>() == std::mem::size_of::<*mut rte_mbuf>());

impl Mbuf {
    /// Takes ownership of a raw mbuf chain.
    ///
    /// # Safety
    /// `m` must be a valid mbuf (chain) that nobody else owns or frees.
    pub(crate) unsafe fn from_raw(m: NonNull<rte_mbuf>) -> Mbuf {
        Mbuf(m)
    }

    /// Frees every mbuf (chain) in `slots` with one call (`rte_pktmbuf_free_bulk`) and leaves
    /// the slots `None`: a burst's mbufs go back to their pools together, not one call each.
    pub fn free_bulk(slots: &mut [Option<Mbuf>]) {
        let Ok(count) = u32::try_from(slots.len()) else {
            slots.iter_mut().for_each(|s| *s = None);
            return;
        };
        // SAFETY: `Option<Mbuf>` has the layout of `*mut rte_mbuf` (a transparent NonNull, None
        // the null pointer, which rte_pktmbuf_free_bulk skips); every non-null entry is a chain
        // we own. After the call none is valid, so each slot is overwritten with None without
        // running Mbuf's drop (`ptr::write`): nothing is freed twice.
        unsafe {
            dpdk_sys::rte_pktmbuf_free_bulk(
                slots.as_mut_ptr().cast::<*mut dpdk_sys::rte_mbuf>(),
                count,
            );
            for s in slots.iter_mut() {
                std::ptr::write(s, None);
            }
        }
    }

    /// Gives up ownership (e.g. to a TX queue) without freeing.
    pub(crate) fn into_raw(self) -> NonNull<rte_mbuf> {
        let p = self.0;
        std::mem::forget(self);
        p
    }

    fn head(&self) -> &rte_mbuf {
        // SAFETY: we own a valid mbuf; shared access through &self.
        unsafe { self.0.as_ref() }
    }

    /// Length of the first segment's data.
    pub fn data_len(&self) -> u16 {
        self.head().data_len
    }

    /// The 802.1Q tag control information the device took off this frame on receive (VLAN
    /// strip: `RTE_MBUF_F_RX_VLAN_STRIPPED` in `ol_flags`, the TCI in `vlan_tci`; net_af_packet
    /// does it for frames the kernel untagged), or `None` when the data is as it arrived.
    pub fn stripped_vlan_tci(&self) -> Option<u16> {
        /// `RTE_MBUF_F_RX_VLAN_STRIPPED` (rte_mbuf_core.h).
        const RX_VLAN_STRIPPED: u64 = 1 << 6;
        let h = self.head();
        (h.ol_flags & RX_VLAN_STRIPPED != 0).then_some(h.vlan_tci)
    }

    /// Length of the whole packet (all segments).
    pub fn pkt_len(&self) -> u32 {
        self.head().pkt_len
    }

    /// Number of segments in the chain.
    pub fn nb_segs(&self) -> u16 {
        self.head().nb_segs
    }

    /// The port the mbuf was received on.
    pub fn port(&self) -> u16 {
        self.head().port
    }

    /// Free bytes before the first segment's data.
    pub fn headroom(&self) -> u16 {
        self.head().data_off
    }

    /// Free bytes after the last segment's data.
    pub fn tailroom(&self) -> u16 {
        let last = self.segments_raw().last().expect("at least one segment");
        last.buf_len - last.data_off - last.data_len
    }

    /// Whether the first segment's data lives in an attached external buffer (read-only here).
    pub fn is_external(&self) -> bool {
        self.head().ol_flags & dpdk_sys::RTE_MBUF_F_EXTERNAL != 0
    }

    fn segments_raw(&self) -> impl Iterator<Item = &rte_mbuf> {
        let mut cur: *const rte_mbuf = self.0.as_ptr();
        std::iter::from_fn(move || {
            // SAFETY: cur is null or a segment of the chain we own; segments stay valid as long
            // as &self borrows the chain.
            let seg = unsafe { cur.as_ref()? };
            cur = seg.next;
            Some(seg)
        })
    }

    /// The first segment's data.
    pub fn data(&self) -> &[u8] {
        let h = self.head();
        // SAFETY: buf_addr + data_off .. + data_len is the initialised data of the segment,
        // inside its buffer; the borrow of self keeps the mbuf alive and unmodified.
        unsafe { seg_slice(h) }
    }

    /// The first segment's data, writable; `None` when it is an external buffer (shared memory
    /// that this side may only read).
    pub fn data_mut(&mut self) -> Option<&mut [u8]> {
        if self.is_external() {
            return None;
        }
        let h = self.head();
        let (p, len) = (h.buf_addr.cast::<u8>(), usize::from(h.data_len));
        // SAFETY: a direct mbuf's buffer is exclusively ours; the range is its data.
        Some(unsafe { std::slice::from_raw_parts_mut(p.add(usize::from(h.data_off)), len) })
    }

    /// Each segment's data, in order.
    pub fn segments(&self) -> impl Iterator<Item = &[u8]> {
        // SAFETY: as in `data`, for each segment of the chain.
        self.segments_raw().map(|s| unsafe { seg_slice(s) })
    }

    /// The whole packet, copied into one vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.pkt_len() as usize);
        for s in self.segments() {
            v.extend_from_slice(s);
        }
        v
    }

    /// Grows the last segment by `len` bytes and returns them (uninitialised contents: whatever
    /// the buffer held), or `None` without change when the tailroom is too small.
    pub fn append(&mut self, len: u16) -> Option<&mut [u8]> {
        // SAFETY: the chain is ours; DPDK checks the tailroom and returns NULL when short.
        let p = unsafe { dpdk_sys::shim_rte_pktmbuf_append(self.0.as_ptr(), len) };
        let p = NonNull::new(p)?;
        // SAFETY: DPDK returned the start of `len` bytes inside the last segment's buffer, which
        // is a direct buffer of ours (an external segment has no tailroom).
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u8>(), len.into()) })
    }

    /// Appends a copy of `bytes`; `false` (and no change) when the tailroom is too small.
    pub fn extend_from_slice(&mut self, bytes: &[u8]) -> bool {
        let Ok(len) = u16::try_from(bytes.len()) else {
            return false;
        };
        match self.append(len) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                true
            }
            None => false,
        }
    }

    /// Grows the first segment by `len` bytes at the front and returns them, or `None` without
    /// change when the headroom is too small (or the first segment is external).
    pub fn prepend(&mut self, len: u16) -> Option<&mut [u8]> {
        if self.is_external() {
            return None;
        }
        // SAFETY: the chain is ours; DPDK checks the headroom and returns NULL when short.
        let p = unsafe { dpdk_sys::shim_rte_pktmbuf_prepend(self.0.as_ptr(), len) };
        let p = NonNull::new(p)?;
        // SAFETY: DPDK returned the new start of the first (direct) segment's data, `len` bytes.
        Some(unsafe { std::slice::from_raw_parts_mut(p.as_ptr().cast::<u8>(), len.into()) })
    }

    /// Removes `len` bytes from the front of the first segment; `false` if it is shorter.
    pub fn adj(&mut self, len: u16) -> bool {
        // SAFETY: the chain is ours; DPDK checks the length.
        !unsafe { dpdk_sys::shim_rte_pktmbuf_adj(self.0.as_ptr(), len) }.is_null()
    }

    /// Removes `len` bytes from the end of the last segment; `false` if it is shorter.
    pub fn trim(&mut self, len: u16) -> bool {
        // SAFETY: the chain is ours; DPDK checks the length.
        unsafe { dpdk_sys::shim_rte_pktmbuf_trim(self.0.as_ptr(), len) == 0 }
    }

    /// Appends `tail` (and its segments) to this chain. Gives `tail` back when the chain would
    /// exceed DPDK's segment limit.
    pub fn chain(&mut self, tail: Mbuf) -> Result<(), Mbuf> {
        // SAFETY: both chains are ours and distinct (tail was moved in); on success DPDK links
        // tail into self, so ownership moves with it.
        let ret = unsafe { dpdk_sys::shim_rte_pktmbuf_chain(self.0.as_ptr(), tail.0.as_ptr()) };
        if ret == 0 {
            tail.into_raw();
            Ok(())
        } else {
            Err(tail)
        }
    }

    /// Makes this empty, single-segment, direct mbuf carry `buf` as its data without copying:
    /// the mbuf then points into `buf`'s memory, and `buf` is kept alive (boxed together with
    /// DPDK's shared info) until the last reference to the external buffer is gone, typically
    /// when the PMD has transmitted the packet. Then `buf` is dropped on that thread and, when
    /// given, `tracker` counts the release.
    ///
    /// `iova`: the IO address of `buf` for PMDs that DMA (a real NIC); `None` asks DPDK
    /// (`rte_mem_virt2iova`, which reads /proc/self/pagemap for non-DPDK memory: slow) and
    /// falls back to the virtual address, which is what virtual devices use.
    ///
    /// Fails, giving `buf` back, when this mbuf is not empty, chained or not direct, or `buf` is
    /// longer than 65535 bytes.
    pub fn attach_extbuf<B>(
        &mut self,
        buf: B,
        iova: Option<u64>,
        tracker: Option<Arc<ExtBufTracker>>,
    ) -> Result<(), B>
    where
        B: AsRef<[u8]> + Send + 'static,
    {
        let h = self.head();
        let attached = h.ol_flags & (dpdk_sys::RTE_MBUF_F_EXTERNAL | dpdk_sys::RTE_MBUF_F_INDIRECT);
        if h.pkt_len != 0 || h.nb_segs != 1 || attached != 0 {
            return Err(buf);
        }
        let Ok(len) = u16::try_from(buf.as_ref().len()) else {
            return Err(buf);
        };
        // Box first, then take the address: the bytes of `buf` are then at a stable place for as
        // long as the box lives (for heap-backed B they were already).
        let holder = Box::new(ExtHolder {
            // SAFETY: rte_mbuf_ext_shared_info is plain C data (a fn pointer option, a pointer
            // and a counter); all zeroes is a valid value, filled in below.
            shinfo: unsafe { std::mem::zeroed() },
            buf,
            tracker,
        });
        let addr = holder.buf.as_ref().as_ptr().cast_mut().cast::<c_void>();
        let holder = Box::into_raw(holder);
        let iova = iova.unwrap_or_else(|| {
            // SAFETY: the call only translates an address (EAL is up: we own an mbuf).
            let i = unsafe { dpdk_sys::rte_mem_virt2iova(addr) };
            if i == dpdk_sys::RTE_BAD_IOVA {
                addr as u64
            } else {
                i
            }
        });
        // SAFETY: holder is a valid, leaked ExtHolder<B>; its shinfo gets our callback and the
        // holder itself as opaque, with refcnt 1. The mbuf is ours, direct, empty and
        // unchained, as rte_pktmbuf_attach_extbuf requires. DPDK only reads through buf_addr for
        // transmission; `data_mut`/`append`/`prepend` refuse to write into an external segment.
        // The callback frees the holder exactly once, when the refcnt drops to zero.
        unsafe {
            let shinfo = std::ptr::addr_of_mut!((*holder).shinfo);
            dpdk_sys::shim_rte_mbuf_ext_shinfo_init(
                shinfo,
                Some(ext_free::<B>),
                holder.cast::<c_void>(),
            );
            if let Some(t) = &(*holder).tracker {
                t.attached.fetch_add(1, Ordering::Relaxed);
            }
            let m = self.0.as_ptr();
            dpdk_sys::shim_rte_pktmbuf_attach_extbuf(m, addr, iova, len, shinfo);
            (*m).data_len = len;
            (*m).pkt_len = u32::from(len);
        }
        Ok(())
    }
}

impl Mbuf {
    /// Attaches `len` bytes at `addr` (IO address `iova`) as this empty, direct, unchained
    /// mbuf's data, with caller-owned shared info `shinfo` (already initialised with its free
    /// callback and a reference count of 1). False (nothing changed) when this mbuf is not
    /// empty, chained or not direct.
    ///
    /// # Safety
    /// `addr..addr + len` must stay valid for reads, and `shinfo` valid and not reused, until
    /// DPDK calls the free callback of `shinfo`.
    pub(crate) unsafe fn attach_extbuf_raw(
        &mut self,
        addr: *mut c_void,
        iova: u64,
        len: u16,
        shinfo: *mut dpdk_sys::rte_mbuf_ext_shared_info,
    ) -> bool {
        let h = self.head();
        let attached = h.ol_flags & (dpdk_sys::RTE_MBUF_F_EXTERNAL | dpdk_sys::RTE_MBUF_F_INDIRECT);
        if h.pkt_len != 0 || h.nb_segs != 1 || attached != 0 {
            return false;
        }
        // SAFETY: the mbuf is ours, direct, empty and unchained; the caller guarantees the
        // buffer and shinfo outlive the attachment.
        unsafe {
            let m = self.0.as_ptr();
            dpdk_sys::shim_rte_pktmbuf_attach_extbuf(m, addr, iova, len, shinfo);
            (*m).data_len = len;
            (*m).pkt_len = u32::from(len);
        }
        true
    }
}

impl Drop for Mbuf {
    fn drop(&mut self) {
        // SAFETY: we own the chain; rte_pktmbuf_free returns every segment to its pool (and
        // releases attached external buffers).
        unsafe { dpdk_sys::shim_rte_pktmbuf_free(self.0.as_ptr()) }
    }
}

/// # Safety
/// `s` must be a valid mbuf segment whose data stays unmodified for the returned lifetime.
unsafe fn seg_slice(s: &rte_mbuf) -> &[u8] {
    // SAFETY: by the contract above; buf_addr + data_off is the start of data_len bytes.
    unsafe {
        std::slice::from_raw_parts(
            s.buf_addr.cast::<u8>().add(usize::from(s.data_off)),
            usize::from(s.data_len),
        )
    }
}

/// Counts external buffers attached to mbufs and released by DPDK again, so the owner of the
/// memory knows when the NIC no longer references any of it (e.g. before deregistering an LMR).
#[derive(Debug, Default)]
pub struct ExtBufTracker {
    attached: AtomicU64,
    released: AtomicU64,
}

impl ExtBufTracker {
    /// A new tracker, shared between the owner and the mbufs.
    pub fn new() -> Arc<ExtBufTracker> {
        Arc::new(ExtBufTracker::default())
    }

    /// External buffers attached so far.
    pub fn attached(&self) -> u64 {
        self.attached.load(Ordering::Acquire)
    }

    /// External buffers DPDK has released so far.
    pub fn released(&self) -> u64 {
        self.released.load(Ordering::Acquire)
    }

    /// Attached buffers that DPDK still references.
    pub fn in_flight(&self) -> u64 {
        // Read released first: it never exceeds attached at any instant.
        let released = self.released();
        self.attached().saturating_sub(released)
    }
}

/// What an external buffer's `fcb_opaque` points to. `shinfo` is first, so the mbuf's `shinfo`
/// pointer and the box are the same allocation.
#[repr(C)]
struct ExtHolder<B> {
    shinfo: dpdk_sys::rte_mbuf_ext_shared_info,
    buf: B,
    tracker: Option<Arc<ExtBufTracker>>,
}

/// DPDK's free callback for buffers attached by `attach_extbuf::<B>`.
unsafe extern "C" fn ext_free<B>(_addr: *mut c_void, opaque: *mut c_void) {
    // SAFETY: opaque is the ExtHolder<B> leaked by attach_extbuf::<B>; DPDK calls this exactly
    // once, when the last mbuf referencing the buffer is freed, so the box is reclaimed once.
    let holder = unsafe { Box::from_raw(opaque.cast::<ExtHolder<B>>()) };
    let ExtHolder { buf, tracker, .. } = *holder;
    // The buffer is gone before the release is counted, so "released" means really released.
    drop(buf);
    if let Some(t) = tracker {
        t.released.fetch_add(1, Ordering::AcqRel);
    }
}
