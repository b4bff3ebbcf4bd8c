//! The five seed man pages (`docs/seeds`), rule by rule, each test named after its rule:
//! dat_ep_create, dat_ep_modify, dat_ep_get_status, dat_ep_set_watermark, dat_ep_recv_query.
//! Two IAs in memory (ChannelIo), inline progress.

mod dat_common;

use dat_common::*;
use dat_sys as sys;
use dpdk_roce::dat::{
    AccessKind, CompletionFlags, ConnectionEventKind, DatError, DatEvent, Ep, EpAttr, EpParam,
    EpParamMask, EpState, Evd, EvdFlags, Lmr, Pz, Srq, VALUE_UNKNOWN, WATERMARK_INFINITE,
};
use dpdk_roce::engine::runtime::AsyncEvent;
use dpdk_roce::transport::types::WcStatus;

const fn code(ty: u32, sub: u32) -> u32 {
    sys::DAT_CLASS_ERROR | ty | sub
}
const ARG2: u32 = code(sys::DAT_INVALID_PARAMETER, sys::DAT_INVALID_ARG2);
const ARG3: u32 = code(sys::DAT_INVALID_PARAMETER, sys::DAT_INVALID_ARG3);
const ARG4: u32 = code(sys::DAT_INVALID_PARAMETER, sys::DAT_INVALID_ARG4);
const ARG6: u32 = code(sys::DAT_INVALID_PARAMETER, sys::DAT_INVALID_ARG6);

fn soft_events(evd: &Evd, a: &dpdk_roce::dat::Ia, b: &dpdk_roce::dat::Ia, qpn: u32) -> usize {
    drain(evd, a, b, 50)
        .into_iter()
        .filter(|e| {
            matches!(e, DatEvent::Async(AsyncEvent::EpWatermark { qpn: q, soft: true, .. }) if *q == qpn)
        })
        .count()
}

// ---- dat_ep_create -------------------------------------------------------------------------

#[test]
fn ep_create_starts_unconnected() {
    let (a, _b, _psp) = pair();
    let e = ep(&a);
    assert_eq!(e.state(), EpState::Unconnected);
    assert_eq!(e.get_status(), (EpState::Unconnected, true, true));
}

#[test]
fn ep_create_null_attributes_give_usable_defaults() {
    let (a, b, _psp) = pair();
    let d = EpAttr::default();
    assert!(
        d.max_recv_iov >= 4 && d.max_request_iov >= 4,
        "dapltest needs 4 IOVs"
    );
    assert!(d.max_recv_dtos >= 64 && d.max_request_dtos >= 64);
    let (ea, eb) = (ep(&a), ep(&b));
    assert_eq!(ea.attr(), d);
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    la.write(0, b"abcdefghijklmnop").unwrap();
    // A four-segment receive and a four-segment send on default attributes.
    let recv: Vec<_> = (0..4).map(|i| lb.triplet(i * 100, 4)).collect();
    eb.post_recv(&recv, 1).unwrap();
    connect(&a, &b, &ea, &eb);
    let send: Vec<_> = (0..4).map(|i| la.triplet(i * 4, 4)).collect();
    ea.post_send(&send, 2).unwrap();
    assert_eq!(dto(&a.dto, &b.ia).status, WcStatus::Success);
    let d = dto(&b.dto, &a.ia);
    assert_eq!((d.cookie, d.transferred_length), (1, 16));
    assert_eq!(lb.read(300, 4).unwrap(), b"mnop");
}

#[test]
fn ep_create_enforces_ia_query_limits() {
    let (a, _b, _psp) = pair();
    let limits = a.ia.query();
    let try_attr = |attr: EpAttr| {
        Ep::create(
            &a.ia,
            &a.pz,
            Some(&a.dto),
            Some(&a.dto),
            None,
            None,
            Some(attr),
        )
        .map(|_| ())
        .map_err(|e| e.code())
    };
    let too_many_dtos = EpAttr {
        max_recv_dtos: limits.max_dto_per_ep + 1,
        ..EpAttr::default()
    };
    assert_eq!(try_attr(too_many_dtos), Err(ARG6));
    let too_many_iov = EpAttr {
        max_request_iov: limits.max_iov_segments_per_dto + 1,
        ..EpAttr::default()
    };
    assert_eq!(try_attr(too_many_iov), Err(ARG6));
    let too_big = EpAttr {
        max_message_size: limits.max_message_size.saturating_add(1),
        ..EpAttr::default()
    };
    assert!(limits.max_message_size == u32::MAX || try_attr(too_big) == Err(ARG6));
    let reads = EpAttr {
        max_rdma_read_in: (limits.max_rdma_read_in + 1) as u8,
        ..EpAttr::default()
    };
    assert_eq!(try_attr(reads), Err(ARG6));
    let at_limit = EpAttr {
        max_recv_dtos: limits.max_dto_per_ep,
        max_request_iov: limits.max_iov_segments_per_dto,
        ..EpAttr::default()
    };
    assert_eq!(try_attr(at_limit), Ok(()));
}

