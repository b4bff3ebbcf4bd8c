//! A simulated Ethernet wire between two ports, with a virtual clock: fixed delay plus jitter,
//! and seeded random loss, duplication, reordering and bit corruption. Deterministic for a seed.

use crate::time::Instant;
use core::time::Duration;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// The two ends of the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    A,
    B,
}

impl Side {
    /// The other end.
    pub fn peer(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }
}

/// Impairments of the wire. Probabilities are per frame, in 0.0..=1.0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// One-way delay of every frame.
    pub delay: Duration,
    /// Probability a frame is lost.
    pub loss: f64,
    /// Probability a frame is delivered twice.
    pub duplicate: f64,
    /// Probability a frame is held back by `reorder_delay` extra, so later frames overtake it.
    pub reorder: f64,
    /// Extra delay of a reordered frame.
    pub reorder_delay: Duration,
    /// Probability one random bit of a frame is flipped.
    pub corrupt: f64,
    /// Seed of the impairment generator.
    pub seed: u64,
    /// A queue that A's frames pass before the wire: a switch port towards B.
    pub bottleneck: Option<Bottleneck>,
}

/// A switch port's queue, A to B: frames leave at `rate_bps` (bits of the whole frame), wait
/// in a queue of at most `queue_bytes` (dropped beyond it), and ECN-capable IPv4 frames that
/// find more than `mark_at_bytes` queued are marked congestion experienced (RFC 3168; as a
/// RED/ECN switch with its two thresholds equal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bottleneck {
    pub rate_bps: u64,
    pub queue_bytes: u64,
    pub mark_at_bytes: Option<u64>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            delay: Duration::from_micros(2),
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(10),
            corrupt: 0.0,
            seed: 1,
            bottleneck: None,
        }
    }
}

impl LinkConfig {
    /// A clean wire.
    pub fn clean() -> Self {
        Self::default()
    }

    /// The same loss, duplication and reordering probability `p` each.
    pub fn lossy(p: f64, seed: u64) -> Self {
        LinkConfig {
            loss: p,
            duplicate: p,
            reorder: p,
            seed,
            ..Self::default()
        }
    }
}

/// What the wire did, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    /// At the bottleneck: frames dropped with the queue full, frames marked CE, the most
    /// bytes queued.
    pub queue_drops: u64,
    pub ce_marked: u64,
    pub max_queued: u64,
    /// Frames through the bottleneck and the time they waited there in all (nanoseconds).
    pub queued_frames: u64,
    pub queueing_ns: u64,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    seq: u64,
    to: Side,
    frame: Vec<u8>,
}

/// The wire. Frames go in with `send`, come out with `poll_deliver` once their time has come.
pub struct Link {
    config: LinkConfig,
    rng: ChaCha8Rng,
    queue: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    stats: LinkStats,
    /// The bottleneck's queue: when each queued frame leaves, and its bytes.
    queued: std::collections::VecDeque<(Instant, u64)>,
    queued_bytes: u64,
}

impl Link {
    /// A wire with the given impairments.
    pub fn new(config: LinkConfig) -> Self {
        Link {
            rng: ChaCha8Rng::seed_from_u64(config.seed),
            config,
            queue: BinaryHeap::new(),
            seq: 0,
            stats: LinkStats::default(),
            queued: std::collections::VecDeque::new(),
            queued_bytes: 0,
        }
    }

    /// A's frame through the bottleneck at `now`: when it leaves the queue, or `None` when
    /// it is dropped; marks it CE when the queue is over the threshold and it is ECN-capable.
    fn through_bottleneck(
        &mut self,
        b: Bottleneck,
        now: Instant,
        frame: &mut [u8],
    ) -> Option<Instant> {
        while self.queued.front().is_some_and(|&(leave, _)| leave <= now) {
            if let Some((_, n)) = self.queued.pop_front() {
                self.queued_bytes -= n;
            }
        }
        let bytes = frame.len() as u64;
        if self.queued_bytes + bytes > b.queue_bytes {
            self.stats.queue_drops += 1;
            return None;
        }
        if b.mark_at_bytes.is_some_and(|k| self.queued_bytes > k) && mark_ce(frame) {
            self.stats.ce_marked += 1;
        }
        let start = self.queued.back().map_or(now, |&(t, _)| t.max(now));
        self.stats.queued_frames += 1;
        self.stats.queueing_ns += start.saturating_nanos_since(now);
        let leave = start + Duration::from_nanos(bytes * 8 * 1_000_000_000 / b.rate_bps.max(1));
        self.queued.push_back((leave, bytes));
        self.queued_bytes += bytes;
        self.stats.max_queued = self.stats.max_queued.max(self.queued_bytes);
        Some(leave)
    }

    /// Changes the impairments from now on (frames in flight keep their fate).
    pub fn set_config(&mut self, config: LinkConfig) {
        self.config = config;
    }

    /// The impairments in force.
    pub fn config(&self) -> &LinkConfig {
        &self.config
    }

