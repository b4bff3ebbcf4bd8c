//! The CM over IPv6 (annex A11.6's IP CM header with IP version 6, annex A17.4.3's GIDs):
//! two instances back to back over a virtual wire, and a dual-stack CM choosing the local
//! address of each peer's family.

mod cm_common;

use cm_common::*;
use dpdk_roce::cm::ip_cm::IpCmHeader;
use dpdk_roce::cm::{AcceptParams, Cm, CmError, CmEvent, ConnectParams, LocalIps};
use dpdk_roce::transport::types::QpState;
use dpdk_roce::wire::cm_msg::{attr, CmMessage, RejReason};
use dpdk_roce::wire::psn::Psn;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const PORT: u16 = 7471;
const V6_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1);
const V6_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 2);

fn v6_pair() -> Pair {
    Pair::with_ips(V6_A.into(), V6_B.into())
}

#[test]
fn an_ipv6_req_carries_whole_addresses_and_gids_and_connects() {
    let mut p = v6_pair();
    p.b.listen(PORT).unwrap();
    let mut cp = ConnectParams::new(V6_B, PORT, 0x17, Psn::new(5));
    cp.src_port = 40000;
    cp.private_data = b"hi".to_vec();
    p.a.connect(p.now, cp).unwrap();
    // A -> B  REQ  IP CM 0.0 IPv6 fd00:77::1:40000 -> fd00:77::2, GIDs = the addresses
    let t = p.a.poll_transmit(p.now).expect("a REQ");
    assert_eq!(t.dst, IpAddr::V6(V6_B));
    let (_, CmMessage::Req(req)) = CmMessage::parse(&t.mad).unwrap() else {
        panic!("A sent no REQ")
    };
    assert_eq!(
        req.private_data[1], 0x60,
        "IP version 6 in the header's high nibble"
    );
    let h = IpCmHeader::parse(&req.private_data).unwrap();
    assert_eq!(h.src_addr(), Ok(IpAddr::V6(V6_A)));
    assert_eq!(h.dst_addr(), Ok(IpAddr::V6(V6_B)));
    assert_eq!(h.src_port, 40000);
    assert_eq!(req.primary_path.local_gid, V6_A.octets());
    assert_eq!(req.primary_path.remote_gid, V6_B.octets());
    p.b.handle_mad(p.now, V6_A, &t.mad, &mut p.qb);
    let Some(CmEvent::ConnectRequest {
        id,
        src_ip,
        dst_ip,
        src_port,
        ..
    }) = p.b.poll_event()
    else {
        panic!("B has no connection request")
    };
    assert_eq!(
        (src_ip, dst_ip, src_port),
        (V6_A.into(), V6_B.into(), 40000)
    );
    // B -> A  REP, A -> B  RTU: both QPs in RTS.
    p.b.accept(p.now, id, AcceptParams::new(0x11, Psn::new(9)), &mut p.qb)
        .unwrap();
    p.run();
    assert_eq!(p.qa.state(0x17), QpState::Rts);
    assert_eq!(p.qb.state(0x11), QpState::Rts);
    assert!(p
        .ev_a
        .iter()
        .any(|e| matches!(e, CmEvent::Established { .. })));
}

#[test]
fn a_dual_stack_cm_speaks_from_the_address_of_each_peers_family() {
    let v4 = Ipv4Addr::new(10, 77, 0, 1);
    let mut cm = Cm::new(
        LocalIps {
            v4: Some(v4),
            v6: Some(V6_A),
        },
        0xa,
        1,
    );
    let now = dpdk_roce::time::Instant::from_nanos(1);
    for (peer, local) in [
        (IpAddr::V4(Ipv4Addr::new(10, 77, 0, 2)), IpAddr::V4(v4)),
        (IpAddr::V6(V6_B), IpAddr::V6(V6_A)),
    ] {
        cm.connect(now, ConnectParams::new(peer, PORT, 0x20, Psn::new(1)))
            .unwrap();
        let t = cm.poll_transmit(now).unwrap();
        let (_, CmMessage::Req(req)) = CmMessage::parse(&t.mad).unwrap() else {
            panic!("no REQ")
        };
        let h = IpCmHeader::parse(&req.private_data).unwrap();
        assert_eq!(
            (t.dst, h.src_addr(), h.dst_addr()),
            (peer, Ok(local), Ok(peer))
        );
    }
}

#[test]
fn a_port_without_the_peers_family_refuses_the_connect() {
    let now = dpdk_roce::time::Instant::from_nanos(1);
    let mut v4_only = Cm::new(IP_A, 0xa, 1);
    assert_eq!(
        v4_only.connect(now, ConnectParams::new(V6_B, PORT, 0x20, Psn::new(1))),
        Err(CmError::NoLocalAddress(V6_B.into()))
    );
    assert!(v4_only.poll_transmit(now).is_none(), "nothing sent");
}

#[test]
fn a_req_whose_header_family_is_not_the_frames_is_rejected() {
    // An IPv6 REQ (IP CM header version 6) arriving in an IPv4 frame: refused as malformed.
    let mut p = v6_pair();
    p.b = Cm::new(IP_B, 0xb, 2);
    p.b.listen(PORT).unwrap();
    p.a.connect(p.now, ConnectParams::new(V6_B, PORT, 0x20, Psn::new(1)))
        .unwrap();
    let req = p.a.poll_transmit(p.now).unwrap().mad;
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    assert!(p.b.poll_event().is_none(), "no connection request");
    assert_eq!(p.b.stats().malformed, 1);
    let rej = p.b.poll_transmit(p.now).expect("a REJ");
    assert_eq!(attr_of(&rej.mad), attr::REJ);
    let (_, CmMessage::Rej(r)) = CmMessage::parse(&rej.mad).unwrap() else {
        panic!("not a REJ")
    };
    assert_eq!(r.reason, RejReason::Unsupported);
}
