//! The CM state machine, two instances back to back over a virtual wire.

mod cm_common;

use cm_common::*;
use dpdk_roce::cm::timeout::cm_timeout;
use dpdk_roce::cm::{AcceptParams, CmError, CmEvent, CmId, ConnectParams};
use dpdk_roce::transport::types::{Mtu, QpState};
use dpdk_roce::wire::cm_msg::{attr, CmMessage, MsgRef, RejReason};
use dpdk_roce::wire::psn::Psn;
use std::collections::HashSet;

const PORT: u16 = 7471;
const QPN_A: u32 = 0x17;
const QPN_B: u32 = 0x11;
const PSN_A: u32 = 0x89bb0e;
const PSN_B: u32 = 0xc23298;

fn connect(p: &mut Pair, private: &[u8]) -> CmId {
    let mut cp = ConnectParams::new(IP_B, PORT, QPN_A, Psn::new(PSN_A));
    cp.src_port = 40000;
    cp.private_data = private.to_vec();
    cp.responder_resources = 4;
    cp.initiator_depth = 2;
    let id = p.a.connect(p.now, cp).unwrap();
    p.run();
    id
}

/// The single ConnectRequest B has seen.
fn request_id(p: &Pair) -> CmId {
    let reqs: Vec<CmId> = p
        .ev_b
        .iter()
        .filter_map(|e| match e {
            CmEvent::ConnectRequest { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 1, "events: {:?}", p.ev_b);
    reqs[0]
}

fn accept(p: &mut Pair, id: CmId, private: &[u8]) {
    let mut ap = AcceptParams::new(QPN_B, Psn::new(PSN_B));
    ap.private_data = private.to_vec();
    ap.responder_resources = 8;
    ap.initiator_depth = 8;
    p.b.accept(p.now, id, ap, &mut p.qb).unwrap();
    p.run();
}

fn established(ev: &[CmEvent], id: CmId) -> bool {
    ev.iter()
        .any(|e| matches!(e, CmEvent::Established { id: i, .. } if *i == id))
}

fn establish(p: &mut Pair) -> (CmId, CmId) {
    p.b.listen(PORT).unwrap();
    let a = connect(p, b"hi");
    let b = request_id(p);
    accept(p, b, b"welcome");
    assert!(established(&p.ev_a, a) && established(&p.ev_b, b));
    (a, b)
}

#[test]
fn connect_accept_establish() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    let a = connect(&mut p, b"hello");
    match &p.ev_b[..] {
        [CmEvent::ConnectRequest {
            port,
            src_ip,
            src_port,
            dst_ip,
            remote_qpn,
            remote_ca_guid,
            responder_resources,
            initiator_depth,
            pmtu,
            private_data,
            ..
        }] => {
            assert_eq!(*port, PORT);
            assert_eq!(*src_ip, IP_A);
            assert_eq!(*src_port, 40000);
            assert_eq!(*dst_ip, IP_B);
            assert_eq!(*remote_qpn, QPN_A);
            assert_eq!(*remote_ca_guid, 0x0002_c903_0000_000a);
            assert_eq!((*responder_resources, *initiator_depth), (4, 2));
            assert_eq!(*pmtu, Mtu::Mtu1024);
            assert_eq!(private_data.len(), 56);
            assert_eq!(&private_data[..5], b"hello");
            assert!(private_data[5..].iter().all(|&b| b == 0));
        }
        other => panic!("{other:?}"),
    }
    assert!(p.ev_a.is_empty());
    let b = request_id(&p);
    // Nothing moves until the consumer answers.
    assert_eq!(p.qb.transitions(QPN_B), vec![]);
    accept(&mut p, b, b"welcome");

    match &p.ev_a[..] {
        [CmEvent::Established { id, private_data }] => {
            assert_eq!(*id, a);
            assert_eq!(&private_data[..7], b"welcome");
        }
        other => panic!("{other:?}"),
    }
    assert!(established(&p.ev_b, b));
    assert_eq!(
        p.wire.iter().map(|w| (w.0, w.1)).collect::<Vec<_>>(),
        vec![
            (Side::A, attr::REQ),
            (Side::B, attr::REP),
            (Side::A, attr::RTU)
        ]
    );
    use QpState::*;
    assert_eq!(p.qa.transitions(QPN_A), vec![Init, Rtr, Rts]);
    assert_eq!(p.qb.transitions(QPN_B), vec![Init, Rtr, Rts]);
    let aa = p.qa.attr(QPN_A, Rts);
    let ba = p.qb.attr(QPN_B, Rts);
    // Each side's send PSN is the other's receive PSN.
    assert_eq!(aa.rq_psn, Psn::new(PSN_A));
    assert_eq!(aa.sq_psn, Psn::new(PSN_B));
    assert_eq!(ba.rq_psn, Psn::new(PSN_B));
    assert_eq!(ba.sq_psn, Psn::new(PSN_A));
    assert_eq!(aa.dest_qpn, QPN_B);
    assert_eq!(ba.dest_qpn, QPN_A);
    assert_eq!((aa.pmtu, ba.pmtu), (Mtu::Mtu1024, Mtu::Mtu1024));
    // A offered 4 responder resources and 2 initiator depth; B wanted 8/8 and is capped.
    assert_eq!((ba.max_dest_rd_atomic, ba.max_rd_atomic), (2, 4));
    assert_eq!((aa.max_dest_rd_atomic, aa.max_rd_atomic), (4, 2));
    assert_eq!((aa.retry_cnt, ba.retry_cnt), (7, 7));
    assert_eq!((aa.timeout, ba.timeout), (19, 19));
    assert_eq!((aa.rnr_retry, ba.rnr_retry), (7, 7));
    // B's RTR already carried everything but the RTS-only fields.
    assert_eq!(p.qb.attr(QPN_B, Rtr).rq_psn, Psn::new(PSN_B));
    assert_eq!(p.a.poll_timeout(), None);
    assert_eq!(p.b.poll_timeout(), None);
}

#[test]
fn reject_with_private_data() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    let a = connect(&mut p, b"");
    let b = request_id(&p);
    p.b.reject(p.now, b, b"go away").unwrap();
    p.run();
    match &p.ev_a[..] {
        [CmEvent::Rejected {
            id,
            reason,
            private_data,
        }] => {
            assert_eq!(*id, a);
            assert_eq!(*reason, RejReason::ConsumerDefined);
            assert_eq!(private_data.len(), 148);
            assert_eq!(&private_data[..7], b"go away");
        }
        other => panic!("{other:?}"),
    }
    assert!(p.qa.log.is_empty() && p.qb.log.is_empty());
    assert_eq!(
        p.a.poll_timeout(),
        None,
        "active side forgot the connection"
    );
    assert_eq!(p.a.connection_count(), 0);
    // Answering twice is refused.
    assert_eq!(
        p.b.accept(p.now, b, AcceptParams::new(QPN_B, Psn::new(0)), &mut p.qb),
        Err(CmError::InvalidState)
    );
    assert_eq!(
        p.b.reject(p.now, b, &[0; 149]),
        Err(CmError::PrivateDataTooLong { len: 149, max: 148 })
    );
}

