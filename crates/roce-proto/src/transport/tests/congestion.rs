//! Congestion control (`cc`): the notification point's CNPs for CE-marked packets, the
//! reaction point's cut on a CNP and its paced packets, stray CNPs, and whole flows through a
//! simulated bottleneck (a queue draining at a rate, marking CE above a depth like a switch's
//! RED, dropping when full) on the virtual clock.

use super::*;
use crate::cc::{CcConfig, CcMode, DcqcnParams, DelayParams};
use crate::transport::types::WcStatus;
use core::time::Duration;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

fn dcqcn(line_rate_bps: u64) -> CcConfig {
    CcConfig {
        mode: CcMode::Dcqcn,
        dcqcn: DcqcnParams {
            line_rate_bps,
            ..DcqcnParams::default()
        },
        ..CcConfig::default()
    }
}

fn delay_mode() -> CcConfig {
    CcConfig {
        mode: CcMode::Delay,
        delay: DelayParams::default(),
        ..CcConfig::default()
    }
}

/// A's 64-packet WRITE to B, every packet CE-marked on the way, one packet per microsecond:
/// B answers with one CNP per 50 us interval, each addressed as annex A17.9.3 says.
#[test]
fn ce_marked_packets_draw_one_cnp_per_interval_to_the_senders_qp() {
    let mut p = Pair::new();
    let src = p.region(A, 64 * MTU, 1);
    let dst = p.zeroed(B, 64 * MTU);
    p.post_send(A, write_all(1, &src, &dst));
    let t0 = p.now;
    let mut cnps = Vec::new();
    for _ in 0..64 {
        let Some(pkt) = p.take_one(A) else { break };
        p.s[B].qp.on_congestion_experienced(p.now);
        p.deliver(&pkt);
        for out in p.drain(B) {
            if out.op() == Opcode::CNP {
                cnps.push((p.now, out));
            }
        }
        p.now += Duration::from_micros(1);
    }
    let span = p.now.saturating_duration_since(t0);
    // 64 us of marks: a CNP at 0 and at 50 us.
    assert_eq!(cnps.len(), 2, "{span:?}");
    assert_eq!(
        cnps[1].0.saturating_duration_since(cnps[0].0),
        Duration::from_micros(50)
    );
    for (_, c) in &cnps {
        let b = c.headers.bth;
        assert_eq!((b.dest_qp, b.psn.value(), b.pkey), (0x11, 0, 0xffff));
        assert!(b.becn && !b.ack_req && c.payload.is_empty());
        assert_eq!(c.headers.present(), crate::wire::opcode::OpFlags::empty());
    }
    let st = p.s[B].qp.congestion().stats;
    assert_eq!((st.ce_marks, st.cnps_sent), (64, 2));
    // A runs no DCQCN: the CNPs are counted and change nothing.
    for (_, c) in &cnps {
        p.deliver(c);
    }
    let a = p.s[A].qp.congestion();
    assert_eq!((a.stats.cnps_ignored, a.rate_bps()), (2, None));
}

