//! The receive filter: one counter per drop reason, checked with crafted frames.

use super::ndp::{linux_ns, LINUX_IP6, OUR_IP6};
use super::*;
use crate::wire::ipv6;
use std::net::Ipv6Addr;

/// A UDP datagram from Linux to us on `port` with a zero checksum.
fn udp_frame(port: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = roce_frame(OUR_MAC, OUR_IP);
    f.truncate(14 + 20);
    f.extend_from_slice(&0xc001u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    fix_ip_checksum(&mut f);
    f
}

/// An ICMP echo request (ping) from Linux to us.
fn ping() -> Vec<u8> {
    let mut f = udp_frame(0, &[0; 8]);
    f[14 + 9] = 1; // ICMP
    f[34..42].copy_from_slice(&[8, 0, 0xf7, 0xff, 0, 0, 0, 0]);
    fix_ip_checksum(&mut f);
    f
}

#[test]
fn valid_roce_frame_is_delivered() {
    let mut net = net();
    let f = roce_frame(OUR_MAC, OUR_IP);
    match net.handle_frame(ms(0), &f) {
        Inbound::Roce(r) => {
            assert_eq!(r.packet.payload, b"hello");
            assert_eq!(r.packet.headers.bth.dest_qp, 0x11);
            assert_eq!(r.src_ip, LINUX_IP);
            assert_eq!(r.dst_ip, OUR_IP);
        }
        other => panic!("expected RoCE, got {other:?}"),
    }
    // Ethernet padding after the IP packet is fine.
    let mut padded = f.clone();
    padded.resize(f.len() + 6, 0);
    assert!(matches!(net.handle_frame(ms(0), &padded), Inbound::Roce(_)));
    assert_eq!(net.stats().rx_roce, 2);
    assert_eq!(net.stats().dropped_total(), 0);
}

#[test]
fn every_drop_reason_has_its_counter() {
    let good = roce_frame(OUR_MAC, OUR_IP);
    let mut cases: Vec<(&str, Vec<u8>, DropReason)> = Vec::new();

    cases.push(("runt", good[..13].to_vec(), DropReason::Runt));
    let mut ipv6 = good.clone();
    ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
    cases.push(("IPv6 ethertype", ipv6, DropReason::EtherType));
    cases.push((
        "unicast to another MAC",
        roce_frame(OTHER_MAC, OUR_IP),
        DropReason::NotOurMac,
    ));
    cases.push((
        "IPv4 to broadcast MAC",
        roce_frame(EthernetAddress::BROADCAST, OUR_IP),
        DropReason::NotOurMac,
    ));
    cases.push((
        "ARP truncated",
        linux_request(LINUX_MAC, LINUX_IP, OUR_IP, false)[..20].to_vec(),
        DropReason::MalformedArp,
    ));
    cases.push((
        "IPv4 header truncated",
        good[..14 + 19].to_vec(),
        DropReason::MalformedIp,
    ));
    cases.push((
        "IPv4 total length beyond the frame",
        good[..good.len() - 1].to_vec(),
        DropReason::MalformedIp,
    ));
    let mut v6 = good.clone();
    v6[14] = 0x65;
    fix_ip_checksum(&mut v6);
    cases.push(("IP version 6 in IPv4", v6, DropReason::MalformedIp));
    let mut cks = good.clone();
    cks[14 + 10] ^= 0x01;
    cases.push(("bad IP checksum", cks, DropReason::BadIpChecksum));
    cases.push((
        "another IP",
        roce_frame(OUR_MAC, Ipv4Addr::new(192, 168, 2, 26)),
        DropReason::NotOurIp,
    ));
    let mut frag = good.clone();
    frag[14 + 6] = 0x20; // MF
    fix_ip_checksum(&mut frag);
    cases.push(("IP fragment", frag, DropReason::IpFragment));
    cases.push(("ICMP echo", ping(), DropReason::Icmp));
    let mut tcp = udp_frame(80, &[0; 12]);
    tcp[14 + 9] = 6;
    fix_ip_checksum(&mut tcp);
    cases.push(("TCP", tcp, DropReason::NotUdp));
    let mut udp_len = udp_frame(4791, &[0; 16]);
    udp_len[38..40].copy_from_slice(&20u16.to_be_bytes());
    cases.push(("UDP length mismatch", udp_len, DropReason::MalformedUdp));
    cases.push(("UDP to 53", udp_frame(53, b"dns?"), DropReason::NotRocePort));
    let mut icrc = good.clone();
    let n = icrc.len();
    icrc[n - 1] ^= 0xff;
    cases.push(("bad ICRC", icrc, DropReason::BadIcrc));
    let mut payload = good.clone();
    payload[14 + 20 + 8 + 12] ^= 0x20; // payload byte: ICRC no longer matches
    cases.push(("corrupted payload", payload, DropReason::BadIcrc));
    cases.push((
        "UDP to 4791 shorter than BTH + ICRC",
        udp_frame(4791, &[0; 8]),
        DropReason::RoceLength,
    ));
    let mut pad = good.clone();
    assert_eq!(
        pad[14 + 20 + 8 + 1] & 0x30,
        0x30,
        "5-byte payload: PadCnt 3"
    );
    pad[14 + 20 + 8 + 1] &= !0x30; // PadCnt 0: the ICRC covers it
    cases.push(("PadCnt changed", pad, DropReason::BadIcrc));
    let mut opcode = good.clone();
    opcode[14 + 20 + 8] = 0x15; // reserved RC opcode
    cases.push(("unknown opcode", opcode, DropReason::RoceHeader));
    let mut tver = good.clone();
    tver[14 + 20 + 8 + 1] |= 0x01;
    cases.push(("BTH TVer 1", tver, DropReason::RoceHeader));

    // The IPv6 ones, to a port with an IPv6 address (above, the port has none).
    let good6 = roce_frame6(OUR_MAC, OUR_IP6);
    let edit6 = |at: usize, v: &[u8]| {
        let mut f = good6.clone();
        f[at..at + v.len()].copy_from_slice(v);
        f
    };
    let mut cases6: Vec<(&str, Vec<u8>, DropReason)> = vec![
        (
            "RoCEv2/IPv6 to a group MAC",
            roce_frame6(ipv6::multicast_mac(ipv6::ALL_NODES), OUR_IP6),
            DropReason::NotOurMac,
        ),
        (
            "IPv6 header truncated",
            good6[..14 + 39].to_vec(),
            DropReason::MalformedIp,
        ),
        (
            "IPv6 version 4",
            edit6(14, &[0x46]),
            DropReason::MalformedIp,
        ),
        (
            "IPv6 payload beyond the frame",
            good6[..good6.len() - 1].to_vec(),
            DropReason::MalformedIp,
        ),
        (
            "another IPv6 address",
            roce_frame6(OUR_MAC, LINUX_IP6),
            DropReason::NotOurIp,
        ),
        (
            "hop-by-hop options",
            edit6(20, &[0]),
            DropReason::Ipv6ExtensionHeader,
        ),
        ("TCP over IPv6", edit6(20, &[6]), DropReason::NotUdp),
        (
            "IPv6 to UDP 53",
            edit6(56, &[0, 53]),
            DropReason::NotRocePort,
        ),
        (
            "IPv6 bad ICRC",
            edit6(good6.len() - 1, &[0]),
            DropReason::BadIcrc,
        ),
    ];
    let mut echo = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    echo[54] = 128; // ICMPv6 echo request
    cases6.push(("ICMPv6 echo", echo, DropReason::Icmpv6));
    cases6.push((
        "solicitation that crossed a router",
        linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 64),
        DropReason::MalformedNd,
    ));
    cases6.push((
        "solicitation for another target",
        linux_ns(
            LINUX_MAC,
            LINUX_IP6,
            Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x26),
            255,
        ),
        DropReason::NotOurMac,
    ));

    let mut seen = std::collections::BTreeSet::new();
    let mut net = net();
    run_cases(&mut net, &cases, &mut seen);
    run_cases(&mut dual_net(), &cases6, &mut seen);
    assert_eq!(
        seen.len(),
        DropReason::ALL.len(),
        "every reason is exercised"
    );
    let s = net.stats();
    assert_eq!(s.rx_frames, cases.len() as u64);
    assert_eq!(s.rx_roce, 0);
    assert_eq!(s.dropped(DropReason::BadIcrc), 3);
    assert_eq!(
        s.drops().map(|(r, _)| r.name()).next(),
        Some("runt"),
        "drops() lists non-zero counters in order"
    );
    assert!(drain(&mut net, ms(0)).is_empty(), "nothing is answered");
}

