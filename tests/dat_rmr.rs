//! RMRs (memory windows) through the DAT API, in memory (two IAs over a ChannelIo cable,
//! inline progress): bind completion, the rmr_context as an R_Key for a peer's RDMA, rights and
//! range, unbind and free killing the key. Each test is named after the DAT rule it checks.

mod dat_common;

use dat_common::*;
use dat_sys as sys;
use dpdk_roce::dat::{
    CompletionFlags, ConnectionEventKind, DatError, DtoEvent, EpState, Lmr, MemPriv, Pz, Rmr,
    RmrTriplet,
};
use dpdk_roce::mem::access::Access;
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
    assert_eq!(d.rmr, Some(rmr.id()), "the event names the RMR");
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

/// dat_rmr_bind's privileges as the consumer gives them: the window grants their remote rights
/// only (local use is the LMR's), and dat_rmr_query reports them as given.
#[test]
fn dat_rmr_bind_privileges_are_reported_as_given_and_grant_remote_rights_only() {
    let s = setup(REMOTE_RW);
    let privs = MemPriv::REMOTE_READ | MemPriv::LOCAL_WRITE | MemPriv::REMOTE_ATOMIC;
    let key = s
        .rmr
        .bind_privileges(
            &s.lb,
            s.lb.triplet(0, 256),
            privs,
            &s.eb,
            3,
            CompletionFlags::DEFAULT,
        )
        .unwrap();
    assert_eq!(dto(&s.b.dto, &s.a.ia).cookie, 3);
    let q = s.rmr.query();
    assert_eq!(q.mem_priv, privs);
    assert_eq!(q.access, Access::REMOTE_READ | Access::REMOTE_ATOMIC);
    // No remote write through it.
    s.ea.post_rdma_write(&[s.la.triplet(0, 8)], &window(&s, key, 0, 8), 1)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::RemAccessErr);
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

// ---- dat_ep_post_send_with_invalidate --------------------------------------------------------

#[test]
fn dat_ep_post_send_with_invalidate_kills_the_peers_rmr_and_names_it_in_the_receive() {
    let s = setup(REMOTE_RW);
    s.eb.post_recv(&[s.lb.triplet(0, 64)], 40).unwrap();
    s.la.write(0, b"done with your window").unwrap();
    s.ea.post_send_with_invalidate(&[s.la.triplet(0, 21)], 41, CompletionFlags::DEFAULT, s.key)
        .unwrap();
    let d = dto(&s.a.dto, &s.b.ia);
    assert_eq!(
        (d.cookie, d.status, d.opcode),
        (41, WcStatus::Success, WcOpcode::Send)
    );
    let r = dto(&s.b.dto, &s.a.ia);
    assert_eq!(
        (r.cookie, r.status, r.transferred_length, r.invalidated_rmr),
        (40, WcStatus::Success, 21, Some(s.key))
    );
    assert_eq!(s.lb.read(0, 21).unwrap(), b"done with your window");
    assert_eq!(s.rmr.query().rmr_context, None, "the RMR is unbound now");
    // The key is dead: a write through it fails.
    s.ea.post_rdma_write(&[s.la.triplet(0, 8)], &window(&s, s.key, 1024, 8), 42)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::RemAccessErr);
}

#[test]
fn dat_ep_post_send_with_invalidate_of_an_unknown_context_is_an_invalid_request() {
    let s = setup(REMOTE_RW);
    // A context that was valid once: bound, then unbound (its generation is dead for good).
    let gone = Rmr::create(&s.b.pz).unwrap();
    let bogus = gone
        .bind(&s.lb, s.lb.triplet(0, 64), REMOTE_RW, &s.eb, 52)
        .unwrap();
    gone.unbind(&s.eb, 53).unwrap();
    // Two RMRs through one EP with one cookie: each event names its own RMR.
    s.rmr.unbind(&s.eb, 53).unwrap();
    let names = |d: DtoEvent| (d.cookie, d.rmr);
    assert_eq!(names(dto(&s.b.dto, &s.a.ia)), (52, Some(gone.id())));
    assert_eq!(names(dto(&s.b.dto, &s.a.ia)), (53, Some(gone.id())));
    assert_eq!(names(dto(&s.b.dto, &s.a.ia)), (53, Some(s.rmr.id())));
    assert_ne!(gone.id(), s.rmr.id());
    let key = s
        .rmr
        .bind(&s.lb, s.lb.triplet(1024, 512), REMOTE_RW, &s.eb, 54)
        .unwrap();
    assert_eq!(dto(&s.b.dto, &s.a.ia).rmr, Some(s.rmr.id()));
    let s = Setup { key, ..s };
    s.eb.post_recv(&[s.lb.triplet(0, 64)], 50).unwrap();
    s.ea.post_send_with_invalidate(&[s.la.triplet(0, 8)], 51, CompletionFlags::DEFAULT, bogus)
        .unwrap();
    let d = dto(&s.a.dto, &s.b.ia);
    assert_eq!((d.cookie, d.status), (51, WcStatus::RemInvReqErr));
    // The real window still works from B's side: its key was not touched.
    assert_eq!(s.rmr.query().rmr_context, Some(s.key));
}

