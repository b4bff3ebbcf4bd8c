//! The shared receive queue and the per-EP accounting under concurrency: consumers posting while
//! several "cores" take (IBTA vol. 1 §10.2.9), and `dat_ep_recv_query` snapshots taken while the
//! core allocates and completes (seed 004: one consistent scan, span never below count).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use dpdk_roce::srq::{EpRecvAccount, RecvQuery, RecvSource, SharedSrq, SrqPort};
use dpdk_roce::transport::types::{QpError, RecvWr};

const PRODUCERS: u64 = 3;
const PER_PRODUCER: u64 = 20_000;

#[test]
fn every_posted_buffer_is_taken_exactly_once() {
    let srq = Arc::new(SharedSrq::new(1, 64, 1));
    let producers_done = Arc::new(AtomicBool::new(false));
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let srq = srq.clone();
            std::thread::spawn(move || {
                let mut full = 0u64;
                for i in 0..PER_PRODUCER {
                    let mut w = RecvWr {
                        wr_id: (p << 32) | i,
                        sgl: dpdk_roce::sgl![],
                    };
                    loop {
                        match srq.post_recv(w) {
                            Ok(()) => break,
                            Err(QpError::QueueFull) => {
                                full += 1;
                                w = RecvWr {
                                    wr_id: (p << 32) | i,
                                    sgl: dpdk_roce::sgl![],
                                };
                                std::thread::yield_now();
                            }
                            Err(e) => panic!("{e:?}"),
                        }
                    }
                }
                full
            })
        })
        .collect();
    let cores: Vec<_> = (0..2)
        .map(|_| {
            let srq = srq.clone();
            let done = producers_done.clone();
            std::thread::spawn(move || {
                let (mut port, handle) = SrqPort::new(srq.clone());
                let mut got = Vec::new();
                loop {
                    match port.take_recv(0x100) {
                        Some(w) => {
                            got.push(w.wr_id);
                            // Complete every other buffer right away, like a core would.
                            if got.len() % 2 == 0 {
                                port.completed();
                            }
                        }
                        None if done.load(Ordering::SeqCst) && srq.is_empty() => break,
                        None => std::thread::yield_now(),
                    }
                }
                let q = handle.recv_query();
                assert_eq!(q.nbufs_allocated as usize, got.len() - got.len() / 2);
                assert_eq!(port.taken(), got.len() as u64);
                got
            })
        })
        .collect();
    for p in producers {
        p.join().unwrap();
    }
    producers_done.store(true, Ordering::SeqCst);
    let mut seen = HashSet::new();
    let mut total = 0usize;
    for c in cores {
        for id in c.join().unwrap() {
            assert!(seen.insert(id), "buffer {id:#x} taken twice");
            total += 1;
        }
    }
    assert_eq!(total as u64, PRODUCERS * PER_PRODUCER, "a buffer was lost");
    assert_eq!(srq.len(), 0);
    assert!(srq.take().is_none());
}

#[test]
fn limit_event_fires_once_per_arming_under_concurrent_takes() {
    for _ in 0..50 {
        let srq = Arc::new(SharedSrq::new(1, 256, 1));
        for i in 0..200 {
            srq.post_recv(RecvWr {
                wr_id: i,
                sgl: dpdk_roce::sgl![],
            })
            .unwrap();
        }
        srq.arm_limit(100);
        let takers: Vec<_> = (0..3)
            .map(|_| {
                let srq = srq.clone();
                std::thread::spawn(move || while srq.take().is_some() {})
            })
            .collect();
        for t in takers {
            t.join().unwrap();
        }
        assert_eq!(srq.limit_events_fired(), 1);
        assert!(srq.poll_limit_event());
        assert!(!srq.poll_limit_event());
    }
}

#[test]
fn recv_query_is_one_consistent_snapshot_under_concurrent_completion() {
    // The core cycles through out-of-order allocations; every state it publishes is one of
    // these (count, span) pairs. A query that mixed a count from one state with a span from
    // another (two scans) would produce a pair outside the set.
    let valid: HashSet<(u32, u32)> = [(0, 0), (1, 1), (2, 3), (1, 2), (2, 2)].into();
    let (mut acct, handle) = EpRecvAccount::new(0);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let h = handle.clone();
            let stop = stop.clone();
            let valid = valid.clone();
            std::thread::spawn(move || {
                let mut distinct = HashSet::new();
                while !stop.load(Ordering::Relaxed) {
                    let RecvQuery {
                        nbufs_allocated: n,
                        bufs_alloc_span: s,
                    } = h.recv_query();
                    assert!(s >= n, "span {s} < count {n}");
                    assert!(valid.contains(&(n, s)), "torn snapshot ({n}, {s})");
                    distinct.insert((n, s));
                }
                distinct.len()
            })
        })
        .collect();
    let mut base = 0u32;
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(300) {
        acct.allocate(base + 1); // (1, 1)
        acct.allocate(base + 3); // (2, 3)
        assert!(acct.complete(base + 1)); // (1, 2)
        acct.allocate(base + 2); // (2, 2)
        assert!(acct.complete(base + 2)); // (1, 1)
        assert!(acct.complete(base + 3)); // (0, 0)
        base = (base + 3) & 0x00ff_ffff;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() >= 1);
    }
    assert_eq!(handle.recv_query(), RecvQuery::default());
}

/// Posts racing with shrinking resizes: the depth is never below the number posted, and no
/// post is lost or accepted beyond the depth in force.
#[test]
fn resize_racing_posts_never_leaves_more_posted_than_the_depth() {
    let srq = Arc::new(SharedSrq::new(1, 64, 1));
    let stop = Arc::new(AtomicBool::new(false));
    let posted = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let poster = {
        let (srq, stop, posted) = (srq.clone(), stop.clone(), posted.clone());
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let w = RecvWr {
                    wr_id: i,
                    sgl: dpdk_roce::sgl![],
                };
                i += 1;
                if srq.post_recv(w).is_ok() {
                    posted.fetch_add(1, Ordering::SeqCst);
                }
                if i.is_multiple_of(3) {
                    srq.take();
                }
            }
        })
    };
    let mut round = 0u32;
    while round < 20_000 || posted.load(Ordering::SeqCst) < 1_000 {
        let depth = 1 + (round % 64);
        if let Err(n) = srq.resize(depth) {
            assert!(n > depth, "refused only when more are posted");
        }
        // Only this thread resizes, so both reads see the same depth.
        assert!(srq.len() <= srq.depth(), "posted beyond the depth");
        round += 1;
    }
    stop.store(true, Ordering::SeqCst);
    poster.join().unwrap();
    let left = srq.drain().len();
    assert!(left <= srq.depth());
    assert_eq!(srq.len(), 0);
}
