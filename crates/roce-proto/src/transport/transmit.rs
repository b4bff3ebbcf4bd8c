//! What a QP hands out to be sent: the headers and a description of the payload in registered
//! memory. The caller (the in-memory harness, or the DPDK engine attaching external buffers)
//! puts the payload on the wire; no byte is copied inside the transport.

use super::types::{INLINE_SGE, MAX_SGE};
use crate::mem::access::{Access, KeyKind, MemError, MemRef, Memory};
use crate::wire::roce::RoceHeaders;

/// Most memory segments one packet's payload can span.
pub const MAX_TX_SEGS: usize = MAX_SGE;

/// A packet's payload as a list of registered-memory segments, in order: up to
/// [`INLINE_SGE`] inline (the packet moves from the QP to the frame builder as a small value;
/// longer lists, up to [`MAX_TX_SEGS`], spill to the heap like the WR's [`SgList`]).
///
/// [`SgList`]: super::types::SgList
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Payload {
    segs: smallvec::SmallVec<[MemRef; INLINE_SGE]>,
    len: u32,
}

impl Payload {
    /// No payload.
    pub fn new() -> Self {
        Self::default()
    }

    /// The payload of one segment (none when it is empty).
    #[inline]
    pub fn one(seg: MemRef) -> Self {
        let mut segs = smallvec::SmallVec::new();
        if seg.len != 0 {
            segs.push(seg);
        }
        Payload { segs, len: seg.len }
    }

    /// Appends a segment; zero-length segments are skipped. Returns false when full.
    pub fn push(&mut self, seg: MemRef) -> bool {
        if seg.len == 0 {
            return true;
        }
        if self.segs.len() == MAX_TX_SEGS {
            return false;
        }
        self.segs.push(seg);
        self.len += seg.len;
        true
    }

    /// Total payload bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True when there is no payload.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The segments in order.
    pub fn segments(&self) -> &[MemRef] {
        &self.segs
    }

    /// Copies the payload into `out[..self.len()]` through the checked memory accessor.
    pub fn gather(&self, mem: &dyn Memory, out: &mut [u8]) -> Result<usize, MemError> {
        if out.len() < self.len() {
            return Err(MemError::OutOfBounds);
        }
        if let [seg] = self.segments() {
            // One segment (the common case): one read.
            let n = seg.len as usize;
            mem.read(seg, seg_access(seg.kind), &mut out[..n])?;
            return Ok(n);
        }
        let mut off = 0;
        for seg in self.segments() {
            let n = seg.len as usize;
            mem.read(seg, seg_access(seg.kind), &mut out[off..off + n])?;
            off += n;
        }
        Ok(off)
    }
}

/// The right a payload read needs: a local key reads its own memory, a remote key (a READ
/// response) needs REMOTE_READ.
fn seg_access(kind: KeyKind) -> Access {
    match kind {
        KeyKind::Local => Access::empty(),
        KeyKind::Remote => Access::REMOTE_READ,
    }
}

/// One packet to send: headers (the opcode table decides which are present) and payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub headers: RoceHeaders,
    pub payload: Payload,
}
