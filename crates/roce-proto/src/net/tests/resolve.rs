//! Resolution: requests, retries on the virtual clock, failure, cache expiry and refresh.

use super::*;
use crate::wire::arp::ArpOperation;

/// Our request for 192.168.2.24, byte for byte.
const EXPECTED_REQUEST: [u8; 42] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // broadcast
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // us
    0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, // ARP request
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 192, 168, 2, 25, // sender: us
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 192, 168, 2, 24, // target: unknown MAC, Linux's IP
];

fn assert_request(f: &ArpFrame, ip: Ipv4Addr) {
    assert_eq!(f.ethernet().dst_addr, EthernetAddress::BROADCAST);
    assert_eq!(f.arp().operation, ArpOperation::Request);
    assert_eq!(f.arp().target_protocol_addr, ip);
}

#[test]
fn resolution_succeeds_on_reply() {
    let mut net = net();
    assert_eq!(net.resolve(ms(0), LINUX_IP.into()), Resolve::Pending);
    let out = drain(&mut net, ms(0));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].as_bytes(), &EXPECTED_REQUEST);
    // Asking again does not send again.
    assert_eq!(net.resolve(ms(10), LINUX_IP.into()), Resolve::Pending);
    assert!(drain(&mut net, ms(10)).is_empty());
    assert_eq!(
        net.frame_for(ms(10), LINUX_IP, 0x11, 0x12),
        Err(NetError::Pending(LINUX_IP.into()))
    );
    assert_eq!(net.poll_timeout(), Some(ms(1000)));

    assert_eq!(net.handle_frame(ms(20), &linux_reply()), Inbound::Consumed);
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Resolved {
            ip: LINUX_IP.into(),
            mac: LINUX_MAC
        }]
    );
    assert_eq!(
        net.resolve(ms(20), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
    assert_eq!(net.poll_timeout(), None, "nothing left to retry");
    assert!(drain(&mut net, ms(5000)).is_empty());
    assert_eq!(net.stats().resolved, 1);
    assert_eq!(net.stats().tx_arp_requests, 1);
}

#[test]
fn retries_every_interval_then_fails() {
    let mut net = net();
    assert_eq!(net.resolve(ms(0), LINUX_IP.into()), Resolve::Pending);
    let mut sent_at = Vec::new();
    for t in (0..=4500).step_by(100) {
        if let Some(d) = net.poll_timeout() {
            assert!(d >= ms(t), "deadline {d:?} missed at {t} ms");
        }
        for f in drain(&mut net, ms(t)) {
            assert_request(&f, LINUX_IP);
            sent_at.push(t);
        }
        if t < 4000 {
            assert_eq!(net.poll_event(), None, "no verdict before {t} ms");
        }
    }
    // The first request and 3 retries, one interval apart.
    assert_eq!(sent_at, vec![0, 1000, 2000, 3000]);
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Unresolvable {
            ip: LINUX_IP.into()
        }]
    );
    let unreachable = NetError::Unreachable {
        ip: LINUX_IP.into(),
        requests: 4,
    };
    assert_eq!(
        net.resolve(ms(4500), LINUX_IP.into()),
        Resolve::Failed(unreachable)
    );
    assert_eq!(
        net.frame_for(ms(4500), LINUX_IP, 0x11, 0x12),
        Err(unreachable)
    );
    assert_eq!(
        unreachable.to_string(),
        "192.168.2.24 is unreachable: no ARP reply after 4 requests"
    );
    assert_eq!(net.stats().unresolvable, 1);
    assert_eq!(net.stats().tx_arp_requests, 4);
    // After the hold time a new attempt starts.
    assert_eq!(net.resolve(ms(5000), LINUX_IP.into()), Resolve::Pending);
    assert_eq!(drain(&mut net, ms(5000)).len(), 1);
}

