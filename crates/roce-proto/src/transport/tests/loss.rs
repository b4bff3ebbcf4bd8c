//! Loss, duplication, reordering: go-back-N, timeouts, duplicates, RNR.

use std::cell::Cell;
use std::rc::Rc;

use super::*;
use crate::transport::types::{WcOpcode, WcStatus};

/// Drops the first packet matching `pred`, passes everything else.
fn drop_once(pred: impl Fn(&Pkt) -> bool + 'static) -> impl FnMut(&Pkt) -> Fate {
    let mut done = false;
    move |p| {
        if !done && pred(p) {
            done = true;
            Fate::Drop
        } else {
            Fate::Pass
        }
    }
}

#[test]
fn dropped_middle_packet_one_seq_nak_go_back_n() {
    let mut p = Pair::new();
    let len = 8 * MTU;
    let src = p.region(A, len, 1);
    let dst = p.zeroed(B, len);
    p.post_recv(B, 1, vec![sge(&dst, 0, len as u32)]);
    p.post_send(A, wr(7, SendOp::Send, vec![sge(&src, 0, len as u32)]));
    // A -> B: SEND first 100, middle 101, [middle 102 lost], 103..107 out of sequence.
    p.filter(drop_once(|x| x.from == A && x.psn() == 102));
    p.run();
    // B -> A: exactly one PSN sequence error NAK, naming 102.
    let naks: Vec<u32> = p
        .trace
        .iter()
        .filter(|x| x.from == B && x.is_seq_nak())
        .map(|x| x.psn())
        .collect();
    assert_eq!(naks, vec![102]);
    // A resends 102..107 (go-back-N), each once.
    let psns: Vec<u32> = p
        .trace
        .iter()
        .filter(|x| x.from == A)
        .map(|x| x.psn())
        .collect();
    assert_eq!(
        psns,
        vec![100, 101, 102, 103, 104, 105, 106, 107, 102, 103, 104, 105, 106, 107]
    );
    assert_eq!(p.s[A].qp.stats().retransmits, 6);
    assert_eq!(p.s[A].qp.stats().seq_naks_received, 1);
    assert_eq!(p.s[B].qp.stats().seq_naks_sent, 1);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    let ca = p.completions(A);
    assert_eq!(statuses(&ca), vec![(7, WcStatus::Success)]);
    let cb = p.completions(B);
    assert_eq!(
        cb.iter().map(|c| (c.wr_id, c.byte_len)).collect::<Vec<_>>(),
        vec![(1, len as u32)]
    );
}

