//! Path description inside a REQ (IBTA vol. 1 §12.6.5): 44 bytes, the primary path at
//! attribute-data offset 52 and the alternate path at 96 (`super::req::field`).

use super::{read_array, read_u16, read_u32, write_u16, write_u32};
use crate::wire::{check_len, check_room, Result};

/// Length of a path description.
pub const PATH_LEN: usize = 44;

/// Byte offsets inside a path description (§12.6.5).
pub mod field {
    use core::ops::Range;
    pub const LOCAL_LID: Range<usize> = 0..2;
    pub const REMOTE_LID: Range<usize> = 2..4;
    pub const LOCAL_GID: Range<usize> = 4..20;
    pub const REMOTE_GID: Range<usize> = 20..36;
    /// Flow label[31:12], reserved[11:6], packet rate[5:0].
    pub const FLOW_LABEL_RATE: Range<usize> = 36..40;
    pub const TRAFFIC_CLASS: usize = 40;
    pub const HOP_LIMIT: usize = 41;
    /// SL[7:4], subnet local[3], reserved[2:0].
    pub const SL_SUBNET_LOCAL: usize = 42;
    /// Local ACK timeout[7:3], reserved[2:0].
    pub const ACK_TIMEOUT: usize = 43;
}

const _: () = assert!(field::ACK_TIMEOUT + 1 == PATH_LEN);

/// A view of a path description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("CM path description", buffer.as_ref(), PATH_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    fn b(&self, i: usize) -> u8 {
        self.buffer.as_ref()[i]
    }

    pub fn local_lid(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LOCAL_LID)
    }
    pub fn remote_lid(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::REMOTE_LID)
    }
    pub fn local_gid(&self) -> [u8; 16] {
        read_array(self.buffer.as_ref(), field::LOCAL_GID)
    }
    pub fn remote_gid(&self) -> [u8; 16] {
        read_array(self.buffer.as_ref(), field::REMOTE_GID)
    }
    /// 20 bits.
    pub fn flow_label(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::FLOW_LABEL_RATE) >> 12
    }
    /// 6 bits.
    pub fn packet_rate(&self) -> u8 {
        (read_u32(self.buffer.as_ref(), field::FLOW_LABEL_RATE) & 0x3f) as u8
    }
    pub fn traffic_class(&self) -> u8 {
        self.b(field::TRAFFIC_CLASS)
    }
    pub fn hop_limit(&self) -> u8 {
        self.b(field::HOP_LIMIT)
    }
    /// 4 bits.
    pub fn sl(&self) -> u8 {
        self.b(field::SL_SUBNET_LOCAL) >> 4
    }
    pub fn subnet_local(&self) -> bool {
        self.b(field::SL_SUBNET_LOCAL) & 0x08 != 0
    }
    /// 5 bits.
    pub fn local_ack_timeout(&self) -> u8 {
        self.b(field::ACK_TIMEOUT) >> 3
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_local_lid(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::LOCAL_LID, v);
    }
    pub fn set_remote_lid(&mut self, v: u16) {
        write_u16(self.buffer.as_mut(), field::REMOTE_LID, v);
    }
    pub fn set_local_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::LOCAL_GID].copy_from_slice(v);
    }
    pub fn set_remote_gid(&mut self, v: &[u8; 16]) {
        self.buffer.as_mut()[field::REMOTE_GID].copy_from_slice(v);
    }
    /// Writes bytes 36..40 whole: flow label (20 bits), packet rate (6 bits), reserved bits
    /// zero.
    pub fn set_flow_label_rate(&mut self, flow_label: u32, packet_rate: u8) {
        let v = ((flow_label & 0xf_ffff) << 12) | u32::from(packet_rate & 0x3f);
        write_u32(self.buffer.as_mut(), field::FLOW_LABEL_RATE, v);
    }
    pub fn set_traffic_class(&mut self, v: u8) {
        self.buffer.as_mut()[field::TRAFFIC_CLASS] = v;
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    /// Writes byte 42 whole: SL (4 bits), subnet local, reserved bits zero.
    pub fn set_sl_subnet_local(&mut self, sl: u8, subnet_local: bool) {
        self.buffer.as_mut()[field::SL_SUBNET_LOCAL] =
            ((sl & 0xf) << 4) | (u8::from(subnet_local) << 3);
    }
    /// Writes byte 43 whole: local ACK timeout (5 bits), reserved bits zero.
    pub fn set_local_ack_timeout(&mut self, v: u8) {
        self.buffer.as_mut()[field::ACK_TIMEOUT] = (v & 0x1f) << 3;
    }
}

