//! DCQCN's reaction point (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
//! SIGCOMM 2015, §3.1 and fig. 5; the knobs of mlx5's `roce_rp`): a QP's sending rate, cut on
//! a CNP and recovered by a timer and a byte counter.
//!
//! - A QP starts unlimited (at line rate, no pacing). The first CNP starts limiting from
//!   [`DcqcnParams::line_rate_bps`].
//! - CNP: the target rate takes the current rate, the current rate is cut to
//!   `rc * (1 - alpha / 2)` (at most once per [`DcqcnParams::cut_period`], never below
//!   [`DcqcnParams::min_rate_bps`]: no CNP flood holds a QP lower), and
//!   `alpha = (1 - g) * alpha + g`.
//! - Without a CNP for [`DcqcnParams::alpha_period`], `alpha = (1 - g) * alpha`.
//! - Increase events, each [`DcqcnParams::increase_period`] (timer) and each
//!   [`DcqcnParams::byte_reset`] bytes sent (byte counter), counted since the last cut:
//!   while both counts are below F ([`DcqcnParams::threshold`]), fast recovery
//!   (`rc = (rt + rc) / 2`); once one passes F, additive increase (`rt += ai`); once both do,
//!   hyper increase (`rt += i * hai`, `i` the smaller count past F); then `rc = (rt + rc) / 2`.
//!   At line rate the limit is lifted.
//!
//! The timers are not armed: they are caught up with `now` whenever the QP sends or takes a
//! CNP ([`Dcqcn::advance`]), so an unlimited QP costs nothing and an idle limited one nothing
//! until it sends again (then it finds the increases it missed, as a NIC's timers would have
//! made them).

use crate::time::Instant;
use core::time::Duration;

/// Fixed point of alpha: 1.0.
const ALPHA_ONE: u64 = 1 << 20;
/// Timer events caught up in one step at most; an idle spell longer than that many events
/// lifts the limit (the rate would have reached line rate long before).
const MAX_CATCH_UP: u32 = 4096;

/// DCQCN's parameters (per profile, `[congestion]`; defaults in [`DcqcnParams::default`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DcqcnParams {
    /// The rate limiting starts from at the first CNP, and where recovery lifts the limit.
    pub line_rate_bps: u64,
    /// No cut goes below this rate.
    pub min_rate_bps: u64,
    /// Alpha's gain, as 1/`g_inverse` (the paper's g = 1/256).
    pub g_inverse: u32,
    /// Alpha decays each period without a CNP (the paper's K, 55 us).
    pub alpha_period: Duration,
    /// At most one cut per period (mlx5 `rate_reduce_monitor_period`, 4 us).
    pub cut_period: Duration,
    /// The increase timer (mlx5 `rpg_time_reset`, 300 us; the paper's T, 55 us).
    pub increase_period: Duration,
    /// The byte counter (mlx5 `rpg_byte_reset`, 32767 bytes; the paper's B, 10 MB).
    pub byte_reset: u32,
    /// F: fast recovery events before additive increase (the paper's 5; mlx5 `rpg_threshold` 1).
    pub threshold: u32,
    /// Additive increase step (mlx5 `rpg_ai_rate`, 5 Mbit/s).
    pub ai_bps: u64,
    /// Hyper increase step (mlx5 `rpg_hai_rate`, 50 Mbit/s).
    pub hai_bps: u64,
}

impl Default for DcqcnParams {
    /// The paper's g, K, F with mlx5's timer, byte counter, cut period and steps (mlx5's
    /// timescales suit the lower rates here: at 300 Mbit/s the paper's 10 MB byte counter
    /// would count once in 0.27 s). Line rate 10 Gbit/s, floor 10 Mbit/s.
    fn default() -> Self {
        DcqcnParams {
            line_rate_bps: 10_000_000_000,
            min_rate_bps: 10_000_000,
            g_inverse: 256,
            alpha_period: Duration::from_micros(55),
            cut_period: Duration::from_micros(4),
            increase_period: Duration::from_micros(300),
            byte_reset: 32_767,
            threshold: 5,
            ai_bps: 5_000_000,
            hai_bps: 50_000_000,
        }
    }
}

