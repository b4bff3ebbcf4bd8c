//! Communication manager messages (IBTA vol. 1 §12.6): REQ, MRA, REJ, REP, RTU, DREQ, DREP.
//!
//! Each message has a module with a `Packet` view over the 232 attribute-data bytes of a CM MAD
//! (`super::mad`), a `field` module of byte ranges and a `Repr` parsed from and emitted into
//! that view. Offsets are relative to the start of the attribute data (MAD byte 24) and follow
//! §12.6.5 (REQ, with its path descriptions in `path`), §12.6.6 (MRA), §12.6.7 (REJ),
//! §12.6.8 (REP), §12.6.9 (RTU), §12.6.10 (DREQ), §12.6.11 (DREP); checked against Wireshark's
//! dissector on the rxe capture in `tests/vectors`. Every field, including the reserved-adjacent
//! bit fields, is kept so that a parsed message re-emits to the same bytes; reserved bits and
//! bytes are emitted as zero. Parsing never fails on field values: only a short buffer, a MAD
//! header that is not CM/`Send`, or an unknown attribute ID is an error.

pub mod drep;
pub mod dreq;
pub mod mra;
pub mod path;
pub mod rej;
pub mod rep;
pub mod req;
pub mod rtu;

pub use drep::{DrepRepr, DREP_PRIVATE_LEN};
pub use dreq::{DreqRepr, DREQ_PRIVATE_LEN};
pub use mra::{MraRepr, MRA_PRIVATE_LEN};
pub use path::PathInfo;
pub use rej::{RejReason, RejRepr, REJ_ARI_LEN, REJ_PRIVATE_LEN};
pub use rep::{RepRepr, REP_PRIVATE_LEN};
pub use req::{ReqRepr, REQ_PRIVATE_LEN};
pub use rtu::{RtuRepr, RTU_PRIVATE_LEN};

use super::mad::{self, MadHeader, MAD_LEN};
use core::ops::Range;
use thiserror::Error;

/// CM attribute IDs (§12.6.1, Table 100).
pub mod attr {
    pub const REQ: u16 = 0x0010;
    pub const MRA: u16 = 0x0011;
    pub const REJ: u16 = 0x0012;
    pub const REP: u16 = 0x0013;
    pub const RTU: u16 = 0x0014;
    pub const DREQ: u16 = 0x0015;
    pub const DREP: u16 = 0x0016;
}

/// Why a CM MAD could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum CmCodecError {
    #[error("MAD too short ({0} bytes, need 256)")]
    Truncated(usize),
    #[error("MAD base version {0}, expected 1")]
    BaseVersion(u8),
    #[error("management class {0:#04x} is not CM (0x07)")]
    Class(u8),
    #[error("CM class version {0}, expected 2")]
    ClassVersion(u8),
    #[error("MAD method {0:#04x} is not Send (0x03)")]
    Method(u8),
    #[error("unknown CM attribute ID {0:#06x}")]
    UnknownAttribute(u16),
}

/// Which message a REJ rejects or an MRA acknowledges (§12.6.6, §12.6.7: 2-bit field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsgRef {
    Req,
    Rep,
    /// "Other" / LAP.
    Other,
    /// Value 3, reserved.
    Reserved,
}

impl MsgRef {
    /// From the 2-bit field (higher bits ignored).
    pub const fn from_bits(b: u8) -> MsgRef {
        match b & 3 {
            0 => MsgRef::Req,
            1 => MsgRef::Rep,
            2 => MsgRef::Other,
            _ => MsgRef::Reserved,
        }
    }

    /// The 2-bit field.
    pub const fn bits(self) -> u8 {
        match self {
            MsgRef::Req => 0,
            MsgRef::Rep => 1,
            MsgRef::Other => 2,
            MsgRef::Reserved => 3,
        }
    }
}

// Big-endian accessors of the fields the `field` modules name by byte range (the range's
// length is the field's width). Views check their length once in `new_checked`; the ranges
// are constants inside it.
fn read_u16(b: &[u8], f: Range<usize>) -> u16 {
    super::get_u16(&b[f], 0)
}
fn read_u24(b: &[u8], f: Range<usize>) -> u32 {
    super::get_u24(&b[f], 0)
}
fn read_u32(b: &[u8], f: Range<usize>) -> u32 {
    super::get_u32(&b[f], 0)
}
fn read_u64(b: &[u8], f: Range<usize>) -> u64 {
    super::get_u64(&b[f], 0)
}
fn read_array<const N: usize>(b: &[u8], f: Range<usize>) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[f]);
    a
}
fn write_u16(b: &mut [u8], f: Range<usize>, v: u16) {
    b[f].copy_from_slice(&v.to_be_bytes());
}
fn write_u24(b: &mut [u8], f: Range<usize>, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes()[1..]);
}
fn write_u32(b: &mut [u8], f: Range<usize>, v: u32) {
    b[f].copy_from_slice(&v.to_be_bytes());
}
fn write_u64(b: &mut [u8], f: Range<usize>, v: u64) {
    b[f].copy_from_slice(&v.to_be_bytes());
}