#[test]
fn no_listener_is_rejected_with_invalid_service_id() {
    let mut p = Pair::new();
    p.b.listen(PORT + 1).unwrap();
    let a = connect(&mut p, b"");
    assert!(p.ev_b.is_empty());
    assert_eq!(
        p.ev_a,
        vec![CmEvent::Rejected {
            id: a,
            reason: RejReason::InvalidServiceId,
            private_data: vec![0; 148]
        }]
    );
    assert_eq!(p.b.connection_count(), 0);
    // unlisten makes a listened port behave the same.
    p.b.unlisten(PORT + 1).unwrap();
    assert_eq!(p.b.unlisten(PORT + 1), Err(CmError::InvalidState));
}

#[test]
fn lost_req_is_retransmitted() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.drop_next(Side::A, attr::REQ, 1);
    let t0 = p.now;
    let a = connect(&mut p, b"");
    assert!(p.ev_b.is_empty());
    assert_eq!(p.a.poll_timeout(), Some(t0 + cm_timeout(20)));
    p.advance();
    assert_eq!(p.sent(Side::A, attr::REQ), 2);
    assert_eq!(p.a.stats().retransmits, 1);
    let b = request_id(&p);
    accept(&mut p, b, b"");
    assert!(established(&p.ev_a, a) && established(&p.ev_b, b));
}

