//! UDP header (RFC 768). RoCEv2 (IBTA annex A17.4.2) uses destination port 4791 and sends a zero
//! checksum; the repr keeps the checksum value as found so a re-emit reproduces the packet.
//!
//! # The UDP checksum of RoCEv2 over IPv6
//!
//! RFC 8200 §8.1 makes the UDP checksum mandatory over IPv6 (a zero one is to be discarded);
//! RFC 6935 and RFC 6936 relax that for tunnel protocols whose payload carries its own
//! integrity check, which RoCEv2 does (the ICRC covers the addresses, the UDP length and the
//! whole IB packet). What RoCEv2 peers do, read in Linux's soft-RoCE (`rdma_rxe`, the peer of
//! `tests/interop_rxe.rs`), `drivers/infiniband/sw/rxe/rxe_net.c` of Linux 6.1:
//!
//! - **Sending**: `prepare_udp_hdr` writes `check = 0` for both families and `prepare6` sends
//!   the IPv6 packet through `ip6_local_out` with no checksum offload requested, so rxe sends a
//!   zero UDP checksum over IPv6 too.
//! - **Receiving**: rxe's IPv6 socket is a UDP tunnel socket made by `udp_sock_create6`
//!   (`net/ipv6/ip6_udp_tunnel.c`) with `use_udp6_rx_checksums` unset, which sets
//!   `no_check6_rx`: the kernel's UDPv6 input (`__udp6_lib_rcv`) lets a zero checksum through to
//!   rxe, and verifies a non-zero one before handing the datagram over ("Verify checksum before
//!   giving to encap" in `udpv6_queue_rcv_one_skb`), dropping it when wrong.
//!
//! This crate does the same over IPv6 as over IPv4: [`UdpRepr::rocev2`] sends 0, and a RoCEv2
//! receiver accepts 0 or a correct checksum ([`Packet::rocev2_checksum_ok_v6`]). Strict RFC 8200
//! UDP ([`Packet::verify_checksum_v6`]) refuses 0. Wireshark flags a zero IPv6 UDP checksum as
//! illegal unless `udp.ignore_ipv6_zero_checksum` is set.

