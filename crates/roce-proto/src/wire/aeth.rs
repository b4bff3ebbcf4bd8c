//! ACK Extended Transport Header (IBTA vol. 1 §9.3.5): syndrome 1 byte, MSN 3 bytes.
//!
//! Syndrome (§9.7.5.1): bit 7 reserved, bits 6:5 the kind (00 ACK, 01 RNR NAK, 10 reserved,
//! 11 NAK), bits 4:0 credit count, RNR timer code or NAK code.

use super::{check_len, check_room, get_u24, set_u24, Result};

/// AETH length in bytes.
pub const AETH_LEN: usize = 4;

/// Credit count meaning "no end-to-end credit limit".
pub const CREDITS_UNLIMITED: u8 = 0x1f;

/// Offsets of the AETH fields.
pub mod field {
    pub const SYNDROME: usize = 0;
    pub const MSN: usize = 1;
}

/// NAK codes (syndrome bits 6:5 = 11).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NakCode {
    /// 0x60
    PsnSequenceError,
    /// 0x61
    InvalidRequest,
    /// 0x62
    RemoteAccessError,
    /// 0x63
    RemoteOperationalError,
    /// 0x64 (invalid RD request; not used on RC, parsed for completeness)
    InvalidRdRequest,
    /// Any other code in 0x65..=0x7f, kept as the low 5 bits.
    Reserved(u8),
}

impl NakCode {
    /// The 5-bit code (syndrome bits 4:0).
    pub const fn code(self) -> u8 {
        match self {
            NakCode::PsnSequenceError => 0,
            NakCode::InvalidRequest => 1,
            NakCode::RemoteAccessError => 2,
            NakCode::RemoteOperationalError => 3,
            NakCode::InvalidRdRequest => 4,
            NakCode::Reserved(c) => c & 0x1f,
        }
    }

    /// From the 5-bit code.
    pub const fn from_code(c: u8) -> Self {
        match c & 0x1f {
            0 => NakCode::PsnSequenceError,
            1 => NakCode::InvalidRequest,
            2 => NakCode::RemoteAccessError,
            3 => NakCode::RemoteOperationalError,
            4 => NakCode::InvalidRdRequest,
            c => NakCode::Reserved(c),
        }
    }
}

/// Decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// 00: ACK with the credit count (0x1f = unlimited).
    Ack { credits: u8 },
    /// 01: RNR NAK with the 5-bit RNR timer code (see `rnr_timer_ns`).
    RnrNak { timer: u8 },
    /// 11: NAK.
    Nak(NakCode),
    /// 10: reserved, kept as the raw byte. Any byte with the reserved bit 7 set decodes here too.
    Reserved(u8),
}

impl Syndrome {
    /// Decodes a syndrome byte; every byte decodes and re-encodes to itself.
    pub const fn from_byte(b: u8) -> Self {
        if b & 0x80 != 0 {
            return Syndrome::Reserved(b);
        }
        match b >> 5 {
            0 => Syndrome::Ack { credits: b & 0x1f },
            1 => Syndrome::RnrNak { timer: b & 0x1f },
            3 => Syndrome::Nak(NakCode::from_code(b)),
            _ => Syndrome::Reserved(b),
        }
    }

    /// Encodes the syndrome byte (5-bit fields truncated; `Reserved` written as is).
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => credits & 0x1f,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1f),
            Syndrome::Nak(code) => 0x60 | code.code(),
            Syndrome::Reserved(b) => b,
        }
    }

    /// True for ACK syndromes.
    pub const fn is_ack(self) -> bool {
        matches!(self, Syndrome::Ack { .. })
    }
}

impl From<u8> for Syndrome {
    fn from(b: u8) -> Self {
        Syndrome::from_byte(b)
    }
}

impl From<Syndrome> for u8 {
    fn from(s: Syndrome) -> u8 {
        s.to_byte()
    }
}

/// RNR NAK timer values in nanoseconds, indexed by the 5-bit code (IBTA vol. 1 table 45).
pub const RNR_TIMER_NS: [u64; 32] = [
    655_360_000,
    10_000,
    20_000,
    30_000,
    40_000,
    60_000,
    80_000,
    120_000,
    160_000,
    240_000,
    320_000,
    480_000,
    640_000,
    960_000,
    1_280_000,
    1_920_000,
    2_560_000,
    3_840_000,
    5_120_000,
    7_680_000,
    10_240_000,
    15_360_000,
    20_480_000,
    30_720_000,
    40_960_000,
    61_440_000,
    81_920_000,
    122_880_000,
    163_840_000,
    245_760_000,
    327_680_000,
    491_520_000,
];

/// The RNR NAK wait time of a 5-bit timer code, in nanoseconds (code 0 = 655.36 ms, the
/// longest). Only the low 5 bits of `code` are used.
pub const fn rnr_timer_ns(code: u8) -> u64 {
    RNR_TIMER_NS[(code & 0x1f) as usize]
}

/// The code of the shortest RNR timer that lasts at least `ns` nanoseconds (0, i.e. 655.36 ms,
/// for anything longer than 491.52 ms).
pub const fn rnr_timer_code_at_least(ns: u64) -> u8 {
    let mut code = 1;
    while code < 32 {
        if RNR_TIMER_NS[code] >= ns {
            return code as u8;
        }
        code += 1;
    }
    0
}

