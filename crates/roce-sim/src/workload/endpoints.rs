//! What a verified workload runs over: the two QPs of one connection, the memory of their two
//! sides, and the clock that moves them.

use super::WorkloadError;
use crate::mem::access::Access;
use crate::mem::vec_memory::{Region, VecMemory};
use crate::transport::qp::QpStats;
use crate::transport::types::{RecvWr, SendWr, WorkCompletion};
use core::time::Duration;

pub use crate::link::Side;

/// One connection's two sides: A, whose QP posts the operations, and B, whose QP receives and
/// whose memory the operations target.
pub trait Endpoints {
    /// The QPNs of A's QP and B's: every completion names its QP, and A's QPN is the
    /// [`crate::payload`] stream of the connection's messages.
    fn qpns(&self) -> (u32, u32);
    /// Registers `len` bytes on `side` (in the QPs' protection domain) with `access`.
    fn register(&mut self, side: Side, len: usize, access: Access)
        -> Result<Region, WorkloadError>;
    /// Deregisters what [`Endpoints::register`] gave.
    fn deregister(&mut self, side: Side, region: &Region) -> Result<(), WorkloadError>;
    /// Copies `data` into `region` of `side` at offset `at`.
    fn write(
        &mut self,
        side: Side,
        region: &Region,
        at: usize,
        data: &[u8],
    ) -> Result<(), WorkloadError>;
    /// `len` bytes of `region` of `side` at offset `at`.
    fn read(
        &mut self,
        side: Side,
        region: &Region,
        at: usize,
        len: usize,
    ) -> Result<Vec<u8>, WorkloadError>;
    /// Posts `wr` on A's QP.
    fn post_send(&mut self, wr: SendWr) -> Result<(), WorkloadError>;
    /// Posts `wr` on B's QP.
    fn post_recv(&mut self, wr: RecvWr) -> Result<(), WorkloadError>;
    /// Moves both sides on until at least one completion is ready, for at most `limit` on the
    /// endpoints' clock; returns every ready one with its side, B's first.
    fn completions(
        &mut self,
        limit: Duration,
    ) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError>;
    /// Lets every timer and frame settle (a bounded time where the clock is real), then
    /// returns whatever completed meanwhile (a verified run expects none).
    fn settle(&mut self) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError>;
    /// Time on the endpoints' clock (virtual or real) since an arbitrary start.
    fn elapsed(&self) -> Duration;
    /// The counters of A's QP plus B's.
    fn qp_stats(&mut self) -> Result<QpStats, WorkloadError>;
}

/// Copies `data` into region `lkey` of `mem` at `at`; None when the region or the range is not
/// there. What both endpoint kinds do on the memory of a side.
pub(crate) fn write_region(mem: &mut VecMemory, lkey: u32, at: usize, data: &[u8]) -> Option<()> {
    mem.bytes_mut(lkey)
        .and_then(|b| b.get_mut(at..at + data.len()))
        .map(|b| b.copy_from_slice(data))
}

/// `len` bytes of region `lkey` of `mem` at `at`; None when the region or the range is not
/// there.
pub(crate) fn read_region(mem: &VecMemory, lkey: u32, at: usize, len: usize) -> Option<Vec<u8>> {
    mem.bytes(lkey)
        .and_then(|b| b.get(at..at + len))
        .map(<[u8]>::to_vec)
}

/// The error of a region a side does not have.
pub(crate) fn missing(side: Side, lkey: u32) -> WorkloadError {
    WorkloadError::Endpoints(format!("{side:?} has no region {lkey:#x}"))
}
