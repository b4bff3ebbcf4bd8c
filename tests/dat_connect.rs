//! Connection management calls of the DAT API beyond dat_ep_connect / dat_psp_create, in memory
//! (two IAs over a ChannelIo cable, inline progress): PSP-any, RSPs, CR query, dup connect,
//! graceful and abrupt disconnect. Each test is named after the DAT rule it checks.

mod dat_common;

use dat_common::*;
use dat_sys as sys;
use dpdk_roce::dat::{ConnectionEventKind, DatError, DatEvent, Ep, EpState, Lmr, Psp, Rsp};
use dpdk_roce::transport::types::WcStatus;
use std::sync::atomic::{AtomicBool, Ordering};

fn cr_of(ev: DatEvent) -> dpdk_roce::dat::Cr {
    match ev {
        DatEvent::ConnectionRequest(cr) => cr,
        other => panic!("not a CR: {other:?}"),
    }
}

#[test]
fn dat_psp_create_any_picks_a_free_qualifier_and_reports_it() {
    let (a, b) = ias();
    let (a, b) = (side(a), side(b));
    let p1 = Psp::create_any(&b.ia, &b.cr).unwrap();
    let p2 = Psp::create_any(&b.ia, &b.cr).unwrap();
    assert!(Psp::ANY_RANGE.contains(&p1.conn_qual().port()));
    assert!(Psp::ANY_RANGE.contains(&p2.conn_qual().port()));
    assert_ne!(
        p1.conn_qual(),
        p2.conn_qual(),
        "a qualifier in use is not picked"
    );
    // The picked qualifier is really taken, and really listened on.
    assert_eq!(
        Psp::create(&b.ia, p1.conn_qual(), &b.cr).err(),
        Some(DatError::ConnQualInUse(p1.conn_qual().port()))
    );
    let (ea, eb) = (ep(&a), ep(&b));
    ea.connect(IP_B, p2.conn_qual(), b"any").unwrap();
    let cr = cr_of(wait(&b.cr, &a.ia));
    assert_eq!(cr.conn_qual(), p2.conn_qual());
    cr.accept(&eb, &[]).unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
}

#[test]
fn dat_rsp_create_reserves_the_ep_and_the_cr_names_it_for_accept() {
    let (a, b) = ias();
    let (a, b) = (side(a), side(b));
    let (ea, eb, other) = (ep(&a), ep(&b), ep(&b));
    let rsp = Rsp::create(&b.ia, QUAL, &eb, &b.cr).unwrap();
    assert_eq!(eb.state(), EpState::Reserved);
    assert_eq!(rsp.ep_qpn(), eb.qpn());
    // A reserved EP is not UNCONNECTED any more: a second RSP for it is refused.
    assert!(matches!(
        Rsp::create(&b.ia, QUAL + 1, &eb, &b.cr),
        Err(DatError::EpState {
            state: EpState::Reserved
        })
    ));
    // First request: rejected, the EP goes back to RESERVED.
    ea.connect(IP_B, QUAL, b"one").unwrap();
    let cr = cr_of(wait(&b.cr, &a.ia));
    assert_eq!(cr.reserved_ep(), Some(eb.qpn()));
    assert_eq!(eb.state(), EpState::PassiveConnectionPending);
    cr.reject(b"no").unwrap();
    assert_eq!(eb.state(), EpState::Reserved);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::PeerRejected);
    ea.reset().unwrap();
    // Second request: another EP is refused, the reserved one accepts.
    ea.connect(IP_B, QUAL, b"two").unwrap();
    let cr = cr_of(wait(&b.cr, &a.ia));
    assert_eq!(cr.query().ep, Some(eb.qpn()));
    let e = cr.accept(&other, &[]).unwrap_err();
    assert_eq!(
        e.code(),
        sys::DAT_CLASS_ERROR | sys::DAT_INVALID_PARAMETER | sys::DAT_INVALID_ARG2
    );
    assert_eq!(other.state(), EpState::Unconnected);
    // The refused accept consumed the CR (dropped unanswered -> rejected).
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::PeerRejected);
    ea.reset().unwrap();
    assert_eq!(eb.state(), EpState::Reserved);
    ea.connect(IP_B, QUAL, b"three").unwrap();
    let cr = cr_of(wait(&b.cr, &a.ia));
    cr.accept_reserved(b"yes").unwrap();
    assert_eq!(eb.state(), EpState::CompletionPending);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
    assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Established);
    assert_eq!(eb.state(), EpState::Connected);
    drop(rsp);
    assert_eq!(
        eb.state(),
        EpState::Connected,
        "freeing the RSP leaves a connection"
    );
}

