//! `Qp::snapshot`: the snapshot of where a QP stands follows a stalled and a finished exchange.

use super::*;
use crate::transport::types::QpState;

#[test]
fn snapshot_shows_a_send_waiting_for_its_lost_ack_then_done() {
    let mut p = Pair::new();
    let src = p.region(A, 3 * MTU, 1);
    let dst = p.zeroed(B, 3 * MTU);
    p.post_recv(B, 1, vec![sge(&dst, 0, 3 * MTU as u32)]);
    p.post_recv(B, 2, vec![sge(&dst, 0, 8)]);
    p.post_send(A, wr(7, SendOp::Send, vec![sge(&src, 0, 3 * MTU as u32)]));
    // A -> B: SEND 100, 101, 102; B's ACK is lost.
    p.filter(|x| if x.from == B { Fate::Drop } else { Fate::Pass });
    for _ in 0..4 {
        p.step();
    }
    let a = p.s[A].qp.snapshot();
    assert_eq!(a.state, QpState::Rts);
    assert_eq!((a.send_wqes, a.reads_outstanding), (1, 0));
    assert_eq!(
        (a.una.value(), a.sent_hw.value(), a.next_psn.value()),
        (100, 103, 103)
    );
    assert!(a.ack_timer.is_some(), "{a}");
    assert_eq!((a.retry_left, a.rnr_left, a.rnr_wait), (7, 7, false));
    let b = p.s[B].qp.snapshot();
    assert_eq!((b.epsn.value(), b.receives_posted), (103, 1));
    assert_eq!(b.responses_queued, 0, "the ACK left (and was lost): {b}");
    // The ACK gets through after the timeout's resend.
    p.filter(|_| Fate::Pass);
    p.run();
    let a = p.s[A].qp.snapshot();
    assert_eq!(a.send_wqes, 0);
    assert_eq!(a.una, a.sent_hw);
    assert_eq!(a.ack_timer, None, "{a}");
    assert!(
        a.to_string()
            .starts_with("Rts sq=0 (reads 0) una=103 sent=103"),
        "{a}"
    );
}
