//! The time-stamp counter as the clock of the poll-mode cores: `rte_rdtsc` converted to
//! [`crate::time::Instant`] nanoseconds with a precomputed fixed-point factor (no division on the
//! fast path).

use crate::time::Instant;

use super::eal::Eal;

/// A TSC clock. `now()` counts nanoseconds from the moment the clock was created.
#[derive(Clone, Copy, Debug)]
pub struct Tsc {
    hz: u64,
    base: u64,
    /// Nanoseconds per tick, as a fixed-point number with 48 fraction bits.
    ns_per_tick_q48: u128,
}

impl Tsc {
    /// A clock at the frequency EAL calibrated.
    pub fn new(eal: &Eal) -> Tsc {
        Tsc::with_hz(eal.tsc_hz(), Tsc::read())
    }

    /// A clock at `hz` ticks per second whose epoch is the tick `base` (for tests).
    pub fn with_hz(hz: u64, base: u64) -> Tsc {
        let hz = hz.max(1);
        Tsc {
            hz,
            base,
            // Rounded up, so exact tick counts (a whole second) give exact nanoseconds; the error
            // stays below 1 ns for the first 2^48 ticks (a day at 3 GHz) and grows slowly after.
            ns_per_tick_q48: (1_000_000_000u128 << 48).div_ceil(u128::from(hz)),
        }
    }

    /// The raw counter: the `rdtsc` instruction inline on x86-64 (what `rte_rdtsc` executes,
    /// without the call into the C shim), `rte_rdtsc` elsewhere.
    #[inline]
    pub fn read() -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: rdtsc reads a CPU register; no memory is touched.
            unsafe { core::arch::x86_64::_rdtsc() }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: rte_rdtsc reads a CPU counter; no memory is touched.
            unsafe { dpdk_sys::shim_rte_rdtsc() }
        }
    }

    /// Ticks per second.
    pub fn hz(&self) -> u64 {
        self.hz
    }

    /// The `Instant` of the raw counter value `tsc`.
    #[inline]
    pub fn to_instant(&self, tsc: u64) -> Instant {
        let ticks = u128::from(tsc.wrapping_sub(self.base));
        Instant::from_nanos((ticks.saturating_mul(self.ns_per_tick_q48) >> 48) as u64)
    }

    /// Now.
    #[inline]
    pub fn now(&self) -> Instant {
        self.to_instant(Tsc::read())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_ticks_to_nanoseconds() {
        let t = Tsc::with_hz(2_500_000_000, 1000);
        assert_eq!(t.to_instant(1000), Instant::ZERO);
        assert_eq!(t.to_instant(1000 + 2_500_000_000).as_nanos(), 1_000_000_000);
        assert_eq!(t.to_instant(1000 + 25).as_nanos(), 10);
        // An hour at 3 GHz stays exact to within a nanosecond.
        let t = Tsc::with_hz(3_000_000_000, 0);
        let ns = t.to_instant(3_000_000_000 * 3600).as_nanos();
        assert!(ns.abs_diff(3_600_000_000_000) <= 1, "{ns}");
    }

    #[test]
    fn raw_counter_advances() {
        let a = Tsc::read();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = Tsc::read();
        assert!(b > a, "TSC did not advance: {a} then {b}");
    }

    /// The inline read is the counter `rte_rdtsc` reads: it falls between two shim reads taken
    /// around it on the same thread (give or take a million ticks: rdtsc is not serialising,
    /// so neighbouring reads may execute slightly out of order).
    #[test]
    fn inline_read_is_the_counter_rte_rdtsc_reads() {
        const SLACK: u64 = 1_000_000;
        for _ in 0..1000 {
            // SAFETY: rte_rdtsc reads a CPU counter; no memory is touched.
            let before = unsafe { dpdk_sys::shim_rte_rdtsc() };
            let inline = Tsc::read();
            // SAFETY: as above.
            let after = unsafe { dpdk_sys::shim_rte_rdtsc() };
            assert!(
                before.saturating_sub(SLACK) <= inline && inline <= after.saturating_add(SLACK),
                "{before} {inline} {after}"
            );
        }
    }
}
