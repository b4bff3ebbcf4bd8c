//! Reject, REJ (IBTA vol. 1 §12.6.7): which message is refused and why, 72 bytes of additional
//! rejection information (ARI) and 148 bytes of private data.

use super::{read_array, read_u16, read_u32, write_u16, write_u32, MsgRef};
use crate::wire::mad::MAD_DATA_LEN;
use crate::wire::{check_len, check_room, Result};

/// Private data bytes of a REJ.
pub const REJ_PRIVATE_LEN: usize = 148;
/// Additional rejection information bytes of a REJ.
pub const REJ_ARI_LEN: usize = 72;

/// REJ field offsets in the attribute data (§12.6.7).
pub mod field {
    use core::ops::Range;
    pub const LOCAL_COMM_ID: Range<usize> = 0..4;
    pub const REMOTE_COMM_ID: Range<usize> = 4..8;
    /// Message rejected[7:6], reserved[5:0].
    pub const MSG_REJECTED: usize = 8;
    /// Reject info length[7:1], reserved[0].
    pub const ARI_LENGTH: usize = 9;
    pub const REASON: Range<usize> = 10..12;
    pub const ARI: Range<usize> = 12..84;
    pub const PRIVATE_DATA: Range<usize> = 84..232;
}

const _: () = {
    use field::*;
    assert!(ARI.end - ARI.start == REJ_ARI_LEN);
    assert!(PRIVATE_DATA.end - PRIVATE_DATA.start == REJ_PRIVATE_LEN);
    assert!(PRIVATE_DATA.end == MAD_DATA_LEN);
};

/// REJ reason codes (§12.6.7.2, Table 112). Numbers as in Linux `enum ib_cm_rej_reason`
/// (`include/rdma/ib_cm.h`), which follows the IBTA table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejReason {
    NoQp,
    NoEec,
    NoResources,
    Timeout,
    Unsupported,
    InvalidCommId,
    InvalidCommInstance,
    InvalidServiceId,
    InvalidTransportType,
    StaleConn,
    RdcNotExist,
    InvalidGid,
    InvalidLid,
    InvalidSl,
    InvalidTrafficClass,
    InvalidHopLimit,
    InvalidPacketRate,
    PortCmRedirect,
    PortRedirect,
    InvalidMtu,
    InsufficientRespResources,
    ConsumerDefined,
    InvalidRnrRetry,
    DuplicateLocalCommId,
    InvalidClassVersion,
    InvalidFlowLabel,
    /// Any other value (alternate-path reasons, vendor codes, reserved).
    Other(u16),
}

impl RejReason {
    pub const fn from_code(c: u16) -> RejReason {
        use RejReason::*;
        match c {
            1 => NoQp,
            2 => NoEec,
            3 => NoResources,
            4 => Timeout,
            5 => Unsupported,
            6 => InvalidCommId,
            7 => InvalidCommInstance,
            8 => InvalidServiceId,
            9 => InvalidTransportType,
            10 => StaleConn,
            11 => RdcNotExist,
            12 => InvalidGid,
            13 => InvalidLid,
            14 => InvalidSl,
            15 => InvalidTrafficClass,
            16 => InvalidHopLimit,
            17 => InvalidPacketRate,
            24 => PortCmRedirect,
            25 => PortRedirect,
            26 => InvalidMtu,
            27 => InsufficientRespResources,
            28 => ConsumerDefined,
            29 => InvalidRnrRetry,
            30 => DuplicateLocalCommId,
            31 => InvalidClassVersion,
            32 => InvalidFlowLabel,
            x => Other(x),
        }
    }
    pub const fn code(self) -> u16 {
        use RejReason::*;
        match self {
            NoQp => 1,
            NoEec => 2,
            NoResources => 3,
            Timeout => 4,
            Unsupported => 5,
            InvalidCommId => 6,
            InvalidCommInstance => 7,
            InvalidServiceId => 8,
            InvalidTransportType => 9,
            StaleConn => 10,
            RdcNotExist => 11,
            InvalidGid => 12,
            InvalidLid => 13,
            InvalidSl => 14,
            InvalidTrafficClass => 15,
            InvalidHopLimit => 16,
            InvalidPacketRate => 17,
            PortCmRedirect => 24,
            PortRedirect => 25,
            InvalidMtu => 26,
            InsufficientRespResources => 27,
            ConsumerDefined => 28,
            InvalidRnrRetry => 29,
            DuplicateLocalCommId => 30,
            InvalidClassVersion => 31,
            InvalidFlowLabel => 32,
            Other(x) => x,
        }
    }
}

