//! Answering and learning from ARP (RFC 826 "Packet Reception").

use super::*;

/// The reply we must send to Linux's "who has 192.168.2.25? tell 192.168.2.24", in full.
const EXPECTED_REPLY: [u8; 42] = [
    0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12, // Ethernet dst: the requester (unicast)
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // Ethernet src: us
    0x08, 0x06, // ARP
    0x00, 0x01, // hardware type Ethernet
    0x08, 0x00, // protocol IPv4
    0x06, 0x04, // lengths
    0x00, 0x02, // reply
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // sender MAC: us
    192, 168, 2, 25, // sender IP: us
    0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12, // target MAC: requester
    192, 168, 2, 24, // target IP: requester
];

#[test]
fn linux_request_for_our_ip_gets_reply() {
    for padded in [false, true] {
        let mut net = net();
        let req = linux_request(LINUX_MAC, LINUX_IP, OUR_IP, padded);
        assert_eq!(req.len(), if padded { 60 } else { 42 });
        assert_eq!(net.handle_frame(ms(0), &req), Inbound::Consumed);
        let out = drain(&mut net, ms(0));
        assert_eq!(out.len(), 1, "exactly one reply");
        assert_eq!(out[0].as_bytes(), &EXPECTED_REPLY);
        let padded_reply = out[0].padded();
        assert_eq!(&padded_reply[..42], &EXPECTED_REPLY);
        assert_eq!(&padded_reply[42..], &[0u8; 18]);
        // The requester was learnt (the request was addressed to us).
        assert_eq!(net.lookup(LINUX_IP.into()), Some(LINUX_MAC));
        let s = net.stats();
        assert_eq!((s.rx_arp_requests, s.tx_arp_replies), (1, 1));
        assert_eq!(s.dropped_total(), 0);
    }
}

#[test]
fn reply_fields_decode() {
    let mut net = net();
    net.handle_frame(ms(0), &linux_request(LINUX_MAC, LINUX_IP, OUR_IP, false));
    let reply = *net
        .poll_transmit(ms(0))
        .unwrap()
        .arp()
        .expect("an ARP reply");
    let eth = reply.ethernet();
    assert_eq!(eth.dst_addr, LINUX_MAC);
    assert_eq!(eth.src_addr, OUR_MAC);
    assert_eq!(eth.ethertype, EtherType::ARP);
    let a = reply.arp();
    assert_eq!(a.operation, crate::wire::arp::ArpOperation::Reply);
    assert_eq!(
        (a.source_hardware_addr, a.source_protocol_addr),
        (OUR_MAC, OUR_IP)
    );
    assert_eq!(
        (a.target_hardware_addr, a.target_protocol_addr),
        (LINUX_MAC, LINUX_IP)
    );
    assert_eq!(
        format!("{reply:?}"),
        "ArpFrame(192.168.2.25 is at 02:00:00:00:00:01, to 192.168.2.24 at 52:54:00:8b:2d:12)"
    );
}

#[test]
fn request_for_other_ip_is_ignored_and_teaches_nothing_new() {
    let mut net = net();
    let req = linux_request(LINUX_MAC, LINUX_IP, Ipv4Addr::new(192, 168, 2, 30), false);
    assert_eq!(net.handle_frame(ms(0), &req), Inbound::Consumed);
    assert!(
        drain(&mut net, ms(0)).is_empty(),
        "no reply for someone else"
    );
    assert_eq!(
        net.lookup(LINUX_IP.into()),
        None,
        "sender not cached: not added"
    );
    assert_eq!(net.stats().rx_arp_requests, 1);
}

#[test]
fn request_for_other_ip_updates_a_cached_sender() {
    let mut net = net();
    net.add_static(Ipv4Addr::new(192, 168, 2, 99).into(), OTHER_MAC)
        .unwrap();
    assert_eq!(net.resolve(ms(0), LINUX_IP.into()), Resolve::Pending);
    drain(&mut net, ms(0));
    net.handle_frame(ms(1), &linux_reply());
    assert_eq!(net.lookup(LINUX_IP.into()), Some(LINUX_MAC));
    events(&mut net);
    // Linux moved to a new NIC and asks for someone else: RFC 826 merges the new MAC.
    let req = linux_request(OTHER_MAC, LINUX_IP, Ipv4Addr::new(192, 168, 2, 30), false);
    assert_eq!(net.handle_frame(ms(2), &req), Inbound::Consumed);
    assert_eq!(net.lookup(LINUX_IP.into()), Some(OTHER_MAC));
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Resolved {
            ip: LINUX_IP.into(),
            mac: OTHER_MAC
        }]
    );
    assert!(drain(&mut net, ms(2)).is_empty());
    // Static entries do not move.
    let req = linux_request(
        LINUX_MAC,
        Ipv4Addr::new(192, 168, 2, 99),
        Ipv4Addr::new(192, 168, 2, 30),
        false,
    );
    net.handle_frame(ms(3), &req);
    assert_eq!(
        net.lookup(Ipv4Addr::new(192, 168, 2, 99).into()),
        Some(OTHER_MAC)
    );
}