/// One QP's reaction point.
#[derive(Clone, Copy, Debug)]
pub struct Dcqcn {
    p: DcqcnParams,
    /// False: at line rate, no limit.
    limited: bool,
    /// Current and target rate (bits per second).
    rc: u64,
    rt: u64,
    /// Alpha in units of 1 / [`ALPHA_ONE`].
    alpha: u64,
    last_cut: Option<Instant>,
    /// The next alpha decay and the next timer increase.
    alpha_at: Instant,
    increase_at: Instant,
    /// Increase events of the timer and of the byte counter since the last cut.
    t_count: u32,
    b_count: u32,
    /// Bytes sent since the byte counter's last event.
    bytes: u64,
    /// Cuts made and CNPs that came within a cut period of the last cut (no cut).
    pub cuts: u64,
}

impl Dcqcn {
    pub fn new(p: DcqcnParams) -> Dcqcn {
        Dcqcn {
            p,
            limited: false,
            rc: p.line_rate_bps,
            rt: p.line_rate_bps,
            alpha: ALPHA_ONE,
            last_cut: None,
            alpha_at: Instant::from_nanos(0),
            increase_at: Instant::from_nanos(0),
            t_count: 0,
            b_count: 0,
            bytes: 0,
            cuts: 0,
        }
    }

    /// The rate to pace at; `None` when unlimited.
    #[inline(always)]
    pub fn rate_bps(&self) -> Option<u64> {
        self.limited.then_some(self.rc)
    }

    /// The target rate while limited.
    pub fn target_bps(&self) -> Option<u64> {
        self.limited.then_some(self.rt)
    }

    /// Alpha, in millionths.
    pub fn alpha_ppm(&self) -> u64 {
        self.alpha * 1_000_000 / ALPHA_ONE
    }

    /// A CNP for this QP at `now`.
    pub fn on_cnp(&mut self, now: Instant) {
        self.advance(now);
        let g = u64::from(self.p.g_inverse.max(1));
        self.alpha = self.alpha * (g - 1) / g + ALPHA_ONE / g;
        self.alpha_at = now + self.p.alpha_period;
        if !self.limited {
            self.limited = true;
            self.rc = self.p.line_rate_bps;
            self.rt = self.p.line_rate_bps;
        }
        if self
            .last_cut
            .is_some_and(|t| now.saturating_duration_since(t) < self.p.cut_period)
        {
            return;
        }
        self.last_cut = Some(now);
        self.cuts += 1;
        self.rt = self.rc;
        let cut = (u128::from(self.rc) * u128::from(self.alpha) / u128::from(2 * ALPHA_ONE)) as u64;
        self.rc = (self.rc - cut).max(self.p.min_rate_bps);
        self.t_count = 0;
        self.b_count = 0;
        self.bytes = 0;
        self.increase_at = now + self.p.increase_period;
    }

    /// `bytes` sent at `now`: the byte counter, and the timers caught up.
    #[inline(always)]
    pub fn on_sent(&mut self, now: Instant, bytes: u32) {
        if !self.limited {
            return;
        }
        self.advance(now);
        self.bytes += u64::from(bytes);
        let reset = u64::from(self.p.byte_reset.max(1));
        while self.limited && self.bytes >= reset {
            self.bytes -= reset;
            self.b_count = self.b_count.saturating_add(1);
            self.increase();
        }
    }

    /// Runs the alpha and increase timers' events due by `now`, in time order.
    pub fn advance(&mut self, now: Instant) {
        let mut events = 0;
        while self.limited {
            let next = self.alpha_at.min(self.increase_at);
            if next > now {
                return;
            }
            events += 1;
            if events > MAX_CATCH_UP {
                self.lift();
                return;
            }
            if self.alpha_at <= self.increase_at {
                let g = u64::from(self.p.g_inverse.max(1));
                self.alpha = self.alpha * (g - 1) / g;
                self.alpha_at += self.p.alpha_period.max(Duration::from_nanos(1));
            } else {
                self.t_count = self.t_count.saturating_add(1);
                self.increase_at += self.p.increase_period.max(Duration::from_nanos(1));
                self.increase();
            }
        }
    }

    /// One increase event (fast recovery, additive or hyper increase).
    fn increase(&mut self) {
        let f = self.p.threshold;
        let (lo, hi) = (
            self.t_count.min(self.b_count),
            self.t_count.max(self.b_count),
        );
        if hi < f {
            // Fast recovery: towards the rate before the cut.
        } else if lo > f {
            self.rt = self
                .rt
                .saturating_add(u64::from(lo - f).saturating_mul(self.p.hai_bps));
        } else {
            self.rt = self.rt.saturating_add(self.p.ai_bps);
        }
        self.rt = self.rt.min(self.p.line_rate_bps);
        self.rc = (self.rt + self.rc).div_ceil(2);
        if self.rc >= self.p.line_rate_bps {
            self.lift();
        }
    }

