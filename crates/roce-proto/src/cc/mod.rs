//! Congestion control of a QP's sending: the pacer every algorithm drives, DCQCN's reaction
//! point (`dcqcn`), the delay-based mode (`delay`), and the notification point's rule for
//! CNPs (RoCEv2 annex A17.9: a receiver answers congestion-experienced packets with a
//! Congestion Notification Packet to the sending QP).
//!
//! Per profile (`[congestion]`): `mode` off (the default), `dcqcn` or `delay`; the
//! notification point is on in every mode (a peer running DCQCN needs our CNPs whatever we
//! run), at most one CNP per QP per [`CcConfig::cnp_interval`].
//!
//! Only packets that carry data wait for the pacer: requests and READ responses. ACKs, NAKs,
//! atomic ACKs and CNPs never wait (they unblock the peer, and DCQCN rate-limits data). Every
//! packet is charged its bytes on the wire ([`wire_bytes`]).

pub mod dcqcn;
pub mod delay;
pub mod pacer;
pub mod send_times;

use crate::time::Instant;
use core::time::Duration;
pub use dcqcn::{Dcqcn, DcqcnParams};
pub use delay::{DelayControl, DelayParams};
pub use pacer::Pacer;
pub use send_times::SendTimes;

/// Which algorithm sets a QP's rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CcMode {
    /// None: the send window is the only brake (CE marks are still answered with CNPs).
    #[default]
    Off,
    /// DCQCN: ECN-capable packets, the rate cut on a CNP.
    Dcqcn,
    /// Delay-based (Swift-like), for fabrics that do not mark.
    Delay,
}

impl CcMode {
    /// The name profiles and reports use.
    pub fn name(self) -> &'static str {
        match self {
            CcMode::Off => "off",
            CcMode::Dcqcn => "dcqcn",
            CcMode::Delay => "delay",
        }
    }
}

/// Congestion control of the QPs of a host (one profile).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CcConfig {
    pub mode: CcMode,
    pub dcqcn: DcqcnParams,
    pub delay: DelayParams,
    /// Bytes a limited QP may send back to back after a quiet spell.
    pub burst_bytes: u32,
    /// At most one CNP per QP per interval (the DCQCN paper's N, 50 us; mlx5's
    /// `min_time_between_cnps` is 4 us); `None`: CE marks are counted, never answered.
    pub cnp_interval: Option<Duration>,
    /// The DSCP of the CNPs sent (mlx5's `cnp_dscp`, 48), which are never ECN-capable.
    pub cnp_dscp: u8,
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            mode: CcMode::Off,
            dcqcn: DcqcnParams::default(),
            delay: DelayParams::default(),
            burst_bytes: 8192,
            cnp_interval: Some(Duration::from_micros(50)),
            cnp_dscp: 48,
        }
    }
}

/// Headers a packet adds to its payload on the wire, as the pacer counts them: Ethernet 14,
/// IPv4 20, UDP 8, BTH 12, a RETH's 16 and the ICRC 4 (an estimate: the transport does not
/// know the encapsulation; within a few percent for full packets).
pub const WIRE_OVERHEAD: u32 = 74;

/// A packet's bytes on the wire for the pacer.
#[inline(always)]
pub fn wire_bytes(payload: usize) -> u32 {
    (payload as u32).saturating_add(WIRE_OVERHEAD)
}

/// Counters of a QP's congestion control.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CcStats {
    /// Packets received marked congestion experienced (ECN CE).
    pub ce_marks: u64,
    /// CNPs sent (at most one per interval for those marks).
    pub cnps_sent: u64,
    /// CNPs received and acted on.
    pub cnps_received: u64,
    /// CNPs received and dropped: this QP runs no DCQCN, or is not connected.
    pub cnps_ignored: u64,
    /// Rate cuts made (DCQCN: per CNP outside the cut period; delay: per round above target).
    pub rate_cuts: u64,
    /// Times a data packet waited for the pacer.
    pub paced_waits: u64,
}

