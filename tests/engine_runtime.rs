//! The engine runtime in memory: two engines (two ports) over an in-memory cable, with 1 and
//! 2-3 shards, in inline and core progress, 64+ QPs spread over the shards, every byte checked:
//! SEND, RDMA WRITE (with immediate), RDMA READ, atomics, disconnect. Also the bounded rings:
//! a full submission ring and a full EVD are reported, never silent.

use dpdk_roce::cm::{AcceptParams, ConnectParams};
use dpdk_roce::config::Progress;
use dpdk_roce::engine::channel_io::ChannelIo;
use dpdk_roce::engine::runtime::{
    AsyncEvent, ConnEvent, Engine, EngineConfig, EngineError, Event, EventSink, QpRoute,
};
use dpdk_roce::host::{Host, HostConfig, QpOptions};
use dpdk_roce::mem::vec_memory::{Region, VecMemory};
use dpdk_roce::net::NetConfig;
use dpdk_roce::transport::types::{RecvWr, SendOp, SendWr, Sge, WcStatus};
use dpdk_roce::wire::ethernet::EthernetAddress;
use dpdk_roce::wire::psn::Psn;
use roce_sim::verify;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

type Eng = Engine<VecMemory, ChannelIo>;

const IP_A: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 2);
const PORT: u16 = 7471;
struct Side {
    engine: Eng,
    /// Request, receive and connection events of every QP of this side.
    events: Arc<EventSink>,
    /// Connection requests.
    requests: Arc<EventSink>,
}

fn hosts(mac: [u8; 6], ip: Ipv4Addr, shards: usize, seed: u64) -> Vec<Host<VecMemory>> {
    (0..shards)
        .map(|i| {
            Host::new(
                HostConfig {
                    net: NetConfig::new(EthernetAddress(mac), ip, 24),
                    ca_guid: 0x0200_00ff_fe00_0000 | seed,
                    seed: seed.wrapping_mul(31).wrapping_add(i as u64),
                    qpns: dpdk_roce::host::QpnPolicy::Sequential,
                    cm: Default::default(),
                },
                VecMemory::new(),
            )
            .expect("valid host config")
        })
        .collect()
}

fn config(progress: Progress) -> EngineConfig {
    EngineConfig {
        progress,
        // Both engines' threads share the two vCPUs: pin them there, and let idle threads
        // pause so four pollers do not starve each other.
        poll_cores: vec![0, 1, 0, 1],
        idle_pause_us: 20,
        idle_polls_before_pause: 256,
        ..EngineConfig::default()
    }
}

fn pair(shards: usize, progress: Progress) -> (Side, Side) {
    let (io_a, io_b) = ChannelIo::pair(4096);
    let side = |mac, ip, seed, io| {
        let async_sink = EventSink::new(1024);
        let engine = Engine::new(
            config(progress),
            hosts(mac, ip, shards, seed),
            vec![io],
            async_sink,
        )
        .expect("engine");
        Side {
            engine,
            events: EventSink::new(16384),
            requests: EventSink::new(1024),
        }
    };
    (
        side([2, 0, 0, 0, 0, 0xa], IP_A, 0xa, io_a),
        side([2, 0, 0, 0, 0, 0xb], IP_B, 0xb, io_b),
    )
}

fn route(s: &Side) -> QpRoute {
    QpRoute {
        request: Some(s.events.clone()),
        recv: Some(s.events.clone()),
        conn: Some(s.events.clone()),
        counters: None,
        async_events: None,
    }
}

/// `n` connections, QP i of each side on shard `i % shards`; every operation, data checked.
fn many_qps(shards: usize, progress: Progress, n: usize) {
    let (a, b) = pair(shards, progress);
    fn side(s: &Side) -> verify::Side<'_, ChannelIo> {
        verify::Side {
            engine: &s.engine,
            events: s.events.clone(),
            requests: s.requests.clone(),
        }
    }
    let report = verify::run(&side(&a), &side(&b), IP_B, PORT, n).expect("verified workload");
    assert_eq!(report.connections, n);
    // Per connection: every operation of the mixed workload, and a receive for each SEND,
    // SEND with immediate and WRITE with immediate (3 of its 7 operations).
    assert_eq!(report.completions_a, verify::SPEC.count * n);
    assert_eq!(report.completions_b, verify::SPEC.count * 3 / 7 * n);
    // SENDs, WRITEs and READs (5 of 7) moved their bytes, each checked.
    assert_eq!(
        report.bytes_verified,
        (verify::SPEC.count * 5 / 7 * verify::MSG * n) as u64
    );
    // Cross-shard paths were used when there are several shards; nothing overflowed.
    for s in 0..shards {
        let st = a.engine.stats(s).expect("stats");
        assert_eq!(st.worker.evd_overflows, 0);
        if progress == Progress::Core {
            assert!(st.pinned, "shard {s} pinned");
        }
        if shards > 1 && s > 0 {
            assert!(st.io.from_inbox > 0, "shard {s} got frames from shard 0");
            assert!(st.io.relayed_out > 0, "shard {s} sent through shard 0");
            assert!(
                st.worker.transitions_applied >= 2,
                "CM transitions replayed"
            );
        }
    }
    assert!(a.engine.async_sink().queue.is_empty());
    assert!(b.engine.async_sink().queue.is_empty());
}

