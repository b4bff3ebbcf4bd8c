//! The DAT object calls beyond the EP seeds, in memory (two IAs over a ChannelIo cable, inline
//! progress): EVD query / resize / enable / disable / unwaitable / software events / waits,
//! CNOs, LMR query and sync, consumer contexts. Each test is named after the DAT rule it checks.

mod dat_common;

use dat_common::*;
use dat_sys as sys;
use dpdk_roce::dat::{
    Cno, DatError, DatEvent, Evd, EvdFlags, Lmr, LmrTriplet, MemPriv, Pz, Srq, StateKind,
};
use dpdk_roce::mem::access::Access;
use std::sync::Arc;
use std::time::Duration;

const TEN_MS: Option<Duration> = Some(Duration::from_millis(10));

fn sw_evd(ia: &dpdk_roce::dat::Ia, size: usize) -> Evd {
    Evd::create(ia, size, EvdFlags::SOFTWARE).unwrap()
}

#[test]
fn dat_evd_query_reports_size_flags_and_queued_count() {
    let (a, _b) = ias();
    let evd = Evd::create(&a, 8, EvdFlags::SOFTWARE | EvdFlags::DTO).unwrap();
    let q = evd.query();
    assert_eq!(q.size, 8);
    assert_eq!(q.flags, EvdFlags::SOFTWARE | EvdFlags::DTO);
    assert_eq!(q.queued, 0);
    assert!(q.enabled && q.waitable);
    assert_eq!(q.cno, None);
    evd.post_se(1).unwrap();
    evd.post_se(2).unwrap();
    assert_eq!(evd.query().queued, 2);
}

/// dat_ia_open's `async_evd_min_qlen` is a minimum: the async EVD holds at least that many
/// events, never fewer than its default; a length below 1 or above max_evd_qlen is
/// DAT_INVALID_PARAMETER of argument 2.
#[test]
fn dat_ia_open_async_evd_min_qlen_sizes_the_async_evd() {
    use dpdk_roce::dat::ia_attr::{DEFAULT_ASYNC_EVD_QLEN, MAX_EVD_QLEN};
    let (a, _b) = ias();
    assert_eq!(a.async_evd().query().size, DEFAULT_ASYNC_EVD_QLEN);
    a.reserve_async_events(8).unwrap();
    assert_eq!(
        a.async_evd().query().size,
        DEFAULT_ASYNC_EVD_QLEN,
        "a minimum"
    );
    a.reserve_async_events(4096).unwrap();
    assert_eq!(a.async_evd().query().size, 4096);
    for bad in [-1, 0, i64::from(MAX_EVD_QLEN) + 1] {
        let e = a.reserve_async_events(bad).unwrap_err();
        assert!(
            matches!(e, DatError::InvalidArg { arg: 2, .. }),
            "{bad}: {e:?}"
        );
        assert_eq!(
            (e.code() & 0x3fff_0000, e.code() & 0xffff),
            (sys::DAT_INVALID_PARAMETER, sys::DAT_INVALID_ARG2)
        );
    }
    assert_eq!(
        a.async_evd().query().size,
        4096,
        "a refused length changes nothing"
    );
    a.reserve_async_events(i64::from(MAX_EVD_QLEN)).unwrap();
    assert_eq!(a.async_evd().query().size, MAX_EVD_QLEN as usize);
}

#[test]
fn dat_evd_resize_keeps_events_and_refuses_below_queued_count() {
    let (a, _b) = ias();
    let evd = sw_evd(&a, 4);
    for i in 0..3 {
        evd.post_se(i).unwrap();
    }
    match evd.resize(2) {
        Err(e @ DatError::InvalidState(_)) => {
            assert_eq!(e.code() & 0x3fff_0000, sys::DAT_INVALID_STATE)
        }
        other => panic!("resize below the queued count: {other:?}"),
    }
    assert_eq!(evd.query().size, 4, "a refused resize changes nothing");
    assert!(matches!(
        evd.resize(0),
        Err(DatError::InvalidArg { arg: 2, .. })
    ));
    evd.resize(3).unwrap();
    assert_eq!(evd.query().size, 3);
    assert_eq!(evd.post_se(9), Err(DatError::QueueFull), "now full");
    evd.resize(16).unwrap();
    assert_eq!(evd.query().size, 16);
    evd.post_se(3).unwrap();
    let got: Vec<u64> = std::iter::from_fn(|| evd.dequeue().ok())
        .map(|e| e.software().unwrap())
        .collect();
    assert_eq!(got, vec![0, 1, 2, 3], "events survive resizes, in order");
}