#[test]
fn lost_rep_is_retransmitted() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.drop_next(Side::B, attr::REP, 1);
    let a = connect(&mut p, b"");
    let b = request_id(&p);
    accept(&mut p, b, b"");
    assert!(p.ev_a.is_empty());
    // A's REQ timer and B's REP timer are both 4.3 s: whichever fires, the REP gets through
    // (a repeated REQ is answered with the saved REP).
    p.advance_until(3, |p| established(&p.ev_b, b));
    assert!(established(&p.ev_a, a));
    assert_eq!(
        p.ev_b.len(),
        2,
        "one ConnectRequest, one Established: {:?}",
        p.ev_b
    );
    assert!(p.sent(Side::B, attr::REP) >= 2);
    assert_eq!(
        p.qb.transitions(QPN_B),
        vec![QpState::Init, QpState::Rtr, QpState::Rts]
    );
}

#[test]
fn lost_rtu_recovered_by_rep_retransmission() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.drop_next(Side::A, attr::RTU, 1);
    let a = connect(&mut p, b"");
    let b = request_id(&p);
    accept(&mut p, b, b"");
    assert!(established(&p.ev_a, a));
    assert!(!established(&p.ev_b, b));
    p.advance();
    assert_eq!(p.sent(Side::B, attr::REP), 2);
    assert_eq!(p.sent(Side::A, attr::RTU), 2);
    assert_eq!(p.a.stats().duplicates, 1);
    assert!(established(&p.ev_b, b));
    // A did not move its QP twice.
    assert_eq!(p.qa.transitions(QPN_A).len(), 3);
}

#[test]
fn implicit_rtu_from_first_data_packet() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.drop_next(Side::A, attr::RTU, 1);
    connect(&mut p, b"");
    let b = request_id(&p);
    accept(&mut p, b, b"");
    assert!(!established(&p.ev_b, b));
    p.b.implicit_rtu(p.now, QPN_B, &mut p.qb);
    p.run();
    assert!(established(&p.ev_b, b));
    assert_eq!(p.qb.state(QPN_B), QpState::Rts);
    assert_eq!(
        p.b.poll_timeout(),
        None,
        "no REP retransmission after implicit RTU"
    );
}

#[test]
fn all_reqs_lost_gives_unreachable_after_max_retries() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.drop_next(Side::A, attr::REQ, usize::MAX);
    let t0 = p.now;
    let a = connect(&mut p, b"");
    p.advance_until(20, |p| !p.ev_a.is_empty());
    assert_eq!(p.ev_a, vec![CmEvent::Unreachable { id: a }]);
    // 1 + max CM retries (15) REQs, each after a 4.096 us * 2^20 wait.
    assert_eq!(p.sent(Side::A, attr::REQ), 16);
    assert_eq!(p.now, t0 + cm_timeout(20) * 16);
    // Then a REJ with reason Timeout went out.
    let rej = p.wire.last().unwrap();
    assert_eq!((rej.0, rej.1), (Side::A, attr::REJ));
    assert!(p.ev_b.is_empty());
    assert!(p.qa.log.is_empty());
    // The time-wait ends and nothing is left.
    while p.advance() {}
    assert_eq!(p.a.connection_count(), 0);
}

#[test]
fn timeout_rej_carries_reason_timeout() {
    let mut p = Pair::new();
    p.drop_next(Side::A, attr::REQ, usize::MAX);
    p.a.connect(p.now, ConnectParams::new(IP_B, PORT, QPN_A, Psn::new(1)))
        .unwrap();
    let mut last = None;
    loop {
        while let Some(t) = p.a.poll_transmit(p.now) {
            last = Some(t.mad);
        }
        let Some(t) = p.a.poll_timeout() else { break };
        p.now = t;
        p.a.handle_timeout(p.now, &mut p.qa);
        if p.a.poll_event().is_some() {
            while let Some(t) = p.a.poll_transmit(p.now) {
                last = Some(t.mad);
            }
            break;
        }
    }
    let (_, m) = CmMessage::parse(&last.unwrap()).unwrap();
    let CmMessage::Rej(r) = m else {
        panic!("{m:?}")
    };
    assert_eq!(r.reason, RejReason::Timeout);
    assert_eq!(r.msg_rejected, MsgRef::Other);
    assert_eq!(r.reject_info_length, 8);
    assert_eq!(&r.ari[..8], &0x0002_c903_0000_000au64.to_be_bytes());
}