#[test]
fn one_shard_inline_64_qps() {
    many_qps(1, Progress::Inline, 64);
}

#[test]
fn two_shards_inline_64_qps() {
    many_qps(2, Progress::Inline, 64);
}

#[test]
fn three_shards_inline_66_qps() {
    many_qps(3, Progress::Inline, 66);
}

#[test]
fn two_shards_core_64_qps() {
    many_qps(2, Progress::Core, 64);
}

#[test]
fn one_shard_core_blocking_wait_is_woken_by_the_core() {
    let (a, b) = pair(1, Progress::Core);
    b.engine.listen(PORT, b.requests.clone()).expect("listen");
    let qa = a
        .engine
        .create_qp(0, QpOptions::default(), route(&a))
        .unwrap();
    let qb = b
        .engine
        .create_qp(0, QpOptions::default(), route(&b))
        .unwrap();
    a.engine
        .connect(ConnectParams::new(IP_B, PORT, qa, Psn::new(1)))
        .unwrap();
    // Core mode: Engine::wait sleeps and is woken by the shard thread's push.
    let Ok(Event::Request(req)) = b.engine.wait(&b.requests, Some(Duration::from_secs(30)), 1)
    else {
        panic!("no request");
    };
    b.engine
        .accept(req.id, AcceptParams::new(qb, Psn::new(2)))
        .unwrap();
    let ev = a.engine.wait(&a.events, Some(Duration::from_secs(30)), 1);
    assert!(
        matches!(
            ev,
            Ok(Event::Connection {
                event: ConnEvent::Established { .. },
                ..
            })
        ),
        "{ev:?}"
    );
    // Nothing more comes: a timed wait expires.
    assert!(a
        .engine
        .wait(&a.events, Some(Duration::from_millis(20)), 1)
        .is_err());
}

#[test]
fn a_full_submission_ring_is_an_error_for_the_poster() {
    let (io, _peer) = ChannelIo::pair(16);
    let cfg = EngineConfig {
        submission_ring: 4,
        ..EngineConfig::default()
    };
    let engine: Eng = Engine::new(
        cfg,
        hosts([2, 0, 0, 0, 0, 1], IP_A, 1, 1),
        vec![io],
        EventSink::new(8),
    )
    .unwrap();
    let wr = RecvWr {
        wr_id: 1,
        sgl: dpdk_roce::sgl![],
    };
    // Inline mode and nobody drives: the ring fills.
    for _ in 0..4 {
        engine.post_recv(0x11, wr.clone()).expect("room");
    }
    assert_eq!(engine.post_recv(0x11, wr), Err(EngineError::RingFull(0)));
}

#[test]
fn an_evd_overflow_is_flagged_and_reported_on_the_async_evd() {
    let (io, _peer) = ChannelIo::pair(16);
    let async_sink = EventSink::new(8);
    let engine: Eng = Engine::new(
        EngineConfig::default(),
        hosts([2, 0, 0, 0, 0, 1], IP_A, 1, 1),
        vec![io],
        async_sink.clone(),
    )
    .unwrap();
    let small = EventSink::new(2);
    let qp = engine
        .create_qp(
            0,
            QpOptions::default(),
            QpRoute {
                request: Some(small.clone()),
                ..QpRoute::default()
            },
        )
        .unwrap();
    // Sends on a QP in INIT cannot be applied: each completes in error.
    for i in 0..3 {
        engine
            .post_send(
                qp,
                SendWr {
                    wr_id: i,
                    op: SendOp::Send,
                    sgl: dpdk_roce::sgl![],
                    signaled: true,
                    fence: false,
                    solicited: false,
                },
            )
            .unwrap();
    }
    while engine.progress() {}
    assert_eq!(small.queue.len(), 2);
    for i in 0..2 {
        let Some(Event::Dto(wc)) = small.queue.pop() else {
            panic!("completion");
        };
        assert_eq!(wc.wr_id, i);
        assert_ne!(wc.status, WcStatus::Success);
    }
    assert!(small.queue.take_overflow(), "the third did not fit");
    let mut saw_overflow = false;
    while let Some(ev) = async_sink.queue.pop() {
        if ev == Event::Async(AsyncEvent::EvdOverflow { evd: small.id() }) {
            saw_overflow = true;
        }
    }
    assert!(saw_overflow);
    assert_eq!(engine.stats(0).unwrap().worker.evd_overflows, 1);
}

