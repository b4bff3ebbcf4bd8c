//! IPv6 Neighbor Discovery (RFC 4861) as packet traces: a Linux host (52:54:00:8b:2d:12,
//! fd00:77::24) and us (02:00:00:00:00:01, fd00:77::25/64). The frames we must send are spelled
//! out byte for byte as scapy 2.8 builds them (its ICMPv6 checksums, not ours).

use super::*;
use crate::wire::icmpv6;
use crate::wire::ipv6;
use std::net::Ipv6Addr;

pub(super) const OUR_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x25);
pub(super) const LINUX_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x24);

/// Our advertisement answering Linux's solicitation for fd00:77::25.
#[rustfmt::skip]
const EXPECTED_NA: [u8; 86] = [
    0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, // to Linux
    0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff, // 32 bytes of ICMPv6, hop limit 255
    0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x25, // from us
    0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x24, // to Linux
    0x88, 0x00, 0x1a, 0xcd, 0x60, 0x00, 0x00, 0x00, // advertisement, checksum, S and O
    0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x25, // target: us
    0x02, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // target link-layer address: our MAC
];

/// Our solicitation for fd00:77::24, to its solicited-node group.
#[rustfmt::skip]
const EXPECTED_NS: [u8; 86] = [
    0x33, 0x33, 0xff, 0x00, 0x00, 0x24, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd,
    0x60, 0x00, 0x00, 0x00, 0x00, 0x20, 0x3a, 0xff,
    0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x25, // from us
    0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0xff, 0x00, 0x00, 0x24, // ff02::1:ff00:24
    0x87, 0x00, 0x7c, 0x41, 0x00, 0x00, 0x00, 0x00, // solicitation, checksum
    0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x24, // target: Linux
    0x01, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // source link-layer address: our MAC
];

fn ndp_config() -> NdpConfig {
    NdpConfig::new(OUR_MAC, OUR_IP6, 64)
}

fn ndp() -> Ndp {
    Ndp::new(ndp_config()).expect("valid config")
}

/// An ND frame as a Linux host sends it: Ethernet `eth_src` > `eth_dst`, IPv6 `src` > `dst`
/// with `hop_limit`, ICMPv6 type `ty` with `flags`, `target`, and a link-layer option of
/// type `opt` for `lladdr` if given; the checksum filled in.
#[allow(clippy::too_many_arguments)]
pub(super) fn nd_frame(
    eth_src: EthernetAddress,
    eth_dst: EthernetAddress,
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    ty: u8,
    flags: u8,
    target: Ipv6Addr,
    lladdr: Option<EthernetAddress>,
) -> Vec<u8> {
    let mut m = vec![ty, 0, 0, 0, flags, 0, 0, 0];
    m.extend_from_slice(&target.octets());
    if let Some(mac) = lladdr {
        m.extend_from_slice(&[if ty == 135 { 1 } else { 2 }, 1]);
        m.extend_from_slice(&mac.0);
    }
    icmpv6::Packet::new_unchecked(&mut m[..]).fill_checksum(&src, &dst);
    let mut f = eth_dst.0.to_vec();
    f.extend_from_slice(&eth_src.0);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, m.len() as u8, 58, hop_limit]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&m);
    f
}

/// Linux's "who has `target`?" from `src` at `mac`, to the target's solicited-node group.
pub(super) fn linux_ns(
    mac: EthernetAddress,
    src: Ipv6Addr,
    target: Ipv6Addr,
    hop_limit: u8,
) -> Vec<u8> {
    let group = ipv6::solicited_node(target);
    let lladdr = (!src.is_unspecified()).then_some(mac);
    nd_frame(
        mac,
        ipv6::multicast_mac(group),
        src,
        group,
        hop_limit,
        135,
        0,
        target,
        lladdr,
    )
}

