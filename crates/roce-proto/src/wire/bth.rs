//! Base Transport Header (IBTA vol. 1 §9.2; docs/REFERENCE-rocev2.md "BTH").
//!
//! | byte | content |
//! |---|---|
//! | 0 | opcode |
//! | 1 | SE (7), MigReq (6), PadCnt (5:4), TVer (3:0) |
//! | 2-3 | P_Key |
//! | 4 | FECN (7), BECN (6), reserved (5:0) |
//! | 5-7 | destination QP |
//! | 8 | AckReq (7), reserved (6:0) |
//! | 9-11 | PSN |

use super::opcode::Opcode;
use super::psn::Psn;
use super::{check_len, check_room, get_u16, get_u24, set_u16, set_u24, Result};

/// BTH length in bytes.
pub const BTH_LEN: usize = 12;

/// Default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;

/// The port's partition table (IBTA vol. 1 §10.9.2): the default partition only. A RoCEv2
/// port has no subnet manager to give it others.
pub const PORT_PKEYS: [u16; 1] = [DEFAULT_PKEY];

/// P_Key match (IBTA vol. 1 §10.9.3): the 15-bit keys agree and at least one side is a full
/// member.
pub fn pkey_match(a: u16, b: u16) -> bool {
    (a & 0x7fff) == (b & 0x7fff) && (a & 0x8000 != 0 || b & 0x8000 != 0)
}

/// `pkey` matches an entry of the port's partition table.
pub fn port_pkey_ok(pkey: u16) -> bool {
    PORT_PKEYS.iter().any(|&k| pkey_match(pkey, k))
}

/// Offsets of the BTH fields.
pub mod field {
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: usize = 2;
    /// FECN/BECN byte, masked in the ICRC.
    pub const FECN_BECN: usize = 4;
    pub const DEST_QP: usize = 5;
    pub const ACK_REQ: usize = 8;
    pub const PSN: usize = 9;
    pub const SE_BIT: u8 = 0x80;
    pub const MIG_BIT: u8 = 0x40;
    pub const PAD_SHIFT: u8 = 4;
    pub const TVER_MASK: u8 = 0x0f;
    pub const FECN_BIT: u8 = 0x80;
    pub const BECN_BIT: u8 = 0x40;
    pub const ACKREQ_BIT: u8 = 0x80;
}

/// A view of a BTH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("BTH", buffer.as_ref(), BTH_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn b(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }

    pub fn opcode(&self) -> Opcode {
        Opcode(self.b(field::OPCODE))
    }
    pub fn solicited(&self) -> bool {
        self.b(field::FLAGS) & field::SE_BIT != 0
    }
    pub fn mig_req(&self) -> bool {
        self.b(field::FLAGS) & field::MIG_BIT != 0
    }
    pub fn pad_count(&self) -> u8 {
        (self.b(field::FLAGS) >> field::PAD_SHIFT) & 0x03
    }
    pub fn tver(&self) -> u8 {
        self.b(field::FLAGS) & field::TVER_MASK
    }
    pub fn pkey(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PKEY)
    }
    pub fn fecn(&self) -> bool {
        self.b(field::FECN_BECN) & field::FECN_BIT != 0
    }
    pub fn becn(&self) -> bool {
        self.b(field::FECN_BECN) & field::BECN_BIT != 0
    }
    pub fn dest_qp(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::DEST_QP)
    }
    pub fn ack_req(&self) -> bool {
        self.b(field::ACK_REQ) & field::ACKREQ_BIT != 0
    }
    pub fn psn(&self) -> Psn {
        Psn::new(get_u24(self.buffer.as_ref(), field::PSN))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_opcode(&mut self, op: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = op.0;
    }
    /// Writes byte 1 whole: SE, MigReq, PadCnt (2 bits), TVer (4 bits).
    pub fn set_flags(&mut self, solicited: bool, mig_req: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] = if solicited { field::SE_BIT } else { 0 }
            | if mig_req { field::MIG_BIT } else { 0 }
            | ((pad_count & 0x03) << field::PAD_SHIFT)
            | (tver & field::TVER_MASK);
    }
    /// Changes only the PadCnt bits.
    pub fn set_pad_count(&mut self, pad_count: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !(0x03 << field::PAD_SHIFT)) | ((pad_count & 0x03) << field::PAD_SHIFT);
    }
    pub fn set_pkey(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PKEY, v);
    }
    /// Writes byte 4 whole (reserved bits zero).
    pub fn set_fecn_becn(&mut self, fecn: bool, becn: bool) {
        self.buffer.as_mut()[field::FECN_BECN] =
            if fecn { field::FECN_BIT } else { 0 } | if becn { field::BECN_BIT } else { 0 };
    }
    pub fn set_dest_qp(&mut self, qpn: u32) {
        set_u24(self.buffer.as_mut(), field::DEST_QP, qpn);
    }
    /// Writes byte 8 whole (reserved bits zero).
    pub fn set_ack_req(&mut self, v: bool) {
        self.buffer.as_mut()[field::ACK_REQ] = if v { field::ACKREQ_BIT } else { 0 };
    }
    pub fn set_psn(&mut self, psn: Psn) {
        set_u24(self.buffer.as_mut(), field::PSN, psn.value());
    }
}

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