// ---- dat_ep_post_rdma_read_to_rmr -----------------------------------------------------------

/// A's own RMR over 256 bytes at 512 of A's LMR, with `access`, bound through `ea`.
fn a_sink(s: &Setup, access: Access) -> (Rmr, u32) {
    let r = Rmr::create(&s.a.pz).unwrap();
    let key = r
        .bind(&s.la, s.la.triplet(512, 256), access, &s.ea, 60)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).opcode, WcOpcode::BindMw);
    (r, key)
}

#[test]
fn dat_ep_post_rdma_read_to_rmr_lands_in_the_rmrs_range_of_its_lmr() {
    let s = setup(REMOTE_RW);
    let (_r, key) = a_sink(&s, REMOTE_RW);
    s.lb.write(1024, b"read into a window").unwrap();
    let local = RmrTriplet {
        rmr_context: key,
        target_address: s.la.address() + 600,
        segment_length: 18,
    };
    s.ea.post_rdma_read_to_rmr(
        &local,
        &window(&s, s.key, 1024, 18),
        61,
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    let d = dto(&s.a.dto, &s.b.ia);
    assert_eq!(
        (d.cookie, d.status, d.opcode, d.transferred_length),
        (61, WcStatus::Success, WcOpcode::RdmaRead, 18)
    );
    assert_eq!(s.la.read(600, 18).unwrap(), b"read into a window");
    assert_eq!(
        s.la.read(582, 18).unwrap(),
        vec![0; 18],
        "nothing before it"
    );
}

#[test]
fn dat_ep_post_rdma_read_to_rmr_checks_range_rights_and_context() {
    let s = setup(REMOTE_RW);
    let (_r, key) = a_sink(&s, REMOTE_RW);
    let remote = window(&s, s.key, 1024, 16);
    let at = |off: u64, len: u32, key: u32| RmrTriplet {
        rmr_context: key,
        target_address: s.la.address() + off,
        segment_length: len,
    };
    // Past the end of the RMR's range (512 + 256), inside the LMR.
    assert!(matches!(
        s.ea.post_rdma_read_to_rmr(&at(760, 16, key), &remote, 1, CompletionFlags::DEFAULT),
        Err(DatError::LengthError(_))
    ));
    // Before its start.
    assert!(matches!(
        s.ea.post_rdma_read_to_rmr(&at(500, 16, key), &remote, 1, CompletionFlags::DEFAULT),
        Err(DatError::LengthError(_))
    ));
    // Not a context of a bound RMR (the LMR's own context is not an RMR's).
    assert!(matches!(
        s.ea.post_rdma_read_to_rmr(
            &at(512, 16, s.la.rmr_context()),
            &remote,
            1,
            CompletionFlags::DEFAULT
        ),
        Err(DatError::InvalidArg { arg: 2, .. })
    ));
    // An RMR without remote write cannot be a read's sink.
    let (_ro, ro_key) = a_sink(&s, Access::REMOTE_READ);
    assert!(matches!(
        s.ea.post_rdma_read_to_rmr(&at(512, 16, ro_key), &remote, 1, CompletionFlags::DEFAULT),
        Err(DatError::PrivilegesViolation(_))
    ));
    // After an unbind the context resolves to nothing.
    let (r2, key2) = a_sink(&s, REMOTE_RW);
    r2.unbind(&s.ea, 62).unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).cookie, 62);
    assert!(matches!(
        s.ea.post_rdma_read_to_rmr(&at(512, 16, key2), &remote, 1, CompletionFlags::DEFAULT),
        Err(DatError::InvalidArg { arg: 2, .. })
    ));
    // Nothing was posted by the refused calls.
    assert!(drain(&s.a.dto, &s.a.ia, &s.b.ia, 10).is_empty());
}

// ---- dat_rmr_create_for_ep ------------------------------------------------------------------