/// "`target` is at `lladdr`" from `mac` to `dst` (unicast to us, or all nodes), flags byte.
pub(super) fn linux_na(
    mac: EthernetAddress,
    target: Ipv6Addr,
    lladdr: EthernetAddress,
    dst: Ipv6Addr,
    flags: u8,
) -> Vec<u8> {
    let eth_dst = if dst.is_multicast() {
        ipv6::multicast_mac(dst)
    } else {
        OUR_MAC
    };
    nd_frame(
        mac,
        eth_dst,
        target,
        dst,
        255,
        136,
        flags,
        target,
        Some(lladdr),
    )
}

pub(super) const SOLICITED_OVERRIDE: u8 = 0x60;
const OVERRIDE: u8 = 0x20;

fn drain6(ndp: &mut Ndp, now: Instant) -> Vec<NdFrame> {
    core::iter::from_fn(|| ndp.poll_transmit(now)).collect()
}

fn events6(ndp: &mut Ndp) -> Vec<NetEvent<Ipv6Addr>> {
    core::iter::from_fn(|| ndp.poll_event()).collect()
}

#[test]
fn our_builder_makes_linux_solicitation_with_scapys_checksum() {
    let ns = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    assert_eq!(ns.len(), 86);
    assert_eq!(
        &ns[56..58],
        &[0xfe, 0x4f],
        "scapy's checksum for this message"
    );
    let na = linux_na(LINUX_MAC, LINUX_IP6, LINUX_MAC, OUR_IP6, SOLICITED_OVERRIDE);
    assert_eq!(
        &na[56..58],
        &[0x9c, 0xdd],
        "scapy's checksum for this message"
    );
}

#[test]
fn linux_solicitation_for_our_address_gets_an_advertisement() {
    let mut ndp = ndp();
    let ns = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    assert_eq!(ndp.handle_frame(ms(0), &ns), NdpInbound::Consumed);
    let out = drain6(&mut ndp, ms(0));
    assert_eq!(out.len(), 1, "exactly one advertisement");
    assert_eq!(out[0].as_bytes(), &EXPECTED_NA);
    assert_eq!(
        format!("{:?}", out[0]),
        "NdFrame(fd00:77::25 is at 02:00:00:00:00:01, to fd00:77::24, solicited)"
    );
    // The solicitor was learnt (it asked for us).
    assert_eq!(ndp.lookup(LINUX_IP6), Some(LINUX_MAC));
    let s = ndp.stats();
    assert_eq!((s.rx_solicitations, s.tx_advertisements), (1, 1));
    assert_eq!(s.dropped_total(), 0);
}

#[test]
fn resolution_solicits_retries_then_fails_and_holds() {
    let mut ndp = ndp();
    assert_eq!(ndp.resolve(ms(0), LINUX_IP6), Resolve::Pending);
    let out = drain6(&mut ndp, ms(0));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].as_bytes(), &EXPECTED_NS);
    assert_eq!(
        ndp.resolve(ms(10), LINUX_IP6),
        Resolve::Pending,
        "no second request"
    );
    assert!(drain6(&mut ndp, ms(999)).is_empty());
    assert_eq!(drain6(&mut ndp, ms(1000)).len(), 1, "retry 1");
    assert_eq!(drain6(&mut ndp, ms(2000)).len(), 1, "retry 2");
    assert!(events6(&mut ndp).is_empty());
    assert!(
        drain6(&mut ndp, ms(3000)).is_empty(),
        "three solicitations in all"
    );
    assert_eq!(
        events6(&mut ndp),
        vec![NetEvent::Unresolvable { ip: LINUX_IP6 }]
    );
    let failed = ndp.resolve(ms(3100), LINUX_IP6);
    assert_eq!(
        failed,
        Resolve::Failed(NetError::Unreachable {
            ip: LINUX_IP6,
            requests: 3
        })
    );
    if let Resolve::Failed(e) = failed {
        assert_eq!(
            e.to_string(),
            "fd00:77::24 is unreachable: no Neighbor Advertisement after 3 requests"
        );
    }
    // After the hold, a new resolution starts.
    assert_eq!(ndp.resolve(ms(4000), LINUX_IP6), Resolve::Pending);
    assert_eq!(ndp.stats().tx_solicitations, 3);
    assert_eq!(drain6(&mut ndp, ms(4000)).len(), 1);
    assert_eq!(ndp.stats().unresolvable, 1);
}