#[test]
fn passive_rep_retries_exhausted() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    let a = connect(&mut p, b"");
    let b = request_id(&p);
    // From now on A hears nothing from B.
    p.drop_next(Side::B, attr::REP, usize::MAX);
    p.drop_next(Side::B, attr::REJ, usize::MAX);
    accept(&mut p, b, b"");
    p.advance_until(40, |p| {
        p.ev_b
            .iter()
            .any(|e| matches!(e, CmEvent::Unreachable { .. }))
    });
    assert!(p.ev_b.contains(&CmEvent::Unreachable { id: b }));
    assert_eq!(p.qb.state(QPN_B), QpState::Error);
    assert!(p.ev_a.contains(&CmEvent::Unreachable { id: a }));
    assert!(p.sent(Side::B, attr::REP) >= 16);
}

#[test]
fn duplicate_req_gives_one_connect_request_then_mra_then_rep() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.a.connect(
        p.now,
        ConnectParams::new(IP_B, PORT, QPN_A, Psn::new(PSN_A)),
    )
    .unwrap();
    let req = p.a.poll_transmit(p.now).unwrap().mad;
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    let mut evs = Vec::new();
    while let Some(e) = p.b.poll_event() {
        evs.push(e);
    }
    assert_eq!(evs.len(), 1);
    let CmEvent::ConnectRequest { id: b, .. } = evs[0] else {
        panic!()
    };
    // The duplicate got an MRA for the REQ.
    let mra = p.b.poll_transmit(p.now).unwrap();
    let (_, m) = CmMessage::parse(&mra.mad).unwrap();
    let CmMessage::Mra(m) = m else {
        panic!("{m:?}")
    };
    assert_eq!(m.msg_mraed, MsgRef::Req);
    assert_eq!(m.service_timeout, 24);
    assert_eq!(m.local_comm_id, b.0);
    // The MRA pushes A's REQ timer out by the service timeout.
    let before = p.a.poll_timeout().unwrap();
    p.a.handle_mad(p.now, IP_B, &mra.mad, &mut p.qa);
    assert_eq!(
        p.a.poll_timeout().unwrap(),
        p.now + cm_timeout(24) + cm_timeout(20)
    );
    assert!(p.a.poll_timeout().unwrap() > before);
    // Once accepted, a duplicate REQ is answered with the saved REP.
    p.b.accept(
        p.now,
        b,
        AcceptParams::new(QPN_B, Psn::new(PSN_B)),
        &mut p.qb,
    )
    .unwrap();
    let rep = p.b.poll_transmit(p.now).unwrap().mad;
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    assert_eq!(p.b.poll_transmit(p.now).unwrap().mad, rep);
    assert!(p.b.poll_event().is_none());
    assert_eq!(p.b.stats().duplicates, 2);
}

#[test]
fn duplicate_req_after_reject_resends_rej() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.a.connect(
        p.now,
        ConnectParams::new(IP_B, PORT, QPN_A, Psn::new(PSN_A)),
    )
    .unwrap();
    let req = p.a.poll_transmit(p.now).unwrap().mad;
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    let Some(CmEvent::ConnectRequest { id, .. }) = p.b.poll_event() else {
        panic!()
    };
    p.b.reject(p.now, id, b"no").unwrap();
    let rej = p.b.poll_transmit(p.now).unwrap().mad;
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    assert_eq!(p.b.poll_transmit(p.now).unwrap().mad, rej);
    assert!(p.b.poll_event().is_none());
}

#[test]
fn disconnect_from_active() {
    let mut p = Pair::new();
    let (a, b) = establish(&mut p);
    p.ev_a.clear();
    p.ev_b.clear();
    p.a.disconnect(p.now, a, &mut p.qa).unwrap();
    assert_eq!(p.qa.state(QPN_A), QpState::Error);
    p.run();
    assert_eq!(p.ev_a, vec![CmEvent::Disconnected { id: a }]);
    assert_eq!(p.ev_b, vec![CmEvent::Disconnected { id: b }]);
    assert_eq!(p.qb.state(QPN_B), QpState::Error);
    assert_eq!(p.sent(Side::A, attr::DREQ), 1);
    assert_eq!(p.sent(Side::B, attr::DREP), 1);
    // Disconnecting again is a no-op; time-wait then forgets both.
    p.a.disconnect(p.now, a, &mut p.qa).unwrap();
    p.b.disconnect(p.now, b, &mut p.qb).unwrap();
    while p.advance() {}
    assert_eq!((p.a.connection_count(), p.b.connection_count()), (0, 0));
    assert_eq!(p.a.disconnect(p.now, a, &mut p.qa), Err(CmError::UnknownId));
    assert_eq!(p.sent(Side::A, attr::DREQ), 1);
}

