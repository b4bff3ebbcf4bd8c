//! The bytes of verified messages: message `seq` of stream `stream` (a connection, a QP) has
//! its own content, different in every 8-byte word from every other message's, so a byte
//! that lands in the wrong message, at the wrong offset or not at all is caught. The one
//! pattern of every verified workload: the simulated and DPDK pairs (`workload`), the engines
//! (`verify`), `roce-bw --verify` and `roce-soak`, whose two processes derive it alike.

use core::fmt;

/// The 8-byte word `k` of message `seq` of `stream`: a SplitMix64 finaliser of the three, so
/// neighbouring words, messages and streams share no byte pattern.
fn word(stream: u64, seq: u64, k: u64) -> u64 {
    let mut z = stream
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .wrapping_add(seq.wrapping_mul(0xd6e8_feb8_6659_fd93))
        .wrapping_add(k.wrapping_mul(0xbf58_476d_1ce4_e5b9))
        .wrapping_add(0x5eed);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Byte `at` of message `seq` of `stream`.
pub fn byte(stream: u64, seq: u64, at: usize) -> u8 {
    word(stream, seq, (at / 8) as u64).to_le_bytes()[at % 8]
}

/// Fills `buf` with message `seq` of `stream` from its first byte.
pub fn fill(buf: &mut [u8], stream: u64, seq: u64) {
    let mut words = buf.chunks_exact_mut(8);
    let mut k = 0;
    for w in &mut words {
        w.copy_from_slice(&word(stream, seq, k).to_le_bytes());
        k += 1;
    }
    let tail = words.into_remainder();
    let last = word(stream, seq, k).to_le_bytes();
    tail.copy_from_slice(&last[..tail.len()]);
}

/// Message `seq` of `stream`, `len` bytes.
pub fn message(stream: u64, seq: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    fill(&mut v, stream, seq);
    v
}

/// The first byte of a buffer that is not message `seq` of `stream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub stream: u64,
    pub seq: u64,
    /// Offset of the first wrong byte.
    pub at: usize,
    pub got: u8,
    pub want: u8,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message {} of stream {}: byte {} is {:#04x}, expected {:#04x}",
            self.seq, self.stream, self.at, self.got, self.want
        )
    }
}

/// Whether `buf` holds message `seq` of `stream` from its first byte.
pub fn check(buf: &[u8], stream: u64, seq: u64) -> Result<(), Mismatch> {
    let mut at = 0;
    for (k, w) in buf.chunks(8).enumerate() {
        let want = word(stream, seq, k as u64).to_le_bytes();
        if w != &want[..w.len()] {
            let j = w.iter().zip(want).position(|(g, w)| *g != w).unwrap_or(0);
            return Err(Mismatch {
                stream,
                seq,
                at: at + j,
                got: w[j],
                want: want[j],
            });
        }
        at += w.len();
    }
    Ok(())
}

/// Whether `buf` holds bytes `from..from + buf.len()` of message `seq` of `stream` (a piece of
/// a message laid over a whole region, read back at some offset).
pub fn check_at(buf: &[u8], stream: u64, seq: u64, from: usize) -> Result<(), Mismatch> {
    if from == 0 {
        return check(buf, stream, seq);
    }
    let mut k = u64::MAX;
    let mut w = [0u8; 8];
    for (j, &got) in buf.iter().enumerate() {
        let at = from + j;
        if (at / 8) as u64 != k {
            k = (at / 8) as u64;
            w = word(stream, seq, k).to_le_bytes();
        }
        if got != w[at % 8] {
            return Err(Mismatch {
                stream,
                seq,
                at,
                got,
                want: w[at % 8],
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_byte_agree_at_every_offset_of_every_length() {
        for len in 0..40 {
            let m = message(3, 9, len);
            assert_eq!(m.len(), len);
            for (j, b) in m.iter().enumerate() {
                assert_eq!(*b, byte(3, 9, j), "len {len} byte {j}");
            }
            assert_eq!(check(&m, 3, 9), Ok(()));
        }
    }

    #[test]
    fn messages_of_other_streams_and_sequence_numbers_differ_in_every_word() {
        let m = message(1, 1, 4096);
        for other in [
            message(1, 2, 4096),
            message(2, 1, 4096),
            message(0, 0, 4096),
        ] {
            for (k, (x, y)) in m.chunks(8).zip(other.chunks(8)).enumerate() {
                assert_ne!(x, y, "word {k}");
            }
        }
        // A message shifted by one word is another message.
        assert!(check(&m[8..], 1, 1).is_err());
    }

    #[test]
    fn a_piece_read_back_at_an_offset_checks_against_that_offset() {
        let m = message(4, 0, 300);
        for from in [0, 1, 7, 8, 13, 250] {
            assert_eq!(
                check_at(&m[from..from + 50], 4, 0, from),
                Ok(()),
                "from {from}"
            );
        }
        assert_eq!(check_at(&m[16..66], 4, 0, 17).map_err(|e| e.at), Err(17));
        let mut piece = m[13..63].to_vec();
        piece[20] ^= 2;
        assert_eq!(check_at(&piece, 4, 0, 13).unwrap_err().at, 33);
    }

    #[test]
    fn check_names_the_first_wrong_byte() {
        let mut m = message(7, 100, 1000);
        let want = m[517];
        m[517] ^= 0x40;
        m[900] ^= 1;
        assert_eq!(
            check(&m, 7, 100),
            Err(Mismatch {
                stream: 7,
                seq: 100,
                at: 517,
                got: want ^ 0x40,
                want,
            })
        );
        assert_eq!(
            check(&m, 7, 100).unwrap_err().to_string(),
            format!(
                "message 100 of stream 7: byte 517 is {:#04x}, expected {want:#04x}",
                want ^ 0x40
            )
        );
        // The short last word too.
        let mut m = message(7, 100, 13);
        m[12] ^= 0xff;
        assert_eq!(check(&m, 7, 100).unwrap_err().at, 12);
    }
}