#[test]
fn ep_create_streams_on_one_evd_need_the_same_completion_flags() {
    let (a, _b, _psp) = pair();
    let unsignalled = EpAttr {
        request_completion_flags: CompletionFlags::UNSIGNALLED,
        ..EpAttr::default()
    };
    // One EP: recv DEFAULT and request UNSIGNALLED on the same EVD.
    let r = Ep::create(
        &a.ia,
        &a.pz,
        Some(&a.dto),
        Some(&a.dto),
        None,
        None,
        Some(unsignalled),
    );
    assert_eq!(r.map(|_| ()).map_err(|e| e.code()), Err(ARG4));
    // Two EPs: the second's request flags differ from the first's streams on the EVD.
    let evd = Evd::create(&a.ia, 64, EvdFlags::DTO).unwrap();
    let _first = Ep::create(&a.ia, &a.pz, None, Some(&evd), None, None, None).unwrap();
    let r = Ep::create(
        &a.ia,
        &a.pz,
        None,
        Some(&evd),
        None,
        None,
        Some(unsignalled),
    );
    assert_eq!(r.map(|_| ()).map_err(|e| e.code()), Err(ARG4));
    // UNSIGNALLED everywhere on a separate EVD is fine.
    let both = EpAttr {
        recv_completion_flags: CompletionFlags::UNSIGNALLED,
        ..unsignalled
    };
    let other = Evd::create(&a.ia, 64, EvdFlags::DTO).unwrap();
    Ep::create(
        &a.ia,
        &a.pz,
        Some(&other),
        Some(&other),
        None,
        None,
        Some(both),
    )
    .unwrap();
    // Freeing the first EP's streams lets other flags onto its EVD.
    drop(_first);
    Ep::create(
        &a.ia,
        &a.pz,
        None,
        Some(&evd),
        None,
        None,
        Some(unsignalled),
    )
    .unwrap();
}

#[test]
fn ep_create_evd_with_other_streams_takes_only_threshold_flags() {
    let (a, _b, _psp) = pair();
    let mixed = Evd::create(&a.ia, 64, EvdFlags::DTO | EvdFlags::CONNECTION).unwrap();
    let unsignalled = EpAttr {
        request_completion_flags: CompletionFlags::UNSIGNALLED,
        ..EpAttr::default()
    };
    let r = Ep::create(
        &a.ia,
        &a.pz,
        None,
        Some(&mixed),
        None,
        None,
        Some(unsignalled),
    );
    assert_eq!(r.map(|_| ()).map_err(|e| e.code()), Err(ARG4));
    let threshold = EpAttr {
        request_completion_flags: CompletionFlags::EVD_THRESHOLD,
        recv_completion_flags: CompletionFlags::EVD_THRESHOLD,
        ..EpAttr::default()
    };
    Ep::create(
        &a.ia,
        &a.pz,
        Some(&mixed),
        Some(&mixed),
        Some(&mixed),
        None,
        Some(threshold),
    )
    .unwrap();
}

