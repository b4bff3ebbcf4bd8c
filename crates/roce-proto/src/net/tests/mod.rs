//! Tests of the neighbour layer, written as packet traces on real bytes: a Linux host
//! (52:54:00:8b:2d:12, 192.168.2.24) and us (02:00:00:00:00:01, 192.168.2.25/24).

mod arp;
mod config;
mod drops;
mod encap;
mod fuzz;
mod ipv6;
mod ndp;
mod resolve;
mod route;
mod routed;
mod tshark;

use super::*;
use crate::time::Instant;
use crate::wire::bth::BthRepr;
use crate::wire::ethernet::{EtherType, EthernetAddress, EthernetRepr};
use crate::wire::frame::RoceFrame;
use crate::wire::ipv4::{self, Ipv4Repr, IPPROTO_UDP};
use crate::wire::opcode::Opcode;
use crate::wire::psn::Psn;
use crate::wire::roce::RoceHeaders;
use crate::wire::udp::UdpRepr;
use core::time::Duration;
use std::net::{IpAddr, Ipv4Addr};

pub(super) const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
pub(super) const OUR_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 2, 25);
pub(super) const LINUX_MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12]);
pub(super) const LINUX_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 2, 24);
pub(super) const OTHER_MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x11, 0x22, 0x33]);

/// Milliseconds on the virtual clock.
pub(super) fn ms(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000_000)
}

pub(super) fn config() -> NetConfig {
    let mut c = NetConfig::new(OUR_MAC, OUR_IP, 24);
    c.arp_retry_interval = Duration::from_secs(1);
    c.arp_max_retries = 3;
    c.arp_cache_ttl = Duration::from_secs(30);
    c.arp_failed_hold = Duration::from_secs(1);
    c
}

pub(super) fn net() -> Net {
    Net::new(config()).expect("valid config")
}

/// "Who has `tpa`? Tell `spa`", byte for byte as Linux sends it: broadcast, target hardware
/// address zero, 42 bytes (60 with the zero padding a NIC adds).
pub(super) fn linux_request(
    sha: EthernetAddress,
    spa: Ipv4Addr,
    tpa: Ipv4Addr,
    padded: bool,
) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&sha.0);
    f.extend_from_slice(&[0x08, 0x06]); // ARP
    f.extend_from_slice(&[0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01]); // Ethernet/IPv4, request
    f.extend_from_slice(&sha.0);
    f.extend_from_slice(&spa.octets());
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa.octets());
    if padded {
        f.resize(60, 0);
    }
    f
}

/// "`spa` is at `sha`", to `dst` (Ethernet) / `tha`, `tpa` (ARP).
pub(super) fn arp_reply(
    dst: EthernetAddress,
    sha: EthernetAddress,
    spa: Ipv4Addr,
    tha: EthernetAddress,
    tpa: Ipv4Addr,
) -> Vec<u8> {
    let mut f = dst.0.to_vec();
    f.extend_from_slice(&sha.0);
    f.extend_from_slice(&[0x08, 0x06]);
    f.extend_from_slice(&[0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x02]);
    f.extend_from_slice(&sha.0);
    f.extend_from_slice(&spa.octets());
    f.extend_from_slice(&tha.0);
    f.extend_from_slice(&tpa.octets());
    f
}

/// The reply Linux sends to our request for its address.
pub(super) fn linux_reply() -> Vec<u8> {
    arp_reply(OUR_MAC, LINUX_MAC, LINUX_IP, OUR_MAC, OUR_IP)
}

/// A valid RC SEND only from Linux to `dst_mac`/`dst_ip`, QP 0x11, payload "hello".
pub(super) fn roce_frame(dst_mac: EthernetAddress, dst_ip: Ipv4Addr) -> Vec<u8> {
    let eth = EthernetRepr {
        src_addr: LINUX_MAC,
        dst_addr: dst_mac,
        ethertype: EtherType::IPV4,
    };
    let ip = Ipv4Repr {
        src_addr: LINUX_IP,
        dst_addr: dst_ip,
        protocol: IPPROTO_UDP,
        dscp: 0,
        ecn: 0,
        ident: 7,
        dont_frag: true,
        ttl: 64,
    };
    let headers = RoceHeaders::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x11, Psn::new(5)));
    let f = RoceFrame::new(eth, ip, UdpRepr::rocev2(0xc001), headers, b"hello").unwrap();
    let mut buf = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Our configuration with fd00:77::25/64 as well (dual stack).
pub(super) fn dual_config() -> NetConfig {
    config().with_ipv6(ndp::OUR_IP6, 64)
}

pub(super) fn dual_net() -> Net {
    Net::new(dual_config()).expect("valid config")
}

/// [`roce_frame`] over IPv6: from Linux (fd00:77::24) to `dst_mac`/`dst_ip`, hop limit 64.
pub(super) fn roce_frame6(dst_mac: EthernetAddress, dst_ip: std::net::Ipv6Addr) -> Vec<u8> {
    let eth = EthernetRepr {
        src_addr: LINUX_MAC,
        dst_addr: dst_mac,
        ethertype: EtherType::IPV6,
    };
    let ip = crate::wire::ipv6::Ipv6Repr::rocev2(ndp::LINUX_IP6, dst_ip, 64);
    let headers = RoceHeaders::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x11, Psn::new(5)));
    let f =
        crate::wire::frame6::RoceFrame6::new(eth, ip, UdpRepr::rocev2(0xc001), headers, b"hello")
            .unwrap();
    let mut buf = vec![0u8; f.buffer_len()];
    let n = f.emit(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Recomputes the IPv4 header checksum of an Ethernet frame after an edit.
pub(super) fn fix_ip_checksum(frame: &mut [u8]) {
    ipv4::Packet::new_unchecked(&mut frame[14..]).fill_checksum();
}

/// Drains every frame `poll_transmit` has at `now`: ARP frames only (an IPv4 port's).
#[track_caller]
pub(super) fn drain(net: &mut Net, now: Instant) -> Vec<ArpFrame> {
    drain_all(net, now)
        .iter()
        .map(|f| *f.arp().expect("an ARP frame"))
        .collect()
}

/// Drains every frame `poll_transmit` has at `now`, ARP and Neighbor Discovery.
pub(super) fn drain_all(net: &mut Net, now: Instant) -> Vec<ControlFrame> {
    core::iter::from_fn(|| net.poll_transmit(now)).collect()
}

/// Drains every event.
pub(super) fn events(net: &mut Net) -> Vec<NetEvent> {
    core::iter::from_fn(|| net.poll_event()).collect()
}

/// A net that learnt LINUX_IP from an ARP reply at `ms(0)` (reachable for the configured TTL).
pub(super) fn resolved_net() -> Net {
    let mut net = net();
    net.resolve(ms(0), LINUX_IP.into());
    net.handle_frame(ms(0), &linux_reply());
    drain(&mut net, ms(0));
    events(&mut net);
    net
}
