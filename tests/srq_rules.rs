//! The receive-accounting rules of the uDAPL EP man pages (seed 002 `dat_ep_set_watermark`,
//! seed 004 `dat_ep_recv_query`) and the SRQ limit event (IBTA vol. 1 §10.2.9), one test per
//! rule, named after it.

use std::sync::Arc;

use dpdk_roce::srq::{
    EpRecvAccount, RecvQuery, RecvSource, SharedSrq, SrqPort, WatermarkEvents, WATERMARK_INFINITE,
};
use dpdk_roce::transport::srq::Srq;
use dpdk_roce::transport::types::{QpError, RecvWr, Sge};

fn wr(id: u64) -> RecvWr {
    RecvWr {
        wr_id: id,
        sgl: dpdk_roce::sgl![Sge {
            addr: 0x1000,
            len: 64,
            lkey: 1,
        }],
    }
}

const NONE: WatermarkEvents = WatermarkEvents {
    soft: false,
    hard: false,
};
const SOFT: WatermarkEvents = WatermarkEvents {
    soft: true,
    hard: false,
};
const HARD: WatermarkEvents = WatermarkEvents {
    soft: false,
    hard: true,
};

fn q(n: u32, span: u32) -> RecvQuery {
    RecvQuery {
        nbufs_allocated: n,
        bufs_alloc_span: span,
    }
}

// ---- seed 004: dat_ep_recv_query ----------------------------------------------------------

#[test]
fn srq_buffer_is_allocated_to_the_ep_when_the_ep_removes_it_from_the_srq() {
    let srq = Arc::new(SharedSrq::new(7, 8, 1));
    let (mut port, h) = SrqPort::new(srq.clone());
    srq.post_recv(wr(1)).unwrap();
    srq.post_recv(wr(2)).unwrap();
    assert_eq!(
        h.recv_query(),
        q(0, 0),
        "posting to the SRQ allocates nothing to the EP"
    );
    assert_eq!(port.take_recv(0x11).unwrap().wr_id, 1);
    assert_eq!(h.recv_query(), q(1, 1));
    assert_eq!(port.taken(), 1);
    assert_eq!(srq.len(), 1);
}

#[test]
fn ep_without_srq_allocates_a_buffer_as_soon_as_it_is_posted() {
    let (mut a, h) = EpRecvAccount::new(0);
    a.allocate_posted();
    a.allocate_posted();
    assert_eq!(h.recv_query(), q(2, 2));
    assert!(a.complete_posted());
    assert_eq!(h.recv_query(), q(1, 1));
    assert!(a.complete_posted());
    assert!(!a.complete_posted(), "nothing left to complete");
}

#[test]
fn nbufs_allocated_counts_buffers_allocated_but_not_yet_completed() {
    let srq = Arc::new(SharedSrq::new(7, 8, 1));
    let (mut port, h) = SrqPort::new(srq.clone());
    for i in 0..5 {
        srq.post_recv(wr(i)).unwrap();
    }
    for _ in 0..3 {
        port.take_recv(0x11).unwrap();
    }
    assert_eq!(h.recv_query().nbufs_allocated, 3);
    assert_eq!(
        port.completed(),
        Some(1),
        "MSNs start after the last completed (0)"
    );
    assert_eq!(h.recv_query().nbufs_allocated, 2);
    port.completed();
    port.completed();
    assert_eq!(h.recv_query(), q(0, 0));
    assert_eq!(port.completed(), None);
}

#[test]
fn span_is_latest_allocated_msn_minus_latest_completed_msn() {
    // The seed's example: messages 19, 22 and 23 have buffers; 18 completed last.
    let (mut a, h) = EpRecvAccount::new(18);
    a.allocate(19);
    a.allocate(22);
    a.allocate(23);
    assert_eq!(h.recv_query(), q(3, 5));
    assert!(a.complete(19));
    assert_eq!(h.recv_query(), q(2, 4));
    a.allocate(20);
    a.allocate(21);
    assert_eq!(h.recv_query(), q(4, 4));
    assert!(!a.complete(99), "no buffer for MSN 99");
    for m in 20..=23 {
        assert!(a.complete(m));
    }
    assert_eq!(h.recv_query(), q(0, 0));
}

