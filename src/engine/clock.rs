//! The engine's clock: monotonic nanoseconds as a `crate::time::Instant`.

use crate::time::Instant;

/// A monotonic clock whose epoch is its creation.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: std::time::Instant,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Clock {
            start: std::time::Instant::now(),
        }
    }

    /// Now.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos() as u64)
    }
}
