//! When the requester asks for ACKs (IBTA vol. 1 §9.7.4.1.4): on the last packet of a signaled
//! message, every `ACK_REQ_EVERY` packets, when the send queue or window fills, on resending its
//! last packet; and, idle with unrequested packets outstanding, once more by an ACK probe after
//! `ACK_PROBE_DELAY`. Unsignaled messages otherwise go out without AckReq and draw no ACK frame.

use super::*;
use crate::transport::requester::{ACK_PROBE_DELAY, ACK_REQ_EVERY};
use crate::transport::types::WcStatus;
use core::time::Duration;

fn write(id: u64, from: &Region, to: &Region, signaled: bool) -> SendWr {
    let mut w = wr(
        id,
        SendOp::Write {
            remote_addr: to.addr,
            rkey: to.rkey,
        },
        vec![sge(from, 0, from.len as u32)],
    );
    w.signaled = signaled;
    w
}

fn ack_reqs(pkts: &[Pkt]) -> Vec<bool> {
    pkts.iter().map(|p| p.headers.bth.ack_req).collect()
}

/// Delivers A's `reqs` to B and returns B's answer: exactly one ACK.
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
fn unsignaled_writes_ask_every_sixteenth_packet() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    let n = ACK_REQ_EVERY as usize + 4;
    for i in 0..n {
        p.post_send(A, write(i as u64, &a, &b, false));
    }
    let reqs = p.drain(A);
    assert_eq!(reqs.len(), n);
    let want: Vec<bool> = (0..n).map(|i| i + 1 == ACK_REQ_EVERY as usize).collect();
    assert_eq!(ack_reqs(&reqs), want);
    // B answers the one request with one ACK, for PSN 100 + 15.
    let ack = one_ack_for(&mut p, &reqs);
    assert_eq!(p.bytes(B, &b), p.bytes(A, &a));
    assert_eq!(ack.psn(), 100 + ACK_REQ_EVERY - 1);
    p.deliver(&ack);
    assert!(
        p.completions(A).is_empty(),
        "unsignaled WRITEs complete silently"
    );
    // Four are still unacknowledged: the probe is armed for them.
    assert_eq!(p.s[A].qp.poll_timeout(), Some(p.now + ACK_PROBE_DELAY));
}

#[test]
fn idle_requester_probes_with_its_last_packet() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    let original = p.bytes(A, &a);
    p.post_send(A, write(1, &a, &b, false));
    let ping = p.drain(A);
    assert_eq!(ack_reqs(&ping), [false]);
    assert!(!p.s[A].qp.has_output(), "everything posted is sent");
    p.deliver(&ping[0]);
    assert_eq!(p.bytes(B, &b), original);
    assert!(
        !p.s[B].qp.has_output(),
        "B owes nothing for an unrequested WRITE"
    );
    assert!(p.drain(B).is_empty(), "no AckReq, no ACK");
    // A changes its source buffer; the probe resends what is there now.
    p.s[A].mem.bytes_mut(a.lkey).unwrap().fill(0xee);
    // Nothing happens before the probe delay...
    assert_eq!(p.s[A].qp.poll_timeout(), Some(p.now + ACK_PROBE_DELAY));
    p.now += ACK_PROBE_DELAY - Duration::from_nanos(1);
    p.s[A].qp.handle_timeout(p.now);
    assert!(p.drain(A).is_empty());
    // ...then the last packet goes again, same PSN, with AckReq.
    p.now += Duration::from_nanos(1);
    p.s[A].qp.handle_timeout(p.now);
    let probe = p.drain(A);
    assert_eq!(probe.len(), 1);
    assert_eq!(probe[0].op(), Opcode::RC_WRITE_ONLY);
    assert_eq!(probe[0].psn(), ping[0].psn());
    assert_eq!(ack_reqs(&probe), [true]);
    p.deliver(&probe[0]);
    assert!(p.s[B].qp.has_output(), "B owes the ACK now");
    // B sees a duplicate: ACKed, not executed again.
    assert_eq!(p.s[B].qp.stats().duplicates, 1);
    assert_eq!(p.bytes(B, &b), original);
    let ack = p.drain(B);
    assert_eq!(ack.len(), 1);
    assert_eq!(ack[0].psn(), ping[0].psn());
    p.deliver(&ack[0]);
    // A is done: nothing outstanding, no timer, no completion.
    assert_eq!(p.s[A].qp.poll_timeout(), None);
    assert!(p.completions(A).is_empty());
    assert_eq!(p.s[A].qp.stats().retransmits, 1);
}

#[test]
fn a_signaled_write_asks_and_retires_the_unsignaled_before_it() {
    let mut p = Pair::new();
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    p.post_send(A, write(1, &a, &b, false));
    p.post_send(A, write(2, &a, &b, false));
    p.post_send(A, write(3, &a, &b, true));
    let reqs = p.drain(A);
    assert_eq!(ack_reqs(&reqs), [false, false, true]);
    let ack = one_ack_for(&mut p, &reqs);
    assert_eq!(ack.psn(), 102);
    p.deliver(&ack);
    let wc = p.completions(A);
    assert_eq!(wc.len(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (3, WcStatus::Success));
    assert_eq!(
        p.s[A].qp.poll_timeout(),
        None,
        "no probe, no ACK timer left"
    );
}

#[test]
fn a_half_full_send_queue_asks() {
    let mut ca = config(0x11);
    ca.sq_depth = 8;
    let mut p = Pair::with_configs(|_, _| {}, 100, 5000, ca, config(0x22));
    let a = p.region(A, 8, 1);
    let b = p.zeroed(B, 8);
    for i in 0..6 {
        p.post_send(A, write(i, &a, &b, false));
    }
    // The fourth WQE fills half the queue: it and the ones behind it ask.
    let reqs = p.drain(A);
    assert_eq!(ack_reqs(&reqs), [false, false, false, true, true, true]);
    for r in &reqs {
        p.deliver(r);
    }
    p.run();
    assert_eq!(p.s[A].qp.poll_timeout(), None);
    assert_eq!(p.bytes(B, &b), p.bytes(A, &a));
}

#[test]
fn a_lost_unsignaled_write_is_resent_and_the_resend_asks() {
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
    assert_eq!(ack_reqs(&reqs), [false, false, false]);
    // PSN 101 is lost; 102 arrives out of sequence and draws a NAK (always sent).
    p.deliver(&reqs[0]);
    p.deliver(&reqs[2]);
    let nak = p.drain(B);
    assert_eq!(nak.len(), 1);
    assert!(nak[0].is_seq_nak());
    assert_eq!(nak[0].psn(), 101);
    p.deliver(&nak[0]);
    // Go-back-N from 101: the resend of the last packet sent (102) asks for the ACK.
    let again = p.drain(A);
    assert_eq!(again.iter().map(Pkt::psn).collect::<Vec<_>>(), [101, 102]);
    assert_eq!(ack_reqs(&again), [false, true]);
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