#[test]
fn dat_rsp_free_returns_a_reserved_ep_to_unconnected() {
    let (b, _a) = ias();
    let b = side(b);
    let eb = ep(&b);
    let rsp = Rsp::create(&b.ia, QUAL, &eb, &b.cr).unwrap();
    assert_eq!(eb.state(), EpState::Reserved);
    rsp.context().set(5);
    assert_eq!(rsp.context().get(), 5);
    rsp.free();
    assert_eq!(eb.state(), EpState::Unconnected);
    // The qualifier is free again.
    let _psp = Psp::create(&b.ia, QUAL, &b.cr).unwrap();
}

#[test]
fn dat_cr_query_reports_the_request_and_its_private_data_is_writable() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    ea.connect(IP_B, QUAL, b"query me").unwrap();
    let mut cr = cr_of(wait(&b.cr, &a.ia));
    let q = cr.query();
    assert_eq!(q.remote_address, IP_A);
    assert_eq!(q.conn_qual, QUAL);
    assert_eq!(&q.private_data[..8], b"query me");
    assert_eq!(q.ep, None, "a PSP's request names no EP");
    cr.private_data_mut()[..5].copy_from_slice(b"QUERY");
    assert_eq!(&cr.query().private_data[..8], b"QUERY me");
    assert!(
        cr.accept_reserved(&[]).is_err(),
        "nothing reserved on a PSP"
    );
    drop(eb);
}

#[test]
fn dat_ep_dup_connect_connects_to_the_same_remote_and_qualifier() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    let (ea2, eb2) = (ep(&a), ep(&b));
    let fresh = ep(&a);
    assert!(matches!(
        ea2.dup_connect(&fresh, &[]),
        Err(DatError::InvalidArg { arg: 2, .. })
    ));
    connect(&a, &b, &ea, &eb);
    ea2.dup_connect(&ea, b"dup").unwrap();
    assert_eq!(ea2.state(), EpState::ActiveConnectionPending);
    assert_eq!(ea2.remote(), Some((IP_B.into(), QUAL)));
    let cr = cr_of(wait(&b.cr, &a.ia));
    assert_eq!(&cr.private_data()[..3], b"dup");
    cr.accept(&eb2, &[]).unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
    assert_eq!(ea2.state(), EpState::Connected);
}

/// Posts `n` RDMA writes of 1 KiB from `la` to `lb` on `ea`.
fn post_writes(ea: &Ep, la: &Lmr, lb: &Lmr, n: u64) {
    for i in 0..n {
        ea.post_rdma_write(
            &[la.triplet(i * 1024, 1024)],
            &lb.rmr_triplet(i * 1024, 1024),
            i,
        )
        .unwrap();
    }
}

#[test]
fn dat_ep_disconnect_graceful_lets_outstanding_requests_complete() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    connect(&a, &b, &ea, &eb);
    let la = Lmr::create(&a.pz, 16 * 1024, RW).unwrap();
    let lb = Lmr::create(&b.pz, 16 * 1024, RW).unwrap();
    let data: Vec<u8> = (0..16 * 1024u32).map(|i| (i % 251) as u8).collect();
    la.write(0, &data).unwrap();
    post_writes(&ea, &la, &lb, 16);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                b.ia.progress();
            }
        });
        ea.disconnect_graceful().unwrap();
        stop.store(true, Ordering::Relaxed);
    });
    let done = drain(&a.dto, &a.ia, &b.ia, 200);
    let statuses: Vec<WcStatus> = done
        .iter()
        .map(|e| match e {
            DatEvent::Dto(d) => d.status,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(statuses, vec![WcStatus::Success; 16], "none flushed");
    assert_eq!(lb.read(0, 16 * 1024).unwrap(), data);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Disconnected);
}

#[test]
fn dat_ep_disconnect_abrupt_completes_every_request_success_or_flushed() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    connect(&a, &b, &ea, &eb);
    let la = Lmr::create(&a.pz, 16 * 1024, RW).unwrap();
    let lb = Lmr::create(&b.pz, 16 * 1024, RW).unwrap();
    post_writes(&ea, &la, &lb, 16);
    ea.disconnect().unwrap();
    let mut done = Vec::new();
    let t0 = std::time::Instant::now();
    while done.len() < 16 {
        done.extend(
            drain(&a.dto, &a.ia, &b.ia, 10)
                .into_iter()
                .map(|e| match e {
                    DatEvent::Dto(d) => (d.cookie, d.status),
                    other => panic!("{other:?}"),
                }),
        );
        assert!(t0.elapsed() < GUARD, "completions lost: {done:?}");
    }
    done.sort_by_key(|(cookie, _)| *cookie);
    for (i, (cookie, status)) in done.iter().enumerate() {
        assert_eq!(*cookie, i as u64);
        assert!(
            matches!(status, WcStatus::Success | WcStatus::WrFlushErr),
            "{status:?}"
        );
    }
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Disconnected);
}