#[test]
fn dropped_ack_timeout_duplicate_reacked_not_reexecuted() {
    let mut p = Pair::new();
    let counter = p.zeroed(B, 8);
    let local = p.zeroed(A, 16);
    let src = p.region(A, 16, 3);
    let dst = p.zeroed(B, 16);
    p.post_recv(B, 1, vec![sge(&dst, 0, 16)]);
    p.post_send(
        A,
        wr(
            1,
            SendOp::FetchAdd {
                remote_addr: counter.addr,
                rkey: counter.rkey,
                add: 1,
            },
            vec![sge(&local, 0, 8)],
        ),
    );
    p.post_send(A, wr(2, SendOp::Send, vec![sge(&src, 0, 16)]));
    // B -> A: the atomic ACK and the ACK of the SEND are lost once each.
    p.filter({
        let mut lost = 0;
        move |x| {
            if x.from == B && lost < 2 {
                lost += 1;
                Fate::Drop
            } else {
                Fate::Pass
            }
        }
    });
    p.run();
    let st = *p.s[A].qp.stats();
    assert!(st.timeouts >= 1, "A timed out");
    assert!(st.retransmits >= 2, "both requests resent");
    assert!(
        p.s[B].qp.stats().duplicates >= 2,
        "B saw both as duplicates"
    );
    // FAA executed exactly once; the duplicate was answered from the saved value.
    assert_eq!(
        u64::from_ne_bytes(p.bytes(B, &counter)[..8].try_into().unwrap()),
        1
    );
    assert_eq!(
        u64::from_ne_bytes(p.bytes(A, &local)[..8].try_into().unwrap()),
        0
    );
    // The SEND was not delivered twice: one receive completion.
    let cb = p.completions(B);
    assert_eq!(cb.len(), 1);
    let ca = p.completions(A);
    assert_eq!(
        statuses(&ca),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn lost_read_response_reexecutes_read_for_the_rest() {
    let mut p = Pair::new();
    let remote = p.region(B, 3 * MTU, 8);
    let local = p.zeroed(A, 3 * MTU);
    p.post_send(
        A,
        wr(
            1,
            SendOp::Read {
                remote_addr: remote.addr,
                rkey: remote.rkey,
            },
            vec![sge(&local, 0, 3 * MTU as u32)],
        ),
    );
    // B -> A: READ response first 100, [middle 101 lost], last 102.
    p.filter(drop_once(|x| {
        x.from == B && x.op() == Opcode::RC_READ_RESPONSE_MIDDLE
    }));
    p.run();
    let reqs: Vec<&Pkt> = p.trace.iter().filter(|x| x.from == A).collect();
    assert_eq!(reqs.len(), 2);
    // The second READ request asks for the remaining two MTUs at PSN 101.
    assert_eq!(reqs[1].psn(), 101);
    let reth = reqs[1].headers.reth.unwrap();
    assert_eq!(
        (reth.va, reth.dma_len),
        (remote.addr + MTU as u64, 2 * MTU as u32)
    );
    assert_eq!(
        p.s[B].qp.stats().duplicates,
        1,
        "B re-executed a duplicate READ"
    );
    assert_eq!(p.bytes(A, &local), p.bytes(B, &remote));
    let ca = p.completions(A);
    assert_eq!(
        ca.iter()
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect::<Vec<_>>(),
        vec![(1, WcStatus::Success, WcOpcode::RdmaRead)]
    );
}

/// The PSNs of `pkts`, in order.
fn psns(pkts: &[Pkt]) -> Vec<u32> {
    pkts.iter().map(|x| x.psn()).collect()
}

/// A READ of `mtus` path MTUs from B's region into A's, posted on A: the two regions.
fn read_of(p: &mut Pair, mtus: usize) -> (Region, Region) {
    let remote = p.region(B, mtus * MTU, 8);
    let local = p.zeroed(A, mtus * MTU);
    let op = SendOp::Read {
        remote_addr: remote.addr,
        rkey: remote.rkey,
    };
    p.post_send(A, wr(1, op, vec![sge(&local, 0, (mtus * MTU) as u32)]));
    (remote, local)
}

#[test]
fn duplicate_read_request_after_its_response_left_is_executed_again() {
    let mut p = Pair::new();
    let (remote, local) = read_of(&mut p, 1);
    // A -> B: READ 100; B -> A: response 100; the request arrives again: B answers again.
    let req = p.drain(A);
    p.deliver(&req[0]);
    let first = p.drain(B);
    p.deliver(&req[0]);
    let again = p.drain(B);
    assert_eq!(first.len(), 1);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].op(), Opcode::RC_READ_RESPONSE_ONLY);
    assert_eq!(again[0].psn(), 100);
    for r in first.iter().chain(&again) {
        p.deliver(r);
    }
    assert_eq!(p.s[A].qp.stats().duplicate_responses, 1);
    assert_eq!(p.bytes(A, &local), p.bytes(B, &remote));
    assert_eq!(p.completions(A).len(), 1);
}

/// A requester that probes or times out again and again while its READ's response is still
/// on its way (a slow or lossy link) sends the request each time; the responder answers it
/// once from there, instead of queueing another whole copy per request.
#[test]
fn duplicate_read_requests_while_its_response_is_queued_restart_it() {
    let mut p = Pair::new();
    let (remote, local) = read_of(&mut p, 4);
    // A -> B: READ 100 (4 packets); B -> A: response 100 [lost]; READ 100 twice more.
    let req = p.drain(A);
    p.deliver(&req[0]);
    assert!(p.s[B].qp.poll_transmit(p.now).is_some());
    p.deliver(&req[0]);
    p.deliver(&req[0]);
    // B -> A: one stream from 100, not 3 more packets plus two copies of 4.
    let resp = p.drain(B);
    assert_eq!(psns(&resp), vec![100, 101, 102, 103]);
    assert_eq!(p.s[B].qp.stats().duplicates, 2);
    for r in &resp {
        p.deliver(r);
    }
    p.run();
    assert_eq!(p.bytes(A, &local), p.bytes(B, &remote));
    assert_eq!(statuses(&p.completions(A)), vec![(1, WcStatus::Success)]);
}

/// Two READs of two packets each from B's region into A's (wr_ids 1 and 2, PSNs 100 and
/// 102), their requests taken from A and delivered to B: the regions and the requests.
fn two_reads(p: &mut Pair) -> (Region, Region, Vec<Pkt>) {
    let remote = p.region(B, 4 * MTU, 8);
    let local = p.zeroed(A, 4 * MTU);
    for (i, off) in [(1u64, 0u64), (2, 2 * MTU as u64)] {
        let op = SendOp::Read {
            remote_addr: remote.addr + off,
            rkey: remote.rkey,
        };
        p.post_send(A, wr(i, op, vec![sge(&local, off, 2 * MTU as u32)]));
    }
    let reqs = p.drain(A);
    assert_eq!(psns(&reqs), vec![100, 102]);
    p.deliver(&reqs[0]);
    p.deliver(&reqs[1]);
    (remote, local, reqs)
}

