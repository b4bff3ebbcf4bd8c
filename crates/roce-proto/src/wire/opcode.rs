//! The BTH opcode and the 256-entry opcode table (IBTA vol. 1 §9.2 table 38; Linux rxe
//! `rxe_opcode.c` keeps the same kind of table). Each entry says which extension headers follow
//! the BTH, the resulting header length, and the opcode's class.

use bitflags::bitflags;
use core::fmt;

/// A BTH opcode byte: bits 7:5 the transport, bits 4:0 the operation.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Opcode(pub u8);

/// Transport service of an opcode (BTH opcode bits 7:5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected (000).
    Rc,
    /// Unreliable Connected (001).
    Uc,
    /// Reliable Datagram (010): not supported on RoCEv2 here.
    Rd,
    /// Unreliable Datagram (011).
    Ud,
    /// Congestion notification packet (100, RoCEv2 annex A17.9.3).
    Cnp,
    /// Reserved / manufacturer specific.
    Other,
}

bitflags! {
    /// What an opcode carries and what class it belongs to.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct OpFlags: u32 {
        /// RDMA Extended Transport Header follows the BTH.
        const RETH = 1 << 0;
        /// ACK Extended Transport Header.
        const AETH = 1 << 1;
        /// Datagram Extended Transport Header.
        const DETH = 1 << 2;
        /// Immediate data.
        const IMMDT = 1 << 3;
        /// Invalidate Extended Transport Header.
        const IETH = 1 << 4;
        /// Atomic Extended Transport Header.
        const ATOMIC_ETH = 1 << 5;
        /// Atomic ACK Extended Transport Header.
        const ATOMIC_ACK_ETH = 1 << 6;
        /// The packet carries a payload (possibly empty for 0-byte messages).
        const PAYLOAD = 1 << 7;
        /// A request (sent by the requester).
        const REQUEST = 1 << 8;
        /// A response (ACK, read response, atomic ACK), sent by the responder.
        const RESPONSE = 1 << 9;
        /// First packet of a multi-packet message.
        const FIRST = 1 << 10;
        /// Middle packet.
        const MIDDLE = 1 << 11;
        /// Last packet.
        const LAST = 1 << 12;
        /// Only packet (first and last at once).
        const ONLY = 1 << 13;
        /// SEND operation (consumes a receive WQE).
        const SEND = 1 << 14;
        /// RDMA WRITE operation.
        const WRITE = 1 << 15;
        /// RDMA READ (request or response).
        const READ = 1 << 16;
        /// Atomic operation (request or ACK).
        const ATOMIC = 1 << 17;
        /// Plain acknowledgement.
        const ACK = 1 << 18;
        /// Congestion notification.
        const CNP = 1 << 19;
    }
}

/// One entry of the opcode table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpcodeInfo {
    /// Name as Wireshark and rxe print it (`"RC SEND only"`).
    pub name: &'static str,
    /// Headers and class.
    pub flags: OpFlags,
    /// BTH plus extension headers, in bytes.
    pub header_len: usize,
}