/// dat_ep_connect's `timeout`: to an address nobody answers, the connection EVD gets TIMED_OUT
/// once it expires (before ARP gives up) and the EP is DISCONNECTED; without a timeout the
/// failed ARP ends the attempt as UNREACHABLE.
#[test]
fn connect_timeout_and_unreachable_to_an_address_nobody_answers() {
    let (a, b, _psp) = pair();
    let ghost = std::net::Ipv4Addr::new(IP_B.octets()[0], IP_B.octets()[1], IP_B.octets()[2], 99);
    let ea = ep(&a);
    ea.connect_with_timeout(
        ghost,
        QUAL,
        &[],
        Some(std::time::Duration::from_millis(200)),
    )
    .unwrap();
    assert_eq!(ea.state(), EpState::ActiveConnectionPending);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::TimedOut);
    assert_eq!(ea.state(), EpState::Disconnected);
    let eb = ep(&a);
    eb.connect(ghost, QUAL, &[]).unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Unreachable);
    assert_eq!(eb.state(), EpState::Disconnected);
}

/// dat_query_counters' IA counters are the Rust IA's: every object made and destroyed through
/// the Rust API, and the requests that arrived, were accepted or rejected, counted from the
/// last reset (`Ia::counters(true)`).
#[test]
fn ia_counters_count_objects_and_requests_since_the_last_reset() {
    use dpdk_roce::dat::{Evd, EvdFlags, Pz, Rmr, Srq};
    use dpdk_roce::mem::access::Access;
    let (a, b, psp) = pair();
    b.ia.counters(true).unwrap();
    let (ea, eb) = (ep(&a), ep(&b));
    connect(&a, &b, &ea, &eb);
    // A second request, rejected.
    let ea2 = ep(&a);
    ea2.connect(IP_B, QUAL, b"again").unwrap();
    cr_of(wait(&b.cr, &a.ia)).reject(b"no").unwrap();
    {
        let pz = Pz::create(&b.ia).unwrap();
        let lmr = Lmr::create(&pz, 64, Access::LOCAL_WRITE).unwrap();
        let rmr = Rmr::create(&pz).unwrap();
        let srq = Srq::create(&pz, 4, 1).unwrap();
        let evd = Evd::create(&b.ia, 4, EvdFlags::SOFTWARE).unwrap();
        let psp2 = Psp::create(&b.ia, QUAL + 1, &b.cr).unwrap();
        let rsp = Rsp::create(&b.ia, QUAL + 2, &ep(&b), &b.cr).unwrap();
        let c = b.ia.counters(false).unwrap();
        let made = [
            c.pz_create,
            c.lmr_create,
            c.rmr_create,
            c.srq_create,
            c.evd_create,
            c.psp_create,
            c.rsp_create,
            c.ep_create,
        ];
        assert_eq!(made, [1, 1, 1, 1, 1, 1, 1, 2], "eb and the RSP's EP");
        let freed = [c.pz_free, c.lmr_free, c.rmr_free, c.srq_free, c.evd_free];
        assert_eq!(freed, [0; 5]);
        assert_eq!((c.cr, c.cr_accepted, c.cr_rejected), (2, 1, 1));
        assert_eq!((c.req_rx, c.rep_tx, c.rej_tx), (2, 1, 1));
        drop((rsp, psp2, evd, srq, rmr, lmr));
        pz.free().map_err(|r| r.error).unwrap();
    }
    let c = b.ia.counters(true).unwrap();
    let freed = [
        c.pz_free, c.lmr_free, c.rmr_free, c.srq_free, c.evd_free, c.psp_free, c.rsp_free,
        c.ep_free,
    ];
    assert_eq!(
        freed,
        [1, 1, 1, 1, 1, 1, 1, 1],
        "the RSP's EP destroyed with it"
    );
    // A reset starts every count again; A's IA counted its own.
    assert_eq!(b.ia.counters(false).unwrap().pz_create, 0);
    assert_eq!(a.ia.counters(false).unwrap().ep_create, 2, "ea and ea2");
    drop(psp);
}

