//! The sending side's bookkeeping, whichever API posts (the Rust API's `Side`, the DAT
//! client's `DatSide`): per QP the messages posted and completed, the QPs with room for a post
//! list, the end of a `-D` run, the progress timeout and the samples of the peak rate. A side
//! provides what differs, through [`Poster`]: how one message is posted, how one turn of
//! progress runs.

use super::report::Tally;
use super::{cpu_ns, peak_rate, Params, CLOCK_EVERY, POST_BUDGET};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// One QP's progress.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Stream {
    /// Messages posted and completed (a signaled completion completes all before it).
    /// Sequence numbers continue across sizes (markers and atomics count on).
    pub posted: u64,
    pub done: u64,
    /// Messages to send (`u64::MAX` until a `-D` run's time is up).
    pub total: u64,
    queued: bool,
    /// Messages received and checked (SEND data or WRITE markers).
    pub received: u64,
    /// Atomics completed (their fetched values are checked against it).
    pub atomics_seen: u64,
}

/// Every QP's stream of one side.
pub(crate) struct StreamSet {
    pub streams: Vec<Stream>,
    /// QPs with room for a post list, each once.
    ready: VecDeque<usize>,
    tx_depth: u64,
    post_list: u64,
    cq_mod: u64,
    /// Messages completed in the test of the current size.
    pub completed: u64,
    /// (time, messages completed) at each completion batch, for the peak rate.
    samples: Vec<(Instant, u64)>,
}

impl StreamSet {
    pub fn new(qps: usize, p: &Params) -> StreamSet {
        StreamSet {
            streams: vec![Stream::default(); qps],
            ready: VecDeque::new(),
            tx_depth: u64::from(p.tx_depth),
            post_list: u64::from(p.post_list),
            cq_mod: u64::from(p.cq_mod),
            completed: 0,
            samples: Vec::new(),
        }
    }

    /// Starts the test of a size: `total` more messages per QP (`u64::MAX`: until stopped).
    pub fn start(&mut self, total: u64) {
        self.ready.clear();
        for s in self.streams.iter_mut() {
            s.done = s.posted;
            s.total = total.saturating_add(s.posted);
            s.queued = false;
        }
        for qp in 0..self.streams.len() {
            self.maybe_ready(qp);
        }
        self.samples.clear();
        self.completed = 0;
    }

    /// Messages `qp` may post now as one post list (0: no room or nothing left).
    fn next_list(&self, qp: usize) -> u64 {
        let s = &self.streams[qp];
        let left = s.total.saturating_sub(s.posted);
        let room = self.tx_depth - (s.posted - s.done);
        let n = self.post_list.min(left);
        if n > 0 && room >= n {
            n
        } else {
            0
        }
    }

    /// Queues `qp` for posting when it has room for a post list (or for its last messages).
    fn maybe_ready(&mut self, qp: usize) {
        if !self.streams[qp].queued && self.next_list(qp) > 0 {
            self.streams[qp].queued = true;
            self.ready.push_back(qp);
        }
    }

    /// Message `seq` of `qp` completed, and so every one before it. False for an unknown QP.
    pub fn completed_through(&mut self, qp: usize, seq: u64) -> bool {
        let Some(s) = self.streams.get_mut(qp) else {
            return false;
        };
        if seq + 1 > s.done {
            self.completed += seq + 1 - s.done;
            s.done = seq + 1;
        }
        self.maybe_ready(qp);
        true
    }

    /// Notes a batch of completions (for the peak rate).
    pub fn sample(&mut self) {
        self.samples.push((Instant::now(), self.completed));
    }

    /// Whether message `seq` of `qp` is signaled: one in `--cq-mod`, and a stream's last.
    fn signaled(&self, qp: usize, seq: u64) -> bool {
        (seq + 1).is_multiple_of(self.cq_mod) || seq + 1 == self.streams[qp].total
    }

    fn finished(&self) -> bool {
        self.streams.iter().all(|s| s.done >= s.total)
    }

