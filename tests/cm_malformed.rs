//! Bad input to the CM: counted, dropped, never a panic, never a state change.

mod cm_common;

use cm_common::*;
use dpdk_roce::cm::timeout::cm_timeout;
use dpdk_roce::cm::{
    AcceptParams, Cm, CmEvent, ConnectParams, PEER_ACK_TIMEOUT_FOR_INFINITE, PEER_CM_TIMEOUT_MAX,
};
use dpdk_roce::time::Instant;
use dpdk_roce::transport::types::QpState;
use dpdk_roce::wire::cm_msg::{
    attr, CmMessage, DreqRepr, RejReason, RepRepr, ReqRepr, RtuRepr, DREQ_PRIVATE_LEN,
};
use dpdk_roce::wire::mad::MadHeader;
use dpdk_roce::wire::psn::Psn;
use proptest::prelude::*;

/// A pair with one established connection on port 1 and a listener on port 2, and B's REP.
fn established_pair() -> (Pair, RepRepr) {
    let mut p = Pair::new();
    p.b.listen(1).unwrap();
    p.b.listen(2).unwrap();
    p.a.connect(p.now, ConnectParams::new(IP_B, 1, 0x20, Psn::new(5)))
        .unwrap();
    let req = p.a.poll_transmit(p.now).unwrap().mad;
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    let Some(CmEvent::ConnectRequest { id, .. }) = p.b.poll_event() else {
        panic!()
    };
    p.b.accept(p.now, id, AcceptParams::new(0x30, Psn::new(9)), &mut p.qb)
        .unwrap();
    let rep = p.b.poll_transmit(p.now).unwrap().mad;
    let (_, CmMessage::Rep(r)) = CmMessage::parse(&rep).unwrap() else {
        panic!()
    };
    p.a.handle_mad(p.now, IP_B, &rep, &mut p.qa);
    p.run();
    assert!(matches!(p.ev_a[..], [CmEvent::Established { .. }]));
    assert!(matches!(p.ev_b[..], [CmEvent::Established { .. }]));
    p.ev_b.clear();
    (p, r)
}

fn valid_rtu() -> [u8; 256] {
    let mut m = [0u8; 256];
    CmMessage::Rtu(RtuRepr {
        local_comm_id: 0x1234,
        remote_comm_id: 0x5678,
        private_data: [0; 224],
    })
    .emit(&MadHeader::cm(attr::RTU, 1), &mut m);
    m
}

#[test]
fn malformed_mads_are_counted_and_dropped() {
    let (mut p, _) = established_pair();
    let before = (p.ev_a.len(), p.ev_b.len(), p.qb.log.len());
    let good = valid_rtu();
    let mut bad: Vec<Vec<u8>> = vec![good[..255].to_vec(), Vec::new()];
    for (i, v) in [(0usize, 2u8), (1, 0x81), (2, 1), (3, 0x81), (17, 0x17)] {
        let mut m = good;
        m[i] = v;
        bad.push(m.to_vec());
    }
    for m in &bad {
        p.b.handle_mad(p.now, IP_A, m, &mut p.qb);
    }
    assert_eq!(p.b.stats().malformed, bad.len() as u64);
    assert!(p.b.poll_transmit(p.now).is_none());
    assert!(p.b.poll_event().is_none());
    assert_eq!((p.ev_a.len(), p.ev_b.len(), p.qb.log.len()), before);
}

#[test]
fn comm_id_matching_nothing_is_counted() {
    let (mut p, _) = established_pair();
    p.b.handle_mad(p.now, IP_A, &valid_rtu(), &mut p.qb);
    assert_eq!(p.b.stats().unmatched, 1);
    assert!(p.b.poll_transmit(p.now).is_none());
    assert!(p.b.poll_event().is_none());
    // A MAD for a live connection from the wrong address is unmatched too.
    let mut q = Cm::new(IP_B, 1, 1);
    q.handle_mad(Instant::ZERO, IP_A, &valid_rtu(), &mut p.qb);
    assert_eq!(q.stats().unmatched, 1);
}

#[test]
fn dreq_for_unknown_connection_still_gets_drep() {
    let mut cm = Cm::new(IP_B, 1, 1);
    let mut q = QpRecorder::default();
    let mut m = [0u8; 256];
    CmMessage::Dreq(DreqRepr {
        local_comm_id: 0xaaaa,
        remote_comm_id: 0xbbbb,
        remote_qpn: 3,
        private_data: [0; DREQ_PRIVATE_LEN],
    })
    .emit(&MadHeader::cm(attr::DREQ, 77), &mut m);
    cm.handle_mad(Instant::ZERO, IP_A, &m, &mut q);
    let tx = cm.poll_transmit(Instant::ZERO).unwrap();
    let (h, CmMessage::Drep(d)) = CmMessage::parse(&tx.mad).unwrap() else {
        panic!()
    };
    assert_eq!(h.transaction_id, 77);
    assert_eq!((d.local_comm_id, d.remote_comm_id), (0xbbbb, 0xaaaa));
    assert_eq!(cm.stats().unmatched, 1);
    assert!(cm.poll_event().is_none());
}