macro_rules! opcodes {
    ($($cname:ident = $val:expr, $name:expr, $flags:expr;)*) => {
        impl Opcode {
            $(#[doc = $name] pub const $cname: Opcode = Opcode($val);)*
        }
        const DEFINED: &[(u8, &str, OpFlags)] = &[$(($val, $name, $flags),)*];
    };
}

const fn f(bits: u32) -> OpFlags {
    OpFlags::from_bits_truncate(bits)
}

const RQ: u32 = OpFlags::REQUEST.bits();
const RS: u32 = OpFlags::RESPONSE.bits();
const PL: u32 = OpFlags::PAYLOAD.bits();
const FI: u32 = OpFlags::FIRST.bits();
const MI: u32 = OpFlags::MIDDLE.bits();
const LA: u32 = OpFlags::LAST.bits();
const ON: u32 = OpFlags::ONLY.bits();
const SE: u32 = OpFlags::SEND.bits();
const WR: u32 = OpFlags::WRITE.bits();
const RD: u32 = OpFlags::READ.bits();
const AT: u32 = OpFlags::ATOMIC.bits();
const AK: u32 = OpFlags::ACK.bits();
const RETH: u32 = OpFlags::RETH.bits();
const AETH: u32 = OpFlags::AETH.bits();
const DETH: u32 = OpFlags::DETH.bits();
const IMM: u32 = OpFlags::IMMDT.bits();
const IETH: u32 = OpFlags::IETH.bits();
const AETH2: u32 = OpFlags::ATOMIC_ETH.bits();
const AACK: u32 = OpFlags::ATOMIC_ACK_ETH.bits();

opcodes! {
    RC_SEND_FIRST = 0x00, "RC SEND first", f(RQ | PL | FI | SE);
    RC_SEND_MIDDLE = 0x01, "RC SEND middle", f(RQ | PL | MI | SE);
    RC_SEND_LAST = 0x02, "RC SEND last", f(RQ | PL | LA | SE);
    RC_SEND_LAST_IMM = 0x03, "RC SEND last with immediate", f(RQ | PL | LA | SE | IMM);
    RC_SEND_ONLY = 0x04, "RC SEND only", f(RQ | PL | ON | SE);
    RC_SEND_ONLY_IMM = 0x05, "RC SEND only with immediate", f(RQ | PL | ON | SE | IMM);
    RC_WRITE_FIRST = 0x06, "RC RDMA WRITE first", f(RQ | PL | FI | WR | RETH);
    RC_WRITE_MIDDLE = 0x07, "RC RDMA WRITE middle", f(RQ | PL | MI | WR);
    RC_WRITE_LAST = 0x08, "RC RDMA WRITE last", f(RQ | PL | LA | WR);
    RC_WRITE_LAST_IMM = 0x09, "RC RDMA WRITE last with immediate", f(RQ | PL | LA | WR | IMM);
    RC_WRITE_ONLY = 0x0a, "RC RDMA WRITE only", f(RQ | PL | ON | WR | RETH);
    RC_WRITE_ONLY_IMM = 0x0b, "RC RDMA WRITE only with immediate", f(RQ | PL | ON | WR | RETH | IMM);
    RC_READ_REQUEST = 0x0c, "RC RDMA READ request", f(RQ | ON | RD | RETH);
    RC_READ_RESPONSE_FIRST = 0x0d, "RC RDMA READ response first", f(RS | PL | FI | RD | AETH);
    RC_READ_RESPONSE_MIDDLE = 0x0e, "RC RDMA READ response middle", f(RS | PL | MI | RD);
    RC_READ_RESPONSE_LAST = 0x0f, "RC RDMA READ response last", f(RS | PL | LA | RD | AETH);
    RC_READ_RESPONSE_ONLY = 0x10, "RC RDMA READ response only", f(RS | PL | ON | RD | AETH);
    RC_ACK = 0x11, "RC Acknowledge", f(RS | ON | AK | AETH);
    RC_ATOMIC_ACK = 0x12, "RC ATOMIC Acknowledge", f(RS | ON | AT | AETH | AACK);
    RC_COMPARE_SWAP = 0x13, "RC CmpSwap", f(RQ | ON | AT | AETH2);
    RC_FETCH_ADD = 0x14, "RC FetchAdd", f(RQ | ON | AT | AETH2);
    RC_SEND_LAST_INV = 0x16, "RC SEND last with invalidate", f(RQ | PL | LA | SE | IETH);
    RC_SEND_ONLY_INV = 0x17, "RC SEND only with invalidate", f(RQ | PL | ON | SE | IETH);

    UC_SEND_FIRST = 0x20, "UC SEND first", f(RQ | PL | FI | SE);
    UC_SEND_MIDDLE = 0x21, "UC SEND middle", f(RQ | PL | MI | SE);
    UC_SEND_LAST = 0x22, "UC SEND last", f(RQ | PL | LA | SE);
    UC_SEND_LAST_IMM = 0x23, "UC SEND last with immediate", f(RQ | PL | LA | SE | IMM);
    UC_SEND_ONLY = 0x24, "UC SEND only", f(RQ | PL | ON | SE);
    UC_SEND_ONLY_IMM = 0x25, "UC SEND only with immediate", f(RQ | PL | ON | SE | IMM);
    UC_WRITE_FIRST = 0x26, "UC RDMA WRITE first", f(RQ | PL | FI | WR | RETH);
    UC_WRITE_MIDDLE = 0x27, "UC RDMA WRITE middle", f(RQ | PL | MI | WR);
    UC_WRITE_LAST = 0x28, "UC RDMA WRITE last", f(RQ | PL | LA | WR);
    UC_WRITE_LAST_IMM = 0x29, "UC RDMA WRITE last with immediate", f(RQ | PL | LA | WR | IMM);
    UC_WRITE_ONLY = 0x2a, "UC RDMA WRITE only", f(RQ | PL | ON | WR | RETH);
    UC_WRITE_ONLY_IMM = 0x2b, "UC RDMA WRITE only with immediate", f(RQ | PL | ON | WR | RETH | IMM);

    UD_SEND_ONLY = 0x64, "UD SEND only", f(RQ | PL | ON | SE | DETH);
    UD_SEND_ONLY_IMM = 0x65, "UD SEND only with immediate", f(RQ | PL | ON | SE | DETH | IMM);

    CNP = 0x81, "CNP", OpFlags::CNP;
}

const fn ext_len(flags: OpFlags) -> usize {
    let mut n = super::bth::BTH_LEN;
    if flags.contains(OpFlags::RETH) {
        n += 16;
    }
    if flags.contains(OpFlags::AETH) {
        n += 4;
    }
    if flags.contains(OpFlags::DETH) {
        n += 8;
    }
    if flags.contains(OpFlags::IMMDT) {
        n += 4;
    }
    if flags.contains(OpFlags::IETH) {
        n += 4;
    }
    if flags.contains(OpFlags::ATOMIC_ETH) {
        n += 28;
    }
    if flags.contains(OpFlags::ATOMIC_ACK_ETH) {
        n += 8;
    }
    n
}

const fn build_table() -> [Option<OpcodeInfo>; 256] {
    let mut t: [Option<OpcodeInfo>; 256] = [None; 256];
    let mut i = 0;
    while i < DEFINED.len() {
        let (v, name, flags) = DEFINED[i];
        // A CNP carries 16 reserved bytes after the BTH (annex A17.9.3) and no payload.
        let header_len = if flags.contains(OpFlags::CNP) {
            super::bth::BTH_LEN + 16
        } else {
            ext_len(flags)
        };
        t[v as usize] = Some(OpcodeInfo {
            name,
            flags,
            header_len,
        });
        i += 1;
    }
    t
}

/// The 256-entry table; `None` for reserved opcodes.
pub static OPCODE_TABLE: [Option<OpcodeInfo>; 256] = build_table();

impl Opcode {
    /// The table entry, or `None` for an opcode this stack does not know.
    pub fn info(self) -> Option<&'static OpcodeInfo> {
        OPCODE_TABLE[self.0 as usize].as_ref()
    }

    /// Transport service from bits 7:5.
    pub const fn transport(self) -> Transport {
        match self.0 >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            _ => Transport::Other,
        }
    }

    /// Flags of a known opcode, empty for an unknown one.
    pub fn flags(self) -> OpFlags {
        self.info().map_or(OpFlags::empty(), |i| i.flags)
    }

    /// True for opcodes in the table.
    pub fn is_known(self) -> bool {
        self.info().is_some()
    }

    /// Name for printing; `"reserved"` for an unknown opcode.
    pub fn name(self) -> &'static str {
        self.info().map_or("reserved", |i| i.name)
    }
}

