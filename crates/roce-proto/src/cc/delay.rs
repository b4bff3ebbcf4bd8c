//! The delay-based mode, for fabrics that do not mark (Swift, Kumar et al., SIGCOMM 2020, in
//! outline): the round trip of every acknowledged request packet, from this QP's own clock,
//! steers a congestion window in packets.
//!
//! - Each acknowledgement below the target delay widens the window by
//!   [`DelayParams::ai_packets`] per window acknowledged (additive increase, `ai / cwnd` per
//!   packet).
//! - A round is one smoothed round trip. At its end the window shrinks once if the round's
//!   **smallest** sample was above the target, by `beta * (delay - target) / delay`, at most
//!   [`DelayParams::max_decrease_percent`]: queueing delay raises every sample of a round,
//!   while a sample taken across a preemption of this VM (or of the peer) raises only the one
//!   it spans, so it never shrinks the window.
//! - The target is [`DelayParams::target`] (the fabric's round trip plus the queueing it
//!   allows, configured as Swift's base target is: a base measured per flow would let a flow
//!   that starts behind a standing queue take that queue for its path), plus Swift's flow
//!   scaling: up to [`DelayParams::fs_range`] more for a small window (many flows share the
//!   bottleneck), nothing for a large one: `fs = clamp(a / sqrt(cwnd) + b, 0, fs_range)`,
//!   `fs(0.1) = fs_range`, `fs(100) = 0` (Swift's curve; `fs(1)` is 0.29 of the range).
//! - Below one packet the window becomes a rate: one packet per `srtt / cwnd`, paced.
//!   Never below [`DelayParams::min_window`].
//! - Only a QP its window holds back moves its window (RFC 7661's rule for TCP, "cwnd-limited"):
//!   neither a decrease nor an increase unless the window or the pacer stopped a packet that
//!   was ready ([`DelayControl::on_blocked`]) this round or the one before. A QP sending less
//!   than its window allows (a ping-pong, a request-response) adds at most that to a queue;
//!   cutting its window below one packet would pace it, adding a wait per message for nothing,
//!   and growing it would store a burst it never tried.

use crate::time::Instant;
use core::time::Duration;

/// The window (packets) at and below which flow scaling adds its whole range (Swift's
/// `fs_min_cwnd`).
pub const FS_MIN_CWND: f64 = 0.1;
/// The window at and above which flow scaling adds nothing (Swift's `fs_max_cwnd`).
pub const FS_MAX_CWND: f64 = 100.0;

/// The delay mode's parameters (per profile, `[congestion]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DelayParams {
    /// The window a QP starts with, in packets.
    pub initial_window: f64,
    /// The smallest window (a fraction of a packet: paced).
    pub min_window: f64,
    /// The round trip aimed at: the path's own plus the queueing allowed.
    pub target: Duration,
    /// Extra target for a flow with a small window (Swift's flow scaling).
    pub fs_range: Duration,
    /// Additive increase per round trip, in packets.
    pub ai_packets: f64,
    /// Decrease gain beta, in percent.
    pub beta_percent: u32,
    /// Largest decrease per round, in percent.
    pub max_decrease_percent: u32,
    /// Bytes of a full packet on the wire (the rate below one packet of window).
    pub packet_bytes: u32,
}

impl Default for DelayParams {
    /// A target of 20 us plus up to 150 us of flow scaling (a datacenter's Swift aims at
    /// 10-25 us of fabric delay; here the round trip is the hosts' too: 23 us idle over
    /// net_af_packet on this VM); Swift's beta 0.8, largest decrease 0.5, one packet of
    /// additive increase per round trip; a start at 16 packets. bench/README.md
    /// ("Congestion") has the runs that chose them: against the 250 + 250 us before, the same
    /// goodput and fairness, and a third of the latency probe's p99.
    fn default() -> Self {
        DelayParams {
            initial_window: 16.0,
            min_window: 0.01,
            target: Duration::from_micros(20),
            fs_range: Duration::from_micros(150),
            ai_packets: 1.0,
            beta_percent: 80,
            max_decrease_percent: 50,
            packet_bytes: 1024 + super::WIRE_OVERHEAD,
        }
    }
}

