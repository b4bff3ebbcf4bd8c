//! The DAT-shaped Rust API in memory: two IAs (two ports, two shards each, inline progress)
//! over an in-memory cable. Every operation with data checked, EP states and status, wrong-state
//! and invalid-argument errors, refused frees, rejection, disconnect, reset, SRQ.

use dpdk_roce::cm::ip_cm::EPHEMERAL_PORTS;
use dpdk_roce::dat::{
    ConnectionEventKind, DatError, DatEvent, Ep, EpState, Lmr, Psp, Srq, StateKind,
};
use dpdk_roce::transport::types::{WcOpcode, WcStatus};
use dpdk_roce::wire::frame::RoceFrame;
use std::time::Duration;

mod dat_common;
use dat_common::{conn, dto, ep, ias, ias_capturing, side, wait, Side, IP_A, IP_B, QUAL, RW};

/// Connects `ea` (on A) to a new accept on `eb` (on B), private data both ways.
fn connect(a: &Side, b: &Side, ea: &Ep, eb: &Ep) {
    ea.connect(IP_B, QUAL, b"hello from A").unwrap();
    assert_eq!(ea.state(), EpState::ActiveConnectionPending);
    let DatEvent::ConnectionRequest(mut cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR");
    };
    assert_eq!(cr.conn_qual(), QUAL);
    assert_eq!(cr.remote_address(), IP_A);
    // The IP CM header names the requester's port, an ephemeral one as rdma_cm binds.
    assert!(
        EPHEMERAL_PORTS.contains(&cr.remote_port()),
        "source port {}",
        cr.remote_port()
    );
    assert_eq!(&cr.private_data()[..12], b"hello from A");
    cr.private_data_mut()[0] = b'H';
    cr.accept(eb, b"welcome").unwrap();
    assert_eq!(eb.state(), EpState::CompletionPending);
    match wait(&a.conn, &b.ia) {
        DatEvent::Connection {
            kind: ConnectionEventKind::Established,
            private_data,
            ep,
            ..
        } => {
            assert_eq!(ep, ea.qpn());
            assert_eq!(&private_data[..7], b"welcome");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Established);
    assert_eq!(ea.state(), EpState::Connected);
    assert_eq!(eb.state(), EpState::Connected);
}

#[test]
fn every_operation_with_data_verified_then_disconnect_reset_and_free() {
    let (ia_a, ia_b) = ias();
    let (a, b) = (side(ia_a), side(ia_b));
    let _psp = Psp::create(&b.ia, QUAL, &b.cr).unwrap();
    // Two EPs per side: they land on both shards.
    let eas = [ep(&a), ep(&a)];
    let ebs = [ep(&b), ep(&b)];
    assert_ne!(eas[0].shard(), eas[1].shard());
    let la = Lmr::create(&a.pz, 8192, RW).unwrap();
    let lb = Lmr::create(&b.pz, 8192, RW).unwrap();
    let msg: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    la.write(0, &msg).unwrap();
    lb.write(4096, &42u64.to_le_bytes()).unwrap();
    lb.write(5000, b"read me").unwrap();
    for (k, (ea, eb)) in eas.iter().zip(&ebs).enumerate() {
        let k = k as u64;
        eb.post_recv(&[lb.triplet(0, 1000)], 100 + k).unwrap();
        eb.post_recv(&[lb.triplet(2000, 16)], 200 + k).unwrap();
        let (state, recv_idle, request_idle) = eb.get_status();
        assert_eq!(state, EpState::Unconnected, "dat_ep_create: UNCONNECTED");
        assert!(!recv_idle && request_idle);
        // Wrong state: no request before CONNECTED, the error names the state.
        assert_eq!(
            ea.post_send(&[la.triplet(0, 8)], 1),
            Err(DatError::EpState {
                state: EpState::Unconnected
            })
        );
        connect(&a, &b, ea, eb);
        assert_eq!(
            ea.connect(IP_B, QUAL, &[]),
            Err(DatError::EpState {
                state: EpState::Connected
            })
        );
        // SEND (two segments) -> receive.
        ea.post_send(&[la.triplet(0, 600), la.triplet(600, 400)], 1)
            .unwrap();
        let d = dto(&a.dto, &b.ia);
        assert_eq!(
            (d.cookie, d.status, d.opcode),
            (1, WcStatus::Success, WcOpcode::Send)
        );
        assert_eq!(d.ep, ea.qpn());
        let d = dto(&b.dto, &a.ia);
        assert_eq!(
            (d.cookie, d.status, d.opcode),
            (100 + k, WcStatus::Success, WcOpcode::Recv)
        );
        assert_eq!(d.transferred_length, 1000);
        assert_eq!(lb.read(0, 1000).unwrap(), msg);
        // RDMA WRITE with immediate -> consumes the second receive.
        ea.post_rdma_write_imm(&[la.triplet(0, 300)], &lb.rmr_triplet(3000, 300), 77, 2)
            .unwrap();
        assert_eq!(dto(&a.dto, &b.ia).opcode, WcOpcode::RdmaWrite);
        let d = dto(&b.dto, &a.ia);
        assert_eq!((d.cookie, d.immediate), (200 + k, Some(77)));
        assert_eq!(lb.read(3000, 300).unwrap(), msg[..300]);
        // Plain RDMA WRITE: no receive consumed, no event at B.
        ea.post_rdma_write(&[la.triplet(300, 100)], &lb.rmr_triplet(3500, 100), 3)
            .unwrap();
        assert_eq!(dto(&a.dto, &b.ia).cookie, 3);
        assert_eq!(lb.read(3500, 100).unwrap(), msg[300..400]);
        // RDMA READ.
        ea.post_rdma_read(&[la.triplet(6000, 7)], &lb.rmr_triplet(5000, 7), 4)
            .unwrap();
        let d = dto(&a.dto, &b.ia);
        assert_eq!(
            (d.cookie, d.opcode, d.status),
            (4, WcOpcode::RdmaRead, WcStatus::Success)
        );
        assert_eq!(la.read(6000, 7).unwrap(), b"read me");
        // Fetch-add and compare-swap on B's counter.
        let before = u64::from_le_bytes(lb.read(4096, 8).unwrap().try_into().unwrap());
        ea.post_fetch_add(5, &la.triplet(7000, 8), &lb.rmr_triplet(4096, 8), 5)
            .unwrap();
        assert_eq!(dto(&a.dto, &b.ia).opcode, WcOpcode::FetchAdd);
        assert_eq!(la.read(7000, 8).unwrap(), before.to_le_bytes());
        ea.post_cmp_and_swap(
            before + 5,
            1000,
            &la.triplet(7008, 8),
            &lb.rmr_triplet(4096, 8),
            6,
        )
        .unwrap();
        assert_eq!(dto(&a.dto, &b.ia).opcode, WcOpcode::CompSwap);
        assert_eq!(la.read(7008, 8).unwrap(), (before + 5).to_le_bytes());
        assert_eq!(lb.read(4096, 8).unwrap(), 1000u64.to_le_bytes());
        lb.write(4096, &42u64.to_le_bytes()).unwrap();
        // Invalid arguments.
        assert!(matches!(
            ea.post_fetch_add(1, &la.triplet(0, 4), &lb.rmr_triplet(4096, 8), 9),
            Err(DatError::InvalidParameter(_))
        ));
        let five: Vec<_> = (0..5).map(|i| la.triplet(i * 8, 8)).collect();
        assert_eq!(
            ea.post_send(&five, 9).unwrap_err().dat_type(),
            dat_sys::DAT_INVALID_PARAMETER
        );
        let (_, recv_idle, request_idle) = ea.get_status();
        assert!(recv_idle && request_idle, "everything completed");
        // A bad R_Key completes in error at the requester, data untouched.
        ea.post_rdma_write(
            &[la.triplet(0, 8)],
            &lb.rmr_triplet(0, 8).with_key(0x8000_1234),
            10,
        )
        .unwrap();
        let d = dto(&a.dto, &b.ia);
        assert_eq!(d.cookie, 10);
        assert_eq!(d.status, WcStatus::RemAccessErr);
        assert_eq!(lb.read(0, 1000).unwrap(), msg);
        // The error broke the connection: BROKEN at A (the DTO error), DISCONNECTED at B (the
        // DREQ); both sides end DISCONNECTED.
        assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Broken);
        assert_eq!(ea.state(), EpState::Disconnected);
        assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Disconnected);
        assert_eq!(eb.state(), EpState::Disconnected);
    }
    // Refused frees while used.
    let refused = b.dto.free().unwrap_err();
    assert!(matches!(
        refused.error,
        DatError::InvalidStateOf {
            kind: StateKind::EvdInUse,
            ..
        }
    ));
    let b_dto = refused.object;
    let refused = a.pz.free().unwrap_err();
    assert!(matches!(
        refused.error,
        DatError::InvalidStateOf {
            kind: StateKind::PzInUse,
            ..
        }
    ));
    let a_pz = refused.object;
    let refused = a.ia.close().unwrap_err();
    assert!(matches!(
        refused.error,
        DatError::InvalidStateOf {
            kind: StateKind::IaInUse,
            ..
        }
    ));
    let ia_a = refused.object;
    // Drop everything in an arbitrary order: EPs (abrupt disconnect), LMRs, EVD, PZ, IA.
    drop(eas);
    drop(b_dto);
    drop(la);
    drop(a_pz);
    drop((a.dto, a.conn, a.cr));
    ia_a.close().expect("A: every object freed");
    drop(ebs);
    drop(lb);
}

