//! Encapsulation of outgoing RoCEv2 packets (IBTA vol. 1 annex A17.4): Ethernet II to the
//! resolved peer, then IPv4 (RFC 791: DF set, protocol 17, our TTL, DSCP/ECN per QP,
//! destination or default) or IPv6 (RFC 8200 §3: the same DSCP/ECN as traffic class, flow label
//! 0 as rxe sends, next header 17, our TTL as hop limit, no extension header), then UDP to port
//! 4791 with the source port from [`udp_source_port`] and checksum 0 (over IPv6 too: see
//! `wire::udp` for why a receiver takes it).
//!
//! Each destination gets a [`HeaderTemplate`]: the 42 (IPv4) or 62 (IPv6) header bytes with
//! everything fixed filled in and the IPv4 checksum partly summed, so the fast path only writes
//! the traffic class, the lengths, the IPv4 identification and checksum and the UDP source port.

use super::config::{ConfigError, NetConfig};
use super::error::NetError;
use super::udp_port::udp_source_port;
use crate::wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr};
use crate::wire::ipv4::{self, ones_complement_sum, Ipv4Repr, IPPROTO_UDP};
use crate::wire::ipv6::{self, Ipv6Repr};
use crate::wire::udp::{self, UdpRepr};
use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Length of the Ethernet, IPv4 and UDP headers of a RoCEv2 packet (the BTH's offset).
pub const HEADERS_LEN: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

/// Length of the Ethernet, IPv6 and UDP headers of a RoCEv2/IPv6 packet (the BTH's offset).
pub const HEADERS_LEN_V6: usize = ethernet::HEADER_LEN + ipv6::HEADER_LEN + udp::HEADER_LEN;

const IP_AT: usize = ethernet::HEADER_LEN;
const UDP_AT: usize = IP_AT + ipv4::HEADER_LEN;
const UDP6_AT: usize = IP_AT + ipv6::HEADER_LEN;

/// DSCP and ECN of the former IPv4 TOS byte (RFC 2474, RFC 3168), validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct TrafficClass {
    dscp: u8,
    ecn: u8,
}

impl TrafficClass {
    /// DSCP 0..=63; ECN 0 (not ECT), 1 (ECT(1)) or 2 (ECT(0)). Senders never set CE (3).
    pub fn new(dscp: u8, ecn: u8) -> Result<TrafficClass, ConfigError> {
        if dscp > 63 {
            return Err(ConfigError::Dscp(dscp));
        }
        if ecn > 2 {
            return Err(ConfigError::Ecn(ecn));
        }
        Ok(TrafficClass { dscp, ecn })
    }

    pub const fn dscp(self) -> u8 {
        self.dscp
    }

    pub const fn ecn(self) -> u8 {
        self.ecn
    }

    /// The TOS byte: DSCP in bits 7:2, ECN in bits 1:0.
    pub const fn tos(self) -> u8 {
        (self.dscp << 2) | self.ecn
    }
}

/// Pre-built Ethernet/IP/UDP headers to one destination, over IPv4 or IPv6.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderTemplate {
    family: Family,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    V4 {
        bytes: [u8; HEADERS_LEN],
        /// One's-complement sum (unfolded) of the IPv4 header words with TOS, total length,
        /// identification and checksum taken as zero.
        partial_sum: u32,
    },
    V6 {
        bytes: [u8; HEADERS_LEN_V6],
    },
}