/// One path description of a REQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PathInfo {
    pub local_lid: u16,
    pub remote_lid: u16,
    /// Local port GID; on RoCEv2 with IPv4 the IPv4-mapped address `::ffff:a.b.c.d`.
    pub local_gid: [u8; 16],
    pub remote_gid: [u8; 16],
    /// 20 bits.
    pub flow_label: u32,
    /// 6 bits.
    pub packet_rate: u8,
    pub traffic_class: u8,
    pub hop_limit: u8,
    /// 4 bits.
    pub sl: u8,
    pub subnet_local: bool,
    /// 5 bits: 4.096 us * 2^t.
    pub local_ack_timeout: u8,
}

impl PathInfo {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("CM path description", packet.buffer.as_ref(), PATH_LEN)?;
        Ok(PathInfo {
            local_lid: packet.local_lid(),
            remote_lid: packet.remote_lid(),
            local_gid: packet.local_gid(),
            remote_gid: packet.remote_gid(),
            flow_label: packet.flow_label(),
            packet_rate: packet.packet_rate(),
            traffic_class: packet.traffic_class(),
            hop_limit: packet.hop_limit(),
            sl: packet.sl(),
            subnet_local: packet.subnet_local(),
            local_ack_timeout: packet.local_ack_timeout(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        PATH_LEN
    }

    /// Writes all 44 bytes; fields wider than their bits are truncated.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), PATH_LEN)?;
        packet.set_local_lid(self.local_lid);
        packet.set_remote_lid(self.remote_lid);
        packet.set_local_gid(&self.local_gid);
        packet.set_remote_gid(&self.remote_gid);
        packet.set_flow_label_rate(self.flow_label, self.packet_rate);
        packet.set_traffic_class(self.traffic_class);
        packet.set_hop_limit(self.hop_limit);
        packet.set_sl_subnet_local(self.sl, self.subnet_local);
        packet.set_local_ack_timeout(self.local_ack_timeout);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets() {
        let r = PathInfo {
            local_lid: 0x0102,
            remote_lid: 0x0304,
            local_gid: [0x11; 16],
            remote_gid: [0x22; 16],
            flow_label: 0xa_bcde,
            packet_rate: 0x3f,
            traffic_class: 0x33,
            hop_limit: 0x44,
            sl: 0x9,
            subnet_local: true,
            local_ack_timeout: 0x13,
        };
        let mut b = [0xffu8; PATH_LEN];
        r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(&b[..4], &[0x01, 0x02, 0x03, 0x04]);
        assert_eq!((b[4], b[19], b[20], b[35]), (0x11, 0x11, 0x22, 0x22));
        assert_eq!(&b[36..40], &[0xab, 0xcd, 0xe0, 0x3f]);
        assert_eq!(&b[40..], &[0x33, 0x44, 0x98, 0x98]);
        assert_eq!(
            PathInfo::parse(&Packet::new_checked(&b[..]).unwrap()),
            Ok(r)
        );
        assert!(Packet::new_checked(&b[..PATH_LEN - 1]).is_err());
        assert!(PathInfo::parse(&Packet::new_unchecked(&b[..PATH_LEN - 1])).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut b[..10])).is_err());
    }
}
