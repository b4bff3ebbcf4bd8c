//! Where a shard's frames come from and go to, as traits and frame views with no I/O of their
//! own: [`FrameIo`] is a DPDK RX/TX queue pair (`dpdk::DpdkFrameIo`) or an in-memory cable
//! (`engine::channel_io::ChannelIo`); [`FrameBuf`] is where a frame is built.

use crate::mem::{MrTable, PinToken};
use std::sync::Arc;
use std::time::Duration;

/// A frame whose payload stays in registered memory (docs/DESIGN.md "Memory": no copy on TX):
/// `headers` (Ethernet through the last RoCE extension header), then the pinned payload
/// `segments` in order, then `trailer` (BTH pad bytes and the ICRC).
pub struct PinnedFrame<'a> {
    pub headers: &'a [u8],
    /// Pins of the payload ranges; `tx_pinned` takes them all (each is unpinned exactly once,
    /// when the device no longer needs the bytes, or at once when the frame is dropped).
    pub segments: &'a mut Vec<PinToken>,
    pub trailer: &'a [u8],
    /// The table the pins belong to.
    pub table: &'a Arc<MrTable>,
}

impl PinnedFrame<'_> {
    /// Total frame length.
    pub fn len(&self) -> usize {
        self.headers.len()
            + self.segments.iter().map(PinToken::len).sum::<usize>()
            + self.trailer.len()
    }

    /// True for a frame of no bytes (never built by the host).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies the whole frame into `out` (cleared first) without unpinning.
    pub fn gather_into(&self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(self.headers);
        for t in self.segments.iter() {
            let at = out.len();
            out.resize(at + t.len(), 0);
            // The token pins exactly `t.len()` bytes: this cannot fail.
            let _ = self.table.read_pinned(t, 0, &mut out[at..]);
        }
        out.extend_from_slice(self.trailer);
    }

    /// Releases every pin (the frame was copied or dropped).
    pub fn unpin_all(&mut self) {
        for t in self.segments.drain(..) {
            self.table.unpin(t);
        }
    }
}

/// Where a frame is built in place: a reused buffer, or straight in the device's transmit
/// buffer ([`FrameIo::tx_build`]), so the built frame is not copied again.
pub trait FrameBuf {
    /// The frame's `len` bytes, their contents unspecified (a builder writes every one);
    /// `None` when the buffer cannot hold `len` bytes.
    fn sized(&mut self, len: usize) -> Option<&mut [u8]>;
    /// The frame as last sized and written.
    fn bytes(&self) -> &[u8];

    /// Sizes the frame to `bytes` and copies them in; false when they do not fit.
    #[inline]
    fn put(&mut self, bytes: &[u8]) -> bool {
        self.sized(bytes.len())
            .map(|out| out.copy_from_slice(bytes))
            .is_some()
    }
}

impl FrameBuf for Vec<u8> {
    #[inline]
    fn sized(&mut self, len: usize) -> Option<&mut [u8]> {
        self.resize(len, 0);
        Some(self)
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        self
    }
}

/// What [`FrameIo::tx_build`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Built {
    /// The builder had no frame.
    Nothing,
    /// A frame was built and queued.
    Queued,
    /// A frame was built and dropped (the device had no room or buffer), counted.
    Dropped,
}

/// One queue pair of a port, as a shard sees it.
pub trait FrameIo {
    /// Receives up to one burst, calling `f` on each frame (valid only during the call).
    /// Returns the number of frames received.
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize;
    /// Queues `frame` for sending. False when the device's queue is full: the frame is dropped
    /// and counted (RC retransmission recovers it).
    fn tx(&mut self, frame: &[u8]) -> bool;
    /// Builds a frame in place and queues it: `build` sizes and writes it through the
    /// [`FrameBuf`] it is given, and returns false when it has no frame. The default builds
    /// into `scratch` and queues that with [`tx`](Self::tx); a device with its own transmit
    /// buffers builds the frame straight into one (DPDK: an mbuf), so it is not copied again.
    fn tx_build(
        &mut self,
        scratch: &mut Vec<u8>,
        build: &mut dyn FnMut(&mut dyn FrameBuf) -> bool,
    ) -> Built {
        tx_built_copy(self, scratch, build)
    }
    /// Hands queued frames to the device. Frames the device has no room for stay queued for
    /// the next flush (see [`ready`](Self::ready)).
    fn flush(&mut self);
    /// True when the device can take another frame now (a full burst is handed over first).
    /// A shard builds no frame the device could not take: the rest stays in its queue pairs,
    /// unbuilt, instead of being dropped and recovered by retransmission.
    fn ready(&mut self) -> bool {
        true
    }
    /// True when frames wait for a [`flush`](Self::flush) the device refused so far.
    fn tx_pending(&self) -> bool {
        false
    }
    /// Whether [`tx_pinned`](Self::tx_pinned) sends payloads without copying them (the host
    /// then builds pinned frames for payloads of at least this many bytes); `None` when it
    /// would only gather them into one buffer, so the host should build whole frames.
    fn zero_copy_min(&self) -> Option<usize> {
        None
    }
    /// Frames the port dropped as another VLAN's (`net::vlan`), since it opened.
    fn rx_other_vlan(&self) -> u64 {
        0
    }
    /// Queues a frame whose payload is pinned registered memory. The default gathers it into
    /// one buffer, unpins, and sends that with [`tx`](Self::tx).
    fn tx_pinned(&mut self, frame: PinnedFrame<'_>) -> bool {
        tx_gathered(self, frame)
    }
    /// The receive interrupt of this queue, for a thread that sleeps until a frame arrives
    /// (the away helper, docs/DESIGN.md "Progress"); `None` when the device has none.
    fn rx_interrupt(&self) -> Option<Box<dyn RxInterrupt>> {
        None
    }
}

