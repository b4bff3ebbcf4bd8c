//! The InfiniBand transport part of a RoCEv2 packet: BTH, the extension headers its opcode
//! names (opcode table), and the payload (IBTA vol. 1 §9.2-9.3).
//!
//! Extension headers follow the BTH in the order of IBTA vol. 1 §9.3: DETH, RETH, AtomicETH,
//! AETH, AtomicAckETH, ImmDt, IETH. A CNP (annex A17.9.3) carries 16 reserved bytes instead.

use super::aeth::{self, AethRepr, Syndrome, CREDITS_UNLIMITED};
use super::atomic_ack_eth::{self, AtomicAckEthRepr};
use super::atomic_eth::{self, AtomicEthRepr};
use super::bth::{self, BthRepr, BTH_LEN};
use super::deth::{self, DethRepr};
use super::ieth::{self, IethRepr};
use super::immdt::{self, ImmDtRepr};
use super::opcode::{OpFlags, OpcodeInfo};
use super::reth::{self, RethRepr};
use super::{check_len, check_room, Result, WireError};

/// Reserved bytes after the BTH of a CNP.
pub const CNP_RESERVED_LEN: usize = 16;

/// The extension-header flags of the opcode table, no class flags (what
/// [`RoceHeaders::present`] reports).
pub const EXTENSION_HEADERS: OpFlags = OpFlags::RETH
    .union(OpFlags::AETH)
    .union(OpFlags::DETH)
    .union(OpFlags::IMMDT)
    .union(OpFlags::IETH)
    .union(OpFlags::ATOMIC_ETH)
    .union(OpFlags::ATOMIC_ACK_ETH);

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

impl RoceHeaders {
    /// Headers with only the BTH; add extension headers with the `with_*` methods.
    pub const fn new(bth: BthRepr) -> Self {
        RoceHeaders {
            bth,
            reth: None,
            aeth: None,
            deth: None,
            imm_dt: None,
            ieth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
        }
    }

    /// Headers with every extension header the opcode carries present, zero-valued (an AETH is
    /// an ACK with unlimited credits and MSN 0). Unknown opcodes get none.
    pub fn for_opcode(bth: BthRepr) -> Self {
        let f = bth.opcode.flags();
        let mut h = RoceHeaders::new(bth);
        if f.contains(OpFlags::RETH) {
            h.reth = Some(RethRepr::default());
        }
        if f.contains(OpFlags::AETH) {
            h.aeth = Some(AethRepr {
                syndrome: Syndrome::Ack {
                    credits: CREDITS_UNLIMITED,
                },
                msn: 0,
            });
        }
        if f.contains(OpFlags::DETH) {
            h.deth = Some(DethRepr::default());
        }
        if f.contains(OpFlags::IMMDT) {
            h.imm_dt = Some(0);
        }
        if f.contains(OpFlags::IETH) {
            h.ieth = Some(0);
        }
        if f.contains(OpFlags::ATOMIC_ETH) {
            h.atomic_eth = Some(AtomicEthRepr::default());
        }
        if f.contains(OpFlags::ATOMIC_ACK_ETH) {
            h.atomic_ack_eth = Some(AtomicAckEthRepr::default());
        }
        h
    }

    #[must_use]
    pub const fn with_reth(mut self, reth: RethRepr) -> Self {
        self.reth = Some(reth);
        self
    }
    #[must_use]
    pub const fn with_aeth(mut self, aeth: AethRepr) -> Self {
        self.aeth = Some(aeth);
        self
    }
    #[must_use]
    pub const fn with_deth(mut self, deth: DethRepr) -> Self {
        self.deth = Some(deth);
        self
    }
    #[must_use]
    pub const fn with_imm(mut self, imm: u32) -> Self {
        self.imm_dt = Some(imm);
        self
    }
    #[must_use]
    pub const fn with_ieth(mut self, rkey: u32) -> Self {
        self.ieth = Some(rkey);
        self
    }
    #[must_use]
    pub const fn with_atomic_eth(mut self, a: AtomicEthRepr) -> Self {
        self.atomic_eth = Some(a);
        self
    }
    #[must_use]
    pub const fn with_atomic_ack_eth(mut self, a: AtomicAckEthRepr) -> Self {
        self.atomic_ack_eth = Some(a);
        self
    }

    /// The extension headers present, as opcode-table flags.
    #[inline]
    pub fn present(&self) -> OpFlags {
        let mut f = OpFlags::empty();
        f.set(OpFlags::RETH, self.reth.is_some());
        f.set(OpFlags::AETH, self.aeth.is_some());
        f.set(OpFlags::DETH, self.deth.is_some());
        f.set(OpFlags::IMMDT, self.imm_dt.is_some());
        f.set(OpFlags::IETH, self.ieth.is_some());
        f.set(OpFlags::ATOMIC_ETH, self.atomic_eth.is_some());
        f.set(OpFlags::ATOMIC_ACK_ETH, self.atomic_ack_eth.is_some());
        f
    }

