//! QP numbers: drawn at random from the 24-bit space (a peer, or an off-path attacker, must
//! not guess the number of the next QP; ReDMArk, USENIX Security 2021) or, for captures and
//! tests, counted up from 0x11. A destroyed QP's number waits in quarantine until
//! [`QPN_QUARANTINE`] later ones were destroyed, so a late packet of an old connection never
//! reaches a new QP under the same number, and numbers are reused after that, so a
//! long-running process never runs out.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashSet, VecDeque};

/// Lowest QP number handed out (0 and 1 are the SMI and GSI QPs).
pub const QPN_MIN: u32 = 2;
/// Highest QP number (24 bits, IBTA vol. 1 §9.2).
pub const QPN_MAX: u32 = 0x00ff_ffff;
/// Destroyed QP numbers held back from reuse, at most.
pub const QPN_QUARANTINE: usize = 65_536;
/// Where counting starts (recognisable in captures).
const SEQUENTIAL_START: u32 = 0x11;
/// Random draws before the allocator falls back to counting from a random point.
const RANDOM_TRIES: u32 = 32;

/// How a host numbers its QPs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QpnPolicy {
    /// At random (from the host's seed): what a provider facing a network uses.
    #[default]
    Random,
    /// Counting up from 0x11 (captures, tests that name QPs).
    Sequential,
}

pub(crate) struct QpnAllocator {
    policy: QpnPolicy,
    rng: ChaCha8Rng,
    next: u32,
    quarantine: VecDeque<u32>,
    quarantined: HashSet<u32>,
}

impl QpnAllocator {
    pub fn new(policy: QpnPolicy, seed: u64) -> QpnAllocator {
        QpnAllocator {
            policy,
            // Not the CM's stream: knowing its comm IDs must not tell the QP numbers.
            rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5150_6e5f_6e75_6d73),
            next: SEQUENTIAL_START,
            quarantine: VecDeque::new(),
            quarantined: HashSet::new(),
        }
    }

    /// A number `n` with `n % shards == shard` (the runtime's QPN-to-shard rule), neither in
    /// use nor in quarantine; `None` when there is none.
    pub fn allocate(
        &mut self,
        shard: u32,
        shards: u32,
        in_use: impl Fn(u32) -> bool,
    ) -> Option<u32> {
        let shards = shards.max(1);
        let shard = shard % shards;
        let free = |n: u32| {
            (QPN_MIN..=QPN_MAX).contains(&n) && !in_use(n) && !self.quarantined.contains(&n)
        };
        let in_space = |n: u32| n - n % shards + shard;
        let start = match self.policy {
            QpnPolicy::Sequential => self.next,
            QpnPolicy::Random => {
                let mut first = None;
                for _ in 0..RANDOM_TRIES {
                    let n = in_space(self.rng.gen_range(QPN_MIN..=QPN_MAX));
                    if free(n) {
                        return Some(n);
                    }
                    first.get_or_insert(n);
                }
                first.unwrap_or(QPN_MIN)
            }
        };
        // Count from `start` through the whole space once, wrapping at its end.
        let lowest = match in_space(QPN_MIN) {
            n if n < QPN_MIN => n + shards,
            n => n,
        };
        let span = QPN_MAX - QPN_MIN + 1;
        let start = start.clamp(QPN_MIN, QPN_MAX);
        let mut n = match in_space(start) {
            n if n < start => n + shards,
            n => n,
        };
        for _ in 0..span.div_ceil(shards) + 1 {
            if !(QPN_MIN..=QPN_MAX).contains(&n) {
                n = lowest;
            }
            if free(n) {
                if self.policy == QpnPolicy::Sequential {
                    self.next = n + 1;
                }
                return Some(n);
            }
            n += shards;
        }
        None
    }

    /// `qpn` was destroyed: held back until `QPN_QUARANTINE` later ones were.
    pub fn release(&mut self, qpn: u32) {
        if self.quarantined.insert(qpn) {
            self.quarantine.push_back(qpn);
        }
        while self.quarantine.len() > QPN_QUARANTINE {
            if let Some(old) = self.quarantine.pop_front() {
                self.quarantined.remove(&old);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_counts_from_0x11_in_the_shards_space() {
        let mut a = QpnAllocator::new(QpnPolicy::Sequential, 1);
        assert_eq!(a.allocate(0, 1, |_| false), Some(0x11));
        assert_eq!(a.allocate(0, 1, |_| false), Some(0x12));
        let mut b = QpnAllocator::new(QpnPolicy::Sequential, 1);
        assert_eq!(b.allocate(2, 4, |_| false), Some(0x12));
        assert_eq!(b.allocate(2, 4, |_| false), Some(0x16));
    }

    #[test]
    fn random_numbers_differ_between_seeds_and_keep_the_shard_rule() {
        let mut a = QpnAllocator::new(QpnPolicy::Random, 1);
        let mut b = QpnAllocator::new(QpnPolicy::Random, 2);
        let xs: Vec<u32> = (0..64)
            .map(|_| a.allocate(3, 4, |_| false).unwrap())
            .collect();
        let ys: Vec<u32> = (0..64)
            .map(|_| b.allocate(3, 4, |_| false).unwrap())
            .collect();
        assert_ne!(xs, ys);
        assert!(xs
            .iter()
            .all(|&n| n % 4 == 3 && (QPN_MIN..=QPN_MAX).contains(&n)));
        // Spread over the space, not clustered at its start.
        assert!(xs.iter().any(|&n| n > QPN_MAX / 2));
    }

    #[test]
    fn a_released_number_waits_in_quarantine_then_is_reused() {
        // A space of one number per shard... of 2 shards over the whole range is too big to
        // exhaust here, so use the in-use predicate to leave exactly one candidate.
        let only = 0x1234u32;
        let mut a = QpnAllocator::new(QpnPolicy::Random, 7);
        assert_eq!(a.allocate(0, 1, |n| n != only), Some(only));
        a.release(only);
        assert_eq!(a.allocate(0, 1, |n| n != only), None, "in quarantine");
        for k in 0..QPN_QUARANTINE as u32 {
            a.release(0x10_0000 + k);
        }
        assert_eq!(
            a.allocate(0, 1, |n| n != only),
            Some(only),
            "reused after it"
        );
    }

    #[test]
    fn counting_wraps_at_the_end_of_the_space() {
        let mut a = QpnAllocator::new(QpnPolicy::Sequential, 1);
        assert_eq!(a.allocate(0, 1, |n| n < QPN_MAX), Some(QPN_MAX));
        assert_eq!(
            a.allocate(0, 1, |n| n != 0x20),
            Some(0x20),
            "from the start again"
        );
        assert_eq!(a.allocate(0, 1, |_| true), None, "every number in use");
    }
}
