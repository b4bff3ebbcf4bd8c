//! `Net` over IPv6, as packet traces: two ports (A, us: 02:00:00:00:00:01, fd00:77::25/64; B:
//! 02:00:00:00:00:02, fd00:77::26/64) resolve each other by Neighbor Discovery (RFC 4861) and
//! exchange RoCEv2/IPv6 (annex A17.4) built the way the host builds it: the route's template
//! (RFC 8200 §3 header), the RoCE headers, the ICRC in place. A dual-stack port serves both
//! families; a port without IPv6 refuses IPv6 addresses with an error and drops IPv6 frames.

use super::ndp::{linux_ns, LINUX_IP6, OUR_IP6};
use super::*;
use crate::wire::frame::ReceivedPacket;
use crate::wire::frame6::RoceFrame6;
use crate::wire::icrc::{icrc_in_place, ICRC_LEN};
use crate::wire::ipv6::{self, Ipv6Repr};
use crate::wire::udp::ROCEV2_PORT;
use std::net::Ipv6Addr;

const B_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
const B_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 2, 26);
const B_IP6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x26);
const A6: IpAddr = IpAddr::V6(OUR_IP6);
const B6: IpAddr = IpAddr::V6(B_IP6);

fn b_net() -> Net {
    let mut c = NetConfig::new(B_MAC, B_IP, 24).with_ipv6(B_IP6, 64);
    c.arp_retry_interval = Duration::from_secs(1);
    Net::new(c).expect("valid config")
}

/// The one frame `net` has to send at `now`.
#[track_caller]
fn only_frame(net: &mut Net, now: Instant) -> ControlFrame {
    let mut frames = drain_all(net, now);
    assert_eq!(frames.len(), 1, "{frames:?}");
    frames.remove(0)
}

/// The frame the host's builder makes along `route` (`engine/host/frames.rs`): template
/// headers, RoCE headers, payload, zero pad, the ICRC in place over the IP packet.
fn build_along(net: &mut Net, route: &Route, headers: &RoceHeaders, payload: &[u8]) -> Vec<u8> {
    let at_bth = route.headers_len();
    let pad = usize::from(crate::wire::frame::pad_for(payload.len()));
    let at_payload = at_bth + headers.header_len();
    let body_end = at_payload + payload.len() + pad;
    let mut out = vec![0u8; body_end + ICRC_LEN];
    let mut h = *headers;
    h.bth.pad_count = pad as u8;
    assert_eq!(
        net.write_route_headers(route, out.len() - at_bth, &mut out[..at_bth]),
        Ok(at_bth)
    );
    h.emit(&mut out[at_bth..at_payload]).unwrap();
    out[at_payload..at_payload + payload.len()].copy_from_slice(payload);
    let icrc = icrc_in_place(&mut out[14..body_end]).unwrap();
    out[body_end..].copy_from_slice(&icrc.to_le_bytes());
    out
}

fn send_only(dest_qp: u32) -> RoceHeaders {
    RoceHeaders::new(BthRepr::new(Opcode::RC_SEND_ONLY, dest_qp, Psn::new(9)))
}

#[test]
fn two_ports_resolve_each_other_by_nd_and_exchange_roce_over_ipv6() {
    let (mut a, mut b) = dual_net_and_b_after_nd();
    // B learnt A from the source link-layer option of A's solicitation.
    assert_eq!(b.lookup(A6), Some(OUR_MAC));

    let route = a.route(ms(2), B6, 0x11, 0x22).unwrap();
    assert_eq!(route.headers_len(), 62);
    assert!(route.leads_to(B6, 0x22));
    let frame = build_along(&mut a, &route, &send_only(0x22), b"hello");
    assert_eq!(
        frame.len(),
        62 + 12 + 8 + 4,
        "BTH at 62, payload and pad, ICRC"
    );

    // B takes it as RoCEv2 from A, the ICRC checked.
    match b.handle_frame(ms(3), &frame) {
        Inbound::Roce(p) => {
            assert_eq!((p.src_ip, p.dst_ip), (A6, B6));
            assert_eq!(p.packet.headers.bth.dest_qp, 0x22);
            assert_eq!(p.packet.payload, b"hello");
        }
        other => panic!("expected RoCEv2, got {other:?}"),
    }
    assert_eq!(b.stats().rx_roce, 1);
    let r = ReceivedPacket::parse_on_port(&frame, ROCEV2_PORT).unwrap();
    assert_eq!(r.src_ip, A6);

    // The bytes are RoceFrame6's for the reprs the template stands for: version 6, traffic
    // class 0, flow label 0, hop limit = TTL 64, UDP source port of the QP pair, checksum 0.
    let want = RoceFrame6::new(
        EthernetRepr {
            src_addr: OUR_MAC,
            dst_addr: B_MAC,
            ethertype: EtherType::IPV6,
        },
        Ipv6Repr::rocev2(OUR_IP6, B_IP6, 64),
        UdpRepr::rocev2(udp_source_port(0x11, 0x22)),
        send_only(0x22),
        b"hello",
    )
    .unwrap();
    let mut bytes = vec![0u8; want.buffer_len()];
    want.emit(&mut bytes).unwrap();
    assert_eq!(frame, bytes);

    // The per-packet path writes the same 62 header bytes (IPv6 has no identification).
    let mut headers = [0u8; 62];
    assert_eq!(
        a.write_headers_any_len(ms(3), B6, 0x11, 0x22, frame.len() - 62, &mut headers),
        Ok(62)
    );
    assert_eq!(headers[..], frame[..62]);
}

