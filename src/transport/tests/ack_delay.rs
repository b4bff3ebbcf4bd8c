//! The responder's ACK delay (`Qp::set_ack_delay`): a lone coalesced ACK waits for the QP's next
//! request and leaves right behind it, or leaves when the delay passes; NAKs, READ responses
//! and atomic ACKs never wait.

use super::*;
use crate::transport::types::WcStatus;
use core::time::Duration;

const DELAY: Duration = Duration::from_micros(20);

fn delayed_pair() -> Pair {
    let mut p = Pair::new();
    for side in [A, B] {
        p.s[side].qp.set_ack_delay(DELAY);
    }
    p
}

#[test]
fn ping_pong_ack_leaves_with_the_answer_in_one_burst() {
    let mut p = delayed_pair();
    let a = p.region(A, 8, 1);
    let b = p.region(B, 8, 2);
    // A: RDMA WRITE 8 B to B.
    p.post_send(
        A,
        wr(
            1,
            SendOp::Write {
                remote_addr: b.addr,
                rkey: b.rkey,
            },
            vec![sge(&a, 0, 8)],
        ),
    );
    let ping = p.drain(A);
    assert_eq!(ping.len(), 1);
    assert_eq!(ping[0].op(), Opcode::RC_WRITE_ONLY);
    p.deliver(&ping[0]);
    // B executed it; its ACK is held (nothing on the wire yet), with the delay armed.
    assert_eq!(p.bytes(B, &b), p.bytes(A, &a));
    assert!(p.drain(B).is_empty(), "a lone ACK waits");
    assert_eq!(p.s[B].qp.poll_timeout(), Some(p.now + DELAY));
    // B answers: WRITE back; the held ACK follows it in the same poll (one burst).
    p.post_send(
        B,
        wr(
            2,
            SendOp::Write {
                remote_addr: a.addr,
                rkey: a.rkey,
            },
            vec![sge(&b, 0, 8)],
        ),
    );
    let pong = p.drain(B);
    let ops: Vec<Opcode> = pong.iter().map(Pkt::op).collect();
    assert_eq!(ops, [Opcode::RC_WRITE_ONLY, Opcode::RC_ACK]);
    assert_eq!(
        pong[1].psn(),
        ping[0].psn(),
        "the ACK acknowledges the ping"
    );
    assert_eq!(
        p.s[B].qp.poll_timeout().filter(|&t| t == p.now + DELAY),
        None
    );
    for pkt in &pong {
        p.deliver(pkt);
    }
    let ca = p.completions(A);
    assert_eq!(ca.len(), 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (1, WcStatus::Success));
}

#[test]
fn lone_ack_leaves_when_the_delay_passes() {
    let mut p = delayed_pair();
    let a = p.region(A, 8, 1);
    let b = p.region(B, 8, 2);
    p.post_send(
        A,
        wr(
            1,
            SendOp::Write {
                remote_addr: b.addr,
                rkey: b.rkey,
            },
            vec![sge(&a, 0, 8)],
        ),
    );
    let ping = p.drain(A);
    p.deliver(&ping[0]);
    assert!(p.drain(B).is_empty());
    // Just before the deadline: still held.
    p.now += DELAY - Duration::from_nanos(1);
    p.s[B].qp.handle_timeout(p.now);
    assert!(p.drain(B).is_empty());
    // At the deadline: the ACK leaves alone, and no timer is left armed on B.
    p.now += Duration::from_nanos(1);
    p.s[B].qp.handle_timeout(p.now);
    let ack = p.drain(B);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].op(), Opcode::RC_ACK);
    assert_eq!(p.s[B].qp.poll_timeout(), None);
    p.deliver(&ack[0]);
    assert_eq!(p.completions(A).len(), 1);
}