    /// Back at line rate: no limit.
    fn lift(&mut self) {
        self.limited = false;
        self.rc = self.p.line_rate_bps;
        self.rt = self.p.line_rate_bps;
        self.t_count = 0;
        self.b_count = 0;
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at_us(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    fn params() -> DcqcnParams {
        DcqcnParams {
            line_rate_bps: 1_000_000_000,
            ..DcqcnParams::default()
        }
    }

    #[test]
    fn unlimited_until_the_first_cnp_which_halves_line_rate() {
        let mut d = Dcqcn::new(params());
        d.on_sent(at_us(0), 1_000_000);
        assert_eq!(d.rate_bps(), None);
        d.on_cnp(at_us(10));
        // alpha = 1 -> (1 - g) + g = 1: the cut is rc / 2.
        assert_eq!(d.rate_bps(), Some(500_000_000));
        assert_eq!(d.target_bps(), Some(1_000_000_000));
    }

    #[test]
    fn cnps_within_the_cut_period_cut_once() {
        let mut d = Dcqcn::new(params());
        d.on_cnp(at_us(10));
        d.on_cnp(at_us(12));
        assert_eq!(d.rate_bps(), Some(500_000_000));
        assert_eq!(d.cuts, 1);
        d.on_cnp(at_us(15));
        assert_eq!(d.cuts, 2);
        assert!(d.rate_bps().unwrap() < 260_000_000);
    }

    #[test]
    fn a_cnp_flood_holds_no_qp_below_the_floor() {
        let mut d = Dcqcn::new(params());
        for i in 0..100_000u64 {
            d.on_cnp(at_us(10 + i * 5));
        }
        assert_eq!(d.rate_bps(), Some(params().min_rate_bps));
    }

    #[test]
    fn alpha_decays_without_cnps_so_later_cuts_are_milder() {
        let mut d = Dcqcn::new(params());
        d.on_cnp(at_us(0));
        // 20 alpha periods (1.1 ms, still limited) without a CNP: alpha = (255/256)^20.
        d.advance(at_us(20 * 55));
        let a = d.alpha_ppm();
        assert!((920_000..=930_000).contains(&a), "{a}");
        assert!(d.rate_bps().is_some());
        // The next cut takes alpha / 2 of the rate, not half.
        let before = d.rate_bps().unwrap();
        d.on_cnp(at_us(20 * 55 + 1));
        let after = d.rate_bps().unwrap();
        assert!(after > before / 2 + before / 50, "{before} -> {after}");
    }

    #[test]
    fn recovery_fast_then_additive_then_hyper_back_to_line_rate() {
        let mut d = Dcqcn::new(params());
        d.on_cnp(at_us(0));
        let rc0 = d.rate_bps().unwrap();
        // Fast recovery: each timer event halves the distance to the target (1 Gbit/s).
        d.advance(at_us(300));
        let rc1 = d.rate_bps().unwrap();
        assert_eq!(rc1, (rc0 + 1_000_000_000).div_ceil(2));
        // 5 events of fast recovery reach within 1/64 of the target; additive and hyper
        // increase need the byte counter too: with nothing sent the timer alone adds ai per
        // event, so recovery to line rate is slow but steady.
        d.advance(at_us(300 * 5));
        let rc5 = d.rate_bps().unwrap();
        assert!(rc5 > 980_000_000 && rc5 < 1_000_000_000, "{rc5}");
        // Sending at the rate: byte counter events push both counts past F, hyper increase
        // lifts the limit.
        let mut now = 300 * 5;
        while d.rate_bps().is_some() && now < 1_000_000 {
            now += 30;
            d.on_sent(at_us(now), 4096);
        }
        assert_eq!(d.rate_bps(), None, "still limited after {now} us");
    }

    #[test]
    fn an_idle_spell_catches_up_at_the_next_send() {
        let mut d = Dcqcn::new(params());
        d.on_cnp(at_us(0));
        assert!(d.rate_bps().is_some());
        // 10 s idle: far more events than the catch-up bound: the limit is lifted.
        d.on_sent(at_us(10_000_000), 1000);
        assert_eq!(d.rate_bps(), None);
    }
}