#[test]
fn solicited_advertisement_completes_the_resolution() {
    let mut ndp = ndp();
    ndp.resolve(ms(0), LINUX_IP6);
    drain6(&mut ndp, ms(0));
    let na = linux_na(LINUX_MAC, LINUX_IP6, LINUX_MAC, OUR_IP6, SOLICITED_OVERRIDE);
    assert_eq!(ndp.handle_frame(ms(1), &na), NdpInbound::Consumed);
    assert_eq!(
        events6(&mut ndp),
        vec![NetEvent::Resolved {
            ip: LINUX_IP6,
            mac: LINUX_MAC
        }]
    );
    assert_eq!(ndp.resolve(ms(2), LINUX_IP6), Resolve::Ready(LINUX_MAC));
    assert!(
        drain6(&mut ndp, ms(5000)).is_empty(),
        "no retries after the answer"
    );
    assert_eq!(ndp.stats().resolved, 1);
}

/// Unsolicited (gratuitous) advertisements to all nodes update entries we have and never
/// create one, as ARP replies do; without the override flag a known MAC stays.
#[test]
fn unsolicited_advertisements_update_only_known_entries() {
    let mut ndp = ndp();
    let other_ip = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x30);
    let gratuitous = linux_na(OTHER_MAC, other_ip, OTHER_MAC, ipv6::ALL_NODES, OVERRIDE);
    assert_eq!(ndp.handle_frame(ms(0), &gratuitous), NdpInbound::Consumed);
    assert_eq!(ndp.lookup(other_ip), None, "not asked for: not added");
    assert_eq!(ndp.cache_len(), 0);
    // Known now, through a solicited answer.
    ndp.resolve(ms(0), other_ip);
    let answer = linux_na(LINUX_MAC, other_ip, LINUX_MAC, OUR_IP6, SOLICITED_OVERRIDE);
    ndp.handle_frame(ms(1), &answer);
    assert_eq!(ndp.lookup(other_ip), Some(LINUX_MAC));
    events6(&mut ndp);
    // Without override: the known MAC stays.
    let no_override = linux_na(OTHER_MAC, other_ip, OTHER_MAC, ipv6::ALL_NODES, 0);
    assert_eq!(ndp.handle_frame(ms(2), &no_override), NdpInbound::Consumed);
    assert_eq!(ndp.lookup(other_ip), Some(LINUX_MAC));
    // With override: it moves, and the move is reported.
    ndp.handle_frame(ms(3), &gratuitous);
    assert_eq!(ndp.lookup(other_ip), Some(OTHER_MAC));
    assert_eq!(
        events6(&mut ndp),
        vec![NetEvent::Resolved {
            ip: other_ip,
            mac: OTHER_MAC
        }]
    );
    // Static entries never move.
    ndp.add_static(LINUX_IP6, LINUX_MAC).unwrap();
    ndp.handle_frame(
        ms(4),
        &linux_na(OTHER_MAC, LINUX_IP6, OTHER_MAC, ipv6::ALL_NODES, OVERRIDE),
    );
    assert_eq!(ndp.lookup(LINUX_IP6), Some(LINUX_MAC));
}