/// A burst's completions reach their EVD together, in order (`evd_batches`); those beyond
/// its size are overflows, each counted and none lost silently.
/// One connection from `a` to `b` on shard 0, every remote right granted (the requests of
/// `a`'s QP go to `request`); both QP numbers.
fn connect_one(a: &Side, b: &Side, request: &Arc<EventSink>) -> (u32, u32) {
    b.engine.listen(PORT, b.requests.clone()).expect("listen");
    let qa = a
        .engine
        .create_qp(
            0,
            QpOptions::default(),
            QpRoute {
                request: Some(request.clone()),
                ..route(a)
            },
        )
        .unwrap();
    let qb = b
        .engine
        .create_qp(0, QpOptions::default(), route(b))
        .unwrap();
    // Every remote right on both QPs (the one-sided tests use them).
    let mut params = ConnectParams::new(IP_B, PORT, qa, Psn::new(1));
    params.access = verify::ALL;
    a.engine.connect(params).unwrap();
    let wait = |sink: &Arc<EventSink>| {
        let t0 = std::time::Instant::now();
        loop {
            if let Some(ev) = sink.queue.pop() {
                return ev;
            }
            a.engine.progress();
            b.engine.progress();
            assert!(t0.elapsed() < Duration::from_secs(30), "no event");
        }
    };
    let Event::Request(req) = wait(&b.requests) else {
        panic!("no request");
    };
    let mut params = AcceptParams::new(qb, Psn::new(2));
    params.access = verify::ALL;
    b.engine.accept(req.id, params).unwrap();
    assert!(matches!(
        wait(&a.events),
        Event::Connection {
            event: ConnEvent::Established { .. },
            ..
        }
    ));
    (qa, qb)
}

/// A zero-length signaled SEND.
fn empty_send(wr_id: u64) -> SendWr {
    SendWr {
        wr_id,
        op: SendOp::Send,
        sgl: dpdk_roce::sgl![],
        signaled: true,
        fence: false,
        solicited: false,
    }
}

/// Inline progress: a post is applied at once when nobody polls its shard. A lone request (no
/// send work outstanding on its QP) rings the doorbell: its frame has left when the call
/// returns. One behind outstanding work waits for the next poll, to leave in a burst. (A frame
/// of that poll leaves after the statistics command queued before it has answered.)
#[test]
fn an_inline_lone_post_has_sent_its_frame_when_it_returns_a_post_behind_it_waits() {
    let (a, b) = pair(1, Progress::Inline);
    let (qa, qb) = connect_one(&a, &b, &a.events);
    for wr_id in [1, 2] {
        b.engine
            .post_recv(
                qb,
                RecvWr {
                    wr_id,
                    sgl: dpdk_roce::sgl![],
                },
            )
            .unwrap();
    }
    let sent = || a.engine.stats(0).unwrap().shard.tx_frames;
    let before = sent();
    a.engine.post_send(qa, empty_send(7)).unwrap();
    assert_eq!(sent(), before + 1, "the lone SEND left inside post_send");
    a.engine.post_send(qa, empty_send(8)).unwrap();
    assert_eq!(sent(), before + 1, "the SEND behind it waits for a poll");
    assert_eq!(sent(), before + 2, "and leaves on it");
    let t0 = std::time::Instant::now();
    let mut done = Vec::new();
    while done.len() < 2 {
        if let Some(Event::Dto(wc)) = a.events.queue.pop() {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            done.push(wc.wr_id);
        }
        a.engine.progress();
        b.engine.progress();
        assert!(t0.elapsed() < Duration::from_secs(30), "no completion");
    }
    assert_eq!(done, [7, 8]);
}

