//! Connection request, REQ (IBTA vol. 1 §12.6.5): the active side's offer, with a primary and
//! an alternate path description (`super::path`) and 92 bytes of private data.

use super::path::{self, PathInfo};
use super::{read_array, read_u16, read_u24, read_u32, read_u64};
use super::{write_u16, write_u24, write_u32, write_u64};
use crate::wire::mad::MAD_DATA_LEN;
use crate::wire::psn::Psn;
use crate::wire::{check_len, check_room, Result};

/// Private data bytes of a REQ.
pub const REQ_PRIVATE_LEN: usize = 92;

/// REQ field offsets in the attribute data (§12.6.5).
pub mod field {
    use core::ops::Range;
    pub const LOCAL_COMM_ID: Range<usize> = 0..4;
    pub const RESERVED_4: Range<usize> = 4..8;
    pub const SERVICE_ID: Range<usize> = 8..16;
    pub const LOCAL_CA_GUID: Range<usize> = 16..24;
    pub const RESERVED_24: Range<usize> = 24..28;
    pub const LOCAL_QKEY: Range<usize> = 28..32;
    pub const LOCAL_QPN: Range<usize> = 32..35;
    pub const RESPONDER_RESOURCES: usize = 35;
    pub const LOCAL_EECN: Range<usize> = 36..39;
    pub const INITIATOR_DEPTH: usize = 39;
    pub const REMOTE_EECN: Range<usize> = 40..43;
    /// Remote CM response timeout[7:3], transport service type[2:1], end-to-end flow
    /// control[0].
    pub const TIMEOUT_TYPE_FC: usize = 43;
    pub const STARTING_PSN: Range<usize> = 44..47;
    /// Local CM response timeout[7:3], retry count[2:0].
    pub const LOCAL_TIMEOUT_RETRY: usize = 47;
    pub const PKEY: Range<usize> = 48..50;
    /// Path MTU[7:4], RDC exists[3], RNR retry count[2:0].
    pub const MTU_RDC_RNR: usize = 50;
    /// Max CM retries[7:4], SRQ[3], extended transport type[2:0].
    pub const CM_RETRIES_SRQ: usize = 51;
    pub const PRIMARY_PATH: Range<usize> = 52..96;
    pub const ALTERNATE_PATH: Range<usize> = 96..140;
    pub const PRIVATE_DATA: Range<usize> = 140..232;
}

const _: () = {
    use field::*;
    assert!(PRIMARY_PATH.end - PRIMARY_PATH.start == path::PATH_LEN);
    assert!(ALTERNATE_PATH.end - ALTERNATE_PATH.start == path::PATH_LEN);
    assert!(PRIVATE_DATA.end - PRIVATE_DATA.start == REQ_PRIVATE_LEN);
    assert!(PRIVATE_DATA.end == MAD_DATA_LEN);
};