/// A view of an AETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("AETH", buffer.as_ref(), AETH_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// The raw syndrome byte.
    pub fn syndrome_byte(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from_byte(self.syndrome_byte())
    }
    pub fn msn(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::MSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_syndrome(&mut self, s: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = s.to_byte();
    }
    pub fn set_msn(&mut self, msn: u32) {
        set_u24(self.buffer.as_mut(), field::MSN, msn);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AethRepr {
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

impl AethRepr {
    /// An ACK with unlimited credits.
    pub const fn ack(msn: u32) -> Self {
        AethRepr {
            syndrome: Syndrome::Ack {
                credits: CREDITS_UNLIMITED,
            },
            msn: msn & 0x00ff_ffff,
        }
    }

    /// A NAK.
    pub const fn nak(code: NakCode, msn: u32) -> Self {
        AethRepr {
            syndrome: Syndrome::Nak(code),
            msn: msn & 0x00ff_ffff,
        }
    }

    /// An RNR NAK with a 5-bit timer code.
    pub const fn rnr_nak(timer: u8, msn: u32) -> Self {
        AethRepr {
            syndrome: Syndrome::RnrNak {
                timer: timer & 0x1f,
            },
            msn: msn & 0x00ff_ffff,
        }
    }

    /// Reads both fields from exactly the 4 header bytes, as [`parse`](Self::parse) does.
    #[inline(always)]
    pub fn from_bytes(b: &[u8; AETH_LEN]) -> Self {
        let [s, m0, m1, m2] = *b;
        AethRepr {
            syndrome: Syndrome::from_byte(s),
            msn: u32::from_be_bytes([0, m0, m1, m2]),
        }
    }
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("AETH", packet.buffer.as_ref(), AETH_LEN)?;
        Ok(AethRepr {
            syndrome: packet.syndrome(),
            msn: packet.msn(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        AETH_LEN
    }
    /// Writes all 4 bytes, as [`emit`](Self::emit) does.
    #[inline]
    pub fn write_to(&self, b: &mut [u8; AETH_LEN]) {
        let [_, m0, m1, m2] = self.msn.to_be_bytes();
        *b = [self.syndrome.to_byte(), m0, m1, m2];
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), AETH_LEN)?;
        packet.set_syndrome(self.syndrome);
        packet.set_msn(self.msn);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndrome_codes_from_reference() {
        assert_eq!(Syndrome::from_byte(0x1f), Syndrome::Ack { credits: 0x1f });
        assert_eq!(Syndrome::from_byte(0x06), Syndrome::Ack { credits: 6 });
        assert_eq!(Syndrome::from_byte(0x2c), Syndrome::RnrNak { timer: 12 });
        let naks = [
            (0x60, NakCode::PsnSequenceError),
            (0x61, NakCode::InvalidRequest),
            (0x62, NakCode::RemoteAccessError),
            (0x63, NakCode::RemoteOperationalError),
            (0x64, NakCode::InvalidRdRequest),
            (0x7f, NakCode::Reserved(0x1f)),
        ];
        for (b, code) in naks {
            assert_eq!(Syndrome::from_byte(b), Syndrome::Nak(code));
            assert_eq!(Syndrome::Nak(code).to_byte(), b);
        }
        assert_eq!(Syndrome::from_byte(0x45), Syndrome::Reserved(0x45));
        assert_eq!(Syndrome::from_byte(0x80), Syndrome::Reserved(0x80));
    }

    #[test]
    fn every_syndrome_byte_round_trips() {
        for b in 0..=255u8 {
            assert_eq!(Syndrome::from_byte(b).to_byte(), b, "{b:#x}");
        }
    }

    #[test]
    fn rnr_table() {
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(12), 640_000);
        assert_eq!(rnr_timer_ns(31), 491_520_000);
        assert_eq!(rnr_timer_ns(32 + 1), 10_000);
        // Strictly increasing from code 1 to 31, and code 0 is the longest.
        for c in 1..31u8 {
            assert!(rnr_timer_ns(c) < rnr_timer_ns(c + 1));
        }
        assert!(rnr_timer_ns(0) > rnr_timer_ns(31));
    }

    #[test]
    fn rnr_code_at_least() {
        assert_eq!(rnr_timer_code_at_least(0), 1);
        assert_eq!(rnr_timer_code_at_least(10_000), 1);
        assert_eq!(rnr_timer_code_at_least(10_001), 2);
        assert_eq!(rnr_timer_code_at_least(640_000), 12);
        assert_eq!(rnr_timer_code_at_least(500_000), 12);
        assert_eq!(rnr_timer_code_at_least(491_520_000), 31);
        assert_eq!(rnr_timer_code_at_least(491_520_001), 0);
        assert_eq!(rnr_timer_code_at_least(u64::MAX), 0);
        for c in 0..32u8 {
            assert_eq!(rnr_timer_code_at_least(rnr_timer_ns(c)), c);
        }
    }

    #[test]
    fn aeth_round_trip() {
        let b = [0x06, 0x00, 0x00, 0x01];
        let r = AethRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.syndrome, Syndrome::Ack { credits: 6 });
        assert_eq!(r.msn, 1);
        let mut out = [0u8; 4];
        AethRepr::nak(NakCode::RemoteAccessError, 0x123456)
            .emit(&mut Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, [0x62, 0x12, 0x34, 0x56]);
        assert_eq!(AethRepr::from_bytes(&b), r);
        let mut fixed = [0xa5u8; AETH_LEN];
        AethRepr::nak(NakCode::RemoteAccessError, 0x123456).write_to(&mut fixed);
        assert_eq!(fixed, out);
        assert!(Packet::new_checked(&b[..3]).is_err());
    }
}