#[test]
fn disconnect_from_passive() {
    let mut p = Pair::new();
    let (a, b) = establish(&mut p);
    p.b.disconnect(p.now, b, &mut p.qb).unwrap();
    p.run();
    assert!(p.ev_a.contains(&CmEvent::Disconnected { id: a }));
    assert!(p.ev_b.contains(&CmEvent::Disconnected { id: b }));
    assert_eq!(p.qa.state(QPN_A), QpState::Error);
    assert_eq!(p.qb.state(QPN_B), QpState::Error);
    assert_eq!(p.sent(Side::B, attr::DREQ), 1);
    assert_eq!(p.sent(Side::A, attr::DREP), 1);
}

#[test]
fn lost_dreq_is_retransmitted() {
    let mut p = Pair::new();
    let (a, b) = establish(&mut p);
    p.drop_next(Side::A, attr::DREQ, 1);
    p.a.disconnect(p.now, a, &mut p.qa).unwrap();
    p.run();
    assert!(!p.ev_b.contains(&CmEvent::Disconnected { id: b }));
    p.advance();
    assert_eq!(p.sent(Side::A, attr::DREQ), 2);
    assert!(p.ev_a.contains(&CmEvent::Disconnected { id: a }));
    assert!(p.ev_b.contains(&CmEvent::Disconnected { id: b }));
}

#[test]
fn lost_drep_answered_by_saved_drep() {
    let mut p = Pair::new();
    let (a, b) = establish(&mut p);
    p.drop_next(Side::B, attr::DREP, 1);
    p.a.disconnect(p.now, a, &mut p.qa).unwrap();
    p.run();
    assert!(p.ev_b.contains(&CmEvent::Disconnected { id: b }));
    p.advance();
    assert_eq!(p.sent(Side::B, attr::DREP), 2);
    assert_eq!(p.b.stats().duplicates, 1);
    let disc_b = p
        .ev_b
        .iter()
        .filter(|e| matches!(e, CmEvent::Disconnected { .. }))
        .count();
    assert_eq!(disc_b, 1);
    assert!(p.ev_a.contains(&CmEvent::Disconnected { id: a }));
}

#[test]
fn all_dreqs_lost_disconnects_anyway() {
    let mut p = Pair::new();
    let (a, _) = establish(&mut p);
    p.drop_next(Side::A, attr::DREQ, usize::MAX);
    p.a.disconnect(p.now, a, &mut p.qa).unwrap();
    p.advance_until(20, |p| p.ev_a.contains(&CmEvent::Disconnected { id: a }));
    assert_eq!(p.sent(Side::A, attr::DREQ), 16);
    assert_eq!(p.qa.state(QPN_A), QpState::Error);
}

