//! ARP for IPv4 over Ethernet (RFC 826): hardware type 1, protocol type 0x0800, lengths 6 and 4.

use super::ethernet::{EtherType, EthernetAddress};
use super::{check_len, check_room, get_u16, set_u16, Result, WireError};
use std::net::Ipv4Addr;

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;

/// Hardware type Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;

/// Offsets of the fields (Ethernet/IPv4 layout).
pub mod field {
    use core::ops::Range;
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// ARP operation code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    Request,
    Reply,
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(v: u16) -> Self {
        match v {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            v => ArpOperation::Unknown(v),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(op: ArpOperation) -> u16 {
        match op {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(v) => v,
        }
    }
}

/// A view of an ARP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn ip(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

fn mac(b: &[u8]) -> EthernetAddress {
    EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]])
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Fails unless the buffer holds the fixed part (8 bytes) and the addresses its length
    /// fields announce.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let d = buffer.as_ref();
        check_len("ARP header", d, 8)?;
        let need = 8 + 2 * (usize::from(d[field::HLEN]) + usize::from(d[field::PLEN]));
        check_len("ARP addresses", d, need)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn hardware_type(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::HTYPE)
    }
    pub fn protocol_type(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::PTYPE))
    }
    pub fn hardware_len(&self) -> u8 {
        self.buffer.as_ref()[field::HLEN]
    }
    pub fn protocol_len(&self) -> u8 {
        self.buffer.as_ref()[field::PLEN]
    }
    pub fn operation(&self) -> ArpOperation {
        get_u16(self.buffer.as_ref(), field::OPER).into()
    }
    /// Sender hardware address (Ethernet/IPv4 layout only).
    pub fn source_hardware_addr(&self) -> EthernetAddress {
        mac(&self.buffer.as_ref()[field::SHA])
    }
    pub fn source_protocol_addr(&self) -> Ipv4Addr {
        ip(&self.buffer.as_ref()[field::SPA])
    }
    pub fn target_hardware_addr(&self) -> EthernetAddress {
        mac(&self.buffer.as_ref()[field::THA])
    }
    pub fn target_protocol_addr(&self) -> Ipv4Addr {
        ip(&self.buffer.as_ref()[field::TPA])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_hardware_type(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::HTYPE, v);
    }
    pub fn set_protocol_type(&mut self, v: EtherType) {
        set_u16(self.buffer.as_mut(), field::PTYPE, v.0);
    }
    pub fn set_hardware_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::HLEN] = v;
    }
    pub fn set_protocol_len(&mut self, v: u8) {
        self.buffer.as_mut()[field::PLEN] = v;
    }
    pub fn set_operation(&mut self, op: ArpOperation) {
        set_u16(self.buffer.as_mut(), field::OPER, op.into());
    }
    pub fn set_source_hardware_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&a.0);
    }
    pub fn set_source_protocol_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&a.octets());
    }
    pub fn set_target_hardware_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&a.0);
    }
    pub fn set_target_protocol_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&a.octets());
    }
}

/// An Ethernet/IPv4 ARP request or reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpRepr {
    pub operation: ArpOperation,
    pub source_hardware_addr: EthernetAddress,
    pub source_protocol_addr: Ipv4Addr,
    pub target_hardware_addr: EthernetAddress,
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Parses an Ethernet/IPv4 ARP packet; other hardware or protocol types are `BadValue`.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("ARP packet", packet.buffer.as_ref(), PACKET_LEN)?;
        if packet.hardware_type() != HTYPE_ETHERNET
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(WireError::BadValue("ARP hardware/protocol type"));
        }
        Ok(ArpRepr {
            operation: packet.operation(),
            source_hardware_addr: packet.source_hardware_addr(),
            source_protocol_addr: packet.source_protocol_addr(),
            target_hardware_addr: packet.target_hardware_addr(),
            target_protocol_addr: packet.target_protocol_addr(),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        PACKET_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), PACKET_LEN)?;
        packet.set_hardware_type(HTYPE_ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(self.source_hardware_addr);
        packet.set_source_protocol_addr(self.source_protocol_addr);
        packet.set_target_hardware_addr(self.target_hardware_addr);
        packet.set_target_protocol_addr(self.target_protocol_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // rxe-rdmacm-write-read.pcap frame 12: "Who has 192.168.2.25? Tell 192.168.2.24".
    const REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12, 192,
        168, 2, 24, 0, 0, 0, 0, 0, 0, 192, 168, 2, 25,
    ];

    #[test]
    fn request_round_trip() {
        let repr = ArpRepr::parse(&Packet::new_checked(&REQUEST[..]).unwrap()).unwrap();
        assert_eq!(repr.operation, ArpOperation::Request);
        assert_eq!(repr.source_protocol_addr, Ipv4Addr::new(192, 168, 2, 24));
        assert_eq!(repr.target_protocol_addr, Ipv4Addr::new(192, 168, 2, 25));
        assert_eq!(repr.source_hardware_addr.to_string(), "52:54:00:8b:2d:12");
        let mut out = [0xaau8; 28];
        repr.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, REQUEST);
    }

    #[test]
    fn rejects_short_and_foreign() {
        for n in 0..PACKET_LEN {
            let r = Packet::new_checked(&REQUEST[..n]).and_then(|p| ArpRepr::parse(&p));
            assert!(r.is_err(), "{n}");
        }
        let mut other = REQUEST;
        other[1] = 6; // IEEE 802 hardware type
        let p = Packet::new_checked(&other[..]).unwrap();
        assert_eq!(
            ArpRepr::parse(&p),
            Err(WireError::BadValue("ARP hardware/protocol type"))
        );
    }
}