/// Any of the seven CM messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmMessage {
    Req(ReqRepr),
    Mra(MraRepr),
    Rej(RejRepr),
    Rep(RepRepr),
    Rtu(RtuRepr),
    Dreq(DreqRepr),
    Drep(DrepRepr),
}

impl CmMessage {
    /// The MAD attribute ID of this message.
    pub const fn attribute_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => attr::REQ,
            CmMessage::Mra(_) => attr::MRA,
            CmMessage::Rej(_) => attr::REJ,
            CmMessage::Rep(_) => attr::REP,
            CmMessage::Rtu(_) => attr::RTU,
            CmMessage::Dreq(_) => attr::DREQ,
            CmMessage::Drep(_) => attr::DREP,
        }
    }

    /// Decode a whole CM MAD (header and attribute data). Bytes past 256 are ignored.
    pub fn parse(mad_bytes: &[u8]) -> Result<(MadHeader, CmMessage), CmCodecError> {
        let truncated = CmCodecError::Truncated(mad_bytes.len());
        let p = mad::Packet::new_checked(mad_bytes).map_err(|_| truncated)?;
        let h = MadHeader::parse(&p);
        if h.base_version != mad::BASE_VERSION {
            return Err(CmCodecError::BaseVersion(h.base_version));
        }
        if h.mgmt_class != mad::MGMT_CLASS_CM {
            return Err(CmCodecError::Class(h.mgmt_class));
        }
        if h.class_version != mad::CM_CLASS_VERSION {
            return Err(CmCodecError::ClassVersion(h.class_version));
        }
        if h.method != mad::METHOD_SEND {
            return Err(CmCodecError::Method(h.method));
        }
        // `data` is the whole 232 bytes every message spans, so no view below can be short.
        let d = p.data();
        let msg = match h.attribute_id {
            attr::REQ => req::Packet::new_checked(d)
                .and_then(|p| ReqRepr::parse(&p))
                .map(CmMessage::Req),
            attr::MRA => mra::Packet::new_checked(d)
                .and_then(|p| MraRepr::parse(&p))
                .map(CmMessage::Mra),
            attr::REJ => rej::Packet::new_checked(d)
                .and_then(|p| RejRepr::parse(&p))
                .map(CmMessage::Rej),
            attr::REP => rep::Packet::new_checked(d)
                .and_then(|p| RepRepr::parse(&p))
                .map(CmMessage::Rep),
            attr::RTU => rtu::Packet::new_checked(d)
                .and_then(|p| RtuRepr::parse(&p))
                .map(CmMessage::Rtu),
            attr::DREQ => dreq::Packet::new_checked(d)
                .and_then(|p| DreqRepr::parse(&p))
                .map(CmMessage::Dreq),
            attr::DREP => rtu::Packet::new_checked(d)
                .and_then(|p| DrepRepr::parse(&p))
                .map(CmMessage::Drep),
            other => return Err(CmCodecError::UnknownAttribute(other)),
        };
        Ok((h, msg.map_err(|_| truncated)?))
    }

    /// Write `hdr` (with its attribute ID replaced by this message's) and the message into
    /// `buf`, all 256 bytes of it: reserved bits and bytes are zero.
    pub fn emit(&self, hdr: &MadHeader, buf: &mut [u8; MAD_LEN]) {
        let mut h = *hdr;
        h.attribute_id = self.attribute_id();
        let mut p = mad::Packet::new_unchecked(&mut buf[..]);
        h.emit(&mut p);
        let d = p.data_mut();
        let written = match self {
            CmMessage::Req(m) => m.emit(&mut req::Packet::new_unchecked(d)),
            CmMessage::Mra(m) => m.emit(&mut mra::Packet::new_unchecked(d)),
            CmMessage::Rej(m) => m.emit(&mut rej::Packet::new_unchecked(d)),
            CmMessage::Rep(m) => m.emit(&mut rep::Packet::new_unchecked(d)),
            CmMessage::Rtu(m) => m.emit(&mut rtu::Packet::new_unchecked(d)),
            CmMessage::Dreq(m) => m.emit(&mut dreq::Packet::new_unchecked(d)),
            CmMessage::Drep(m) => m.emit(&mut rtu::Packet::new_unchecked(d)),
        };
        // The attribute data of a 256-byte MAD is the 232 bytes every message spans.
        debug_assert!(written.is_ok(), "{written:?}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mad::MAD_HEADER_LEN;
    use crate::wire::psn::Psn;

    fn roundtrip(m: CmMessage) {
        let h = MadHeader::cm(0, 0x1234_5678_9abc_def0);
        let mut buf = [0u8; MAD_LEN];
        m.emit(&h, &mut buf);
        let (h2, m2) = CmMessage::parse(&buf).unwrap();
        assert_eq!(h2.attribute_id, m.attribute_id());
        assert_eq!(h2.transaction_id, h.transaction_id);
        assert_eq!(m2, m);
    }

    /// One message of each kind, every field non-zero and out of range where it is narrower
    /// than its type.
    fn one_of_each() -> [CmMessage; 7] {
        let path = PathInfo {
            local_lid: 0x0102,
            remote_lid: 0x0304,
            local_gid: [0x11; 16],
            remote_gid: [0x22; 16],
            flow_label: 0xfff_ffff,
            packet_rate: 0xff,
            traffic_class: 0x33,
            hop_limit: 0x44,
            sl: 0xff,
            subnet_local: true,
            local_ack_timeout: 0xff,
        };
        [
            CmMessage::Req(ReqRepr {
                local_comm_id: 0x0a0b_0c0d,
                service_id: 0x0102_0304_0506_0708,
                local_ca_guid: 0x1112_1314_1516_1718,
                local_qkey: 0x2122_2324,
                local_qpn: 0xff_ffff,
                responder_resources: 0x31,
                local_eecn: 0xff_ffff,
                initiator_depth: 0x32,
                remote_eecn: 0xff_ffff,
                remote_cm_response_timeout: 0xff,
                transport_type: 0xff,
                end_to_end_flow_control: true,
                starting_psn: Psn::new(0xab_cdef),
                local_cm_response_timeout: 0xff,
                retry_count: 0xff,
                pkey: 0xffff,
                path_mtu: 0xff,
                rdc_exists: true,
                rnr_retry_count: 0xff,
                max_cm_retries: 0xff,
                srq: true,
                extended_transport_type: 0xff,
                primary_path: path,
                alternate_path: path,
                private_data: [0x5a; REQ_PRIVATE_LEN],
            }),
            CmMessage::Mra(MraRepr {
                local_comm_id: 1,
                remote_comm_id: 2,
                msg_mraed: MsgRef::Reserved,
                service_timeout: 0xff,
                private_data: [0x5a; MRA_PRIVATE_LEN],
            }),
            CmMessage::Rej(RejRepr {
                local_comm_id: 1,
                remote_comm_id: 2,
                msg_rejected: MsgRef::Reserved,
                reject_info_length: 0xff,
                reason: RejReason::Other(0xffff),
                ari: [0x5a; REJ_ARI_LEN],
                private_data: [0x5a; REJ_PRIVATE_LEN],
            }),
            CmMessage::Rep(RepRepr {
                local_comm_id: 1,
                remote_comm_id: 2,
                local_qkey: 3,
                local_qpn: 0xff_ffff,
                local_eecn: 0xff_ffff,
                starting_psn: Psn::new(0xff_ffff),
                responder_resources: 4,
                initiator_depth: 5,
                target_ack_delay: 0xff,
                failover_accepted: 0xff,
                end_to_end_flow_control: true,
                rnr_retry_count: 0xff,
                srq: true,
                local_ca_guid: 6,
                private_data: [0x5a; REP_PRIVATE_LEN],
            }),
            CmMessage::Rtu(RtuRepr {
                local_comm_id: 1,
                remote_comm_id: 2,
                private_data: [0x5a; RTU_PRIVATE_LEN],
            }),
            CmMessage::Dreq(DreqRepr {
                local_comm_id: 1,
                remote_comm_id: 2,
                remote_qpn: 0xff_ffff,
                private_data: [0x5a; DREQ_PRIVATE_LEN],
            }),
            CmMessage::Drep(DrepRepr {
                local_comm_id: 1,
                remote_comm_id: 2,
                private_data: [0x5a; DREP_PRIVATE_LEN],
            }),
        ]
    }

    #[test]
    fn rej_layout() {
        let m = RejRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            msg_rejected: MsgRef::Rep,
            reject_info_length: 8,
            reason: RejReason::ConsumerDefined,
            ari: [0; REJ_ARI_LEN],
            private_data: [0xab; REJ_PRIVATE_LEN],
        };
        let mut buf = [0u8; MAD_LEN];
        CmMessage::Rej(m).emit(&MadHeader::cm(0, 7), &mut buf);
        let d = &buf[MAD_HEADER_LEN..];
        assert_eq!(d[8], 0x40);
        assert_eq!(d[9], 16);
        assert_eq!(&d[10..12], &[0, 28]);
        assert_eq!(d[83], 0);
        assert_eq!(d[84], 0xab);
        assert_eq!(d[231], 0xab);
        roundtrip(CmMessage::Rej(m));
    }

    #[test]
    fn mra_dreq_layout() {
        let m = MraRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            msg_mraed: MsgRef::Req,
            service_timeout: 24,
            private_data: [1; MRA_PRIVATE_LEN],
        };
        let mut buf = [0u8; MAD_LEN];
        CmMessage::Mra(m).emit(&MadHeader::cm(0, 7), &mut buf);
        assert_eq!(buf[MAD_HEADER_LEN + 9], 24 << 3);
        assert_eq!(buf[MAD_HEADER_LEN + 10], 1);
        roundtrip(CmMessage::Mra(m));
        let q = DreqRepr {
            local_comm_id: 3,
            remote_comm_id: 4,
            remote_qpn: 0x11,
            private_data: [2; DREQ_PRIVATE_LEN],
        };
        CmMessage::Dreq(q).emit(&MadHeader::cm(0, 7), &mut buf);
        assert_eq!(
            &buf[MAD_HEADER_LEN + 8..MAD_HEADER_LEN + 12],
            &[0, 0, 0x11, 0]
        );
        roundtrip(CmMessage::Dreq(q));
    }

    /// Emitting writes all 256 bytes: the same bytes over a dirty buffer as over a zeroed one,
    /// narrow fields masked to their width and reserved bits zero.
    #[test]
    fn emit_writes_every_byte() {
        let h = MadHeader::cm(0, 9);
        for m in one_of_each() {
            let mut zeroed = [0u8; MAD_LEN];
            let mut dirty = [0xffu8; MAD_LEN];
            m.emit(&h, &mut zeroed);
            m.emit(&h, &mut dirty);
            assert_eq!(zeroed, dirty, "{m:?}");
            let mut again = [0u8; MAD_LEN];
            let (h2, m2) = CmMessage::parse(&zeroed).unwrap();
            m2.emit(&h2, &mut again);
            assert_eq!(again, zeroed, "{m:?}");
        }
    }

    /// Every length, every attribute: an error or a message, never a panic.
    #[test]
    fn every_length_parses_or_fails() {
        let h = MadHeader::cm(0, 9);
        for m in one_of_each() {
            let mut buf = [0u8; MAD_LEN + 8];
            let mad: &mut [u8; MAD_LEN] = (&mut buf[..MAD_LEN]).try_into().unwrap();
            m.emit(&h, mad);
            let want = CmMessage::parse(&buf[..MAD_LEN]).unwrap();
            for len in 0..buf.len() {
                let r = CmMessage::parse(&buf[..len]);
                if len < MAD_LEN {
                    assert_eq!(r, Err(CmCodecError::Truncated(len)));
                } else {
                    assert_eq!(r, Ok(want));
                }
            }
        }
    }

    #[test]
    fn header_errors() {
        let mut buf = [0u8; MAD_LEN];
        CmMessage::Drep(DrepRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            private_data: [0; DREP_PRIVATE_LEN],
        })
        .emit(&MadHeader::cm(0, 1), &mut buf);
        assert!(CmMessage::parse(&buf).is_ok());
        assert_eq!(
            CmMessage::parse(&buf[..100]).unwrap_err(),
            CmCodecError::Truncated(100)
        );
        let mut b = buf;
        b[0] = 2;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::BaseVersion(2)
        );
        let mut b = buf;
        b[1] = 0x81;
        assert_eq!(CmMessage::parse(&b).unwrap_err(), CmCodecError::Class(0x81));
        let mut b = buf;
        b[2] = 1;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::ClassVersion(1)
        );
        let mut b = buf;
        b[3] = 0x81;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::Method(0x81)
        );
        let mut b = buf;
        b[17] = 0x17;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::UnknownAttribute(0x17)
        );
    }

    #[test]
    fn msg_ref_bits_roundtrip() {
        for b in 0..4u8 {
            assert_eq!(MsgRef::from_bits(b).bits(), b);
        }
        assert_eq!(MsgRef::from_bits(0b101), MsgRef::Rep);
    }
}