/// [`resolved_pair`], spelled out as the trace it is.
fn dual_net_and_b_after_nd() -> (Net, Net) {
    let (mut a, mut b) = (dual_net(), b_net());
    assert_eq!(a.resolve(ms(0), B6), Resolve::Pending);
    assert_eq!(a.route(ms(0), B6, 1, 2).unwrap_err(), NetError::Pending(B6));
    // A: "who has fd00:77::26?" to its solicited-node group (33:33:ff:00:00:26).
    let ns = only_frame(&mut a, ms(0));
    let nd = ns.nd().expect("a Neighbor Solicitation");
    assert_eq!(
        nd.ethernet().dst_addr,
        ipv6::multicast_mac(ipv6::solicited_node(B_IP6))
    );
    assert_eq!(
        ns.padded().len(),
        86,
        "no padding: above the Ethernet minimum"
    );
    // B answers unicast, solicited and override.
    assert_eq!(b.handle_frame(ms(1), ns.padded()), Inbound::Consumed);
    let na = only_frame(&mut b, ms(1));
    assert_eq!(
        format!("{:?}", na.nd().expect("a Neighbor Advertisement")),
        "NdFrame(fd00:77::26 is at 02:00:00:00:00:02, to fd00:77::25, solicited)"
    );
    assert_eq!(a.handle_frame(ms(2), na.padded()), Inbound::Consumed);
    assert_eq!(
        events(&mut a),
        vec![NetEvent::Resolved { ip: B6, mac: B_MAC }]
    );
    assert_eq!(a.ndp().unwrap().stats().resolved, 1);
    (a, b)
}

#[test]
fn an_ipv6_route_follows_the_neighbour_cache_and_the_traffic_class() {
    let (mut a, _) = dual_net_and_b_after_nd();
    let route = a.route(ms(2), B6, 0x11, 0x22).unwrap();
    assert!(a.route_valid(&route, ms(2)));
    // A traffic class for B: the route is rebuilt with it, DSCP 26 ECN 2 in bytes 14..16.
    a.set_dest_traffic_class(B6, TrafficClass::new(26, 2).unwrap());
    assert!(!a.route_valid(&route, ms(2)));
    let route = a.route(ms(2), B6, 0x11, 0x22).unwrap();
    let frame = build_along(&mut a, &route, &send_only(0x22), b"x");
    assert_eq!(
        frame[14..18],
        [0x66, 0xa0, 0, 0],
        "version 6, class 0x6a, flow 0"
    );
    let f = RoceFrame6::parse(&frame).unwrap();
    assert_eq!((f.ipv6.dscp, f.ipv6.ecn, f.ipv6.flow_label), (26, 2, 0));
    // An override advertisement moves B's MAC: the route is stale, the new one goes there.
    let moved = super::ndp::nd_frame(
        OTHER_MAC,
        OUR_MAC,
        B_IP6,
        OUR_IP6,
        255,
        136,
        0x20,
        B_IP6,
        Some(OTHER_MAC),
    );
    assert_eq!(a.handle_frame(ms(3), &moved), Inbound::Consumed);
    assert!(!a.route_valid(&route, ms(3)));
    let route = a.route(ms(3), B6, 0x11, 0x22).unwrap();
    assert_eq!(
        build_along(&mut a, &route, &send_only(0x22), b"x")[..6],
        OTHER_MAC.0
    );
    // Static neighbours and their removal.
    let c6 = IpAddr::V6(Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x27));
    a.add_static(c6, LINUX_MAC).unwrap();
    assert_eq!(a.resolve(ms(3), c6), Resolve::Ready(LINUX_MAC));
    assert!(a.remove_neighbour(c6));
    assert_eq!(a.lookup(c6), None);
}

