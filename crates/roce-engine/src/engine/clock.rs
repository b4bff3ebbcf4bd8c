//! The engine's clock: monotonic nanoseconds as a `crate::time::Instant`, read from the
//! time-stamp counter (at the frequency EAL calibrated, `rte_rdtsc`: no system call, no vDSO)
//! once the process has initialised DPDK, else from `std::time::Instant` (the simulator and the
//! in-memory tests).

use crate::dpdk::{Eal, Tsc};
use crate::time::Instant;

/// A monotonic clock whose epoch is its creation.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: std::time::Instant,
    tsc: Option<Tsc>,
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock {
    /// A clock starting now: the TSC when EAL is initialised in this process, else the
    /// standard monotonic clock.
    pub fn new() -> Self {
        match Eal::get() {
            Some(eal) => Self::from_tsc(Tsc::new(eal)),
            None => Self::system(),
        }
    }

    /// A clock on `std::time::Instant`.
    pub fn system() -> Self {
        Clock {
            start: std::time::Instant::now(),
            tsc: None,
        }
    }

    /// A clock on the time-stamp counter `tsc` (its epoch is the TSC's).
    pub fn from_tsc(tsc: Tsc) -> Self {
        Clock {
            start: std::time::Instant::now(),
            tsc: Some(tsc),
        }
    }

    /// True when this clock reads the TSC.
    pub fn is_tsc(&self) -> bool {
        self.tsc.is_some()
    }

    /// Now.
    #[inline]
    pub fn now(&self) -> Instant {
        match &self.tsc {
            Some(t) => t.now(),
            None => Instant::from_nanos(self.start.elapsed().as_nanos() as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sources_are_monotonic_and_follow_real_time() {
        let tsc = Tsc::with_hz(1_000_000_000, Tsc::read());
        for c in [Clock::system(), Clock::from_tsc(tsc)] {
            let a = c.now();
            std::thread::sleep(std::time::Duration::from_millis(2));
            let b = c.now();
            assert!(b > a, "{c:?}");
        }
        assert!(Clock::from_tsc(tsc).is_tsc());
        assert!(!Clock::system().is_tsc());
    }
}