#[test]
fn gratuitous_arp_updates_only_known_entries() {
    let mut net = net();
    let ip30 = Ipv4Addr::new(192, 168, 2, 30);
    // Gratuitous reply (broadcast, sender = target = 192.168.2.30): unknown, so not added.
    let garp = arp_reply(EthernetAddress::BROADCAST, OTHER_MAC, ip30, OTHER_MAC, ip30);
    assert_eq!(net.handle_frame(ms(0), &garp), Inbound::Consumed);
    assert_eq!(net.lookup(ip30.into()), None);
    assert_eq!(net.stats().rx_arp_replies, 1);
    // Known now: a gratuitous request with a new MAC moves it.
    net.resolve(ms(0), ip30.into());
    net.handle_frame(ms(1), &arp_reply(OUR_MAC, LINUX_MAC, ip30, OUR_MAC, OUR_IP));
    assert_eq!(net.lookup(ip30.into()), Some(LINUX_MAC));
    let gratuitous_request = linux_request(OTHER_MAC, ip30, ip30, true);
    net.handle_frame(ms(2), &gratuitous_request);
    assert_eq!(net.lookup(ip30.into()), Some(OTHER_MAC));
    assert!(drain(&mut net, ms(2))
        .iter()
        .all(|f| f.arp().operation == crate::wire::arp::ArpOperation::Request));
}

#[test]
fn arp_to_another_unicast_mac_is_dropped() {
    let mut net = net();
    let mut req = linux_request(LINUX_MAC, LINUX_IP, OUR_IP, false);
    req[..6].copy_from_slice(&OTHER_MAC.0);
    assert_eq!(
        net.handle_frame(ms(0), &req),
        Inbound::Dropped(DropReason::NotOurMac)
    );
    assert!(drain(&mut net, ms(0)).is_empty());
    // Unicast to us is fine (Linux re-validates entries that way).
    req[..6].copy_from_slice(&OUR_MAC.0);
    assert_eq!(net.handle_frame(ms(0), &req), Inbound::Consumed);
    assert_eq!(drain(&mut net, ms(0)).len(), 1);
}

#[test]
fn malformed_arp_is_dropped() {
    let mut net = net();
    let good = linux_request(LINUX_MAC, LINUX_IP, OUR_IP, false);
    let mut bad_htype = good.clone();
    bad_htype[15] = 6; // IEEE 802
    let mut bad_op = good.clone();
    bad_op[21] = 3; // RARP request
    let mut group_sender = good.clone();
    group_sender[22] = 0x01; // multicast sender MAC
    for (i, f) in [&good[..30], &bad_htype[..], &bad_op[..], &group_sender[..]]
        .into_iter()
        .enumerate()
    {
        assert_eq!(
            net.handle_frame(ms(0), f),
            Inbound::Dropped(DropReason::MalformedArp),
            "case {i}"
        );
    }
    assert_eq!(net.stats().dropped(DropReason::MalformedArp), 4);
    assert!(drain(&mut net, ms(0)).is_empty());
    assert_eq!(net.lookup(LINUX_IP.into()), None);
}

#[test]
fn someone_else_claiming_our_ip_is_reported() {
    let mut net = net();
    let req = linux_request(OTHER_MAC, OUR_IP, LINUX_IP, false);
    assert_eq!(net.handle_frame(ms(0), &req), Inbound::Consumed);
    assert_eq!(
        events(&mut net),
        vec![NetEvent::AddressConflict {
            ip: OUR_IP.into(),
            mac: OTHER_MAC
        }]
    );
    assert_eq!(net.stats().arp_conflicts, 1);
    assert!(drain(&mut net, ms(0)).is_empty());
}

#[test]
fn address_probe_is_answered_without_learning() {
    // RFC 5227 probe: sender IP 0.0.0.0.
    let mut net = net();
    let probe = linux_request(LINUX_MAC, Ipv4Addr::UNSPECIFIED, OUR_IP, false);
    assert_eq!(net.handle_frame(ms(0), &probe), Inbound::Consumed);
    let out = drain(&mut net, ms(0));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].arp().target_protocol_addr, Ipv4Addr::UNSPECIFIED);
    assert_eq!(out[0].ethernet().dst_addr, LINUX_MAC);
    assert_eq!(net.cache_len(), 0);
}

#[test]
fn reply_queue_is_bounded() {
    let mut c = config();
    c.tx_queue_capacity = 2;
    let mut net = Net::new(c).unwrap();
    let req = linux_request(LINUX_MAC, LINUX_IP, OUR_IP, false);
    for _ in 0..5 {
        net.handle_frame(ms(0), &req);
    }
    assert_eq!(drain(&mut net, ms(0)).len(), 2);
    assert_eq!(net.stats().tx_queue_full, 3);
}

#[test]
fn net_tap_kernel_sharing_our_mac_is_still_answered() {
    // On DPDK net_tap the kernel side of the tap and the DPDK port have the same MAC: the
    // kernel's request carries our MAC as sender, but another IP, and must be answered.
    let mut net = super::net();
    let req = linux_request(OUR_MAC, LINUX_IP, OUR_IP, true);
    assert_eq!(net.handle_frame(ms(0), &req), Inbound::Consumed);
    let out = drain(&mut net, ms(0));
    assert_eq!(out.len(), 1, "answered");
    assert_eq!(out[0].arp().target_protocol_addr, LINUX_IP);
    assert_eq!(out[0].ethernet().dst_addr, OUR_MAC);
    // Our own request reflected back (our MAC and our IP) is still ignored.
    let mut net = super::net();
    let own = linux_request(OUR_MAC, OUR_IP, LINUX_IP, true);
    assert_eq!(net.handle_frame(ms(0), &own), Inbound::Consumed);
    assert!(drain(&mut net, ms(0)).is_empty());
    assert_eq!(net.stats().arp_conflicts, 0, "a reflection is no conflict");
}
