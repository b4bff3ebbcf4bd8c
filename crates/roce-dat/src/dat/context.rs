//! Consumer contexts (dat_set_consumer_context / dat_get_consumer_context): one DAT_CONTEXT
//! (a 64-bit value or pointer) per object, any thread.

use std::sync::atomic::{AtomicU64, Ordering};

/// The consumer context of one DAT object (0 until set).
#[derive(Debug, Default)]
pub struct ConsumerContext(AtomicU64);

impl ConsumerContext {
    /// dat_set_consumer_context.
    pub fn set(&self, value: u64) {
        self.0.store(value, Ordering::Release);
    }

    /// dat_get_consumer_context.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}
