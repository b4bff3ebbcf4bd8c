//! Loss-free operation: every operation and size, completions, ACK coalescing.

use super::*;
use crate::transport::types::{WcOpcode, WcStatus};

const SIZES: [usize; 6] = [0, 1, MTU - 1, MTU, MTU + 1, 1 << 20];

fn npkts(len: usize) -> usize {
    len.div_ceil(MTU).max(1)
}

#[test]
fn send_all_sizes_lands_byte_for_byte() {
    for (i, &len) in SIZES.iter().enumerate() {
        let mut p = Pair::new();
        let src = p.region(A, len.max(1), 7 + i as u8);
        let dst = p.zeroed(B, len + 16);
        p.post_recv(B, 900, vec![sge(&dst, 0, len as u32 + 16)]);
        p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, len as u32)]));
        p.run();
        // Trace: the SEND packets, numbered from PSN 100, AckReq on the last one.
        let sends: Vec<&Pkt> = p.trace.iter().filter(|x| x.from == A).collect();
        assert_eq!(sends.len(), npkts(len), "len {len}");
        for (k, s) in sends.iter().enumerate() {
            assert_eq!(s.psn(), 100 + k as u32);
        }
        let want_op = if npkts(len) == 1 {
            Opcode::RC_SEND_ONLY
        } else {
            Opcode::RC_SEND_FIRST
        };
        assert_eq!(sends[0].op(), want_op);
        assert!(sends.last().unwrap().headers.bth.ack_req);
        assert_eq!(sends[0].headers.bth.dest_qp, 0x22);
        let got = p.bytes(B, &dst);
        assert_eq!(&got[..len], &p.bytes(A, &src)[..len], "len {len}");
        assert!(
            got[len..].iter().all(|&b| b == 0),
            "nothing beyond the message"
        );
        let ca = p.completions(A);
        assert_eq!(ca.len(), 1);
        assert_eq!(
            (ca[0].wr_id, ca[0].status, ca[0].opcode),
            (1, WcStatus::Success, WcOpcode::Send)
        );
        let cb = p.completions(B);
        assert_eq!(cb.len(), 1);
        assert_eq!(
            (cb[0].wr_id, cb[0].status, cb[0].opcode),
            (900, WcStatus::Success, WcOpcode::Recv)
        );
        assert_eq!(cb[0].byte_len as usize, len);
        assert_eq!(p.s[A].qp.stats().retransmits, 0);
    }
}

#[test]
fn write_all_sizes() {
    for (i, &len) in SIZES.iter().enumerate() {
        let mut p = Pair::new();
        let src = p.region(A, len.max(1), 3 + i as u8);
        let dst = p.zeroed(B, len + 8);
        p.post_send(
            A,
            wr(
                1,
                SendOp::Write {
                    remote_addr: dst.addr + 4,
                    rkey: dst.rkey,
                },
                vec![sge(&src, 0, len as u32)],
            ),
        );
        p.run();
        let writes: Vec<&Pkt> = p.trace.iter().filter(|x| x.from == A).collect();
        assert_eq!(writes.len(), npkts(len));
        let reth = writes[0].headers.reth.expect("RETH on the first packet");
        assert_eq!(reth.dma_len as usize, len);
        assert!(writes.iter().skip(1).all(|w| w.headers.reth.is_none()));
        let got = p.bytes(B, &dst);
        assert!(got[..4].iter().all(|&b| b == 0));
        assert_eq!(&got[4..4 + len], &p.bytes(A, &src)[..len]);
        assert!(got[4 + len..].iter().all(|&b| b == 0));
        let ca = p.completions(A);
        assert_eq!(ca.len(), 1);
        assert_eq!(
            (ca[0].status, ca[0].opcode, ca[0].byte_len as usize),
            (WcStatus::Success, WcOpcode::RdmaWrite, len)
        );
        assert!(
            p.completions(B).is_empty(),
            "plain WRITE consumes no receive"
        );
    }
}

