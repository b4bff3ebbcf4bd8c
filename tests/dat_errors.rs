//! DatError -> DAT_RETURN (dat_error.h): type and subtype per variant; and the completion
//! flags of posts (DAT_COMPLETION_SUPPRESS_FLAG frees the slot without an event).

mod dat_common;

use dat_common::*;
use dat_sys as sys;
use dpdk_roce::dat::{
    AccessKind, CompletionFlags, DatError, EpAttr, EpState, HandleKind, Lmr, StateKind,
};
use dpdk_roce::transport::types::WcStatus;

#[test]
fn dat_error_codes_carry_type_and_subtype() {
    let e = |ty: u32, sub: u32| sys::DAT_CLASS_ERROR | ty | sub;
    let cases = [
        (DatError::QueueEmpty, sys::DAT_QUEUE_EMPTY),
        (DatError::TimeoutExpired, e(sys::DAT_TIMEOUT_EXPIRED, 0)),
        (
            DatError::InvalidArg { arg: 1, what: "" },
            e(sys::DAT_INVALID_PARAMETER, sys::DAT_INVALID_ARG1),
        ),
        (
            DatError::InvalidArg { arg: 10, what: "" },
            e(sys::DAT_INVALID_PARAMETER, sys::DAT_INVALID_ARG10),
        ),
        (
            DatError::InvalidHandleOf {
                kind: HandleKind::EvdConn,
                what: "",
            },
            e(sys::DAT_INVALID_HANDLE, sys::DAT_INVALID_HANDLE_EVD_CONN),
        ),
        (
            DatError::EpState {
                state: EpState::Disconnected,
            },
            e(
                sys::DAT_INVALID_STATE,
                sys::DAT_INVALID_STATE_EP_DISCONNECTED,
            ),
        ),
        (
            DatError::InvalidStateOf {
                kind: StateKind::PzInUse,
                what: String::new(),
            },
            e(sys::DAT_INVALID_STATE, sys::DAT_INVALID_STATE_PZ_IN_USE),
        ),
        (
            DatError::InsufficientResources(String::new()),
            e(sys::DAT_INSUFFICIENT_RESOURCES, 0),
        ),
        (
            DatError::ModelNotSupported(""),
            e(sys::DAT_MODEL_NOT_SUPPORTED, 0),
        ),
        (
            DatError::ProtectionViolation(AccessKind::RdmaRead),
            e(sys::DAT_PROTECTION_VIOLATION, sys::DAT_PROTECTION_RDMA_READ),
        ),
        (DatError::ConnQualInUse(7), e(sys::DAT_CONN_QUAL_IN_USE, 0)),
    ];
    for (err, code) in cases {
        assert_eq!(err.code(), code, "{err}");
        assert_eq!(err.subtype(), code & sys::DAT_SUBTYPE_MASK);
    }
    assert_eq!(
        DatError::QueueEmpty.code(),
        0x000D_0000,
        "bare, as dtest -p expects"
    );
}

#[test]
fn completion_suppress_flag_frees_the_slot_without_an_event() {
    let (a, b, _psp) = pair();
    let ea = dpdk_roce::dat::Ep::create(
        &a.ia,
        &a.pz,
        Some(&a.dto),
        Some(&a.dto),
        Some(&a.conn),
        None,
        Some(EpAttr {
            max_request_dtos: 2,
            ..EpAttr::default()
        }),
    )
    .unwrap();
    let eb = ep(&b);
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    connect(&a, &b, &ea, &eb);
    // Ten suppressed writes through a queue of two: each frees its slot, none has an event.
    let post = |i: u64, flags| loop {
        match ea.post_rdma_write_with(&[la.triplet(0, 8)], &lb.rmr_triplet(i * 8, 8), i, flags) {
            Ok(()) => break,
            Err(DatError::InsufficientResources(_)) => {
                a.ia.progress();
                b.ia.progress();
            }
            Err(e) => panic!("{e}"),
        }
    };
    for i in 0..10u64 {
        post(i, CompletionFlags::SUPPRESS);
    }
    post(99, CompletionFlags::DEFAULT);
    let d = dto(&a.dto, &b.ia);
    assert_eq!(
        (d.cookie, d.status),
        (99, WcStatus::Success),
        "only the signaled one"
    );
    assert!(drain(&a.dto, &a.ia, &b.ia, 20).is_empty());
    assert!(ea.get_status().2, "request idle");
    // UNSIGNALLED needs the EP attribute.
    assert_eq!(
        ea.post_send_with(&[la.triplet(0, 8)], 1, CompletionFlags::UNSIGNALLED)
            .unwrap_err()
            .code(),
        sys::DAT_CLASS_ERROR | sys::DAT_INVALID_PARAMETER | sys::DAT_INVALID_ARG5
    );
}

/// A DTO that completes in error (here a NAK remote access error for an RDMA write with an
/// rkey nobody registered) breaks the connection: DAT_CONNECTION_EVENT_BROKEN on the
/// initiator's connection EVD, its EP DISCONNECTED, and the peer gets DISCONNECTED (the DREQ).
#[test]
fn a_dto_error_breaks_the_connection() {
    let (a, b, _psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    connect(&a, &b, &ea, &eb);
    let mut bad = lb.rmr_triplet(0, 8);
    bad.rmr_context ^= 0x5a5a_0000;
    ea.post_rdma_write(&[la.triplet(0, 8)], &bad, 1).unwrap();
    assert_eq!(dto(&a.dto, &b.ia).status, WcStatus::RemAccessErr);
    assert_eq!(
        conn(&a.conn, &b.ia),
        dpdk_roce::dat::ConnectionEventKind::Broken
    );
    assert_eq!(ea.state(), EpState::Disconnected);
    assert_eq!(
        conn(&b.conn, &a.ia),
        dpdk_roce::dat::ConnectionEventKind::Disconnected
    );
    assert_eq!(eb.state(), EpState::Disconnected);
}
