//! RMRs (memory windows) through the DAT API, in memory (two IAs over a ChannelIo cable,
//! inline progress): bind completion, the rmr_context as an R_Key for a peer's RDMA, rights and
//! range, unbind and free killing the key. Each test is named after the DAT rule it checks.

mod dat_common;

use dat_common::*;
use dat_sys as sys;
use dpdk_roce::dat::{DatError, Lmr, Pz, Rmr, RmrTriplet};
use dpdk_roce::transport::memory::Access;
use dpdk_roce::transport::types::{WcOpcode, WcStatus};

const REMOTE_RW: Access = Access::REMOTE_READ.union(Access::REMOTE_WRITE);

/// A connected pair with an LMR on each side; B's RMR bound over 512 bytes at 1024 of B's LMR.
struct Setup {
    a: Side,
    b: Side,
    ea: dpdk_roce::dat::Ep,
    eb: dpdk_roce::dat::Ep,
    la: Lmr,
    lb: Lmr,
    rmr: Rmr,
    key: u32,
    _psp: dpdk_roce::dat::Psp,
}

fn setup(access: Access) -> Setup {
    let (a, b, psp) = pair();
    let (ea, eb) = (ep(&a), ep(&b));
    connect(&a, &b, &ea, &eb);
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    let rmr = Rmr::create(&b.pz).unwrap();
    assert_eq!(rmr.query().rmr_context, None, "created unbound");
    let key = rmr
        .bind(&lb, lb.triplet(1024, 512), access, &eb, 9)
        .unwrap();
    let d = dto(&b.dto, &a.ia);
    assert_eq!(
        (d.cookie, d.status, d.opcode, d.ep),
        (9, WcStatus::Success, WcOpcode::BindMw, eb.qpn()),
        "DAT_RMR_BIND_COMPLETION_EVENT on the request EVD"
    );
    Setup {
        a,
        b,
        ea,
        eb,
        la,
        lb,
        rmr,
        key,
        _psp: psp,
    }
}

fn window(s: &Setup, key: u32, offset: u64, len: u32) -> RmrTriplet {
    RmrTriplet {
        rmr_context: key,
        target_address: s.lb.address() + offset,
        segment_length: len,
    }
}

#[test]
fn dat_rmr_bind_context_is_an_r_key_for_the_bound_range() {
    let s = setup(REMOTE_RW);
    assert_ne!(s.key, s.lb.rmr_context(), "a key of its own");
    let q = s.rmr.query();
    assert_eq!(q.rmr_context, Some(s.key));
    assert_eq!(q.lmr_triplet, Some(s.lb.triplet(1024, 512)));
    assert_eq!(q.access, REMOTE_RW);
    assert_eq!(q.pz_id, s.b.pz.id());
    let msg: Vec<u8> = (0..512u32).map(|i| (i * 3) as u8).collect();
    s.la.write(0, &msg).unwrap();
    s.ea.post_rdma_write(&[s.la.triplet(0, 512)], &window(&s, s.key, 1024, 512), 1)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::Success);
    assert_eq!(s.lb.read(1024, 512).unwrap(), msg);
    s.lb.write(1100, b"window").unwrap();
    s.ea.post_rdma_read(&[s.la.triplet(2048, 6)], &window(&s, s.key, 1100, 6), 2)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::Success);
    assert_eq!(s.la.read(2048, 6).unwrap(), b"window");
}

#[test]
fn dat_rmr_key_outside_the_bound_range_is_a_remote_access_error() {
    let s = setup(REMOTE_RW);
    // One byte before the window: inside the LMR, outside the RMR.
    s.ea.post_rdma_write(&[s.la.triplet(0, 8)], &window(&s, s.key, 1020, 8), 1)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::RemAccessErr);
    assert_eq!(s.lb.read(1016, 16).unwrap(), vec![0; 16], "nothing written");
}

#[test]
fn dat_rmr_bind_rights_limit_the_peer() {
    let s = setup(Access::REMOTE_READ);
    s.ea.post_rdma_write(&[s.la.triplet(0, 8)], &window(&s, s.key, 1024, 8), 1)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::RemAccessErr);
}

#[test]
fn dat_rmr_unbound_key_fails_with_remote_access_error() {
    let s = setup(REMOTE_RW);
    s.rmr.unbind(&s.eb, 10).unwrap();
    let d = dto(&s.b.dto, &s.a.ia);
    assert_eq!((d.cookie, d.opcode), (10, WcOpcode::BindMw));
    assert_eq!(s.rmr.query().rmr_context, None);
    s.ea.post_rdma_write(&[s.la.triplet(0, 8)], &window(&s, s.key, 1024, 8), 1)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::RemAccessErr);
}

#[test]
fn dat_rmr_free_kills_the_key_and_releases_the_lmr() {
    let s = setup(REMOTE_RW);
    let Setup {
        a,
        b,
        ea,
        la,
        lb,
        rmr,
        key,
        ..
    } = s;
    let lb = match lb.free() {
        Err(r) => {
            assert_eq!(
                r.error.code(),
                sys::DAT_CLASS_ERROR | sys::DAT_INVALID_STATE | sys::DAT_INVALID_STATE_LMR_IN_USE
            );
            r.object
        }
        Ok(()) => panic!("LMR freed while an RMR is bound to it"),
    };
    let target = RmrTriplet {
        rmr_context: key,
        target_address: lb.address() + 1024,
        segment_length: 8,
    };
    rmr.free();
    lb.free().unwrap();
    ea.post_rdma_write(&[la.triplet(0, 8)], &target, 1).unwrap();
    assert_eq!(dto(&a.dto, &b.ia).status, WcStatus::RemAccessErr);
}

#[test]
fn dat_rmr_bind_checks_pz_range_and_rights() {
    let s = setup(REMOTE_RW);
    let other_pz = Pz::create(&s.b.ia).unwrap();
    let foreign = Rmr::create(&other_pz).unwrap();
    assert!(matches!(
        foreign.bind(&s.lb, s.lb.triplet(0, 8), REMOTE_RW, &s.eb, 1),
        Err(DatError::InvalidArg { arg: 2, .. })
    ));
    let r = Rmr::create(&s.b.pz).unwrap();
    assert!(matches!(
        r.bind(&s.lb, s.lb.triplet(4000, 200), REMOTE_RW, &s.eb, 1),
        Err(DatError::InvalidArg { arg: 3, .. })
    ));
    let ro = Lmr::create(&s.b.pz, 64, Access::LOCAL_WRITE).unwrap();
    assert!(matches!(
        r.bind(&ro, ro.triplet(0, 8), Access::REMOTE_WRITE, &s.eb, 1),
        Err(DatError::InvalidArg { arg: 3, .. })
    ));
    assert_eq!(r.query().rmr_context, None, "failed binds leave it unbound");
    r.context().set(77);
    assert_eq!(r.context().get(), 77);
}