#[test]
fn late_reply_after_failure_resolves() {
    let mut net = net();
    net.resolve(ms(0), LINUX_IP.into());
    drain(&mut net, ms(0));
    net.handle_timeout(ms(1000));
    net.handle_timeout(ms(2000));
    net.handle_timeout(ms(3000));
    net.handle_timeout(ms(4000));
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Unresolvable {
            ip: LINUX_IP.into()
        }]
    );
    net.handle_frame(ms(4200), &linux_reply());
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Resolved {
            ip: LINUX_IP.into(),
            mac: LINUX_MAC
        }]
    );
    assert_eq!(
        net.resolve(ms(4200), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
}

#[test]
fn stale_entry_is_used_while_refreshed() {
    let mut net = net();
    net.resolve(ms(0), LINUX_IP.into());
    drain(&mut net, ms(0));
    net.handle_frame(ms(100), &linux_reply());
    events(&mut net);
    // Fresh: no traffic.
    assert_eq!(
        net.resolve(ms(30_099), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
    assert!(drain(&mut net, ms(30_099)).is_empty());
    // Stale: still usable, and one refresh request goes out.
    assert_eq!(
        net.resolve(ms(30_100), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
    assert_eq!(
        net.resolve(ms(30_200), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
    let out = drain(&mut net, ms(30_200));
    assert_eq!(out.len(), 1);
    assert_request(&out[0], LINUX_IP);
    assert_eq!(net.poll_timeout(), Some(ms(31_100)));
    // Answered: fresh again, no more retries.
    net.handle_frame(ms(30_300), &linux_reply());
    assert_eq!(net.poll_timeout(), None);
    assert!(drain(&mut net, ms(40_000)).is_empty());
    assert_eq!(events(&mut net), vec![], "same MAC: no event");
    assert_eq!(
        net.resolve(ms(60_299), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
    assert!(drain(&mut net, ms(60_299)).is_empty());
}

#[test]
fn failed_refresh_forgets_the_mac() {
    let mut net = net();
    net.resolve(ms(0), LINUX_IP.into());
    net.handle_frame(ms(0), &linux_reply());
    drain(&mut net, ms(0));
    events(&mut net);
    assert_eq!(
        net.resolve(ms(30_000), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
    let mut sent = 0;
    for t in (30_000..=34_000).step_by(500) {
        sent += drain(&mut net, ms(t)).len();
    }
    assert_eq!(sent, 4);
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Unresolvable {
            ip: LINUX_IP.into()
        }]
    );
    assert_eq!(net.lookup(LINUX_IP.into()), None);
    assert!(matches!(
        net.resolve(ms(34_000), LINUX_IP.into()),
        Resolve::Failed(NetError::Unreachable { .. })
    ));
}

#[test]
fn address_errors_are_clear() {
    let mut net = net();
    let far = Ipv4Addr::new(10, 1, 2, 3);
    let no_route = NetError::NoRoute {
        ip: far.into(),
        subnet: Ipv4Addr::new(192, 168, 2, 0).into(),
        prefix_len: 24,
    };
    assert_eq!(net.resolve(ms(0), far.into()), Resolve::Failed(no_route));
    assert_eq!(
        no_route.to_string(),
        "no route to 10.1.2.3: not in our subnet 192.168.2.0/24, and no route or gateway covers it"
    );
    // Our own address is ours at once (loopback through the port), with no ARP.
    assert_eq!(
        net.resolve(ms(0), OUR_IP.into()),
        Resolve::Ready(net.config().mac)
    );
    assert!(NetError::Loopback(IpAddr::from(Ipv4Addr::LOCALHOST))
        .to_string()
        .contains("not on the port"));
    for ip in [
        Ipv4Addr::new(192, 168, 2, 255),
        Ipv4Addr::new(192, 168, 2, 0),
        Ipv4Addr::BROADCAST,
        Ipv4Addr::UNSPECIFIED,
        Ipv4Addr::new(224, 0, 0, 1),
    ] {
        assert_eq!(
            net.resolve(ms(0), ip.into()),
            Resolve::Failed(NetError::NotUnicast(ip.into())),
            "{ip}"
        );
    }
    assert_eq!(
        net.resolve(ms(0), Ipv4Addr::LOCALHOST.into()),
        Resolve::Failed(NetError::Loopback(IpAddr::from(Ipv4Addr::LOCALHOST)))
    );
    assert!(
        drain(&mut net, ms(0)).is_empty(),
        "no ARP for bad addresses"
    );
    assert_eq!(net.cache_len(), 0);
}

#[test]
fn cache_capacity_is_bounded() {
    let mut c = config();
    c.arp_cache_capacity = 2;
    let mut net = Net::new(c).unwrap();
    let ip = |n| Ipv4Addr::new(192, 168, 2, n);
    assert_eq!(net.resolve(ms(0), ip(1).into()), Resolve::Pending);
    // A reply settles 192.168.2.1.
    net.handle_frame(
        ms(1),
        &arp_reply(OUR_MAC, OTHER_MAC, ip(1), OUR_MAC, OUR_IP),
    );
    assert_eq!(net.lookup(ip(1).into()), Some(OTHER_MAC));
    assert_eq!(net.resolve(ms(2), ip(2).into()), Resolve::Pending);
    // Full: a newcomer pushes out the oldest pending entry, reported unresolvable, not the
    // neighbour that answered.
    assert_eq!(net.resolve(ms(3), ip(3).into()), Resolve::Pending);
    assert_eq!(net.lookup(ip(1).into()), Some(OTHER_MAC));
    assert_eq!(net.cache_len(), 2);
    assert_eq!(net.stats().cache_evictions, 1);
    let mut events = Vec::new();
    while let Some(e) = net.poll_event() {
        events.push(e);
    }
    assert!(
        events.contains(&NetEvent::Unresolvable { ip: ip(2).into() }),
        "{events:?}"
    );
    // A flood of newcomers keeps the table at its size and the answered neighbour in it.
    for n in 100..=250 {
        assert_eq!(net.resolve(ms(4), ip(n).into()), Resolve::Pending, "{n}");
    }
    assert_eq!(net.cache_len(), 2);
    assert_eq!(net.lookup(ip(1).into()), Some(OTHER_MAC));
}

#[test]
fn static_neighbours_never_expire() {
    let mut net = net();
    net.add_static(LINUX_IP.into(), LINUX_MAC).unwrap();
    assert_eq!(
        net.resolve(ms(1_000_000), LINUX_IP.into()),
        Resolve::Ready(LINUX_MAC)
    );
    assert!(drain(&mut net, ms(1_000_000)).is_empty());
    assert_eq!(
        net.add_static(Ipv4Addr::new(10, 0, 0, 1).into(), LINUX_MAC),
        Err(NetError::NoRoute {
            ip: Ipv4Addr::new(10, 0, 0, 1).into(),
            subnet: Ipv4Addr::new(192, 168, 2, 0).into(),
            prefix_len: 24
        })
    );
    assert!(net.remove_neighbour(LINUX_IP.into()));
    assert_eq!(net.lookup(LINUX_IP.into()), None);
}
