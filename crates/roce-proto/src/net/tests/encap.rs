//! Encapsulation to a resolved peer (annex A17.4) and the UDP source port entropy.

use super::*;
use crate::wire::udp::ROCEV2_PORT;
use std::collections::BTreeSet;

#[test]
fn source_port_in_range_and_stable() {
    assert_eq!(udp_source_port(0x11, 0x12), udp_source_port(0x11, 0x12));
    for (a, b) in [(0, 0), (1, 1), (0xff_ffff, 0xff_ffff), (u32::MAX, 7)] {
        assert!(udp_source_port(a, b) >= 0xc000, "{a:#x} {b:#x}");
    }
}

#[test]
fn source_ports_differ_across_qps() {
    // Consecutive local QPs to one peer QP never share a port.
    for dst in [1, 0x12, 0x00ab_cdef] {
        let ports: BTreeSet<u16> = (0x11..0x11 + 4096)
            .map(|q| udp_source_port(q, dst))
            .collect();
        assert_eq!(ports.len(), 4096, "dst {dst:#x}");
    }
    // Other shards (high QPN bits) and other peer QPs move the mapping.
    assert_ne!(
        udp_source_port(0x11, 0x12),
        udp_source_port(0x40_0011, 0x12)
    );
    let by_peer: BTreeSet<u16> = (1..1001).map(|d| udp_source_port(0x11, d)).collect();
    assert!(by_peer.len() > 900, "{} distinct", by_peer.len());
}

#[test]
fn frame_for_a_resolved_peer() {
    let mut net = resolved_net();
    let (eth, ip, udp) = net.frame_for(ms(1), LINUX_IP, 0x11, 0x12).unwrap();
    assert_eq!(eth.src_addr, OUR_MAC);
    assert_eq!(eth.dst_addr, LINUX_MAC);
    assert_eq!(eth.ethertype, EtherType::IPV4);
    assert_eq!((ip.src_addr, ip.dst_addr), (OUR_IP, LINUX_IP));
    assert_eq!(ip.protocol, IPPROTO_UDP);
    assert!(ip.dont_frag);
    assert_eq!((ip.ttl, ip.dscp, ip.ecn), (64, 0, 0));
    assert_eq!(udp.dst_port, ROCEV2_PORT);
    assert_eq!(udp.src_port, udp_source_port(0x11, 0x12));
    assert_eq!(udp.checksum, 0);
    let (_, ip2, _) = net.frame_for(ms(1), LINUX_IP, 0x11, 0x12).unwrap();
    assert_ne!(ip.ident, ip2.ident, "a new IP identification per packet");
}

#[test]
fn traffic_class_per_qp_then_destination_then_default() {
    let mut c = config();
    c.dscp = 26;
    c.ecn = 2;
    let mut net = Net::new(c).unwrap();
    net.add_static(LINUX_IP.into(), LINUX_MAC).unwrap();
    let ip30 = Ipv4Addr::new(192, 168, 2, 30);
    net.add_static(ip30.into(), OTHER_MAC).unwrap();
    net.set_dest_traffic_class(LINUX_IP.into(), TrafficClass::new(46, 1).unwrap());
    net.set_qp_traffic_class(0x20, TrafficClass::new(10, 0).unwrap());
    let tc = |net: &mut Net, dst, qp| {
        let (_, ip, _) = net.frame_for(ms(0), dst, qp, 1).unwrap();
        (ip.dscp, ip.ecn)
    };
    assert_eq!(tc(&mut net, ip30, 0x11), (26, 2), "default");
    assert_eq!(tc(&mut net, LINUX_IP, 0x11), (46, 1), "per destination");
    assert_eq!(tc(&mut net, LINUX_IP, 0x20), (10, 0), "per QP wins");
    assert_eq!(tc(&mut net, ip30, 0x20), (10, 0));
    net.encap_mut().clear_qp_traffic_class(0x20);
    assert_eq!(tc(&mut net, LINUX_IP, 0x20), (46, 1));
    assert_eq!(TrafficClass::new(64, 0), Err(ConfigError::Dscp(64)));
    assert_eq!(TrafficClass::new(0, 3), Err(ConfigError::Ecn(3)));
    assert_eq!(TrafficClass::new(26, 2).unwrap().tos(), 0x6a);
}

