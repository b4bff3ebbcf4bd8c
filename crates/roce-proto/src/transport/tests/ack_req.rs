//! When the requester asks for ACKs (IBTA vol. 1 §9.7.4.1.4): on the last packet of every
//! message, signaled or not; every `ACK_REQ_EVERY` packets of a long message; when the send
//! queue or window fills; on resending its last packet. The responder answers a burst of
//! requests with one ACK, and nothing ever waits for a timer to be acknowledged. The packet
//! that ends the oldest signaled WR in flight is marked awaited (`Qp::take_awaited`): its
//! sender does not hold it behind the rest of a burst.

use super::*;
use crate::transport::types::WcStatus;
use crate::transport::ACK_REQ_EVERY;

fn write(id: u64, from: &Region, to: &Region, signaled: bool) -> SendWr {
    let mut w = write_all(id, from, to);
    w.signaled = signaled;
    w
}

fn ack_reqs(pkts: &[Pkt]) -> Vec<bool> {
    pkts.iter().map(|p| p.headers.bth.ack_req).collect()
}

/// Delivers A's `reqs` to B as one burst and returns B's answer: exactly one ACK.
fn one_ack_for(p: &mut Pair, reqs: &[Pkt]) -> Pkt {
    for r in reqs {
        p.deliver(r);
    }
    let mut acks = p.drain(B);
    assert_eq!(acks.len(), 1, "{acks:?}");
    assert_eq!(acks[0].op(), Opcode::RC_ACK);
    acks.remove(0)
}

#[test]
fn every_message_asks_on_its_last_packet_and_a_burst_draws_one_ack() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    let n = ACK_REQ_EVERY as usize + 4;
    for i in 0..n {
        p.post_send(A, write(i as u64, &a, &b, false));
    }
    let reqs = p.drain(A);
    assert_eq!(reqs.len(), n);
    assert_eq!(ack_reqs(&reqs), vec![true; n]);
    // B answers the whole burst with one ACK, for its last PSN.
    let ack = one_ack_for(&mut p, &reqs);
    assert_eq!(p.bytes(B, &b), p.bytes(A, &a));
    assert_eq!(ack.psn(), 100 + n as u32 - 1);
    p.deliver(&ack);
    assert!(
        p.completions(A).is_empty(),
        "unsignaled WRITEs complete silently"
    );
    assert_eq!(p.s[A].qp.poll_timeout(), None, "all retired, no timer left");
}

#[test]
fn a_lone_unsignaled_write_is_retired_in_one_round_trip() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    p.post_send(A, write(1, &a, &b, false));
    let ping = p.drain(A);
    assert_eq!(ack_reqs(&ping), [true]);
    let ack = one_ack_for(&mut p, &ping);
    assert_eq!(ack.psn(), ping[0].psn());
    assert_eq!(p.s[B].qp.poll_timeout(), None, "B holds nothing back");
    p.deliver(&ack);
    assert_eq!(p.s[A].qp.poll_timeout(), None);
    assert!(p.completions(A).is_empty());
    assert_eq!(p.s[A].qp.stats().retransmits, 0);
}

#[test]
fn a_long_message_asks_every_sixteenth_packet_and_on_its_last() {
    let mut p = Pair::new();
    let n = ACK_REQ_EVERY as usize + 4;
    // Path MTU 1024 (`attr`): one packet per KiB.
    let a = p.region(A, 1024 * n, 1);
    let b = p.zeroed(B, 1024 * n);
    p.post_send(A, write(1, &a, &b, true));
    let reqs = p.drain(A);
    assert_eq!(reqs.len(), n);
    let want: Vec<bool> = (0..n)
        .map(|i| i + 1 == ACK_REQ_EVERY as usize || i + 1 == n)
        .collect();
    assert_eq!(ack_reqs(&reqs), want);
    let ack = one_ack_for(&mut p, &reqs);
    assert_eq!(ack.psn(), 100 + n as u32 - 1);
    p.deliver(&ack);
    let wc = p.completions(A);
    assert_eq!((wc.len(), wc[0].status), (1, WcStatus::Success));
    assert_eq!(p.bytes(B, &b), p.bytes(A, &a));
}