impl core::ops::AddAssign for CcStats {
    /// Two QPs' counters together.
    fn add_assign(&mut self, o: CcStats) {
        self.ce_marks += o.ce_marks;
        self.cnps_sent += o.cnps_sent;
        self.cnps_received += o.cnps_received;
        self.cnps_ignored += o.cnps_ignored;
        self.rate_cuts += o.rate_cuts;
        self.paced_waits += o.paced_waits;
    }
}

/// The algorithm of one QP.
#[derive(Clone, Debug)]
enum Algo {
    Off,
    Dcqcn(Box<Dcqcn>),
    Delay(Box<DelayControl>),
}

/// One QP's congestion control: its algorithm, its pacer, and the notification point's state.
#[derive(Clone, Debug)]
pub struct Congestion {
    algo: Algo,
    pacer: Pacer,
    /// Send times of the request PSNs in flight, when an algorithm runs (a round-trip
    /// sample per acknowledgement).
    times: Option<Box<SendTimes>>,
    cnp_interval: Option<Duration>,
    last_cnp: Option<Instant>,
    cnp_due: bool,
    pub stats: CcStats,
}

impl Default for Congestion {
    fn default() -> Self {
        Congestion::new(&CcConfig::default())
    }
}

impl Congestion {
    pub fn new(c: &CcConfig) -> Congestion {
        Congestion {
            algo: match c.mode {
                CcMode::Off => Algo::Off,
                CcMode::Dcqcn => Algo::Dcqcn(Box::new(Dcqcn::new(c.dcqcn))),
                CcMode::Delay => Algo::Delay(Box::new(DelayControl::new(c.delay))),
            },
            pacer: Pacer::new(c.burst_bytes),
            times: (c.mode != CcMode::Off).then(Box::default),
            cnp_interval: c.cnp_interval,
            last_cnp: None,
            cnp_due: false,
            stats: CcStats::default(),
        }
    }

    /// The mode this QP runs.
    pub fn mode(&self) -> CcMode {
        match self.algo {
            Algo::Off => CcMode::Off,
            Algo::Dcqcn(_) => CcMode::Dcqcn,
            Algo::Delay(_) => CcMode::Delay,
        }
    }

    /// The rate the pacer keeps now; `None`: unlimited.
    pub fn rate_bps(&self) -> Option<u64> {
        self.pacer.rate_bps()
    }

    /// `None` when a data packet may leave at `now`, else when one may.
    #[inline(always)]
    pub fn wait_until(&self, now: Instant) -> Option<Instant> {
        self.pacer.wait_until(now)
    }

    /// A data packet found the pacer closed.
    pub fn note_wait(&mut self) {
        self.stats.paced_waits += 1;
        self.note_blocked();
    }

    /// A request that was ready found the send window full (the delay mode's or the
    /// transport's): this QP is held back, not application-limited (`delay`).
    #[inline(always)]
    pub fn note_blocked(&mut self) {
        if let Algo::Delay(d) = &mut self.algo {
            d.on_blocked();
        }
    }

    /// Any packet of `wire_bytes` left at `now`.
    #[inline(always)]
    pub fn on_sent(&mut self, now: Instant, wire_bytes: u32) {
        if matches!(self.algo, Algo::Off) {
            return;
        }
        self.on_sent_limited(now, wire_bytes);
    }

    /// [`on_sent`](Self::on_sent) with an algorithm running (off the fast path).
    #[inline(never)]
    fn on_sent_limited(&mut self, now: Instant, wire_bytes: u32) {
        if let Algo::Dcqcn(d) = &mut self.algo {
            d.on_sent(now, wire_bytes);
        }
        self.sync_rate();
        self.pacer.on_sent(now, wire_bytes);
    }