#[test]
fn dat_evd_post_se_only_on_an_evd_with_the_software_flag() {
    let (a, _b) = ias();
    let dto = Evd::create(&a, 4, EvdFlags::DTO).unwrap();
    let e = dto.post_se(5).unwrap_err();
    // Argument 1, the EVD, as the C entry has always answered (one rule: Evd::post_se).
    assert!(matches!(e, DatError::InvalidArg { arg: 1, .. }));
    assert_eq!(
        e.code(),
        sys::DAT_CLASS_ERROR | sys::DAT_INVALID_PARAMETER | sys::DAT_INVALID_ARG1
    );
    assert!(dto.is_empty());
    let sw = sw_evd(&a, 1);
    sw.post_se(0xfeed).unwrap();
    assert_eq!(sw.post_se(1), Err(DatError::QueueFull));
    assert!(
        !sw.take_overflow(),
        "a refused post is reported, not an overflow"
    );
    let ev = sw.wait(TEN_MS, 1).unwrap();
    assert_eq!(ev.software(), Some(0xfeed));
}

#[test]
fn dat_evd_wait_timeouts_0_and_10ms_expire() {
    let (a, _b) = ias();
    let evd = sw_evd(&a, 4);
    assert_eq!(
        evd.wait(Some(Duration::ZERO), 1).unwrap_err(),
        DatError::TimeoutExpired
    );
    assert_eq!(evd.wait(TEN_MS, 1).unwrap_err(), DatError::TimeoutExpired);
    // Threshold: two queued events do not satisfy a threshold of three.
    evd.post_se(1).unwrap();
    evd.post_se(2).unwrap();
    assert_eq!(evd.wait(TEN_MS, 3).unwrap_err(), DatError::TimeoutExpired);
    assert_eq!(evd.wait(TEN_MS, 2).unwrap().software(), Some(1));
    assert!(matches!(
        evd.wait(TEN_MS, 5),
        Err(DatError::InvalidArg { arg: 3, .. })
    ));
    assert!(matches!(
        evd.wait(TEN_MS, 0),
        Err(DatError::InvalidArg { arg: 3, .. })
    ));
}

#[test]
fn dat_evd_wait_threshold_is_met_by_events_posted_from_another_thread() {
    let (a, _b) = ias();
    let evd = Arc::new(sw_evd(&a, 8));
    let poster = {
        let evd = evd.clone();
        std::thread::spawn(move || {
            for i in 0..3 {
                std::thread::sleep(Duration::from_millis(2));
                evd.post_se(i).unwrap();
            }
        })
    };
    let ev = evd.wait(Some(GUARD), 3).unwrap();
    assert_eq!(ev.software(), Some(0));
    assert_eq!(evd.len(), 2);
    poster.join().unwrap();
}

/// Returns once a thread waits on `evd` (dat_evd_wait entered, nothing to return yet).
fn until_waiting(evd: &Evd) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while evd.waiters() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no thread ever waited"
        );
        std::thread::yield_now();
    }
}

#[test]
fn dat_evd_disable_stops_the_cno_only_and_a_waiter_still_gets_its_event() {
    let (a, _b) = ias();
    let evd = Arc::new(sw_evd(&a, 4));
    evd.disable();
    assert!(!evd.query().enabled);
    // dat_cno_wait(3DAT): a consumer waiting on the EVD itself preempts the CNO; disabling
    // only stops the CNO's notification (the OFA provider's dat_evd_wait ignores it too).
    evd.post_se(7).unwrap();
    assert_eq!(evd.wait(TEN_MS, 1).unwrap().software(), Some(7));
    // A waiter blocked on the disabled EVD is woken by the arrival itself.
    let waiter = {
        let evd = evd.clone();
        std::thread::spawn(move || evd.wait(Some(GUARD), 1).map(|e| e.software()))
    };
    until_waiting(&evd);
    evd.post_se(8).unwrap();
    assert_eq!(waiter.join().unwrap(), Ok(Some(8)));
    assert!(!evd.query().enabled, "waiting does not enable it");
    // Dequeue does not depend on the enable state either.
    evd.post_se(9).unwrap();
    assert_eq!(evd.dequeue().unwrap().software(), Some(9));
    evd.enable();
    assert!(evd.query().enabled);
}