    /// Checks that the opcode is known and that exactly its extension headers are present.
    pub fn check(&self) -> Result<()> {
        let op = self.bth.opcode;
        let info = op.info().ok_or(WireError::UnknownOpcode(op.0))?;
        if info.flags & EXTENSION_HEADERS != self.present() {
            return Err(WireError::HeadersMismatch(op.0));
        }
        Ok(())
    }

    /// BTH plus extension headers, in bytes: the opcode table's length for a known opcode,
    /// otherwise what the present headers add up to.
    pub fn header_len(&self) -> usize {
        match self.bth.opcode.info() {
            Some(i) => i.header_len,
            None => {
                let f = self.present();
                let mut n = BTH_LEN;
                for (flag, len) in [
                    (OpFlags::RETH, reth::RETH_LEN),
                    (OpFlags::AETH, aeth::AETH_LEN),
                    (OpFlags::DETH, deth::DETH_LEN),
                    (OpFlags::IMMDT, immdt::IMMDT_LEN),
                    (OpFlags::IETH, ieth::IETH_LEN),
                    (OpFlags::ATOMIC_ETH, atomic_eth::ATOMIC_ETH_LEN),
                    (OpFlags::ATOMIC_ACK_ETH, atomic_ack_eth::ATOMIC_ACK_ETH_LEN),
                ] {
                    if f.contains(flag) {
                        n += len;
                    }
                }
                n
            }
        }
    }

    /// Parses the BTH and the extension headers the opcode table names for its opcode from the
    /// start of `bytes` (which may continue with payload). Returns the headers and their length.
    /// Unknown opcodes are `WireError::UnknownOpcode`. TVer is not judged here.
    pub fn parse(bytes: &[u8]) -> Result<(Self, usize)> {
        let bth = BthRepr::parse(&bth::Packet::new_checked(bytes)?)?;
        let info = bth
            .opcode
            .info()
            .ok_or(WireError::UnknownOpcode(bth.opcode.0))?;
        let h = Self::parse_extensions(bth, info, bytes)?;
        Ok((h, info.header_len))
    }

