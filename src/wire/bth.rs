//! Base Transport Header (IBTA vol. 1 §9.2; REFERENCE-rocev2.md "BTH").

use super::opcode::Opcode;
use super::psn::Psn;

/// BTH length in bytes.
pub const BTH_LEN: usize = 12;

/// Default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// High-level representation of a BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BthRepr {
    pub opcode: Opcode,
    /// Solicited event.
    pub solicited: bool,
    pub mig_req: bool,
    /// Pad bytes (0..=3) between payload and ICRC.
    pub pad_count: u8,
    /// Transport header version, 0.
    pub tver: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    /// Destination QP (24 bits).
    pub dest_qp: u32,
    pub ack_req: bool,
    pub psn: Psn,
}