#[test]
fn a_bursts_completions_reach_the_evd_in_order_in_one_batch() {
    let (a, b) = pair(1, Progress::Inline);
    let small = EventSink::new(4);
    let (qa, qb) = connect_one(&a, &b, &small);
    const N: u64 = 10;
    for i in 0..N {
        b.engine
            .post_recv(
                qb,
                RecvWr {
                    wr_id: i,
                    sgl: dpdk_roce::sgl![],
                },
            )
            .unwrap();
    }
    // All ten SENDs wait for the peer's next poll: it takes them in one receive burst and
    // acknowledges them with one ACK, and their ten completions come out of one drain.
    for i in 0..N {
        a.engine.post_send(qa, empty_send(i)).unwrap();
    }
    let t0 = std::time::Instant::now();
    while a.engine.stats(0).unwrap().worker.completions < N {
        a.engine.progress();
        b.engine.progress();
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the SENDs did not complete"
        );
    }
    let st = a.engine.stats(0).unwrap().worker;
    assert!(st.evd_batches >= 1, "{st:?}");
    let got: Vec<u64> = std::iter::from_fn(|| small.queue.pop())
        .map(|ev| match ev {
            Event::Dto(wc) if wc.status == WcStatus::Success => wc.wr_id,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, [0, 1, 2, 3], "the first four, in order");
    assert!(small.queue.take_overflow());
    assert_eq!(st.evd_overflows, N - 4, "{st:?}");
}

/// A panic on a poll thread does not leave the program hanging: the caller waiting for that
/// shard's answer gets an error, the async sink hears `ShardFailed`, every later call fails,
/// and the engine still stops.
#[test]
fn a_panicking_poll_thread_stops_the_engine_with_errors_not_hangs() {
    let (io, _peer) = ChannelIo::pair(16);
    let async_sink = EventSink::new(8);
    let engine: Eng = Engine::new(
        EngineConfig {
            progress: Progress::Core,
            poll_cores: vec![0],
            idle_pause_us: 20,
            ..EngineConfig::default()
        },
        hosts([2, 0, 0, 0, 0, 1], IP_A, 1, 1),
        vec![io],
        async_sink.clone(),
    )
    .unwrap();
    assert!(engine.with_host(0, |h| h.stats().tx_frames).is_ok());
    let r = engine.with_host(0, |_| -> u64 { panic!("a bug on the poll thread") });
    assert!(matches!(r, Err(EngineError::Stopped)), "{r:?}");
    // (The waiter is released while the panic unwinds; the event goes out, then the engine
    // is marked failed.)
    let t0 = std::time::Instant::now();
    let ev = loop {
        if let Some(ev) = async_sink.queue.pop() {
            break ev;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no ShardFailed");
        std::thread::yield_now();
    };
    assert!(
        matches!(ev, Event::Async(AsyncEvent::ShardFailed { shard: 0 })),
        "{ev:?}"
    );
    while !engine.failed() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never marked failed"
        );
        std::thread::yield_now();
    }
    assert!(matches!(
        engine.with_host(0, |h| h.stats().tx_frames),
        Err(EngineError::Stopped)
    ));
    assert!(matches!(
        engine.create_qp(0, QpOptions::default(), QpRoute::default()),
        Err(EngineError::Stopped)
    ));
    drop(engine);
}

/// Two inline engines, `a` without the away helper (the test thread drives it), `b` with
/// `b_away_us` (0: none); the same 16-deep EVDs as [`pair`].
fn pair_away(b_away_us: u32) -> (Side, Side) {
    let (io_a, io_b) = ChannelIo::pair(4096);
    let side = |mac, ip, seed, io, away_after_us| Side {
        engine: Engine::new(
            EngineConfig {
                away_after_us,
                ..config(Progress::Inline)
            },
            hosts(mac, ip, 1, seed),
            vec![io],
            EventSink::new(1024),
        )
        .expect("engine"),
        events: EventSink::new(16384),
        requests: EventSink::new(1024),
    };
    (
        side([2, 0, 0, 0, 0, 0xa], IP_A, 0xa, io_a, 0),
        side([2, 0, 0, 0, 0, 0xb], IP_B, 0xb, io_b, b_away_us),
    )
}

