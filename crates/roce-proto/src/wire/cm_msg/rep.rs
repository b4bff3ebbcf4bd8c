//! Connection reply, REP (IBTA vol. 1 §12.6.8): the passive side's answer to a REQ, with
//! 196 bytes of private data.

use super::{read_array, read_u24, read_u32, read_u64, write_u24, write_u32, write_u64};
use crate::wire::mad::MAD_DATA_LEN;
use crate::wire::psn::Psn;
use crate::wire::{check_len, check_room, Result};

/// Private data bytes of a REP.
pub const REP_PRIVATE_LEN: usize = 196;

/// REP field offsets in the attribute data (§12.6.8).
pub mod field {
    use core::ops::Range;
    pub const LOCAL_COMM_ID: Range<usize> = 0..4;
    pub const REMOTE_COMM_ID: Range<usize> = 4..8;
    pub const LOCAL_QKEY: Range<usize> = 8..12;
    pub const LOCAL_QPN: Range<usize> = 12..15;
    pub const RESERVED_15: usize = 15;
    pub const LOCAL_EECN: Range<usize> = 16..19;
    pub const RESERVED_19: usize = 19;
    pub const STARTING_PSN: Range<usize> = 20..23;
    pub const RESERVED_23: usize = 23;
    pub const RESPONDER_RESOURCES: usize = 24;
    pub const INITIATOR_DEPTH: usize = 25;
    /// Target ACK delay[7:3], failover accepted[2:1], end-to-end flow control[0].
    pub const ACK_DELAY_FAILOVER_FC: usize = 26;
    /// RNR retry count[7:5], SRQ[4], reserved[3:0].
    pub const RNR_SRQ: usize = 27;
    pub const LOCAL_CA_GUID: Range<usize> = 28..36;
    pub const PRIVATE_DATA: Range<usize> = 36..232;
}

const _: () = {
    use field::*;
    assert!(PRIVATE_DATA.end - PRIVATE_DATA.start == REP_PRIVATE_LEN);
    assert!(PRIVATE_DATA.end == MAD_DATA_LEN);
};

/// A view of a REP's attribute data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("CM REP", buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }

    pub fn local_comm_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }
    pub fn remote_comm_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }
    pub fn local_qkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::LOCAL_QKEY)
    }
    pub fn local_qpn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::LOCAL_QPN)
    }
    pub fn local_eecn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::LOCAL_EECN)
    }
    pub fn starting_psn(&self) -> Psn {
        Psn::new(read_u24(self.buffer.as_ref(), field::STARTING_PSN))
    }
    pub fn responder_resources(&self) -> u8 {
        self.b(field::RESPONDER_RESOURCES)
    }
    pub fn initiator_depth(&self) -> u8 {
        self.b(field::INITIATOR_DEPTH)
    }
    /// 5 bits.
    pub fn target_ack_delay(&self) -> u8 {
        self.b(field::ACK_DELAY_FAILOVER_FC) >> 3
    }
    /// 2 bits.
    pub fn failover_accepted(&self) -> u8 {
        (self.b(field::ACK_DELAY_FAILOVER_FC) >> 1) & 3
    }
    pub fn end_to_end_flow_control(&self) -> bool {
        self.b(field::ACK_DELAY_FAILOVER_FC) & 1 != 0
    }
    /// 3 bits.
    pub fn rnr_retry_count(&self) -> u8 {
        self.b(field::RNR_SRQ) >> 5
    }
    pub fn srq(&self) -> bool {
        self.b(field::RNR_SRQ) & 0x10 != 0
    }
    pub fn local_ca_guid(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::LOCAL_CA_GUID)
    }
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes the reserved bytes after the QPN, the EECN and the PSN.
    pub fn clear_reserved(&mut self) {
        let b = self.buffer.as_mut();
        b[field::RESERVED_15] = 0;
        b[field::RESERVED_19] = 0;
        b[field::RESERVED_23] = 0;
    }
    pub fn set_local_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, v);
    }
    pub fn set_remote_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, v);
    }
    pub fn set_local_qkey(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::LOCAL_QKEY, v);
    }
    pub fn set_local_qpn(&mut self, v: u32) {
        write_u24(self.buffer.as_mut(), field::LOCAL_QPN, v);
    }
    pub fn set_local_eecn(&mut self, v: u32) {
        write_u24(self.buffer.as_mut(), field::LOCAL_EECN, v);
    }
    pub fn set_starting_psn(&mut self, v: Psn) {
        write_u24(self.buffer.as_mut(), field::STARTING_PSN, v.value());
    }
    pub fn set_responder_resources(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESPONDER_RESOURCES] = v;
    }
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.buffer.as_mut()[field::INITIATOR_DEPTH] = v;
    }
    /// Writes byte 26 whole: target ACK delay (5 bits), failover accepted (2 bits),
    /// end-to-end flow control.
    pub fn set_ack_delay_failover_fc(
        &mut self,
        target_ack_delay: u8,
        failover_accepted: u8,
        end_to_end_flow_control: bool,
    ) {
        self.buffer.as_mut()[field::ACK_DELAY_FAILOVER_FC] = ((target_ack_delay & 0x1f) << 3)
            | ((failover_accepted & 3) << 1)
            | u8::from(end_to_end_flow_control);
    }
    /// Writes byte 27 whole: RNR retry count (3 bits), SRQ, reserved bits zero.
    pub fn set_rnr_srq(&mut self, rnr_retry_count: u8, srq: bool) {
        self.buffer.as_mut()[field::RNR_SRQ] = ((rnr_retry_count & 7) << 5) | (u8::from(srq) << 4);
    }
    pub fn set_local_ca_guid(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), field::LOCAL_CA_GUID, v);
    }
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// Connection reply (§12.6.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub local_qkey: u32,
    /// 24 bits.
    pub local_qpn: u32,
    /// 24 bits.
    pub local_eecn: u32,
    /// The PSN carried in the REP: the passive side's receive PSN (the active side's first send
    /// PSN), as Linux `ib_cm` and the capture use it.
    pub starting_psn: Psn,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// 5 bits.
    pub target_ack_delay: u8,
    /// 2 bits.
    pub failover_accepted: u8,
    pub end_to_end_flow_control: bool,
    /// 3 bits: RNR retries the active side should use.
    pub rnr_retry_count: u8,
    pub srq: bool,
    pub local_ca_guid: u64,
    pub private_data: [u8; REP_PRIVATE_LEN],
}