#[test]
fn read_all_sizes() {
    for (i, &len) in SIZES.iter().enumerate() {
        let mut p = Pair::new();
        let remote = p.region(B, len.max(1), 11 + i as u8);
        let local = p.zeroed(A, len + 8);
        p.post_send(
            A,
            wr(
                5,
                SendOp::Read {
                    remote_addr: remote.addr,
                    rkey: remote.rkey,
                },
                vec![sge(&local, 8, len as u32)],
            ),
        );
        p.post_send(A, wr(6, SendOp::Send, vec![]));
        p.post_recv(B, 1, vec![]);
        p.run();
        // One READ request; the SEND after it starts at PSN 100 + ceil(len/MTU).
        let reqs: Vec<&Pkt> = p.trace.iter().filter(|x| x.from == A).collect();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].op(), Opcode::RC_READ_REQUEST);
        assert_eq!(reqs[1].psn() as usize, 100 + npkts(len));
        let resps = p.count(B, |x| {
            x.op().flags().contains(crate::wire::opcode::OpFlags::READ)
        });
        assert_eq!(resps, npkts(len));
        let got = p.bytes(A, &local);
        assert!(got[..8].iter().all(|&b| b == 0));
        assert_eq!(&got[8..8 + len], &p.bytes(B, &remote)[..len]);
        let ca = p.completions(A);
        assert_eq!(ca.len(), 2);
        assert_eq!(
            (
                ca[0].wr_id,
                ca[0].status,
                ca[0].opcode,
                ca[0].byte_len as usize
            ),
            (5, WcStatus::Success, WcOpcode::RdmaRead, len)
        );
        assert_eq!((ca[1].wr_id, ca[1].status), (6, WcStatus::Success));
    }
}

#[test]
fn atomics_cas_and_faa() {
    let mut p = Pair::new();
    let remote = p.zeroed(B, 64);
    let local = p.zeroed(A, 64);
    p.s[B].mem.bytes_mut(remote.lkey).unwrap()[8..16].copy_from_slice(&40u64.to_ne_bytes());
    let word = remote.addr + 8;
    let rkey = remote.rkey;
    p.post_send(
        A,
        wr(
            1,
            SendOp::FetchAdd {
                remote_addr: word,
                rkey,
                add: 2,
            },
            vec![sge(&local, 0, 8)],
        ),
    );
    p.post_send(
        A,
        wr(
            2,
            SendOp::CompareSwap {
                remote_addr: word,
                rkey,
                compare: 42,
                swap: 7,
            },
            vec![sge(&local, 8, 8)],
        ),
    );
    p.post_send(
        A,
        wr(
            3,
            SendOp::CompareSwap {
                remote_addr: word,
                rkey,
                compare: 42,
                swap: 9,
            },
            vec![sge(&local, 16, 8)],
        ),
    );
    p.run();
    assert_eq!(p.count(B, |x| x.op() == Opcode::RC_ATOMIC_ACK), 3);
    let l = p.bytes(A, &local);
    let at = |o: usize| u64::from_ne_bytes(l[o..o + 8].try_into().unwrap());
    assert_eq!(at(0), 40, "FAA returns the original");
    assert_eq!(at(8), 42, "CAS succeeded, returns the original");
    assert_eq!(at(16), 7, "CAS failed (7 != 42), returns the current value");
    let r = p.bytes(B, &remote);
    assert_eq!(u64::from_ne_bytes(r[8..16].try_into().unwrap()), 7);
    let ca = p.completions(A);
    let ops: Vec<_> = ca.iter().map(|c| (c.wr_id, c.opcode, c.status)).collect();
    assert_eq!(
        ops,
        vec![
            (1, WcOpcode::FetchAdd, WcStatus::Success),
            (2, WcOpcode::CompSwap, WcStatus::Success),
            (3, WcOpcode::CompSwap, WcStatus::Success)
        ]
    );
}