/// `b`'s target region: 4 KiB, its first 8 bytes 41 (the atomics' word), bytes 64..128 a
/// pattern for the READ. Also `a`'s local region.
fn away_regions(a: &Side, b: &Side) -> (Region, Region) {
    let ra = a
        .engine
        .with_host(0, |h| h.register(1, 4096, verify::ALL))
        .unwrap();
    let rb = b
        .engine
        .with_host(0, |h| {
            let r = h.register(1, 4096, verify::ALL);
            let bytes = h.mem.bytes_mut(r.lkey).expect("region");
            bytes[..8].copy_from_slice(&41u64.to_le_bytes());
            for (i, x) in bytes[64..128].iter_mut().enumerate() {
                *x = i as u8 ^ 0x5a;
            }
            r
        })
        .unwrap();
    (ra, rb)
}

/// Posts `op` on `qa` (local buffer at `a_at`, `len` bytes) and drives `a` alone until its
/// completion or `limit`: the completion's status, None if there was none.
fn post_driving_a_alone(
    a: &Side,
    qa: u32,
    ra: &Region,
    op: SendOp,
    a_at: u64,
    len: u32,
    limit: Duration,
) -> Option<WcStatus> {
    let wr_id = a_at;
    a.engine
        .post_send(
            qa,
            SendWr {
                wr_id,
                op,
                sgl: dpdk_roce::sgl![Sge {
                    addr: ra.addr + a_at,
                    len,
                    lkey: ra.lkey,
                }],
                signaled: true,
                fence: false,
                solicited: false,
            },
        )
        .unwrap();
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        match a.events.queue.pop() {
            Some(Event::Dto(wc)) => {
                assert_eq!(wc.wr_id, wr_id, "{wc:?}");
                return Some(wc.status);
            }
            Some(other) => panic!("{other:?}"),
            None => {
                a.engine.progress();
            }
        }
    }
    None
}

/// Inline progress, the application of `b` away (its thread makes no call at all once
/// connected): `a`'s RDMA READ, fetch-and-add, compare-and-swap and RDMA WRITE on `b`'s memory
/// complete, answered by `b`'s `roce-progress` helper (its counters say so), and `b`'s memory
/// holds what they did.
#[test]
fn one_sided_operations_are_answered_while_the_target_application_is_away() {
    let (a, b) = pair_away(50);
    let (qa, _qb) = connect_one(&a, &b, &a.events);
    let (ra, rb) = away_regions(&a, &b);
    let before = b.engine.stats(0).unwrap().worker;
    // From here on nothing calls into `b`.
    let limit = Duration::from_secs(20);
    let read = SendOp::Read {
        remote_addr: rb.addr + 64,
        rkey: rb.rkey,
    };
    let fadd = SendOp::FetchAdd {
        remote_addr: rb.addr,
        rkey: rb.rkey,
        add: 1,
    };
    let cas = SendOp::CompareSwap {
        remote_addr: rb.addr,
        rkey: rb.rkey,
        compare: 42,
        swap: 7,
    };
    let write = SendOp::Write {
        remote_addr: rb.addr + 1024,
        rkey: rb.rkey,
    };
    a.engine
        .with_host(0, move |h| {
            h.mem.bytes_mut(ra.lkey).unwrap()[512..576].fill(0xc3);
        })
        .unwrap();
    for (what, op, at, len) in [
        ("READ", read, 0, 64),
        ("fetch-and-add", fadd, 256, 8),
        ("compare-and-swap", cas, 264, 8),
        ("WRITE", write, 512, 64),
    ] {
        let status = post_driving_a_alone(&a, qa, &ra, op, at, len, limit);
        assert_eq!(status, Some(WcStatus::Success), "{what}");
    }
    // What came back, and what `b` holds (read now that `a` is done).
    let got = a
        .engine
        .with_host(0, move |h| h.mem.bytes(ra.lkey).unwrap()[..272].to_vec())
        .unwrap();
    let pattern: Vec<u8> = (0..64u8).map(|i| i ^ 0x5a).collect();
    assert_eq!(&got[..64], &pattern[..], "READ data");
    assert_eq!(
        got[256..264],
        41u64.to_le_bytes(),
        "fetch-and-add's original"
    );
    assert_eq!(
        got[264..272],
        42u64.to_le_bytes(),
        "compare-and-swap's original"
    );
    let after = b.engine.stats(0).unwrap().worker;
    let held = b
        .engine
        .with_host(0, move |h| h.mem.bytes(rb.lkey).unwrap()[..1088].to_vec())
        .unwrap();
    assert_eq!(held[..8], 7u64.to_le_bytes(), "41 + 1 = 42, swapped for 7");
    assert!(held[1024..1088].iter().all(|&x| x == 0xc3), "WRITE data");
    assert!(
        after.away_rx_frames - before.away_rx_frames >= 4,
        "the helper received the four requests: {before:?} -> {after:?}"
    );
    assert!(after.away_busy_polls > before.away_busy_polls, "{after:?}");
}