/// A view of a REQ's attribute data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("CM REQ", buffer.as_ref(), MAD_DATA_LEN)?;
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
    pub fn service_id(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::SERVICE_ID)
    }
    pub fn local_ca_guid(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::LOCAL_CA_GUID)
    }
    pub fn local_qkey(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::LOCAL_QKEY)
    }
    pub fn local_qpn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::LOCAL_QPN)
    }
    pub fn responder_resources(&self) -> u8 {
        self.b(field::RESPONDER_RESOURCES)
    }
    pub fn local_eecn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::LOCAL_EECN)
    }
    pub fn initiator_depth(&self) -> u8 {
        self.b(field::INITIATOR_DEPTH)
    }
    pub fn remote_eecn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::REMOTE_EECN)
    }
    /// 5 bits.
    pub fn remote_cm_response_timeout(&self) -> u8 {
        self.b(field::TIMEOUT_TYPE_FC) >> 3
    }
    /// 2 bits.
    pub fn transport_type(&self) -> u8 {
        (self.b(field::TIMEOUT_TYPE_FC) >> 1) & 3
    }
    pub fn end_to_end_flow_control(&self) -> bool {
        self.b(field::TIMEOUT_TYPE_FC) & 1 != 0
    }
    pub fn starting_psn(&self) -> Psn {
        Psn::new(read_u24(self.buffer.as_ref(), field::STARTING_PSN))
    }
    /// 5 bits.
    pub fn local_cm_response_timeout(&self) -> u8 {
        self.b(field::LOCAL_TIMEOUT_RETRY) >> 3
    }
    /// 3 bits.
    pub fn retry_count(&self) -> u8 {
        self.b(field::LOCAL_TIMEOUT_RETRY) & 7
    }
    pub fn pkey(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PKEY)
    }
    /// 4 bits.
    pub fn path_mtu(&self) -> u8 {
        self.b(field::MTU_RDC_RNR) >> 4
    }
    pub fn rdc_exists(&self) -> bool {
        self.b(field::MTU_RDC_RNR) & 0x08 != 0
    }
    /// 3 bits.
    pub fn rnr_retry_count(&self) -> u8 {
        self.b(field::MTU_RDC_RNR) & 7
    }
    /// 4 bits.
    pub fn max_cm_retries(&self) -> u8 {
        self.b(field::CM_RETRIES_SRQ) >> 4
    }
    pub fn srq(&self) -> bool {
        self.b(field::CM_RETRIES_SRQ) & 0x08 != 0
    }
    /// 3 bits.
    pub fn extended_transport_type(&self) -> u8 {
        self.b(field::CM_RETRIES_SRQ) & 7
    }
    pub fn primary_path(&self) -> path::Packet<&[u8]> {
        path::Packet::new_unchecked(&self.buffer.as_ref()[field::PRIMARY_PATH])
    }
    pub fn alternate_path(&self) -> path::Packet<&[u8]> {
        path::Packet::new_unchecked(&self.buffer.as_ref()[field::ALTERNATE_PATH])
    }
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes the two reserved words.
    pub fn clear_reserved(&mut self) {
        let b = self.buffer.as_mut();
        b[field::RESERVED_4].fill(0);
        b[field::RESERVED_24].fill(0);
    }
    pub fn set_local_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, v);
    }
    pub fn set_service_id(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), field::SERVICE_ID, v);
    }
    pub fn set_local_ca_guid(&mut self, v: u64) {
        write_u64(self.buffer.as_mut(), field::LOCAL_CA_GUID, v);
    }
    pub fn set_local_qkey(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::LOCAL_QKEY, v);
    }
    pub fn set_local_qpn(&mut self, v: u32) {
        write_u24(self.buffer.as_mut(), field::LOCAL_QPN, v);
    }
    pub fn set_responder_resources(&mut self, v: u8) {
        self.buffer.as_mut()[field::RESPONDER_RESOURCES] = v;
    }
    pub fn set_local_eecn(&mut self, v: u32) {
        write_u24(self.buffer.as_mut(), field::LOCAL_EECN, v);
    }
    pub fn set_initiator_depth(&mut self, v: u8) {
        self.buffer.as_mut()[field::INITIATOR_DEPTH] = v;
    }
    pub fn set_remote_eecn(&mut self, v: u32) {
        write_u24(self.buffer.as_mut(), field::REMOTE_EECN, v);
    }
    /// Writes byte 43 whole: remote CM response timeout (5 bits), transport type (2 bits),
    /// end-to-end flow control.
    pub fn set_timeout_type_fc(
        &mut self,
        remote_cm_response_timeout: u8,
        transport_type: u8,
        end_to_end_flow_control: bool,
    ) {
        self.buffer.as_mut()[field::TIMEOUT_TYPE_FC] = ((remote_cm_response_timeout & 0x1f) << 3)
            | ((transport_type & 3) << 1)
            | u8::from(end_to_end_flow_control);
    }
    pub fn set_starting_psn(&mut self, v: Psn) {
        write_u24(self.buffer.as_mut(), field::STARTING_PSN, v.value());
    }
    /// Writes byte 47 whole: local CM response timeout (5 bits), retry count (3 bits).
    pub fn set_local_timeout_retry(&mut self, local_cm_response_timeout: u8, retry_count: u8) {
        self.buffer.as_mut()[field::LOCAL_TIMEOUT_RETRY] =
            ((local_cm_response_timeout & 0x1f) << 3) | (retry_count & 7);
    }
    pub fn set_pkey(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::PKEY, v);
    }
    /// Writes byte 50 whole: path MTU (4 bits), RDC exists, RNR retry count (3 bits).
    pub fn set_mtu_rdc_rnr(&mut self, path_mtu: u8, rdc_exists: bool, rnr_retry_count: u8) {
        self.buffer.as_mut()[field::MTU_RDC_RNR] =
            ((path_mtu & 0xf) << 4) | (u8::from(rdc_exists) << 3) | (rnr_retry_count & 7);
    }
    /// Writes byte 51 whole: max CM retries (4 bits), SRQ, extended transport type (3 bits).
    pub fn set_cm_retries_srq(&mut self, max_cm_retries: u8, srq: bool, extended_type: u8) {
        self.buffer.as_mut()[field::CM_RETRIES_SRQ] =
            ((max_cm_retries & 0xf) << 4) | (u8::from(srq) << 3) | (extended_type & 7);
    }
    pub fn primary_path_mut(&mut self) -> path::Packet<&mut [u8]> {
        path::Packet::new_unchecked(&mut self.buffer.as_mut()[field::PRIMARY_PATH])
    }
    pub fn alternate_path_mut(&mut self) -> path::Packet<&mut [u8]> {
        path::Packet::new_unchecked(&mut self.buffer.as_mut()[field::ALTERNATE_PATH])
    }
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// Connection request (§12.6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqRepr {
    pub local_comm_id: u32,
    pub service_id: u64,
    pub local_ca_guid: u64,
    pub local_qkey: u32,
    /// 24 bits.
    pub local_qpn: u32,
    pub responder_resources: u8,
    /// 24 bits.
    pub local_eecn: u32,
    pub initiator_depth: u8,
    /// 24 bits.
    pub remote_eecn: u32,
    /// 5 bits: how long the passive side may take to answer (4.096 us * 2^t).
    pub remote_cm_response_timeout: u8,
    /// 2 bits: 0 = RC, 1 = UC, 2 = RD.
    pub transport_type: u8,
    pub end_to_end_flow_control: bool,
    /// The PSN carried in the REQ. Linux `ib_cm` (and the capture) use it as the *active* side's
    /// receive PSN, i.e. the PSN the passive side sends first; see `crate::cm`.
    pub starting_psn: Psn,
    /// 5 bits: how long the active side may take to answer.
    pub local_cm_response_timeout: u8,
    /// 3 bits.
    pub retry_count: u8,
    pub pkey: u16,
    /// 4 bits, IB MTU code (1 = 256 .. 5 = 4096).
    pub path_mtu: u8,
    pub rdc_exists: bool,
    /// 3 bits.
    pub rnr_retry_count: u8,
    /// 4 bits.
    pub max_cm_retries: u8,
    pub srq: bool,
    /// 3 bits.
    pub extended_transport_type: u8,
    pub primary_path: PathInfo,
    pub alternate_path: PathInfo,
    pub private_data: [u8; REQ_PRIVATE_LEN],
}