#[test]
fn a_stale_entry_is_used_and_refreshed_by_a_unicast_solicitation() {
    let mut ndp = ndp();
    ndp.resolve(ms(0), LINUX_IP6);
    drain6(&mut ndp, ms(0));
    let na = linux_na(LINUX_MAC, LINUX_IP6, LINUX_MAC, OUR_IP6, SOLICITED_OVERRIDE);
    ndp.handle_frame(ms(0), &na);
    events6(&mut ndp);
    assert_eq!(
        ndp.resolve(ms(29_999), LINUX_IP6),
        Resolve::Ready(LINUX_MAC)
    );
    assert!(drain6(&mut ndp, ms(29_999)).is_empty(), "fresh");
    assert_eq!(
        ndp.resolve(ms(30_000), LINUX_IP6),
        Resolve::Ready(LINUX_MAC)
    );
    let out = drain6(&mut ndp, ms(30_000));
    assert_eq!(out.len(), 1, "a refresh");
    assert_eq!(
        out[0].ethernet().dst_addr,
        LINUX_MAC,
        "unicast to the MAC we hold"
    );
    assert_eq!(out[0].ipv6().dst_addr, LINUX_IP6);
    // Unanswered, the refresh fails like a resolution and the MAC is gone.
    for t in [31_000, 32_000, 33_000] {
        drain6(&mut ndp, ms(t));
    }
    assert_eq!(
        events6(&mut ndp),
        vec![NetEvent::Unresolvable { ip: LINUX_IP6 }]
    );
    assert_eq!(ndp.lookup(LINUX_IP6), None);
}

/// RFC 4861 §7.1.1: a solicitation with hop limit 254 crossed a router; a bad checksum, a
/// frame for someone else and other ICMPv6 are dropped and counted, never answered.
#[test]
fn invalid_and_foreign_frames_are_dropped_and_counted() {
    let mut ndp = ndp();
    let mut bad_sum = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    bad_sum[60] ^= 1;
    let other_target = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x30);
    let mut to_other_mac = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    to_other_mac[..6].copy_from_slice(&OTHER_MAC.0);
    let echo = nd_frame(
        LINUX_MAC, OUR_MAC, LINUX_IP6, OUR_IP6, 64, 128, 0, OUR_IP6, None,
    );
    let cases: Vec<(&str, Vec<u8>, NdpDrop)> = vec![
        (
            "hop limit 254",
            linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 254),
            NdpDrop::HopLimit,
        ),
        ("checksum", bad_sum, NdpDrop::BadChecksum),
        (
            "another target, at its group",
            linux_ns(LINUX_MAC, LINUX_IP6, other_target, 255),
            NdpDrop::NotOurMac,
        ),
        ("another MAC", to_other_mac, NdpDrop::NotOurMac),
        ("echo request", echo, NdpDrop::NotNeighborDiscovery),
        (
            "RoCEv2 over IPv4",
            roce_frame(OUR_MAC, OUR_IP),
            NdpDrop::NotNeighborDiscovery,
        ),
        ("runt", vec![0; 10], NdpDrop::NotNeighborDiscovery),
    ];
    for (what, f, want) in &cases {
        assert_eq!(
            ndp.handle_frame(ms(0), f),
            NdpInbound::Dropped(*want),
            "{what}"
        );
    }
    assert!(drain6(&mut ndp, ms(0)).is_empty(), "nothing answered");
    assert_eq!(ndp.cache_len(), 0, "nothing learnt");
    assert_eq!(ndp.stats().dropped_total(), cases.len() as u64);
    assert_eq!(ndp.stats().dropped(NdpDrop::NotOurMac), 2);
    // Every prefix of a valid solicitation: dropped, never a panic.
    let ns = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    for n in 0..ns.len() {
        assert!(matches!(
            ndp.handle_frame(ms(0), &ns[..n]),
            NdpInbound::Dropped(_)
        ));
    }
}

/// A solicitation for another target that reaches our solicited-node group (the low 24 bits
/// match) is not for us.
#[test]
fn a_colliding_solicited_node_group_is_not_for_us() {
    let mut ndp = ndp();
    let colliding = Ipv6Addr::new(0xfd00, 0x99, 0, 0, 0, 0, 0, 0x25);
    assert_eq!(
        ipv6::solicited_node(colliding),
        ipv6::solicited_node(OUR_IP6)
    );
    let f = linux_ns(LINUX_MAC, LINUX_IP6, colliding, 255);
    assert_eq!(
        ndp.handle_frame(ms(0), &f),
        NdpInbound::Dropped(NdpDrop::NotForUs)
    );
    assert!(drain6(&mut ndp, ms(0)).is_empty());
    assert_eq!(ndp.cache_len(), 0);
}