#[test]
fn dat_evd_set_unwaitable_fails_waits_and_releases_waiters() {
    let (a, _b) = ias();
    let evd = Arc::new(sw_evd(&a, 4));
    let waiter = {
        let evd = evd.clone();
        std::thread::spawn(move || evd.wait(None, 1).map(|e| e.software()))
    };
    until_waiting(&evd);
    evd.set_unwaitable();
    let released = waiter.join().unwrap().unwrap_err();
    assert!(matches!(
        released,
        DatError::InvalidStateOf {
            kind: StateKind::EvdUnwaitable,
            ..
        }
    ));
    assert_eq!(
        released.code(),
        sys::DAT_CLASS_ERROR | sys::DAT_INVALID_STATE | sys::DAT_INVALID_STATE_EVD_UNWAITABLE
    );
    evd.post_se(3).unwrap();
    assert!(
        evd.wait(TEN_MS, 1).is_err(),
        "unwaitable even with an event"
    );
    assert!(!evd.query().waitable);
    assert_eq!(
        evd.dequeue().unwrap().software(),
        Some(3),
        "dequeue still works"
    );
    evd.clear_unwaitable();
    evd.post_se(4).unwrap();
    assert_eq!(evd.wait(TEN_MS, 1).unwrap().software(), Some(4));
}

