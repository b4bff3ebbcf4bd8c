//! Ethernet II header (IEEE 802.3 clause 3.2.6 type interpretation): destination 6, source 6,
//! EtherType 2. No FCS (NICs strip it); an 802.1Q tag is the port's business (`net::vlan`).

use super::{check_len, check_room, get_u16, set_u16, Result};
use core::fmt;

/// Ethernet II header length.
pub const HEADER_LEN: usize = 14;

/// Offsets of the header fields.
pub mod field {
    use core::ops::Range;
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: usize = 14;
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// ff:ff:ff:ff:ff:ff
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    /// The address from the first 6 bytes of `data`, or `None` if it is shorter.
    pub fn from_bytes(data: &[u8]) -> Option<Self> {
        let b: [u8; 6] = data.get(..6)?.try_into().ok()?;
        Some(EthernetAddress(b))
    }

    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Group bit (I/G) set.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Neither multicast nor all zeros.
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast() && self.0 != [0; 6]
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EthernetAddress({self})")
    }
}

/// An EtherType value; any 16-bit value round-trips.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    pub const IPV4: EtherType = EtherType(0x0800);
    pub const ARP: EtherType = EtherType(0x0806);
    pub const IPV6: EtherType = EtherType(0x86dd);
    /// An IEEE 802.1Q tag follows (TPID); the port adds and removes it (`net::Vlan`).
    pub const VLAN: EtherType = EtherType(0x8100);
    /// An IEEE 802.1ad service tag (stacked VLANs): never ours.
    pub const QINQ: EtherType = EtherType(0x88a8);
}

impl fmt::Debug for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::IPV4 => f.write_str("IPv4"),
            Self::ARP => f.write_str("ARP"),
            Self::IPV6 => f.write_str("IPv6"),
            Self::VLAN => f.write_str("802.1Q"),
            EtherType(v) => write!(f, "EtherType({v:#06x})"),
        }
    }
}

/// A view of an Ethernet II frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps a buffer, failing if it is shorter than the header.
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("Ethernet header", buffer.as_ref(), HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn dst_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        EthernetAddress(a)
    }

    #[inline]
    pub fn src_addr(&self) -> EthernetAddress {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        EthernetAddress(a)
    }

    #[inline]
    pub fn ethertype(&self) -> EtherType {
        EtherType(get_u16(self.buffer.as_ref(), field::ETHERTYPE))
    }

    /// Everything after the header (may include Ethernet padding).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_dst_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&a.0);
    }

    pub fn set_src_addr(&mut self, a: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&a.0);
    }

    pub fn set_ethertype(&mut self, t: EtherType) {
        set_u16(self.buffer.as_mut(), field::ETHERTYPE, t.0);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD..]
    }
}

/// High-level representation of an Ethernet II header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EthernetRepr {
    pub src_addr: EthernetAddress,
    pub dst_addr: EthernetAddress,
    pub ethertype: EtherType,
}

impl EthernetRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("Ethernet header", packet.buffer.as_ref(), HEADER_LEN)?;
        Ok(EthernetRepr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            ethertype: packet.ethertype(),
        })
    }

    /// Reads the three fields of exactly the 14 header bytes.
    #[inline(always)]
    pub(crate) fn from_bytes(h: &[u8; HEADER_LEN]) -> Self {
        let (dst, rest) = h.split_at(6);
        let (src, t) = rest.split_at(6);
        EthernetRepr {
            src_addr: EthernetAddress(src.try_into().unwrap_or_default()),
            dst_addr: EthernetAddress(dst.try_into().unwrap_or_default()),
            ethertype: EtherType(u16::from_be_bytes(t.try_into().unwrap_or_default())),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; fails if the buffer is shorter than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), HEADER_LEN)?;
        packet.set_dst_addr(self.dst_addr);
        packet.set_src_addr(self.src_addr);
        packet.set_ethertype(self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FRAME: [u8; 14] = [
        0x52, 0x54, 0x00, 0xda, 0xf9, 0x2d, 0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12, 0x08, 0x06,
    ];

    #[test]
    fn parse_emit_round_trip() {
        let repr = EthernetRepr::parse(&Packet::new_checked(&FRAME[..]).unwrap()).unwrap();
        assert_eq!(repr.dst_addr.to_string(), "52:54:00:da:f9:2d");
        assert_eq!(repr.src_addr.0, [0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12]);
        assert_eq!(repr.ethertype, EtherType::ARP);
        let mut out = [0u8; 14];
        repr.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, FRAME);
    }

    #[test]
    fn short_buffers_fail() {
        for n in 0..HEADER_LEN {
            assert!(Packet::new_checked(&FRAME[..n]).is_err());
        }
        let mut out = [0u8; 13];
        let repr = EthernetRepr::parse(&Packet::new_checked(&FRAME[..]).unwrap()).unwrap();
        assert!(repr.emit(&mut Packet::new_unchecked(&mut out[..])).is_err());
    }

    #[test]
    fn address_classes() {
        assert!(EthernetAddress::BROADCAST.is_broadcast());
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(EthernetAddress([0x52, 0, 0, 0, 0, 1]).is_unicast());
        assert!(!EthernetAddress([0; 6]).is_unicast());
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3]), None);
    }
}