    /// The headers of `bytes`, which start with the BTH already read as `bth` whose opcode has
    /// the table entry `info`: reads the extension headers `info` names (IBTA vol. 1 §9.3
    /// order). Fails only if `bytes` is shorter than `info.header_len`.
    #[inline(always)]
    pub(crate) fn parse_extensions(bth: BthRepr, info: &OpcodeInfo, bytes: &[u8]) -> Result<Self> {
        check_len("RoCE extension headers", bytes, info.header_len)?;
        let mut rest = bytes
            .get(BTH_LEN..info.header_len)
            .ok_or(WireError::BadValue("opcode table header length"))?;
        // Takes the next `N` bytes (their presence was checked above).
        fn take<'b, const N: usize>(rest: &mut &'b [u8]) -> Result<&'b [u8; N]> {
            let (a, b) = rest
                .split_first_chunk::<N>()
                .ok_or(WireError::BadValue("opcode table header length"))?;
            *rest = b;
            Ok(a)
        }
        let f = info.flags;
        // Each header in one expression and the headers built in one go (no `Option` written
        // twice); the `take`s run in the order written, which is the wire order.
        let deth = if f.contains(OpFlags::DETH) {
            let b = take::<{ deth::DETH_LEN }>(&mut rest)?;
            Some(DethRepr::parse(&deth::Packet::new_unchecked(&b[..]))?)
        } else {
            None
        };
        let reth = if f.contains(OpFlags::RETH) {
            Some(RethRepr::from_bytes(take::<{ reth::RETH_LEN }>(&mut rest)?))
        } else {
            None
        };
        let atomic_eth = if f.contains(OpFlags::ATOMIC_ETH) {
            let b = take::<{ atomic_eth::ATOMIC_ETH_LEN }>(&mut rest)?;
            Some(AtomicEthRepr::parse(&atomic_eth::Packet::new_unchecked(
                &b[..],
            ))?)
        } else {
            None
        };
        let aeth = if f.contains(OpFlags::AETH) {
            Some(AethRepr::from_bytes(take::<{ aeth::AETH_LEN }>(&mut rest)?))
        } else {
            None
        };
        let atomic_ack_eth = if f.contains(OpFlags::ATOMIC_ACK_ETH) {
            let b = take::<{ atomic_ack_eth::ATOMIC_ACK_ETH_LEN }>(&mut rest)?;
            Some(AtomicAckEthRepr::parse(
                &atomic_ack_eth::Packet::new_unchecked(&b[..]),
            )?)
        } else {
            None
        };
        let imm_dt = if f.contains(OpFlags::IMMDT) {
            let b = take::<{ immdt::IMMDT_LEN }>(&mut rest)?;
            Some(ImmDtRepr::parse(&immdt::Packet::new_unchecked(&b[..]))?.imm)
        } else {
            None
        };
        let ieth = if f.contains(OpFlags::IETH) {
            let b = take::<{ ieth::IETH_LEN }>(&mut rest)?;
            Some(IethRepr::parse(&ieth::Packet::new_unchecked(&b[..]))?.rkey)
        } else {
            None
        };
        if f.contains(OpFlags::CNP) {
            take::<CNP_RESERVED_LEN>(&mut rest)?;
        }
        Ok(RoceHeaders {
            bth,
            reth,
            aeth,
            deth,
            imm_dt,
            ieth,
            atomic_eth,
            atomic_ack_eth,
        })
    }

    /// Writes the BTH (as given, including `pad_count`) and the extension headers to the start
    /// of `buf`; returns the number of bytes written. Fails if the opcode is unknown, the
    /// present headers do not match it, or `buf` is too small.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        self.emit_inlined(buf)
    }

    /// [`emit`](Self::emit) inlined into the caller: the transmit path's copy (it builds a
    /// frame per packet), so the other callers share one out-of-line body.
    #[inline(always)]
    pub(crate) fn emit_inlined(&self, buf: &mut [u8]) -> Result<usize> {
        let op = self.bth.opcode;
        let info = op.info().ok_or(WireError::UnknownOpcode(op.0))?;
        if info.flags & EXTENSION_HEADERS != self.present() {
            return Err(WireError::HeadersMismatch(op.0));
        }
        let len = info.header_len;
        check_room(buf, len)?;
        let too_small = WireError::BufferTooSmall {
            need: len,
            have: buf.len(),
        };
        let (head, mut rest) = buf.split_first_chunk_mut::<BTH_LEN>().ok_or(too_small)?;
        self.bth.write_to(head);
        // Takes the next `N` bytes (room for all of them was checked above).
        fn take<'b, const N: usize>(
            rest: &mut &'b mut [u8],
            too_small: WireError,
        ) -> Result<&'b mut [u8; N]> {
            let (a, b) = core::mem::take(rest)
                .split_first_chunk_mut::<N>()
                .ok_or(too_small)?;
            *rest = b;
            Ok(a)
        }
        if let Some(d) = &self.deth {
            let b = take::<{ deth::DETH_LEN }>(&mut rest, too_small)?;
            d.emit(&mut deth::Packet::new_unchecked(&mut b[..]))?;
        }
        if let Some(r) = &self.reth {
            r.write_to(take::<{ reth::RETH_LEN }>(&mut rest, too_small)?);
        }
        if let Some(a) = &self.atomic_eth {
            let b = take::<{ atomic_eth::ATOMIC_ETH_LEN }>(&mut rest, too_small)?;
            a.emit(&mut atomic_eth::Packet::new_unchecked(&mut b[..]))?;
        }
        if let Some(a) = &self.aeth {
            a.write_to(take::<{ aeth::AETH_LEN }>(&mut rest, too_small)?);
        }
        if let Some(a) = &self.atomic_ack_eth {
            let b = take::<{ atomic_ack_eth::ATOMIC_ACK_ETH_LEN }>(&mut rest, too_small)?;
            a.emit(&mut atomic_ack_eth::Packet::new_unchecked(&mut b[..]))?;
        }
        if let Some(imm) = self.imm_dt {
            let b = take::<{ immdt::IMMDT_LEN }>(&mut rest, too_small)?;
            ImmDtRepr { imm }.emit(&mut immdt::Packet::new_unchecked(&mut b[..]))?;
        }
        if let Some(rkey) = self.ieth {
            let b = take::<{ ieth::IETH_LEN }>(&mut rest, too_small)?;
            IethRepr { rkey }.emit(&mut ieth::Packet::new_unchecked(&mut b[..]))?;
        }
        if info.flags.contains(OpFlags::CNP) {
            *take::<CNP_RESERVED_LEN>(&mut rest, too_small)? = [0; CNP_RESERVED_LEN];
        }
        Ok(len)
    }
}