use super::ipv4::{ones_complement_sum, IPPROTO_UDP};
use super::ipv6;
use super::{check_len, check_room, get_u16, set_u16, Result, WireError};
use std::net::{Ipv4Addr, Ipv6Addr};

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
        let s = src.octets();
        let t = dst.octets();
        let mut acc: u32 = 0;
        for pair in [[s[0], s[1]], [s[2], s[3]], [t[0], t[1]], [t[2], t[3]]] {
            acc += u32::from(u16::from_be_bytes(pair));
        }
        acc += u32::from(IPPROTO_UDP);
        acc += u32::from(self.len().min(self.clamped_len()));
        self.checksum_from(acc)
    }

    /// The datagram's checksum over the IPv6 pseudo-header (RFC 8200 §8.1), header and payload
    /// (up to the length field), with the checksum field taken as zero; 0 is returned as
    /// 0xffff (RFC 8200 §8.1: a computed zero is sent as all ones).
    pub fn compute_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> u16 {
        let len = u32::from(self.len().min(self.clamped_len()));
        self.checksum_from(ipv6::pseudo_header_sum(&src, &dst, len, IPPROTO_UDP))
    }

    /// The length field clamped to the buffer, as the checksums read it.
    fn clamped_len(&self) -> u16 {
        u16::try_from(self.buffer.as_ref().len()).unwrap_or(u16::MAX)
    }

    /// The checksum over the datagram (up to the length field) added to the pseudo-header sum
    /// `pseudo`, with the stored checksum taken out again.
    fn checksum_from(&self, pseudo: u32) -> u16 {
        let d = self.buffer.as_ref();
        let end = usize::from(self.len()).min(d.len());
        let Some(dgram) = d.get(..end) else {
            return 0;
        };
        let mut acc = pseudo;
        acc += u32::from(ones_complement_sum(dgram, 0));
        acc += u32::from(!self.checksum()); // take the stored checksum out again
        let sum = !ones_complement_sum(&[], acc);
        if sum == 0 {
            0xffff
        } else {
            sum
        }
    }

    /// True when the checksum over IPv6 is present and correct (RFC 8200 §8.1: a zero
    /// checksum is not allowed for UDP over IPv6 in general).
    pub fn verify_checksum_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let c = self.checksum();
        c != 0 && c == self.compute_checksum_v6(src, dst)
    }

    /// The RoCEv2 receiver's rule over IPv6, as Linux rxe applies it (module documentation):
    /// a zero checksum is accepted, a non-zero one must be correct.
    pub fn rocev2_checksum_ok_v6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        let c = self.checksum();
        c == 0 || c == self.compute_checksum_v6(src, dst)
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
    /// Computes and stores the checksum over IPv6 (the payload must already be in place).
    pub fn fill_checksum_v6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let c = self.compute_checksum_v6(src, dst);
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

    /// A UDP datagram over IPv6 as scapy 2.8 builds it (an implementation we did not write):
    /// fd00:77::1 port 0xc001 > fd00:77::2 port 4791, "hello", checksum 0xee56.
    #[rustfmt::skip]
    const SCAPY_UDP6: [u8; 13] = [
        0xc0, 0x01, 0x12, 0xb7, 0x00, 0x0d, 0xee, 0x56, b'h', b'e', b'l', b'l', b'o',
    ];

    #[test]
    fn checksum_over_ipv6_matches_scapy_and_the_drawn_pseudo_header() {
        let s: Ipv6Addr = "fd00:77::1".parse().unwrap();
        let d: Ipv6Addr = "fd00:77::2".parse().unwrap();
        let p = Packet::new_checked(&SCAPY_UDP6[..]).unwrap();
        assert_eq!(p.compute_checksum_v6(s, d), 0xee56);
        assert!(p.verify_checksum_v6(s, d));
        assert!(p.rocev2_checksum_ok_v6(s, d));
        // Swapped addresses sum the same (one's complement addition commutes); another
        // address does not.
        assert!(p.verify_checksum_v6(d, s));
        assert!(!p.verify_checksum_v6(s, "fd00:77::3".parse().unwrap()));
        // RFC 8200 §8.1 drawn out: the pseudo-header, then the datagram, sum to all ones.
        let mut all = Vec::new();
        all.extend_from_slice(&s.octets());
        all.extend_from_slice(&d.octets());
        all.extend_from_slice(&13u32.to_be_bytes());
        all.extend_from_slice(&[0, 0, 0, 17]);
        all.extend_from_slice(&SCAPY_UDP6);
        assert_eq!(ones_complement_sum(&all, 0), 0xffff);
        // Filling from zero writes the same value.
        let mut b = SCAPY_UDP6;
        let mut q = Packet::new_unchecked(&mut b[..]);
        q.set_checksum(0);
        q.fill_checksum_v6(s, d);
        assert_eq!(b, SCAPY_UDP6);
    }

    /// Zero is "no checksum": refused by strict RFC 8200 UDP, accepted by the RoCEv2 rule (as
    /// Linux rxe accepts it); a wrong non-zero checksum is refused by both.
    #[test]
    fn zero_checksum_over_ipv6_is_a_rocev2_exception() {
        let s: Ipv6Addr = "fd00:77::1".parse().unwrap();
        let d: Ipv6Addr = "fd00:77::2".parse().unwrap();
        let mut b = SCAPY_UDP6;
        b[6..8].fill(0);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(!p.verify_checksum_v6(s, d));
        assert!(p.rocev2_checksum_ok_v6(s, d));
        b[6..8].copy_from_slice(&0xee57u16.to_be_bytes());
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(!p.verify_checksum_v6(s, d));
        assert!(!p.rocev2_checksum_ok_v6(s, d));
        // A datagram whose sum with the pseudo-header is already all ones would checksum to
        // 0, and sends 0xffff instead (RFC 8200 §8.1): pseudo-header 10 + 17, header 10 (the
        // length), payload 0xffda.
        let mut z = [0, 0, 0, 0, 0, 10, 0, 0, 0xff, 0xda];
        let mut q = Packet::new_unchecked(&mut z[..]);
        let c = q.compute_checksum_v6(Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED);
        assert_eq!(c, 0xffff);
        q.set_checksum(c);
        assert!(q.verify_checksum_v6(Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED));
    }
}