/// One QP's delay controller.
#[derive(Clone, Debug)]
pub struct DelayControl {
    p: DelayParams,
    /// The congestion window, in packets.
    cwnd: f64,
    srtt_ns: u64,
    /// This round: its end and its smallest sample.
    round_end: Instant,
    round_min_ns: u64,
    /// The window or the pacer stopped a ready packet this round, the round before.
    blocked: bool,
    blocked_before: bool,
    /// Samples taken, rounds that decreased.
    pub samples: u64,
    pub decreases: u64,
}

impl DelayControl {
    pub fn new(p: DelayParams) -> DelayControl {
        DelayControl {
            p,
            cwnd: p.initial_window.max(p.min_window),
            srtt_ns: 0,
            round_end: Instant::from_nanos(0),
            round_min_ns: u64::MAX,
            blocked: false,
            blocked_before: false,
            samples: 0,
            decreases: 0,
        }
    }

    /// The window in packets.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The PSNs that may be outstanding (at least one).
    #[inline(always)]
    pub fn window_limit(&self) -> u32 {
        (self.cwnd as u32).max(1)
    }

    /// Below one packet of window, the rate that sends one packet per `srtt / cwnd`.
    #[inline(always)]
    pub fn rate_bps(&self) -> Option<u64> {
        if self.cwnd >= 1.0 || self.srtt_ns == 0 {
            return None;
        }
        let bits = f64::from(self.p.packet_bytes) * 8.0 * self.cwnd;
        Some((bits * 1e9 / self.srtt_ns as f64).max(1.0) as u64)
    }

    /// The smoothed round trip, once sampled.
    pub fn srtt(&self) -> Option<Duration> {
        (self.srtt_ns != 0).then(|| Duration::from_nanos(self.srtt_ns))
    }

    /// The target delay now.
    pub fn target(&self) -> Duration {
        self.p.target + self.flow_scaling()
    }

    /// Swift's flow scaling over the window: `a / sqrt(w) + b`, the whole range at
    /// [`FS_MIN_CWND`] and below, none at [`FS_MAX_CWND`] and above. Below one packet it
    /// still grows as the window shrinks, so of the paced flows the slowest aims highest and
    /// catches up (with the whole range at one packet, every paced flow had one target, and in
    /// the simulator three of eight starved at 50 us: Jain's index 0.71).
    fn flow_scaling(&self) -> Duration {
        let range = self.p.fs_range.as_nanos() as f64;
        let a = range / (1.0 / FS_MIN_CWND.sqrt() - 1.0 / FS_MAX_CWND.sqrt());
        let b = -a / FS_MAX_CWND.sqrt();
        let fs = (a / self.cwnd.max(FS_MIN_CWND).sqrt() + b).clamp(0.0, range);
        Duration::from_nanos(fs as u64)
    }

    /// The window or the pacer stopped a packet that was ready to leave.
    #[inline(always)]
    pub fn on_blocked(&mut self) {
        self.blocked = true;
    }