#[test]
fn duplicate_address_detection_probe_is_answered_to_all_nodes() {
    let mut ndp = ndp();
    let probe = linux_ns(LINUX_MAC, Ipv6Addr::UNSPECIFIED, OUR_IP6, 255);
    assert_eq!(ndp.handle_frame(ms(0), &probe), NdpInbound::Consumed);
    let out = drain6(&mut ndp, ms(0));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].ipv6().dst_addr, ipv6::ALL_NODES);
    assert_eq!(out[0].ethernet().dst_addr.to_string(), "33:33:00:00:00:01");
    let icmpv6::NdiscRepr::NeighborAdvert { flags, .. } = out[0].ndisc() else {
        panic!("an advertisement")
    };
    assert!(!flags.solicited && flags.override_);
    assert_eq!(ndp.cache_len(), 0, "a probe teaches nothing");
}

#[test]
fn another_station_claiming_our_address_is_reported() {
    let mut ndp = ndp();
    let claim = linux_na(OTHER_MAC, OUR_IP6, OTHER_MAC, ipv6::ALL_NODES, OVERRIDE);
    assert_eq!(ndp.handle_frame(ms(0), &claim), NdpInbound::Consumed);
    let ns_from_our_ip = linux_ns(OTHER_MAC, OUR_IP6, OUR_IP6, 255);
    assert_eq!(
        ndp.handle_frame(ms(0), &ns_from_our_ip),
        NdpInbound::Consumed
    );
    let conflict = NetEvent::AddressConflict {
        ip: OUR_IP6,
        mac: OTHER_MAC,
    };
    assert_eq!(events6(&mut ndp), vec![conflict, conflict]);
    assert_eq!(ndp.stats().address_conflicts, 2);
    assert!(drain6(&mut ndp, ms(0)).is_empty(), "not answered");
    // Our own advertisement reflected back is no conflict.
    let own = linux_na(OUR_MAC, OUR_IP6, OUR_MAC, ipv6::ALL_NODES, OVERRIDE);
    ndp.handle_frame(ms(1), &own);
    assert!(events6(&mut ndp).is_empty());
}

#[test]
fn cache_and_reply_queue_are_bounded() {
    let mut c = ndp_config();
    c.cache_capacity = 2;
    c.tx_queue_capacity = 2;
    let mut ndp = Ndp::new(c).unwrap();
    let ip = |n: u16| Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, n);
    ndp.resolve(ms(0), ip(1));
    ndp.resolve(ms(1), ip(2));
    ndp.resolve(ms(2), ip(3));
    assert_eq!(ndp.cache_len(), 2);
    assert_eq!(ndp.stats().cache_evictions, 1);
    assert_eq!(
        events6(&mut ndp),
        vec![NetEvent::Unresolvable { ip: ip(1) }],
        "the oldest pending entry goes, and says so"
    );
    ndp.add_static(ip(2), LINUX_MAC).unwrap();
    ndp.add_static(ip(3), LINUX_MAC).unwrap();
    assert_eq!(
        ndp.resolve(ms(3), ip(4)),
        Resolve::Failed(NetError::CacheFull(ip(4)))
    );
    let ns = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    for _ in 0..5 {
        ndp.handle_frame(ms(4), &ns);
    }
    let adverts = drain6(&mut ndp, ms(4))
        .into_iter()
        .filter(|f| matches!(f.ndisc(), icmpv6::NdiscRepr::NeighborAdvert { .. }))
        .count();
    assert_eq!(adverts, 2);
    assert_eq!(ndp.stats().tx_queue_full, 3);
}