trait WithKey {
    fn with_key(self, key: u32) -> Self;
}

impl WithKey for dpdk_roce::dat::RmrTriplet {
    fn with_key(mut self, key: u32) -> Self {
        self.rmr_context = key;
        self
    }
}

#[test]
fn reject_disconnect_reset_and_reconnect() {
    let (ia_a, ia_b) = ias();
    let (a, b) = (side(ia_a), side(ia_b));
    let psp = Psp::create(&b.ia, QUAL, &b.cr).unwrap();
    assert!(matches!(
        Psp::create(&b.ia, QUAL, &b.cr),
        Err(DatError::ConnQualInUse(QUAL))
    ));
    assert!(matches!(
        Psp::create(&b.ia, QUAL + 1, &b.dto),
        Err(DatError::InvalidHandleOf {
            kind: dpdk_roce::dat::HandleKind::EvdCr,
            ..
        })
    ));
    let ea = ep(&a);
    let eb = ep(&b);
    // Rejected with private data.
    ea.connect(IP_B, QUAL, b"x").unwrap();
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR")
    };
    cr.reject(b"go away").unwrap();
    match wait(&a.conn, &b.ia) {
        DatEvent::Connection {
            kind: ConnectionEventKind::PeerRejected,
            private_data,
            ..
        } => assert_eq!(&private_data[..7], b"go away"),
        other => panic!("{other:?}"),
    }
    assert_eq!(ea.state(), EpState::Disconnected);
    assert!(matches!(
        ea.connect(IP_B, QUAL, &[]),
        Err(DatError::EpState { .. })
    ));
    ea.reset().unwrap();
    assert_eq!(ea.state(), EpState::Unconnected);
    // Now accepted, then disconnected by B; receives flush.
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    ea.post_recv(&[la.triplet(0, 64)], 55).unwrap();
    connect(&a, &b, &ea, &eb);
    eb.disconnect().unwrap();
    assert_eq!(eb.state(), EpState::DisconnectPending);
    assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Disconnected);
    let mut saw_disconnect = false;
    let mut saw_flush = false;
    while !(saw_disconnect && saw_flush) {
        if !saw_disconnect {
            if let Ok(DatEvent::Connection { kind, .. }) = a.conn.dequeue() {
                assert_eq!(kind, ConnectionEventKind::Disconnected);
                saw_disconnect = true;
            }
        }
        b.ia.progress();
        if let Ok(DatEvent::Dto(d)) = a.dto.dequeue() {
            assert_eq!((d.cookie, d.status), (55, WcStatus::WrFlushErr));
            saw_flush = true;
        }
    }
    assert_eq!(ea.state(), EpState::Disconnected);
    assert_eq!(eb.state(), EpState::Disconnected);
    assert!(matches!(
        ea.post_recv(&[la.triplet(0, 8)], 1),
        Err(DatError::EpState {
            state: EpState::Disconnected
        })
    ));
    // Reset both and connect again on fresh QPs.
    let old = ea.qpn();
    ea.reset().unwrap();
    eb.reset().unwrap();
    assert_ne!(ea.qpn(), old);
    connect(&a, &b, &ea, &eb);
    // Empty EVD: DAT_QUEUE_EMPTY; a wait with timeout 0 expires.
    assert_eq!(a.dto.dequeue().unwrap_err(), DatError::QueueEmpty);
    assert_eq!(
        a.dto.wait(Some(Duration::ZERO), 1).unwrap_err(),
        DatError::TimeoutExpired
    );
    psp.free();
}