impl RepRepr {
    /// Reads every field; no value is judged here.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("CM REP", packet.buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(RepRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            local_qkey: packet.local_qkey(),
            local_qpn: packet.local_qpn(),
            local_eecn: packet.local_eecn(),
            starting_psn: packet.starting_psn(),
            responder_resources: packet.responder_resources(),
            initiator_depth: packet.initiator_depth(),
            target_ack_delay: packet.target_ack_delay(),
            failover_accepted: packet.failover_accepted(),
            end_to_end_flow_control: packet.end_to_end_flow_control(),
            rnr_retry_count: packet.rnr_retry_count(),
            srq: packet.srq(),
            local_ca_guid: packet.local_ca_guid(),
            private_data: read_array(packet.buffer.as_ref(), field::PRIVATE_DATA),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        MAD_DATA_LEN
    }

    /// Writes all 232 bytes; fields wider than their bits are truncated.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), MAD_DATA_LEN)?;
        packet.clear_reserved();
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_local_qkey(self.local_qkey);
        packet.set_local_qpn(self.local_qpn);
        packet.set_local_eecn(self.local_eecn);
        packet.set_starting_psn(self.starting_psn);
        packet.set_responder_resources(self.responder_resources);
        packet.set_initiator_depth(self.initiator_depth);
        packet.set_ack_delay_failover_fc(
            self.target_ack_delay,
            self.failover_accepted,
            self.end_to_end_flow_control,
        );
        packet.set_rnr_srq(self.rnr_retry_count, self.srq);
        packet.set_local_ca_guid(self.local_ca_guid);
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
        b[..12].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3]);
        b[12..24].copy_from_slice(&[0, 0, 0x30, 0, 0, 0, 0x40, 0, 0x12, 0x34, 0x56, 0]);
        b[24..28].copy_from_slice(&[4, 5, (18 << 3) | (2 << 1) | 1, (7 << 5) | 0x10]);
        b[35] = 6;
        b[36] = 0x86;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.local_comm_id(), p.remote_comm_id()), (1, 2));
        assert_eq!(p.local_qkey(), 3);
        assert_eq!((p.local_qpn(), p.local_eecn()), (0x30, 0x40));
        assert_eq!(p.starting_psn(), Psn::new(0x12_3456));
        assert_eq!((p.responder_resources(), p.initiator_depth()), (4, 5));
        assert_eq!(p.target_ack_delay(), 18);
        assert_eq!(p.failover_accepted(), 2);
        assert!(p.end_to_end_flow_control());
        assert_eq!((p.rnr_retry_count(), p.srq()), (7, true));
        assert_eq!(p.local_ca_guid(), 6);
        assert_eq!(p.private_data()[0], 0x86);
        let r = RepRepr::parse(&p).unwrap();
        let mut out = [0xffu8; MAD_DATA_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..MAD_DATA_LEN - 1]).is_err());
        assert!(RepRepr::parse(&Packet::new_unchecked(&b[..8])).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..8])).is_err());
    }
}
