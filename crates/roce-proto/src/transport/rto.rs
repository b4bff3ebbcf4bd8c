//! The requester's retransmission timer, adapted to the measured round trip. IBTA's local ACK
//! timeout (vol. 1 §9.7.6.1.2) is one negotiated value, 2.1 s at Linux's exponent 19: a lost
//! last packet of a message would wait that long. Like an RNIC's adaptive retransmission, the
//! timer here runs on a smoothed round trip and its variance (RFC 6298's estimator, Karn's
//! rule: no sample from a retransmitted packet), never below [`RTO_FLOOR`] nor above the
//! negotiated timeout, and doubles on each timeout without progress.
//!
//! A lost tail is probed early: the first time the timer goes off after progress it waits only
//! [`probe_wait`](Rto::timeout) (twice the smoothed round trip, at least [`PROBE_FLOOR`]) and
//! the requester sends its oldest unacknowledged packet and its last one again, nothing between
//! ([`Rto::probe_due`], `ReqState::start_probe`): if the oldest was lost (or the responder's NAK
//! for it was), the responder takes it; if the last was, or one between, the responder's NAK
//! names it; if only the ACK was, the duplicates draw a new one. A probe or its answer can be
//! lost too (at 5 % loss each way about one in seven is), so up to [`MAX_PROBES`] go out, each
//! waiting twice as long as the one before, before the full timer below. A scheduling stall
//! costs two duplicate packets per probe.
//!
//! The timer also covers the peer's turn-around, not only the wire's round trip: a live peer
//! can be silent for longer than two round trips (a READ's responses still streaming from a
//! slow responder, a guest or this VM descheduled). A probe proven spurious (RFC 4015 / RFC
//! 5682's idea, with RoCE's evidence: after it went out, progress came and at once a
//! duplicate answer, which only a copy that reached the responder right behind its original
//! draws; the responder re-ACKs such a duplicate in an ACK of its own, `responder.rs`) makes
//! the silence it broke a sample of that turn-around ([`Rto::on_duplicate_answer`]).
//! [`Rto::turnaround`] keeps the longest ([`TURNAROUND_MEMORY`] long, at most
//! [`MAX_TURNAROUND`]), and neither a probe nor the full timer fires sooner than it plus a
//! round trip: a stall of one length costs one spurious probe, not one each time. A loss the
//! responder names (a sequence NAK, [`Rto::on_loss`]) or a probe proves (its copy drew no
//! duplicate answer) clears it: on a lossy path tails are probed early again. Silences
//! that end without a retransmission teach nothing: each is shorter than the timer, and
//! learning them would let the timer ratchet itself up.
//!
//! Early probes are for paths that lose packets. A path that has shown no loss lately is calm:
//! there no probe and no timeout fires sooner than [`CALM_WAIT`], so a live peer's stall
//! shorter than that (this VM's scheduling, a guest's slow turn) costs nothing, and a first
//! loss costs that wait once. Loss shows as a sequence NAK ([`Rto::on_loss`]), a probe whose
//! answer came without the duplicate that would prove it spurious, or a full timeout that
//! recovered; after it the path probes early for [`LOSS_MEMORY`].
//!
//! The negotiated timeout keeps its meaning for failure: a retry of `retry_cnt` is spent only
//! when a whole negotiated timeout passed without progress ([`Rto::spend_retry`]); the earlier
//! probes are free. A peer that stalls for longer than the adaptive timer, but less than the
//! negotiated one, costs a few duplicate packets, not the connection.

use crate::time::Instant;
use crate::wire::psn::Psn;
use core::time::Duration;

