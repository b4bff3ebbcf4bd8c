//! IPv6 fixed header (RFC 8200 §3), its upper-layer pseudo-header (RFC 8200 §8.1), and the
//! link-local multicast addresses Neighbor Discovery uses (RFC 4291 §2.7.1, RFC 2464 §7).
//!
//! Only the 40-byte fixed header is understood. A RoCEv2 packet carries no extension header
//! (IBTA annex A17.4: IPv6 | UDP | BTH), so a receiver takes a packet only when the next header
//! is UDP (or ICMPv6 for Neighbor Discovery) and drops anything behind an extension header
//! ([`is_extension_header`] names them, for counting the drop).

use super::ethernet::EthernetAddress;
use super::ipv4::IPPROTO_UDP;
use super::{check_len, check_room, get_u16, get_u32, set_u16, set_u32, Result, WireError};
use std::net::Ipv6Addr;

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Next header value of ICMPv6 (RFC 4443).
pub const IPPROTO_ICMPV6: u8 = 58;

/// Next header values of the extension headers (RFC 8200 §4, IANA "IPv6 Extension Header
/// Types"), and "no next header" (59).
pub mod next_header {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AUTH: u8 = 51;
    pub const NO_NEXT: u8 = 59;
    pub const DEST_OPTS: u8 = 60;
    pub const MOBILITY: u8 = 135;
    pub const HIP: u8 = 139;
    pub const SHIM6: u8 = 140;
}

/// True when `nh` names an IPv6 extension header (or "no next header"): the packet's
/// upper-layer header, if any, is further in. A RoCEv2 receiver drops such packets.
pub const fn is_extension_header(nh: u8) -> bool {
    use next_header::*;
    matches!(
        nh,
        HOP_BY_HOP
            | ROUTING
            | FRAGMENT
            | ESP
            | AUTH
            | NO_NEXT
            | DEST_OPTS
            | MOBILITY
            | HIP
            | SHIM6
            | 253
            | 254
    )
}

/// Offsets of the header fields.
pub mod field {
    use core::ops::Range;
    /// Version (4 bits), traffic class (8), flow label (20).
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// Largest flow label (20 bits).
pub const MAX_FLOW_LABEL: u32 = 0xf_ffff;

/// ff02::1, all nodes on the link (RFC 4291 §2.7.1).
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1): ff02::1:ff00:0/104 with
/// the low 24 bits of `addr`. A Neighbor Solicitation for `addr` is sent there.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([
        0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, o[13], o[14], o[15],
    ])
}

/// The Ethernet multicast address of the IPv6 multicast address `group` (RFC 2464 §7):
/// 33:33 and the group's last four bytes (33:33:ff:xx:xx:xx for a solicited-node address).
pub fn multicast_mac(group: Ipv6Addr) -> EthernetAddress {
    let o = group.octets();
    EthernetAddress([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

/// True when `addr` is in fe80::/10 (RFC 4291 §2.5.6).
pub const fn is_link_local(addr: &Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// The one's-complement sum (RFC 1071, not inverted, not folded) of the IPv6 pseudo-header of
/// an upper-layer packet of `upper_len` bytes (RFC 8200 §8.1): source and destination address,
/// the 32-bit length, three zero bytes and the next header. UDP and ICMPv6 add their own bytes
/// to it.
pub fn pseudo_header_sum(src: &Ipv6Addr, dst: &Ipv6Addr, upper_len: u32, next_header: u8) -> u32 {
    let mut acc: u64 = 0;
    for w in src.segments().into_iter().chain(dst.segments()) {
        acc += u64::from(w);
    }
    acc += u64::from(upper_len >> 16) + u64::from(upper_len & 0xffff);
    acc += u64::from(next_header);
    // At most 34 16-bit words: the fold leaves a value below 2^17, which the callers' sums take.
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u32
}

/// A view of an IPv6 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Fails if the buffer is shorter than the 40-byte fixed header. The version and the
    /// payload length are checked by [`Ipv6Repr::parse`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("IPv6 header", buffer.as_ref(), HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn first_word(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::VER_TC_FLOW.start)
    }
    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }
    /// The traffic class: DSCP (6 bits) and ECN (2 bits), as IPv4's former TOS byte.
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }
    pub fn flow_label(&self) -> u32 {
        self.first_word() & MAX_FLOW_LABEL
    }
    /// Bytes after the fixed header (extension headers included).
    pub fn payload_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::PAYLOAD_LEN)
    }
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NEXT_HEADER]
    }
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    pub fn src_addr(&self) -> Ipv6Addr {
        addr_at(self.buffer.as_ref(), field::SRC_ADDR.start)
    }
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr_at(self.buffer.as_ref(), field::DST_ADDR.start)
    }

    /// The bytes after the fixed header up to the payload length (clamped to the buffer).
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(d.len());
        d.get(HEADER_LEN..end).unwrap_or(&[])
    }
}

