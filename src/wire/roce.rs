//! The InfiniBand transport part of a RoCEv2 packet: BTH, the extension headers its opcode
//! names (opcode table), and the payload (IBTA vol. 1 §9.2-9.3).

use super::aeth::AethRepr;
use super::atomic_ack_eth::AtomicAckEthRepr;
use super::atomic_eth::AtomicEthRepr;
use super::bth::BthRepr;
use super::deth::DethRepr;
use super::reth::RethRepr;

/// BTH and every extension header an opcode may carry. Exactly the headers the opcode table
/// names for `bth.opcode` are `Some`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceHeaders {
    pub bth: BthRepr,
    pub reth: Option<RethRepr>,
    pub aeth: Option<AethRepr>,
    pub deth: Option<DethRepr>,
    /// Immediate data (ImmDt), big-endian on the wire.
    pub imm_dt: Option<u32>,
    /// IETH: the R_Key to invalidate.
    pub ieth: Option<u32>,
    pub atomic_eth: Option<AtomicEthRepr>,
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
}

/// A parsed RoCEv2 transport packet whose frame-level checks (lengths, ICRC) passed: headers plus
/// the payload without pad and ICRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RocePacket<'a> {
    pub headers: RoceHeaders,
    pub payload: &'a [u8],
}