/// The shortest retransmission timeout (a VM's scheduling hiccups are longer than a LAN's
/// round trip).
pub const RTO_FLOOR: Duration = Duration::from_millis(2);
/// The shortest wait before a tail probe: one duplicate packet is all a stall longer than
/// this costs.
pub const PROBE_FLOOR: Duration = Duration::from_micros(200);
/// Tail probes after one progress, at most, before the full timer.
pub const MAX_PROBES: u32 = 3;
/// Doublings of the timer after repeated timeouts, at most.
const MAX_BACKOFF: u32 = 16;
/// How long the peer's longest proven turn-around is remembered before it counts half: a
/// slow spell of the peer passes, and the timer comes back down to what the path needs.
pub const TURNAROUND_MEMORY: Duration = Duration::from_secs(10);
/// The longest turn-around the timer learns (a descheduled process or a slow guest; a peer
/// silent for longer is treated as lost until the full timer).
pub const MAX_TURNAROUND: Duration = Duration::from_millis(25);
/// On a calm path (no loss for [`LOSS_MEMORY`]), the shortest wait before a probe or a
/// timeout: longer than the stalls of a live peer this VM shows in 10^7 messages.
pub const CALM_WAIT: Duration = Duration::from_millis(25);
/// How long a path probes early after its last loss.
pub const LOSS_MEMORY: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Rto {
    /// Smoothed round trip and its mean deviation, once sampled.
    srtt: Option<Duration>,
    rttvar: Duration,
    /// The packet being timed: the PSN after it, and when it left.
    timing: Option<(Psn, Instant)>,
    /// Timeouts since the last progress.
    backoff: u32,
    /// The last progress (or the start of sending after none was outstanding).
    progress_at: Option<Instant>,
    /// Tail probes sent since the last progress.
    probes: u32,
    /// A probe or a timeout sent packets again since the last progress.
    retransmitted: bool,
    /// The silence that the last progress after a probe ended, and when it ended, until a
    /// duplicate answer proves the probe spurious (or anything is sent again).
    recovered_silence: Option<(Duration, Instant)>,
    /// The longest proven turn-around of the peer (see the module doc), and when it was last
    /// raised or halved.
    turnaround: Duration,
    turnaround_at: Option<Instant>,
    /// A loss named without a time (a NAK), stamped at the next progress.
    loss_pending: bool,
    /// The path's last loss, while it is remembered ([`LOSS_MEMORY`]).
    lossy_at: Option<Instant>,
}

impl Rto {
    /// A new packet (not a retransmission) ending before `end` left at `now`.
    #[inline(always)]
    pub fn on_new_packet(&mut self, end: Psn, now: Instant) {
        self.settle_probe(now);
        if self.timing.is_none() {
            self.timing = Some((end, now));
        }
        self.progress_at.get_or_insert(now);
    }

    /// Every PSN before `una` is acknowledged, at `now`; `idle`: nothing is outstanding.
    #[inline(always)]
    pub fn on_progress(&mut self, una: Psn, now: Instant, idle: bool) {
        self.settle_probe(now);
        if core::mem::take(&mut self.loss_pending) || (self.retransmitted && self.backoff > 0) {
            // A NAK named a loss, or the full timer recovered one.
            self.lossy_at = Some(now);
        }
        if self
            .lossy_at
            .is_some_and(|t| now.saturating_duration_since(t) >= LOSS_MEMORY)
        {
            self.lossy_at = None;
        }
        if let Some((end, sent)) = self.timing {
            if !una.before(end) {
                self.sample(now.saturating_duration_since(sent));
                self.timing = None;
            }
        }
        if let (true, Some(since)) = (self.retransmitted, self.progress_at) {
            // Only a probe's: after a full timeout the path, not a slow peer, is in doubt.
            let silence = now.saturating_duration_since(since);
            self.recovered_silence = (self.backoff == 0).then_some((silence, now));
        }
        self.retransmitted = false;
        self.backoff = 0;
        self.probes = 0;
        self.progress_at = (!idle).then_some(now);
    }

    /// The responder answered at `now` without taking the request (an RNR NAK): it is alive,
    /// so the negotiated timeout before a retry is spent ([`Rto::spend_retry`]) runs from
    /// here; the RNR budget (`rnr_retry`) is what bounds a responder that never takes it.
    pub fn on_answer(&mut self, now: Instant) {
        self.progress_at = Some(now);
    }

