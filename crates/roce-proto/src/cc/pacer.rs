//! A QP's rate limiter: a token bucket kept as a virtual clock (eRPC's and Carousel's idea of a
//! per-flow release time). Each packet sent moves the release time on by its wire bytes at the
//! rate; a packet may leave when the release time is not in the future. After a quiet spell
//! the release time is pulled up to `now - burst`, so `burst` bytes and the packet that spends
//! them leave back to back. An unlimited pacer (no rate) admits everything and costs one branch.

use crate::time::Instant;

/// Picoseconds per byte at 1 bit/s: 8 * 10^12.
const PS_PER_BYTE_AT_1BPS: u64 = 8_000_000_000_000;

/// A per-QP token bucket on the transmit path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pacer {
    /// Picoseconds one byte takes at the rate; 0: unlimited.
    ps_per_byte: u64,
    /// The rate in bits per second (0: unlimited), as set.
    rate_bps: u64,
    /// Bytes that may leave back to back after a quiet spell.
    burst_bytes: u32,
    /// When the next packet may leave, in nanoseconds of the caller's clock, and the
    /// picoseconds below a nanosecond carried over.
    release_ns: u64,
    carry_ps: u64,
}

impl Pacer {
    /// An unlimited pacer that lets `burst_bytes` leave back to back once it limits.
    pub fn new(burst_bytes: u32) -> Pacer {
        Pacer {
            burst_bytes,
            ..Pacer::default()
        }
    }

    /// True when a rate is set.
    #[inline(always)]
    pub fn is_limited(&self) -> bool {
        self.ps_per_byte != 0
    }

    /// The rate in bits per second; `None` when unlimited.
    pub fn rate_bps(&self) -> Option<u64> {
        self.is_limited().then_some(self.rate_bps)
    }

    /// Limits to `bps` bits per second (at least 1), or lifts the limit (`None`). The release
    /// time stays: a packet already charged keeps its place.
    pub fn set_rate(&mut self, bps: Option<u64>) {
        match bps {
            Some(r) => {
                let r = r.max(1);
                self.rate_bps = r;
                self.ps_per_byte = (PS_PER_BYTE_AT_1BPS / r).max(1);
            }
            None => {
                self.rate_bps = 0;
                self.ps_per_byte = 0;
            }
        }
    }

    /// `None` when a packet may leave at `now`, else when one may.
    #[inline(always)]
    pub fn wait_until(&self, now: Instant) -> Option<Instant> {
        if !self.is_limited() || self.release_ns <= now.as_nanos() {
            return None;
        }
        Some(Instant::from_nanos(self.release_ns))
    }

    /// A packet of `wire_bytes` left at `now`: the release time moves on by its time at the
    /// rate (from no earlier than `now - burst`).
    #[inline(always)]
    pub fn on_sent(&mut self, now: Instant, wire_bytes: u32) {
        if !self.is_limited() {
            return;
        }
        let burst_ns = u64::from(self.burst_bytes) * self.ps_per_byte / 1000;
        let floor = now.as_nanos().saturating_sub(burst_ns);
        if self.release_ns < floor {
            self.release_ns = floor;
            self.carry_ps = 0;
        }
        let ps = u64::from(wire_bytes) * self.ps_per_byte + self.carry_ps;
        self.release_ns = self.release_ns.saturating_add(ps / 1000);
        self.carry_ps = ps % 1000;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn unlimited_admits_everything() {
        let mut p = Pacer::new(3000);
        for i in 0..100 {
            assert_eq!(p.wait_until(at(i)), None);
            p.on_sent(at(i), 1500);
        }
        assert_eq!(p.rate_bps(), None);
    }

    #[test]
    fn a_rate_spaces_packets_by_their_bytes() {
        // 1 Gbit/s: 1000 bytes take 8 us. Burst of 2000 bytes after a quiet spell.
        let mut p = Pacer::new(2000);
        p.set_rate(Some(1_000_000_000));
        let t0 = 1_000_000;
        // The burst's two packets and the one that spends it leave at once; the fourth waits
        // for the first's time.
        for _ in 0..3 {
            assert_eq!(p.wait_until(at(t0)), None);
            p.on_sent(at(t0), 1000);
        }
        assert_eq!(p.wait_until(at(t0)), Some(at(t0 + 8_000)));
        // From then on one packet per 8 us: 100 packets over 800 us.
        let mut now = t0 + 8_000;
        let mut sent = 0;
        while now < t0 + 8_000 + 800_000 {
            if p.wait_until(at(now)).is_none() {
                p.on_sent(at(now), 1000);
                sent += 1;
            }
            now += 100;
        }
        assert_eq!(sent, 100);
    }

    #[test]
    fn fractions_of_a_nanosecond_add_up() {
        // 3 Gbit/s: 1 byte is 2.667 ns; 3000 one-byte sends must take 8000 ns, not 6000.
        let mut p = Pacer::new(0);
        p.set_rate(Some(3_000_000_000));
        let mut now = 0;
        for _ in 0..3000 {
            while let Some(t) = p.wait_until(at(now)) {
                now = t.as_nanos();
            }
            p.on_sent(at(now), 1);
        }
        assert!((7_990..=8_010).contains(&now), "{now}");
    }

    #[test]
    fn lifting_the_limit_admits_at_once() {
        let mut p = Pacer::new(0);
        p.set_rate(Some(1_000_000));
        p.on_sent(at(0), 1_000_000);
        assert!(p.wait_until(at(1)).is_some());
        p.set_rate(None);
        assert_eq!(p.wait_until(at(1)), None);
    }
}
