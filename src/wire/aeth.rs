//! ACK Extended Transport Header (IBTA vol. 1 §9.3.5): syndrome 1 byte, MSN 3 bytes.

/// AETH length in bytes.
pub const AETH_LEN: usize = 4;

/// Credit count meaning "no end-to-end credit limit".
pub const CREDITS_UNLIMITED: u8 = 0x1f;

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

/// Decoded AETH syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// 00: ACK with the credit count (0x1f = unlimited).
    Ack { credits: u8 },
    /// 01: RNR NAK with the 5-bit RNR timer code (see `rnr_timer_ns`).
    RnrNak { timer: u8 },
    /// 11: NAK.
    Nak(NakCode),
    /// 10: reserved, kept as the raw byte.
    Reserved(u8),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AethRepr {
    pub syndrome: Syndrome,
    /// Message sequence number (24 bits).
    pub msn: u32,
}