/// B -> A: 100 .. 103, once each and in order, all delivered.
fn both_answered_in_order(p: &mut Pair) {
    let resp = p.drain(B);
    assert_eq!(psns(&resp), vec![100, 101, 102, 103]);
    for r in &resp {
        p.deliver(r);
    }
}

/// Both READs done, their data in place, and no local ACK timeout spent on the way.
fn both_reads_done_without_a_timeout(p: &mut Pair, remote: &Region, local: &Region) {
    p.run();
    assert_eq!(p.bytes(A, local), p.bytes(B, remote));
    assert_eq!(
        statuses(&p.completions(A)),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(p.s[A].qp.stats().timeouts, 0);
}

/// Go-back-N over two READs whose responses were partly sent: the duplicate of the first
/// goes before what is still queued of the second, which starts again, so the two answers
/// leave in PSN order (a response of the second ahead of the first's would be out of
/// sequence and thrown away).
#[test]
fn a_duplicate_read_goes_before_the_responses_queued_after_it() {
    let mut p = Pair::new();
    let (remote, local, reqs) = two_reads(&mut p);
    // B -> A: 100, 101, 102 [all lost]; A goes back to 100 and asks for both again.
    for _ in 0..3 {
        assert!(p.s[B].qp.poll_transmit(p.now).is_some());
    }
    p.deliver(&reqs[0]);
    p.deliver(&reqs[1]);
    both_answered_in_order(&mut p);
    both_reads_done_without_a_timeout(&mut p, &remote, &local);
}

/// A go-back-N's two READ requests, the second delivered first by a reordering wire: B
/// answers both, in PSN order; the second READ does not wait out a timeout.
#[test]
fn go_back_n_read_requests_delivered_newest_first_are_both_answered_in_order() {
    let mut p = Pair::new();
    let (remote, local, reqs) = two_reads(&mut p);
    // B -> A: 100 .. 103 [all lost]; A asks again: READ 102, then READ 100.
    assert_eq!(psns(&p.drain(B)), vec![100, 101, 102, 103]);
    p.deliver(&reqs[1]);
    p.deliver(&reqs[0]);
    both_answered_in_order(&mut p);
    both_reads_done_without_a_timeout(&mut p, &remote, &local);
}

/// A stale copy of the first READ's request, delivered by the wire while the second's
/// response is on its way: B answers it again before the rest of the second, which still
/// comes whole; A drops what it already has.
#[test]
fn a_stale_duplicate_read_leaves_the_later_response_to_finish() {
    let mut p = Pair::new();
    let (remote, local, reqs) = two_reads(&mut p);
    // B -> A: 100, 101, 102 arrive; READ 1 completes.
    for _ in 0..3 {
        let r = p.drain_one(B);
        p.deliver(&r);
    }
    // A -> B: READ 100 again (the wire's copy).
    p.deliver(&reqs[0]);
    both_answered_in_order(&mut p);
    assert_eq!(p.s[A].qp.stats().duplicate_responses, 3);
    both_reads_done_without_a_timeout(&mut p, &remote, &local);
}

#[test]
fn duplicated_packets_execute_once() {
    let mut p = Pair::new();
    let src = p.region(A, 3 * MTU, 5);
    let dst = p.zeroed(B, 3 * MTU);
    let counter = p.zeroed(B, 8);
    let local = p.zeroed(A, 8);
    p.post_recv(B, 1, vec![sge(&dst, 0, 3 * MTU as u32)]);
    p.post_recv(B, 2, vec![]);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, 3 * MTU as u32)]));
    p.post_send(
        A,
        wr(
            2,
            SendOp::FetchAdd {
                remote_addr: counter.addr,
                rkey: counter.rkey,
                add: 5,
            },
            vec![sge(&local, 0, 8)],
        ),
    );
    p.post_send(A, wr(3, SendOp::Send, vec![]));
    p.filter(|_| Fate::Duplicate);
    p.run();
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    assert_eq!(
        u64::from_ne_bytes(p.bytes(B, &counter)[..8].try_into().unwrap()),
        5
    );
    assert_eq!(
        p.completions(B).iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        p.completions(A).iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
}

#[test]
fn rnr_then_late_receive_succeeds() {
    let mut p = Pair::with(
        |side, a| {
            if side == B {
                a.min_rnr_timer = 14
            }
        },
        100,
        200,
    );
    let src = p.region(A, 100, 5);
    let dst = p.zeroed(B, 100);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, 100)]));
    p.step();
    p.step();
    // B -> A: RNR NAK for PSN 100 with timer code 14 (1.28 ms).
    let rnr: Vec<&Pkt> = p.trace.iter().filter(|x| x.is_rnr_nak()).collect();
    assert_eq!(rnr.len(), 1);
    assert_eq!(rnr[0].psn(), 100);
    assert_eq!(rnr[0].syndrome(), Some(Syndrome::RnrNak { timer: 14 }));
    let t0 = p.now;
    let deadline = p.s[A].qp.poll_timeout().unwrap();
    assert!(deadline >= t0 + core::time::Duration::from_micros(1270));
    assert_eq!(p.step(), 0, "A waits");
    p.post_recv(B, 9, vec![sge(&dst, 0, 100)]);
    p.run();
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    assert_eq!(p.count(A, |x| x.psn() == 100), 2);
    assert_eq!(p.completions(A)[0].status, WcStatus::Success);
    assert_eq!(p.completions(B)[0].wr_id, 9);
    assert_eq!(p.s[A].qp.stats().rnr_naks_received, 1);
}

