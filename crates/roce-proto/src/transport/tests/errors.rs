//! Error paths: protection, lengths, invalid requests, state machine, hostile packets.

use rand::{Rng, SeedableRng};

use super::*;
use crate::transport::types::{QpError, WcOpcode, WcStatus};
use crate::wire::aeth::NakCode;
use crate::wire::atomic_eth::AtomicEthRepr;
use crate::wire::bth::BthRepr;
use crate::wire::reth::RethRepr;

/// A request header set from A to B.
fn req(op: Opcode, psn: u32) -> RoceHeaders {
    RoceHeaders {
        bth: BthRepr {
            opcode: op,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp: 0x22,
            ack_req: true,
            psn: Psn::new(psn),
        },
        reth: None,
        aeth: None,
        deth: None,
        imm_dt: None,
        ieth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
    }
}

fn has(
    flags: crate::wire::opcode::OpFlags,
    f: crate::wire::opcode::OpFlags,
    rng: &mut ChaCha8Rng,
) -> bool {
    flags.contains(f) || rng.gen_bool(0.05)
}

fn inject(p: &mut Pair, headers: RoceHeaders, payload: &[u8]) {
    p.deliver(&Pkt {
        from: A,
        headers,
        payload: payload.to_vec(),
    });
}

#[test]
fn remote_access_errors_bad_rkey_bounds_rights() {
    for case in 0..4 {
        let mut p = Pair::new();
        let src = p.region(A, 64, 1);
        let dst = p.zeroed(B, 64);
        let ro = p.s[B].mem.register(PD, 64, Access::REMOTE_READ);
        let before = p.bytes(B, &dst);
        let op = match case {
            0 => SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey ^ 0x100,
            },
            1 => SendOp::Write {
                remote_addr: dst.addr + 60,
                rkey: dst.rkey,
            },
            2 => SendOp::Write {
                remote_addr: ro.addr,
                rkey: ro.rkey,
            },
            _ => SendOp::Read {
                remote_addr: dst.addr + 1,
                rkey: dst.rkey,
            },
        };
        let sz = if case == 3 { 64 } else { 8 };
        let local = p.zeroed(A, 64);
        let sgl = if case == 3 {
            vec![sge(&local, 0, sz)]
        } else {
            vec![sge(&src, 0, sz)]
        };
        p.post_send(A, wr(1, op, sgl));
        p.post_send(
            A,
            wr(
                2,
                SendOp::Write {
                    remote_addr: dst.addr,
                    rkey: dst.rkey,
                },
                vec![sge(&src, 0, 8)],
            ),
        );
        p.run();
        let naks: Vec<u32> = p
            .trace
            .iter()
            .filter(|x| x.syndrome() == Some(Syndrome::Nak(NakCode::RemoteAccessError)))
            .map(|x| x.psn())
            .collect();
        assert_eq!(naks, vec![100], "case {case}");
        assert_eq!(
            statuses(&p.completions(A)),
            vec![(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)],
            "case {case}"
        );
        assert_eq!(p.s[A].qp.state(), QpState::Error);
        assert_eq!(
            p.s[B].qp.state(),
            QpState::Error,
            "responder moves to ERROR too"
        );
        assert_eq!(p.bytes(B, &dst), before, "nothing written");
    }
}

#[test]
fn qp_without_remote_write_access_refuses() {
    let mut p = Pair::with(
        |side, a| {
            if side == B {
                a.access = Access::REMOTE_READ
            }
        },
        100,
        200,
    );
    let src = p.region(A, 64, 1);
    let dst = p.zeroed(B, 64);
    p.post_send(
        A,
        wr(
            1,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            vec![sge(&src, 0, 8)],
        ),
    );
    p.run();
    assert_eq!(
        statuses(&p.completions(A)),
        vec![(1, WcStatus::RemAccessErr)]
    );
    // Counted by kind on both sides, with the payload bytes that moved.
    let (a, b) = (*p.s[A].qp.stats(), *p.s[B].qp.stats());
    assert_eq!((b.remote_access_naks_sent, b.fatal_naks_sent), (1, 1));
    assert_eq!(
        (a.remote_access_naks_received, a.fatal_naks_received),
        (1, 1)
    );
    assert_eq!(
        a.invalid_request_naks_received + a.remote_op_naks_received,
        0
    );
    assert_eq!((a.bytes_sent, b.bytes_received), (8, 8));
    assert_eq!(b.bytes_sent, 0, "a NAK carries no payload");
}