#[test]
fn multi_sge_send_scatters_across_multi_sge_receive() {
    let mut p = Pair::new();
    let src = p.region(A, 4096, 21);
    let dst = p.zeroed(B, 8192);
    // 3 source pieces: 700 + 1500 + 300 = 2500 bytes, 3 packets at MTU 1024.
    let sgl = vec![
        sge(&src, 0, 700),
        sge(&src, 1000, 1500),
        sge(&src, 3000, 300),
    ];
    let mut want = Vec::new();
    let s = p.bytes(A, &src);
    want.extend_from_slice(&s[0..700]);
    want.extend_from_slice(&s[1000..2500]);
    want.extend_from_slice(&s[3000..3300]);
    // Receive pieces: 100 + 2000 + 1000 at scattered places.
    p.post_recv(
        B,
        77,
        vec![
            sge(&dst, 0, 100),
            sge(&dst, 4000, 2000),
            sge(&dst, 7000, 1000),
        ],
    );
    p.post_send(A, wr(1, SendOp::Send, sgl));
    p.run();
    let d = p.bytes(B, &dst);
    let mut got = Vec::new();
    got.extend_from_slice(&d[0..100]);
    got.extend_from_slice(&d[4000..6000]);
    got.extend_from_slice(&d[7000..7400]);
    assert_eq!(got, want);
    assert!(d[7400..8000].iter().all(|&b| b == 0));
    assert!(d[100..4000].iter().all(|&b| b == 0));
    let cb = p.completions(B);
    assert_eq!((cb[0].wr_id, cb[0].byte_len), (77, 2500));
}

#[test]
fn write_with_imm_send_with_imm_send_with_inv() {
    let mut p = Pair::new();
    let src = p.region(A, 3000, 5);
    let dst = p.zeroed(B, 3000);
    let inv_target = p.region(B, 64, 1);
    p.post_recv(B, 1, vec![]);
    p.post_recv(B, 2, vec![sge(&dst, 2900, 100)]);
    p.post_recv(B, 3, vec![sge(&dst, 2800, 100)]);
    p.post_send(
        A,
        wr(
            10,
            SendOp::WriteWithImm {
                remote_addr: dst.addr,
                rkey: dst.rkey,
                imm: 0xdead_beef,
            },
            vec![sge(&src, 0, 2500)],
        ),
    );
    p.post_send(
        A,
        wr(
            11,
            SendOp::SendWithImm { imm: 0x1234 },
            vec![sge(&src, 0, 10)],
        ),
    );
    p.post_send(
        A,
        wr(
            12,
            SendOp::SendWithInv {
                rkey: inv_target.rkey,
            },
            vec![sge(&src, 0, 5)],
        ),
    );
    p.run();
    let ops: Vec<Opcode> = p
        .trace
        .iter()
        .filter(|x| x.from == A)
        .map(|x| x.op())
        .collect();
    assert_eq!(
        ops,
        vec![
            Opcode::RC_WRITE_FIRST,
            Opcode::RC_WRITE_MIDDLE,
            Opcode::RC_WRITE_LAST_IMM,
            Opcode::RC_SEND_ONLY_IMM,
            Opcode::RC_SEND_ONLY_INV
        ]
    );
    assert_eq!(&p.bytes(B, &dst)[..2500], &p.bytes(A, &src)[..2500]);
    let cb = p.completions(B);
    assert_eq!(cb.len(), 3);
    assert_eq!(
        (cb[0].wr_id, cb[0].opcode, cb[0].byte_len, cb[0].imm_data),
        (1, WcOpcode::RecvRdmaWithImm, 2500, Some(0xdead_beef))
    );
    assert_eq!(
        (cb[1].wr_id, cb[1].opcode, cb[1].byte_len, cb[1].imm_data),
        (2, WcOpcode::Recv, 10, Some(0x1234))
    );
    assert_eq!(
        (cb[2].wr_id, cb[2].invalidated_rkey),
        (3, Some(inv_target.rkey))
    );
    // The invalidated R_Key no longer works: a WRITE to it gets a remote access error.
    p.post_send(
        A,
        wr(
            13,
            SendOp::Write {
                remote_addr: inv_target.addr,
                rkey: inv_target.rkey,
            },
            vec![sge(&src, 0, 4)],
        ),
    );
    p.run();
    let ca = p.completions(A);
    assert_eq!(
        ca.last().map(|c| (c.wr_id, c.status)),
        Some((13, WcStatus::RemAccessErr))
    );
}

