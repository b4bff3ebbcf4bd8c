//! The QP's small timer table (IBTA vol. 1 §9.7.6.1.2 local ACK timeout, §9.7.5.2.8 RNR wait,
//! the pacer's release time).
//! In the manner of quinn-proto: the QP never sleeps; the caller asks `poll_timeout` for the
//! earliest deadline and calls `handle_timeout` when it has passed.

use crate::time::Instant;
use crate::wire::aeth::rnr_timer_ns;
use core::time::Duration;

/// The timers a QP keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Timer {
    /// Local ACK timeout of the requester: no progress on outstanding requests.
    Ack = 0,
    /// RNR NAK wait: resend after the responder's RNR timer.
    Rnr = 1,
    /// The pacer's release time (`cc::Pacer`): data waits until then.
    Pace = 2,
}

const N_TIMERS: usize = 3;

/// Deadlines by timer, in nanoseconds; `DISARMED` for a timer that is not armed. Plain
/// integers keep the earliest deadline, asked for after every packet, at one `min`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerTable {
    deadlines: [u64; N_TIMERS],
}

/// The deadline of a disarmed timer (no armed deadline reaches it: `set` stops one short).
const DISARMED: u64 = u64::MAX;

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable {
            deadlines: [DISARMED; N_TIMERS],
        }
    }
}

impl TimerTable {
    /// Arms (or re-arms) `t` to fire at `at`.
    pub fn set(&mut self, t: Timer, at: Instant) {
        self.deadlines[t as usize] = at.0.min(DISARMED - 1);
    }

    /// Disarms `t`.
    pub fn stop(&mut self, t: Timer) {
        self.deadlines[t as usize] = DISARMED;
    }

    /// Deadline of `t`, if armed.
    pub fn get(&self, t: Timer) -> Option<Instant> {
        let at = self.deadlines[t as usize];
        (at != DISARMED).then_some(Instant(at))
    }

    /// True when `t` is armed.
    pub fn is_set(&self, t: Timer) -> bool {
        self.deadlines[t as usize] != DISARMED
    }

    /// Disarms everything.
    pub fn clear(&mut self) {
        self.deadlines = [DISARMED; N_TIMERS];
    }

    /// The earliest armed deadline.
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        let [a, b, c] = self.deadlines;
        let at = a.min(b).min(c);
        (at != DISARMED).then_some(Instant(at))
    }

    /// If `t` is armed and its deadline is `<= now`, disarms it and returns true.
    pub fn expire(&mut self, t: Timer, now: Instant) -> bool {
        let at = self.deadlines[t as usize];
        if at != DISARMED && at <= now.0 {
            self.deadlines[t as usize] = DISARMED;
            true
        } else {
            false
        }
    }
}

/// The wait an RNR NAK timer code (5 bits; higher bits ignored) asks for: the
/// [`rnr_timer_ns`] table of the wire layer as a `Duration`.
pub fn rnr_timer_duration(code: u8) -> Duration {
    Duration::from_nanos(rnr_timer_ns(code))
}

/// The local ACK timeout, 4.096 us * 2^exp (IBTA vol. 1 §9.7.6.1.2); `None` for 0 (infinite).
pub fn ack_timeout_duration(exp: u8) -> Option<Duration> {
    if exp == 0 {
        None
    } else {
        Some(Duration::from_nanos(4096u64 << (exp & 0x1f)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rnr_table_matches_reference() {
        assert_eq!(rnr_timer_duration(0), Duration::from_micros(655_360));
        assert_eq!(rnr_timer_duration(1), Duration::from_micros(10));
        assert_eq!(rnr_timer_duration(5), Duration::from_micros(60));
        assert_eq!(rnr_timer_duration(12), Duration::from_micros(640));
        assert_eq!(rnr_timer_duration(31), Duration::from_micros(491_520));
        assert_eq!(rnr_timer_duration(0x21), Duration::from_micros(10));
    }

    #[test]
    fn ack_timeout_values() {
        assert_eq!(ack_timeout_duration(0), None);
        assert_eq!(ack_timeout_duration(1), Some(Duration::from_nanos(8192)));
        assert_eq!(
            ack_timeout_duration(14),
            Some(Duration::from_nanos(4096 * 16384))
        );
    }

    #[test]
    fn a_deadline_at_the_end_of_time_stays_armed() {
        let mut t = TimerTable::default();
        assert!(!t.is_set(Timer::Rnr));
        t.set(Timer::Rnr, Instant(u64::MAX));
        assert!(t.is_set(Timer::Rnr));
        assert_eq!(t.next_deadline(), Some(Instant(u64::MAX - 1)));
        assert!(t.expire(Timer::Rnr, Instant(u64::MAX)));
        assert_eq!(t.next_deadline(), None);
    }

    #[test]
    fn earliest_deadline_and_expiry() {
        let mut t = TimerTable::default();
        assert_eq!(t.next_deadline(), None);
        t.set(Timer::Ack, Instant(100));
        t.set(Timer::Rnr, Instant(50));
        assert_eq!(t.next_deadline(), Some(Instant(50)));
        assert!(!t.expire(Timer::Ack, Instant(99)));
        assert!(t.expire(Timer::Rnr, Instant(60)));
        assert!(!t.is_set(Timer::Rnr));
        assert_eq!(t.next_deadline(), Some(Instant(100)));
    }
}