    /// Ends a `-D` run: no more messages after those posted, and the QPs whose last posted
    /// message was not signaled get one more, signaled (returned).
    fn stop(&mut self) -> Vec<usize> {
        self.ready.clear();
        let mut more = Vec::new();
        for (qp, s) in self.streams.iter_mut().enumerate() {
            let last_signaled = s.posted == s.done || s.posted.is_multiple_of(self.cq_mod);
            s.total = s.posted + u64::from(!last_signaled);
            s.queued = false;
            if !last_signaled {
                more.push(qp);
            }
        }
        more
    }
}

/// What a side does that the bookkeeping cannot: post and make progress.
pub(crate) trait Poster {
    fn streams(&mut self) -> &mut StreamSet;
    /// Posts message `seq` of QP `qp`, signaled or not.
    fn post_message(&mut self, qp: usize, seq: u64, signaled: bool) -> Result<(), String>;
    /// One turn of progress: completions handled (`StreamSet::completed_through`).
    fn turn(&mut self) -> Result<(), String>;
}

/// Posts message after message of `qp`'s stream, `signaled` or by `--cq-mod`.
fn post_next<P: Poster>(p: &mut P, qp: usize, force_signaled: bool) -> Result<(), String> {
    let set = p.streams();
    let seq = set.streams[qp].posted;
    let signaled = force_signaled || set.signaled(qp, seq);
    p.post_message(qp, seq, signaled)?;
    p.streams().streams[qp].posted += 1;
    Ok(())
}

/// Posts up to `POST_BUDGET` messages from the ready QPs. Like perftest, a QP posts list
/// after list while its window has room before the next QP's turn (its state stays in cache).
fn post_some<P: Poster>(p: &mut P) -> Result<(), String> {
    let mut budget = POST_BUDGET as u64;
    while budget > 0 {
        let set = p.streams();
        let Some(qp) = set.ready.pop_front() else {
            break;
        };
        set.streams[qp].queued = false;
        loop {
            let n = p.streams().next_list(qp);
            if n == 0 || budget == 0 {
                break;
            }
            for _ in 0..n {
                post_next(p, qp, false)?;
            }
            budget = budget.saturating_sub(n);
        }
        p.streams().maybe_ready(qp);
    }
    Ok(())
}

/// Runs the stream of one size until every message completed (the caller has `start`ed it),
/// for `duration_s` seconds when not 0. Fails after `timeout` without a completion.
pub(crate) fn run<P: Poster>(
    p: &mut P,
    duration_s: u16,
    timeout: Duration,
) -> Result<Tally, String> {
    let t0 = Instant::now();
    let cpu0 = cpu_ns();
    let done0: Vec<u64> = p.streams().streams.iter().map(|s| s.done).collect();
    let limit = Duration::from_secs(u64::from(duration_s));
    let mut stopped = duration_s == 0;
    let mut last_progress = (t0, 0u64);
    let mut n = 0u32;
    while !p.streams().finished() {
        post_some(p)?;
        p.turn()?;
        n = n.wrapping_add(1);
        if n.is_multiple_of(CLOCK_EVERY) {
            let now = Instant::now();
            if !stopped && now.duration_since(t0) >= limit {
                for qp in p.streams().stop() {
                    post_next(p, qp, true)?;
                }
                stopped = true;
            }
            let completed = p.streams().completed;
            if completed != last_progress.1 {
                last_progress = (now, completed);
            } else if now.duration_since(last_progress.0) > timeout {
                return Err(format!(
                    "no completion for {timeout:?} ({completed} of the stream's messages done)"
                ));
            }
        }
    }
    let elapsed = t0.elapsed();
    let set = p.streams();
    Ok(Tally {
        sent: set.completed,
        elapsed,
        cpu_ns: cpu_ns().saturating_sub(cpu0),
        peak_rate: peak_rate(&set.samples, elapsed),
        per_qp: set
            .streams
            .iter()
            .zip(done0)
            .map(|(s, d0)| s.done - d0)
            .collect(),
    })
}