#[test]
fn one_ack_completes_several_wrs() {
    let mut p = Pair::new();
    let src = p.region(A, 64, 1);
    let dst = p.zeroed(B, 64);
    for i in 0..5 {
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
    // Only the last ACK gets through: it acknowledges all five writes.
    p.filter(|x| {
        if x.op() == Opcode::RC_ACK && x.psn() != 104 {
            Fate::Drop
        } else {
            Fate::Pass
        }
    });
    p.run();
    assert_eq!(p.count(A, |_| true), 5, "no retransmission needed");
    let ca = p.completions(A);
    assert_eq!(
        ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
    assert!(ca.iter().all(|c| c.status == WcStatus::Success));
    // The responder coalesced: all five were delivered in one batch, one ACK went back.
    assert_eq!(p.count(B, |x| x.op() == Opcode::RC_ACK), 1);
}

#[test]
fn unsignaled_wrs_complete_silently_unless_sig_all() {
    let mut p = Pair::new();
    let src = p.region(A, 64, 1);
    let dst = p.zeroed(B, 64);
    let mut w = wr(
        1,
        SendOp::Write {
            remote_addr: dst.addr,
            rkey: dst.rkey,
        },
        vec![sge(&src, 0, 8)],
    );
    w.signaled = false;
    p.post_send(A, w.clone());
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
    assert_eq!(
        p.completions(A).iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![2]
    );
    // The silent one is counted (a consumer's queue slot is free again without a completion).
    assert_eq!(p.s[A].qp.unsignaled_done(), 1);

    let mut ca = config(0x11);
    ca.sig_all = true;
    let mut p = Pair::with_configs(|_, _| {}, 1, 2, ca, config(0x22));
    let src = p.region(A, 64, 1);
    let dst = p.zeroed(B, 64);
    let mut w2 = w;
    w2.sgl = crate::sgl![sge(&src, 0, 8)];
    w2.op = SendOp::Write {
        remote_addr: dst.addr,
        rkey: dst.rkey,
    };
    p.post_send(A, w2);
    p.run();
    assert_eq!(p.completions(A).len(), 1);
    assert_eq!(
        p.s[A].qp.unsignaled_done(),
        0,
        "sig_all: every WR has its completion"
    );
}

#[test]
fn psn_wraps_around_2_pow_24() {
    let mut p = Pair::with(|_, _| {}, 0xff_fffd, 0xff_fff0);
    let src = p.region(A, 5000, 9);
    let dst = p.zeroed(B, 5000);
    let back = p.zeroed(A, 5000);
    p.post_recv(B, 1, vec![sge(&dst, 0, 5000)]);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, 5000)]));
    p.post_send(
        A,
        wr(
            2,
            SendOp::Read {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            vec![sge(&back, 0, 5000)],
        ),
    );
    p.run();
    let psns: Vec<u32> = p
        .trace
        .iter()
        .filter(|x| x.from == A)
        .map(|x| x.psn())
        .collect();
    assert_eq!(psns, vec![0xff_fffd, 0xff_fffe, 0xff_ffff, 0, 1, 2]);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    assert_eq!(p.bytes(A, &back), p.bytes(A, &src));
    let ca = p.completions(A);
    assert_eq!(
        statuses(&ca),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn srq_feeds_receives_and_fires_limit() {
    let mut cb = config(0x22);
    cb.srq = Some(3);
    let mut p = Pair::with_configs(|_, _| {}, 100, 200, config(0x11), cb);
    let mut srq = Srq::new(3, 8, 2);
    let dst = p.zeroed(B, 256);
    for i in 0..3 {
        srq.post_recv(RecvWr {
            wr_id: 50 + i,
            sgl: crate::sgl![sge(&dst, i * 64, 64)],
        })
        .unwrap();
    }
    srq.arm_limit(2);
    p.s[B].srq = Some(srq);
    assert_eq!(
        p.s[B].qp.post_recv(RecvWr {
            wr_id: 1,
            sgl: crate::sgl![]
        }),
        Err(crate::transport::types::QpError::InvalidState)
    );
    let src = p.region(A, 64, 4);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, 10)]));
    p.post_send(A, wr(2, SendOp::Send, vec![sge(&src, 0, 20)]));
    p.run();
    let cb = p.completions(B);
    assert_eq!(
        cb.iter()
            .map(|c| (c.wr_id, c.byte_len, c.srq))
            .collect::<Vec<_>>(),
        vec![(50, 10, Some(3)), (51, 20, Some(3))]
    );
    let srq = p.s[B].srq.as_mut().unwrap();
    assert_eq!(srq.len(), 1);
    assert!(srq.poll_limit_event());
}