    /// Counters.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && self.rng.gen::<f64>() < p
    }

    /// Puts a frame sent by `from` on the wire at `now`.
    pub fn send(&mut self, now: Instant, from: Side, mut frame: Vec<u8>) {
        self.stats.sent += 1;
        let mut now = now;
        if let (Some(b), Side::A) = (self.config.bottleneck, from) {
            match self.through_bottleneck(b, now, &mut frame) {
                Some(leave) => now = leave,
                None => return,
            }
        }
        if self.chance(self.config.loss) {
            self.stats.lost += 1;
            return;
        }
        if !frame.is_empty() && self.chance(self.config.corrupt) {
            let bit = self.rng.gen_range(0..frame.len() * 8);
            frame[bit / 8] ^= 1 << (bit % 8);
            self.stats.corrupted += 1;
        }
        let copies = if self.chance(self.config.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for i in 0..copies {
            let mut at = now + self.config.delay;
            if self.chance(self.config.reorder) {
                self.stats.reordered += 1;
                at += self.config.reorder_delay;
            }
            // A duplicate arrives a little after the original.
            at += Duration::from_nanos(i as u64 * 100);
            self.seq += 1;
            let f = if i + 1 == copies {
                core::mem::take(&mut frame)
            } else {
                frame.clone()
            };
            self.queue.push(Reverse(InFlight {
                at,
                seq: self.seq,
                to: from.peer(),
                frame: f,
            }));
        }
    }

    /// The next frame due at or before `now`, with the side receiving it.
    pub fn poll_deliver(&mut self, now: Instant) -> Option<(Side, Vec<u8>)> {
        if self.queue.peek().is_some_and(|Reverse(f)| f.at <= now) {
            let Reverse(f) = self.queue.pop()?;
            self.stats.delivered += 1;
            Some((f.to, f.frame))
        } else {
            None
        }
    }

    /// When the next frame is due.
    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse(f)| f.at)
    }

    /// Frames still on the wire.
    pub fn in_flight(&self) -> usize {
        self.queue.len()
    }

    /// Drops every frame on the wire (a cable pull).
    pub fn clear(&mut self) {
        self.stats.lost += self.queue.len() as u64;
        self.queue.clear();
    }
}

/// Sets an untagged IPv4 frame's ECN field to CE if it is ECN-capable (ECT(0) or ECT(1)),
/// with the header checksum updated (RFC 1624); the ICRC does not cover the field. True when
/// marked.
fn mark_ce(frame: &mut [u8]) -> bool {
    const IP: usize = 14;
    if frame.len() < IP + 20 || frame[12..14] != [0x08, 0x00] || frame[IP + 1] & 3 == 0 {
        return false;
    }
    let old = u16::from_be_bytes([frame[IP], frame[IP + 1]]);
    frame[IP + 1] |= 3;
    let new = u16::from_be_bytes([frame[IP], frame[IP + 1]]);
    let sum = u16::from_be_bytes([frame[IP + 10], frame[IP + 11]]);
    // HC' = ~(~HC + ~m + m')
    let mut acc = u32::from(!sum) + u32::from(!old) + u32::from(new);
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    frame[IP + 10..IP + 12].copy_from_slice(&(!(acc as u16)).to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(link: &mut Link, until: Instant) -> Vec<(Side, Vec<u8>)> {
        let mut out = Vec::new();
        while let Some(f) = link.poll_deliver(until) {
            out.push(f);
        }
        out
    }

    #[test]
    fn clean_wire_delivers_in_order_after_the_delay() {
        let mut link = Link::new(LinkConfig::clean());
        let t0 = Instant::ZERO;
        for i in 0..10u8 {
            link.send(t0, Side::A, vec![i]);
        }
        assert!(link.poll_deliver(t0).is_none(), "nothing before the delay");
        let got = drain(&mut link, t0 + Duration::from_micros(2));
        assert_eq!(got.len(), 10);
        for (i, (side, f)) in got.iter().enumerate() {
            assert_eq!(*side, Side::B);
            assert_eq!(f, &vec![i as u8]);
        }
    }

    #[test]
    fn impairments_are_seeded_and_counted() {
        let run = |seed| {
            let mut link = Link::new(LinkConfig {
                corrupt: 0.05,
                ..LinkConfig::lossy(0.05, seed)
            });
            for i in 0..2000u16 {
                link.send(Instant::ZERO, Side::A, i.to_be_bytes().to_vec());
            }
            let got = drain(&mut link, Instant::from_nanos(1_000_000));
            (link.stats(), got)
        };
        let (s1, g1) = run(7);
        let (s2, g2) = run(7);
        assert_eq!(s1, s2);
        assert_eq!(g1, g2);
        assert_eq!(s1.sent, 2000);
        assert_eq!(s1.delivered, s1.sent - s1.lost + s1.duplicated);
        for n in [s1.lost, s1.duplicated, s1.reordered, s1.corrupted] {
            assert!((40..=170).contains(&n), "{s1:?}");
        }
        // Reordering happened: some frame arrives after a later-sent one.
        let order: Vec<u16> = g1
            .iter()
            .filter(|(_, f)| f.len() == 2)
            .map(|(_, f)| u16::from_be_bytes([f[0], f[1]]))
            .collect();
        assert!(order.windows(2).any(|w| w[0] > w[1]));
        let (s3, _) = run(8);
        assert_ne!(s1, s3);
    }

    /// CE on an ECT(0) frame, the checksum still valid; Not-ECT frames stay as they are.
    #[test]
    fn marking_sets_ce_only_on_ecn_capable_ipv4_and_keeps_the_checksum() {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[15] = (26 << 2) | 2;
        f[16..18].copy_from_slice(&46u16.to_be_bytes());
        f[22] = 64;
        f[23] = 17;
        let sum = crate::wire::ipv4::ones_complement_sum(&f[14..34], 0);
        f[24..26].copy_from_slice(&(!sum).to_be_bytes());
        let mut not_ect = f.clone();
        not_ect[15] = 26 << 2;
        let before = not_ect.clone();
        assert!(!mark_ce(&mut not_ect));
        assert_eq!(not_ect, before);
        assert!(mark_ce(&mut f));
        assert_eq!(f[15], (26 << 2) | 3);
        let ip: &[u8; 20] = f[14..34].try_into().unwrap();
        assert!(crate::wire::ipv4::header_checksum_ok(ip));
    }
}
