//! dat_cr_handoff through the Rust DAT API, in memory (two IAs over a ChannelIo cable, inline
//! progress). DAT 2.0: the request moves to the PSP of another connection qualifier of the
//! same IA (a new connection-request event on that PSP's EVD), where it is accepted or
//! rejected as usual; with no such PSP the call fails and the request stays with the caller.

mod dat_common;

use dat_common::*;
use dpdk_roce::dat::{ConnectionEventKind, DatError, DatEvent, Evd, EvdFlags, Psp};
use dpdk_roce::transport::types::WcStatus;

const OTHER_QUAL: u16 = 45300;

#[test]
fn dat_cr_handoff_moves_the_request_to_the_other_psp_which_accepts_it() {
    let (a, b, _psp) = pair();
    let cr2 = Evd::create(&b.ia, 16, EvdFlags::CR).unwrap();
    let _psp2 = Psp::create(&b.ia, OTHER_QUAL, &cr2).unwrap();
    let (ea, eb) = (ep(&a), ep(&b));
    ea.connect(IP_B, QUAL, b"for whoever").unwrap();
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR");
    };
    assert_eq!(cr.conn_qual(), QUAL);
    cr.handoff(OTHER_QUAL).unwrap();
    // Nothing more on the original EVD; the request is on the other PSP's.
    assert!(drain(&b.cr, &a.ia, &b.ia, 10).is_empty());
    let DatEvent::ConnectionRequest(cr) = wait(&cr2, &a.ia) else {
        panic!("no handed-off CR");
    };
    assert_eq!(cr.conn_qual(), OTHER_QUAL, "the new PSP's qualifier");
    assert_eq!(cr.remote_address(), IP_A);
    assert!(
        cr.private_data().starts_with(b"for whoever"),
        "the request's private data"
    );
    cr.accept(&eb, b"handed over").unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
    assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Established);
    // The connection works.
    let la = dpdk_roce::dat::Lmr::create(&a.pz, 64, RW).unwrap();
    let lb = dpdk_roce::dat::Lmr::create(&b.pz, 64, RW).unwrap();
    eb.post_recv(&[lb.triplet(0, 64)], 5).unwrap();
    la.write(0, b"after handoff").unwrap();
    ea.post_send(&[la.triplet(0, 13)], 6).unwrap();
    assert_eq!(dto(&a.dto, &b.ia).status, WcStatus::Success);
    assert_eq!(dto(&b.dto, &a.ia).transferred_length, 13);
    assert_eq!(lb.read(0, 13).unwrap(), b"after handoff");
}

#[test]
fn dat_cr_handoff_to_a_qualifier_without_psp_fails_and_the_request_stays_rejectable() {
    let (a, b, _psp) = pair();
    let ea = ep(&a);
    ea.connect(IP_B, QUAL, b"").unwrap();
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR");
    };
    let refused = cr.handoff(OTHER_QUAL).unwrap_err();
    assert!(matches!(refused.error, DatError::InvalidArg { arg: 2, .. }));
    assert_eq!(
        refused.error.code(),
        dat_sys::DAT_CLASS_ERROR | dat_sys::DAT_INVALID_PARAMETER | dat_sys::DAT_INVALID_ARG2
    );
    let cr = refused.object;
    assert_eq!(cr.conn_qual(), QUAL, "unchanged");
    cr.reject(b"no").unwrap();
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::PeerRejected);
}

#[test]
fn dat_cr_handoff_to_a_freed_psp_fails_and_the_rejected_handoff_target_gets_nothing() {
    let (a, b, _psp) = pair();
    let cr2 = Evd::create(&b.ia, 16, EvdFlags::CR).unwrap();
    let psp2 = Psp::create(&b.ia, OTHER_QUAL, &cr2).unwrap();
    psp2.free();
    let ea = ep(&a);
    ea.connect(IP_B, QUAL, b"").unwrap();
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR");
    };
    let refused = cr.handoff(OTHER_QUAL).unwrap_err();
    assert!(matches!(refused.error, DatError::InvalidArg { arg: 2, .. }));
    assert!(drain(&cr2, &a.ia, &b.ia, 10).is_empty());
    // Dropping the request unanswered rejects it.
    drop(refused);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::PeerRejected);
}
