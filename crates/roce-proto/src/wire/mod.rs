//! Wire formats: zero-copy views over bytes and `Repr` structs, one header per file, in the
//! manner of smoltcp's `wire` module. Nothing here allocates, performs I/O or panics on input.
//!
//! Each header module has a `Packet<T: AsRef<[u8]>>` view (`new_unchecked`, `new_checked`,
//! getters, setters for `T: AsMut<[u8]>`) and a `Repr` with `parse`, `emit` and `buffer_len`.
//! Accessors of a view made with `new_unchecked` may panic if the buffer is shorter than the
//! header; every parse path goes through `new_checked` first.

pub mod aeth;
pub mod arp;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cm_msg;
pub mod deth;
pub mod ethernet;
pub mod frame;
pub mod frame6;
pub mod icmpv6;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod ipv4;
pub mod ipv6;
pub mod mad;
pub mod opcode;
pub mod psn;
pub mod reseal;
pub mod reth;
pub mod roce;
pub mod udp;
pub mod write_only;

pub use aeth::{rnr_timer_code_at_least, rnr_timer_ns, AethRepr, NakCode, Syndrome};
pub use arp::{ArpOperation, ArpRepr};
pub use atomic_ack_eth::AtomicAckEthRepr;
pub use atomic_eth::AtomicEthRepr;
pub use bth::BthRepr;
pub use deth::DethRepr;
pub use ethernet::{EtherType, EthernetAddress, EthernetRepr};
pub use frame::{classify, udp_dst_port, FrameError, FrameKind, ReceivedPacket, RoceFrame};
pub use frame6::RoceFrame6;
pub use icmpv6::{NaFlags, NdiscRepr};
pub use icrc::{icrc6_frame, icrc6_parts, icrc_frame, icrc_parts, IcrcHasher};
pub use ieth::IethRepr;
pub use immdt::ImmDtRepr;
pub use ipv4::{Ipv4Repr, IPPROTO_UDP};
pub use ipv6::{Ipv6Repr, IPPROTO_ICMPV6};
pub use opcode::{OpFlags, Opcode, OpcodeInfo, OPCODE_TABLE};
pub use psn::Psn;
pub use reth::RethRepr;
pub use roce::{RoceHeaders, RocePacket};
pub use udp::{UdpRepr, ROCEV2_PORT};

/// Header-level error: a buffer too short for a header, or a field value the header cannot hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The buffer ends before the header (or a length field) says it should.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A field holds a value this header does not allow.
    #[error("bad value in {0}")]
    BadValue(&'static str),
    /// A BTH opcode that is not in the opcode table.
    #[error("unknown BTH opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// `RoceHeaders` whose present extension headers do not match what the opcode carries.
    #[error("extension headers do not match opcode {0:#04x}")]
    HeadersMismatch(u8),
    /// The output buffer is too small for what is emitted.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall { need: usize, have: usize },
}

/// Result of header-level operations.
pub type Result<T> = core::result::Result<T, WireError>;

/// Checks that `buf` holds at least `need` bytes.
pub(crate) fn check_len(what: &'static str, buf: &[u8], need: usize) -> Result<()> {
    if buf.len() < need {
        Err(WireError::Truncated {
            what,
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Checks that an output buffer holds at least `need` bytes.
pub(crate) fn check_room(buf: &[u8], need: usize) -> Result<()> {
    if buf.len() < need {
        Err(WireError::BufferTooSmall {
            need,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

// Big-endian field accessors. Callers have checked the length (`new_checked`); each does one
// bounds check and one load or store.
#[inline]
pub(crate) fn get_u16(b: &[u8], at: usize) -> u16 {
    let mut a = [0u8; 2];
    a.copy_from_slice(&b[at..at + 2]);
    u16::from_be_bytes(a)
}
#[inline]
pub(crate) fn get_u24(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a[1..].copy_from_slice(&b[at..at + 3]);
    u32::from_be_bytes(a)
}
#[inline]
pub(crate) fn get_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
#[inline]
pub(crate) fn get_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}
#[inline]
pub(crate) fn set_u16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn set_u24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}
#[inline]
pub(crate) fn set_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
#[inline]
pub(crate) fn set_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_be_bytes());
}