#[test]
fn a_dual_stack_port_serves_both_families() {
    let mut net = dual_net();
    // Linux asks for us over both: an ARP reply (padded to 60) and an advertisement.
    let ask4 = linux_request(LINUX_MAC, LINUX_IP, OUR_IP, true);
    assert_eq!(net.handle_frame(ms(0), &ask4), Inbound::Consumed);
    let ask6 = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    assert_eq!(net.handle_frame(ms(0), &ask6), Inbound::Consumed);
    let answers = drain_all(&mut net, ms(0));
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(answers[0].arp().is_some(), "ARP first");
    assert_eq!(answers[0].padded().len(), 60);
    assert_eq!(answers[1].nd().map(|f| f.ipv6().dst_addr), Some(LINUX_IP6));
    // Both taught us Linux.
    assert_eq!(net.lookup(LINUX_IP.into()), Some(LINUX_MAC));
    assert_eq!(net.lookup(LINUX_IP6.into()), Some(LINUX_MAC));
    assert_eq!(net.cache_len(), 2);
    // RoCEv2 over either family is delivered with its addresses.
    match net.handle_frame(ms(1), &roce_frame(OUR_MAC, OUR_IP)) {
        Inbound::Roce(p) => assert_eq!(p.src_ip, IpAddr::V4(LINUX_IP)),
        other => panic!("IPv4: {other:?}"),
    }
    match net.handle_frame(ms(1), &roce_frame6(OUR_MAC, OUR_IP6)) {
        Inbound::Roce(p) => assert_eq!((p.src_ip, p.dst_ip), (LINUX_IP6.into(), A6)),
        other => panic!("IPv6: {other:?}"),
    }
    assert_eq!(net.stats().rx_roce, 2);
    // Routes of both families, with their header lengths.
    assert_eq!(
        net.route(ms(1), LINUX_IP.into(), 1, 2)
            .unwrap()
            .headers_len(),
        42
    );
    assert_eq!(
        net.route(ms(1), LINUX_IP6.into(), 1, 2)
            .unwrap()
            .headers_len(),
        62
    );
    // Resolutions of both families: an ARP request, then a solicitation; both time out.
    let (v4, v6): (IpAddr, IpAddr) = (
        Ipv4Addr::new(192, 168, 2, 40).into(),
        Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0x40).into(),
    );
    assert_eq!(net.resolve(ms(2), v4), Resolve::Pending);
    assert_eq!(net.resolve(ms(2), v6), Resolve::Pending);
    let asks = drain_all(&mut net, ms(2));
    assert!(
        asks[0].arp().is_some() && asks[1].nd().is_some(),
        "{asks:?}"
    );
    assert_eq!(net.poll_timeout(), Some(ms(1002)));
    for t in (1002..=6002).step_by(1000) {
        drain_all(&mut net, ms(t));
    }
    let mut failed = events(&mut net);
    failed.sort_by_key(|e| format!("{e:?}"));
    assert_eq!(
        failed,
        vec![
            NetEvent::Unresolvable { ip: v4 },
            NetEvent::Unresolvable { ip: v6 }
        ]
    );
}

#[test]
fn an_address_of_a_family_the_port_lacks_is_an_error() {
    let mut net = net();
    let v6 = IpAddr::V6(LINUX_IP6);
    let no = NetError::NoAddressOfFamily(v6);
    assert_eq!(net.resolve(ms(0), v6), Resolve::Failed(no));
    assert_eq!(net.route(ms(0), v6, 1, 2).unwrap_err(), no);
    assert_eq!(net.check_destination(v6), Err(no));
    assert_eq!(net.next_hop(v6), Err(no));
    assert_eq!(net.lookup(v6), None);
    assert_eq!(net.add_static(v6, LINUX_MAC), Err(no));
    assert!(!net.remove_neighbour(v6));
    let mut buf = [0u8; 62];
    assert_eq!(net.write_headers(ms(0), v6, 1, 2, 16, &mut buf), Err(no));
    assert_eq!(
        no.to_string(),
        "fd00:77::24 is an IPv6 address, and the port has none of that family"
    );
    assert!(
        drain_all(&mut net, ms(0)).is_empty(),
        "nothing was solicited"
    );
    // IPv6 frames are an EtherType it does not speak.
    for f in [
        linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255),
        roce_frame6(OUR_MAC, OUR_IP6),
    ] {
        assert_eq!(
            net.handle_frame(ms(0), &f),
            Inbound::Dropped(DropReason::EtherType)
        );
    }
}