    /// Whether the timer that goes off now is a tail probe: one of the first [`MAX_PROBES`]
    /// since progress, with a round trip measured.
    pub fn probe_due(&self) -> bool {
        self.srtt.is_some() && self.backoff == 0 && self.probes < MAX_PROBES
    }

    /// A tail probe goes out (no sample from it, no back-off); the next wait is twice the
    /// last probe's, or the full timer after the last probe.
    pub fn on_probe(&mut self) {
        self.timing = None;
        self.probes += 1;
        self.on_retransmit();
    }

    /// Whether a probe or timeout sent packets again since the last progress.
    pub fn retransmitted(&self) -> bool {
        self.retransmitted
    }

    fn on_retransmit(&mut self) {
        self.retransmitted = true;
        self.recovered_silence = None;
    }

    /// An answer to a PSN already acknowledged arrived at `now` (a re-ACK, a READ response
    /// again). Right after progress that came after a probe, it proves the probe spurious:
    /// the original had arrived, and the copy right behind it. The silence the probe broke was
    /// the peer's turn-around, which the timer covers from now on. Returns that silence when
    /// so, once per probe.
    pub fn on_duplicate_answer(&mut self, now: Instant) -> Option<Duration> {
        let (silence, at) = self.recovered_silence.take()?;
        // The copy's answer follows the original's at once; a later duplicate answer belongs
        // to something else.
        let window = self.srtt.unwrap_or_default().max(PROBE_FLOOR);
        if now.saturating_duration_since(at) > window {
            return None;
        }
        let at = *self.turnaround_at.get_or_insert(now);
        if now.saturating_duration_since(at) >= TURNAROUND_MEMORY {
            self.turnaround /= 2;
            self.turnaround_at = Some(now);
        }
        let silence = silence.min(MAX_TURNAROUND);
        if silence >= self.turnaround {
            self.turnaround = silence;
            self.turnaround_at = Some(now);
        }
        Some(silence)
    }

    /// The responder named a loss (a PSN sequence error NAK): the path drops packets, and
    /// what slowness taught the timer goes (a lossy path's duplicate answers are no proof, and
    /// its lost tails must be probed early).
    pub fn on_loss(&mut self) {
        self.turnaround = Duration::ZERO;
        self.recovered_silence = None;
        self.loss_pending = true;
    }

    /// A probe's recovery that drew no duplicate answer within its window was a real loss
    /// (the copy reached a responder that had not seen the original, or the original's ACK
    /// was lost): like a loss the responder names ([`Rto::on_loss`]), it makes the path lossy
    /// and clears what stalls taught, so the next lost tail is probed after the probe's own
    /// wait, not after the longest stall of the last 10 s. A stall after it costs one
    /// spurious probe again. Settled at the next packet, progress or timeout.
    pub fn settle_probe(&mut self, now: Instant) {
        let window = self.srtt.unwrap_or_default().max(PROBE_FLOOR);
        if let Some((_, at)) = self.recovered_silence {
            if now.saturating_duration_since(at) > window {
                self.recovered_silence = None;
                self.lossy_at = Some(now);
                self.turnaround = Duration::ZERO;
            }
        }
    }

    /// Whether the path lost a packet lately (it probes early then).
    pub fn lossy(&self) -> bool {
        self.loss_pending || self.lossy_at.is_some()
    }

    /// The shortest wait of this path's timers: [`CALM_WAIT`] while it is calm.
    fn calm_floor(&self) -> Duration {
        if self.lossy() {
            Duration::ZERO
        } else {
            CALM_WAIT
        }
    }

    /// The longest proven turn-around of the peer, remembered for [`TURNAROUND_MEMORY`]
    /// (then halved).
    pub fn turnaround(&self) -> Duration {
        self.turnaround
    }

    /// A round trip measured elsewhere (every acknowledgement's, `cc::SendTimes`, when
    /// congestion control runs; Karn's rule applied there).
    pub fn on_rtt_sample(&mut self, r: Duration) {
        self.sample(r);
    }

