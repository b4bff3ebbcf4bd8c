//! The soak's work, derived by both sides from the client's seed: each connection runs its own
//! sequence of steps (one or two work requests each), so the server knows, without being told,
//! which message each of its receives must hold.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One step of a connection's sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// RDMA WRITE into the step's slot, then an RDMA READ of it back (checked by the client).
    WriteRead { size: u32 },
    /// The same with RDMA WRITE with immediate (the server checks the immediate's order).
    WriteImmRead { size: u32 },
    /// SEND (the server checks size, bytes and order).
    Send { size: u32 },
    /// RDMA READ of the server's read-only area.
    Read { size: u32 },
    /// Fetch-and-add on the connection's counter: returns the sum of the adds before it.
    FetchAdd { add: u64 },
    /// Compare-and-swap on the connection's word: always matches the value the last one set.
    CmpSwap { swap: u64 },
}

impl Step {
    /// Work requests the step posts.
    pub fn wrs(self) -> u32 {
        match self {
            Step::WriteRead { .. } | Step::WriteImmRead { .. } => 2,
            _ => 1,
        }
    }

    /// Whether the step consumes one of the server's receives.
    pub fn consumes_recv(self) -> bool {
        matches!(self, Step::WriteImmRead { .. } | Step::Send { .. })
    }

    /// The step's payload size (atomics: 8).
    pub fn size(self) -> u32 {
        match self {
            Step::WriteRead { size }
            | Step::WriteImmRead { size }
            | Step::Send { size }
            | Step::Read { size } => size,
            Step::FetchAdd { .. } | Step::CmpSwap { .. } => 8,
        }
    }
}

/// The steps of connection `qp`: at least `wrs` work requests, sizes from 1 B to `max_size`
/// spread evenly over powers of two.
pub fn steps(seed: u64, qp: u16, wrs: u32, max_size: u32) -> Vec<Step> {
    let mut rng =
        ChaCha8Rng::seed_from_u64(seed ^ (u64::from(qp) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let top = 32 - max_size.leading_zeros();
    let mut out = Vec::new();
    let mut n = 0u32;
    while n < wrs {
        let bits = rng.gen_range(0..top);
        let size = (1u32 << bits) + rng.gen_range(0..(1u32 << bits));
        let size = size.min(max_size);
        let word: u64 = rng.gen();
        let step = match rng.gen_range(0..6u8) {
            0 => Step::WriteRead { size },
            1 => Step::WriteImmRead { size },
            2 => Step::Send { size },
            3 => Step::Read { size },
            4 => Step::FetchAdd { add: word >> 40 },
            _ => Step::CmpSwap { swap: word },
        };
        n += step.wrs();
        out.push(step);
    }
    out
}

/// The payload stream (`roce_sim::payload`) of connection `qp`'s messages under `seed`: step
/// `i` carries message `i` of it.
pub fn stream(seed: u64, qp: u16) -> u64 {
    seed.rotate_left(16) ^ u64::from(qp)
}

/// The payload stream of the server's read-only area: one message over the whole area.
pub fn read_only_stream(seed: u64) -> u64 {
    stream(seed, u16::MAX).rotate_left(8)
}

/// Where in the read-only area READ step `i` of connection `qp` starts, out of `room` places.
pub fn read_only_offset(qp: u16, i: usize, room: u64) -> u64 {
    let h = (i as u64 ^ (u64::from(qp) << 40)).wrapping_mul(0x2545_f491_4f6c_dd1d);
    (h >> 20) % room
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_derive_the_same_steps_and_every_kind_and_size_occurs() {
        let a = steps(7, 3, 20_000, 65536);
        assert_eq!(a, steps(7, 3, 20_000, 65536));
        assert_ne!(a, steps(7, 2, 20_000, 65536), "connections differ");
        assert!(a.iter().map(|s| s.wrs()).sum::<u32>() >= 20_000);
        assert!(a.iter().any(|s| s.size() == 1));
        assert!(a.iter().any(|s| s.size() == 65536));
        assert!(a.iter().all(|s| (1..=65536).contains(&s.size())));
        // Every kind occurs.
        let kind = |s: &Step| match s {
            Step::WriteRead { .. } => 0,
            Step::WriteImmRead { .. } => 1,
            Step::Send { .. } => 2,
            Step::Read { .. } => 3,
            Step::FetchAdd { .. } => 4,
            Step::CmpSwap { .. } => 5,
        };
        for k in 0..6 {
            assert!(a.iter().any(|s| kind(s) == k), "kind {k}");
        }
    }

    #[test]
    fn streams_differ_per_connection_and_seed_and_reads_stay_in_their_room() {
        assert_ne!(stream(1, 0), stream(1, 1));
        assert_ne!(stream(1, 0), stream(2, 0));
        assert_ne!(read_only_stream(1), stream(1, 0));
        for i in 0..10_000 {
            assert!(read_only_offset(5, i, 100) < 100);
        }
        assert_eq!(read_only_offset(5, 3, 1), 0);
    }
}