/// The receive interrupt of one device queue. The queues of one port share a wait set: a
/// [`wait`](Self::wait) on any of them ends when a frame reaches any armed queue of the port.
pub trait RxInterrupt: Send {
    /// Arms the interrupt: a frame received from now on ends [`wait`](Self::wait). False when
    /// the device refuses (the caller then sleeps on a timer).
    fn arm(&mut self) -> bool;
    /// Disarms it (frames no longer signal).
    fn disarm(&mut self);
    /// Sleeps until a frame reaches an armed queue of the port, or `timeout` passed. True when
    /// woken by a frame.
    fn wait(&mut self, timeout: Duration) -> bool;
}

/// Builds a frame into `scratch` and queues a copy of it through `io.tx` (the default of
/// [`FrameIo::tx_build`], for queues without transmit buffers of their own).
pub fn tx_built_copy<I: FrameIo + ?Sized>(
    io: &mut I,
    scratch: &mut Vec<u8>,
    build: &mut dyn FnMut(&mut dyn FrameBuf) -> bool,
) -> Built {
    if !build(scratch) {
        return Built::Nothing;
    }
    if io.tx(scratch) {
        Built::Queued
    } else {
        Built::Dropped
    }
}

/// Sends a pinned frame as one gathered copy through `io.tx` and unpins it (the default of
/// [`FrameIo::tx_pinned`], for queues that cannot send external buffers).
pub fn tx_gathered<I: FrameIo + ?Sized>(io: &mut I, mut frame: PinnedFrame<'_>) -> bool {
    let mut buf = Vec::with_capacity(frame.len());
    frame.gather_into(&mut buf);
    frame.unpin_all();
    io.tx(&buf)
}

/// Counters of an I/O queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub tx_dropped: u64,
    /// Frames sent with their payload attached from registered memory (no copy).
    pub tx_zero_copy: u64,
    /// Pinned frames that were gathered into one buffer instead (PMD without multi-segment
    /// transmit, or no free external-buffer slot).
    pub tx_gathered: u64,
    /// Frames of another VLAN (or untagged on a VLAN port) the port dropped (`net::vlan`).
    pub rx_other_vlan: u64,
}

/// A boxed queue pair is one (the DAT objects hold their port so, not generic over the I/O).
impl FrameIo for Box<dyn FrameIo + Send> {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        (**self).rx_burst(f)
    }
    fn tx(&mut self, frame: &[u8]) -> bool {
        (**self).tx(frame)
    }
    fn tx_build(
        &mut self,
        scratch: &mut Vec<u8>,
        build: &mut dyn FnMut(&mut dyn FrameBuf) -> bool,
    ) -> Built {
        (**self).tx_build(scratch, build)
    }
    fn flush(&mut self) {
        (**self).flush()
    }
    fn ready(&mut self) -> bool {
        (**self).ready()
    }
    fn tx_pending(&self) -> bool {
        (**self).tx_pending()
    }
    fn zero_copy_min(&self) -> Option<usize> {
        (**self).zero_copy_min()
    }
    fn rx_other_vlan(&self) -> u64 {
        (**self).rx_other_vlan()
    }
    fn tx_pinned(&mut self, frame: PinnedFrame<'_>) -> bool {
        (**self).tx_pinned(frame)
    }
    fn rx_interrupt(&self) -> Option<Box<dyn RxInterrupt>> {
        (**self).rx_interrupt()
    }
}