/// The same READ without the helper: nobody drives `b`, and it is never answered (the test
/// above can fail).
#[test]
fn without_the_helper_a_read_to_an_away_application_is_not_answered() {
    let (a, b) = pair_away(0);
    let (qa, _qb) = connect_one(&a, &b, &a.events);
    let (ra, rb) = away_regions(&a, &b);
    let read = SendOp::Read {
        remote_addr: rb.addr + 64,
        rkey: rb.rkey,
    };
    let status = post_driving_a_alone(&a, qa, &ra, read, 0, 64, Duration::from_secs(2));
    assert_ne!(status, Some(WcStatus::Success));
    assert_eq!(b.engine.stats(0).unwrap().worker.away_polls, 0);
}

/// An idle helper sleeps longer than its period (there is no interrupt on an in-memory
/// cable: on a timer), and a READ that arrives while it does is still answered.
#[test]
fn the_idle_helper_backs_off_and_still_answers_a_read() {
    let (a, b) = pair_away(50);
    let (qa, _qb) = connect_one(&a, &b, &a.events);
    let (ra, rb) = away_regions(&a, &b);
    let before = b.engine.stats(0).unwrap().worker.away_rx_frames;
    // Nothing drives `b` now: wait for the helper's first long sleep (read without driving).
    let t0 = std::time::Instant::now();
    let sleeps = || b.engine.away_stats(0).unwrap();
    while sleeps().away_idle_sleeps == 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the helper never backed off"
        );
        std::thread::yield_now();
    }
    let read = SendOp::Read {
        remote_addr: rb.addr + 64,
        rkey: rb.rkey,
    };
    let status = post_driving_a_alone(&a, qa, &ra, read, 0, 64, Duration::from_secs(20));
    assert_eq!(status, Some(WcStatus::Success), "READ");
    let s = sleeps();
    assert_eq!((s.away_irq_sleeps, s.away_irq_wakes), (0, 0), "{s:?}");
    assert!(
        b.engine.stats(0).unwrap().worker.away_rx_frames > before,
        "the helper received the READ"
    );
}

/// The helper leaves a shard a consumer drives alone: over a second of a consumer driving `b`
/// (ten of the helper's 100 ms periods) it polls nothing.
#[test]
fn the_helper_does_not_poll_a_shard_a_consumer_drives() {
    let (_a, b) = pair_away(100_000);
    let before = b.engine.stats(0).unwrap().worker.away_polls;
    let t0 = std::time::Instant::now();
    while t0.elapsed() < Duration::from_secs(1) {
        b.engine.progress();
    }
    let after = b.engine.stats(0).unwrap().worker.away_polls;
    assert_eq!(after, before, "the helper polled while a consumer drove");
}

/// A panic on the helper (here a control closure it ran while nobody else drove) stops the
/// engine as a poll thread's does: ShardFailed on the async sink, every later call fails.
#[test]
fn a_panic_on_the_away_helper_stops_the_engine() {
    let (io, _peer) = ChannelIo::pair(16);
    let async_sink = EventSink::new(8);
    let engine: Eng = Engine::new(
        EngineConfig {
            away_after_us: 50,
            ..EngineConfig::default()
        },
        hosts([2, 0, 0, 0, 0, 1], IP_A, 1, 1),
        vec![io],
        async_sink.clone(),
    )
    .unwrap();
    engine
        .submit(
            0,
            dpdk_roce::engine::runtime::Command::WithHost(Box::new(|_| {
                panic!("a bug met by the helper")
            })),
        )
        .unwrap();
    let t0 = std::time::Instant::now();
    while !engine.failed() {
        assert!(t0.elapsed() < Duration::from_secs(10), "never failed");
        std::thread::yield_now();
    }
    assert!(
        matches!(
            async_sink.queue.pop(),
            Some(Event::Async(AsyncEvent::ShardFailed { shard: 0 }))
        ),
        "ShardFailed"
    );
    assert!(matches!(
        engine.create_qp(0, QpOptions::default(), QpRoute::default()),
        Err(EngineError::Stopped)
    ));
}