/// An RNR NAK is the responder's answer: while they keep coming a lost one costs no retry of
/// `retry_cnt` (only a whole local ACK timeout without any answer does), so a consumer that
/// posts its receive late, over a lossy link, gets its SEND through instead of RetryExcErr.
#[test]
fn lost_rnr_naks_cost_no_retry_while_the_responder_answers() {
    let mut p = Pair::with(
        |side, a| {
            if side == A {
                // One retry, 1.05 ms local ACK timeout.
                a.retry_cnt = 1;
                a.timeout = 8;
            } else {
                a.min_rnr_timer = 1;
            }
        },
        100,
        200,
    );
    let src = p.region(A, 100, 5);
    let dst = p.zeroed(B, 100);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, 100)]));
    // B -> A: RNR NAK 100, again and again; every third one is lost.
    let mut naks = 0;
    p.filter(move |x| {
        naks += usize::from(x.is_rnr_nak());
        if x.is_rnr_nak() && naks % 3 == 0 {
            Fate::Drop
        } else {
            Fate::Pass
        }
    });
    // Twenty local ACK timeouts without a receive at B.
    p.run_for(core::time::Duration::from_millis(21));
    assert!(p.count(B, |x| x.is_rnr_nak()) >= 6, "RNR NAKs lost");
    assert_eq!(p.s[A].qp.state(), QpState::Rts);
    assert!(p.completions(A).is_empty());
    p.post_recv(B, 9, vec![sge(&dst, 0, 100)]);
    p.run();
    assert_eq!(statuses(&p.completions(A)), vec![(1, WcStatus::Success)]);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
}

#[test]
fn rnr_retry_exhaustion() {
    let mut p = Pair::with(
        |side, a| {
            if side == A {
                a.rnr_retry = 2
            }
        },
        100,
        200,
    );
    let src = p.region(A, 100, 5);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, 100)]));
    p.post_send(A, wr(2, SendOp::Send, vec![sge(&src, 0, 10)]));
    p.run();
    // Three RNR NAKs: the first try and two retries.
    assert_eq!(p.count(B, |x| x.is_rnr_nak()), 3);
    assert_eq!(p.s[A].qp.state(), QpState::Error);
    let ca = p.completions(A);
    assert_eq!(
        statuses(&ca),
        vec![(1, WcStatus::RnrRetryExcErr), (2, WcStatus::WrFlushErr)]
    );
}

