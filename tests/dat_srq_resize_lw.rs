//! dat_srq_resize and dat_srq_set_lw through the Rust DAT API, in memory (two IAs over a
//! ChannelIo cable, inline progress). DAT 2.0: an SRQ cannot shrink below the receives posted
//! on it (DAT_INVALID_STATE); the low watermark generates one asynchronous event per setting
//! when fewer receives than it are posted (the engine's SRQ limit, IBTA vol. 1 §10.2.9.3).

mod dat_common;

use dat_common::*;
use dpdk_roce::dat::{DatError, DatEvent, Ep, Lmr, Srq};
use dpdk_roce::engine::runtime::AsyncEvent;
use dpdk_roce::transport::types::WcStatus;

fn limit_events(events: &[DatEvent], srq: &Srq) -> usize {
    let (shard, srqn) = srq.id();
    events
        .iter()
        .filter(|e| {
            matches!(e, DatEvent::Async(AsyncEvent::SrqLimit { shard: s, srqn: n }) if *s == shard && *n == srqn)
        })
        .count()
}

#[test]
fn dat_srq_resize_grows_and_shrinks_but_never_below_the_posted_receives() {
    let (a, _b) = ias();
    let a = side(a);
    let srq = Srq::create(&a.pz, 4, 1).unwrap();
    let l = Lmr::create(&a.pz, 4096, RW).unwrap();
    for i in 0..4u64 {
        srq.post_recv(&[l.triplet(i * 64, 64)], i).unwrap();
    }
    let c = srq.query().unwrap();
    assert_eq!((c.max_recv_dtos, c.available), (4, 4));
    // Full: a fifth post is refused by the shard (asynchronously: an async event), the count
    // stays at 4.
    srq.post_recv(&[l.triplet(256, 64)], 4).unwrap();
    assert_eq!(srq.query().unwrap().available, 4);
    assert!(matches!(srq.resize(3), Err(DatError::InvalidState(_))));
    assert!(matches!(
        srq.resize(0),
        Err(DatError::InvalidArg { arg: 2, .. })
    ));
    assert_eq!(
        srq.query().unwrap().max_recv_dtos,
        4,
        "a refused resize changes nothing"
    );
    srq.resize(8).unwrap();
    for i in 5..9u64 {
        srq.post_recv(&[l.triplet(i * 64, 64)], i).unwrap();
    }
    let c = srq.query().unwrap();
    assert_eq!((c.max_recv_dtos, c.available), (8, 8));
    // Shrinking to exactly the posted count is allowed.
    srq.resize(8).unwrap();
    srq.resize(16).unwrap();
    srq.resize(8).unwrap();
    assert!(matches!(srq.resize(7), Err(DatError::InvalidState(_))));
}

/// B's SRQ of 8 feeds one EP; A sends messages that consume its receives.
struct SrqSetup {
    a: Side,
    b: Side,
    ea: Ep,
    _eb: Ep,
    la: Lmr,
    lb: Lmr,
    srq: Srq,
    _psp: dpdk_roce::dat::Psp,
}

fn srq_setup(posted: u64) -> SrqSetup {
    let (a, b, psp) = pair();
    let srq = Srq::create(&b.pz, 8, 1).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    for i in 0..posted {
        srq.post_recv(&[lb.triplet(i * 64, 64)], 100 + i).unwrap();
    }
    let ea = ep(&a);
    let eb = Ep::create(
        &b.ia,
        &b.pz,
        Some(&b.dto),
        Some(&b.dto),
        Some(&b.conn),
        Some(&srq),
        None,
    )
    .unwrap();
    connect(&a, &b, &ea, &eb);
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    la.write(0, b"0123456789abcdef").unwrap();
    SrqSetup {
        a,
        b,
        ea,
        _eb: eb,
        la,
        lb,
        srq,
        _psp: psp,
    }
}

fn send_one(s: &SrqSetup, cookie: u64) {
    s.ea.post_send(&[s.la.triplet(0, 16)], cookie).unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::Success);
    assert_eq!(dto(&s.b.dto, &s.a.ia).status, WcStatus::Success);
}

#[test]
fn dat_srq_set_lw_fires_once_per_setting_when_the_posted_count_drops_below_it() {
    let s = srq_setup(6);
    assert!(
        !s.srq.set_low_watermark(4).unwrap(),
        "6 posted: not below 4"
    );
    assert_eq!(s.srq.query().unwrap().armed_low_watermark, Some(4));
    // 6 -> 5 -> 4: not below yet.
    send_one(&s, 1);
    send_one(&s, 2);
    let ev = drain(s.b.ia.async_evd(), &s.a.ia, &s.b.ia, 20);
    assert_eq!(limit_events(&ev, &s.srq), 0, "4 posted is not below 4");
    // 4 -> 3: below; one event.
    send_one(&s, 3);
    let ev = drain(s.b.ia.async_evd(), &s.a.ia, &s.b.ia, 20);
    assert_eq!(limit_events(&ev, &s.srq), 1, "one event when 3 < 4");
    assert_eq!(s.srq.query().unwrap().armed_low_watermark, None, "disarmed");
    // 3 -> 2: no second event for the same setting.
    send_one(&s, 4);
    let ev = drain(s.b.ia.async_evd(), &s.a.ia, &s.b.ia, 20);
    assert_eq!(limit_events(&ev, &s.srq), 0, "once per setting");
    // A new setting above the posted count (2) fires during the call.
    assert!(s.srq.set_low_watermark(3).unwrap());
    let ev = drain(s.b.ia.async_evd(), &s.a.ia, &s.b.ia, 20);
    assert_eq!(limit_events(&ev, &s.srq), 1, "the setting itself fired");
    // 0 (DAT_SRQ_LW_DEFAULT) disarms: refill to 6, arm at 4, disarm, consume to 1: nothing.
    for i in 0..4u64 {
        s.srq
            .post_recv(&[s.lb.triplet(1024 + i * 64, 64)], 200 + i)
            .unwrap();
    }
    assert_eq!(s.srq.query().unwrap().available, 6);
    assert!(!s.srq.set_low_watermark(4).unwrap());
    assert!(!s.srq.set_low_watermark(0).unwrap());
    assert_eq!(s.srq.query().unwrap().armed_low_watermark, None);
    for c in 10..15 {
        send_one(&s, c);
    }
    let ev = drain(s.b.ia.async_evd(), &s.a.ia, &s.b.ia, 20);
    assert_eq!(limit_events(&ev, &s.srq), 0, "disarmed by 0");
    assert_eq!(s.srq.query().unwrap().available, 1);
}