impl HeaderTemplate {
    /// Ethernet/IPv4/UDP headers from `src_mac`/`src_ip` to `dst_mac`/`dst_ip` with time to
    /// live `ttl`.
    pub fn ipv4(
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
        ttl: u8,
    ) -> HeaderTemplate {
        let mut bytes = [0u8; HEADERS_LEN];
        let (e, rest) = bytes.split_at_mut(ethernet::HEADER_LEN);
        let (i, u) = rest.split_at_mut(ipv4::HEADER_LEN);
        // Exactly sized buffers and small lengths: these emits cannot fail.
        let _ = EthernetRepr {
            src_addr: src_mac,
            dst_addr: dst_mac,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut ethernet::Packet::new_unchecked(e));
        let _ = Ipv4Repr {
            src_addr: src_ip,
            dst_addr: dst_ip,
            protocol: IPPROTO_UDP,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            ttl,
        }
        .emit(&mut ipv4::Packet::new_unchecked(&mut *i), 0);
        let _ = UdpRepr::rocev2(0).emit(&mut udp::Packet::new_unchecked(u), 0);
        // Take the variable fields out of the template's checksum sum.
        i[ipv4::field::LENGTH..ipv4::field::LENGTH + 2].fill(0);
        i[ipv4::field::CHECKSUM..ipv4::field::CHECKSUM + 2].fill(0);
        let mut partial_sum = 0u32;
        for w in i.chunks_exact(2) {
            partial_sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        HeaderTemplate {
            family: Family::V4 { bytes, partial_sum },
        }
    }

    /// Ethernet/IPv6/UDP headers from `src_mac`/`src_ip` to `dst_mac`/`dst_ip` with hop limit
    /// `hop_limit` (RFC 8200 §3): flow label 0, next header UDP, no extension header.
    pub fn ipv6(
        src_mac: EthernetAddress,
        dst_mac: EthernetAddress,
        src_ip: Ipv6Addr,
        dst_ip: Ipv6Addr,
        hop_limit: u8,
    ) -> HeaderTemplate {
        let mut bytes = [0u8; HEADERS_LEN_V6];
        let (e, rest) = bytes.split_at_mut(ethernet::HEADER_LEN);
        let (i, u) = rest.split_at_mut(ipv6::HEADER_LEN);
        // Exactly sized buffers, valid fields and small lengths: these emits cannot fail.
        let _ = EthernetRepr {
            src_addr: src_mac,
            dst_addr: dst_mac,
            ethertype: EtherType::IPV6,
        }
        .emit(&mut ethernet::Packet::new_unchecked(e));
        let _ = Ipv6Repr::rocev2(src_ip, dst_ip, hop_limit)
            .emit(&mut ipv6::Packet::new_unchecked(&mut *i), 0);
        let _ = UdpRepr::rocev2(0).emit(&mut udp::Packet::new_unchecked(u), 0);
        HeaderTemplate {
            family: Family::V6 { bytes },
        }
    }

    /// The template bytes (lengths, identification, checksum, traffic class and source port
    /// zero).
    pub fn as_bytes(&self) -> &[u8] {
        match &self.family {
            Family::V4 { bytes, .. } => bytes,
            Family::V6 { bytes } => bytes,
        }
    }

    /// The length of the headers: 42 over IPv4, 62 over IPv6 (the BTH's offset).
    #[inline(always)]
    pub fn headers_len(&self) -> usize {
        match self.family {
            Family::V4 { .. } => HEADERS_LEN,
            Family::V6 { .. } => HEADERS_LEN_V6,
        }
    }

    /// The destination MAC the template was built for.
    pub fn dst_mac(&self) -> EthernetAddress {
        ethernet::Packet::new_unchecked(self.as_bytes()).dst_addr()
    }

    /// Writes the headers into `buf[..headers_len()]` for a UDP payload (BTH through ICRC) of
    /// `roce_len` bytes; `ident` is the IPv4 identification (IPv6 has none). Returns the
    /// length written.
    #[inline(always)]
    pub fn write(
        &self,
        buf: &mut [u8],
        tc: TrafficClass,
        ident: u16,
        src_port: u16,
        roce_len: usize,
    ) -> Result<usize, NetError> {
        match &self.family {
            Family::V4 { bytes, partial_sum } => {
                write_v4(bytes, *partial_sum, buf, tc, ident, src_port, roce_len)
            }
            Family::V6 { bytes } => write_v6(bytes, buf, tc, src_port, roce_len),
        }
    }
}

/// [`HeaderTemplate::write`] over IPv4.
#[inline(always)]
fn write_v4(
    bytes: &[u8; HEADERS_LEN],
    partial_sum: u32,
    buf: &mut [u8],
    tc: TrafficClass,
    ident: u16,
    src_port: u16,
    roce_len: usize,
) -> Result<usize, NetError> {
    let have = buf.len();
    let out = buf.get_mut(..HEADERS_LEN).ok_or(NetError::BufferTooSmall {
        need: HEADERS_LEN,
        have,
    })?;
    let ip_total = u16::try_from(ipv4::HEADER_LEN + udp::HEADER_LEN + roce_len)
        .map_err(|_| NetError::TooLong { len: roce_len })?;
    let udp_len = ip_total - ipv4::HEADER_LEN as u16;
    out.copy_from_slice(bytes);
    let tos = tc.tos();
    let sum = ones_complement_sum(
        &[],
        partial_sum + u32::from(tos) + u32::from(ip_total) + u32::from(ident),
    );
    out[IP_AT + ipv4::field::TOS] = tos;
    out[IP_AT + ipv4::field::LENGTH..][..2].copy_from_slice(&ip_total.to_be_bytes());
    out[IP_AT + ipv4::field::IDENT..][..2].copy_from_slice(&ident.to_be_bytes());
    out[IP_AT + ipv4::field::CHECKSUM..][..2].copy_from_slice(&(!sum).to_be_bytes());
    out[UDP_AT + udp::field::SRC_PORT..][..2].copy_from_slice(&src_port.to_be_bytes());
    out[UDP_AT + udp::field::LENGTH..][..2].copy_from_slice(&udp_len.to_be_bytes());
    Ok(HEADERS_LEN)
}

/// [`HeaderTemplate::write`] over IPv6: the traffic class in the first word (version 6 and flow
/// label 0 kept), the payload length and the UDP length (the same number: no extension header).
#[inline(always)]
fn write_v6(
    bytes: &[u8; HEADERS_LEN_V6],
    buf: &mut [u8],
    tc: TrafficClass,
    src_port: u16,
    roce_len: usize,
) -> Result<usize, NetError> {
    let have = buf.len();
    let out = buf
        .get_mut(..HEADERS_LEN_V6)
        .ok_or(NetError::BufferTooSmall {
            need: HEADERS_LEN_V6,
            have,
        })?;
    let payload_len = u16::try_from(udp::HEADER_LEN + roce_len)
        .map_err(|_| NetError::TooLong { len: roce_len })?;
    out.copy_from_slice(bytes);
    let tos = tc.tos();
    // Version 6 in the high nibble of byte 0, the traffic class across bytes 0 and 1, the flow
    // label (0) below it.
    out[IP_AT] = 0x60 | (tos >> 4);
    out[IP_AT + 1] = tos << 4;
    out[IP_AT + ipv6::field::PAYLOAD_LEN..][..2].copy_from_slice(&payload_len.to_be_bytes());
    out[UDP6_AT + udp::field::SRC_PORT..][..2].copy_from_slice(&src_port.to_be_bytes());
    out[UDP6_AT + udp::field::LENGTH..][..2].copy_from_slice(&payload_len.to_be_bytes());
    Ok(HEADERS_LEN_V6)
}

/// Builds the Ethernet/IP/UDP part of RoCEv2 packets, with per-destination templates and
/// traffic classes chosen per QP, else per destination, else from the configuration.
#[derive(Clone, Debug)]
pub struct Encap {
    src_mac: EthernetAddress,
    /// The port's IPv4 address, if it has one.
    src_ip: Option<Ipv4Addr>,
    /// The port's IPv6 address, if it has one.
    src_ip6: Option<Ipv6Addr>,
    ttl: u8,
    mtu: u16,
    default_tc: TrafficClass,
    per_dest: BTreeMap<IpAddr, TrafficClass>,
    per_qp: BTreeMap<u32, TrafficClass>,
    /// Ordered map: cheaper per packet than a SipHash lookup for the few peers of a port.
    templates: BTreeMap<IpAddr, HeaderTemplate>,
    ident: u16,
    /// Counts changes of traffic classes and templates: a cached route stays valid while this
    /// stays the same.
    changes: u64,
}

impl Encap {
    /// An encapsulator for a validated configuration.
    pub fn new(config: &NetConfig) -> Encap {
        Encap {
            src_mac: config.mac,
            src_ip: config.ipv4_addr(),
            src_ip6: config.ipv6.map(|v6| v6.ip),
            ttl: config.ttl,
            mtu: config.mtu,
            default_tc: TrafficClass {
                dscp: config.dscp & 0x3f,
                ecn: config.ecn.min(2),
            },
            per_dest: BTreeMap::new(),
            per_qp: BTreeMap::new(),
            templates: BTreeMap::new(),
            ident: 0,
            changes: 0,
        }
    }