/// A DCQCN QP at line rate 1 Gbit/s takes a CNP: its rate halves, and after the burst
/// allowance (8 KiB) its packets leave one per 1098 bytes at 500 Mbit/s (17.568 us), not back
/// to back; ACKs from B are never held.
#[test]
fn a_cnp_halves_a_dcqcn_qps_rate_and_its_packets_leave_paced() {
    let mut p = Pair::new();
    p.s[A].qp.set_congestion(&dcqcn(1_000_000_000));
    let mut h = p.s[B].qp.headers(Opcode::CNP, Psn::new(0));
    h.bth.becn = true;
    p.deliver(&Pkt {
        from: B,
        headers: h,
        payload: Vec::new(),
    });
    assert_eq!(p.s[A].qp.congestion().rate_bps(), Some(500_000_000));
    let src = p.region(A, 24 * MTU, 1);
    let dst = p.zeroed(B, 24 * MTU);
    p.post_send(A, write_all(1, &src, &dst));
    // Before the byte counter's first increase (32767 bytes): 24 packets.
    let mut sent = Vec::new();
    while sent.len() < 24 {
        match p.take_one(A) {
            Some(pkt) => {
                sent.push(p.now);
                p.deliver(&pkt);
                for ack in p.drain(B) {
                    p.deliver(&ack);
                }
            }
            None => {
                let t = p.s[A].qp.poll_timeout().expect("the pacer's release timer");
                p.now = t;
                p.s[A].qp.handle_timeout(t);
            }
        }
    }
    let gaps: Vec<u64> = sent
        .windows(2)
        .map(|w| w[1].saturating_nanos_since(w[0]))
        .collect();
    // 8192 bytes of burst: the first 8 packets leave together.
    assert!(gaps[..7].iter().all(|&g| g == 0), "{gaps:?}");
    assert!(
        gaps[8..].iter().all(|&g| g.abs_diff(17_568) <= 1),
        "{gaps:?}"
    );
    p.run();
    assert_eq!(statuses(&p.completions(A)), vec![(1, WcStatus::Success)]);
    assert_eq!(p.bytes(B, &dst), p.bytes(A, &src));
    assert!(p.s[A].qp.congestion().stats.paced_waits >= 16);
    assert_eq!(p.s[A].qp.stats().retransmits, 0);
}

/// CNPs for a QP that is not connected, and CNPs with another QP's P_Key or QPN, are dropped
/// and counted; none cuts a rate.
#[test]
fn stray_and_misaddressed_cnps_change_nothing() {
    let mut p = Pair::new();
    p.s[A].qp.set_congestion(&dcqcn(1_000_000_000));
    let mut h = p.s[B].qp.headers(Opcode::CNP, Psn::new(0));
    h.bth.becn = true;
    let good = Pkt {
        from: B,
        headers: h,
        payload: Vec::new(),
    };
    let mut other_qp = good.clone();
    other_qp.headers.bth.dest_qp = 0x33;
    let mut other_pkey = good.clone();
    other_pkey.headers.bth.pkey = 0x8001;
    let mut with_payload = good.clone();
    with_payload.payload = vec![0; 4];
    let dropped0 = p.s[A].qp.stats().dropped;
    for bad in [&other_qp, &other_pkey, &with_payload] {
        p.deliver(bad);
    }
    assert_eq!(p.s[A].qp.stats().dropped, dropped0 + 3);
    assert_eq!(p.s[A].qp.congestion().rate_bps(), None);
    // Moved to ERROR: a CNP is counted as ignored.
    p.s[A]
        .qp
        .modify(p.now, QpState::Error, &QpAttr::default())
        .unwrap();
    p.deliver(&good);
    let c = p.s[A].qp.congestion();
    assert_eq!((c.stats.cnps_ignored, c.stats.cnps_received), (1, 0));
    assert_eq!(c.rate_bps(), None);
    // A CE mark on a QP in ERROR: counted, and the CNP it would draw is dropped, not left
    // waiting (the QP has nothing more to send).
    p.s[A].qp.on_congestion_experienced(p.now);
    assert!(p.s[A].qp.has_output());
    assert!(p.s[A].qp.poll_transmit(p.now).is_none());
    assert!(!p.s[A].qp.has_output());
    let c = p.s[A].qp.congestion();
    assert_eq!((c.stats.ce_marks, c.stats.cnps_sent), (1, 0));
}

/// Flows of QP pairs through one bottleneck: each sender's packets queue at a link draining
/// at `rate_bps`, are marked CE above `mark_at` bytes of queue when ECN-capable, dropped
/// when the queue holds `limit` bytes; answers come back unqueued. `prop` each way.
struct Bottleneck {
    pairs: Vec<Pair>,
    rate_bps: u64,
    limit: u64,
    mark_at: Option<u64>,
    prop: Duration,
    now: Instant,
    /// In flight: (arrival time, sequence, pair, packet, CE).
    flying: BinaryHeap<Reverse<(u64, u64, usize, usize)>>,
    packets: Vec<(Pkt, bool)>,
    seq: u64,
    /// The queue: when its last packet leaves, and the bytes in it (each with its departure).
    busy_until: u64,
    queued: VecDeque<(u64, u64)>,
    queued_bytes: u64,
    pub max_queue: u64,
    pub drops: u64,
    pub marks: u64,
    /// Bytes each pair's WRITEs completed, and the queueing delay of each packet (ns).
    pub done: Vec<u64>,
    pub queueing_ns: Vec<u64>,
    retransmits_before: u64,
    red_max: f64,
    rng: u64,
}