#[test]
fn hundred_concurrent_connections_on_one_port() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    let mut ids_a = Vec::new();
    for i in 0..100u32 {
        let mut cp = ConnectParams::new(IP_B, PORT, 0x100 + i, Psn::new(i * 1000));
        cp.private_data = i.to_be_bytes().to_vec();
        ids_a.push(p.a.connect(p.now, cp).unwrap());
    }
    p.run();
    let reqs: Vec<(CmId, Vec<u8>)> = p
        .ev_b
        .iter()
        .filter_map(|e| match e {
            CmEvent::ConnectRequest {
                id, private_data, ..
            } => Some((*id, private_data.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 100);
    for (id, pd) in &reqs {
        let i = u32::from_be_bytes([pd[0], pd[1], pd[2], pd[3]]);
        p.b.accept(
            p.now,
            *id,
            AcceptParams::new(0x1000 + i, Psn::new(i + 7)),
            &mut p.qb,
        )
        .unwrap();
    }
    p.run();
    let est_a = p
        .ev_a
        .iter()
        .filter(|e| matches!(e, CmEvent::Established { .. }))
        .count();
    let est_b = p
        .ev_b
        .iter()
        .filter(|e| matches!(e, CmEvent::Established { .. }))
        .count();
    assert_eq!((est_a, est_b), (100, 100));
    let distinct_a: HashSet<CmId> = ids_a.iter().copied().collect();
    let distinct_b: HashSet<CmId> = reqs.iter().map(|r| r.0).collect();
    assert_eq!((distinct_a.len(), distinct_b.len()), (100, 100));
    // Every active QP is wired to the passive QP that accepted its request.
    for i in 0..100u32 {
        let a = p.qa.attr(0x100 + i, QpState::Rts);
        assert_eq!(a.dest_qpn, 0x1000 + i);
        assert_eq!(a.sq_psn, Psn::new(i + 7));
        let b = p.qb.attr(0x1000 + i, QpState::Rts);
        assert_eq!(b.dest_qpn, 0x100 + i);
        assert_eq!(b.sq_psn, Psn::new(i * 1000));
    }
}

#[test]
fn same_seed_same_ids() {
    let mut p1 = Pair::new();
    let mut p2 = Pair::new();
    let c = |p: &mut Pair| {
        p.a.connect(p.now, ConnectParams::new(IP_B, PORT, 5, Psn::new(0)))
            .unwrap()
    };
    assert_eq!(c(&mut p1), c(&mut p2));
    assert_eq!(
        p1.a.poll_transmit(p1.now).unwrap().mad,
        p2.a.poll_transmit(p2.now).unwrap().mad
    );
}

#[test]
fn qp_failure_on_accept_rejects() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    let a = connect(&mut p, b"");
    let b = request_id(&p);
    p.qb.fail = Some((QPN_B, QpState::Rtr));
    let r =
        p.b.accept(p.now, b, AcceptParams::new(QPN_B, Psn::new(1)), &mut p.qb);
    assert!(matches!(r, Err(CmError::Qp(_))));
    p.run();
    assert!(matches!(
        p.ev_a[..],
        [CmEvent::Rejected {
            reason: RejReason::NoResources,
            ..
        }]
    ));
    assert!(p.ev_a.iter().all(|e| match e {
        CmEvent::Rejected { id, .. } => *id == a,
        _ => false,
    }));
}

#[test]
fn qp_failure_on_rep_sends_rej_and_reports() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.qa.fail = Some((QPN_A, QpState::Rts));
    let a = connect(&mut p, b"");
    let b = request_id(&p);
    accept(&mut p, b, b"");
    assert!(matches!(p.ev_a[..], [CmEvent::ConnectError { id, .. }] if id == a));
    assert!(p.ev_b.iter().any(|e| matches!(
        e,
        CmEvent::Rejected { id, reason: RejReason::NoResources, .. } if *id == b
    )));
    assert_eq!(p.qa.state(QPN_A), QpState::Error);
    assert_eq!(p.qb.state(QPN_B), QpState::Error);
}

#[test]
fn consumer_argument_checks() {
    let mut p = Pair::new();
    let mut cp = ConnectParams::new(IP_B, PORT, 5, Psn::new(0));
    cp.private_data = vec![0; 57];
    assert_eq!(
        p.a.connect(p.now, cp),
        Err(CmError::PrivateDataTooLong { len: 57, max: 56 })
    );
    assert_eq!(p.a.listen(1), Ok(()));
    assert_eq!(p.a.listen(1), Err(CmError::PortInUse(1)));
    assert_eq!(
        p.a.accept(
            p.now,
            CmId(42),
            AcceptParams::new(1, Psn::new(0)),
            &mut p.qa
        ),
        Err(CmError::UnknownId)
    );
    let id =
        p.a.connect(p.now, ConnectParams::new(IP_B, PORT, 5, Psn::new(0)))
            .unwrap();
    assert_eq!(
        p.a.disconnect(p.now, id, &mut p.qa),
        Err(CmError::InvalidState)
    );
    assert_eq!(
        p.a.accept(p.now, id, AcceptParams::new(1, Psn::new(0)), &mut p.qa),
        Err(CmError::InvalidState)
    );
}

