//! A flood of connection requests (issue: a REQ created state that never expired unless the
//! consumer answered it): unanswered requests are bounded per listener and in all, refused
//! beyond the bound without state, given up after the MRA's service timeout, and the CM
//! serves a legitimate connection once the consumer has answered the flood.

mod cm_common;

use cm_common::*;
use dpdk_roce::cm::timeout::cm_timeout;
use dpdk_roce::cm::{AcceptParams, CmConfig, CmEvent, ConnectParams};
use dpdk_roce::transport::types::QpState;
use dpdk_roce::wire::cm_msg::{attr, CmMessage, RejReason};
use dpdk_roce::wire::psn::Psn;
use std::net::Ipv4Addr;

/// `n` REQs to B's port 1 from `n` spoofed addresses (10.200.x.y), each its own comm ID.
fn flood(p: &mut Pair, n: u32) {
    let (h, r) = a_req(p);
    let mut m = [0u8; 256];
    for k in 0..n {
        let mut r2 = r;
        r2.local_comm_id = 0x1000_0000 + k;
        CmMessage::Req(r2).emit(&h, &mut m);
        let src = Ipv4Addr::new(10, 200, (k >> 8) as u8, k as u8);
        p.b.handle_mad(p.now, src, &m, &mut p.qb);
        // B's answers go nowhere (the sources do not exist).
        while p.b.poll_transmit(p.now).is_some() {}
    }
}

#[test]
fn a_flood_of_requests_leaves_bounded_state_and_a_later_connection_succeeds() {
    let limit = CmConfig::default().max_requests_per_listener;
    let mut p = Pair::new();
    p.b.listen(1).unwrap();
    let sent = 100_000;
    flood(&mut p, sent);
    assert_eq!(p.b.unanswered_requests(), limit, "bounded per listener");
    assert!(
        p.b.connection_count() <= limit,
        "{}",
        p.b.connection_count()
    );
    let s = p.b.stats();
    assert_eq!(s.requests_refused, u64::from(sent) - limit as u64);
    // Every admitted request reached the consumer, once.
    let mut requests = Vec::new();
    while let Some(ev) = p.b.poll_event() {
        if let CmEvent::ConnectRequest { id, .. } = ev {
            requests.push(id);
        }
    }
    assert_eq!(requests.len(), limit);

    // While the table is full, one more is refused (No resources), statelessly.
    p.a = dpdk_roce::cm::Cm::new(IP_A, 0x0002_c903_0000_000a, 9);
    p.a.connect(p.now, ConnectParams::new(IP_B, 1, 0x21, Psn::new(7)))
        .unwrap();
    let req = p.a.poll_transmit(p.now).unwrap().mad;
    p.b.handle_mad(p.now, IP_A, &req, &mut p.qb);
    let rej = p.b.poll_transmit(p.now).unwrap().mad;
    let (_, CmMessage::Rej(j)) = CmMessage::parse(&rej).unwrap() else {
        panic!()
    };
    assert_eq!(j.reason, RejReason::NoResources);
    assert_eq!(p.b.unanswered_requests(), limit);

    // The consumer rejects what it does not want: the slots come back.
    for id in requests {
        p.b.reject(p.now, id, &[]).unwrap();
    }
    while p.b.poll_transmit(p.now).is_some() {}
    assert_eq!(p.b.unanswered_requests(), 0);

    // A legitimate connection now goes through.
    let mut p2 = Pair::new();
    std::mem::swap(&mut p2.b, &mut p.b);
    p2.now = p.now;
    let a =
        p2.a.connect(p2.now, ConnectParams::new(IP_B, 1, 0x22, Psn::new(9)))
            .unwrap();
    p2.run();
    let id = p2
        .ev_b
        .iter()
        .find_map(|e| match e {
            CmEvent::ConnectRequest { id, .. } => Some(*id),
            _ => None,
        })
        .expect("the request reached the consumer");
    p2.b.accept(p2.now, id, AcceptParams::new(0x40, Psn::new(3)), &mut p2.qb)
        .unwrap();
    p2.run();
    assert!(p2
        .ev_a
        .iter()
        .any(|e| matches!(e, CmEvent::Established { id, .. } if *id == a)));
    assert_eq!(p2.qb.state(0x40), QpState::Rts);
}

/// Requests nobody answers are given up after the MRA's service timeout: rejected with
/// reason Timeout, reported, and gone after time-wait.
#[test]
fn unanswered_requests_expire() {
    let mut p = Pair::new();
    p.b.listen(1).unwrap();
    flood(&mut p, 500);
    assert_eq!(p.b.unanswered_requests(), 500);
    while p.b.poll_event().is_some() {}
    let c = CmConfig::default();
    let later = p.now + cm_timeout(c.mra_service_timeout) + cm_timeout(0);
    p.b.handle_timeout(later, &mut p.qb);
    assert_eq!(p.b.unanswered_requests(), 0);
    assert_eq!(p.b.stats().requests_expired, 500);
    let mut rejs = 0;
    while let Some(t) = p.b.poll_transmit(later) {
        if attr_of(&t.mad) == attr::REJ {
            let (_, CmMessage::Rej(j)) = CmMessage::parse(&t.mad).unwrap() else {
                panic!()
            };
            assert_eq!(j.reason, RejReason::Timeout);
            rejs += 1;
        }
    }
    assert_eq!(rejs, 500);
    let mut timed_out = 0;
    while let Some(ev) = p.b.poll_event() {
        timed_out += usize::from(matches!(ev, CmEvent::TimedOut { .. }));
    }
    assert_eq!(timed_out, 500);
    // After time-wait nothing is left.
    let gone = later + cm_timeout(c.time_wait) + cm_timeout(0);
    p.b.handle_timeout(gone, &mut p.qb);
    assert_eq!(p.b.connection_count(), 0);
}
