//! Routed peers: a destination outside the subnet goes to the next hop of the longest route
//! (ARP resolves the router, the IP header names the peer), and a router that never answers
//! makes its destinations unreachable.

use super::*;

/// The Linux host of the traces is the router: 10.9.0.0/16 and everything else behind it.
fn routed_net() -> Net {
    let mut c = config();
    c.routes
        .add(IpRoute::parse("10.9.0.0/16 via 192.168.2.24").unwrap())
        .unwrap();
    Net::new(c).unwrap()
}

const PEER: Ipv4Addr = Ipv4Addr::new(10, 9, 3, 7);

#[test]
fn a_routed_peer_is_reached_through_the_router_s_mac() {
    let mut net = routed_net();
    assert_eq!(net.next_hop(PEER.into()), Ok(LINUX_IP.into()));
    assert_eq!(net.resolve(ms(0), PEER.into()), Resolve::Pending);
    // Who has 192.168.2.24 (the router), not 10.9.3.7.
    let out = drain(&mut net, ms(0));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].arp().target_protocol_addr, LINUX_IP);
    assert_eq!(net.handle_frame(ms(1), &linux_reply()), Inbound::Consumed);
    assert_eq!(net.resolve(ms(1), PEER.into()), Resolve::Ready(LINUX_MAC));
    let (eth, ip, _) = net.frame_for(ms(1), PEER, 0x11, 0x12).unwrap();
    assert_eq!((eth.dst_addr, ip.dst_addr), (LINUX_MAC, PEER));
    assert_eq!(ip.ttl, 64, "the TTL a router decrements");
    let route = net.route(ms(1), PEER.into(), 0x11, 0x12).unwrap();
    assert!(route.leads_to(PEER.into(), 0x12));
    assert!(net.route_valid(&route, ms(2)));
    // The router's own address, and our subnet, are still on the link.
    assert_eq!(net.next_hop(LINUX_IP.into()), Ok(LINUX_IP.into()));
}

#[test]
fn without_a_covering_route_a_peer_is_no_route_and_a_dead_router_unreachable() {
    let mut net = routed_net();
    let far = Ipv4Addr::new(10, 10, 0, 1);
    assert!(matches!(
        net.resolve(ms(0), far.into()),
        Resolve::Failed(NetError::NoRoute { .. })
    ));
    assert_eq!(net.resolve(ms(0), PEER.into()), Resolve::Pending);
    for t in (0..=4000).step_by(500) {
        drain(&mut net, ms(t));
    }
    // The router never answered: its outcome names it, and the peer behind it fails.
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Unresolvable {
            ip: LINUX_IP.into()
        }]
    );
    assert!(matches!(
        net.resolve(ms(4500), PEER.into()),
        Resolve::Failed(NetError::Unreachable { ip, .. }) if ip == LINUX_IP
    ));
}

#[test]
fn routes_the_port_could_not_use_are_refused() {
    let bad = |route: &str| {
        let mut c = config();
        c.routes.add(IpRoute::parse(route).unwrap()).unwrap();
        c.validate().unwrap_err()
    };
    let off_link = bad("10.9.0.0/16 via 10.1.1.1");
    assert!(matches!(off_link, ConfigError::NextHop(_)), "{off_link}");
    let to_self = bad("default via 192.168.2.25");
    assert!(matches!(to_self, ConfigError::NextHop(_)), "{to_self}");
    let into_subnet = bad("192.168.0.0/16 via 192.168.2.24");
    assert!(
        matches!(into_subnet, ConfigError::RouteIntoSubnet(_)),
        "{into_subnet}"
    );
    assert!(
        into_subnet
            .to_string()
            .contains("192.168.0.0/16 via 192.168.2.24"),
        "{into_subnet}"
    );
}

/// Linux's ICMP host unreachable (type 3 code 1) from the router 192.168.2.24 about our
/// RoCEv2 datagram to `peer` (UDP port `port`), byte for byte; `corrupt` breaks its checksum.
fn icmp_unreachable(peer: Ipv4Addr, port: u16, corrupt: bool) -> Vec<u8> {
    let mut quoted = vec![0x45, 0x02, 0, 60, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0];
    quoted.extend_from_slice(&OUR_IP.octets());
    quoted.extend_from_slice(&peer.octets());
    let c = !ipv4::ones_complement_sum(&quoted, 0);
    quoted[10..12].copy_from_slice(&c.to_be_bytes());
    quoted.extend_from_slice(&[0xc0, 0x01]); // UDP source port
    quoted.extend_from_slice(&port.to_be_bytes());
    quoted.extend_from_slice(&[0, 40, 0, 0]);
    let mut icmp = vec![3, 1, 0, 0, 0, 0, 0, 0];
    icmp.extend_from_slice(&quoted);
    let c = !ipv4::ones_complement_sum(&icmp, 0) ^ u16::from(corrupt);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let total = (20 + icmp.len()) as u16;
    let mut ip = vec![0x45, 0xc0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 0, 0, 0, 64, 1, 0, 0]);
    ip.extend_from_slice(&LINUX_IP.octets());
    ip.extend_from_slice(&OUR_IP.octets());
    let c = !ipv4::ones_complement_sum(&ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = OUR_MAC.0.to_vec();
    f.extend_from_slice(&LINUX_MAC.0);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&icmp);
    f
}

#[test]
fn an_icmp_unreachable_about_our_roce_datagram_names_the_peer() {
    let mut net = routed_net();
    let f = icmp_unreachable(PEER, 4791, false);
    assert_eq!(net.handle_frame(ms(0), &f), Inbound::Consumed);
    assert_eq!(
        events(&mut net),
        vec![NetEvent::IcmpUnreachable { ip: PEER.into() }]
    );
    assert_eq!(net.stats().rx_icmp_unreachable, 1);
    // Not about RoCEv2, or damaged: counted and dropped as any ICMP.
    for f in [
        icmp_unreachable(PEER, 53, false),
        icmp_unreachable(PEER, 4791, true),
    ] {
        assert_eq!(
            net.handle_frame(ms(1), &f),
            Inbound::Dropped(DropReason::Icmp)
        );
    }
    assert!(events(&mut net).is_empty());
    assert_eq!(net.stats().dropped(DropReason::Icmp), 2);
}