/// Gives each frame to `net`, which must drop it for its reason and count it once.
#[track_caller]
fn run_cases(
    net: &mut Net,
    cases: &[(&str, Vec<u8>, DropReason)],
    seen: &mut std::collections::BTreeSet<DropReason>,
) {
    let total = net.stats().dropped_total();
    for (i, (name, frame, reason)) in cases.iter().enumerate() {
        let before = net.stats().dropped(*reason);
        assert_eq!(
            net.handle_frame(ms(0), frame),
            Inbound::Dropped(*reason),
            "{name}"
        );
        assert_eq!(net.stats().dropped(*reason), before + 1, "{name}");
        assert_eq!(
            net.stats().dropped_total(),
            total + i as u64 + 1,
            "{name}: one counter"
        );
        seen.insert(*reason);
    }
    assert!(drain_all(net, ms(0)).is_empty(), "nothing is answered");
}

#[test]
fn truncation_at_every_length_is_dropped() {
    let good = roce_frame(OUR_MAC, OUR_IP);
    let mut net = net();
    for n in 0..good.len() {
        match net.handle_frame(ms(0), &good[..n]) {
            Inbound::Dropped(r) => assert!(
                matches!(r, DropReason::Runt | DropReason::MalformedIp),
                "{n}: {r}"
            ),
            other => panic!("{n}: {other:?}"),
        }
    }
    assert_eq!(net.stats().dropped(DropReason::Runt), 14);
    assert_eq!(net.stats().dropped_total(), good.len() as u64);
}