/// dat_psp_create(3DAT) with DAT_PSP_PROVIDER_FLAG is the Rust `PspFlag::Provider`: each
/// request comes with an EP the provider made (TENTATIVE_CONNECTION_PENDING, no EVDs); the
/// consumer gives it its PZ and EVDs (dat_ep_modify) and accepts on it; a rejected request
/// takes its EP along.
#[test]
fn a_provider_psp_makes_the_requests_ep_and_a_reject_destroys_it() {
    use dpdk_roce::dat::{EpAttr, EpParam, EpParamMask, PspFlag};
    let (a, b) = ias();
    let (a, b) = (side(a), side(b));
    let psp = Psp::create_with(&b.ia, QUAL, &b.cr, PspFlag::Provider).unwrap();
    assert_eq!(psp.flag(), PspFlag::Provider);
    let ea = ep(&a);
    ea.connect(IP_B, QUAL, b"p").unwrap();
    let cr = cr_of(wait(&b.cr, &a.ia));
    let eb = cr.provider_ep().expect("the provider made an EP");
    assert_eq!(eb.state(), EpState::TentativeConnectionPending);
    assert_eq!(cr.query().ep, Some(eb.qpn()));
    let mask = EpParamMask::PZ_HANDLE
        | EpParamMask::RECV_EVD_HANDLE
        | EpParamMask::REQUEST_EVD_HANDLE
        | EpParamMask::CONNECT_EVD_HANDLE;
    let param = EpParam {
        pz: Some(&b.pz),
        recv_evd: Some(&b.dto),
        request_evd: Some(&b.dto),
        connect_evd: Some(&b.conn),
        attr: EpAttr::default(),
        service_type: 0,
        qos: 0,
        num_transport_attr: 0,
        num_provider_attr: 0,
    };
    eb.modify(mask, &param).unwrap();
    cr.accept_reserved(b"ok").map_err(|r| r.error).unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
    assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Established);
    assert_eq!(eb.state(), EpState::Connected);

    // A second request, rejected: its EP goes with it once the consumer lets go of it.
    b.ia.counters(true).unwrap();
    let ea2 = ep(&a);
    ea2.connect(IP_B, QUAL, b"p2").unwrap();
    let cr = cr_of(wait(&b.cr, &a.ia));
    let eb2 = cr.provider_ep().unwrap();
    assert_ne!(eb2.qpn(), eb.qpn());
    // Private data over the limit: refused before anything is sent, the request given back.
    let cr = match cr.reject(&[0; 57]) {
        Err(dpdk_roce::dat::RejectError::Pending(r)) => {
            assert!(matches!(r.error, DatError::InvalidArg { arg: 2, .. }));
            r.object
        }
        other => panic!("{other:?}"),
    };
    cr.reject(b"no").unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::PeerRejected);
    drop(eb2);
    let c = b.ia.counters(false).unwrap();
    assert_eq!((c.ep_create, c.ep_free, c.cr_rejected), (1, 1, 1));
    drop(psp);
}

/// A REJ from the remote consumer (dat_cr_reject: reason 28, consumer defined) is
/// `PeerRejected`; one from the remote provider (no listener on the qualifier) is
/// `NonPeerRejected`, with the CM's reason (DAT 2.0 §6.3.2.3; through libdat2:
/// tests/dat_bad_input.rs, `connect_no_listener`).
#[test]
fn a_rejection_by_the_remote_provider_is_non_peer_rejected() {
    use dpdk_roce::wire::cm_msg::RejReason;
    let (a, b, _psp) = pair();
    let reason_of = |ev: DatEvent| match ev {
        DatEvent::Connection {
            kind,
            reject_reason,
            ..
        } => (kind, reject_reason),
        other => panic!("{other:?}"),
    };
    let ea = ep(&a);
    ea.connect(IP_B, QUAL + 9, b"nobody").unwrap();
    assert_eq!(
        reason_of(wait(&a.conn, &b.ia)),
        (
            ConnectionEventKind::NonPeerRejected,
            Some(RejReason::InvalidServiceId)
        )
    );
    assert_eq!(ea.state(), EpState::Disconnected);
    let ea2 = ep(&a);
    ea2.connect(IP_B, QUAL, b"x").unwrap();
    cr_of(wait(&b.cr, &a.ia)).reject(b"no").unwrap();
    assert_eq!(
        reason_of(wait(&a.conn, &b.ia)),
        (
            ConnectionEventKind::PeerRejected,
            Some(RejReason::ConsumerDefined)
        )
    );
}