#[test]
fn ep_create_solicited_wait_recv_evd_carries_no_other_stream() {
    let (a, _b, _psp) = pair();
    let solicited = EpAttr {
        recv_completion_flags: CompletionFlags::SOLICITED_WAIT,
        ..EpAttr::default()
    };
    // Not on an EVD that also takes connection events.
    let mixed = Evd::create(&a.ia, 64, EvdFlags::DTO | EvdFlags::CONNECTION).unwrap();
    let r = Ep::create(
        &a.ia,
        &a.pz,
        Some(&mixed),
        None,
        None,
        None,
        Some(solicited),
    );
    assert_eq!(r.map(|_| ()).map_err(|e| e.code()), Err(ARG3));
    // Not together with request completions.
    let evd = Evd::create(&a.ia, 64, EvdFlags::DTO).unwrap();
    let r = Ep::create(
        &a.ia,
        &a.pz,
        Some(&evd),
        Some(&evd),
        None,
        None,
        Some(solicited),
    );
    assert!(r.is_err());
    let _ok = Ep::create(&a.ia, &a.pz, Some(&evd), None, None, None, Some(solicited)).unwrap();
    let r = Ep::create(&a.ia, &a.pz, None, Some(&evd), None, None, None);
    assert_eq!(r.map(|_| ()).map_err(|e| e.code()), Err(ARG4));
}

// ---- dat_ep_modify -------------------------------------------------------------------------

#[test]
fn ep_modify_changes_only_masked_parameters() {
    let (a, _b, _psp) = pair();
    let e = ep(&a);
    let before = e.attr();
    let wanted = EpAttr {
        max_recv_dtos: 32,
        max_request_dtos: 16,
        max_message_size: 4096,
        max_recv_iov: 2,
        ..EpAttr::default()
    };
    let p = EpParam {
        attr: wanted,
        ..EpParam::default()
    };
    e.modify(
        EpParamMask::MAX_RECV_DTOS | EpParamMask::MAX_MESSAGE_SIZE,
        &p,
    )
    .unwrap();
    let after = e.attr();
    assert_eq!(after.max_recv_dtos, 32);
    assert_eq!(after.max_message_size, 4096);
    assert_eq!(
        after.max_request_dtos, before.max_request_dtos,
        "not masked"
    );
    assert_eq!(after.max_recv_iov, before.max_recv_iov, "not masked");
    // The new limits apply: 33 receives do not fit.
    let l = Lmr::create(&a.pz, 4096, RW).unwrap();
    for i in 0..32 {
        e.post_recv(&[l.triplet(0, 8)], i).unwrap();
    }
    assert!(matches!(
        e.post_recv(&[l.triplet(0, 8)], 99),
        Err(DatError::InsufficientResources(_))
    ));
    // A failing call changes nothing, not even its valid parameters.
    let bad = EpParam {
        attr: EpAttr {
            max_request_dtos: 8,
            max_recv_iov: 1000,
            ..EpAttr::default()
        },
        ..EpParam::default()
    };
    let r = e.modify(
        EpParamMask::MAX_REQUEST_DTOS | EpParamMask::MAX_RECV_IOV,
        &bad,
    );
    assert_eq!(r.unwrap_err().code(), ARG3);
    assert_eq!(e.attr(), after);
    // An EVD change moves where events go.
    let evd2 = Evd::create(&a.ia, 16, EvdFlags::DTO).unwrap();
    let p = EpParam {
        request_evd: Some(&evd2),
        ..EpParam::default()
    };
    e.modify(EpParamMask::REQUEST_EVD_HANDLE, &p).unwrap();
    assert!(evd2.free().is_err(), "the EP uses the new EVD");
}

#[test]
fn ep_modify_unmodifiable_parameters_are_invalid_parameter() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    for bit in [
        EpParamMask::IA_HANDLE,
        EpParamMask::EP_STATE,
        EpParamMask::LOCAL_IA_ADDRESS,
        EpParamMask::LOCAL_PORT_QUAL,
        EpParamMask::REMOTE_IA_ADDRESS,
        EpParamMask::REMOTE_PORT_QUAL,
        EpParamMask::SRQ_HANDLE,
    ] {
        let r = ea.modify(bit, &EpParam::default());
        assert_eq!(r.unwrap_err().code(), ARG2, "{bit:?} unconnected");
    }
    connect(&a, &b, &ea, &eb);
    let r = ea.modify(EpParamMask::REMOTE_IA_ADDRESS, &EpParam::default());
    assert_eq!(
        r.unwrap_err().code(),
        ARG2,
        "connected: still a parameter error"
    );
    // Unsupported values are parameter errors too.
    let r = eb.modify(
        EpParamMask::NUM_PROVIDER_ATTR,
        &EpParam {
            num_provider_attr: 1,
            ..EpParam::default()
        },
    );
    assert!(r.is_err());
}