    /// The ECN codepoint of packets with the default class (0, 1 or 2; validated by the
    /// caller).
    pub fn set_default_ecn(&mut self, ecn: u8) {
        self.changes += 1;
        self.default_tc.ecn = ecn;
    }

    /// Uses `tc` for packets to `ip` (unless the sending QP has its own).
    pub fn set_dest_traffic_class(&mut self, ip: IpAddr, tc: TrafficClass) {
        self.changes += 1;
        self.per_dest.insert(ip, tc);
    }

    /// Back to the default for `ip`.
    pub fn clear_dest_traffic_class(&mut self, ip: IpAddr) {
        self.changes += 1;
        self.per_dest.remove(&ip);
    }

    /// Uses `tc` for packets sent by local QP `qpn`.
    pub fn set_qp_traffic_class(&mut self, qpn: u32, tc: TrafficClass) {
        self.changes += 1;
        self.per_qp.insert(qpn, tc);
    }

    /// Back to the destination's or the default class for `qpn`.
    pub fn clear_qp_traffic_class(&mut self, qpn: u32) {
        self.changes += 1;
        self.per_qp.remove(&qpn);
    }

    /// The traffic class of packets from local QP `src_qpn` to `dst_ip`.
    pub fn traffic_class(&self, dst_ip: IpAddr, src_qpn: u32) -> TrafficClass {
        self.per_qp
            .get(&src_qpn)
            .or_else(|| self.per_dest.get(&dst_ip))
            .copied()
            .unwrap_or(self.default_tc)
    }

