//! UDP header (RFC 768). RoCEv2 (IBTA annex A17.4.2) uses destination port 4791 and sends a zero
//! checksum; the repr keeps the checksum value as found so a re-emit reproduces the packet.

use super::ipv4::{ones_complement_sum, IPPROTO_UDP};
use super::{check_len, check_room, get_u16, set_u16, Result, WireError};
use std::net::Ipv4Addr;

/// UDP header length.
pub const HEADER_LEN: usize = 8;

/// The RoCEv2 destination port.
pub const ROCEV2_PORT: u16 = 4791;

/// Offsets of the header fields.
pub mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
    pub const PAYLOAD: usize = 8;
}

/// A view of a UDP datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Fails if the buffer is shorter than the header. The length field is checked by
    /// [`UdpRepr::parse`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("UDP header", buffer.as_ref(), HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn src_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::SRC_PORT)
    }
    pub fn dst_port(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::DST_PORT)
    }
    /// The length field: header plus payload.
    pub fn len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }
    /// True when the length field says there is no payload.
    pub fn is_empty(&self) -> bool {
        usize::from(self.len()) <= HEADER_LEN
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload up to the length field (clamped to the buffer).
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        let end = usize::from(self.len()).min(d.len());
        d.get(HEADER_LEN..end).unwrap_or(&[])
    }

    /// The datagram's checksum over the IPv4 pseudo-header, header and payload (up to the
    /// length field), with the checksum field taken as zero; 0 is returned as 0xffff.
    pub fn compute_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let d = self.buffer.as_ref();
        let end = usize::from(self.len()).min(d.len());
        let Some(dgram) = d.get(..end) else {
            return 0;
        };
        let s = src.octets();
        let t = dst.octets();
        let mut acc: u32 = 0;
        for pair in [[s[0], s[1]], [s[2], s[3]], [t[0], t[1]], [t[2], t[3]]] {
            acc += u32::from(u16::from_be_bytes(pair));
        }
        acc += u32::from(IPPROTO_UDP);
        acc += end as u32;
        acc += u32::from(ones_complement_sum(dgram, 0));
        acc += u32::from(!self.checksum()); // take the stored checksum out again
        let sum = !ones_complement_sum(&[], acc);
        if sum == 0 {
            0xffff
        } else {
            sum
        }
    }

    /// True when the checksum is zero (not computed, as RoCEv2 sends) or correct.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let c = self.checksum();
        c == 0 || c == self.compute_checksum(src, dst)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_src_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::SRC_PORT, v);
    }
    pub fn set_dst_port(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::DST_PORT, v);
    }
    pub fn set_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    /// Computes and stores the checksum (the payload must already be in place).
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len()).min(self.buffer.as_ref().len());
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..end)
            .unwrap_or(&mut [])
    }
}

/// High-level representation of a UDP header. The length is not kept: `emit` takes the payload
/// length. The checksum is carried verbatim (RoCEv2: 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub checksum: u16,
}

impl UdpRepr {
    /// A RoCEv2 header: destination port 4791, checksum 0.
    pub const fn rocev2(src_port: u16) -> Self {
        UdpRepr {
            src_port,
            dst_port: ROCEV2_PORT,
            checksum: 0,
        }
    }

    /// Parses the header; the length field must be >= 8 and fit in the buffer. The checksum is
    /// not verified here (it needs the IP addresses: see [`Packet::verify_checksum`]).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        let d = packet.buffer.as_ref();
        check_len("UDP header", d, HEADER_LEN)?;
        let len = usize::from(packet.len());
        if len < HEADER_LEN {
            return Err(WireError::BadValue("UDP length"));
        }
        check_len("UDP datagram", d, len)?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            checksum: packet.checksum(),
        })
    }

    /// The ports and checksum of a header whose length the caller has checked (no check
    /// here).
    #[inline(always)]
    pub(crate) fn from_bytes(h: &[u8; HEADER_LEN]) -> Self {
        let [p0, p1, q0, q1, _, _, c0, c1] = *h;
        UdpRepr {
            src_port: u16::from_be_bytes([p0, p1]),
            dst_port: u16::from_be_bytes([q0, q1]),
            checksum: u16::from_be_bytes([c0, c1]),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header with length `8 + payload_len` and the repr's checksum value.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        payload_len: usize,
    ) -> Result<()> {
        check_room(packet.buffer.as_ref(), HEADER_LEN)?;
        let len = u16::try_from(HEADER_LEN + payload_len)
            .map_err(|_| WireError::BadValue("UDP length"))?;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(self.checksum);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_length_checks() {
        let repr = UdpRepr::rocev2(0xc123);
        let mut b = [0u8; 12];
        repr.emit(&mut Packet::new_unchecked(&mut b[..]), 4)
            .unwrap();
        assert_eq!(&b[..8], &[0xc1, 0x23, 0x12, 0xb7, 0x00, 0x0c, 0x00, 0x00]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p), Ok(repr));
        assert_eq!(p.payload().len(), 4);
        assert!(UdpRepr::parse(&Packet::new_checked(&b[..11]).unwrap()).is_err());
        let mut bad = b;
        bad[5] = 7;
        assert_eq!(
            UdpRepr::parse(&Packet::new_checked(&bad[..]).unwrap()),
            Err(WireError::BadValue("UDP length"))
        );
    }

    #[test]
    fn checksum_fill_verify() {
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut b = [0u8; 13];
        UdpRepr::rocev2(1234)
            .emit(&mut Packet::new_unchecked(&mut b[..]), 5)
            .unwrap();
        b[8..].copy_from_slice(b"hello");
        let mut p = Packet::new_unchecked(&mut b[..]);
        assert!(p.verify_checksum(s, d)); // zero = not computed
        p.fill_checksum(s, d);
        assert_ne!(p.checksum(), 0);
        assert!(p.verify_checksum(s, d));
        // Full one's-complement sum over pseudo-header and datagram is 0xffff.
        let mut pseudo = [0u8; 12];
        pseudo[..4].copy_from_slice(&s.octets());
        pseudo[4..8].copy_from_slice(&d.octets());
        pseudo[9] = 17;
        pseudo[11] = 13;
        let acc = u32::from(ones_complement_sum(&pseudo, 0));
        assert_eq!(ones_complement_sum(&b, acc), 0xffff);
        b[12] ^= 0x10;
        assert!(!Packet::new_unchecked(&b[..]).verify_checksum(s, d));
    }
}
