//! Header prediction for the receive path's common case (after Van Jacobson's TCP header
//! prediction; Clark, Jacobson, Romkey, Salwen, "An Analysis of TCP Processing Overhead", 1989):
//! an RC RDMA WRITE Only frame (opcode 0x0A, IBTA vol. 1 §9.2 table 38) on a plain
//! Ethernet/IPv4/UDP encapsulation (annex A17.4), read at fixed offsets.
//!
//! [`WriteOnlyFrame::predict`] accepts a frame only when
//! [`ReceivedPacket::parse_on_port`](super::frame::ReceivedPacket::parse_on_port) would accept
//! it with exactly these headers (BTH + RETH, nothing else) and the receive filter would hand
//! it up (our MAC, our IPv4 address): the same checks, the ICRC included, in one pass without
//! the opcode table. Anything else (IPv4 options, Ethernet padding, a UDP checksum, another
//! opcode, any error) is `None` and takes the full parse, which names the reason.

use super::bth::{BthRepr, BTH_LEN};
use super::ethernet::{EtherType, EthernetAddress, HEADER_LEN as ETH_LEN};
use super::icrc::{icrc_with_ihl, ICRC_LEN};
use super::ipv4::{self, HEADER_LEN as IP_LEN, IPPROTO_UDP};
use super::opcode::Opcode;
use super::reth::{RethRepr, RETH_LEN};
use super::udp::{HEADER_LEN as UDP_LEN, ROCEV2_PORT};
use std::net::Ipv4Addr;

/// Offsets in the frame.
mod field {
    use super::*;
    pub const ETHERTYPE: usize = 12;
    pub const IP: usize = ETH_LEN;
    pub const UDP: usize = IP + IP_LEN;
    pub const BTH: usize = UDP + UDP_LEN;
    pub const RETH: usize = BTH + BTH_LEN;
    pub const PAYLOAD: usize = RETH + RETH_LEN;
}

/// The shortest frame read here: the headers and the ICRC, no payload.
pub const MIN_LEN: usize = field::PAYLOAD + ICRC_LEN;

/// An RC RDMA WRITE Only frame for us that passed every check of the full parse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteOnlyFrame<'a> {
    pub src_ip: Ipv4Addr,
    pub bth: BthRepr,
    pub reth: RethRepr,
    /// Without pad and ICRC.
    pub payload: &'a [u8],
}

impl<'a> WriteOnlyFrame<'a> {
    /// The frame read at fixed offsets if it is an RC RDMA WRITE Only for `mac` / `ip` that
    /// the full parse accepts; `None` otherwise (nothing is concluded from `None`).
    #[inline(always)]
    pub fn predict(frame: &'a [u8], mac: EthernetAddress, ip: Ipv4Addr) -> Option<Self> {
        let (head, rest) = frame.split_first_chunk::<{ field::PAYLOAD }>()?;
        if rest.len() < ICRC_LEN
            || head[..6] != mac.0
            || head[field::ETHERTYPE..field::ETHERTYPE + 2] != EtherType::IPV4.0.to_be_bytes()
        {
            return None;
        }
        let ip_h: &[u8; IP_LEN] = head[field::IP..field::UDP].try_into().ok()?;
        let udp_h = &head[field::UDP..field::BTH];
        let bth_h: &[u8; BTH_LEN] = head[field::BTH..field::RETH].try_into().ok()?;
        // IPv4 (RFC 791): version 4, no options, total length exactly the rest of the frame (no
        // Ethernet padding), not a fragment, UDP, for us, checksum (RFC 1071).
        let total = usize::from(u16::from_be_bytes([ip_h[2], ip_h[3]]));
        if ip_h[0] != 0x45
            || total != frame.len() - ETH_LEN
            || u16::from_be_bytes([ip_h[6], ip_h[7]]) & 0x3fff != 0
            || ip_h[ipv4::field::PROTOCOL] != IPPROTO_UDP
            || ip_h[16..20] != ip.octets()
            || !ipv4::header_checksum_ok(ip_h)
        {
            return None;
        }
        // UDP (RFC 768, annex A17.4.2): the RoCEv2 port, length to the end, no checksum.
        if u16::from_be_bytes([udp_h[2], udp_h[3]]) != ROCEV2_PORT
            || usize::from(u16::from_be_bytes([udp_h[4], udp_h[5]])) != total - IP_LEN
            || udp_h[6..8] != [0, 0]
        {
            return None;
        }
        // BTH (§9.2): RC RDMA WRITE Only, TVer 0, a pad the payload holds.
        let bth = BthRepr::from_bytes(bth_h);
        let data_len = rest.len() - ICRC_LEN;
        if bth.opcode != Opcode::RC_WRITE_ONLY
            || bth.tver != 0
            || usize::from(bth.pad_count) > data_len
        {
            return None;
        }
        let (data, icrc) = rest.split_at(data_len);
        let found = u32::from_le_bytes(icrc.try_into().ok()?);
        if icrc_with_ihl(&frame[field::IP..frame.len() - ICRC_LEN], IP_LEN).ok()? != found {
            return None;
        }
        let reth_h: &[u8; RETH_LEN] = head[field::RETH..].try_into().ok()?;
        Some(WriteOnlyFrame {
            src_ip: Ipv4Addr::new(ip_h[12], ip_h[13], ip_h[14], ip_h[15]),
            bth,
            reth: RethRepr::from_bytes(reth_h),
            payload: &data[..data_len - usize::from(bth.pad_count)],
        })
    }
}

#[cfg(test)]
mod tests;