/// A view of a REJ's attribute data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("CM REJ", buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn local_comm_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }
    pub fn remote_comm_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }
    pub fn msg_rejected(&self) -> MsgRef {
        MsgRef::from_bits(self.buffer.as_ref()[field::MSG_REJECTED] >> 6)
    }
    /// 7 bits: valid bytes of the ARI.
    pub fn reject_info_length(&self) -> u8 {
        self.buffer.as_ref()[field::ARI_LENGTH] >> 1
    }
    pub fn reason(&self) -> RejReason {
        RejReason::from_code(read_u16(self.buffer.as_ref(), field::REASON))
    }
    /// All 72 ARI bytes, whatever `reject_info_length` says.
    pub fn ari(&self) -> &[u8] {
        &self.buffer.as_ref()[field::ARI]
    }
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_local_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, v);
    }
    pub fn set_remote_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, v);
    }
    /// Writes byte 8 whole (reserved bits zero).
    pub fn set_msg_rejected(&mut self, v: MsgRef) {
        self.buffer.as_mut()[field::MSG_REJECTED] = v.bits() << 6;
    }
    /// Writes byte 9 whole: the 7-bit length, reserved bit zero.
    pub fn set_reject_info_length(&mut self, v: u8) {
        self.buffer.as_mut()[field::ARI_LENGTH] = (v & 0x7f) << 1;
    }
    pub fn set_reason(&mut self, v: RejReason) {
        write_u16(self.buffer.as_mut(), field::REASON, v.code());
    }
    pub fn ari_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::ARI]
    }
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// Reject (§12.6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RejRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub msg_rejected: MsgRef,
    /// 7 bits: valid bytes of `ari`.
    pub reject_info_length: u8,
    pub reason: RejReason,
    /// Additional rejection information.
    pub ari: [u8; REJ_ARI_LEN],
    pub private_data: [u8; REJ_PRIVATE_LEN],
}

impl RejRepr {
    /// Reads every field; the reject info length is not checked against the ARI.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("CM REJ", packet.buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(RejRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            msg_rejected: packet.msg_rejected(),
            reject_info_length: packet.reject_info_length(),
            reason: packet.reason(),
            ari: read_array(packet.buffer.as_ref(), field::ARI),
            private_data: read_array(packet.buffer.as_ref(), field::PRIVATE_DATA),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        MAD_DATA_LEN
    }

    /// Writes all 232 bytes; the reject info length is truncated to 7 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), MAD_DATA_LEN)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_msg_rejected(self.msg_rejected);
        packet.set_reject_info_length(self.reject_info_length);
        packet.set_reason(self.reason);
        packet.ari_mut().copy_from_slice(&self.ari);
        packet
            .private_data_mut()
            .copy_from_slice(&self.private_data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets() {
        let mut b = [0u8; MAD_DATA_LEN];
        b[..12].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0x80, 72 << 1, 0, 28]);
        b[12] = 0x85;
        b[83] = 0x86;
        b[84] = 0x87;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.local_comm_id(), p.remote_comm_id()), (1, 2));
        assert_eq!(p.msg_rejected(), MsgRef::Other);
        assert_eq!(p.reject_info_length(), 72);
        assert_eq!(p.reason(), RejReason::ConsumerDefined);
        assert_eq!((p.ari()[0], p.ari()[71]), (0x85, 0x86));
        assert_eq!(p.private_data()[0], 0x87);
        let r = RejRepr::parse(&p).unwrap();
        let mut out = [0xffu8; MAD_DATA_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..MAD_DATA_LEN - 1]).is_err());
        assert!(RejRepr::parse(&Packet::new_unchecked(&b[..8])).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..8])).is_err());
    }

    #[test]
    fn reason_codes_roundtrip() {
        for c in 0..64u16 {
            assert_eq!(RejReason::from_code(c).code(), c);
        }
        assert_eq!(RejReason::InvalidServiceId.code(), 8);
        assert_eq!(RejReason::Timeout.code(), 4);
        assert_eq!(RejReason::StaleConn.code(), 10);
    }
}