#[test]
fn ep_modify_parameters_only_in_their_states() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    let pz2 = Pz::create(&a.ia).unwrap();
    let evd2 = Evd::create(&a.ia, 16, EvdFlags::DTO).unwrap();
    let p = EpParam {
        pz: Some(&pz2),
        recv_evd: Some(&evd2),
        attr: EpAttr {
            max_request_dtos: 10,
            ..EpAttr::default()
        },
        ..EpParam::default()
    };
    let state = |s: u32| code(sys::DAT_INVALID_STATE, s);
    // ACTIVE CONNECTION PENDING: nothing may change.
    ea.connect(IP_B, QUAL, b"").unwrap();
    for bit in [
        EpParamMask::PZ_HANDLE,
        EpParamMask::RECV_EVD_HANDLE,
        EpParamMask::MAX_REQUEST_DTOS,
        EpParamMask::NUM_TRANSPORT_ATTR,
    ] {
        let r = ea.modify(bit, &p);
        assert_eq!(
            r.unwrap_err().code(),
            state(sys::DAT_INVALID_STATE_EP_ACTCONNPENDING),
            "{bit:?}"
        );
    }
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR")
    };
    cr.accept(&eb, b"").unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
    assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Established);
    // CONNECTED: neither.
    let r = ea.modify(EpParamMask::MAX_REQUEST_DTOS, &p);
    assert_eq!(
        r.unwrap_err().code(),
        state(sys::DAT_INVALID_STATE_EP_CONNECTED)
    );
    let r = ea.modify(EpParamMask::PZ_HANDLE, &p);
    assert_eq!(
        r.unwrap_err().code(),
        state(sys::DAT_INVALID_STATE_EP_CONNECTED)
    );
    assert_eq!(
        ea.attr().max_request_dtos,
        EpAttr::default().max_request_dtos
    );
    assert_eq!(ea.pz_id(), a.pz.id());
    // UNCONNECTED: everything modifiable is.
    let fresh = ep(&a);
    fresh
        .modify(
            EpParamMask::PZ_HANDLE
                | EpParamMask::RECV_EVD_HANDLE
                | EpParamMask::MAX_REQUEST_DTOS
                | EpParamMask::NUM_TRANSPORT_ATTR,
            &p,
        )
        .unwrap();
    assert_eq!(fresh.pz_id(), pz2.id());
    assert_eq!(fresh.attr().max_request_dtos, 10);
    // The table of the man page.
    use dpdk_roce::dat::ep_modify::modifiable_states;
    assert_eq!(
        modifiable_states(EpParamMask::PZ_HANDLE).unwrap(),
        &[EpState::Unconnected, EpState::TentativeConnectionPending]
    );
    for bit in [
        EpParamMask::RECV_EVD_HANDLE,
        EpParamMask::REQUEST_EVD_HANDLE,
        EpParamMask::CONNECT_EVD_HANDLE,
        EpParamMask::SERVICE_TYPE,
        EpParamMask::MAX_MESSAGE_SIZE,
        EpParamMask::MAX_RDMA_SIZE,
        EpParamMask::QOS,
        EpParamMask::RECV_COMPLETION_FLAGS,
        EpParamMask::REQUEST_COMPLETION_FLAGS,
        EpParamMask::MAX_RECV_DTOS,
        EpParamMask::MAX_REQUEST_DTOS,
        EpParamMask::MAX_RECV_IOV,
        EpParamMask::MAX_REQUEST_IOV,
        EpParamMask::MAX_RDMA_READ_IN,
        EpParamMask::MAX_RDMA_READ_OUT,
    ] {
        assert_eq!(
            modifiable_states(bit).unwrap(),
            &[
                EpState::Unconnected,
                EpState::Reserved,
                EpState::PassiveConnectionPending,
                EpState::TentativeConnectionPending
            ],
            "{bit:?}"
        );
    }
    for bit in [
        EpParamMask::NUM_TRANSPORT_ATTR,
        EpParamMask::TRANSPORT_SPECIFIC_ATTR,
        EpParamMask::NUM_PROVIDER_ATTR,
        EpParamMask::PROVIDER_SPECIFIC_ATTR,
    ] {
        assert_eq!(modifiable_states(bit).unwrap(), &[EpState::Unconnected]);
    }
}