/// The template path writes the same bytes as building the whole frame from reprs.
#[test]
fn write_headers_matches_full_emit() {
    let mut net = resolved_net();
    net.set_qp_traffic_class(0x11, TrafficClass::new(26, 2).unwrap());
    let headers = RoceHeaders::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x12, Psn::new(9)));
    for (i, len) in [0usize, 1, 5, 100, 1024].into_iter().enumerate() {
        let payload: Vec<u8> = (0..len).map(|b| b as u8).collect();
        let (eth, ip, udp) = net.frame_for(ms(0), LINUX_IP, 0x11, 0x12).unwrap();
        let f = RoceFrame::new(eth, ip, udp, headers, &payload).unwrap();
        let mut full = vec![0u8; f.buffer_len()];
        f.emit(&mut full).unwrap();

        // Same packet through the template; its ident is the next one, so patch it back.
        let mut fast = full.clone();
        fast[..HEADERS_LEN].fill(0);
        let roce_len = full.len() - HEADERS_LEN;
        let n = net
            .write_headers(ms(0), LINUX_IP.into(), 0x11, 0x12, roce_len, &mut fast)
            .unwrap();
        assert_eq!(n, HEADERS_LEN);
        let p = ipv4::Packet::new_unchecked(&fast[14..]);
        assert!(p.verify_checksum(), "case {i}: patched checksum");
        assert_eq!(p.ident(), ip.ident.wrapping_add(1), "case {i}");
        let mut p = ipv4::Packet::new_unchecked(&mut fast[14..]);
        p.set_ident(ip.ident);
        p.fill_checksum();
        assert_eq!(fast, full, "case {i}: len {len}");
        assert_eq!(RoceFrame::parse(&fast).unwrap().payload, &payload[..]);
    }
}

#[test]
fn write_headers_checks_mtu_and_buffer() {
    let mut net = resolved_net();
    let mut buf = [0u8; 64];
    // 1500 - 20 - 8 = 1472 bytes fit after the UDP header.
    assert_eq!(
        net.write_headers(ms(0), LINUX_IP.into(), 1, 2, 1472, &mut buf),
        Ok(HEADERS_LEN)
    );
    assert_eq!(
        net.write_headers(ms(0), LINUX_IP.into(), 1, 2, 1473, &mut buf),
        Err(NetError::TooLong { len: 1473 })
    );
    assert_eq!(
        net.write_headers(ms(0), LINUX_IP.into(), 1, 2, 16, &mut buf[..41]),
        Err(NetError::BufferTooSmall { need: 42, have: 41 })
    );
    assert_eq!(
        net.write_headers(
            ms(0),
            Ipv4Addr::new(192, 168, 2, 77).into(),
            1,
            2,
            16,
            &mut buf
        ),
        Err(NetError::Pending(Ipv4Addr::new(192, 168, 2, 77).into()))
    );
}

#[test]
fn template_follows_a_mac_change() {
    let mut net = resolved_net();
    let mut buf = [0u8; 42];
    net.write_headers(ms(0), LINUX_IP.into(), 1, 2, 16, &mut buf)
        .unwrap();
    assert_eq!(&buf[..6], &LINUX_MAC.0);
    // Linux's address moves to another NIC and it tells us.
    net.handle_frame(
        ms(1),
        &arp_reply(OUR_MAC, OTHER_MAC, LINUX_IP, OUR_MAC, OUR_IP),
    );
    assert_eq!(
        events(&mut net),
        vec![NetEvent::Resolved {
            ip: LINUX_IP.into(),
            mac: OTHER_MAC
        }]
    );
    net.write_headers(ms(2), LINUX_IP.into(), 1, 2, 16, &mut buf)
        .unwrap();
    assert_eq!(&buf[..6], &OTHER_MAC.0);
    assert_eq!(&buf[6..12], &OUR_MAC.0);
}

#[test]
fn template_bytes_leave_variable_fields_zero() {
    let t = HeaderTemplate::ipv4(OUR_MAC, LINUX_MAC, OUR_IP, LINUX_IP, 64);
    let b = t.as_bytes();
    assert_eq!(t.dst_mac(), LINUX_MAC);
    assert_eq!(&b[12..14], &[0x08, 0x00]);
    assert_eq!(b[14], 0x45);
    assert_eq!(&b[16..18], &[0, 0], "total length");
    assert_eq!(&b[20..22], &[0x40, 0x00], "DF");
    assert_eq!((b[22], b[23]), (64, 17));
    assert_eq!(&b[24..26], &[0, 0], "checksum");
    assert_eq!(&b[36..38], &[0x12, 0xb7], "port 4791");
}