/// dat_ep_connect's `timeout` (ConnectParams::timeout): the REQ goes unanswered, and at the
/// consumer's deadline (before the CM's own retries run out) the connection times out with a
/// REJ (Timeout) to the peer and no further REQ.
#[test]
fn connect_timeout_expires_before_the_cm_retries() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.drop_next(Side::A, attr::REQ, usize::MAX);
    let t0 = p.now;
    let mut cp = ConnectParams::new(IP_B, PORT, QPN_A, Psn::new(PSN_A));
    let limit = cm_timeout(20) * 2 + std::time::Duration::from_millis(500);
    cp.timeout = Some(limit);
    let a = p.a.connect(p.now, cp).unwrap();
    p.run();
    p.advance_until(20, |p| !p.ev_a.is_empty());
    assert_eq!(p.ev_a, vec![CmEvent::TimedOut { id: a }]);
    assert_eq!(p.now, t0 + limit, "timed out exactly at the deadline");
    // The first REQ and two retransmissions (at 4.3 s and 8.6 s), then the REJ.
    assert_eq!(p.sent(Side::A, attr::REQ), 3);
    let rej = p.wire.last().unwrap();
    assert_eq!((rej.0, rej.1), (Side::A, attr::REJ));
    // Nothing else happens to the consumer; the time-wait ends and nothing is left.
    while p.advance() {}
    assert_eq!(p.ev_a, vec![CmEvent::TimedOut { id: a }]);
    assert_eq!(p.sent(Side::A, attr::REQ), 3);
    assert_eq!(p.a.connection_count(), 0);
}

/// A connect timeout does not fire once the connection is established.
#[test]
fn connect_timeout_is_disarmed_by_the_rep() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    let mut cp = ConnectParams::new(IP_B, PORT, QPN_A, Psn::new(PSN_A));
    cp.timeout = Some(std::time::Duration::from_millis(1));
    let a = p.a.connect(p.now, cp).unwrap();
    p.run();
    let b = request_id(&p);
    accept(&mut p, b, b"");
    assert!(established(&p.ev_a, a));
    while p.advance() {}
    assert!(
        !p.ev_a.iter().any(|e| matches!(e, CmEvent::TimedOut { .. })),
        "{:?}",
        p.ev_a
    );
}

/// Deadlines of many connections: `poll_timeout` follows the earliest live one, a deadline
/// that moved (a retransmission) or whose connection is gone is never reported, and each
/// connection retransmits at its own time (the CM indexes deadlines instead of scanning).
#[test]
fn each_connection_retransmits_at_its_own_deadline() {
    let mut p = Pair::new();
    p.b.listen(PORT).unwrap();
    p.drop_next(Side::A, attr::REQ, 3);
    let t = cm_timeout(20);
    let step = core::time::Duration::from_millis(1);
    let t0 = p.now;
    let mut ids = Vec::new();
    for i in 0..3u32 {
        let mut cp = ConnectParams::new(IP_B, PORT, QPN_A + i, Psn::new(PSN_A));
        cp.src_port = 40000 + i as u16;
        ids.push(p.a.connect(p.now, cp).unwrap());
        p.run();
        p.now += step;
    }
    assert_eq!(p.sent(Side::A, attr::REQ), 3);
    assert!(p.ev_b.is_empty(), "every REQ was lost");
    for (i, expect) in [t0 + t, t0 + step + t, t0 + step * 2 + t]
        .into_iter()
        .enumerate()
    {
        assert_eq!(p.a.poll_timeout(), Some(expect), "deadline {i}");
        p.now = expect;
        p.a.handle_timeout(p.now, &mut p.qa);
        assert_eq!(
            p.a.stats().retransmits,
            i as u64 + 1,
            "only connection {i} resent"
        );
    }
    // The first one's next deadline is a whole timeout after its resend.
    assert_eq!(p.a.poll_timeout(), Some(t0 + t * 2));
    // The resent REQs arrive; all three connect, and no deadline is left.
    p.run();
    let reqs: Vec<CmId> = p
        .ev_b
        .iter()
        .filter_map(|e| match e {
            CmEvent::ConnectRequest { id, .. } => Some(*id),
            _ => None,
        })
        .collect();
    assert_eq!(reqs.len(), 3, "{:?}", p.ev_b);
    for (k, b) in reqs.into_iter().enumerate() {
        let ap = AcceptParams::new(QPN_B + k as u32, Psn::new(PSN_B));
        p.b.accept(p.now, b, ap, &mut p.qb).unwrap();
        p.run();
    }
    for a in ids {
        assert!(established(&p.ev_a, a));
    }
    assert_eq!(p.a.poll_timeout(), None);
    assert_eq!(p.b.poll_timeout(), None);
}