#[test]
fn ep_modify_pz_change_fails_receives_of_another_pz_with_protection_violation() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    let old_lmr = Lmr::create(&b.pz, 4096, RW).unwrap();
    // A receive posted before the change, in the old PZ.
    eb.post_recv(&[old_lmr.triplet(0, 64)], 1).unwrap();
    let pz2 = Pz::create(&b.ia).unwrap();
    let new_lmr = Lmr::create(&pz2, 4096, RW).unwrap();
    eb.modify(
        EpParamMask::PZ_HANDLE,
        &EpParam {
            pz: Some(&pz2),
            ..EpParam::default()
        },
    )
    .unwrap();
    // Later receives in the old PZ: DAT_PROTECTION_VIOLATION.
    let r = eb.post_recv(&[old_lmr.triplet(0, 64)], 2);
    assert_eq!(r, Err(DatError::ProtectionViolation(AccessKind::Write)));
    assert_eq!(
        r.unwrap_err().code(),
        code(sys::DAT_PROTECTION_VIOLATION, sys::DAT_PROTECTION_WRITE)
    );
    eb.post_recv(&[new_lmr.triplet(0, 64)], 3).unwrap();
    // The one posted before the change fails when a message lands in it; the next succeeds.
    connect(&a, &b, &ea, &eb);
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    la.write(0, b"first").unwrap();
    ea.post_send(&[la.triplet(0, 5)], 10).unwrap();
    let d = dto(&b.dto, &a.ia);
    assert_eq!(d.cookie, 1);
    assert_ne!(
        d.status,
        WcStatus::Success,
        "old-PZ buffer must not be written"
    );
    assert_eq!(old_lmr.read(0, 5).unwrap(), [0; 5]);
}

#[test]
fn ep_modify_recv_completion_flags_only_before_receives_are_posted() {
    let (a, _b, _psp) = pair();
    let e = Ep::create(&a.ia, &a.pz, None, Some(&a.dto), None, None, None).unwrap();
    let p = EpParam {
        attr: EpAttr {
            recv_completion_flags: CompletionFlags::EVD_THRESHOLD,
            ..EpAttr::default()
        },
        ..EpParam::default()
    };
    e.modify(EpParamMask::RECV_COMPLETION_FLAGS, &p).unwrap();
    let l = Lmr::create(&a.pz, 64, RW).unwrap();
    e.post_recv(&[l.triplet(0, 8)], 1).unwrap();
    let back = EpParam {
        attr: EpAttr::default(),
        ..EpParam::default()
    };
    assert_eq!(
        e.modify(EpParamMask::RECV_COMPLETION_FLAGS, &back)
            .unwrap_err()
            .code(),
        code(
            sys::DAT_INVALID_STATE,
            sys::DAT_INVALID_STATE_EP_UNCONNECTED
        )
    );
}

// ---- dat_ep_get_status ---------------------------------------------------------------------

#[test]
fn ep_get_status_reports_state_and_idle_booleans() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    assert_eq!(eb.get_status(), (EpState::Unconnected, true, true));
    eb.post_recv(&[lb.triplet(0, 64)], 1).unwrap();
    assert_eq!(eb.get_status(), (EpState::Unconnected, false, true));
    connect(&a, &b, &ea, &eb);
    ea.post_rdma_read(&[la.triplet(0, 8)], &lb.rmr_triplet(0, 8), 5)
        .unwrap();
    let (s, recv_idle, request_idle) = ea.get_status();
    assert_eq!((s, recv_idle), (EpState::Connected, true));
    assert!(!request_idle, "a read is outstanding");
    dto(&a.dto, &b.ia);
    assert_eq!(ea.get_status(), (EpState::Connected, true, true));
    ea.post_send(&[la.triplet(0, 8)], 6).unwrap();
    dto(&a.dto, &b.ia);
    dto(&b.dto, &a.ia);
    assert_eq!(eb.get_status(), (EpState::Connected, true, true));
}