#[test]
fn dat_cno_wait_returns_the_evd_that_got_an_event() {
    let (a, _b) = ias();
    let cno = Cno::create(&a).unwrap();
    let e1 = Evd::create_with_cno(&a, 4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    let e2 = sw_evd(&a, 4);
    e2.modify_cno(Some(&cno)).unwrap();
    assert_eq!(cno.query().attached, 2);
    assert_eq!(cno.query().ia_address, IP_A);
    assert_eq!(e1.query().cno, Some(cno.id()));
    assert_eq!(cno.wait(TEN_MS).unwrap_err(), DatError::TimeoutExpired);
    assert_eq!(
        cno.wait(Some(Duration::ZERO)).unwrap_err(),
        DatError::TimeoutExpired
    );
    e2.post_se(1).unwrap();
    assert_eq!(cno.wait(TEN_MS), Ok(e2.id()));
    // A notification, not a level: the event left on the EVD does not fire it again.
    assert_eq!(cno.wait(TEN_MS).unwrap_err(), DatError::TimeoutExpired);
    assert_eq!(
        e2.dequeue().unwrap().software(),
        Some(1),
        "event left on the EVD"
    );
    // A disabled EVD does not trigger its CNO.
    e1.disable();
    e1.post_se(2).unwrap();
    assert_eq!(cno.wait(TEN_MS).unwrap_err(), DatError::TimeoutExpired);
    e1.enable();
    assert_eq!(cno.wait(TEN_MS), Ok(e1.id()));
    // From another thread.
    let cno = Arc::new(cno);
    e1.dequeue().unwrap();
    let w = {
        let cno = cno.clone();
        std::thread::spawn(move || cno.wait(Some(GUARD)))
    };
    std::thread::sleep(Duration::from_millis(5));
    e2.post_se(3).unwrap();
    assert_eq!(w.join().unwrap(), Ok(e2.id()));
}

#[test]
fn dat_cno_free_is_refused_while_evds_are_attached() {
    let (a, _b) = ias();
    let cno = Cno::create(&a).unwrap();
    let e1 = Evd::create_with_cno(&a, 4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    let e2 = Evd::create_with_cno(&a, 4, Some(&cno), EvdFlags::SOFTWARE).unwrap();
    let refused = cno.free().unwrap_err();
    assert_eq!(
        refused.error.code(),
        sys::DAT_CLASS_ERROR | sys::DAT_INVALID_STATE | sys::DAT_INVALID_STATE_CNO_IN_USE
    );
    let cno = refused.object;
    e1.modify_cno(None).unwrap();
    assert_eq!(e1.query().cno, None);
    assert_eq!(cno.query().attached, 1);
    let cno = cno.free().unwrap_err().object;
    e2.free().unwrap();
    assert_eq!(cno.query().attached, 0);
    cno.free().unwrap();
}

#[test]
fn dat_evd_modify_cno_rejects_a_cno_of_another_ia() {
    let (a, b) = ias();
    let cno_b = Cno::create(&b).unwrap();
    let evd = sw_evd(&a, 4);
    let e = evd.modify_cno(Some(&cno_b)).unwrap_err();
    assert_eq!(
        e.code(),
        sys::DAT_CLASS_ERROR | sys::DAT_INVALID_HANDLE | sys::DAT_INVALID_HANDLE_CNO
    );
    assert_eq!(cno_b.query().attached, 0);
}

#[test]
fn dat_lmr_query_reports_pz_length_contexts_and_address() {
    let (a, _b) = ias();
    let pz = Pz::create(&a).unwrap();
    let lmr = Lmr::create(&pz, 4096, RW).unwrap();
    let q = lmr.query().unwrap();
    assert_eq!(q.pz_id, pz.id());
    assert_eq!(q.length, 4096);
    assert_eq!(q.address, lmr.address());
    assert_eq!(q.lmr_context, lmr.lmr_context());
    assert_eq!(q.rmr_context, Some(lmr.rmr_context()));
    assert!(q.access.contains(RW), "{:?}", q.access);
    let ro = Lmr::create(&pz, 100, Access::LOCAL_WRITE).unwrap();
    let q2 = ro.query().unwrap();
    assert_eq!(q2.length, 100);
    assert!(q2.access.contains(Access::LOCAL_WRITE));
    assert!(!q2
        .access
        .intersects(Access::REMOTE_READ | Access::REMOTE_WRITE));
    assert_ne!(q2.lmr_context, q.lmr_context);
    assert_eq!(q2.privileges, MemPriv::LOCAL_READ | MemPriv::LOCAL_WRITE);
}

#[test]
fn dat_lmr_sync_rdma_read_and_write_accept_only_ranges_in_registered_lmrs() {
    let (a, _b) = ias();
    let pz = Pz::create(&a).unwrap();
    let l1 = Lmr::create(&pz, 4096, RW).unwrap();
    let l2 = Lmr::create(&pz, 512, RW).unwrap();
    let good = [l1.triplet(0, 4096), l2.triplet(500, 12)];
    Lmr::sync_rdma_read(&a, &good).unwrap();
    Lmr::sync_rdma_write(&a, &good).unwrap();
    let past_end = [l1.triplet(0, 10), l2.triplet(500, 13)];
    let bad_key = [LmrTriplet {
        lmr_context: l1.lmr_context().wrapping_add(0x0010_0000),
        virtual_address: l1.address(),
        segment_length: 8,
    }];
    let before = [LmrTriplet {
        lmr_context: l1.lmr_context(),
        virtual_address: l1.address() - 1,
        segment_length: 8,
    }];
    for bad in [&past_end[..], &bad_key[..], &before[..]] {
        for sync in [Lmr::sync_rdma_read, Lmr::sync_rdma_write] {
            assert!(matches!(
                sync(&a, bad),
                Err(DatError::InvalidArg { arg: 2, .. })
            ));
        }
    }
    assert!(Lmr::sync_rdma_read(&a, &[]).is_err());
    // A freed LMR's range is no longer registered.
    let t = l2.triplet(0, 8);
    l2.free().unwrap();
    assert!(Lmr::sync_rdma_write(&a, &[t]).is_err());
}

#[test]
fn dat_set_consumer_context_round_trips_on_every_object_type() {
    let (a, b, psp) = pair();
    let cno = Cno::create(&a.ia).unwrap();
    let lmr = Lmr::create(&a.pz, 64, RW).unwrap();
    let srq = Srq::create(&a.pz, 4, 1).unwrap();
    let ea = ep(&a);
    let eb = ep(&b);
    ea.connect(IP_B, QUAL, b"ctx").unwrap();
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR");
    };
    let contexts = [
        a.ia.context(),
        a.pz.context(),
        lmr.context(),
        a.dto.context(),
        cno.context(),
        ea.context(),
        srq.context(),
        psp.context(),
        cr.context(),
    ];
    for c in &contexts {
        assert_eq!(c.get(), 0, "DAT: the context is NULL until set");
    }
    for (i, c) in contexts.iter().enumerate() {
        c.set(0x1000 + i as u64);
    }
    for (i, c) in contexts.iter().enumerate() {
        assert_eq!(
            c.get(),
            0x1000 + i as u64,
            "object {i} kept its own context"
        );
    }
    cr.accept(&eb, &[]).unwrap();
}

/// DAT_EVD_RMR_BIND_FLAG: an EVD created with it (and no DTO flag) serves as an EP's request
/// EVD, since bind completions arrive there; dat_evd_query reports the flags as they were
/// given, and a flag that is no DAT EVD flag does not exist in `EvdFlags`.
#[test]
fn an_rmr_bind_evd_serves_as_a_request_evd_and_keeps_its_flags() {
    let (a, _b) = ias();
    let pz = Pz::create(&a).unwrap();
    let bind = Evd::create(&a, 8, EvdFlags::RMR_BIND).unwrap();
    assert_eq!(bind.query().flags, EvdFlags::RMR_BIND);
    let dto = Evd::create(&a, 8, EvdFlags::DTO).unwrap();
    let conn = Evd::create(&a, 8, EvdFlags::CONNECTION).unwrap();
    let ep = dpdk_roce::dat::Ep::create(&a, &pz, Some(&dto), Some(&bind), Some(&conn), None, None);
    assert!(ep.is_ok(), "{:?}", ep.err());
    // Neither stream may go to an EVD without DTO or RMR_BIND.
    let sw = sw_evd(&a, 4);
    assert!(
        dpdk_roce::dat::Ep::create(&a, &pz, Some(&dto), Some(&sw), Some(&conn), None, None)
            .is_err()
    );
    assert_eq!(EvdFlags::from_bits(0x200), None);
}
