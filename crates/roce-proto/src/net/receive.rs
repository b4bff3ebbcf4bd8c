//! The receive filter for IP frames: a valid RoCEv2 frame for our address is delivered, and
//! anything else gets the [`DropReason`] of the first layer that refuses it, checked in wire
//! order: IPv4 header (RFC 791: version, IHL, total length, checksum) or IPv6 header (RFC 8200
//! §3: version, payload length), destination address, IPv4 fragmentation or IPv6 extension
//! headers (§4), protocol, then UDP and the RoCEv2 checks of annex A17 (port 4791, lengths,
//! BTH, ICRC) that `RoceFrame::parse` and `RoceFrame6::parse` perform.

use super::stats::DropReason;
use crate::wire::ethernet;
use crate::wire::frame::{FrameError, ReceivedPacket};
use crate::wire::ipv4::{self, IPPROTO_UDP};
use crate::wire::ipv6;
use crate::wire::udp::{self, ROCEV2_PORT};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// IP protocol number of ICMP.
const IPPROTO_ICMP: u8 = 1;

/// Parses an IPv4 frame (EtherType and destination MAC already checked). The fast path is a
/// single `ReceivedPacket::parse_v4_on_port` (the checks of `RoceFrame::parse`); only rejected
/// frames are looked at again to name the reason.
#[inline(always)]
pub(crate) fn receive_ipv4(
    frame: &[u8],
    our_ip: Ipv4Addr,
) -> Result<ReceivedPacket<'_>, DropReason> {
    match ReceivedPacket::parse_v4_on_port(frame, ROCEV2_PORT) {
        Ok(f) if f.dst_ip == IpAddr::V4(our_ip) => Ok(f),
        Ok(_) => Err(DropReason::NotOurIp),
        Err(e) => Err(diagnose(frame, our_ip, &e)),
    }
}

/// The reason a frame `ReceivedPacket::parse_on_port` rejected with `e` is dropped.
fn diagnose(frame: &[u8], our_ip: Ipv4Addr, e: &FrameError) -> DropReason {
    let l3 = frame.get(ethernet::HEADER_LEN..).unwrap_or(&[]);
    let Ok(ip) = ipv4::Packet::new_checked(l3) else {
        return DropReason::MalformedIp;
    };
    let hl = ip.header_len();
    let total = usize::from(ip.total_len());
    if ip.version() != 4 || hl < ipv4::HEADER_LEN || total < hl || total > l3.len() {
        return DropReason::MalformedIp;
    }
    let ip = ipv4::Packet::new_unchecked(&l3[..total]);
    if !ip.verify_checksum() {
        return DropReason::BadIpChecksum;
    }
    if ip.dst_addr() != our_ip {
        return DropReason::NotOurIp;
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return DropReason::IpFragment;
    }
    match ip.protocol() {
        IPPROTO_UDP => {}
        IPPROTO_ICMP => return DropReason::Icmp,
        _ => return DropReason::NotUdp,
    }
    let l4 = &l3[hl..total];
    let Ok(u) = udp::Packet::new_checked(l4) else {
        return DropReason::MalformedUdp;
    };
    if usize::from(u.len()) != l4.len() {
        return DropReason::MalformedUdp;
    }
    if u.dst_port() != ROCEV2_PORT {
        return DropReason::NotRocePort;
    }
    DropReason::of_roce_error(e)
}

/// Parses an IPv6 frame that is not ICMPv6 (EtherType and destination MAC already checked) as
/// [`receive_ipv4`] does an IPv4 one, with the checks of `RoceFrame6::parse`.
pub(crate) fn receive_ipv6(
    frame: &[u8],
    our_ip: Ipv6Addr,
) -> Result<ReceivedPacket<'_>, DropReason> {
    match ReceivedPacket::parse_v6_on_port(frame, ROCEV2_PORT) {
        Ok(f) if f.dst_ip == IpAddr::V6(our_ip) => Ok(f),
        Ok(_) => Err(DropReason::NotOurIp),
        Err(e) => Err(diagnose6(frame, our_ip, &e)),
    }
}

/// The reason an IPv6 frame `ReceivedPacket::parse_v6_on_port` rejected with `e` is dropped.
fn diagnose6(frame: &[u8], our_ip: Ipv6Addr, e: &FrameError) -> DropReason {
    let l3 = frame.get(ethernet::HEADER_LEN..).unwrap_or(&[]);
    let Ok(ip) = ipv6::Packet::new_checked(l3) else {
        return DropReason::MalformedIp;
    };
    let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
    if ip.version() != 6 || end > l3.len() {
        return DropReason::MalformedIp;
    }
    if ip.dst_addr() != our_ip {
        return DropReason::NotOurIp;
    }
    let nh = ip.next_header();
    if ipv6::is_extension_header(nh) {
        return DropReason::Ipv6ExtensionHeader;
    }
    if nh != IPPROTO_UDP {
        return DropReason::NotUdp;
    }
    DropReason::of_roce_error(e)
}
