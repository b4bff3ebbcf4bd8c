//! The requester's send window: how many PSNs may be outstanding, shrunk after a loss so that
//! go-back-N does not resend a whole window into the receive ring that just overflowed
//! (net_af_packet drops at the receiver's RX ring under load; a lossless NIC never shrinks it).
//!
//! AIMD in the manner of TCP Reno (RFC 5681 §3.1), counted in PSNs: a PSN sequence error NAK
//! (IBTA vol. 1 §9.7.5.2.1) halves the window, a local ACK timeout (§9.7.6.1.2) restarts it
//! from [`MIN_WINDOW`] with slow start up to half of what was in flight; below that threshold
//! each acknowledged PSN widens it by one, above it every full window acknowledged widens it by
//! [`ADDITIVE_STEP`]. It starts (and stays, without losses) at [`MAX_OUTSTANDING_PSNS`].

use super::limits::MAX_OUTSTANDING_PSNS;

/// The smallest window. Go-back-N resends everything sent behind a lost packet before the
/// NAK came back, so at a steady loss rate the window the AIMD keeps coming back to bounds the
/// waste: with 16 PSNs, `roce-bw --verify` at 5 % injected loss each way kept 0.46-0.48 of its
/// lossless rate, with 4 0.55-0.57, with 2 no more (bench/README.md, "Verified throughput at
/// 5 % loss").
pub const MIN_WINDOW: u32 = 4;

/// Growth per full window acknowledged above the slow-start threshold: one PSN, RFC 5681
/// §3.1's one segment per round trip. Go-back-N resends everything in flight behind a loss, so
/// a window that regrows fast after a NAK throws away more: with a step of 16
/// (`ACK_REQ_EVERY`, before) `roce-bw --verify` at 5 % loss each way resent about 16 packets
/// per NAK and kept 0.49-0.51 of its lossless rate through a kernel link that drops frames
/// (scripts/veth-join.sh), with 1 about 6 and 0.63-0.65; a lossless link never shrinks the
/// window, so it never regrows there (bench/README.md, "Verified throughput at 5 % loss").
pub const ADDITIVE_STEP: u32 = 1;

/// The window and its slow-start threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendWindow {
    cwnd: u32,
    ssthresh: u32,
    /// PSNs acknowledged towards the next additive step.
    acked: u32,
}

impl Default for SendWindow {
    fn default() -> Self {
        SendWindow {
            cwnd: MAX_OUTSTANDING_PSNS,
            ssthresh: MAX_OUTSTANDING_PSNS,
            acked: 0,
        }
    }
}

impl SendWindow {
    /// PSNs that may be outstanding now.
    pub fn limit(&self) -> u32 {
        self.cwnd
    }

    /// The slow-start threshold.
    pub fn threshold(&self) -> u32 {
        self.ssthresh
    }

    /// `n` more PSNs were acknowledged.
    pub fn on_ack(&mut self, n: u32) {
        if n == 0 || self.cwnd >= MAX_OUTSTANDING_PSNS {
            return;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd = (self.cwnd + n).min(self.ssthresh);
            return;
        }
        self.acked += n;
        while self.acked >= self.cwnd && self.cwnd < MAX_OUTSTANDING_PSNS {
            self.acked -= self.cwnd;
            self.cwnd = (self.cwnd + ADDITIVE_STEP).min(MAX_OUTSTANDING_PSNS);
        }
    }

    /// A PSN sequence error NAK while `inflight` PSNs were outstanding: halve.
    pub fn on_nak(&mut self, inflight: u32) {
        self.ssthresh = (inflight / 2).max(MIN_WINDOW);
        self.cwnd = self.ssthresh;
        self.acked = 0;
    }

    /// A local ACK timeout while `inflight` PSNs were outstanding: restart small.
    pub fn on_timeout(&mut self, inflight: u32) {
        self.ssthresh = (inflight / 2).max(MIN_WINDOW);
        self.cwnd = MIN_WINDOW;
        self.acked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_full_and_never_moves_without_loss() {
        let mut w = SendWindow::default();
        w.on_ack(100_000);
        assert_eq!(w.limit(), MAX_OUTSTANDING_PSNS);
    }

    #[test]
    fn timeout_restarts_at_the_minimum_then_slow_starts_to_half_the_flight() {
        let mut w = SendWindow::default();
        w.on_timeout(1000);
        assert_eq!((w.limit(), w.threshold()), (MIN_WINDOW, 500));
        w.on_ack(16);
        assert_eq!(
            w.limit(),
            MIN_WINDOW + 16,
            "slow start: one more per PSN acknowledged"
        );
        w.on_ack(1000);
        assert_eq!(w.limit(), 500, "slow start stops at the threshold");
        // Above it: one step per full window acknowledged.
        w.on_ack(499);
        assert_eq!(w.limit(), 500);
        w.on_ack(1);
        assert_eq!(w.limit(), 500 + ADDITIVE_STEP);
    }

    #[test]
    fn nak_halves_and_the_floor_holds() {
        let mut w = SendWindow::default();
        w.on_nak(600);
        assert_eq!(w.limit(), 300);
        w.on_nak(4);
        assert_eq!(w.limit(), MIN_WINDOW);
    }

    #[test]
    fn growth_is_capped_at_the_maximum() {
        let mut w = SendWindow::default();
        w.on_nak(MAX_OUTSTANDING_PSNS);
        let half = MAX_OUTSTANDING_PSNS / 2;
        w.on_ack(half);
        assert_eq!(w.limit(), half + 1, "one PSN per full window acknowledged");
        // From half to full at one PSN per window: about 1.5 M PSNs acknowledged.
        for _ in 0..100_000 {
            w.on_ack(64);
        }
        assert_eq!(w.limit(), MAX_OUTSTANDING_PSNS);
    }
}
