//! The default ACK policy (docs/DESIGN.md "Acknowledgements and completions"): the responder
//! coalesces ACKs only over what has already arrived and never holds one for a later request, so
//! a lone WRITE or SEND completes after one round trip of the wire with no timer firing.

use super::*;
use crate::transport::types::WcStatus;

/// One round trip: A's requests cross to B, B's answers cross back, no `handle_timeout` call.
fn one_round_trip(p: &mut Pair) -> (Vec<Pkt>, Vec<Pkt>) {
    let out = p.drain(A);
    for pkt in &out {
        p.deliver(pkt);
    }
    let back = p.drain(B);
    for pkt in &back {
        p.deliver(pkt);
    }
    (out, back)
}

#[test]
fn a_lone_write_completes_after_one_round_trip() {
    let mut p = Pair::new();
    let a = p.region(A, 64, 1);
    let b = p.zeroed(B, 64);
    let w = SendOp::Write {
        remote_addr: b.addr,
        rkey: b.rkey,
    };
    p.post_send(A, wr(7, w, vec![sge(&a, 0, 64)]));
    let start = p.now;
    let (out, back) = one_round_trip(&mut p);
    assert_eq!(
        out.iter().map(Pkt::op).collect::<Vec<_>>(),
        [Opcode::RC_WRITE_ONLY]
    );
    assert_eq!(
        back.iter().map(Pkt::op).collect::<Vec<_>>(),
        [Opcode::RC_ACK]
    );
    let wc = p.completions(A);
    assert_eq!(
        (wc.len(), wc[0].wr_id, wc[0].status),
        (1, 7, WcStatus::Success)
    );
    assert_eq!(p.now, start, "no time passed: no timer fired");
    assert_eq!(p.bytes(B, &b), p.bytes(A, &a));
    for side in [A, B] {
        assert_eq!(
            p.s[side].qp.poll_timeout(),
            None,
            "side {side} left a timer armed"
        );
    }
}

#[test]
fn a_lone_send_completes_on_both_sides_after_one_round_trip() {
    let mut p = Pair::new();
    let a = p.region(A, 3000, 4);
    let b = p.zeroed(B, 4096);
    p.post_recv(B, 9, vec![sge(&b, 0, 4096)]);
    p.post_send(A, wr(8, SendOp::Send, vec![sge(&a, 0, 3000)]));
    let (out, back) = one_round_trip(&mut p);
    assert_eq!(out.len(), 3, "three MTU packets");
    assert_eq!(back.len(), 1, "one ACK for the burst");
    let wa = p.completions(A);
    let wb = p.completions(B);
    assert_eq!(
        (wa.len(), wa[0].wr_id, wa[0].status),
        (1, 8, WcStatus::Success)
    );
    assert_eq!((wb.len(), wb[0].wr_id, wb[0].byte_len), (1, 9, 3000));
    assert_eq!(p.bytes(B, &b)[..3000], p.bytes(A, &a)[..]);
}

#[test]
fn a_burst_of_writes_draws_one_ack_a_split_burst_two() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    let w = SendOp::Write {
        remote_addr: b.addr,
        rkey: b.rkey,
    };
    for i in 0..32 {
        p.post_send(A, wr(i, w, vec![sge(&a, 0, 8)]));
    }
    let reqs = p.drain(A);
    // The first 20 arrive in one receive burst, the other 12 in the next.
    for r in &reqs[..20] {
        p.deliver(r);
    }
    let first = p.drain(B);
    for r in &reqs[20..] {
        p.deliver(r);
    }
    let second = p.drain(B);
    assert_eq!(first.len(), 1);
    assert_eq!(second.len(), 1);
    assert_eq!((first[0].psn(), second[0].psn()), (119, 131));
    p.deliver(&first[0]);
    p.deliver(&second[0]);
    assert_eq!(p.completions(A).len(), 32);
}