#[test]
fn fence_waits_for_earlier_read() {
    let mut p = Pair::new();
    let remote = p.region(B, 4096, 2);
    let local = p.zeroed(A, 4096);
    p.post_send(
        A,
        wr(
            1,
            SendOp::Read {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            vec![sge(&local, 0, 4096)],
        ),
    );
    let mut w = wr(
        2,
        SendOp::Write {
            remote_addr: remote.addr,
            rkey: remote.rkey,
        },
        vec![sge(&local, 0, 16)],
    );
    w.fence = true;
    p.post_send(A, w);
    // First round: only the READ request may go out.
    let t1 = p.s[A].qp.poll_transmit(p.now).unwrap();
    assert_eq!(t1.headers.bth.opcode, Opcode::RC_READ_REQUEST);
    assert!(
        p.s[A].qp.poll_transmit(p.now).is_none(),
        "fenced WRITE waits"
    );
    let pkt = RocePacket {
        headers: t1.headers,
        payload: &[],
    };
    let s = &mut p.s[B];
    s.qp.handle_packet(p.now, &pkt, &mut s.mem, None);
    p.run();
    // The WRITE wrote back the bytes the READ fetched: its source was filled first.
    assert_eq!(&p.bytes(B, &remote)[..16], &p.bytes(A, &local)[..16]);
    let ca = p.completions(A);
    assert_eq!(ca.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(p.bytes(A, &local), p.bytes(B, &remote));
}

#[test]
fn max_rd_atomic_limits_outstanding_reads() {
    let mut p = Pair::with(
        |side, a| {
            if side == A {
                a.max_rd_atomic = 2
            }
        },
        100,
        200,
    );
    let remote = p.region(B, 8192, 2);
    let local = p.zeroed(A, 8192);
    for i in 0..5u64 {
        p.post_send(
            A,
            wr(
                i,
                SendOp::Read {
                    remote_addr: remote.addr + i * 1024,
                    rkey: remote.rkey,
                },
                vec![sge(&local, i * 1024, 1024)],
            ),
        );
    }
    let mut first_round = 0;
    while let Some(t) = p.s[A].qp.poll_transmit(p.now) {
        assert_eq!(t.headers.bth.opcode, Opcode::RC_READ_REQUEST);
        first_round += 1;
    }
    assert_eq!(first_round, 2, "only max_rd_atomic READs in flight");
    // Let the harness replay from scratch: those two were lost; timeouts resend them.
    p.run();
    assert_eq!(
        &p.bytes(A, &local)[..5 * 1024],
        &p.bytes(B, &remote)[..5 * 1024]
    );
    assert_eq!(p.completions(A).len(), 5);
    // Never more than 2 READ requests between responses.
    let mut outstanding: i32 = 0;
    let mut max_seen = 0;
    for x in &p.trace {
        if x.from == A
            && x.op() == Opcode::RC_READ_REQUEST
            && !x.headers.bth.psn.before(Psn::new(0))
        {
            outstanding += 1;
        }
        if x.from == B && x.op() == Opcode::RC_READ_RESPONSE_ONLY {
            outstanding -= 1;
        }
        max_seen = max_seen.max(outstanding);
    }
    assert!(max_seen <= 2, "max outstanding {max_seen}");
}