#[test]
fn dat_rmr_create_for_ep_binds_to_one_ep_at_a_time() {
    let s = setup(REMOTE_RW);
    let r = Rmr::create_for_ep(&s.a.pz).unwrap();
    assert!(r.is_for_ep());
    assert!(r.query().scope_ep);
    let key = r
        .bind(&s.la, s.la.triplet(512, 256), REMOTE_RW, &s.ea, 70)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).cookie, 70);
    assert_eq!(r.bound_ep(), Some(s.ea.qpn()));
    // Another EP of the same PZ may neither rebind nor unbind it while it is bound.
    let other = ep(&s.a);
    assert!(matches!(
        r.bind(&s.la, s.la.triplet(0, 64), REMOTE_RW, &other, 71),
        Err(DatError::InvalidState(_))
    ));
    assert!(matches!(
        r.unbind(&other, 72),
        Err(DatError::InvalidState(_))
    ));
    assert_eq!(r.query().rmr_context, Some(key), "still bound as before");
    // Only its EP may read into it.
    let local = RmrTriplet {
        rmr_context: key,
        target_address: s.la.address() + 512,
        segment_length: 8,
    };
    assert!(matches!(
        other.post_rdma_read_to_rmr(
            &local,
            &window(&s, s.key, 1024, 8),
            1,
            CompletionFlags::DEFAULT
        ),
        Err(DatError::ProtectionViolation(_))
    ));
    s.lb.write(1024, b"scope ep").unwrap();
    s.ea.post_rdma_read_to_rmr(
        &local,
        &window(&s, s.key, 1024, 8),
        73,
        CompletionFlags::DEFAULT,
    )
    .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::Success);
    assert_eq!(s.la.read(512, 8).unwrap(), b"scope ep");
    // Unbound through its EP, any EP may bind it again.
    r.unbind(&s.ea, 74).unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).cookie, 74);
    r.bind(&s.la, s.la.triplet(0, 64), REMOTE_RW, &other, 75)
        .unwrap();
    assert_eq!(r.bound_ep(), Some(other.qpn()));
    // A plain RMR has scope PZ.
    assert!(!Rmr::create(&s.a.pz).unwrap().query().scope_ep);
}

#[test]
fn dat_ep_post_send_with_invalidate_of_an_lmr_context_is_refused_and_the_lmr_keeps_working() {
    // Only RMRs (memory windows) can be invalidated remotely, never an LMR's own context
    // (IBTA vol. 1 §10.6.7).
    let s = setup(REMOTE_RW);
    s.eb.post_recv(&[s.lb.triplet(0, 64)], 80).unwrap();
    s.ea.post_send_with_invalidate(
        &[s.la.triplet(0, 8)],
        81,
        CompletionFlags::DEFAULT,
        s.lb.rmr_context(),
    )
    .unwrap();
    let d = dto(&s.a.dto, &s.b.ia);
    assert_eq!((d.cookie, d.status), (81, WcStatus::RemInvReqErr));
    assert_eq!(
        s.lb.query().unwrap().rmr_context,
        Some(s.lb.rmr_context()),
        "the LMR's key is still valid"
    );
}

#[test]
fn dat_rmr_create_for_ep_context_reaches_memory_only_over_its_eps_connection() {
    let s = setup(REMOTE_RW);
    // A second connection between the same IAs.
    let (ea2, eb2) = (ep(&s.a), ep(&s.b));
    connect(&s.a, &s.b, &ea2, &eb2);
    let r = Rmr::create_for_ep(&s.b.pz).unwrap();
    let key = r
        .bind(&s.lb, s.lb.triplet(2048, 256), REMOTE_RW, &s.eb, 90)
        .unwrap();
    assert_eq!(dto(&s.b.dto, &s.a.ia).cookie, 90);
    let target = window(&s, key, 2048, 8);
    s.la.write(0, b"over eb!").unwrap();
    // Over the connection of the EP it is bound through: works.
    s.ea.post_rdma_write(&[s.la.triplet(0, 8)], &target, 91)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::Success);
    assert_eq!(s.lb.read(2048, 8).unwrap(), b"over eb!");
    // The other connection works with a scope-PZ context...
    s.la.write(0, b"via eb2!").unwrap();
    ea2.post_rdma_write(&[s.la.triplet(0, 8)], &window(&s, s.key, 1100, 8), 94)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::Success);
    assert_eq!(s.lb.read(1100, 8).unwrap(), b"via eb2!");
    // ...but not with this one: a remote access error, nothing written or read.
    ea2.post_rdma_read(&[s.la.triplet(512, 8)], &target, 92)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::RemAccessErr);
    assert_eq!(s.la.read(512, 8).unwrap(), vec![0; 8]);
    assert_eq!(s.lb.read(2048, 8).unwrap(), b"over eb!");
    // The error broke that connection: BROKEN at A, DISCONNECTED (the DREQ) at B.
    assert_eq!(conn(&s.a.conn, &s.b.ia), ConnectionEventKind::Broken);
    assert_eq!(ea2.state(), EpState::Disconnected);
    assert_eq!(conn(&s.b.conn, &s.a.ia), ConnectionEventKind::Disconnected);
    assert_eq!(eb2.state(), EpState::Disconnected);
    // A plain (scope PZ) RMR's context works over either connection.
    let (ea3, eb3) = (ep(&s.a), ep(&s.b));
    connect(&s.a, &s.b, &ea3, &eb3);
    ea3.post_rdma_write(&[s.la.triplet(0, 8)], &window(&s, s.key, 1024, 8), 93)
        .unwrap();
    assert_eq!(dto(&s.a.dto, &s.b.ia).status, WcStatus::Success);
    assert_eq!(s.lb.read(1024, 8).unwrap(), b"via eb2!");
}