#[test]
fn span_uses_24_bit_msn_arithmetic_across_wrap() {
    let (mut a, h) = EpRecvAccount::new(0x00ff_fffe);
    a.allocate(0x00ff_ffff);
    a.allocate(1);
    assert_eq!(h.recv_query(), q(2, 3), "MSN 0 is still to come");
    let (m, _) = a.allocate_next();
    assert_eq!(m, 2);
}

#[test]
fn span_is_never_smaller_than_the_number_of_buffers() {
    // Buffers allocated for MSNs at or before the last completed one (a confused peer) still
    // count; the span is raised to the count.
    let (mut a, h) = EpRecvAccount::new(10);
    a.allocate(11);
    a.allocate(11);
    a.allocate(11);
    let r = h.recv_query();
    assert_eq!(r.nbufs_allocated, 3);
    assert!(r.bufs_alloc_span >= r.nbufs_allocated, "{r:?}");
    a.allocate_posted();
    let r = h.recv_query();
    assert_eq!(r, q(4, 4));
}

#[test]
fn flushing_completes_every_allocated_buffer() {
    let (mut a, h) = EpRecvAccount::new(0);
    a.allocate(3);
    a.allocate(5);
    a.allocate_posted();
    assert_eq!(a.flush_all(), q(3, 6));
    assert_eq!(h.recv_query(), q(0, 0));
    let (m, _) = a.allocate_next();
    assert_eq!(m, 6, "sequence continues after the flushed messages");
}

// ---- seed 002: dat_ep_set_watermark ----------------------------------------------------------

#[test]
fn watermark_infinite_is_the_default_and_generates_no_event() {
    let (mut a, h) = EpRecvAccount::new(0);
    a.connected();
    for _ in 0..100 {
        assert_eq!(a.allocate_next().1, NONE);
    }
    assert_eq!(
        h.set_watermark(WATERMARK_INFINITE, WATERMARK_INFINITE),
        NONE
    );
    assert_eq!(h.armed_soft(), None);
    assert_eq!(h.armed_hard(), None);
}

#[test]
fn soft_event_fires_when_the_count_first_exceeds_the_soft_watermark() {
    let (mut a, h) = EpRecvAccount::new(0);
    assert_eq!(h.set_watermark(2, WATERMARK_INFINITE), NONE);
    assert_eq!(a.allocate_next().1, NONE);
    assert_eq!(a.allocate_next().1, NONE, "2 buffers do not exceed 2");
    assert_eq!(a.allocate_next().1, SOFT, "3 exceeds 2");
}

#[test]
fn soft_event_is_generated_only_once_per_setting() {
    let (mut a, h) = EpRecvAccount::new(0);
    h.set_watermark(1, WATERMARK_INFINITE);
    a.allocate_next();
    assert_eq!(a.allocate_next().1, SOFT);
    assert_eq!(a.allocate_next().1, NONE);
    a.complete_oldest();
    a.complete_oldest();
    a.complete_oldest();
    a.allocate_next();
    assert_eq!(
        a.allocate_next().1,
        NONE,
        "dropped below and exceeded again: still no event"
    );
    assert_eq!(h.armed_soft(), None);
}

#[test]
fn setting_the_soft_watermark_again_rearms_it() {
    let (mut a, h) = EpRecvAccount::new(0);
    h.set_watermark(1, WATERMARK_INFINITE);
    a.allocate_next();
    assert_eq!(a.allocate_next().1, SOFT);
    assert_eq!(h.set_watermark(3, WATERMARK_INFINITE), NONE);
    assert_eq!(h.armed_soft(), Some(3));
    assert_eq!(a.allocate_next().1, NONE);
    assert_eq!(a.allocate_next().1, SOFT, "4 exceeds the new 3");
}