#[test]
fn a_half_full_send_queue_asks_on_every_packet() {
    let mut ca = config(0x11);
    ca.sq_depth = 8;
    let mut p = Pair::with_configs(|_, _| {}, 100, 5000, ca, config(0x22));
    // Two packets per WRITE: the first packet asks only once the queue is half full.
    let a = p.region(A, 2048, 1);
    let b = p.zeroed(B, 2048);
    for i in 0..6 {
        p.post_send(A, write(i, &a, &b, false));
    }
    let reqs = p.drain(A);
    let firsts: Vec<bool> = reqs
        .iter()
        .step_by(2)
        .map(|r| r.headers.bth.ack_req)
        .collect();
    let lasts: Vec<bool> = reqs
        .iter()
        .skip(1)
        .step_by(2)
        .map(|r| r.headers.bth.ack_req)
        .collect();
    // The fourth WQE fills half the queue: it and the ones behind it ask on every packet.
    assert_eq!(firsts, [false, false, false, true, true, true]);
    assert_eq!(lasts, [true; 6]);
    for r in &reqs {
        p.deliver(r);
    }
    p.run();
    assert_eq!(p.s[A].qp.poll_timeout(), None);
    assert_eq!(p.bytes(B, &b), p.bytes(A, &a));
}

#[test]
fn a_lost_write_is_resent_from_the_nak() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 24);
    let part = |i: u64| Region {
        addr: b.addr + 8 * i,
        len: 8,
        ..b
    };
    for i in 0..3 {
        p.post_send(A, write(i, &a, &part(i), false));
    }
    let reqs = p.drain(A);
    assert_eq!(ack_reqs(&reqs), [true, true, true]);
    // PSN 101 is lost; 100 is ACKed, 102 arrives out of sequence and draws a NAK; the two
    // leave in the burst's order.
    p.deliver(&reqs[0]);
    p.deliver(&reqs[2]);
    let answers = p.drain(B);
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert_eq!(answers[0].op(), Opcode::RC_ACK);
    assert_eq!(answers[0].psn(), 100);
    assert!(answers[1].is_seq_nak());
    assert_eq!(answers[1].psn(), 101);
    for a in &answers {
        p.deliver(a);
    }
    // Go-back-N from 101.
    let again = p.drain(A);
    assert_eq!(again.iter().map(Pkt::psn).collect::<Vec<_>>(), [101, 102]);
    assert_eq!(ack_reqs(&again), [true, true]);
    let ack = one_ack_for(&mut p, &again);
    assert_eq!(ack.psn(), 102);
    p.deliver(&ack);
    assert_eq!(p.s[A].qp.poll_timeout(), None);
    let whole = p.bytes(B, &b);
    let src = p.bytes(A, &a);
    for i in 0..3 {
        assert_eq!(&whole[8 * i..8 * i + 8], &src[..], "WRITE {i} landed");
    }
}

/// Which of A's next `n` packets end the WR whose completion A's consumer waits for
/// (`Qp::take_awaited`, read after each one).
fn awaited_flags(p: &mut Pair, n: usize) -> Vec<bool> {
    (0..n)
        .map(|_| {
            p.drain_one(A);
            p.s[A].qp.take_awaited()
        })
        .collect()
}

#[test]
fn the_packet_of_the_oldest_signaled_wr_in_flight_is_awaited() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    // u u u S u S: the first signaled WR is awaited, the second waits behind it.
    for (i, s) in [false, false, false, true, false, true]
        .into_iter()
        .enumerate()
    {
        p.post_send(A, write(i as u64, &a, &b, s));
    }
    assert_eq!(
        awaited_flags(&mut p, 6),
        [false, false, false, true, false, false]
    );
    assert!(!p.s[A].qp.take_awaited(), "read once");
    // B's ACK covers all six: the next signaled WR is awaited again.
    p.run();
    assert_eq!(p.completions(A).len(), 2);
    p.post_send(A, write(6, &a, &b, false));
    p.post_send(A, write(7, &a, &b, true));
    assert_eq!(awaited_flags(&mut p, 2), [false, true]);
}

#[test]
fn with_sig_all_only_a_wr_with_nothing_older_in_flight_is_awaited() {
    let mut ca = config(0x11);
    ca.sig_all = true;
    let mut p = Pair::with_configs(|_, _| {}, 1, 2, ca, config(0x22));
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    for i in 0..3 {
        p.post_send(A, write(i, &a, &b, false));
    }
    assert_eq!(awaited_flags(&mut p, 3), [true, false, false]);
}

#[test]
fn a_resent_awaited_wr_is_awaited_again() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    p.post_send(A, write(1, &a, &b, true));
    assert_eq!(awaited_flags(&mut p, 1), [true]);
    // Lost: the local ACK timer resends it, and its resend is what the consumer waits for.
    let t = p.s[A].qp.poll_timeout().expect("the ACK timer");
    p.s[A].qp.handle_timeout(t);
    let again = p.drain(A);
    assert_eq!(again.len(), 1);
    assert!(p.s[A].qp.take_awaited());
    assert_eq!(p.s[A].qp.stats().retransmits, 1);
}