#[test]
fn ep_get_status_srq_ep_recv_idle_counts_buffers_taken_from_the_srq() {
    let (a, b, _psp) = pair();
    let srq = Srq::create(&b.pz, 16, 1).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    for i in 0..4 {
        srq.post_recv(&[lb.triplet(i * 64, 64)], i).unwrap();
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
    assert!(
        eb.get_status().1,
        "SRQ buffers are not the EP's until taken"
    );
    connect(&a, &b, &ea, &eb);
    let la = Lmr::create(&a.pz, 64, RW).unwrap();
    ea.post_send(&[la.triplet(0, 8)], 1).unwrap();
    dto(&a.dto, &b.ia);
    dto(&b.dto, &a.ia);
    assert_eq!(eb.get_status(), (EpState::Connected, true, true));
    assert_eq!(eb.recv_query().unwrap().nbufs_allocated, 0);
}

// ---- dat_ep_set_watermark ------------------------------------------------------------------

#[test]
fn set_watermark_soft_fires_one_async_event_per_arming() {
    let (a, b, _psp) = pair();
    let e = ep(&a);
    let l = Lmr::create(&a.pz, 4096, RW).unwrap();
    let async_evd = a.ia.async_evd();
    e.set_watermark(2, WATERMARK_INFINITE).unwrap();
    for i in 0..2 {
        e.post_recv(&[l.triplet(0, 8)], i).unwrap();
    }
    assert_eq!(
        soft_events(async_evd, &a.ia, &b.ia, e.qpn()),
        0,
        "2 is not above 2"
    );
    e.post_recv(&[l.triplet(0, 8)], 3).unwrap();
    assert_eq!(
        soft_events(async_evd, &a.ia, &b.ia, e.qpn()),
        1,
        "exceeded once"
    );
    for i in 4..8 {
        e.post_recv(&[l.triplet(0, 8)], i).unwrap();
    }
    assert_eq!(
        soft_events(async_evd, &a.ia, &b.ia, e.qpn()),
        0,
        "once per arming"
    );
    assert_eq!(e.armed_watermarks().0, None);
    // The next call re-arms (7 buffers are not above 10: it stays armed).
    e.set_watermark(10, WATERMARK_INFINITE).unwrap();
    assert_eq!(e.armed_watermarks().0, Some(10));
    for i in 8..11 {
        e.post_recv(&[l.triplet(0, 8)], i).unwrap();
    }
    assert_eq!(
        soft_events(async_evd, &a.ia, &b.ia, e.qpn()),
        0,
        "10 is not above 10"
    );
    e.post_recv(&[l.triplet(0, 8)], 11).unwrap();
    assert_eq!(soft_events(async_evd, &a.ia, &b.ia, e.qpn()), 1, "rearmed");
}

#[test]
fn set_watermark_fires_at_once_when_already_exceeded() {
    let (a, b, _psp) = pair();
    let e = ep(&a);
    let l = Lmr::create(&a.pz, 4096, RW).unwrap();
    for i in 0..5 {
        e.post_recv(&[l.triplet(0, 8)], i).unwrap();
    }
    drain(a.ia.async_evd(), &a.ia, &b.ia, 10);
    e.set_watermark(3, WATERMARK_INFINITE).unwrap();
    // During the call: already queued, no progress needed.
    match a.ia.async_evd().dequeue() {
        Ok(DatEvent::Async(AsyncEvent::EpWatermark {
            qpn, soft: true, ..
        })) => {
            assert_eq!(qpn, e.qpn())
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(soft_events(a.ia.async_evd(), &a.ia, &b.ia, e.qpn()), 0);
}

#[test]
fn set_watermark_hard_breaks_the_connection_on_the_connect_evd() {
    let (a, b, _psp) = pair();
    // Two EPs on B: one per shard (the CM runs on shard 0, the other shard relays).
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    let mut shards = Vec::new();
    for _ in 0..2 {
        let (ea, eb) = (ep(&a), ep(&b));
        shards.push(eb.shard());
        eb.post_recv(&[lb.triplet(0, 8)], 1).unwrap();
        eb.set_watermark(WATERMARK_INFINITE, 1).unwrap();
        connect(&a, &b, &ea, &eb);
        // Hard watermarks count only once connected: 1 buffer is not above 1.
        eb.post_recv(&[lb.triplet(0, 8)], 2).unwrap();
        match wait(&b.conn, &a.ia) {
            DatEvent::Connection { ep, kind, .. } => {
                assert_eq!(ep, eb.qpn());
                assert_eq!(kind, ConnectionEventKind::Broken);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(eb.state(), EpState::Disconnected);
        // The peer sees the disconnect; B's receives flush.
        assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Disconnected);
        for _ in 0..2 {
            assert_eq!(dto(&b.dto, &a.ia).status, WcStatus::WrFlushErr);
        }
        // No DISCONNECTED after the BROKEN.
        assert!(drain(&b.conn, &a.ia, &b.ia, 50).is_empty());
    }
    shards.sort();
    assert_eq!(shards, vec![0, 1]);
}

#[test]
fn set_watermark_infinite_generates_nothing() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    eb.set_watermark(0, 0).unwrap();
    eb.set_watermark(WATERMARK_INFINITE, WATERMARK_INFINITE)
        .unwrap();
    assert_eq!(eb.armed_watermarks(), (None, None));
    for i in 0..8 {
        eb.post_recv(&[lb.triplet(0, 8)], i).unwrap();
    }
    connect(&a, &b, &ea, &eb);
    assert_eq!(soft_events(b.ia.async_evd(), &a.ia, &b.ia, eb.qpn()), 0);
    assert!(drain(&b.conn, &a.ia, &b.ia, 20).is_empty());
    assert_eq!(eb.state(), EpState::Connected);
    // A count above i32::MAX that is not DAT_WATERMARK_INFINITE is a parameter error.
    assert_eq!(eb.set_watermark(u32::MAX - 5, 1).unwrap_err().code(), ARG2);
}

#[test]
fn set_watermark_is_accepted_in_every_ep_state() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    let mut seen = Vec::new();
    let mut check = |e: &Ep| {
        e.set_watermark(100, WATERMARK_INFINITE).unwrap();
        seen.push(e.state());
    };
    check(&ea);
    ea.connect(IP_B, QUAL, b"").unwrap();
    check(&ea);
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!()
    };
    cr.accept(&eb, b"").unwrap();
    check(&eb);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
    check(&ea);
    ea.disconnect().unwrap();
    check(&ea);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Disconnected);
    check(&ea);
    assert_eq!(
        seen,
        vec![
            EpState::Unconnected,
            EpState::ActiveConnectionPending,
            EpState::CompletionPending,
            EpState::Connected,
            EpState::DisconnectPending,
            EpState::Disconnected
        ]
    );
}

