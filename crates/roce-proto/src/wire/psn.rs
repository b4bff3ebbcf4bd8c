//! 24-bit packet sequence numbers (IBTA vol. 1 §9.7.1, docs/REFERENCE-rocev2.md "RC reliability").
//!
//! PSNs wrap modulo 2^24. Ordering uses the sign of the 24-bit difference shifted into the top of
//! an `i32`: of two PSNs, the one up to 2^23 - 1 ahead is "after".

use core::cmp::Ordering;
use core::fmt;

/// Mask of the 24 PSN bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// A 24-bit packet sequence number. The stored value is always `< 2^24`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Builds a PSN from the low 24 bits of `v`.
    pub const fn new(v: u32) -> Self {
        Psn(v & PSN_MASK)
    }

    /// The 24-bit value.
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n` modulo 2^24.
    #[must_use]
    pub const fn add(self, n: u32) -> Self {
        Psn(self.0.wrapping_add(n) & PSN_MASK)
    }

    /// `self - n` modulo 2^24.
    #[must_use]
    pub const fn sub(self, n: u32) -> Self {
        Psn(self.0.wrapping_sub(n) & PSN_MASK)
    }

    /// The next PSN.
    #[must_use]
    pub const fn next(self) -> Self {
        self.add(1)
    }

    /// Signed distance `self - other` in the range -2^23 ..= 2^23 - 1.
    pub const fn diff(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0)) << 8) as i32 >> 8
    }

    /// Forward distance from `other` to `self` modulo 2^24 (0 ..= 2^24 - 1).
    pub const fn distance_from(self, other: Psn) -> u32 {
        self.0.wrapping_sub(other.0) & PSN_MASK
    }

    /// True when `self` comes strictly before `other` in modular order.
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// True when `self` comes strictly after `other` in modular order.
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// Modular ordering of two PSNs (not a total order over the whole ring: use it only for PSNs
    /// within 2^23 of each other, which RC windows guarantee).
    pub fn cmp_modular(self, other: Psn) -> Ordering {
        self.diff(other).cmp(&0)
    }
}

impl From<u32> for Psn {
    fn from(v: u32) -> Self {
        Psn::new(v)
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({:#08x})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wraps_at_2_pow_24() {
        let p = Psn::new(0xff_fffe);
        assert_eq!(p.add(1).value(), 0xff_ffff);
        assert_eq!(p.add(2).value(), 0);
        assert_eq!(p.add(5).value(), 3);
        assert_eq!(Psn::new(2).sub(3).value(), 0xff_ffff);
        assert_eq!(Psn::new(0x1ff_ffff).value(), 0xff_ffff);
    }

    #[test]
    fn ordering_across_wrap() {
        let a = Psn::new(0xff_fff0);
        let b = Psn::new(0x10);
        assert!(a.before(b));
        assert!(b.after(a));
        assert_eq!(b.diff(a), 0x20);
        assert_eq!(a.diff(b), -0x20);
        assert_eq!(b.distance_from(a), 0x20);
        assert_eq!(a.distance_from(b), 0x100_0000 - 0x20);
        assert_eq!(a.cmp_modular(a), Ordering::Equal);
    }

    #[test]
    fn half_ring_boundary() {
        let base = Psn::new(100);
        assert!(base.add(0x7f_ffff).after(base));
        assert!(base.add(0x80_0000).before(base));
        assert_eq!(base.add(0x80_0000).diff(base), -0x80_0000);
    }
}
