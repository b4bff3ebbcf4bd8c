//! When each request PSN in flight left, for a round-trip sample from every acknowledgement
//! (congestion control's delay signal, and the retransmission timer's: a paced QP's packets
//! are spaced, and one timed packet per round trip, lost to Karn's rule whenever a probe
//! resends it, leaves the timer on a stale round trip while the queue grows).

use crate::time::Instant;

/// Entries: every PSN a window may hold.
const RING: usize = crate::transport::MAX_OUTSTANDING_PSNS as usize;

/// A ring of send times by PSN (24-bit PSNs; the ring's index is the PSN modulo its size).
#[derive(Clone, Debug)]
pub struct SendTimes {
    /// The PSN of each slot's entry and when it left (nanoseconds; 0: no sample: sent again,
    /// or already sampled). An entry of another PSN (one a coalesced ACK covered, a ring
    /// ago) is no sample either.
    at: Box<[(u32, u64)]>,
    /// The last acknowledged PSN, for the count a new acknowledgement covers.
    acked: Option<u32>,
}

impl Default for SendTimes {
    fn default() -> Self {
        SendTimes {
            at: vec![(0, 0); RING].into_boxed_slice(),
            acked: None,
        }
    }
}

impl SendTimes {
    /// PSN `psn` left at `now` for the first time.
    #[inline(always)]
    pub fn on_sent(&mut self, psn: u32, now: Instant) {
        self.at[psn as usize % RING] = (psn, now.as_nanos().max(1));
    }

    /// PSN `psn` left again: its answer proves no round trip (Karn's rule).
    #[inline(always)]
    pub fn on_resent(&mut self, psn: u32) {
        self.at[psn as usize % RING] = (psn, 0);
    }

    /// Every PSN up to `psn` is acknowledged at `now`: `psn`'s round trip (if it left once
    /// and was not sampled) and how many PSNs this acknowledgement covers newly (at least 1).
    pub fn on_acked(&mut self, psn: u32, now: Instant) -> (Option<u64>, u32) {
        let newly = match self.acked {
            Some(prev) => (psn.wrapping_sub(prev) & 0x00ff_ffff).clamp(1, RING as u32),
            None => 1,
        };
        self.acked = Some(psn);
        let (of, sent) = core::mem::take(&mut self.at[psn as usize % RING]);
        let rtt = (of == psn && sent != 0 && sent <= now.as_nanos()).then(|| now.as_nanos() - sent);
        (rtt, newly)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_psn_sent_once_is_sampled_once_one_sent_again_never() {
        let mut t = SendTimes::default();
        t.on_sent(10, Instant::from_nanos(1_000));
        t.on_sent(11, Instant::from_nanos(2_000));
        t.on_resent(11);
        assert_eq!(t.on_acked(10, Instant::from_nanos(5_000)), (Some(4_000), 1));
        assert_eq!(t.on_acked(10, Instant::from_nanos(6_000)), (None, 1));
        assert_eq!(t.on_acked(11, Instant::from_nanos(7_000)), (None, 1));
        t.on_sent(12, Instant::from_nanos(8_000));
        t.on_sent(14, Instant::from_nanos(8_500));
        assert_eq!(t.on_acked(14, Instant::from_nanos(9_000)), (Some(500), 3));
        // PSN 12 was covered by the ACK of 14, its entry left behind: a ring later, PSN
        // 12 + RING acknowledged without having been timed gives no sample.
        let later = 12 + RING as u32;
        assert_eq!(t.on_acked(later, Instant::from_nanos(99_000)).0, None);
    }
}