#[test]
fn ipv6_destinations_are_on_link_only() {
    let mut net = dual_net();
    let off = IpAddr::V6(Ipv6Addr::new(0xfd00, 0x78, 0, 0, 0, 0, 0, 1));
    let no_route = NetError::NoRoute {
        ip: off,
        subnet: Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0).into(),
        prefix_len: 64,
    };
    assert_eq!(net.resolve(ms(0), off), Resolve::Failed(no_route));
    assert_eq!(
        no_route.to_string(),
        "no route to fd00:78::1: not in our subnet fd00:77::/64, and no route or gateway covers it"
    );
    let lo = IpAddr::V6(Ipv6Addr::LOCALHOST);
    assert_eq!(net.check_destination(lo), Err(NetError::Loopback(lo)));
    for ip in [
        ipv6::ALL_NODES,
        Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 0),
    ] {
        let ip = IpAddr::V6(ip);
        assert_eq!(
            net.check_destination(ip),
            Err(NetError::NotUnicast(ip)),
            "{ip}"
        );
    }
    // Our own address: our MAC, no solicitation (loopback through the port).
    assert_eq!(net.resolve(ms(0), A6), Resolve::Ready(OUR_MAC));
    assert_eq!(net.route(ms(0), A6, 1, 2).unwrap().headers_len(), 62);
    assert!(drain_all(&mut net, ms(0)).is_empty());
}

#[test]
fn ipv6_configuration_is_checked_field_by_field() {
    let bad = |c: NetConfig| Net::new(c).unwrap_err().to_string();
    assert_eq!(
        bad(config().with_ipv6("fe80::1".parse().unwrap(), 64)),
        "ipv6: IPv6 address fe80::1/64: a link-local address (fe80::/10) needs an interface \
         scope and is not supported yet: use a global or unique-local (fd00::/8) address"
    );
    assert_eq!(
        bad(config().with_ipv6(OUR_IP6, 128)),
        "ipv6: prefix length /128 not supported: a /128 has no neighbour on the link"
    );
    let mut small = dual_config();
    small.mtu = 1200;
    assert_eq!(
        bad(small),
        "MTU 1200 too small for IPv6: every IPv6 link carries 1280 bytes (RFC 8200 §5)"
    );
    small.ipv6 = None;
    assert!(Net::new(small).is_ok(), "IPv4 alone takes 1200");
    // Packets must fit behind the longer IPv6 header: 4160 holds 4096 over IPv4 only.
    let mut jumbo = dual_config();
    jumbo.mtu = 4160;
    assert_eq!(jumbo.path_mtu(), 2048);
    jumbo.ipv6 = None;
    assert_eq!(jumbo.path_mtu(), 4096);
    // The Neighbor Discovery timers are the ARP ones.
    let ndp = dual_config().ndp().unwrap();
    assert_eq!(
        (ndp.retry_interval, ndp.max_retries, ndp.cache_capacity),
        (Duration::from_secs(1), 3, 1024)
    );
}

#[test]
fn an_ipv6_only_port_speaks_neither_ipv4_nor_arp() {
    let mut c = NetConfig::ipv6_only(OUR_MAC, OUR_IP6, 64);
    let mut net = Net::new(c).expect("valid config");
    assert_eq!(net.config().primary_address(), A6);
    assert!(net.is_own_address(A6) && !net.is_own_address(OUR_IP.into()));
    // ARP and IPv4 are EtherTypes it does not speak: nothing is answered.
    let ask4 = linux_request(LINUX_MAC, LINUX_IP, OUR_IP, true);
    let roce4 = roce_frame(OUR_MAC, OUR_IP);
    for f in [&ask4, &roce4] {
        assert_eq!(
            net.handle_frame(ms(0), f),
            Inbound::Dropped(DropReason::EtherType)
        );
    }
    let v4 = IpAddr::V4(LINUX_IP);
    let no = NetError::NoAddressOfFamily(v4);
    assert_eq!(net.resolve(ms(0), v4), Resolve::Failed(no));
    assert_eq!(net.route(ms(0), v4, 1, 2).unwrap_err(), no);
    assert!(drain_all(&mut net, ms(0)).is_empty());
    // IPv6 as on a dual-stack port: asked, answered; RoCEv2/IPv6 delivered; routes of 62.
    let ask6 = linux_ns(LINUX_MAC, LINUX_IP6, OUR_IP6, 255);
    assert_eq!(net.handle_frame(ms(1), &ask6), Inbound::Consumed);
    let answer = only_frame(&mut net, ms(1));
    assert_eq!(answer.nd().map(|f| f.ipv6().dst_addr), Some(LINUX_IP6));
    match net.handle_frame(ms(1), &roce_frame6(OUR_MAC, OUR_IP6)) {
        Inbound::Roce(p) => assert_eq!(p.src_ip, IpAddr::V6(LINUX_IP6)),
        other => panic!("{other:?}"),
    }
    let route = net.route(ms(1), LINUX_IP6.into(), 1, 2).unwrap();
    assert_eq!(route.headers_len(), 62);
    // IPv4 routes need an IPv4 subnet for their next hops.
    let r = IpRoute::default_via(Ipv4Addr::new(192, 168, 2, 1));
    c.routes.add(r).unwrap();
    assert_eq!(Net::new(c).unwrap_err(), ConfigError::NextHop(r));
}
