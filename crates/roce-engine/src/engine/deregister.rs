//! Freeing a memory region from a consumer thread: [`MrTable::deregister_until`] bounded on the
//! process clock (the protocol crate reads none) by [`DEREGISTER_WAIT`] or a given limit.

use crate::mem::table::DEREGISTER_WAIT;
use crate::mem::{MrError, MrTable};
use std::time::{Duration, Instant};

/// `deregister` with its wait bounded by time.
pub trait Deregister {
    /// Frees the region of `lkey` once the accesses and pins in progress on it are over,
    /// waiting at most [`DEREGISTER_WAIT`]: `Busy` after that, the region usable again.
    fn deregister(&self, lkey: u32) -> Result<(), MrError> {
        self.deregister_within(lkey, DEREGISTER_WAIT)
    }

    /// [`deregister`](Self::deregister) waiting at most `limit` for the pins in progress.
    fn deregister_within(&self, lkey: u32, limit: Duration) -> Result<(), MrError>;
}

impl Deregister for MrTable {
    fn deregister_within(&self, lkey: u32, limit: Duration) -> Result<(), MrError> {
        // The clock starts at the first yield: a region with nothing in flight costs no read.
        let mut started: Option<Instant> = None;
        self.deregister_until(lkey, || {
            started.get_or_insert_with(Instant::now).elapsed() >= limit
        })
    }
}