    /// Drops the template of `ip` (its MAC is no longer valid).
    pub fn forget(&mut self, ip: IpAddr) {
        self.changes += 1;
        self.templates.remove(&ip);
    }

    /// The change counter (see `changes`).
    pub fn changes(&self) -> u64 {
        self.changes
    }

    /// The template to `dst_ip` at `dst_mac`, built on first use and rebuilt if the MAC
    /// changed; [`NetError::NoAddressOfFamily`] for an IPv6 destination of a port without an
    /// IPv6 address.
    pub fn template(
        &mut self,
        dst_ip: IpAddr,
        dst_mac: EthernetAddress,
    ) -> Result<&HeaderTemplate, NetError> {
        let (src_mac, src_ip, src_ip6, ttl) = (self.src_mac, self.src_ip, self.src_ip6, self.ttl);
        let build = move || match dst_ip {
            IpAddr::V4(dst) => match src_ip {
                Some(src) => Ok(HeaderTemplate::ipv4(src_mac, dst_mac, src, dst, ttl)),
                None => Err(NetError::NoAddressOfFamily(dst_ip)),
            },
            IpAddr::V6(dst) => match src_ip6 {
                Some(src) => Ok(HeaderTemplate::ipv6(src_mac, dst_mac, src, dst, ttl)),
                None => Err(NetError::NoAddressOfFamily(dst_ip)),
            },
        };
        match self.templates.entry(dst_ip) {
            Entry::Occupied(e) => {
                let t = e.into_mut();
                if t.dst_mac() != dst_mac {
                    *t = build()?;
                }
                Ok(t)
            }
            Entry::Vacant(v) => Ok(v.insert(build()?)),
        }
    }

