//! The generation field of a memory key, made unpredictable. A key is `field << idx_bits |
//! slot + 1` (`table.rs`); the field of a slot's `n`-th registration is `P(slot, n)`, where `P`
//! is, for each slot, a permutation of the field's values keyed by a secret drawn from the OS
//! when the table is made ([`crate::random`]). A permutation: a slot's fields never repeat
//! until it was registered once per value, so a freed key never matches again within that
//! quarantine; keyed: a peer that saw some keys cannot tell the next one (ReDMArk, USENIX
//! Security 2021, guesses R_Keys that count up).
//!
//! `P` is a four-round Feistel network over the field's bits (one more when their number is
//! odd, walking the cycle back into range) whose round functions are the splitmix64
//! finaliser of the round key, the slot and the half: a shuffle nobody outside the process
//! can replay, not a cipher for data.

/// The keyed permutation of one table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyField {
    rounds: [u64; 4],
    /// Bits of the field (1..=31).
    bits: u32,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl KeyField {
    /// The permutation of `bits`-bit fields keyed by `secret`.
    pub fn new(secret: u64, bits: u32) -> KeyField {
        let mut rounds = [0u64; 4];
        let mut s = secret;
        for r in rounds.iter_mut() {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            *r = mix(s);
        }
        KeyField {
            rounds,
            bits: bits.clamp(1, 31),
        }
    }

    /// Bits of the field.
    pub fn bits(&self) -> u32 {
        self.bits
    }

    /// The field of registration `n` (taken modulo the field's range) of slot `slot`.
    pub fn of(&self, slot: u32, n: u32) -> u32 {
        let range = 1u64 << self.bits;
        let width = self.bits + (self.bits & 1);
        let mut x = u64::from(n) % range;
        // Cycle walking: a permutation of the even-width domain, applied until the value is
        // back in range, is a permutation of the range.
        loop {
            x = self.feistel(slot, x, width);
            if x < range {
                return x as u32;
            }
        }
    }

    fn feistel(&self, slot: u32, x: u64, width: u32) -> u64 {
        let half = width / 2;
        let mask = (1u64 << half) - 1;
        let (mut l, mut r) = (x >> half, x & mask);
        for k in self.rounds {
            let f = mix(k ^ (u64::from(slot) << 32) ^ r) & mask;
            (l, r) = (r, l ^ f);
        }
        (l << half) | r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn a_permutation_of_every_width() {
        for bits in [1, 2, 7, 8, 11, 12] {
            let p = KeyField::new(42, bits);
            for slot in [0, 5] {
                let seen: HashSet<u32> = (0..1u32 << bits).map(|n| p.of(slot, n)).collect();
                assert_eq!(seen.len(), 1 << bits, "bits {bits}");
                assert!(seen.iter().all(|&f| f < 1 << bits));
            }
        }
    }

    #[test]
    fn fields_depend_on_the_secret_and_the_slot_and_do_not_count_up() {
        let (a, b) = (KeyField::new(1, 18), KeyField::new(2, 18));
        let fa: Vec<u32> = (0..8).map(|n| a.of(3, n)).collect();
        assert_ne!(fa, (0..8).map(|n| b.of(3, n)).collect::<Vec<_>>());
        assert_ne!(fa, (0..8).map(|n| a.of(4, n)).collect::<Vec<_>>());
        assert!(fa.windows(2).any(|w| w[1] != w[0] + 1), "{fa:?}");
    }
}