impl<'a> RocePacket<'a> {
    /// Parses headers from the start of `bytes` and takes everything after them as the payload
    /// (the caller has already removed pad and ICRC).
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let (headers, n) = RoceHeaders::parse(bytes)?;
        Ok(RocePacket {
            headers,
            payload: bytes.get(n..).unwrap_or(&[]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::aeth::NakCode;
    use crate::wire::opcode::{Opcode, OPCODE_TABLE};
    use crate::wire::psn::Psn;

    #[test]
    fn every_known_opcode_round_trips_with_table_length() {
        for (v, e) in OPCODE_TABLE.iter().enumerate() {
            let Some(info) = e else { continue };
            let op = Opcode(v as u8);
            let h = RoceHeaders::for_opcode(BthRepr::new(op, 0x12, Psn::new(7)));
            assert_eq!(h.header_len(), info.header_len, "{op:?}");
            let mut buf = [0xaau8; 64];
            let n = h.emit(&mut buf).unwrap();
            assert_eq!(n, info.header_len);
            assert_eq!(RoceHeaders::parse(&buf[..n]), Ok((h, n)), "{op:?}");
            // One byte short fails, no panic.
            assert!(RoceHeaders::parse(&buf[..n - 1]).is_err());
            assert!(h.emit(&mut buf[..n - 1]).is_err());
        }
    }

    /// `emit` writes every byte of its span (reserved ones included): the transmit path emits
    /// into a reused buffer without clearing it.
    #[test]
    fn emit_writes_every_byte_of_its_span() {
        for (v, e) in OPCODE_TABLE.iter().enumerate() {
            let Some(info) = e else { continue };
            let h = RoceHeaders::for_opcode(BthRepr::new(Opcode(v as u8), 0x12, Psn::new(7)));
            let (mut zeros, mut ones) = ([0u8; 64], [0xffu8; 64]);
            assert_eq!(h.emit(&mut zeros), Ok(info.header_len));
            assert_eq!(h.emit(&mut ones), Ok(info.header_len));
            let n = info.header_len;
            assert_eq!(zeros[..n], ones[..n], "{}", info.name);
        }
    }

    #[test]
    fn extension_order_write_only_imm() {
        let h = RoceHeaders::new(BthRepr::new(Opcode::RC_WRITE_ONLY_IMM, 1, Psn::new(2)))
            .with_reth(RethRepr {
                va: 0x1122_3344_5566_7788,
                rkey: 0x99aa_bbcc,
                dma_len: 3,
            })
            .with_imm(0xdead_beef);
        let mut buf = [0u8; 32];
        assert_eq!(h.emit(&mut buf), Ok(32));
        assert_eq!(&buf[12..14], &[0x11, 0x22]);
        assert_eq!(&buf[28..32], &[0xde, 0xad, 0xbe, 0xef]);
    }

    #[test]
    fn extension_order_atomic_ack() {
        let h = RoceHeaders::new(BthRepr::new(Opcode::RC_ATOMIC_ACK, 1, Psn::new(2)))
            .with_aeth(AethRepr::nak(NakCode::InvalidRequest, 5))
            .with_atomic_ack_eth(AtomicAckEthRepr { orig_data: 0x42 });
        let mut buf = [0u8; 24];
        assert_eq!(h.emit(&mut buf), Ok(24));
        assert_eq!(buf[12], 0x61);
        assert_eq!(buf[23], 0x42);
    }

    #[test]
    fn mismatch_and_unknown_rejected() {
        let mut buf = [0u8; 64];
        let h = RoceHeaders::new(BthRepr::new(Opcode::RC_ACK, 1, Psn::new(0)));
        assert_eq!(h.emit(&mut buf), Err(WireError::HeadersMismatch(0x11)));
        let h = RoceHeaders::new(BthRepr::new(Opcode::RC_SEND_ONLY, 1, Psn::new(0))).with_imm(1);
        assert_eq!(h.emit(&mut buf), Err(WireError::HeadersMismatch(0x04)));
        let h = RoceHeaders::new(BthRepr::new(Opcode(0x15), 1, Psn::new(0)));
        assert_eq!(h.emit(&mut buf), Err(WireError::UnknownOpcode(0x15)));
        buf[0] = 0x15;
        assert_eq!(
            RoceHeaders::parse(&buf),
            Err(WireError::UnknownOpcode(0x15))
        );
    }

    #[test]
    fn roce_packet_payload() {
        let h = RoceHeaders::for_opcode(BthRepr::new(Opcode::RC_SEND_ONLY, 3, Psn::new(9)));
        let mut buf = [7u8; 15];
        h.emit(&mut buf).unwrap();
        let p = RocePacket::parse(&buf).unwrap();
        assert_eq!(p.headers, h);
        assert_eq!(p.payload, &[7, 7, 7]);
    }
}