    fn sample(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(s) => {
                let dev = s.abs_diff(r);
                self.rttvar = (self.rttvar * 3 + dev) / 4;
                self.srtt = Some((s * 7 + r) / 8);
            }
        }
    }

    /// The timer went off: the packets will be sent again (no sample from them) and the next
    /// wait is twice as long.
    pub fn on_timeout(&mut self) {
        self.timing = None;
        self.backoff = (self.backoff + 1).min(MAX_BACKOFF);
        self.on_retransmit();
    }

    /// Packets are sent again (a NAK, an RNR wait, a probe, a timeout): none of them gives a
    /// sample, and a duplicate answer after them proves nothing.
    pub fn on_rewind(&mut self) {
        self.timing = None;
        self.recovered_silence = None;
    }

    /// The wait before the next retransmission; `negotiated` is the local ACK timeout
    /// (`None`: infinite, no retransmission).
    pub fn timeout(&self, negotiated: Option<Duration>) -> Option<Duration> {
        let ceiling = negotiated?;
        let calm = self.calm_floor();
        // While the last probe's recovery is unsettled (a duplicate answer would prove it
        // spurious within its window, `settle_probe`), it may have been a loss, which clears
        // the turn-around: a packet sent then (a ping-pong's next message) is not held to it.
        let turnaround = if self.recovered_silence.is_some() {
            Duration::ZERO
        } else {
            self.turnaround
        };
        let base = match self.srtt {
            // Never sooner than the peer's proven turn-around, plus a round trip.
            Some(s) => (s + self.rttvar * 4)
                .max(RTO_FLOOR)
                .max(turnaround + s)
                .max(calm),
            None => ceiling,
        };
        let full = base.saturating_mul(1 << self.backoff).min(ceiling);
        Some(match self.srtt {
            Some(s) if self.probe_due() => (s * 2)
                .max(PROBE_FLOOR)
                .max(turnaround + s)
                .max(calm)
                .saturating_mul(1 << self.probes)
                .min(full),
            _ => full,
        })
    }

    /// At a timeout at `now`: whether a retry of the budget is spent (a whole `negotiated`
    /// timeout passed without progress); then the count starts again.
    pub fn spend_retry(&mut self, now: Instant, negotiated: Option<Duration>) -> bool {
        let Some(ceiling) = negotiated else {
            return true;
        };
        let since = *self.progress_at.get_or_insert(now);
        if now.saturating_duration_since(since) >= ceiling {
            self.progress_at = Some(now);
            true
        } else {
            false
        }
    }

    /// The smoothed round trip, once measured.
    #[cfg(test)]
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Instant {
        Instant(us * 1000)
    }

    /// A calm path holds its probes and timeouts at `CALM_WAIT`; a NAK makes it probe early,
    /// and `LOSS_MEMORY` without loss makes it calm again.
    #[test]
    fn a_calm_path_waits_the_calm_wait_and_a_loss_makes_it_probe_early_for_a_while() {
        let ceiling = Some(Duration::from_millis(2100));
        let mut r = Rto::default();
        r.on_new_packet(Psn::new(1), at(0));
        r.on_progress(Psn::new(1), at(40), true);
        assert!(!r.lossy());
        assert_eq!(
            r.timeout(ceiling),
            Some(CALM_WAIT),
            "the probe waits the calm wait"
        );
        assert_eq!(
            r.timeout(Some(Duration::from_millis(5))),
            Some(Duration::from_millis(5))
        );
        r.on_loss();
        assert!(r.lossy());
        r.on_new_packet(Psn::new(2), at(1_000));
        r.on_progress(Psn::new(2), at(1_040), false);
        assert_eq!(
            r.timeout(ceiling),
            Some(PROBE_FLOOR),
            "lossy: the early probe"
        );
        let later = 1_040 + LOSS_MEMORY.as_micros() as u64;
        r.on_new_packet(Psn::new(3), at(later));
        r.on_progress(Psn::new(3), at(later + 40), false);
        assert!(!r.lossy(), "calm again after LOSS_MEMORY");
        assert_eq!(r.timeout(ceiling), Some(CALM_WAIT));
    }

    #[test]
    fn the_timer_follows_the_round_trip_within_floor_and_ceiling() {
        let ceiling = Some(Duration::from_millis(2100));
        let mut r = Rto::default();
        // A path that lost a packet: its timers are not held at the calm wait.
        r.on_loss();
        assert_eq!(
            r.timeout(ceiling),
            ceiling,
            "no sample yet: the negotiated one"
        );
        for k in 0..20u32 {
            r.on_new_packet(Psn::new(k + 1), at(u64::from(k) * 1000));
            r.on_progress(Psn::new(k + 1), at(u64::from(k) * 1000 + 40), true);
        }
        assert_eq!(r.srtt(), Some(Duration::from_micros(40)));
        assert!(r.probe_due());
        assert_eq!(
            r.timeout(ceiling),
            Some(PROBE_FLOOR),
            "first the tail probe, at its floor"
        );
        r.on_probe();
        assert!(r.probe_due(), "a lost probe or answer: another");
        assert_eq!(r.timeout(ceiling), Some(PROBE_FLOOR * 2), "twice the wait");
        r.on_probe();
        assert_eq!(r.timeout(ceiling), Some(PROBE_FLOOR * 4));
        r.on_probe();
        assert!(!r.probe_due(), "MAX_PROBES per flight");
        assert_eq!(r.timeout(ceiling), Some(RTO_FLOOR), "40 us: the floor");
        r.on_timeout();
        assert!(!r.probe_due());
        assert_eq!(r.timeout(ceiling), Some(RTO_FLOOR * 2));
        for _ in 0..20 {
            r.on_timeout();
        }
        assert_eq!(r.timeout(ceiling), ceiling, "never past the negotiated one");
        assert_eq!(r.timeout(None), None, "infinite stays infinite");
    }

    #[test]
    fn the_probe_waits_two_round_trips_and_comes_back_after_progress() {
        let ceiling = Some(Duration::from_millis(2100));
        let mut r = Rto::default();
        r.on_loss();
        assert!(!r.probe_due(), "no round trip measured: no probe");
        r.on_new_packet(Psn::new(1), at(0));
        r.on_progress(Psn::new(1), at(300), false);
        assert_eq!(r.srtt(), Some(Duration::from_micros(300)));
        assert_eq!(r.timeout(ceiling), Some(Duration::from_micros(600)));
        r.on_probe();
        assert_eq!(r.timeout(ceiling), Some(Duration::from_micros(1200)));
        r.on_probe();
        assert_eq!(
            r.timeout(ceiling),
            Some(RTO_FLOOR),
            "the probe's wait stops at the full one"
        );
        r.on_probe();
        assert_eq!(r.timeout(ceiling), Some(RTO_FLOOR));
        r.on_progress(Psn::new(2), at(5_000), false);
        assert!(r.probe_due(), "progress arms the next probe");
        assert_eq!(
            r.timeout(Some(Duration::from_micros(400))),
            Some(Duration::from_micros(400)),
            "never past the negotiated timeout"
        );
    }

    #[test]
    fn karn_no_sample_from_a_retransmitted_packet() {
        let mut r = Rto::default();
        r.on_new_packet(Psn::new(5), at(0));
        r.on_timeout();
        r.on_progress(Psn::new(5), at(900_000), true);
        assert_eq!(r.srtt(), None);
    }

    #[test]
    fn a_retry_is_spent_per_negotiated_timeout_without_progress() {
        let ceiling = Some(Duration::from_millis(100));
        let mut r = Rto::default();
        r.on_new_packet(Psn::new(1), at(0));
        assert!(!r.spend_retry(at(2_000), ceiling));
        assert!(!r.spend_retry(at(50_000), ceiling));
        assert!(r.spend_retry(at(100_000), ceiling));
        assert!(!r.spend_retry(at(150_000), ceiling));
        assert!(r.spend_retry(at(200_000), ceiling));
        r.on_progress(Psn::new(1), at(210_000), false);
        assert!(
            !r.spend_retry(at(250_000), ceiling),
            "progress restarts the count"
        );
    }
}