const MSG: usize = 64 * 1024;

impl Bottleneck {
    fn new(n: usize, cc: &CcConfig, rate_bps: u64, limit: u64, mark_at: Option<u64>) -> Self {
        let pairs = (0..n)
            .map(|_| {
                let mut p = Pair::new();
                p.s[A].qp.set_congestion(cc);
                p.s[B].qp.set_congestion(cc);
                p
            })
            .collect::<Vec<_>>();
        Bottleneck {
            pairs,
            rate_bps,
            limit,
            mark_at,
            prop: Duration::from_micros(10),
            now: Instant(1_000_000),
            flying: BinaryHeap::new(),
            packets: Vec::new(),
            seq: 0,
            busy_until: 0,
            queued: VecDeque::new(),
            queued_bytes: 0,
            max_queue: 0,
            drops: 0,
            marks: 0,
            done: vec![0; n],
            queueing_ns: Vec::new(),
            retransmits_before: 0,
            red_max: 0.0,
            rng: 1,
        }
    }

    fn send(&mut self, i: usize, pkt: Pkt) {
        let now = self.now.as_nanos();
        let mut at = now + self.prop.as_nanos() as u64;
        let mut ce = false;
        if pkt.from == A {
            // Through the queue.
            while self.queued.front().is_some_and(|&(leave, _)| leave <= now) {
                let (_, b) = self.queued.pop_front().unwrap();
                self.queued_bytes -= b;
            }
            let bytes = pkt.payload.len() as u64 + 74;
            if self.queued_bytes + bytes > self.limit {
                self.drops += 1;
                return;
            }
            if self.mark_at.is_some_and(|k| self.marks_at(k)) {
                ce = true;
                self.marks += 1;
            }
            let start = self.busy_until.max(now);
            let leave = start + bytes * 8 * 1_000_000_000 / self.rate_bps;
            self.queueing_ns.push(start - now);
            self.busy_until = leave;
            self.queued.push_back((leave, bytes));
            self.queued_bytes += bytes;
            self.max_queue = self.max_queue.max(self.queued_bytes);
            at = leave + self.prop.as_nanos() as u64;
        }
        self.packets.push((pkt, ce));
        self.flying
            .push(Reverse((at, self.seq, i, self.packets.len() - 1)));
        self.seq += 1;
    }

    /// Keeps `depth` 64 KiB WRITEs outstanding on every pair for `warm_up` and then for `d`:
    /// the counters count only `d` (the steady state, not the first round trip's burst of
    /// every window at once).
    fn run(&mut self, warm_up: Duration, d: Duration, depth: usize) {
        let n = self.pairs.len();
        let mut regions = Vec::new();
        for p in &mut self.pairs {
            let src = p.region(A, MSG, 1);
            let dst = p.zeroed(B, MSG);
            regions.push((src, dst));
        }
        let mut outstanding = vec![0usize; n];
        let mut next_id = 1u64;
        let warm_until = self.now + warm_up;
        let mut warm = !warm_up.is_zero();
        let until = warm_until + d;
        while self.now < until {
            if warm && self.now >= warm_until {
                warm = false;
                self.reset_counters();
            }
            for i in 0..n {
                let p = &mut self.pairs[i];
                p.now = self.now;
                for c in p.completions(A) {
                    assert_eq!(c.status, WcStatus::Success);
                    outstanding[i] -= 1;
                    self.done[i] += MSG as u64;
                }
                while outstanding[i] < depth {
                    let (src, dst) = &regions[i];
                    let w = write_all(next_id, src, dst);
                    next_id += 1;
                    p.post_send(A, w);
                    outstanding[i] += 1;
                }
                for side in [A, B] {
                    while let Some(pkt) = self.pairs[i].take_one(side) {
                        self.send(i, pkt);
                    }
                }
            }
            // The next event: a delivery or a timer.
            let mut next = self.flying.peek().map(|Reverse((t, ..))| *t);
            for p in &self.pairs {
                for s in &p.s {
                    if let Some(t) = s.qp.poll_timeout() {
                        next = Some(next.map_or(t.as_nanos(), |n| n.min(t.as_nanos())));
                    }
                }
            }
            let Some(next) = next else { break };
            self.now = Instant(next.max(self.now.as_nanos()));
            while let Some(&Reverse((t, _, i, k))) = self.flying.peek() {
                if t > self.now.as_nanos() {
                    break;
                }
                self.flying.pop();
                let (pkt, ce) = self.packets[k].clone();
                let p = &mut self.pairs[i];
                p.now = self.now;
                if ce {
                    p.s[1 - pkt.from].qp.on_congestion_experienced(self.now);
                }
                p.deliver(&pkt);
            }
            for p in &mut self.pairs {
                for s in &mut p.s {
                    if s.qp.poll_timeout().is_some_and(|t| t <= self.now) {
                        s.qp.handle_timeout(self.now);
                    }
                }
            }
        }
    }