    /// The next IPv4 identification.
    pub(super) fn next_ident(&mut self) -> u16 {
        self.ident = self.ident.wrapping_add(1);
        self.ident
    }

    /// Header reprs for an IPv4 packet from local QP `src_qpn` to QP `dst_qpn` at
    /// `dst_ip`/`dst_mac`, for `RoceFrame::new`: the tests' oracle for the templates. Each call
    /// takes a new IP identification.
    #[cfg(test)]
    pub(crate) fn frame_for(
        &mut self,
        dst_ip: Ipv4Addr,
        dst_mac: EthernetAddress,
        src_qpn: u32,
        dst_qpn: u32,
    ) -> (EthernetRepr, Ipv4Repr, UdpRepr) {
        let tc = self.traffic_class(IpAddr::V4(dst_ip), src_qpn);
        let ident = self.next_ident();
        (
            EthernetRepr {
                src_addr: self.src_mac,
                dst_addr: dst_mac,
                ethertype: EtherType::IPV4,
            },
            Ipv4Repr {
                src_addr: self.src_ip.unwrap_or(Ipv4Addr::UNSPECIFIED),
                dst_addr: dst_ip,
                protocol: IPPROTO_UDP,
                dscp: tc.dscp,
                ecn: tc.ecn,
                ident,
                dont_frag: true,
                ttl: self.ttl,
            },
            UdpRepr::rocev2(udp_source_port(src_qpn, dst_qpn)),
        )
    }

    /// Writes the 42 (IPv4) or 62 (IPv6) header bytes of a packet from `src_qpn` to `dst_qpn`
    /// at `dst_ip`/`dst_mac` whose UDP payload (BTH through ICRC) is `roce_len` bytes, from the
    /// destination's template. Fails if the IP packet would exceed the MTU. Returns the length
    /// written.
    pub fn write_headers(
        &mut self,
        dst_ip: IpAddr,
        dst_mac: EthernetAddress,
        src_qpn: u32,
        dst_qpn: u32,
        roce_len: usize,
        buf: &mut [u8],
    ) -> Result<usize, NetError> {
        let ip_header = match dst_ip {
            IpAddr::V4(_) => ipv4::HEADER_LEN,
            IpAddr::V6(_) => ipv6::HEADER_LEN,
        };
        if ip_header + udp::HEADER_LEN + roce_len > usize::from(self.mtu) {
            return Err(NetError::TooLong { len: roce_len });
        }
        self.write_headers_any_len(dst_ip, dst_mac, src_qpn, dst_qpn, roce_len, buf)
    }

    /// [`write_headers`](Self::write_headers) without the MTU check: only the 16-bit IPv4
    /// total length (IPv6 payload length) bounds the packet (`NetError::TooLong` beyond it),
    /// as for a frame `RoceFrame` (`RoceFrame6`) builds from the same reprs, whose bytes these
    /// are. The transmit path's QPs bound their packets by the path MTU themselves.
    pub fn write_headers_any_len(
        &mut self,
        dst_ip: IpAddr,
        dst_mac: EthernetAddress,
        src_qpn: u32,
        dst_qpn: u32,
        roce_len: usize,
        buf: &mut [u8],
    ) -> Result<usize, NetError> {
        let tc = self.traffic_class(dst_ip, src_qpn);
        let ident = self.next_ident();
        let port = udp_source_port(src_qpn, dst_qpn);
        self.template(dst_ip, dst_mac)?
            .write(buf, tc, ident, port, roce_len)
    }
}