#[test]
fn new_watermark_below_the_current_count_fires_immediately() {
    let (mut a, h) = EpRecvAccount::new(0);
    a.connected();
    for _ in 0..4 {
        a.allocate_next();
    }
    assert_eq!(h.set_watermark(3, WATERMARK_INFINITE), SOFT);
    assert_eq!(
        h.set_watermark(4, WATERMARK_INFINITE),
        NONE,
        "equal does not exceed"
    );
    assert_eq!(h.set_watermark(WATERMARK_INFINITE, 2), HARD);
    assert_eq!(
        h.set_watermark(0, 0),
        WatermarkEvents {
            soft: true,
            hard: true
        }
    );
}

#[test]
fn resetting_before_the_event_simply_replaces_the_values_and_stays_armed() {
    let (mut a, h) = EpRecvAccount::new(0);
    h.set_watermark(1, WATERMARK_INFINITE);
    assert_eq!(h.set_watermark(5, WATERMARK_INFINITE), NONE);
    assert_eq!(h.armed_soft(), Some(5));
    for _ in 0..5 {
        assert_eq!(a.allocate_next().1, NONE, "old value 1 no longer applies");
    }
    assert_eq!(a.allocate_next().1, SOFT);
}

#[test]
fn hard_watermark_exceeded_generates_connection_broken() {
    let (mut a, h) = EpRecvAccount::new(0);
    a.connected();
    h.set_watermark(WATERMARK_INFINITE, 2);
    a.allocate_next();
    a.allocate_next();
    assert_eq!(a.allocate_next().1, HARD);
    assert_eq!(a.allocate_next().1, NONE, "once per setting");
}

#[test]
fn hard_watermark_is_ready_as_soon_as_the_connection_is_established() {
    // An EP with its own RQ allocates at post, before the connection exists.
    let (mut a, h) = EpRecvAccount::new(0);
    h.set_watermark(WATERMARK_INFINITE, 1);
    assert_eq!(a.allocate_posted(), NONE, "no connection to break yet");
    assert_eq!(a.allocate_posted(), NONE);
    assert_eq!(a.connected(), HARD, "already exceeded when established");
    a.disconnected();
    h.set_watermark(WATERMARK_INFINITE, 0);
    assert_eq!(
        a.allocate_posted(),
        NONE,
        "disconnected: no connection to break"
    );
}

#[test]
fn soft_and_hard_watermarks_are_independent() {
    let (mut a, h) = EpRecvAccount::new(0);
    a.connected();
    h.set_watermark(1, 3);
    a.allocate_next();
    assert_eq!(a.allocate_next().1, SOFT);
    a.allocate_next();
    assert_eq!(
        a.allocate_next().1,
        HARD,
        "hard fires although soft already fired"
    );
    assert_eq!(h.armed_soft(), None);
    assert_eq!(h.armed_hard(), None);
}

#[test]
fn srq_port_accumulates_watermark_events_for_the_core() {
    let srq = Arc::new(SharedSrq::new(1, 8, 1));
    let (mut port, h) = SrqPort::new(srq.clone());
    port.connected();
    h.set_watermark(0, 1);
    for i in 0..3 {
        srq.post_recv(wr(i)).unwrap();
    }
    port.take_recv(5).unwrap();
    port.take_recv(5).unwrap();
    assert_eq!(
        port.take_events(),
        WatermarkEvents {
            soft: true,
            hard: true
        }
    );
    assert_eq!(port.take_events(), NONE);
}

// ---- SRQ limit (IBTA vol. 1 §10.2.9) -------------------------------------------------------

#[test]
fn srq_limit_event_fires_once_when_the_count_drops_below_the_limit() {
    let s = SharedSrq::new(3, 8, 1);
    for i in 0..5 {
        s.post_recv(wr(i)).unwrap();
    }
    assert!(!s.arm_limit(3));
    assert_eq!(s.armed_limit(), Some(3));
    s.take().unwrap();
    s.take().unwrap();
    assert!(!s.poll_limit_event(), "3 left: not below 3");
    s.take().unwrap();
    assert!(s.poll_limit_event(), "2 < 3");
    assert!(!s.poll_limit_event(), "polled once");
    s.take().unwrap();
    assert!(!s.poll_limit_event(), "fires once per arming");
    assert_eq!(s.limit_events_fired(), 1);
    assert_eq!(s.armed_limit(), None);
}