#[test]
fn destinations_and_configuration_are_checked() {
    let ndp = ndp();
    assert_eq!(
        ndp.check_destination(Ipv6Addr::LOCALHOST),
        Err(NetError::Loopback(Ipv6Addr::LOCALHOST))
    );
    assert_eq!(
        ndp.check_destination(ipv6::ALL_NODES),
        Err(NetError::NotUnicast(ipv6::ALL_NODES))
    );
    let far: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let err = ndp.check_destination(far).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no route to 2001:db8::1: not in our subnet fd00:77::/64, and no route or gateway covers it"
    );
    assert!(ndp.check_destination("fe80::1".parse().unwrap()).is_ok());
    assert_eq!(
        ndp.check_destination("fd00:77::".parse().unwrap()),
        Err(NetError::NotUnicast("fd00:77::".parse().unwrap())),
        "the subnet-router anycast address"
    );
    let mut ndp = ndp;
    assert_eq!(ndp.resolve(ms(0), OUR_IP6), Resolve::Ready(OUR_MAC));
    let bad = |f: fn(&mut NdpConfig)| {
        let mut c = ndp_config();
        f(&mut c);
        Ndp::new(c).unwrap_err()
    };
    assert_eq!(
        bad(|c| c.mac = EthernetAddress([0x33, 0x33, 0, 0, 0, 1])),
        NdpConfigError::MacNotUnicast(EthernetAddress([0x33, 0x33, 0, 0, 0, 1]))
    );
    assert_eq!(bad(|c| c.prefix_len = 128), NdpConfigError::HostPrefix);
    assert_eq!(
        bad(|c| c.cache_capacity = 0),
        NdpConfigError::Zero("cache_capacity")
    );
    assert!(matches!(
        bad(|c| c.ip = "fe80::25".parse().unwrap()),
        NdpConfigError::Address {
            reason: Ipv6AddressError::LinkLocal,
            ..
        }
    ));
    assert_eq!(
        bad(|c| c.ip = "fd00:77::".parse().unwrap()).to_string(),
        "IPv6 address fd00:77::/64: this is the prefix's subnet-router anycast address (all \
         host bits zero)"
    );
}

/// What we send, as tshark decodes it: ICMPv6 checksums good, the options where RFC 4861 puts
/// them. tshark is required (scripts/setup.sh installs it).
#[test]
fn tshark_decodes_our_neighbor_discovery_frames() {
    use crate::capture::PcapCapture;
    use std::process::Command;

    let mut ndp = ndp();
    ndp.handle_frame(ms(0), &linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255));
    ndp.resolve(ms(0), Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x30));
    let frames = drain6(&mut ndp, ms(0));
    assert_eq!(frames.len(), 2, "an advertisement and a solicitation");
    let path = std::env::temp_dir().join(format!("dpdk-roce-net-nd-{}.pcap", std::process::id()));
    let mut cap = PcapCapture::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        cap.write(ms(i as u64), f.as_bytes()).unwrap();
    }
    cap.finish().unwrap();
    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-T", "fields", "-E", "separator=,"])
        .args(["-e", "eth.dst", "-e", "ipv6.dst", "-e", "ipv6.hlim"])
        .args(["-e", "icmpv6.type", "-e", "icmpv6.checksum.status"])
        .args([
            "-e",
            "icmpv6.nd.ns.target_address",
            "-e",
            "icmpv6.nd.na.target_address",
        ])
        .args(["-e", "icmpv6.nd.na.flag.s", "-e", "icmpv6.opt.type"])
        .args(["-e", "icmpv6.opt.linkaddr", "-e", "_ws.malformed"])
        .args(["-e", "_ws.expert.message"])
        .output();
    let _ = std::fs::remove_file(&path);
    let out = out.expect("tshark must be installed (bash scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        vec![
            "52:54:00:8b:2d:12,fd00:77::24,255,136,1,,fd00:77::25,1,2,02:00:00:00:00:01,,",
            "33:33:ff:00:00:30,ff02::1:ff00:30,255,135,1,fd00:77::30,,,1,02:00:00:00:00:01,,",
        ],
        "{text}"
    );
}
