//! Routes cached by sending QPs (`Net::route`): the same headers as the per-packet path, and
//! stale as soon as anything they were built from changes: the neighbour's MAC, its refresh
//! time, a traffic class.

use super::*;
use crate::net::encap::TrafficClass;

const OTHER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x77]);

/// The 42 header bytes of a 100-byte RoCE packet along `route`.
fn route_headers(net: &mut Net, route: &Route) -> Vec<u8> {
    let mut b = vec![0u8; HEADERS_LEN];
    net.write_route_headers(route, 100, &mut b).unwrap();
    b
}

#[test]
fn a_route_writes_what_the_per_packet_path_writes() {
    // Two nets in the same state: the first packet of each takes the same identification.
    let (mut a, mut b) = (resolved_net(), resolved_net());
    for net in [&mut a, &mut b] {
        net.set_qp_traffic_class(0x11, TrafficClass::new(26, 2).unwrap());
    }
    let mut per_packet = vec![0u8; HEADERS_LEN];
    a.write_headers_any_len(ms(1), LINUX_IP.into(), 0x11, 0x12, 100, &mut per_packet)
        .unwrap();
    let route = b.route(ms(1), LINUX_IP.into(), 0x11, 0x12).unwrap();
    assert!(route.leads_to(LINUX_IP.into(), 0x12));
    assert!(!route.leads_to(LINUX_IP.into(), 0x13));
    assert_eq!(route_headers(&mut b, &route), per_packet);
    // Each packet along the route takes a new identification (and so a new IPv4 checksum).
    let again = route_headers(&mut b, &route);
    assert_ne!(again[18..20], per_packet[18..20]);
    assert!(ipv4::Packet::new_unchecked(&again[14..34]).verify_checksum());
}

#[test]
fn a_new_mac_from_arp_makes_the_route_stale() {
    let mut net = resolved_net();
    let route = net.route(ms(1), LINUX_IP.into(), 0x11, 0x12).unwrap();
    assert!(net.route_valid(&route, ms(2)));
    assert_eq!(route_headers(&mut net, &route)[..6], LINUX_MAC.0);
    // The peer answers from another MAC (a replaced NIC): the cached route no longer holds.
    net.handle_frame(
        ms(3),
        &arp_reply(OUR_MAC, OTHER_MAC, LINUX_IP, OUR_MAC, OUR_IP),
    );
    assert!(!net.route_valid(&route, ms(3)));
    let route = net.route(ms(3), LINUX_IP.into(), 0x11, 0x12).unwrap();
    assert_eq!(route_headers(&mut net, &route)[..6], OTHER_MAC.0);
}

#[test]
fn a_route_ends_when_its_neighbour_needs_a_refresh() {
    let mut net = resolved_net();
    let route = net.route(ms(1), LINUX_IP.into(), 0x11, 0x12).unwrap();
    let ttl = config().arp_cache_ttl.as_millis() as u64;
    assert!(net.route_valid(&route, ms(ttl - 1)));
    assert!(
        !net.route_valid(&route, ms(ttl)),
        "the entry is due for a refresh"
    );
    assert!(drain(&mut net, ms(ttl)).is_empty());
    // Rebuilding it starts the refresh, as the per-packet lookup would, and keeps the MAC.
    let route = net.route(ms(ttl), LINUX_IP.into(), 0x11, 0x12).unwrap();
    let requests = drain(&mut net, ms(ttl));
    assert_eq!(requests.len(), 1, "one ARP request refreshes the entry");
    assert!(net.route_valid(&route, ms(ttl + 1)));
    assert_eq!(route_headers(&mut net, &route)[..6], LINUX_MAC.0);
}

#[test]
fn traffic_class_changes_and_removals_make_routes_stale() {
    let mut net = resolved_net();
    let route = net.route(ms(1), LINUX_IP.into(), 0x11, 0x12).unwrap();
    net.set_qp_traffic_class(0x11, TrafficClass::new(46, 1).unwrap());
    assert!(!net.route_valid(&route, ms(1)));
    let route = net.route(ms(1), LINUX_IP.into(), 0x11, 0x12).unwrap();
    assert_eq!(
        route_headers(&mut net, &route)[15],
        (46 << 2) | 1,
        "the new TOS"
    );
    // Lending the encapsulator out may change anything: stale too.
    net.encap_mut();
    assert!(!net.route_valid(&route, ms(1)));
    let route = net.route(ms(1), LINUX_IP.into(), 0x11, 0x12).unwrap();
    // A forgotten neighbour has no route until it is resolved again.
    assert!(net.remove_neighbour(LINUX_IP.into()));
    assert!(!net.route_valid(&route, ms(1)));
    assert!(matches!(
        net.route(ms(1), LINUX_IP.into(), 0x11, 0x12),
        Err(NetError::Pending(_))
    ));
}