#[test]
fn srq_limit_is_rearmed_by_the_next_arm_call() {
    let s = SharedSrq::new(3, 8, 1);
    for i in 0..6 {
        s.post_recv(wr(i)).unwrap();
    }
    s.arm_limit(5);
    s.take().unwrap();
    s.take().unwrap();
    assert_eq!(s.limit_events_fired(), 1);
    assert!(!s.arm_limit(2), "4 posted, not below 2");
    s.take().unwrap();
    s.take().unwrap();
    assert_eq!(s.limit_events_fired(), 1, "2 left: not below 2");
    s.take().unwrap();
    assert_eq!(s.limit_events_fired(), 2);
}

#[test]
fn srq_limit_armed_above_the_current_count_fires_during_the_call() {
    let s = SharedSrq::new(3, 8, 1);
    s.post_recv(wr(1)).unwrap();
    assert!(s.arm_limit(2));
    assert!(s.poll_limit_event());
    assert!(!s.arm_limit(0), "0 disarms");
    s.take().unwrap();
    assert_eq!(s.limit_events_fired(), 1);
}

#[test]
fn srq_depth_and_sge_limits() {
    let s = SharedSrq::new(3, 2, 1);
    assert_eq!(s.depth(), 2);
    s.post_recv(wr(1)).unwrap();
    s.post_recv(wr(2)).unwrap();
    assert_eq!(s.post_recv(wr(3)), Err(QpError::QueueFull));
    assert_eq!(s.len(), 2, "a refused post is not counted");
    let mut two = wr(4);
    two.sgl.push(two.sgl[0]);
    assert_eq!(s.post_recv(two), Err(QpError::TooManySge));
    let drained: Vec<u64> = s.drain().iter().map(|w| w.wr_id).collect();
    assert_eq!(drained, vec![1, 2]);
    assert!(s.is_empty());
}

#[test]
fn the_transport_srq_is_a_recv_source() {
    let mut s = Srq::new(9, 4, 1);
    s.post_recv(wr(1)).unwrap();
    s.post_recv(wr(2)).unwrap();
    s.arm_limit(2);
    let src: &mut dyn RecvSource = &mut s;
    assert_eq!(src.srqn(), 9);
    assert_eq!(src.take_recv(0x12).unwrap().wr_id, 1);
    assert!(
        s.poll_limit_event(),
        "taking through the trait keeps the limit semantics"
    );
    let shared = SharedSrq::new(4, 4, 1);
    shared.post_recv(wr(7)).unwrap();
    let mut by_ref = &shared;
    assert_eq!(RecvSource::srqn(&by_ref), 4);
    assert_eq!(by_ref.take_recv(1).unwrap().wr_id, 7);
    assert!(by_ref.take_recv(1).is_none());
}

// ---- SRQ resize (DAT 2.0 dat_srq_resize) ---------------------------------------------------

#[test]
fn srq_resize_changes_the_depth_but_never_below_the_posted_count() {
    let s = SharedSrq::new(3, 4, 1);
    for i in 0..4 {
        s.post_recv(wr(i)).unwrap();
    }
    assert_eq!(s.post_recv(wr(4)), Err(QpError::QueueFull));
    assert_eq!(s.resize(3), Err(4), "4 posted");
    assert_eq!(s.depth(), 4);
    s.resize(6).unwrap();
    assert_eq!(s.depth(), 6);
    s.post_recv(wr(4)).unwrap();
    s.post_recv(wr(5)).unwrap();
    assert_eq!(s.post_recv(wr(6)), Err(QpError::QueueFull));
    // Taking makes room to shrink.
    assert_eq!(s.take().unwrap().wr_id, 0);
    assert_eq!(s.take().unwrap().wr_id, 1);
    s.resize(4).unwrap();
    assert_eq!((s.depth(), s.len()), (4, 4));
    assert_eq!(s.post_recv(wr(7)), Err(QpError::QueueFull));
    let rest: Vec<u64> = s.drain().into_iter().map(|w| w.wr_id).collect();
    assert_eq!(rest, vec![2, 3, 4, 5], "FIFO kept across resizes");
}