impl BthRepr {
    /// A BTH with default P_Key, TVer 0 and all flags clear.
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: Psn) -> Self {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: dest_qp & 0x00ff_ffff,
            ack_req: false,
            psn,
        }
    }

    /// Reads every field. Opcode and TVer values are not judged here (see
    /// `RoceHeaders::parse` and `RoceFrame::parse`); reserved bits are ignored.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("BTH", packet.buffer.as_ref(), BTH_LEN)?;
        Ok(BthRepr {
            opcode: packet.opcode(),
            solicited: packet.solicited(),
            mig_req: packet.mig_req(),
            pad_count: packet.pad_count(),
            tver: packet.tver(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qp: packet.dest_qp(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        })
    }

    /// Reads every field from exactly the 12 header bytes (see [`parse`](Self::parse)).
    #[inline(always)]
    pub fn from_bytes(b: &[u8; BTH_LEN]) -> Self {
        let flags = b[field::FLAGS];
        let fecn_becn = b[field::FECN_BECN];
        BthRepr {
            opcode: Opcode(b[field::OPCODE]),
            solicited: flags & field::SE_BIT != 0,
            mig_req: flags & field::MIG_BIT != 0,
            pad_count: (flags >> field::PAD_SHIFT) & 0x03,
            tver: flags & field::TVER_MASK,
            pkey: u16::from_be_bytes([b[field::PKEY], b[field::PKEY + 1]]),
            fecn: fecn_becn & field::FECN_BIT != 0,
            becn: fecn_becn & field::BECN_BIT != 0,
            dest_qp: u32::from_be_bytes([0, b[field::DEST_QP], b[6], b[7]]),
            ack_req: b[field::ACK_REQ] & field::ACKREQ_BIT != 0,
            psn: Psn::new(u32::from_be_bytes([0, b[field::PSN], b[10], b[11]])),
        }
    }

    /// Writes all 12 bytes, as [`emit`](Self::emit) does.
    #[inline]
    pub fn write_to(&self, b: &mut [u8; BTH_LEN]) {
        let flags = if self.solicited { field::SE_BIT } else { 0 }
            | if self.mig_req { field::MIG_BIT } else { 0 }
            | ((self.pad_count & 0x03) << field::PAD_SHIFT)
            | (self.tver & field::TVER_MASK);
        let fecn_becn = if self.fecn { field::FECN_BIT } else { 0 }
            | if self.becn { field::BECN_BIT } else { 0 };
        let ack = if self.ack_req { field::ACKREQ_BIT } else { 0 };
        // Three big-endian words: opcode/flags/P_Key, FECN-BECN/QP, AckReq/PSN.
        let w0 = u32::from(self.opcode.0) << 24 | u32::from(flags) << 16 | u32::from(self.pkey);
        let w1 = u32::from(fecn_becn) << 24 | (self.dest_qp & 0x00ff_ffff);
        let w2 = u32::from(ack) << 24 | (self.psn.value() & 0x00ff_ffff);
        let (a, rest) = b.split_at_mut(4);
        let (c, d) = rest.split_at_mut(4);
        a.copy_from_slice(&w0.to_be_bytes());
        c.copy_from_slice(&w1.to_be_bytes());
        d.copy_from_slice(&w2.to_be_bytes());
    }

    pub const fn buffer_len(&self) -> usize {
        BTH_LEN
    }

    /// Writes all 12 bytes (reserved bits zero; fields truncated to their widths).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), BTH_LEN)?;
        if let Some(b) = packet.buffer.as_mut().first_chunk_mut::<BTH_LEN>() {
            self.write_to(b);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // BTH of hw-hisilicon-rc-send.pcap frame 16: RC ACK to QP 0x45, PSN 0.
    const ACK_BTH: [u8; 12] = [
        0x11, 0x40, 0xff, 0xff, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x00, 0x00,
    ];

    /// The word-wise `write_to` writes what the per-field setters write, for every flag
    /// combination and for QP numbers and PSNs with bits above 24 set.
    #[test]
    fn write_to_agrees_with_setters() {
        for bits in 0..64u32 {
            let r = BthRepr {
                opcode: Opcode(0x80 | bits as u8),
                solicited: bits & 1 != 0,
                mig_req: bits & 2 != 0,
                pad_count: (bits >> 2) as u8,
                tver: (bits * 5) as u8,
                pkey: 0x1234 ^ (bits as u16) << 9,
                fecn: bits & 8 != 0,
                becn: bits & 16 != 0,
                dest_qp: 0xfe00_0000 | bits << 18 | 0x3_0005,
                ack_req: bits & 32 != 0,
                psn: Psn::new(0x00ff_fff0 ^ bits),
            };
            let mut fixed = [0xa5u8; BTH_LEN];
            r.write_to(&mut fixed);
            let mut p = Packet::new_unchecked([0x5au8; BTH_LEN]);
            p.set_opcode(r.opcode);
            p.set_flags(r.solicited, r.mig_req, r.pad_count, r.tver);
            p.set_pkey(r.pkey);
            p.set_fecn_becn(r.fecn, r.becn);
            p.set_dest_qp(r.dest_qp);
            p.set_ack_req(r.ack_req);
            p.set_psn(r.psn);
            assert_eq!(fixed, p.into_inner(), "{bits}");
        }
    }

    #[test]
    fn every_bit_where_the_reference_says() {
        let b = [
            0x04, 0xb3, 0x12, 0x34, 0xc0, 0xab, 0xcd, 0xef, 0x80, 0x98, 0x76, 0x54,
        ];
        let r = BthRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.opcode, Opcode::RC_SEND_ONLY);
        assert!(r.solicited);
        assert!(!r.mig_req);
        assert_eq!(r.pad_count, 3);
        assert_eq!(r.tver, 3);
        assert_eq!(r.pkey, 0x1234);
        assert!(r.fecn && r.becn);
        assert_eq!(r.dest_qp, 0xabcdef);
        assert!(r.ack_req);
        assert_eq!(r.psn, Psn::new(0x987654));
        let mut out = [0u8; 12];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn real_ack_bth() {
        let r = BthRepr::parse(&Packet::new_checked(&ACK_BTH[..]).unwrap()).unwrap();
        assert_eq!(r.opcode, Opcode::RC_ACK);
        assert!(r.mig_req);
        assert_eq!(r.dest_qp, 0x45);
        assert_eq!(r.pkey, DEFAULT_PKEY);
        assert!(Packet::new_checked(&ACK_BTH[..11]).is_err());
    }

    #[test]
    fn setters_truncate_to_width() {
        let mut out = [0u8; 12];
        let mut r = BthRepr::new(Opcode::RC_ACK, 0x1ff_ffff, Psn::new(1));
        assert_eq!(r.dest_qp, 0xff_ffff);
        r.pad_count = 7;
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out[1], 0x30);
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..11])).is_err());
    }
}