#[test]
fn srq_receives_for_two_endpoints_and_invalid_creation() {
    let (ia_a, ia_b) = ias();
    let (a, b) = (side(ia_a), side(ia_b));
    let _psp = Psp::create(&b.ia, QUAL, &b.cr).unwrap();
    // Invalid: DTO EVD given as connection EVD; EVD of another IA.
    let code = |r: Result<Ep, DatError>| r.map(|_| ()).map_err(|e| e.dat_type());
    assert_eq!(
        code(Ep::create(
            &a.ia,
            &a.pz,
            Some(&a.dto),
            Some(&a.dto),
            Some(&a.dto),
            None,
            None
        )),
        Err(dat_sys::DAT_INVALID_PARAMETER)
    );
    assert_eq!(
        code(Ep::create(
            &a.ia,
            &a.pz,
            Some(&b.dto),
            None,
            None,
            None,
            None
        )),
        Err(dat_sys::DAT_INVALID_HANDLE)
    );
    // A PSP needs a CR EVD of its IA (DAT_INVALID_HANDLE_EVD_CR, as an RSP).
    for (evd, what) in [(&a.dto, "no CR flag"), (&b.cr, "another IA's")] {
        match Psp::create(&a.ia, QUAL + 1, evd) {
            Err(e @ DatError::InvalidHandleOf { .. }) => assert_eq!(
                e.code() & 0x3fff_ffff,
                dat_sys::DAT_INVALID_HANDLE | dat_sys::DAT_INVALID_HANDLE_EVD_CR,
                "{what}"
            ),
            other => panic!("{what}: {:?}", other.map(|_| ())),
        }
    }
    let srq = Srq::create(&b.pz, 16, 2).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    for i in 0..4u64 {
        srq.post_recv(&[lb.triplet(i * 256, 256)], 900 + i).unwrap();
    }
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    la.write(0, b"via the shared receive queue").unwrap();
    let mut cookies = Vec::new();
    let mut keep = Vec::new();
    for _ in 0..2 {
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
        assert!(matches!(
            eb.post_recv(&[lb.triplet(0, 8)], 1),
            Err(DatError::InvalidParameter(_))
        ));
        connect(&a, &b, &ea, &eb);
        ea.post_send(&[la.triplet(0, 28)], 7).unwrap();
        assert_eq!(dto(&a.dto, &b.ia).status, WcStatus::Success);
        let d = dto(&b.dto, &a.ia);
        assert_eq!(d.ep, eb.qpn());
        assert_eq!(d.transferred_length, 28);
        cookies.push(d.cookie);
        keep.push((ea, eb));
    }
    assert_eq!(cookies, vec![900, 901], "SRQ buffers in order");
    assert_eq!(lb.read(256, 28).unwrap(), b"via the shared receive queue");
    let refused = srq.free().unwrap_err();
    assert!(matches!(
        refused.error,
        DatError::InvalidStateOf {
            kind: StateKind::SrqInUse,
            ..
        }
    ));
    drop(keep);
    refused.object.free().expect("no EP uses it any more");
}