impl ReqRepr {
    /// Reads every field; no value is judged here.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("CM REQ", packet.buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(ReqRepr {
            local_comm_id: packet.local_comm_id(),
            service_id: packet.service_id(),
            local_ca_guid: packet.local_ca_guid(),
            local_qkey: packet.local_qkey(),
            local_qpn: packet.local_qpn(),
            responder_resources: packet.responder_resources(),
            local_eecn: packet.local_eecn(),
            initiator_depth: packet.initiator_depth(),
            remote_eecn: packet.remote_eecn(),
            remote_cm_response_timeout: packet.remote_cm_response_timeout(),
            transport_type: packet.transport_type(),
            end_to_end_flow_control: packet.end_to_end_flow_control(),
            starting_psn: packet.starting_psn(),
            local_cm_response_timeout: packet.local_cm_response_timeout(),
            retry_count: packet.retry_count(),
            pkey: packet.pkey(),
            path_mtu: packet.path_mtu(),
            rdc_exists: packet.rdc_exists(),
            rnr_retry_count: packet.rnr_retry_count(),
            max_cm_retries: packet.max_cm_retries(),
            srq: packet.srq(),
            extended_transport_type: packet.extended_transport_type(),
            primary_path: PathInfo::parse(&packet.primary_path())?,
            alternate_path: PathInfo::parse(&packet.alternate_path())?,
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
        packet.set_service_id(self.service_id);
        packet.set_local_ca_guid(self.local_ca_guid);
        packet.set_local_qkey(self.local_qkey);
        packet.set_local_qpn(self.local_qpn);
        packet.set_responder_resources(self.responder_resources);
        packet.set_local_eecn(self.local_eecn);
        packet.set_initiator_depth(self.initiator_depth);
        packet.set_remote_eecn(self.remote_eecn);
        packet.set_timeout_type_fc(
            self.remote_cm_response_timeout,
            self.transport_type,
            self.end_to_end_flow_control,
        );
        packet.set_starting_psn(self.starting_psn);
        packet.set_local_timeout_retry(self.local_cm_response_timeout, self.retry_count);
        packet.set_pkey(self.pkey);
        packet.set_mtu_rdc_rnr(self.path_mtu, self.rdc_exists, self.rnr_retry_count);
        packet.set_cm_retries_srq(self.max_cm_retries, self.srq, self.extended_transport_type);
        self.primary_path.emit(&mut packet.primary_path_mut())?;
        self.alternate_path.emit(&mut packet.alternate_path_mut())?;
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
        b[..4].copy_from_slice(&[1, 2, 3, 4]);
        b[8] = 0x81;
        b[16] = 0x82;
        b[28..32].copy_from_slice(&[0, 0, 0, 0x83]);
        b[32..36].copy_from_slice(&[0, 0, 0x17, 1]);
        b[36..40].copy_from_slice(&[0, 0, 0x18, 2]);
        b[40..44].copy_from_slice(&[0, 0, 0x19, (16 << 3) | (1 << 1) | 1]);
        b[44..48].copy_from_slice(&[0x12, 0x34, 0x56, (21 << 3) | 7]);
        b[48..52].copy_from_slice(&[0xff, 0xff, (3 << 4) | 0x08 | 6, (15 << 4) | 0x08 | 5]);
        b[52] = 0x84;
        b[96] = 0x85;
        b[140] = 0x86;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.local_comm_id(), 0x0102_0304);
        assert_eq!(p.service_id() >> 56, 0x81);
        assert_eq!(p.local_ca_guid() >> 56, 0x82);
        assert_eq!(p.local_qkey(), 0x83);
        assert_eq!((p.local_qpn(), p.responder_resources()), (0x17, 1));
        assert_eq!((p.local_eecn(), p.initiator_depth()), (0x18, 2));
        assert_eq!(p.remote_eecn(), 0x19);
        assert_eq!(p.remote_cm_response_timeout(), 16);
        assert_eq!(p.transport_type(), 1);
        assert!(p.end_to_end_flow_control());
        assert_eq!(p.starting_psn(), Psn::new(0x12_3456));
        assert_eq!((p.local_cm_response_timeout(), p.retry_count()), (21, 7));
        assert_eq!(p.pkey(), 0xffff);
        assert_eq!(
            (p.path_mtu(), p.rdc_exists(), p.rnr_retry_count()),
            (3, true, 6)
        );
        assert_eq!(
            (p.max_cm_retries(), p.srq(), p.extended_transport_type()),
            (15, true, 5)
        );
        assert_eq!(p.primary_path().local_lid() >> 8, 0x84);
        assert_eq!(p.alternate_path().local_lid() >> 8, 0x85);
        assert_eq!(p.private_data()[0], 0x86);
        let r = ReqRepr::parse(&p).unwrap();
        let mut out = [0xffu8; MAD_DATA_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn short_buffers_are_errors() {
        let b = [0u8; MAD_DATA_LEN];
        let r = ReqRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert!(Packet::new_checked(&b[..MAD_DATA_LEN - 1]).is_err());
        assert!(ReqRepr::parse(&Packet::new_unchecked(&b[..MAD_DATA_LEN - 1])).is_err());
        let mut out = [0u8; MAD_DATA_LEN - 1];
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..])).is_err());
    }
}