#[test]
fn peer_vanishes_retry_exceeded_rest_flushed() {
    let mut p = Pair::with(
        |side, a| {
            if side == A {
                a.retry_cnt = 3
            }
        },
        100,
        200,
    );
    let src = p.region(A, 100, 5);
    let dst = p.zeroed(B, 100);
    p.link_up = false;
    for i in 1..=3 {
        p.post_send(
            A,
            wr(
                i,
                SendOp::Write {
                    remote_addr: dst.addr,
                    rkey: dst.rkey,
                },
                vec![sge(&src, 0, 10)],
            ),
        );
    }
    p.run();
    // Sent once and retried three times after timeouts.
    assert_eq!(p.count(A, |x| x.psn() == 100), 4);
    assert_eq!(p.s[A].qp.stats().timeouts, 4);
    assert_eq!(p.s[A].qp.state(), QpState::Error);
    let ca = p.completions(A);
    assert_eq!(
        statuses(&ca),
        vec![
            (1, WcStatus::RetryExcErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(p.s[A].qp.poll_timeout(), None);
}

#[test]
fn progress_resets_retry_budget() {
    // Every second packet of a long WRITE stream is lost at first; with retry_cnt 1 the
    // transfer still succeeds because each go-back-N makes progress.
    let mut p = Pair::with(
        |side, a| {
            if side == A {
                a.retry_cnt = 1
            }
        },
        100,
        200,
    );
    let len = 10 * MTU;
    let src = p.region(A, len, 5);
    let dst = p.zeroed(B, len);
    p.post_send(
        A,
        wr(
            1,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            vec![sge(&src, 0, len as u32)],
        ),
    );
    let seen = Rc::new(Cell::new(0u32));
    let s2 = seen.clone();
    p.filter(move |x| {
        if x.from == A && x.psn() % 2 == 1 && s2.get() & (1 << (x.psn() - 100)) == 0 {
            s2.set(s2.get() | 1 << (x.psn() - 100));
            Fate::Drop
        } else {
            Fate::Pass
        }
    });
    p.run();
    assert!(seen.get() != 0);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    assert_eq!(p.completions(A)[0].status, WcStatus::Success);
}

#[test]
fn reordered_packets_recover() {
    let mut p = Pair::new();
    let len = 4 * MTU;
    let src = p.region(A, len, 5);
    let dst = p.zeroed(B, len);
    p.post_recv(B, 1, vec![sge(&dst, 0, len as u32)]);
    p.post_send(A, wr(1, SendOp::Send, vec![sge(&src, 0, len as u32)]));
    // Deliver 100, 102, 101, 103 by hand.
    let mut pk = Vec::new();
    while let Some(t) = p.s[A].qp.poll_transmit(p.now) {
        let mut b = vec![0; t.payload.len()];
        t.payload.gather(&p.s[A].mem, &mut b).unwrap();
        pk.push(Pkt {
            from: A,
            headers: t.headers,
            payload: b,
        });
    }
    assert_eq!(pk.len(), 4);
    for i in [0, 2, 1, 3] {
        p.deliver(&pk[i]);
    }
    p.run();
    // 102 early: NAK 101 (and 102 is dropped). 101 fills that gap; 103 early: NAK 102.
    let naks: Vec<u32> = p
        .trace
        .iter()
        .filter(|x| x.is_seq_nak())
        .map(|x| x.psn())
        .collect();
    assert_eq!(naks, vec![101, 102]);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    assert_eq!(p.completions(B).len(), 1);
    assert_eq!(p.completions(A).len(), 1);
}

#[test]
fn write_with_imm_without_receive_gets_rnr_then_lands_once() {
    let mut p = Pair::new();
    let src = p.region(A, 2 * MTU, 5);
    let dst = p.zeroed(B, 2 * MTU);
    p.post_send(
        A,
        wr(
            1,
            SendOp::WriteWithImm {
                remote_addr: dst.addr,
                rkey: dst.rkey,
                imm: 7,
            },
            vec![sge(&src, 0, 2 * MTU as u32)],
        ),
    );
    // A -> B: WRITE first 100 (placed), WRITE last with imm 101: no receive WQE -> RNR NAK 101.
    p.step();
    p.step();
    let rnr: Vec<u32> = p
        .trace
        .iter()
        .filter(|x| x.is_rnr_nak())
        .map(|x| x.psn())
        .collect();
    assert_eq!(rnr, vec![101]);
    p.post_recv(B, 40, vec![]);
    p.run();
    // Only the last packet was sent again.
    assert_eq!(p.count(A, |x| x.psn() == 100), 1);
    assert_eq!(p.count(A, |x| x.psn() == 101), 2);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    let cb = p.completions(B);
    assert_eq!(cb.len(), 1);
    assert_eq!(
        (cb[0].wr_id, cb[0].opcode, cb[0].byte_len, cb[0].imm_data),
        (40, WcOpcode::RecvRdmaWithImm, 2 * MTU as u32, Some(7))
    );
    assert_eq!(p.completions(A)[0].status, WcStatus::Success);
}

#[test]
fn solicited_bit_only_on_last_packet() {
    let mut p = Pair::new();
    let src = p.region(A, 2 * MTU, 5);
    let dst = p.zeroed(B, 2 * MTU);
    p.post_recv(B, 1, vec![sge(&dst, 0, 2 * MTU as u32)]);
    let mut w = wr(1, SendOp::Send, vec![sge(&src, 0, 2 * MTU as u32)]);
    w.solicited = true;
    p.post_send(A, w);
    p.run();
    let se: Vec<bool> = p
        .trace
        .iter()
        .filter(|x| x.from == A)
        .map(|x| x.headers.bth.solicited)
        .collect();
    assert_eq!(se, vec![false, true]);
    assert_eq!(p.s[A].qp.stats().acks_received, 1);
    assert_eq!(p.s[B].qp.stats().acks_sent, 1);
}

/// A 64-byte RDMA WRITE from the start of `src` to the start of `dst`.
fn write64(id: u64, src: &Region, dst: &Region) -> SendWr {
    wr(
        id,
        SendOp::Write {
            remote_addr: dst.addr,
            rkey: dst.rkey,
        },
        vec![sge(src, 0, 64)],
    )
}

/// A pair with the negotiated local ACK timeout of Linux (exponent 19, 2.1 s), `len` bytes at
/// A and B, and a round trip measured by a first WRITE (PSN 100, completed); the tail probe
/// needs one.
fn pair_with_round_trip(len: usize) -> (Pair, Region, Region) {
    let mut p = Pair::with(|_, a| a.timeout = 19, 100, 500);
    let src = p.region(A, len, 1);
    let dst = p.zeroed(B, len);
    p.post_send(A, write64(1, &src, &dst));
    p.run();
    assert_eq!(p.completions(A).len(), 1);
    (p, src, dst)
}

/// `pair_with_round_trip` on a path that has lost a packet (`rto.rs`: it probes early for
/// `LOSS_MEMORY`): a WRITE (PSN 98) measures the round trip, the next (PSN 99) is lost once
/// and recovered by the calm path's first probe, and the answer to a third (PSN 100) shows that
/// probe drew no duplicate. The next packet is PSN 101, as in `pair_with_round_trip`; the QP's
/// counters hold that one probe.
fn lossy_pair_with_round_trip(len: usize) -> (Pair, Region, Region) {
    let mut p = Pair::with(|_, a| a.timeout = 19, 98, 500);
    let src = p.region(A, len, 1);
    let dst = p.zeroed(B, len);
    p.post_send(A, write64(1, &src, &dst));
    p.run();
    p.filter(drop_once(|x| x.from == A));
    p.post_send(A, write64(0, &src, &dst));
    p.run();
    assert_eq!(p.completions(A).len(), 2);
    p.filter(|_| Fate::Pass);
    // The next answer, a while later, shows the probe drew no duplicate: a real loss.
    p.now += core::time::Duration::from_millis(1);
    p.post_send(A, write64(1, &src, &dst));
    p.run();
    assert_eq!(p.completions(A).len(), 1);
    assert!(p.s[A].qp.snapshot().lossy, "the path lost a packet");
    (p, src, dst)
}

/// A lost lone WRITE (its only packet, nothing after it to reveal the gap): on a calm path
/// (`rto.rs`: no loss lately) it is resent after `CALM_WAIT`, which a live peer's stall does
/// not reach; the path is lossy from then on, and the next lost lone WRITE is resent by the
/// tail probe (two round trips, at least `PROBE_FLOOR`). Neither waits for the negotiated local
/// ACK timeout of 2.1 s, and the early resends spend no retry.
#[test]
fn a_lost_lone_write_is_resent_after_the_calm_wait_then_after_the_round_trip() {
    use crate::transport::rto::{CALM_WAIT, PROBE_FLOOR, RTO_FLOOR};
    let (mut p, src, dst) = pair_with_round_trip(64);
    for (id, after) in [(2, CALM_WAIT..CALM_WAIT * 2), (3, PROBE_FLOOR..RTO_FLOOR)] {
        let t0 = p.now;
        p.filter(drop_once(|x| x.from == A));
        p.post_send(A, write64(id, &src, &dst));
        p.run();
        let done = p.now.saturating_duration_since(t0);
        assert_eq!(statuses(&p.completions(A)), vec![(id, WcStatus::Success)]);
        assert!(after.contains(&done), "WRITE {id} resent after {done:?}");
        // The next WRITE's answer, a while later, settles the probe: no duplicate came, a
        // real loss.
        p.now += core::time::Duration::from_millis(1);
        p.post_send(A, write64(9, &src, &dst));
        p.run();
        assert_eq!(p.completions(A).len(), 1);
    }
    let st = p.s[A].qp.stats();
    assert_eq!((st.timeouts, st.tail_probes, st.retransmits), (2, 2, 2));
    assert_eq!(st.spurious_retransmits, 0);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
}

/// A live peer that stalls on a calm path: shorter than `CALM_WAIT` (300 µs, 20 ms), nothing
/// is sent twice.
#[test]
fn a_stalled_peer_on_a_calm_path_costs_no_retransmission() {
    let (mut p, src, dst) = pair_with_round_trip(64);
    for (id, stall_us) in [(2, 300), (3, 20_000)] {
        p.post_send(A, write64(id, &src, &dst));
        let held = p.drain_one(A);
        let until = p.now + core::time::Duration::from_micros(stall_us);
        while let Some(t) = p.s[A].qp.poll_timeout().filter(|&t| t <= until) {
            p.now = t;
            p.s[A].qp.handle_timeout(p.now);
            assert!(
                p.drain(A).is_empty(),
                "sent again during a {stall_us} us stall"
            );
        }
        p.now = until;
        p.deliver(&held);
        p.run();
        assert_eq!(statuses(&p.completions(A)), vec![(id, WcStatus::Success)]);
    }
    let st = p.s[A].qp.stats();
    assert_eq!((st.timeouts, st.retransmits), (0, 0));
    assert_eq!(p.s[B].qp.stats().duplicates, 0);
}

/// On a lossy path: a responder sends one PSN sequence error NAK per gap and drops what follows it (IBTA vol. 1
/// §9.7.5.1.2). When that NAK is lost, the tail probe's first packet, the oldest
/// unacknowledged one, is what it waits for: each probe moves it on, its last packet reveals
/// the next gap, and the message completes after probe waits, not after the full timer.
#[test]
fn a_lost_nak_is_recovered_by_the_probes_not_the_full_timer() {
    let (mut p, src, dst) = lossy_pair_with_round_trip(8 * MTU);
    let t0 = p.now;
    let sent_before = p.trace.iter().filter(|x| x.from == A).count();
    // A -> B: SEND 101..108, [103 lost]; B -> A: [its NAK of 103 lost].
    let (mut lost_103, mut lost_nak) = (false, false);
    p.filter(move |x| {
        if x.from == A && x.psn() == 103 && !lost_103 {
            lost_103 = true;
            Fate::Drop
        } else if x.from == B && x.is_seq_nak() && !lost_nak {
            lost_nak = true;
            Fate::Drop
        } else {
            Fate::Pass
        }
    });
    p.post_recv(B, 9, vec![sge(&dst, 0, 8 * MTU as u32)]);
    p.post_send(A, wr(2, SendOp::Send, vec![sge(&src, 0, 8 * MTU as u32)]));
    p.run();
    let done = p.now.saturating_duration_since(t0);
    let a: Vec<u32> = p.trace[..]
        .iter()
        .filter(|x| x.from == A)
        .skip(sent_before)
        .map(|x| x.psn())
        .collect();
    // The flight, seven PSNs (the window the path's first loss left); B's ACK of 102 arrives,
    // 108 waits for the window; the probe: 103, taken, and 107, which draws a NAK of 104;
    // go-back-N from 104, and 108.
    assert_eq!(
        a,
        vec![101, 102, 103, 104, 105, 106, 107, 103, 107, 104, 105, 106, 107, 108]
    );
    let naks: Vec<u32> = p
        .trace
        .iter()
        .filter(|x| x.from == B && x.is_seq_nak())
        .map(|x| x.psn())
        .collect();
    assert_eq!(naks, vec![103, 104]);
    assert_eq!(statuses(&p.completions(A)), vec![(2, WcStatus::Success)]);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    let st = p.s[A].qp.stats();
    // One probe here, one for the path's first loss (`lossy_pair_with_round_trip`).
    assert_eq!((st.timeouts, st.tail_probes), (2, 2));
    assert!(
        done < crate::transport::rto::RTO_FLOOR,
        "two probe waits, not the full timer: {done:?}"
    );
}

/// A probe, or the answer to it, can be lost too: on a lossy path up to `MAX_PROBES` go out,
/// each waiting twice as long, before the full timer.
#[test]
fn a_lost_probe_is_followed_by_another_after_twice_the_wait() {
    let (mut p, src, dst) = lossy_pair_with_round_trip(64);
    let t0 = p.now;
    // The WRITE (PSN 101) and its first resend are lost.
    let mut dropped = 0;
    p.filter(move |x| {
        if x.from == A && dropped < 2 {
            dropped += 1;
            Fate::Drop
        } else {
            Fate::Pass
        }
    });
    p.post_send(A, write64(2, &src, &dst));
    p.run();
    let done = p.now.saturating_duration_since(t0);
    assert_eq!(statuses(&p.completions(A)), vec![(2, WcStatus::Success)]);
    let st = p.s[A].qp.stats();
    // One more of each: the path's first loss (`lossy_pair_with_round_trip`).
    assert_eq!((st.timeouts, st.tail_probes, st.retransmits), (3, 3, 3));
    let probe = crate::transport::rto::PROBE_FLOOR;
    assert!(
        done >= probe * 3 && done < crate::transport::rto::RTO_FLOOR,
        "probes after the floor and twice the floor: {done:?}"
    );
}

/// On a lossy path, a responder that is alive but slow (a descheduled process, a TCG guest)
/// holds the WRITE past the probe's wait: the probe goes out, then the original and the copy are handled
/// together. The responder re-ACKs the copy in an ACK of its own (its original was executed in
/// the same busy spell); that repeat right after the original's ACK proves the probe spurious.
/// The timer then covers the silence, so the same stall again costs no retransmission.
#[test]
fn a_slow_peer_costs_one_spurious_probe_then_none() {
    let (mut p, src, dst) = lossy_pair_with_round_trip(64);
    let stall = core::time::Duration::from_micros(300);
    let held_write = |p: &mut Pair, id: u64| held_write(p, write64(id, &src, &dst), stall);
    // A -> B: WRITE 101 (held); the probe: WRITE 101 again (held); B wakes: both, then
    // B -> A: ACK 101, ACK 101 (the copy's, a repeat).
    let held = held_write(&mut p, 2);
    let psns = |v: &[Pkt]| v.iter().map(Pkt::psn).collect::<Vec<_>>();
    assert_eq!(psns(&held), vec![101, 101]);
    for x in &held {
        p.deliver(x);
    }
    let acks = p.drain(B);
    assert_eq!(psns(&acks), vec![101, 101]);
    for x in &acks {
        p.deliver(x);
    }
    assert_eq!(statuses(&p.completions(A)), vec![(2, WcStatus::Success)]);
    let st = *p.s[A].qp.stats();
    // One probe more: the path's first loss (`lossy_pair_with_round_trip`).
    assert_eq!((st.tail_probes, st.spurious_retransmits), (2, 1));
    assert_eq!(p.s[B].qp.stats().duplicates, 1);
    assert!(
        p.s[A].qp.snapshot().turnaround >= stall,
        "the stall is remembered"
    );
    // The same stall again: nothing is sent twice.
    let held = held_write(&mut p, 3);
    assert_eq!(psns(&held), vec![102]);
    for x in &held {
        p.deliver(x);
    }
    p.run();
    assert_eq!(statuses(&p.completions(A)), vec![(3, WcStatus::Success)]);
    let st = *p.s[A].qp.stats();
    assert_eq!(
        (st.tail_probes, st.retransmits, st.spurious_retransmits),
        (2, 2, 1)
    );
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
}

/// A's packets for `wr` while B handles nothing for `stall` (A's timers run meanwhile).
fn held_write(p: &mut Pair, wr: SendWr, stall: core::time::Duration) -> Vec<Pkt> {
    p.post_send(A, wr);
    let mut held = vec![p.drain_one(A)];
    let until = p.now + stall;
    while let Some(t) = p.s[A].qp.poll_timeout().filter(|&t| t <= until) {
        p.now = t;
        p.s[A].qp.handle_timeout(p.now);
        held.extend(p.drain(A));
    }
    p.now = until;
    held
}

/// A loss a probe proves (its copy drew no duplicate answer) clears the turn-around a stall
/// taught, as a NAK does: on a path that loses packets the next lost tail is probed after the
/// probe's wait again, not after the stall's (on this VM a stall of 20 ms once held every
/// later loss of a latency probe for 20 ms).
#[test]
fn a_proven_loss_clears_the_turnaround_a_stall_taught() {
    let (mut p, src, dst) = lossy_pair_with_round_trip(64);
    let stall = core::time::Duration::from_micros(900);
    // A -> B: WRITE 101 and its probes, held 900 us; B wakes: all of them; B -> A: ACK 101
    // and its repeats. The probe was spurious: the timer learns the stall.
    let held = held_write(&mut p, write64(2, &src, &dst), stall);
    assert!(held.len() >= 2, "{}", held.len());
    for x in &held {
        p.deliver(x);
    }
    for x in &p.drain(B) {
        p.deliver(x);
    }
    assert_eq!(statuses(&p.completions(A)), vec![(2, WcStatus::Success)]);
    assert_eq!(p.s[A].qp.stats().spurious_retransmits, 1);
    let learned = p.s[A].qp.snapshot().turnaround;
    assert!(learned >= stall / 2, "learned {learned:?}");
    // A -> B: WRITE 102; B -> A: its ACK is lost. The probe after the learned wait: WRITE 102
    // again; B re-ACKs it once (no repeat): a real loss.
    p.filter(drop_once(|x| x.from == B));
    p.post_send(A, write64(3, &src, &dst));
    p.run();
    assert_eq!(statuses(&p.completions(A)), vec![(3, WcStatus::Success)]);
    // A -> B: WRITE 103 (the loss before it is settled now); its ACK is lost too: probed
    // after the probe's own wait this time.
    p.filter(drop_once(|x| x.from == B));
    let t0 = p.now;
    p.post_send(A, write64(4, &src, &dst));
    p.run();
    assert_eq!(statuses(&p.completions(A)), vec![(4, WcStatus::Success)]);
    let took = p.now.saturating_duration_since(t0);
    assert!(
        took < learned,
        "recovered in {took:?}, the stall taught {learned:?}"
    );
    assert_eq!(p.s[A].qp.snapshot().turnaround, core::time::Duration::ZERO);
    assert_eq!(p.s[A].qp.stats().spurious_retransmits, 1);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
}

/// A lost ACK is no slow peer: the probe's copy reaches a responder that has been quiet since
/// the original, which re-ACKs it as any ACK (no repeat), and the timer learns nothing; a lost
/// WRITE likewise.
#[test]
fn a_lost_ack_or_write_teaches_the_timer_nothing() {
    for lost_from in [B, A] {
        let (mut p, src, dst) = pair_with_round_trip(64);
        p.filter(drop_once(move |x| x.from == lost_from));
        p.post_send(A, write64(2, &src, &dst));
        p.run();
        assert_eq!(statuses(&p.completions(A)), vec![(2, WcStatus::Success)]);
        let st = *p.s[A].qp.stats();
        let case = if lost_from == B { "ACK" } else { "WRITE" };
        assert_eq!((st.tail_probes, st.spurious_retransmits), (1, 0), "{case}");
        assert_eq!(
            p.s[A].qp.snapshot().turnaround,
            core::time::Duration::ZERO,
            "{case}"
        );
    }
}