#[test]
fn naks_and_read_responses_are_never_held() {
    let mut p = delayed_pair();
    let a = p.zeroed(A, 64);
    let b = p.region(B, 64, 3);
    // A READ is answered at once (the response carries the ACK).
    p.post_send(
        A,
        wr(
            1,
            SendOp::Read {
                remote_addr: b.addr,
                rkey: b.rkey,
            },
            vec![sge(&a, 0, 64)],
        ),
    );
    let req = p.drain(A);
    p.deliver(&req[0]);
    let resp = p.drain(B);
    assert_eq!(resp.len(), 1);
    assert_eq!(resp[0].op(), Opcode::RC_READ_RESPONSE_ONLY);
    p.deliver(&resp[0]);
    assert_eq!(p.bytes(A, &a), p.bytes(B, &b));
    // A WRITE with a bad R_Key: the NAK leaves at once.
    p.post_send(
        A,
        wr(
            2,
            SendOp::Write {
                remote_addr: b.addr,
                rkey: b.rkey ^ 0x100,
            },
            vec![sge(&a, 0, 8)],
        ),
    );
    let bad = p.drain(A);
    p.deliver(&bad[0]);
    let nak = p.drain(B);
    assert_eq!(nak.len(), 1);
    assert_eq!(nak[0].op(), Opcode::RC_ACK);
    assert!(matches!(nak[0].syndrome(), Some(Syndrome::Nak(_))));
}

#[test]
fn coalesced_acks_keep_the_first_deadline() {
    let mut p = delayed_pair();
    let a = p.region(A, 8, 1);
    let b = p.region(B, 8, 2);
    let first_at = p.now;
    for i in 0..3u64 {
        p.post_send(
            A,
            wr(
                i,
                SendOp::Write {
                    remote_addr: b.addr,
                    rkey: b.rkey,
                },
                vec![sge(&a, 0, 8)],
            ),
        );
        for pkt in p.drain(A) {
            p.deliver(&pkt);
        }
        p.now += Duration::from_micros(5);
    }
    // One ACK covering all three, due DELAY after the first.
    assert_eq!(p.s[B].qp.poll_timeout(), Some(first_at + DELAY));
    p.now = first_at + DELAY;
    p.s[B].qp.handle_timeout(p.now);
    let acks = p.drain(B);
    assert_eq!(acks.len(), 1);
    assert_eq!(acks[0].psn(), 102, "the last PSN of the three writes");
    p.deliver(&acks[0]);
    assert_eq!(p.completions(A).len(), 3);
}

#[test]
fn every_operation_completes_under_loss_with_the_delay() {
    let mut p = delayed_pair();
    p.chaos = Some(Chaos {
        rng: rand::SeedableRng::seed_from_u64(0xACDE1A7),
        loss: 0.05,
        dup: 0.02,
        reorder: 0.05,
    });
    let src = p.region(A, 1 << 16, 9);
    let dst = p.zeroed(B, 1 << 16);
    for i in 0..20u64 {
        p.post_recv(B, 100 + i, vec![sge(&dst, 0, 1 << 16)]);
    }
    for i in 0..20u64 {
        let op = if i % 2 == 0 {
            SendOp::Send
        } else {
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            }
        };
        p.post_send(A, wr(i, op, vec![sge(&src, 0, 3000 + i as u32 * 100)]));
    }
    p.run();
    let ca = p.completions(A);
    assert_eq!(ca.len(), 20);
    assert!(ca.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(p.completions(B).len(), 10);
}

#[test]
fn ack_queued_behind_a_read_response_leaves_right_after_it() {
    let mut p = delayed_pair();
    let a = p.zeroed(A, 64);
    let b = p.region(B, 64, 3);
    // A: a READ, then a WRITE, both on the wire before B answers either.
    p.post_send(
        A,
        wr(
            1,
            SendOp::Read {
                remote_addr: b.addr,
                rkey: b.rkey,
            },
            vec![sge(&a, 0, 64)],
        ),
    );
    p.post_send(
        A,
        wr(
            2,
            SendOp::Write {
                remote_addr: b.addr + 32,
                rkey: b.rkey,
            },
            vec![sge(&a, 0, 8)],
        ),
    );
    let reqs = p.drain(A);
    assert_eq!(reqs.len(), 2);
    for r in &reqs {
        p.deliver(r);
    }
    // B: the READ response, then the WRITE's ACK, at once (no timer is needed to free it).
    let out = p.drain(B);
    let ops: Vec<Opcode> = out.iter().map(Pkt::op).collect();
    assert_eq!(ops, [Opcode::RC_READ_RESPONSE_ONLY, Opcode::RC_ACK]);
    assert_eq!(p.s[B].qp.poll_timeout(), None, "nothing left waiting on B");
    for r in &out {
        p.deliver(r);
    }
    assert_eq!(p.completions(A).len(), 2);
}

