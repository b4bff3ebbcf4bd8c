//! Two endpoints over the simulated wire: connect through the IB CM, then move data with every
//! RC operation and check each byte and each completion (crates/roce-sim/src/workload.rs does the checks).

use core::time::Duration;
use dpdk_roce::cm::CmEvent;
use dpdk_roce::mem::access::Access;
use dpdk_roce::mem::vec_memory::Region;
use dpdk_roce::transport::types::{
    Mtu, QpState, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use dpdk_roce::wire::frame::RoceFrame;
use dpdk_roce::wire::psn::Psn;
use roce_sim::endpoint::{EndpointError, QpOptions};
use roce_sim::link::LinkConfig;
use roce_sim::pair::{Conn, ConnSpec, Pair};
use roce_sim::workload::{run_workload, WorkloadKind, WorkloadReport, WorkloadSpec};

const SIZES: [usize; 7] = [0, 1, 1023, 1024, 1025, 65536, 1 << 20];
const KINDS: [WorkloadKind; 6] = [
    WorkloadKind::Send,
    WorkloadKind::Write,
    WorkloadKind::WriteImm,
    WorkloadKind::Read,
    WorkloadKind::Atomic,
    WorkloadKind::Mixed,
];

fn count_for(size: usize) -> usize {
    if size >= 1 << 20 {
        3
    } else if size >= 65536 {
        8
    } else {
        40
    }
}

fn run(link: LinkConfig, spec: &ConnSpec, w: WorkloadSpec) -> WorkloadReport {
    let mut pair = Pair::new(link);
    let conn = pair.connect(spec).expect("connect");
    run_workload(&mut pair, conn, &w)
        .unwrap_or_else(|e| panic!("{} x{} of {} B: {e}", w.kind, w.count, w.size))
}

#[test]
fn every_operation_and_size_over_a_clean_wire() {
    for kind in KINDS {
        for size in SIZES {
            let w = WorkloadSpec {
                kind,
                size,
                count: count_for(size),
                depth: 4,
                ..WorkloadSpec::default()
            };
            let r = run(LinkConfig::clean(), &ConnSpec::default(), w);
            assert_eq!(r.ops, w.count);
            assert_eq!(r.completions_a, w.count, "every WR completed exactly once");
            assert_eq!(
                r.qp.retransmits, 0,
                "{kind} {size}: a clean wire needs no retransmit"
            );
            assert_eq!(r.qp.seq_naks_sent, 0);
        }
    }
}

#[test]
fn every_operation_and_size_under_5_percent_loss_reordering_and_duplication() {
    let mut retransmits = 0;
    for (seed, kind) in KINDS.iter().enumerate() {
        for size in SIZES {
            let w = WorkloadSpec {
                kind: *kind,
                size,
                count: count_for(size),
                depth: 4,
                ..WorkloadSpec::default()
            };
            let link = LinkConfig::lossy(0.05, 100 + seed as u64 * 31 + size as u64);
            let r = run(link, &ConnSpec::default(), w);
            assert_eq!(r.completions_a, w.count);
            retransmits += r.qp.retransmits;
        }
    }
    assert!(retransmits > 0, "5% loss must have caused retransmissions");
}

#[test]
fn multi_sge_messages_at_every_mtu() {
    for pmtu in [
        Mtu::Mtu256,
        Mtu::Mtu512,
        Mtu::Mtu1024,
        Mtu::Mtu2048,
        Mtu::Mtu4096,
    ] {
        let spec = ConnSpec {
            pmtu,
            ..ConnSpec::default()
        };
        let w = WorkloadSpec {
            kind: WorkloadKind::Mixed,
            size: 10_000,
            count: 21,
            depth: 3,
            sges: 5,
            ..WorkloadSpec::default()
        };
        let r = run(LinkConfig::lossy(0.02, pmtu as u64), &spec, w);
        assert_eq!(r.completions_a, 21);
    }
}

#[test]
fn psn_wraps_around_2_pow_24() {
    let spec = ConnSpec {
        psn_a: Psn::new(0xff_fff0),
        psn_b: Psn::new(0xff_fffa),
        pmtu: Mtu::Mtu256,
        ..ConnSpec::default()
    };
    let mut pair = Pair::new(LinkConfig::lossy(0.05, 77));
    let conn = pair.connect(&spec).unwrap();
    let w = WorkloadSpec {
        kind: WorkloadKind::Mixed,
        size: 4096,
        count: 30,
        depth: 4,
        ..WorkloadSpec::default()
    };
    run_workload(&mut pair, conn, &w).unwrap();
    // 30 messages of 16 packets each went out from 0xfffff0: the PSN space wrapped.
    let sent = pair.a.qp(conn.qpn_a).unwrap().stats().packets_sent;
    assert!(sent > 0x10, "sent {sent} packets");
}

#[test]
fn corrupted_frames_are_rejected_by_the_icrc_and_recovered() {
    let link = LinkConfig {
        corrupt: 0.05,
        seed: 9,
        ..LinkConfig::clean()
    };
    let mut pair = Pair::new(link);
    let conn = pair.connect(&ConnSpec::default()).unwrap();
    let w = WorkloadSpec {
        kind: WorkloadKind::Mixed,
        size: 3000,
        count: 70,
        depth: 4,
        ..WorkloadSpec::default()
    };
    run_workload(&mut pair, conn, &w).unwrap();
    let bad = pair.a.net_stats().dropped_total() + pair.b.net_stats().dropped_total();
    let corrupted = pair.link.stats().corrupted;
    assert!(corrupted > 0);
    // Every flip is caught (ICRC, IP checksum, or a MAC that is no longer ours) except one in
    // the source MAC, which nothing covers.
    assert!(
        bad > 0 && bad <= corrupted,
        "bad {bad} corrupted {corrupted}"
    );
}

fn drain(pair: &mut Pair, a: bool) -> Vec<WorkCompletion> {
    let ep = if a { &mut pair.a } else { &mut pair.b };
    std::iter::from_fn(|| ep.poll_completion()).collect()
}

/// A signaled, unfenced work request `op` gathering the first `len` bytes of `src`.
fn signaled_wr(id: u64, op: SendOp, src: &Region, len: u32) -> SendWr {
    SendWr {
        wr_id: id,
        op,
        sgl: dpdk_roce::sgl![Sge {
            addr: src.addr,
            len,
            lkey: src.lkey,
        }],
        signaled: true,
        fence: false,
        solicited: false,
    }
}

/// Runs the pair until side A has `n` completions (at most `limit` of virtual time) and
/// returns them in order; fails with the completions so far.
fn a_completions(pair: &mut Pair, n: usize, limit: Duration) -> Vec<WorkCompletion> {
    let mut wcs = Vec::new();
    pair.run_until(limit, |p| {
        wcs.extend(std::iter::from_fn(|| p.a.poll_completion()));
        wcs.len() >= n
    })
    .unwrap_or_else(|e| panic!("{e}: completions so far {wcs:?}"));
    wcs
}

#[test]
fn rnr_when_the_receiver_posts_late_then_success() {
    let mut pair = Pair::new(LinkConfig::clean());
    let spec = ConnSpec {
        min_rnr_timer: 14, // 1.28 ms
        ..ConnSpec::default()
    };
    let conn = pair.connect(&spec).unwrap();
    let src = pair.a.register(1, 64, Access::LOCAL_WRITE);
    let dst = pair.b.register(1, 64, Access::LOCAL_WRITE);
    pair.a
        .mem
        .bytes_mut(src.lkey)
        .unwrap()
        .copy_from_slice(&[7u8; 64]);
    let now = pair.now();
    pair.a
        .post_send(now, conn.qpn_a, signaled_wr(1, SendOp::Send, &src, 64))
        .unwrap();
    pair.run_until(Duration::from_millis(5), |p| {
        p.b.qp(conn.qpn_b).unwrap().stats().rnr_naks_sent >= 2
    })
    .unwrap();
    assert!(
        drain(&mut pair, true).is_empty(),
        "nothing completes while RNR"
    );
    pair.b
        .post_recv(
            conn.qpn_b,
            RecvWr {
                wr_id: 9,
                sgl: dpdk_roce::sgl![Sge {
                    addr: dst.addr,
                    len: 64,
                    lkey: dst.lkey,
                }],
            },
        )
        .unwrap();
    let mut a_wc = Vec::new();
    let mut b_wc = Vec::new();
    pair.run_until(Duration::from_secs(1), |p| {
        a_wc.extend(std::iter::from_fn(|| p.a.poll_completion()));
        b_wc.extend(std::iter::from_fn(|| p.b.poll_completion()));
        !a_wc.is_empty() && !b_wc.is_empty()
    })
    .unwrap();
    assert_eq!(a_wc.len(), 1);
    assert_eq!((a_wc[0].wr_id, a_wc[0].status), (1, WcStatus::Success));
    assert_eq!(
        (b_wc[0].wr_id, b_wc[0].status, b_wc[0].byte_len),
        (9, WcStatus::Success, 64)
    );
    assert_eq!(pair.b.mem.bytes(dst.lkey).unwrap(), &[7u8; 64]);
    assert!(pair.a.qp(conn.qpn_a).unwrap().stats().rnr_naks_received >= 2);
}

#[test]
fn rnr_retry_exhausted_when_the_receiver_never_posts() {
    let mut pair = Pair::new(LinkConfig::clean());
    let spec = ConnSpec {
        rnr_retry: 3,
        min_rnr_timer: 1,
        ..ConnSpec::default()
    };
    let conn = pair.connect(&spec).unwrap();
    let src = pair.a.register(1, 16, Access::LOCAL_WRITE);
    let now = pair.now();
    for id in 1..=3 {
        pair.a
            .post_send(now, conn.qpn_a, signaled_wr(id, SendOp::Send, &src, 16))
            .unwrap();
    }
    let wcs = a_completions(&mut pair, 3, Duration::from_secs(5));
    assert_eq!(wcs[0].status, WcStatus::RnrRetryExcErr);
    assert_eq!(wcs[0].wr_id, 1);
    assert!(wcs[1..].iter().all(|w| w.status == WcStatus::WrFlushErr));
    assert_eq!(pair.a.qp(conn.qpn_a).unwrap().state(), QpState::Error);
    assert_eq!(
        pair.b.qp(conn.qpn_b).unwrap().stats().rnr_naks_sent,
        4,
        "first try + 3 retries"
    );
}

#[test]
fn retry_exceeded_when_the_peer_vanishes() {
    let mut pair = Pair::new(LinkConfig::clean());
    let spec = ConnSpec {
        retry_cnt: 3,
        timeout: 8,
        ..ConnSpec::default()
    };
    let conn = pair.connect(&spec).unwrap();
    let src = pair.a.register(1, 4096, Access::LOCAL_WRITE);
    let dst = pair
        .b
        .register(1, 4096, Access::REMOTE_WRITE | Access::LOCAL_WRITE);
    // The peer's cable is pulled: everything is lost from now on.
    pair.link.set_config(LinkConfig {
        loss: 1.0,
        ..LinkConfig::clean()
    });
    let now = pair.now();
    for id in 0..4 {
        pair.a
            .post_send(
                now,
                conn.qpn_a,
                write_wr(id, &src, src.lkey, 4096, &dst, true),
            )
            .unwrap();
    }
    let wcs = a_completions(&mut pair, 4, Duration::from_secs(10));
    assert_eq!((wcs[0].wr_id, wcs[0].status), (0, WcStatus::RetryExcErr));
    for (i, w) in wcs.iter().enumerate().skip(1) {
        assert_eq!((w.wr_id, w.status), (i as u64, WcStatus::WrFlushErr));
    }
    let st = pair.a.qp(conn.qpn_a).unwrap().stats();
    assert_eq!(st.timeouts, 4, "retry_cnt 3 = first timeout + 3 retries");
    assert_eq!(pair.a.qp(conn.qpn_a).unwrap().state(), QpState::Error);
}

#[test]
fn remote_access_errors_complete_with_rem_access_err() {
    // Bad R_Key, out of bounds, and a region without remote-write rights.
    for case in 0..3 {
        let mut pair = Pair::new(LinkConfig::clean());
        let conn = pair.connect(&ConnSpec::default()).unwrap();
        let src = pair.a.register(1, 256, Access::LOCAL_WRITE);
        let rights = if case == 2 {
            Access::REMOTE_READ
        } else {
            Access::REMOTE_WRITE
        };
        let dst = pair.b.register(1, 128, rights);
        let (addr, rkey) = match case {
            0 => (dst.addr, dst.rkey ^ 0x100),
            1 => (dst.addr + 64, dst.rkey),
            _ => (dst.addr, dst.rkey),
        };
        let now = pair.now();
        for id in 0..2 {
            pair.a
                .post_send(
                    now,
                    conn.qpn_a,
                    signaled_wr(
                        id,
                        SendOp::Write {
                            remote_addr: addr,
                            rkey,
                        },
                        &src,
                        128,
                    ),
                )
                .unwrap();
        }
        let wcs = a_completions(&mut pair, 2, Duration::from_secs(1));
        assert_eq!(wcs[0].status, WcStatus::RemAccessErr, "case {case}");
        assert_eq!(wcs[1].status, WcStatus::WrFlushErr, "case {case}");
        assert_eq!(
            pair.b.mem.bytes(dst.lkey).unwrap(),
            &[0u8; 128],
            "nothing written"
        );
    }
}

#[test]
fn disconnect_flushes_both_sides() {
    let mut pair = Pair::new(LinkConfig::clean());
    let conn = pair.connect(&ConnSpec::default()).unwrap();
    let buf = pair.b.register(1, 64, Access::LOCAL_WRITE);
    for id in 0..5 {
        pair.b
            .post_recv(
                conn.qpn_b,
                RecvWr {
                    wr_id: id,
                    sgl: dpdk_roce::sgl![Sge {
                        addr: buf.addr,
                        len: 64,
                        lkey: buf.lkey,
                    }],
                },
            )
            .unwrap();
    }
    let now = pair.now();
    pair.a.disconnect(now, conn.qpn_a).unwrap();
    let (mut down_a, mut down_b) = (false, false);
    let mut b_wc = Vec::new();
    pair.run_until(Duration::from_secs(1), |p| {
        while let Some(ev) = p.a.poll_event() {
            down_a |= matches!(ev, CmEvent::Disconnected { .. });
        }
        while let Some(ev) = p.b.poll_event() {
            down_b |= matches!(ev, CmEvent::Disconnected { .. });
        }
        b_wc.extend(std::iter::from_fn(|| p.b.poll_completion()));
        down_a && down_b && b_wc.len() == 5
    })
    .unwrap();
    for (i, w) in b_wc.iter().enumerate() {
        assert_eq!(
            (w.wr_id, w.status, w.opcode),
            (i as u64, WcStatus::WrFlushErr, WcOpcode::Recv)
        );
    }
    assert_eq!(pair.a.qp(conn.qpn_a).unwrap().state(), QpState::Error);
    assert_eq!(pair.b.qp(conn.qpn_b).unwrap().state(), QpState::Error);
}

#[test]
fn connecting_to_a_port_without_listener_is_rejected() {
    let mut pair = Pair::new(LinkConfig::clean());
    let now = pair.now();
    let qpn = pair.a.create_qp(now, QpOptions::default()).unwrap();
    let cp = dpdk_roce::cm::ConnectParams::new(roce_sim::pair::IP_B, 4000, qpn, Psn::new(5));
    pair.a.connect(now, cp).unwrap();
    let mut rejected = None;
    pair.run_until(Duration::from_secs(1), |p| {
        while let Some(ev) = p.a.poll_event() {
            if let CmEvent::Rejected { reason, .. } = ev {
                rejected = Some(reason);
            }
        }
        rejected.is_some()
    })
    .unwrap();
    assert_eq!(rejected.unwrap().code(), 8, "invalid service ID");
}

#[test]
fn shared_receive_queue_serves_two_connections() {
    let mut pair = Pair::new(LinkConfig::lossy(0.03, 5));
    let srq = pair.b.create_srq(64);
    let spec = ConnSpec {
        qp_b: QpOptions {
            srq: Some(srq),
            ..QpOptions::default()
        },
        ..ConnSpec::default()
    };
    let c1 = pair.connect(&spec).unwrap();
    let c2 = pair.connect(&spec).unwrap();
    let buf = pair.b.register(1, 64 * 16, Access::LOCAL_WRITE);
    for id in 0..16u64 {
        pair.b
            .post_srq_recv(
                srq,
                RecvWr {
                    wr_id: id,
                    sgl: dpdk_roce::sgl![Sge {
                        addr: buf.addr + id * 64,
                        len: 64,
                        lkey: buf.lkey,
                    }],
                },
            )
            .unwrap();
    }
    let src = pair.a.register(1, 64, Access::LOCAL_WRITE);
    let now = pair.now();
    for i in 0..8u64 {
        for c in [c1, c2] {
            pair.a
                .post_send(
                    now,
                    c.qpn_a,
                    SendWr {
                        wr_id: i,
                        op: SendOp::SendWithImm { imm: c.qpn_a },
                        sgl: dpdk_roce::sgl![Sge {
                            addr: src.addr,
                            len: 64,
                            lkey: src.lkey,
                        }],
                        signaled: true,
                        fence: false,
                        solicited: false,
                    },
                )
                .unwrap();
        }
    }
    let mut b_wc = Vec::new();
    pair.run_until(Duration::from_secs(5), |p| {
        b_wc.extend(std::iter::from_fn(|| p.b.poll_completion()));
        b_wc.len() == 16
    })
    .unwrap();
    let mut ids: Vec<u64> = b_wc.iter().map(|w| w.wr_id).collect();
    ids.sort();
    assert_eq!(
        ids,
        (0..16).collect::<Vec<_>>(),
        "each SRQ buffer used exactly once"
    );
    assert!(b_wc
        .iter()
        .all(|w| w.status == WcStatus::Success && w.srq == Some(srq)));
    for c in [c1, c2] {
        assert_eq!(
            b_wc.iter()
                .filter(|w| w.imm_data == Some(c.qpn_a) && w.qp_num == c.qpn_b)
                .count(),
            8
        );
    }
}

#[test]
fn endpoints_find_each_other_with_arp_then_move_data() {
    use dpdk_roce::net::DropReason;
    let mut pair = Pair::with_arp(LinkConfig::lossy(0.02, 3));
    let conn = pair.connect(&ConnSpec::default()).unwrap();
    let w = WorkloadSpec {
        kind: WorkloadKind::Mixed,
        size: 2048,
        count: 28,
        depth: 4,
        ..WorkloadSpec::default()
    };
    run_workload(&mut pair, conn, &w).unwrap();
    let (a, b) = (pair.a.net_stats(), pair.b.net_stats());
    assert!(a.tx_arp_requests >= 1, "A asked for B's MAC");
    assert!(b.tx_arp_replies >= 1, "B answered");
    assert_eq!(
        pair.a.net().lookup(roce_sim::pair::IP_B.into()),
        Some(roce_sim::pair::MAC_B)
    );
    assert_eq!(
        a.dropped(DropReason::BadIcrc) + b.dropped(DropReason::BadIcrc),
        0
    );
}

#[test]
fn connecting_to_an_address_nobody_answers_fails_with_unresolvable() {
    use dpdk_roce::host::HostEvent;
    use dpdk_roce::net::NetEvent;
    let mut pair = Pair::with_arp(LinkConfig::clean());
    let now = pair.now();
    let qpn = pair.a.create_qp(now, QpOptions::default()).unwrap();
    let ghost = std::net::Ipv4Addr::new(192, 0, 2, 99);
    let cp = dpdk_roce::cm::ConnectParams::new(ghost, 7471, qpn, Psn::new(1));
    pair.a.connect(now, cp).unwrap();
    let mut unresolvable = false;
    pair.run_until(Duration::from_secs(30), |p| {
        while let Some(ev) = p.a.poll_host_event() {
            if ev == HostEvent::Net(NetEvent::Unresolvable { ip: ghost.into() }) {
                unresolvable = true;
            }
        }
        unresolvable
    })
    .unwrap();
    assert!(pair.a.net_stats().tx_arp_requests >= 3, "ARP was retried");
}

/// When ARP for the destination fails, the connection request fails at once with
/// `Unreachable` (DAT_CONNECTION_EVENT_UNREACHABLE) instead of after the CM's 15 REQ retries
/// (about 69 s), which could never leave the host.
#[test]
fn a_connect_to_an_unresolvable_address_is_unreachable_when_arp_fails() {
    use dpdk_roce::cm::CmEvent;
    use dpdk_roce::host::HostEvent;
    use dpdk_roce::net::NetEvent;
    let mut pair = Pair::with_arp(LinkConfig::clean());
    let t0 = pair.now();
    let qpn = pair.a.create_qp(t0, QpOptions::default()).unwrap();
    let ghost = std::net::Ipv4Addr::new(192, 0, 2, 98);
    let cp = dpdk_roce::cm::ConnectParams::new(ghost, 7471, qpn, Psn::new(1));
    let id = pair.a.connect(t0, cp).unwrap();
    let mut events = Vec::new();
    pair.run_until(Duration::from_secs(30), |p| {
        while let Some(ev) = p.a.poll_host_event() {
            events.push(ev);
        }
        events.contains(&HostEvent::Cm(CmEvent::Unreachable { id }))
    })
    .unwrap();
    let net = events
        .iter()
        .position(|e| *e == HostEvent::Net(NetEvent::Unresolvable { ip: ghost.into() }))
        .expect("the neighbour layer reported the failure");
    let cm = events
        .iter()
        .position(|e| *e == HostEvent::Cm(CmEvent::Unreachable { id }))
        .unwrap();
    assert!(net < cm, "{events:?}");
    assert!(
        pair.now() - t0 < dpdk_roce::cm::timeout::cm_timeout(20) * 2,
        "failed with the ARP, not after the CM's retries"
    );
    assert_eq!(pair.a.cm().connection_count(), 0, "nothing left in the CM");
}

/// An RDMA WRITE of `len` bytes from `src` (under `lkey`) to the start of `dst`.
/// A clean connected pair, a 64-byte source on A and a 64-byte destination (remote write) on B.
fn connected_with_64_byte_regions() -> (Pair, Conn, Region, Region) {
    let mut pair = Pair::new(LinkConfig::clean());
    let conn = pair.connect(&ConnSpec::default()).unwrap();
    let src = pair.a.register(1, 64, Access::LOCAL_WRITE);
    let dst = pair
        .b
        .register(1, 64, Access::REMOTE_WRITE | Access::LOCAL_WRITE);
    (pair, conn, src, dst)
}

fn write_wr(id: u64, src: &Region, lkey: u32, len: u32, dst: &Region, signaled: bool) -> SendWr {
    let op = SendOp::Write {
        remote_addr: dst.addr,
        rkey: dst.rkey,
    };
    SendWr {
        signaled,
        ..signaled_wr(id, op, &Region { lkey, ..*src }, len)
    }
}

/// The transmit line (`Host::has_output`): a QP leaves it with its last frame, so a poll loop
/// that asks `has_output` first makes no empty transmit poll; a send refused before the QP can
/// send does not put it on the line.
#[test]
fn a_qp_leaves_the_transmit_line_with_its_last_frame() {
    let (mut pair, conn, src, dst) = connected_with_64_byte_regions();
    let write = |id: u64| write_wr(id, &src, src.lkey, 8, &dst, id == 2);
    pair.run_idle(Duration::from_millis(1)).unwrap();
    assert!(!pair.a.has_output(), "an idle connected host has nothing");
    let now = pair.now();
    let mut out = Vec::new();
    pair.a.post_send(now, conn.qpn_a, write(1)).unwrap();
    assert!(pair.a.has_output());
    assert!(pair.a.poll_transmit_into(now, &mut out), "the WRITE");
    assert!(!pair.a.has_output(), "its only frame is out: off the line");
    pair.a.post_send(now, conn.qpn_a, write(2)).unwrap();
    pair.a.post_send(now, conn.qpn_a, write(3)).unwrap();
    assert!(pair.a.poll_transmit_into(now, &mut out), "WRITE 2");
    assert!(pair.a.has_output(), "WRITE 3 still waits");
    assert!(pair.a.poll_transmit_into(now, &mut out), "WRITE 3");
    assert!(!pair.a.has_output());
    assert!(!pair.a.poll_transmit_into(now, &mut out));

    // A QP that cannot send yet (INIT) refuses the post and stays off the line.
    let qpn = pair
        .a
        .create_qp(
            now,
            QpOptions {
                pd: 1,
                ..QpOptions::default()
            },
        )
        .unwrap();
    let refused = pair.a.post_send(now, qpn, write(4));
    assert!(
        matches!(
            refused,
            Err(EndpointError::Qp(
                dpdk_roce::transport::types::QpError::InvalidState
            ))
        ),
        "{refused:?}"
    );
    assert!(
        !pair.a.has_output(),
        "a refused post puts nothing on the line"
    );
}

/// A send whose SGE fails the L_Key check at post time is taken (the post succeeds) and
/// completes with a local protection error when the QP reaches it (IBTA vol. 1 §10.6.3.1,
/// §11.6.2); the QP goes to ERROR and the WRs behind it flush. The error completion is
/// produced by the transmit path, not by the post: it must still reach the consumer.
#[test]
fn a_send_with_a_bad_lkey_completes_with_a_protection_error() {
    let (mut pair, conn, src, dst) = connected_with_64_byte_regions();
    pair.run_idle(Duration::from_millis(1)).unwrap();
    let now = pair.now();
    for (id, lkey, len) in [
        (1, src.lkey ^ 0x100, 8),
        (2, src.lkey, 8),
        (3, src.lkey, 65),
    ] {
        let wr = write_wr(id, &src, lkey, len, &dst, true);
        pair.a.post_send(now, conn.qpn_a, wr).unwrap();
    }
    let wcs = a_completions(&mut pair, 3, Duration::from_secs(1));
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::LocProtErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(pair.a.qp(conn.qpn_a).unwrap().state(), QpState::Error);
}

/// The transmit path sizes the caller's reused buffer without clearing it: frames built into a
/// buffer full of another frame's bytes are the frames built into a fresh one, byte for byte
/// (pad zero, every header byte written), for every pad length and with and without AckReq.
#[test]
fn frames_built_into_a_dirty_buffer_equal_fresh_ones() {
    let frames = |dirty: bool| {
        let (mut pair, conn, src, dst) = connected_with_64_byte_regions();
        pair.run_idle(Duration::from_millis(1)).unwrap();
        let now = pair.now();
        let mut out = vec![0xa5u8; 9000];
        let mut got = Vec::new();
        for (i, len) in (0..=9u32).enumerate() {
            let wr = write_wr(i as u64, &src, src.lkey, len, &dst, i % 2 == 0);
            pair.a.post_send(now, conn.qpn_a, wr).unwrap();
            if !dirty {
                out = Vec::new();
            }
            assert!(pair.a.poll_transmit_into(now, &mut out), "WRITE {i}");
            let f = RoceFrame::parse(&out).expect("a valid frame");
            assert_eq!(f.payload.len(), len as usize);
            got.push(out.clone());
            if dirty {
                out.resize(9000, 0x5a);
            }
        }
        got
    };
    assert_eq!(frames(true), frames(false));
}