    /// RED between `k` and 3k (marking chance rising to `red_max`), or a step at `k`.
    fn marks_at(&mut self, k: u64) -> bool {
        let q = self.queued_bytes;
        if self.red_max == 0.0 {
            return q > k;
        }
        if q <= k {
            return false;
        }
        if q >= 3 * k {
            return true;
        }
        let p = self.red_max * (q - k) as f64 / (2 * k) as f64;
        self.rng = self
            .rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.rng >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    fn reset_counters(&mut self) {
        self.max_queue = self.queued_bytes;
        self.drops = 0;
        self.marks = 0;
        self.done.iter_mut().for_each(|d| *d = 0);
        self.queueing_ns.clear();
        self.retransmits_before = self
            .pairs
            .iter()
            .map(|p| p.s[A].qp.stats().retransmits)
            .sum();
    }

    fn goodput_share(&self, d: Duration) -> f64 {
        let bits: u64 = self.done.iter().sum::<u64>() * 8;
        bits as f64 / d.as_secs_f64() / self.rate_bps as f64
    }

    fn retransmits(&self) -> u64 {
        let all: u64 = self
            .pairs
            .iter()
            .map(|p| p.s[A].qp.stats().retransmits)
            .sum();
        all - self.retransmits_before
    }

    /// Request packets the WRITEs completed in the measurement needed.
    fn needed(&self) -> u64 {
        self.done.iter().sum::<u64>() / MTU as u64
    }

    fn jain(&self) -> f64 {
        let x: Vec<f64> = self.done.iter().map(|&b| b as f64).collect();
        let s: f64 = x.iter().sum();
        let s2: f64 = x.iter().map(|v| v * v).sum();
        s * s / (x.len() as f64 * s2)
    }

    fn p99_queueing(&self) -> Duration {
        let mut q = self.queueing_ns.clone();
        q.sort_unstable();
        Duration::from_nanos(q[q.len() * 99 / 100])
    }
}

const RATE: u64 = 300_000_000;
const WARM_UP: Duration = Duration::from_millis(400);
const QUEUE: u64 = 64 * 1024;

/// Eight flows of 64 KiB WRITEs, 8 outstanding each, through 300 Mbit/s with a 64 KiB queue,
/// without congestion control: the queue overflows and the senders go back N again and again.
#[test]
fn without_congestion_control_eight_flows_overflow_a_shallow_queue() {
    let d = Duration::from_millis(300);
    let mut b = Bottleneck::new(8, &CcConfig::default(), RATE, QUEUE, None);
    b.run(WARM_UP, d, 8);
    assert!(b.drops > 100, "drops {}", b.drops);
    assert!(b.retransmits() > 100, "retransmits {}", b.retransmits());
}

/// The same with DCQCN and marking above 16 KiB, its increase steps scaled to this link
/// (1 and 10 Mbit/s, not mlx5's 5 and 50 made for 25-100 Gbit/s NICs, which here drop 150
/// packets in the same 300 ms): in the steady state nothing dropped, about 0.5 % sent again,
/// the link busy (of the 0.933 that 1024-byte payloads in 1098-byte frames allow) and shared
/// fairly, the queue under 40 KiB.
#[test]
fn dcqcn_through_a_marking_bottleneck_keeps_the_queue_short_and_the_link_busy() {
    let d = Duration::from_millis(300);
    let mut cc = dcqcn(10_000_000_000);
    cc.dcqcn.ai_bps = 1_000_000;
    cc.dcqcn.hai_bps = 10_000_000;
    let mut b = Bottleneck::new(8, &cc, RATE, QUEUE, Some(16 * 1024));
    b.run(WARM_UP, d, 8);
    let share = b.goodput_share(d);
    let cnps: u64 = b
        .pairs
        .iter()
        .map(|p| p.s[A].qp.congestion().stats.cnps_received)
        .sum();
    println!(
        "dcqcn: goodput {share:.3} of the link, drops {}, retransmits {}, marks {}, CNPs {cnps}, \
         max queue {} B, p99 queueing {:?}, Jain {:.3}",
        b.drops,
        b.retransmits(),
        b.marks,
        b.max_queue,
        b.p99_queueing(),
        b.jain()
    );
    assert_eq!(b.drops, 0);
    assert!(
        b.retransmits() * 100 <= b.needed(),
        "{} of {}",
        b.retransmits(),
        b.needed()
    );
    assert!(cnps > 0);
    assert!(share >= 0.8, "goodput {share:.3}");
    assert!(b.max_queue < 40 * 1024, "{}", b.max_queue);
    assert!(b.jain() >= 0.95, "Jain {:.3}", b.jain());
}

/// The same with the delay mode and no marking at all (a queue of 512 KiB that would hold
/// 14 ms): the round trips alone keep its queueing under 1 ms, nothing lost, the link full.
#[test]
fn the_delay_mode_holds_a_bottleneck_that_does_not_mark() {
    let d = Duration::from_millis(300);
    let cc = delay_mode();
    let mut b = Bottleneck::new(8, &cc, RATE, QUEUE * 8, None);
    b.run(WARM_UP, d, 8);
    let share = b.goodput_share(d);
    println!(
        "delay: goodput {share:.3} of the link, drops {}, retransmits {}, max queue {} B, p99 \
         queueing {:?}, Jain {:.3}",
        b.drops,
        b.retransmits(),
        b.max_queue,
        b.p99_queueing(),
        b.jain()
    );
    assert_eq!((b.drops, b.retransmits()), (0, 0));
    assert!(share >= 0.9, "goodput {share:.3}");
    assert!(
        b.p99_queueing() < Duration::from_millis(1),
        "{:?}",
        b.p99_queueing()
    );
    assert!(b.jain() >= 0.95, "Jain {:.3}", b.jain());
}

/// A READ of several packets is answered after its whole transfer: the delay mode takes no
/// round trip from it (1 MiB READs stream for 1 ms on this wire, four times the target), so
/// their own transfer never shrinks the window.
#[test]
fn the_delay_mode_times_no_multi_packet_read() {
    let mut p = Pair::new();
    p.s[A].qp.set_congestion(&delay_mode());
    let len = 1 << 20;
    let src = p.region(B, len, 3);
    let dst = p.zeroed(A, len);
    for id in 0..4 {
        p.post_send(
            A,
            wr(
                id,
                SendOp::Read {
                    remote_addr: src.addr,
                    rkey: src.rkey,
                },
                vec![sge(&dst, 0, len as u32)],
            ),
        );
    }
    p.run();
    assert_eq!(p.completions(A).len(), 4);
    assert_eq!(p.bytes(A, &dst), p.bytes(B, &src));
    let c = p.s[A].qp.congestion();
    assert_eq!(c.stats.rate_cuts, 0, "{:?}", c.stats);
    assert_eq!(c.cwnd(), Some(DelayParams::default().initial_window));
}