#[test]
fn local_protection_error_completes_in_order_then_error() {
    let mut p = Pair::new();
    let src = p.region(A, 64, 1);
    let dst = p.zeroed(B, 64);
    p.post_send(
        A,
        wr(
            1,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            vec![sge(&src, 0, 8)],
        ),
    );
    // Bad L_Key, then out of the region's bounds.
    p.post_send(
        A,
        wr(
            2,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            vec![Sge {
                addr: src.addr,
                len: 8,
                lkey: src.lkey + 1,
            }],
        ),
    );
    p.post_send(A, wr(3, SendOp::Send, vec![sge(&src, 60, 8)]));
    p.run();
    assert_eq!(
        statuses(&p.completions(A)),
        vec![
            (1, WcStatus::Success),
            (2, WcStatus::LocProtErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(p.count(A, |_| true), 1, "the bad WR never reached the wire");
    assert_eq!(p.s[A].qp.state(), QpState::Error);
    // READ into a region without local write.
    let mut p = Pair::new();
    let remote = p.region(B, 64, 1);
    let ro = p.s[A].mem.register(PD, 64, Access::empty());
    p.post_send(
        A,
        wr(
            4,
            SendOp::Read {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            vec![Sge {
                addr: ro.addr,
                len: 8,
                lkey: ro.lkey,
            }],
        ),
    );
    p.run();
    assert_eq!(statuses(&p.completions(A)), vec![(4, WcStatus::LocProtErr)]);
}

#[test]
fn receive_buffer_too_small() {
    let mut p = Pair::new();
    let src = p.region(A, 3000, 1);
    let dst = p.zeroed(B, 3000);
    p.post_recv(B, 1, vec![sge(&dst, 0, 1500)]);
    p.post_recv(B, 2, vec![sge(&dst, 1500, 1500)]);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, 2000)]));
    p.run();
    assert_eq!(
        p.count(B, |x| x.syndrome()
            == Some(Syndrome::Nak(NakCode::InvalidRequest))),
        1
    );
    let cb = p.completions(B);
    assert_eq!(
        statuses(&cb),
        vec![(1, WcStatus::LocLenErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(
        statuses(&p.completions(A)),
        vec![(1, WcStatus::RemInvReqErr)]
    );
    assert_eq!(p.s[B].qp.state(), QpState::Error);
}

#[test]
fn invalid_opcode_sequences_and_lengths_nak_invalid_request() {
    let cases: Vec<(RoceHeaders, Vec<u8>)> = vec![
        // SEND middle without first.
        (req(Opcode::RC_SEND_MIDDLE, 200), vec![0; MTU]),
        // WRITE only whose payload differs from the RETH length.
        (
            RoceHeaders {
                reth: Some(RethRepr {
                    va: 0,
                    rkey: 0,
                    dma_len: 10,
                }),
                ..req(Opcode::RC_WRITE_ONLY, 200)
            },
            vec![0; 4],
        ),
        // SEND first shorter than the MTU.
        (req(Opcode::RC_SEND_FIRST, 200), vec![0; 10]),
        // Payload larger than the MTU.
        (req(Opcode::RC_SEND_ONLY, 200), vec![0; MTU + 1]),
    ];
    for (i, (h, payload)) in cases.into_iter().enumerate() {
        let mut p = Pair::new();
        let dst = p.zeroed(B, 4 * MTU);
        p.post_recv(B, 1, vec![sge(&dst, 0, 4 * MTU as u32)]);
        inject(
            &mut p,
            RoceHeaders {
                bth: BthRepr {
                    psn: Psn::new(100),
                    ..h.bth
                },
                ..h
            },
            &payload,
        );
        let t = p.s[B].qp.poll_transmit(p.now).expect("a NAK");
        assert_eq!(t.headers.bth.opcode, Opcode::RC_ACK, "case {i}");
        assert_eq!(
            t.headers.aeth.unwrap().syndrome,
            Syndrome::Nak(NakCode::InvalidRequest),
            "case {i}"
        );
        assert_eq!(t.headers.bth.psn.value(), 100);
        assert_eq!(p.s[B].qp.state(), QpState::Error, "case {i}");
        assert!(p.bytes(B, &dst).iter().all(|&b| b == 0), "case {i}");
    }
}

#[test]
fn pkey_mismatch_dropped_silently() {
    let mut p = Pair::new();
    let dst = p.zeroed(B, 64);
    p.post_recv(B, 1, vec![sge(&dst, 0, 64)]);
    let mut h = req(Opcode::RC_SEND_ONLY, 100);
    h.bth.pkey = 0x8001;
    inject(&mut p, h, &[1, 2, 3]);
    assert!(p.s[B].qp.poll_transmit(p.now).is_none());
    assert!(p.completions(B).is_empty());
    assert_eq!(p.s[B].qp.stats().dropped, 1);
    assert_eq!(p.s[B].qp.state(), QpState::Rts);
}

/// A request whose extension headers differ from its opcode's row in the table (one extra, one
/// missing), or that carries a payload its opcode has none of, is dropped silently: no NAK,
/// no byte written, no completion, the PSN not consumed (the in-order request after it runs).
#[test]
fn headers_not_matching_the_opcode_dropped_silently() {
    use crate::wire::aeth::AethRepr;
    use crate::wire::atomic_ack_eth::AtomicAckEthRepr;
    use crate::wire::deth::DethRepr;
    let mut p = Pair::new();
    let dst = p.zeroed(B, 64);
    let reth = RethRepr {
        va: dst.addr,
        rkey: dst.rkey,
        dma_len: 3,
    };
    let write = || {
        let mut h = req(Opcode::RC_WRITE_ONLY, 100);
        h.reth = Some(reth);
        h
    };
    let cases: Vec<(RoceHeaders, Vec<u8>)> = vec![
        (req(Opcode::RC_WRITE_ONLY, 100), vec![1, 2, 3]),
        (
            RoceHeaders {
                aeth: Some(AethRepr {
                    syndrome: Syndrome::Ack { credits: 0 },
                    msn: 0,
                }),
                ..write()
            },
            vec![1, 2, 3],
        ),
        (
            RoceHeaders {
                deth: Some(DethRepr { qkey: 1, src_qp: 2 }),
                ..write()
            },
            vec![1, 2, 3],
        ),
        (
            RoceHeaders {
                imm_dt: Some(7),
                ..write()
            },
            vec![1, 2, 3],
        ),
        (
            RoceHeaders {
                ieth: Some(7),
                ..write()
            },
            vec![1, 2, 3],
        ),
        (
            RoceHeaders {
                atomic_eth: Some(AtomicEthRepr {
                    va: dst.addr,
                    rkey: dst.rkey,
                    swap_add: 1,
                    compare: 0,
                }),
                ..write()
            },
            vec![1, 2, 3],
        ),
        (
            RoceHeaders {
                atomic_ack_eth: Some(AtomicAckEthRepr { orig_data: 1 }),
                ..write()
            },
            vec![1, 2, 3],
        ),
        (
            RoceHeaders {
                reth: Some(RethRepr { dma_len: 0, ..reth }),
                ..req(Opcode::RC_READ_REQUEST, 100)
            },
            vec![1, 2, 3],
        ),
    ];
    let n = cases.len() as u64;
    for (i, (h, payload)) in cases.into_iter().enumerate() {
        inject(&mut p, h, &payload);
        assert!(p.s[B].qp.poll_transmit(p.now).is_none(), "case {i}");
        assert_eq!(p.s[B].qp.stats().dropped, i as u64 + 1, "case {i}");
        assert_eq!(p.s[B].qp.state(), QpState::Rts, "case {i}");
    }
    assert!(p.bytes(B, &dst).iter().all(|&b| b == 0));
    assert!(p.completions(B).is_empty());
    // The headers the table names pass: the same PSN now executes.
    inject(&mut p, write(), &[1, 2, 3]);
    assert_eq!(p.s[B].qp.stats().dropped, n);
    assert_eq!(&p.bytes(B, &dst)[..3], &[1, 2, 3]);
    let t = p.s[B].qp.poll_transmit(p.now).expect("an ACK");
    assert_eq!(t.headers.bth.opcode, Opcode::RC_ACK);
    assert_eq!(t.headers.bth.psn.value(), 100);
}

#[test]
fn out_of_sequence_naks_once_then_drops() {
    let mut p = Pair::new();
    p.post_recv(B, 1, vec![]);
    for psn in [103, 104, 105] {
        inject(&mut p, req(Opcode::RC_SEND_ONLY, psn), &[]);
    }
    let t = p.s[B].qp.poll_transmit(p.now).unwrap();
    assert_eq!(
        t.headers.aeth.unwrap().syndrome,
        Syndrome::Nak(NakCode::PsnSequenceError)
    );
    assert_eq!(t.headers.bth.psn.value(), 100);
    assert!(p.s[B].qp.poll_transmit(p.now).is_none(), "one NAK per gap");
    assert_eq!(p.s[B].qp.stats().dropped, 2);
}

#[test]
fn transition_to_error_flushes_in_order() {
    let mut p = Pair::new();
    let src = p.region(A, 64, 1);
    let dst = p.zeroed(B, 64);
    p.post_recv(A, 100, vec![]);
    p.post_recv(A, 101, vec![]);
    for i in 1..=3 {
        p.post_send(
            A,
            wr(
                i,
                SendOp::Write {
                    remote_addr: dst.addr,
                    rkey: dst.rkey,
                },
                vec![sge(&src, 0, 8)],
            ),
        );
    }
    // The first is sent, none acknowledged.
    assert!(p.s[A].qp.poll_transmit(p.now).is_some());
    p.s[A]
        .qp
        .modify(p.now, QpState::Error, &QpAttr::default())
        .unwrap();
    let c = p.completions(A);
    assert_eq!(
        statuses(&c),
        vec![
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr),
            (100, WcStatus::WrFlushErr),
            (101, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(c[3].opcode, WcOpcode::Recv);
    assert!(p.s[A].qp.poll_transmit(p.now).is_none());
    assert_eq!(p.s[A].qp.poll_timeout(), None);
    // Posting in ERROR completes at once with a flush.
    p.post_send(A, wr(9, SendOp::Send, vec![]));
    p.post_recv(A, 109, vec![]);
    assert_eq!(
        statuses(&p.completions(A)),
        vec![(9, WcStatus::WrFlushErr), (109, WcStatus::WrFlushErr)]
    );
    // ERROR -> RESET -> INIT works again.
    let a = attr(1, 1, 0x22);
    p.s[A].qp.modify(p.now, QpState::Reset, &a).unwrap();
    assert_eq!(p.s[A].qp.state(), QpState::Reset);
    connect(&mut p.s[A].qp, &a);
    assert_eq!(p.s[A].qp.state(), QpState::Rts);
}

#[test]
fn invalid_transitions_and_states_refused() {
    let a = attr(1, 1, 0x22);
    let mut qp = Qp::new(config(0x11));
    let now = Instant::ZERO;
    let mem = VecMemory::new();
    assert_eq!(
        qp.modify(now, QpState::Rts, &a),
        Err(QpError::InvalidTransition)
    );
    assert_eq!(
        qp.modify(now, QpState::Rtr, &a),
        Err(QpError::InvalidTransition)
    );
    assert_eq!(
        qp.modify(now, QpState::Sqd, &a),
        Err(QpError::InvalidTransition)
    );
    assert_eq!(
        qp.post_recv(RecvWr {
            wr_id: 1,
            sgl: crate::sgl![]
        }),
        Err(QpError::InvalidState)
    );
    assert_eq!(
        qp.post_send(now, wr(1, SendOp::Send, vec![]), &mem),
        Err(QpError::InvalidState)
    );
    qp.modify(now, QpState::Init, &a).unwrap();
    assert_eq!(
        qp.post_recv(RecvWr {
            wr_id: 1,
            sgl: crate::sgl![]
        }),
        Ok(())
    );
    assert_eq!(
        qp.post_send(now, wr(1, SendOp::Send, vec![]), &mem),
        Err(QpError::InvalidState)
    );
    assert_eq!(
        qp.modify(now, QpState::Rts, &a),
        Err(QpError::InvalidTransition)
    );
    let bad = QpAttr { retry_cnt: 8, ..a };
    assert_eq!(
        qp.modify(now, QpState::Rtr, &bad),
        Err(QpError::InvalidArgument)
    );
    assert_eq!(qp.state(), QpState::Init);
    qp.modify(now, QpState::Rtr, &a).unwrap();
    assert_eq!(
        qp.modify(now, QpState::Init, &a),
        Err(QpError::InvalidTransition)
    );
    qp.modify(now, QpState::Rts, &a).unwrap();
    assert_eq!(
        qp.modify(now, QpState::Rtr, &a),
        Err(QpError::InvalidTransition)
    );
    qp.modify(now, QpState::Sqd, &a).unwrap();
    qp.modify(now, QpState::Rts, &a).unwrap();
    // Queue limits.
    let too_many = vec![
        Sge {
            addr: 0,
            len: 0,
            lkey: 0
        };
        17
    ];
    assert_eq!(
        qp.post_send(now, wr(1, SendOp::Send, too_many.clone()), &mem),
        Err(QpError::TooManySge)
    );
    assert_eq!(
        qp.post_recv(RecvWr {
            wr_id: 1,
            sgl: too_many.into()
        }),
        Err(QpError::TooManySge)
    );
    for i in 0..256 {
        qp.post_send(now, wr(i, SendOp::Send, vec![]), &mem)
            .unwrap();
    }
    assert_eq!(
        qp.post_send(now, wr(0, SendOp::Send, vec![]), &mem),
        Err(QpError::QueueFull)
    );
    assert_eq!(
        qp.post_send(
            now,
            wr(
                0,
                SendOp::FetchAdd {
                    remote_addr: 0,
                    rkey: 0,
                    add: 1
                },
                vec![]
            ),
            &mem
        ),
        Err(QpError::InvalidArgument),
        "atomics need one 8-byte local buffer"
    );
}

#[test]
fn sqd_holds_new_work_until_rts() {
    let mut p = Pair::new();
    let src = p.region(A, 64, 1);
    let dst = p.zeroed(B, 64);
    p.s[A]
        .qp
        .modify(p.now, QpState::Sqd, &QpAttr::default())
        .unwrap();
    p.post_send(
        A,
        wr(
            1,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            vec![sge(&src, 0, 8)],
        ),
    );
    p.run();
    assert_eq!(p.count(A, |_| true), 0);
    p.s[A]
        .qp
        .modify(p.now, QpState::Rts, &QpAttr::default())
        .unwrap();
    p.run();
    assert_eq!(statuses(&p.completions(A)), vec![(1, WcStatus::Success)]);
}

/// Random headers from a seeded generator: random opcodes (any byte), PSNs near and far,
/// random extension headers, keys, addresses, lengths, payloads. No panic, and memory outside
/// the one region B exposes is never touched; A's memory is never touched.
#[test]
fn junk_packets_never_panic_or_corrupt() {
    let mut rng = ChaCha8Rng::seed_from_u64(0xbad_cafe);
    let mut p = Pair::new();
    let target = p.zeroed(B, 4096);
    let guard = p.region(B, 4096, 77);
    let guard_before = p.bytes(B, &guard);
    let a_mem = p.region(A, 4096, 78);
    let a_before = p.bytes(A, &a_mem);
    let a_scratch = p.zeroed(A, 2 * MTU);
    for i in 0..20 {
        p.post_recv(B, i, vec![sge(&target, i * 64, 64)]);
    }
    // Guard has no remote rights on B's QP side: make it local-only by re-registering.
    let locked = p.s[B].mem.register(PD, 4096, Access::LOCAL_WRITE);
    for n in 0..20_000u64 {
        let opcode = Opcode(if rng.gen_bool(0.7) {
            rng.gen_range(0..0x18)
        } else {
            rng.gen()
        });
        let flags = opcode.flags();
        let near = rng.gen_bool(0.6);
        let psn = if near {
            100u32.wrapping_add(rng.gen_range(0..8)).wrapping_sub(4)
        } else {
            rng.gen()
        };
        let mut h = req(opcode, psn);
        h.bth.dest_qp = if rng.gen_bool(0.95) { 0x22 } else { rng.gen() };
        h.bth.ack_req = rng.gen();
        let key = match rng.gen_range(0..4) {
            0 => target.rkey,
            1 => locked.lkey | 0x8000_0000,
            2 => target.lkey,
            _ => rng.gen(),
        };
        let va = match rng.gen_range(0..3) {
            0 => target.addr + rng.gen_range(0..5000),
            1 => locked.addr + rng.gen_range(0..4096),
            _ => rng.gen(),
        };
        if has(flags, crate::wire::opcode::OpFlags::RETH, &mut rng) {
            h.reth = Some(RethRepr {
                va,
                rkey: key,
                dma_len: if rng.gen() {
                    rng.gen_range(0..3000)
                } else {
                    rng.gen()
                },
            });
        }
        if has(flags, crate::wire::opcode::OpFlags::AETH, &mut rng) {
            let syndrome = match rng.gen_range(0..4) {
                0 => Syndrome::Ack { credits: 31 },
                1 => Syndrome::RnrNak {
                    timer: rng.gen_range(0..32),
                },
                2 => Syndrome::Nak(NakCode::PsnSequenceError),
                _ => Syndrome::Nak(NakCode::RemoteAccessError),
            };
            h.aeth = Some(crate::wire::aeth::AethRepr {
                syndrome,
                msn: rng.gen(),
            });
        }
        if has(flags, crate::wire::opcode::OpFlags::IMMDT, &mut rng) {
            h.imm_dt = Some(rng.gen());
        }
        if has(flags, crate::wire::opcode::OpFlags::IETH, &mut rng) {
            h.ieth = Some(key);
        }
        if has(flags, crate::wire::opcode::OpFlags::ATOMIC_ETH, &mut rng) {
            h.atomic_eth = Some(AtomicEthRepr {
                va,
                rkey: key,
                swap_add: rng.gen(),
                compare: rng.gen(),
            });
        }
        if has(
            flags,
            crate::wire::opcode::OpFlags::ATOMIC_ACK_ETH,
            &mut rng,
        ) {
            h.atomic_ack_eth = Some(crate::wire::atomic_ack_eth::AtomicAckEthRepr {
                orig_data: rng.gen(),
            });
        }
        let plen = match rng.gen_range(0..3) {
            0 => 0,
            1 => MTU,
            _ => rng.gen_range(0..2 * MTU),
        };
        let payload: Vec<u8> = (0..plen).map(|_| rng.gen()).collect();
        // Both directions: junk to B's responder and to A's completer.
        inject(&mut p, h, &payload);
        let mut h2 = h;
        h2.bth.dest_qp = 0x11;
        p.deliver(&Pkt {
            from: B,
            headers: h2,
            payload,
        });
        for side in [A, B] {
            while let Some(t) = p.s[side].qp.poll_transmit(p.now) {
                let mut b = vec![0; t.payload.len()];
                t.payload.gather(&p.s[side].mem, &mut b).unwrap();
            }
            let _ = p.completions(side);
        }
        if n % 100 == 0 {
            p.now += core::time::Duration::from_millis(1);
            p.s[A].qp.handle_timeout(p.now);
            p.s[B].qp.handle_timeout(p.now);
        }
        if n % 7 == 0 {
            // Keep A's requester busy so junk responses meet outstanding requests.
            let op = match n % 3 {
                0 => SendOp::Write {
                    remote_addr: target.addr,
                    rkey: target.rkey,
                },
                1 => SendOp::Read {
                    remote_addr: target.addr,
                    rkey: target.rkey,
                },
                _ => SendOp::Send,
            };
            let sgl = if n % 3 == 1 {
                vec![sge(&a_scratch, 0, 2 * MTU as u32)]
            } else {
                vec![sge(&a_mem, 0, 3000)]
            };
            let _ = p.s[A].qp.post_send(p.now, wr(n, op, sgl), &p.s[A].mem);
        }
        if p.s[A].qp.state() == QpState::Error {
            let a = attr(100, 5000, 0x22);
            p.s[A].qp.modify(p.now, QpState::Reset, &a).unwrap();
            connect(&mut p.s[A].qp, &a);
        }
        if p.s[B].qp.state() == QpState::Error {
            // Revive B to keep exercising the responder.
            let a = attr(5000, 100, 0x11);
            p.s[B].qp.modify(p.now, QpState::Reset, &a).unwrap();
            connect(&mut p.s[B].qp, &a);
            for i in 0..20 {
                p.post_recv(B, i, vec![sge(&target, i * 64, 64)]);
            }
        }
    }
    assert_eq!(
        p.bytes(B, &guard),
        guard_before,
        "unexposed region untouched"
    );
    assert_eq!(p.bytes(A, &a_mem), a_before, "requester memory untouched");
    assert!(
        p.s[B]
            .mem
            .bytes(locked.lkey)
            .unwrap()
            .iter()
            .all(|&b| b == 0),
        "local-only region untouched"
    );
    assert!(p.s[B].qp.stats().packets_received >= 20_000);
    assert!(
        p.s[A].qp.stats().packets_sent > 1000,
        "A's requester was exercised"
    );
}

#[test]
fn sqe_is_never_entered_by_the_consumer_on_rc() {
    // IBTA §10.3.1: only the QP itself enters SQE (and an RC QP goes to ERROR instead), so a
    // modify to SQE is refused from every state.
    let a = attr(1, 1, 0x22);
    let mut qp = Qp::new(config(0x11));
    let now = Instant::ZERO;
    for target in [QpState::Init, QpState::Rtr, QpState::Rts] {
        assert_eq!(
            qp.modify(now, QpState::Sqe, &a),
            Err(QpError::InvalidTransition),
            "from {:?}",
            qp.state()
        );
        qp.modify(now, target, &a).unwrap();
    }
    assert_eq!(
        qp.modify(now, QpState::Sqe, &a),
        Err(QpError::InvalidTransition)
    );
    assert_eq!(qp.state(), QpState::Rts);
}