#[test]
fn req_with_bad_mtu_or_transport_is_rejected() {
    let mut p = Pair::new();
    p.b.listen(1).unwrap();
    let (h, r) = a_req(&mut p);
    for (mtu, tt, reason) in [(0u8, 0u8, 26u16), (9, 0, 26), (3, 1, 9)] {
        let mut r2 = r;
        r2.path_mtu = mtu;
        r2.transport_type = tt;
        r2.local_comm_id ^= u32::from(mtu) << 8 | u32::from(tt);
        let mut m = [0u8; 256];
        CmMessage::Req(r2).emit(&h, &mut m);
        p.b.handle_mad(p.now, IP_A, &m, &mut p.qb);
        let tx = p.b.poll_transmit(p.now).unwrap();
        let (_, CmMessage::Rej(j)) = CmMessage::parse(&tx.mad).unwrap() else {
            panic!()
        };
        assert_eq!(j.reason.code(), reason);
    }
    assert!(p.b.poll_event().is_none());
    assert_eq!(p.b.connection_count(), 0);
}

/// A REQ whose P_Key is not in the port's partition table (the default partition) is
/// refused before the consumer sees it; a limited member of the default partition is taken.
#[test]
fn req_with_a_foreign_pkey_is_rejected() {
    let mut p = Pair::new();
    p.b.listen(1).unwrap();
    let (h, r) = a_req(&mut p);
    let mut m = [0u8; 256];
    CmMessage::Req(ReqRepr { pkey: 0x1234, ..r }).emit(&h, &mut m);
    p.b.handle_mad(p.now, IP_A, &m, &mut p.qb);
    let tx = p.b.poll_transmit(p.now).unwrap();
    let (_, CmMessage::Rej(j)) = CmMessage::parse(&tx.mad).unwrap() else {
        panic!()
    };
    assert_eq!(j.reason, RejReason::InvalidGid);
    assert!(p.b.poll_event().is_none());
    assert_eq!(p.b.stats().foreign_pkey, 1);
    let limited = ReqRepr {
        pkey: 0x7fff,
        local_comm_id: r.local_comm_id ^ 1,
        ..r
    };
    CmMessage::Req(limited).emit(&h, &mut m);
    p.b.handle_mad(p.now, IP_A, &m, &mut p.qb);
    assert!(matches!(
        p.b.poll_event(),
        Some(CmEvent::ConnectRequest { .. })
    ));
}

/// Timeouts a peer sends are clamped: a local ACK timeout of 0 ("forever") or out of range
/// becomes one in `PEER_ACK_TIMEOUT` on the accepted QP, and a CM response timeout of 31
/// (2.4 hours) times the REP's retransmission as `PEER_CM_TIMEOUT_MAX` (69 s) would.
#[test]
fn a_peers_timeouts_are_clamped() {
    for (sent, used) in [
        (0u8, PEER_ACK_TIMEOUT_FOR_INFINITE),
        (3, 8),
        (31, 22),
        (14, 14),
    ] {
        let mut p = Pair::new();
        p.b.listen(1).unwrap();
        let (h, mut r) = a_req(&mut p);
        r.primary_path.local_ack_timeout = sent;
        r.local_cm_response_timeout = 31;
        let mut m = [0u8; 256];
        CmMessage::Req(r).emit(&h, &mut m);
        p.b.handle_mad(p.now, IP_A, &m, &mut p.qb);
        let Some(CmEvent::ConnectRequest { id, .. }) = p.b.poll_event() else {
            panic!("no request")
        };
        p.b.accept(p.now, id, AcceptParams::new(0x30, Psn::new(9)), &mut p.qb)
            .unwrap();
        assert_eq!(p.qb.attr(0x30, QpState::Rtr).timeout, used, "sent {sent}");
        let rep = p.b.poll_transmit(p.now).expect("REP");
        assert_eq!(attr_of(&rep.mad), attr::REP);
        let later = p.now + cm_timeout(PEER_CM_TIMEOUT_MAX) + std::time::Duration::from_millis(1);
        p.b.handle_timeout(later, &mut p.qb);
        let again = p.b.poll_transmit(later).expect("the REP again within 69 s");
        assert_eq!(attr_of(&again.mad), attr::REP);
    }
}

fn feed(p: &mut Pair, mad: &[u8]) {
    p.b.handle_mad(p.now, IP_A, mad, &mut p.qb);
    p.a.handle_mad(p.now, IP_B, mad, &mut p.qa);
    // Whatever came out is a well-formed MAD.
    while let Some(t) = p.a.poll_transmit(p.now) {
        assert!(CmMessage::parse(&t.mad).is_ok());
    }
    while let Some(t) = p.b.poll_transmit(p.now) {
        assert!(CmMessage::parse(&t.mad).is_ok());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_mads_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let (mut p, _) = established_pair();
        feed(&mut p, &bytes);
    }

    /// Random attribute data behind a valid CM header, so every message handler is reached.
    #[test]
    fn random_cm_bodies_never_panic(
        attr_id in 0x0010u16..=0x0016,
        body in proptest::collection::vec(any::<u8>(), 232),
        live_ids in 0u8..3,
    ) {
        let (mut p, rep) = established_pair();
        let mut m = [0u8; 256];
        MadHeader::cm(attr_id, 1).emit(&mut dpdk_roce::wire::mad::Packet::new_unchecked(&mut m[..]));
        m[24..].copy_from_slice(&body);
        // Point the comm IDs at the live connection (as seen by A, or by B) so the state
        // machine, not only the lookup, is exercised.
        let (sender, receiver) = match live_ids {
            1 => (rep.local_comm_id, rep.remote_comm_id),
            2 => (rep.remote_comm_id, rep.local_comm_id),
            _ => (0, 0),
        };
        if live_ids != 0 {
            m[24..28].copy_from_slice(&sender.to_be_bytes());
            m[28..32].copy_from_slice(&receiver.to_be_bytes());
        }
        feed(&mut p, &m);
        p.run();
        for _ in 0..40 {
            if !p.advance() { break; }
        }
    }
}