/// The 16 bytes of an address at `at` (the caller has checked the length).
fn addr_at(b: &[u8], at: usize) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(&b[at..at + 16]);
    Ipv6Addr::from(a)
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version, traffic class (DSCP, ECN) and flow label together (they share a word).
    pub fn set_first_word(&mut self, version: u8, dscp: u8, ecn: u8, flow_label: u32) {
        let tc = u32::from((dscp << 2) | (ecn & 0x03));
        let w = (u32::from(version & 0x0f) << 28) | (tc << 20) | (flow_label & MAX_FLOW_LABEL);
        set_u32(self.buffer.as_mut(), field::VER_TC_FLOW.start, w);
    }
    pub fn set_payload_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::PAYLOAD_LEN, v);
    }
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NEXT_HEADER] = v;
    }
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }
    pub fn set_src_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }
    pub fn set_dst_addr(&mut self, a: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(self.buffer.as_ref().len());
        self.buffer
            .as_mut()
            .get_mut(HEADER_LEN..end)
            .unwrap_or(&mut [])
    }
}

/// High-level representation of the fixed IPv6 header. The payload length is not kept: `emit`
/// takes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Repr {
    pub src_addr: Ipv6Addr,
    pub dst_addr: Ipv6Addr,
    /// The next header: UDP (17) for RoCEv2, ICMPv6 (58) for Neighbor Discovery.
    pub next_header: u8,
    /// Differentiated services code point (6 bits of the traffic class).
    pub dscp: u8,
    /// Explicit congestion notification (2 bits of the traffic class).
    pub ecn: u8,
    /// Flow label (20 bits; RoCEv2 senders such as rxe send 0).
    pub flow_label: u32,
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// A RoCEv2 header: next header UDP, flow label 0.
    pub const fn rocev2(src_addr: Ipv6Addr, dst_addr: Ipv6Addr, hop_limit: u8) -> Self {
        Ipv6Repr {
            src_addr,
            dst_addr,
            next_header: IPPROTO_UDP,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
            hop_limit,
        }
    }

    /// Parses and validates: version 6, the payload length within the buffer (bytes beyond it
    /// are the link's padding). The next header is reported, not judged: see
    /// [`is_extension_header`].
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        let d = packet.buffer.as_ref();
        check_len("IPv6 header", d, HEADER_LEN)?;
        if packet.version() != 6 {
            return Err(WireError::BadValue("IPv6 version"));
        }
        check_len(
            "IPv6 payload",
            d,
            HEADER_LEN + usize::from(packet.payload_len()),
        )?;
        Ok(Self::fields_of(packet))
    }

    /// The fields of a fixed header the caller has already validated as
    /// [`parse`](Self::parse) does: no check here.
    pub(crate) fn from_header(h: &[u8; HEADER_LEN]) -> Self {
        Self::fields_of(&Packet::new_unchecked(&h[..]))
    }

    fn fields_of<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
        Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
            hop_limit: packet.hop_limit(),
        }
    }

    /// Header length emitted.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 40-byte header with payload length `payload_len`. Fails on a DSCP above 63,
    /// an ECN above 3, a flow label above 20 bits or a payload above 65535 bytes (no jumbograms).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        payload_len: usize,
    ) -> Result<()> {
        check_room(packet.buffer.as_ref(), HEADER_LEN)?;
        let len =
            u16::try_from(payload_len).map_err(|_| WireError::BadValue("IPv6 payload length"))?;
        if self.dscp > 63 || self.ecn > 3 {
            return Err(WireError::BadValue("IPv6 traffic class"));
        }
        if self.flow_label > MAX_FLOW_LABEL {
            return Err(WireError::BadValue("IPv6 flow label"));
        }
        packet.set_first_word(6, self.dscp, self.ecn, self.flow_label);
        packet.set_payload_len(len);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv4::ones_complement_sum;

    /// fd00:77::1 > fd00:77::2, DSCP 26 ECN 2 (traffic class 0x6a), flow label 0x12345, UDP,
    /// hop limit 64, 20 bytes of payload, then 6 bytes of Ethernet padding.
    #[rustfmt::skip]
    const PACKET: [u8; 66] = [
        0x66, 0xa1, 0x23, 0x45, // version 6, traffic class 0x6a, flow label 0x12345
        0x00, 0x14, 0x11, 0x40, // payload length 20, next header UDP, hop limit 64
        0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // source
        0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // destination
        1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, // payload
        0, 0, 0, 0, 0, 0, // padding
    ];

    fn repr() -> Ipv6Repr {
        Ipv6Repr {
            src_addr: "fd00:77::1".parse().unwrap(),
            dst_addr: "fd00:77::2".parse().unwrap(),
            next_header: IPPROTO_UDP,
            dscp: 26,
            ecn: 2,
            flow_label: 0x12345,
            hop_limit: 64,
        }
    }

    #[test]
    fn parse_reads_every_field_and_emit_writes_them_back() {
        let p = Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x6a);
        assert_eq!(p.payload_len(), 20);
        assert_eq!(p.payload(), &PACKET[40..60], "padding is not payload");
        assert_eq!(Ipv6Repr::parse(&p), Ok(repr()));
        let mut out = [0xa5u8; 60];
        repr()
            .emit(&mut Packet::new_unchecked(&mut out[..]), 20)
            .unwrap();
        assert_eq!(&out[..40], &PACKET[..40]);
        assert_eq!(
            repr().emit(&mut Packet::new_unchecked(&mut out[..39]), 0),
            Err(WireError::BufferTooSmall { need: 40, have: 39 })
        );
    }

    #[test]
    fn short_wrong_version_and_overlong_payload_are_errors() {
        for n in 0..HEADER_LEN {
            assert!(Packet::new_checked(&PACKET[..n]).is_err(), "{n} bytes");
        }
        // The header alone, announcing 20 bytes it does not have.
        for n in HEADER_LEN..60 {
            let p = Packet::new_checked(&PACKET[..n]).unwrap();
            assert!(Ipv6Repr::parse(&p).is_err(), "{n} bytes");
            assert_eq!(p.payload().len(), n - HEADER_LEN, "clamped");
        }
        let mut v4 = PACKET;
        v4[0] = 0x46;
        assert_eq!(
            Ipv6Repr::parse(&Packet::new_checked(&v4[..]).unwrap()),
            Err(WireError::BadValue("IPv6 version"))
        );
    }

    #[test]
    fn emit_refuses_what_the_header_cannot_hold() {
        let mut out = [0u8; 40];
        let mut p = Packet::new_unchecked(&mut out[..]);
        assert!(repr().emit(&mut p, 65_536).is_err());
        let r = Ipv6Repr {
            flow_label: 0x10_0000,
            ..repr()
        };
        assert_eq!(
            r.emit(&mut p, 0),
            Err(WireError::BadValue("IPv6 flow label"))
        );
        let r = Ipv6Repr { dscp: 64, ..repr() };
        assert!(r.emit(&mut p, 0).is_err());
    }

    #[test]
    fn extension_headers_are_named() {
        for nh in [0, 43, 44, 50, 51, 59, 60, 135, 139, 140, 253, 254] {
            assert!(is_extension_header(nh), "{nh}");
        }
        for nh in [IPPROTO_UDP, IPPROTO_ICMPV6, 6, 1, 4, 41] {
            assert!(!is_extension_header(nh), "{nh}");
        }
    }

    /// RFC 4291 §2.7.1 and RFC 2464 §7: fd00:77::1:2:3 is solicited at ff02::1:ff02:3, whose
    /// Ethernet address is 33:33:ff:02:00:03.
    #[test]
    fn solicited_node_address_and_its_mac() {
        let a: Ipv6Addr = "fd00:77::1:2:3".parse().unwrap();
        let s = solicited_node(a);
        assert_eq!(s, "ff02::1:ff02:3".parse::<Ipv6Addr>().unwrap());
        assert_eq!(multicast_mac(s).to_string(), "33:33:ff:02:00:03");
        assert_eq!(multicast_mac(ALL_NODES).to_string(), "33:33:00:00:00:01");
        assert!(multicast_mac(s).is_multicast());
        assert!(is_link_local(&"fe80::1".parse().unwrap()));
        assert!(is_link_local(&"febf::1".parse().unwrap()));
        assert!(!is_link_local(&"fec0::1".parse().unwrap()));
        assert!(!is_link_local(&a));
    }

    /// The pseudo-header sum equals the RFC 1071 sum over the 40 pseudo-header bytes spelled
    /// out as RFC 8200 §8.1 draws them.
    #[test]
    fn pseudo_header_sum_is_the_drawn_header() {
        let (s, d) = (repr().src_addr, repr().dst_addr);
        for (len, nh) in [
            (0u32, 17u8),
            (20, 17),
            (32, 58),
            (0x1_0004, 17),
            (u32::MAX, 58),
        ] {
            let mut drawn = Vec::new();
            drawn.extend_from_slice(&s.octets());
            drawn.extend_from_slice(&d.octets());
            drawn.extend_from_slice(&len.to_be_bytes());
            drawn.extend_from_slice(&[0, 0, 0, nh]);
            assert_eq!(drawn.len(), 40);
            let want = ones_complement_sum(&drawn, 0);
            let got = ones_complement_sum(&[], pseudo_header_sum(&s, &d, len, nh));
            assert_eq!(got, want, "length {len} next header {nh}");
        }
    }
}