/// A disconnect (modify to ERROR) right after a message arrived: the held ACK still leaves,
/// so the peer completes its send successfully instead of flushing it when it tears down.
#[test]
fn held_ack_leaves_when_the_qp_is_moved_to_error() {
    let mut p = delayed_pair();
    let a = p.region(A, 8, 1);
    let b = p.region(B, 8, 2);
    p.post_send(
        A,
        wr(
            1,
            SendOp::Write {
                remote_addr: b.addr,
                rkey: b.rkey,
            },
            vec![sge(&a, 0, 8)],
        ),
    );
    let ping = p.drain(A);
    p.deliver(&ping[0]);
    assert!(p.drain(B).is_empty(), "a lone ACK waits");
    let now = p.now;
    p.s[B]
        .qp
        .modify(now, QpState::Error, &QpAttr::default())
        .unwrap();
    let out = p.drain(B);
    let ops: Vec<Opcode> = out.iter().map(Pkt::op).collect();
    assert_eq!(ops, [Opcode::RC_ACK], "the held ACK leaves after ERROR");
    assert_eq!(out[0].psn(), ping[0].psn());
    // Moving to ERROR again changes nothing (and sends nothing twice).
    p.s[B]
        .qp
        .modify(now, QpState::Error, &QpAttr::default())
        .unwrap();
    assert!(p.drain(B).is_empty());
    p.deliver(&out[0]);
    let ca = p.completions(A);
    assert_eq!(ca.len(), 1);
    assert_eq!((ca[0].wr_id, ca[0].status), (1, WcStatus::Success));
}

/// A disconnect after the ACK of the peer's last request was sent and lost: the ACK of the
/// last executed PSN leaves once more, so the peer completes its send instead of flushing it
/// (dapltest's quit command under loss: its SEND was delivered, the server quit, the client
/// flushed it). A QP that executed nothing sends nothing.
#[test]
fn the_last_ack_is_repeated_when_the_qp_is_moved_to_error() {
    let mut p = Pair::new();
    let now = p.now;
    // Nothing executed yet: a disconnect sends nothing.
    let mut idle = Pair::new();
    idle.s[B]
        .qp
        .modify(now, QpState::Error, &QpAttr::default())
        .unwrap();
    assert!(idle.drain(B).is_empty());
    let a = p.region(A, 8, 1);
    let b = p.region(B, 8, 2);
    for id in [1, 2] {
        p.post_send(
            A,
            wr(
                id,
                SendOp::Write {
                    remote_addr: b.addr,
                    rkey: b.rkey,
                },
                vec![sge(&a, 0, 8)],
            ),
        );
    }
    let writes = p.drain(A);
    assert_eq!(writes.len(), 2);
    for w in &writes {
        p.deliver(w);
    }
    let lost = p.drain(B);
    assert_eq!(
        lost.iter().map(Pkt::op).collect::<Vec<_>>(),
        [Opcode::RC_ACK]
    );
    // The ACK is lost; B's consumer disconnects.
    p.s[B]
        .qp
        .modify(now, QpState::Error, &QpAttr::default())
        .unwrap();
    let out = p.drain(B);
    assert_eq!(
        out.iter().map(Pkt::op).collect::<Vec<_>>(),
        [Opcode::RC_ACK]
    );
    assert_eq!(out[0].psn(), writes[1].psn(), "the last executed PSN");
    p.deliver(&out[0]);
    let ca = p.completions(A);
    let got = statuses(&ca);
    assert_eq!(got, [(1, WcStatus::Success), (2, WcStatus::Success)]);
}