// ---- dat_ep_recv_query ---------------------------------------------------------------------

#[test]
fn recv_query_count_and_span_from_one_snapshot_never_unknown() {
    let (a, b, _psp) = pair();
    // Own receive queue: allocated when posted.
    let (ea, eb) = (ep(&a), ep(&b));
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    for i in 0..3 {
        eb.post_recv(&[lb.triplet(i * 64, 64)], i).unwrap();
    }
    let q = eb.recv_query().unwrap();
    assert_eq!((q.nbufs_allocated, q.bufs_alloc_span), (3, 3));
    connect(&a, &b, &ea, &eb);
    let la = Lmr::create(&a.pz, 64, RW).unwrap();
    ea.post_send(&[la.triplet(0, 8)], 9).unwrap();
    dto(&b.dto, &a.ia);
    let q = eb.recv_query().unwrap();
    assert_eq!((q.nbufs_allocated, q.bufs_alloc_span), (2, 2));
    // SRQ EP: allocated when taken from the SRQ, completed with its receive.
    let srq = Srq::create(&b.pz, 16, 1).unwrap();
    for i in 0..4 {
        srq.post_recv(&[lb.triplet(1024 + i * 64, 64)], 100 + i)
            .unwrap();
    }
    let ea2 = ep(&a);
    let eb2 = Ep::create(
        &b.ia,
        &b.pz,
        Some(&b.dto),
        Some(&b.dto),
        Some(&b.conn),
        Some(&srq),
        None,
    )
    .unwrap();
    let q = eb2.recv_query().unwrap();
    assert_eq!(
        (q.nbufs_allocated, q.bufs_alloc_span),
        (0, 0),
        "nothing taken yet"
    );
    connect(&a, &b, &ea2, &eb2);
    for i in 0..2 {
        ea2.post_send(&[la.triplet(0, 8)], i).unwrap();
        dto(&b.dto, &a.ia);
        let q = eb2.recv_query().unwrap();
        assert!(q.bufs_alloc_span >= q.nbufs_allocated);
        assert_ne!(q.nbufs_allocated, VALUE_UNKNOWN);
        assert_ne!(q.bufs_alloc_span, VALUE_UNKNOWN);
        assert_eq!(q.nbufs_allocated, 0, "completed");
    }
}