    /// A round-trip sample of `rtt_ns` at `now`, from an acknowledgement covering `newly`
    /// packets (`cc::SendTimes`).
    pub fn on_sample(&mut self, rtt_ns: u64, newly: u32, now: Instant) {
        let rtt = rtt_ns;
        self.samples += 1;
        self.srtt_ns = if self.srtt_ns == 0 {
            rtt
        } else {
            (self.srtt_ns * 7 + rtt) / 8
        };
        let target = self.target().as_nanos() as u64;
        let limited = self.blocked || self.blocked_before;
        if rtt <= target && limited {
            let n = f64::from(newly);
            self.cwnd += if self.cwnd >= 1.0 {
                self.p.ai_packets * n / self.cwnd
            } else {
                self.p.ai_packets * n
            };
            self.cwnd = self
                .cwnd
                .min(f64::from(crate::transport::MAX_OUTSTANDING_PSNS));
        }
        self.round_min_ns = self.round_min_ns.min(rtt);
        if now >= self.round_end {
            let d = self.round_min_ns;
            self.round_min_ns = u64::MAX;
            self.round_end = now + Duration::from_nanos(self.srtt_ns.max(1));
            self.blocked_before = core::mem::take(&mut self.blocked);
            if d > target && limited {
                let cut = (f64::from(self.p.beta_percent) / 100.0 * (d - target) as f64 / d as f64)
                    .min(f64::from(self.p.max_decrease_percent) / 100.0);
                self.cwnd = (self.cwnd * (1.0 - cut)).max(self.p.min_window);
                self.decreases += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_us(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    /// Samples of packets sent every `every_us` from `t0_us` by a QP its window holds back,
    /// each acknowledged alone `rtt(i)` us later; returns the time after the last.
    fn run(
        c: &mut DelayControl,
        _psn0: u32,
        n: u32,
        t0_us: u64,
        every_us: u64,
        rtt: impl Fn(u32) -> u64,
    ) -> u64 {
        let mut last = t0_us;
        for i in 0..n {
            let t = t0_us + u64::from(i) * every_us;
            c.on_blocked();
            c.on_sample(rtt(i) * 1000, 1, at_us(t + rtt(i)));
            last = t + rtt(i);
        }
        last
    }

    #[test]
    fn no_queueing_widens_the_window() {
        let mut c = DelayControl::new(DelayParams::default());
        run(&mut c, 0, 1000, 1000, 10, |_| 20);
        assert!(c.cwnd() > 16.0 + 30.0, "{}", c.cwnd());
        assert_eq!(c.decreases, 0);
        assert_eq!(c.srtt(), Some(Duration::from_micros(20)));
    }

    #[test]
    fn standing_queue_shrinks_the_window_once_per_round_then_it_grows_back() {
        let mut c = DelayControl::new(DelayParams::default());
        let t = run(&mut c, 0, 100, 1000, 10, |_| 20);
        let before = c.cwnd();
        // A queue of 2 ms on every packet: cut once per round, at most by half.
        let t = run(&mut c, 100, 300, t, 10, |_| 2_020);
        let low = c.cwnd();
        assert!(c.decreases >= 2 && c.decreases <= 6, "{}", c.decreases);
        assert!(low < before / 2.0, "{before} -> {low}");
        // The queue drains: additive increase.
        run(&mut c, 400, 2000, t, 10, |_| 20);
        assert!(c.cwnd() > low);
    }

    #[test]
    fn a_qp_its_window_does_not_hold_back_keeps_its_window_behind_a_queue() {
        let mut c = DelayControl::new(DelayParams::default());
        let t = run(&mut c, 0, 100, 1000, 10, |_| 20);
        // A ping-pong from now on: one message per 2 ms round trip behind a 2 ms queue, never
        // stopped by the window. Once the rounds it was held back in are over (this one and
        // the next), its window neither shrinks (no pacing) nor grows.
        for i in 0..3u64 {
            c.on_sample(2_020_000, 1, at_us(t + 2_100 * (i + 1)));
        }
        let before = c.cwnd();
        assert!(before > 1.0, "{before}");
        for i in 3..200u64 {
            c.on_sample(2_020_000, 1, at_us(t + 2_100 * (i + 1)));
        }
        assert_eq!(c.cwnd(), before);
        assert_eq!(c.rate_bps(), None);
        // Held back by its window again (a bulk sender): the queue cuts it.
        c.on_blocked();
        c.on_sample(2_020_000, 1, at_us(t + 2_100 * 202));
        c.on_blocked();
        c.on_sample(2_020_000, 1, at_us(t + 2_100 * 204));
        assert!(c.cwnd() < before, "{before} -> {}", c.cwnd());
    }

    #[test]
    fn a_sample_across_a_preemption_does_not_shrink_the_window() {
        let mut c = DelayControl::new(DelayParams::default());
        let t = run(&mut c, 0, 100, 1000, 10, |_| 20);
        // One sample in ten spans a 5 ms stall; the others are quick.
        run(&mut c, 100, 2000, t, 10, |i| {
            if i % 10 == 0 {
                5_020
            } else {
                20
            }
        });
        assert_eq!(c.decreases, 0);
    }

    #[test]
    fn below_one_packet_the_window_is_a_rate_and_small_windows_get_a_larger_target() {
        let mut c = DelayControl::new(DelayParams::default());
        run(&mut c, 0, 10, 1000, 10, |_| 100);
        assert_eq!(c.rate_bps(), None);
        let wide = c.target();
        c.cwnd = 0.5;
        // Half a 1098-byte packet per 100 us: 43.9 Mbit/s.
        assert_eq!(c.rate_bps(), Some(43_920_000));
        assert!(
            c.target() > wide + Duration::from_micros(50),
            "{:?}",
            c.target()
        );
        assert_eq!(c.window_limit(), 1);
    }
}