    /// Request packet PSN `last` (the last PSN of its span) left at `now`; `resend`: sent
    /// before (no round-trip sample from its answer).
    #[inline]
    pub fn on_request_sent(&mut self, now: Instant, last: u32, resend: bool) {
        if let Some(t) = &mut self.times {
            if resend {
                t.on_resent(last);
            } else {
                t.on_sent(last, now);
            }
        }
    }

    /// Every request PSN up to `last` is acknowledged at `now`: the round trip of `last`, if
    /// it left once (for the retransmission timer too), when an algorithm runs.
    #[inline]
    pub fn on_acked(&mut self, now: Instant, last: u32) -> Option<Duration> {
        self.times.as_ref()?;
        self.on_acked_timed(now, last)
    }

    /// [`on_acked`](Self::on_acked) with send times kept (off the fast path).
    #[inline(never)]
    fn on_acked_timed(&mut self, now: Instant, last: u32) -> Option<Duration> {
        let (rtt, newly) = self.times.as_mut()?.on_acked(last, now);
        let rtt = rtt?;
        if let Algo::Delay(d) = &mut self.algo {
            let before = d.decreases;
            d.on_sample(rtt, newly, now);
            self.stats.rate_cuts += d.decreases - before;
            self.sync_rate();
        }
        Some(Duration::from_nanos(rtt))
    }

    /// PSNs that may be outstanding by congestion control (the delay mode's window);
    /// `u32::MAX` otherwise.
    #[inline(always)]
    pub fn window_limit(&self) -> u32 {
        match &self.algo {
            Algo::Delay(d) => d.window_limit(),
            _ => u32::MAX,
        }
    }

    /// The delay mode's window in packets, if it runs.
    pub fn cwnd(&self) -> Option<f64> {
        match &self.algo {
            Algo::Delay(d) => Some(d.cwnd()),
            _ => None,
        }
    }

    /// A CNP for this QP at `now` (checked by the caller: its origin, QPN, P_Key, ICRC); false
    /// when it was not acted on (no DCQCN here), counted either way.
    pub fn on_cnp(&mut self, now: Instant) -> bool {
        let Algo::Dcqcn(d) = &mut self.algo else {
            self.stats.cnps_ignored += 1;
            return false;
        };
        let before = d.cuts;
        d.on_cnp(now);
        self.stats.rate_cuts += d.cuts - before;
        self.stats.cnps_received += 1;
        self.sync_rate();
        true
    }

    /// A CNP that arrived while the QP could not take one (not connected).
    pub fn ignore_cnp(&mut self) {
        self.stats.cnps_ignored += 1;
    }

    /// A packet for this QP arrived marked congestion experienced at `now`: a CNP is due
    /// unless one left within the interval.
    pub fn on_ce(&mut self, now: Instant) {
        self.stats.ce_marks += 1;
        let Some(interval) = self.cnp_interval else {
            return;
        };
        if self
            .last_cnp
            .is_some_and(|t| now.saturating_duration_since(t) < interval)
        {
            return;
        }
        self.last_cnp = Some(now);
        self.cnp_due = true;
    }

    /// True when a CNP waits to be sent.
    #[inline(always)]
    pub fn cnp_due(&self) -> bool {
        self.cnp_due
    }

    /// Takes the CNP that is due, if any (the caller sends it).
    pub fn take_cnp(&mut self) -> bool {
        let due = core::mem::take(&mut self.cnp_due);
        if due {
            self.stats.cnps_sent += 1;
        }
        due
    }

    /// Forgets the CNP that is due (its QP cannot send it).
    pub fn drop_cnp(&mut self) {
        self.cnp_due = false;
    }

    /// The algorithm's rate to the pacer.
    #[inline(always)]
    fn sync_rate(&mut self) {
        let r = match &self.algo {
            Algo::Off => None,
            Algo::Dcqcn(d) => d.rate_bps(),
            Algo::Delay(d) => d.rate_bps(),
        };
        if r != self.pacer.rate_bps() {
            self.pacer.set_rate(r);
        }
    }
}
