//! The limit on the log messages a peer can cause (`event_log`): a token bucket per kind of
//! message, a burst of [`BURST`], then [`PER_SECOND`] a second. The bucket runs on the host's
//! clock (the `now` passed into the host, never a clock read of its own), so a virtual clock
//! drives it in tests. A message that passes after some of its kind were held back says how
//! many (`suppressed = N`). One limiter per host, that is per port and shard.

use crate::time::Instant;

/// Messages of one kind logged back to back before the rate applies.
pub const BURST: u64 = 10;
/// Messages of one kind logged per second once the burst is spent.
pub const PER_SECOND: u64 = 10;

/// Nanoseconds of credit a message costs.
const TOKEN_NS: u64 = 1_000_000_000 / PER_SECOND;
/// Credit of a full bucket.
const FULL_NS: u64 = BURST * TOKEN_NS;

/// The kinds of message a peer's frames or actions can cause, each limited on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LogKind {
    ConnectRequest,
    Established,
    Rejected,
    Unreachable,
    TimedOut,
    Disconnected,
    ConnectError,
    ArpResolved,
    ArpUnresolvable,
    IcmpUnreachable,
    AddressConflict,
    QpError,
}

const KINDS: usize = LogKind::QpError as usize + 1;

/// One kind's bucket: credit in nanoseconds (a message costs [`TOKEN_NS`]), refilled by the
/// time passed since `at`, at most [`FULL_NS`].
#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    credit_ns: u64,
    /// When `credit_ns` was last brought up to date; `None` before the first message (full).
    at: Option<Instant>,
    /// Messages held back since the last one logged.
    suppressed: u64,
}

/// A token bucket per [`LogKind`].
#[derive(Clone, Debug, Default)]
pub(crate) struct LogLimit {
    buckets: [Bucket; KINDS],
}

impl LogLimit {
    /// Whether a message of `kind` at `now` is logged: `Some(n)` with the `n` messages of that
    /// kind held back since the last one logged, or `None` when this one is held back (and
    /// counted). A clock that goes back gives no credit.
    pub(crate) fn admit(&mut self, kind: LogKind, now: Instant) -> Option<u64> {
        let b = &mut self.buckets[kind as usize];
        let credit = match b.at {
            None => FULL_NS,
            Some(t) => b
                .credit_ns
                .saturating_add(now.saturating_nanos_since(t))
                .min(FULL_NS),
        };
        b.at = Some(b.at.map_or(now, |t| t.max(now)));
        if credit >= TOKEN_NS {
            b.credit_ns = credit - TOKEN_NS;
            Some(core::mem::take(&mut b.suppressed))
        } else {
            b.credit_ns = credit;
            b.suppressed += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    #[test]
    fn a_burst_then_the_rate_and_the_held_back_are_counted() {
        let mut l = LogLimit::default();
        // 1000 messages in one second, one a millisecond.
        let admitted: Vec<(u64, u64)> = (0..1000)
            .filter_map(|i| l.admit(LogKind::AddressConflict, ms(i)).map(|s| (i, s)))
            .collect();
        assert!(
            admitted.len() as u64 <= BURST + PER_SECOND,
            "{} admitted: {admitted:?}",
            admitted.len()
        );
        assert!(admitted.len() as u64 >= BURST, "{admitted:?}");
        // The burst passes at once, with nothing held back before it.
        let burst: Vec<_> = (0..BURST).map(|i| (i, 0)).collect();
        assert_eq!(admitted[..BURST as usize], burst[..]);
        // Every one after the burst reports what was held back since the one before.
        for w in admitted.windows(2).skip(BURST as usize - 1) {
            let ((prev, _), (at, held)) = (w[0], w[1]);
            assert_eq!(held, at - prev - 1, "{admitted:?}");
        }
        // The next message, a second later, reports the rest.
        let last = admitted.last().unwrap().0;
        assert_eq!(
            l.admit(LogKind::AddressConflict, ms(2000)),
            Some(999 - last)
        );
        // Every message is either logged or counted in a later one.
        let reported: u64 = admitted.iter().map(|a| a.1).sum::<u64>() + (999 - last);
        assert_eq!(admitted.len() as u64 + reported, 1000);
    }

    #[test]
    fn kinds_are_limited_apart_and_the_bucket_refills_to_the_burst_only() {
        let mut l = LogLimit::default();
        for _ in 0..BURST {
            assert_eq!(l.admit(LogKind::QpError, ms(0)), Some(0));
        }
        assert_eq!(l.admit(LogKind::QpError, ms(0)), None);
        assert_eq!(
            l.admit(LogKind::Established, ms(0)),
            Some(0),
            "another kind"
        );
        // An hour idle fills the bucket to the burst, not to an hour's worth.
        let later = ms(3_600_000);
        assert_eq!(l.admit(LogKind::QpError, later), Some(1));
        for _ in 1..BURST {
            assert_eq!(l.admit(LogKind::QpError, later), Some(0));
        }
        assert_eq!(l.admit(LogKind::QpError, later), None);
        // One token per 1/PER_SECOND s; a clock going back gives none.
        assert_eq!(l.admit(LogKind::QpError, ms(0)), None);
        let step = 1000 / PER_SECOND;
        assert_eq!(l.admit(LogKind::QpError, ms(3_600_000 + step)), Some(2));
        assert_eq!(l.admit(LogKind::QpError, ms(3_600_000 + step)), None);
    }
}