/// Immediate data as the reference uDAPL (libdaplofa) carries it: the DAT value's host-order
/// bytes on the wire (dtestx's 0x7777 is `77 77 00 00` on x86), read back the same way, so a
/// DAT consumer on either provider sees the value its peer posted. The frames are read from A's
/// capture while the IA is still open (the capture is flushed every turn).
#[test]
fn write_with_immediate_carries_the_dat_value_in_host_byte_order_on_the_wire() {
    let dir = std::env::temp_dir().join(format!("dat-imm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("a.pcap");
    let (ia_a, ia_b) = ias_capturing(Some(base.clone()));
    let (a, b) = (side(ia_a), side(ia_b));
    let _psp = Psp::create(&b.ia, QUAL, &b.cr).unwrap();
    let (ea, eb) = (ep(&a), ep(&b));
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    connect(&a, &b, &ea, &eb);
    for (cookie, imm) in [(1u64, 0x7777u32), (2, 0x1234_5678)] {
        eb.post_recv(&[lb.triplet(0, 64)], 10 + cookie).unwrap();
        ea.post_rdma_write_imm(&[la.triplet(0, 8)], &lb.rmr_triplet(100, 8), imm, cookie)
            .unwrap();
        let d = dto(&a.dto, &b.ia);
        assert_eq!((d.cookie, d.status), (cookie, WcStatus::Success));
        let d = dto(&b.dto, &a.ia);
        assert_eq!(d.immediate, Some(imm), "the receiver's value of {imm:#x}");
    }
    // Every shard of A wrote its own file; the WRITEs left from EA's shard.
    let mut on_wire = Vec::new();
    for shard in 0..2 {
        let path = dpdk_roce::engine::runtime::capture_path(&base, shard, 2);
        let bytes = std::fs::read(&path).unwrap();
        let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            if let Ok(f) = RoceFrame::parse(&p.data) {
                if let Some(imm) = f.headers.imm_dt {
                    on_wire.push(imm.to_be_bytes());
                }
            }
        }
    }
    assert_eq!(
        on_wire,
        [0x7777u32.to_ne_bytes(), 0x1234_5678u32.to_ne_bytes()],
        "ImmDt bytes as sent"
    );
    if cfg!(target_endian = "little") {
        assert_eq!(
            on_wire[0],
            [0x77, 0x77, 0, 0],
            "dtestx's 0x7777 as libdaplofa sends it"
        );
    }
    drop((ea, eb, la, lb, a, b));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// DAT QoS per EP (dat_ep_create's `qos` attribute, dat_ep_connect's `qos`): the DSCP of the
/// EP's packets, in RFC 4594's classes (low latency EF 46, economy CS1 8), beside an EP of
/// best effort on the same IA (the port's DSCP, 0 here). Once connected the QoS stays
/// (dat_ep_modify(3DAT): only before a connection is requested).
#[test]
fn an_eps_qos_is_the_dscp_of_its_packets() {
    use dpdk_roce::dat::{EpAttr, Qos};
    let dir = std::env::temp_dir().join(format!("dat-qos-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("a.pcap");
    let (ia_a, ia_b) = ias_capturing(Some(base.clone()));
    let (a, b) = (side(ia_a), side(ia_b));
    let _psp = Psp::create(&b.ia, QUAL, &b.cr).unwrap();
    let attr = EpAttr {
        qos: Qos::LowLatency,
        ..EpAttr::default()
    };
    let fast = Ep::create(
        &a.ia,
        &a.pz,
        Some(&a.dto),
        Some(&a.dto),
        Some(&a.conn),
        None,
        Some(attr),
    )
    .unwrap();
    let (plain, cheap) = (ep(&a), ep(&a));
    cheap.set_qos(Qos::Economy).unwrap();
    let la = Lmr::create(&a.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    // Each EP writes a length of its own: 8 low latency, 16 best effort, 24 economy.
    let mut keep = Vec::new();
    for (e, len) in [(&fast, 8u32), (&plain, 16), (&cheap, 24)] {
        let peer = ep(&b);
        connect(&a, &b, e, &peer);
        e.post_rdma_write(&[la.triplet(0, len)], &lb.rmr_triplet(0, len), len.into())
            .unwrap();
        let d = dto(&a.dto, &b.ia);
        assert_eq!((d.cookie, d.status), (len.into(), WcStatus::Success));
        keep.push(peer);
    }
    assert_eq!(fast.attr().qos, Qos::LowLatency);
    let refused = plain.set_qos(Qos::Premium).unwrap_err();
    assert!(matches!(refused, DatError::EpState { .. }), "{refused:?}");
    let mut dscp_by_len = std::collections::BTreeMap::new();
    for shard in 0..2 {
        let path = dpdk_roce::engine::runtime::capture_path(&base, shard, 2);
        let bytes = std::fs::read(&path).unwrap();
        let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).unwrap();
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            if let Ok(f) = RoceFrame::parse(&p.data) {
                if f.headers.reth.is_some() && f.ipv4.src_addr == IP_A {
                    dscp_by_len
                        .entry(f.payload.len())
                        .or_insert_with(Vec::new)
                        .push(f.ipv4.dscp);
                }
            }
        }
    }
    assert_eq!(
        dscp_by_len,
        [(8, vec![46]), (16, vec![0]), (24, vec![8])].into(),
        "the DSCP of each EP's RDMA WRITE"
    );
    drop((fast, plain, cheap, keep, la, lb, a, b));
    std::fs::remove_dir_all(&dir).unwrap();
}