impl fmt::Debug for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#04x} ({})", self.0, self.name())
    }
}

impl fmt::Display for Opcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths_match_reference_table() {
        let expect: &[(Opcode, usize)] = &[
            (Opcode::RC_SEND_FIRST, 12),
            (Opcode::RC_SEND_LAST_IMM, 16),
            (Opcode::RC_WRITE_FIRST, 28),
            (Opcode::RC_WRITE_ONLY_IMM, 32),
            (Opcode::RC_READ_REQUEST, 28),
            (Opcode::RC_READ_RESPONSE_FIRST, 16),
            (Opcode::RC_READ_RESPONSE_MIDDLE, 12),
            (Opcode::RC_ACK, 16),
            (Opcode::RC_ATOMIC_ACK, 24),
            (Opcode::RC_COMPARE_SWAP, 40),
            (Opcode::RC_FETCH_ADD, 40),
            (Opcode::RC_SEND_ONLY_INV, 16),
            (Opcode::UD_SEND_ONLY, 20),
            (Opcode::UD_SEND_ONLY_IMM, 24),
        ];
        for &(op, len) in expect {
            assert_eq!(op.info().unwrap().header_len, len, "{op:?}");
        }
    }

    #[test]
    fn reserved_opcodes_are_unknown() {
        for v in [0x15u8, 0x18, 0x1f, 0x40, 0x63, 0x66, 0xff] {
            assert!(!Opcode(v).is_known(), "{v:#x}");
        }
        assert_eq!(OPCODE_TABLE.iter().filter(|e| e.is_some()).count(), 38);
    }

    #[test]
    fn classes() {
        assert_eq!(Opcode::UD_SEND_ONLY.transport(), Transport::Ud);
        assert!(Opcode::RC_READ_REQUEST.flags().contains(OpFlags::REQUEST));
        assert!(!Opcode::RC_READ_REQUEST.flags().contains(OpFlags::PAYLOAD));
        assert!(Opcode::RC_ACK.flags().contains(OpFlags::RESPONSE));
        assert_eq!(Opcode::CNP.transport(), Transport::Cnp);
    }
}
