//! The checks of the verified workload catch what they exist for: endpoints that misbehave
//! on purpose (a wrapper around the simulated pair) make the run fail with the reason.

use super::*;
use crate::link::LinkConfig;
use crate::pair::{ConnSpec, Pair};

/// The [`Endpoints`] methods a wrapper with the simulated pair in `inner` passes through
/// unchanged.
macro_rules! pass_through {
    () => {
        fn qpns(&self) -> (u32, u32) {
            self.inner.qpns()
        }
        fn register(
            &mut self,
            side: Side,
            len: usize,
            access: Access,
        ) -> Result<Region, WorkloadError> {
            self.inner.register(side, len, access)
        }
        fn deregister(&mut self, side: Side, region: &Region) -> Result<(), WorkloadError> {
            self.inner.deregister(side, region)
        }
        fn write(
            &mut self,
            side: Side,
            r: &Region,
            at: usize,
            data: &[u8],
        ) -> Result<(), WorkloadError> {
            self.inner.write(side, r, at, data)
        }
        fn post_send(&mut self, wr: SendWr) -> Result<(), WorkloadError> {
            self.inner.post_send(wr)
        }
        fn post_recv(&mut self, wr: RecvWr) -> Result<(), WorkloadError> {
            self.inner.post_recv(wr)
        }
        fn elapsed(&self) -> Duration {
            self.inner.elapsed()
        }
        fn qp_stats(&mut self) -> Result<QpStats, WorkloadError> {
            self.inner.qp_stats()
        }
    };
}

/// The simulated pair with one fault: `bend` changes what the workload sees.
struct Bent<'a, F: FnMut(&mut Vec<(Side, WorkCompletion)>, &mut Vec<u8>)> {
    inner: SimConn<'a>,
    /// Called on every batch of completions (with an empty buffer) and on every read's bytes
    /// (with an empty batch).
    bend: F,
}

impl<F: FnMut(&mut Vec<(Side, WorkCompletion)>, &mut Vec<u8>)> Endpoints for Bent<'_, F> {
    pass_through!();
    fn read(
        &mut self,
        side: Side,
        r: &Region,
        at: usize,
        len: usize,
    ) -> Result<Vec<u8>, WorkloadError> {
        let mut b = self.inner.read(side, r, at, len)?;
        (self.bend)(&mut Vec::new(), &mut b);
        Ok(b)
    }
    fn completions(
        &mut self,
        limit: Duration,
    ) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError> {
        let mut got = self.inner.completions(limit)?;
        (self.bend)(&mut got, &mut Vec::new());
        Ok(got)
    }
    fn settle(&mut self) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError> {
        self.inner.settle()
    }
}

fn spec(kind: WorkloadKind) -> WorkloadSpec {
    WorkloadSpec {
        kind,
        size: 100,
        count: 20,
        depth: 4,
        ..WorkloadSpec::default()
    }
}

/// Runs `kind` over a clean wire with `bend` in the way; the run's error text.
fn fails_with(
    kind: WorkloadKind,
    bend: impl FnMut(&mut Vec<(Side, WorkCompletion)>, &mut Vec<u8>),
) -> String {
    let mut pair = Pair::new(LinkConfig::clean());
    let conn = pair.connect(&ConnSpec::default()).expect("connect");
    let mut ends = Bent {
        inner: SimConn::new(&mut pair, conn),
        bend,
    };
    match run_verified(&mut ends, &spec(kind)) {
        Ok(r) => panic!("the run passed: {r:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn unbent_every_kind_passes() {
    for (_, kind) in WorkloadKind::ALL {
        let mut pair = Pair::new(LinkConfig::clean());
        let conn = pair.connect(&ConnSpec::default()).expect("connect");
        let r = run_workload(&mut pair, conn, &spec(kind)).expect("clean run");
        assert_eq!(r.completions_a, 20, "{kind}");
    }
}

#[test]
fn a_flipped_byte_in_what_b_received_is_named() {
    let mut reads = 0;
    let e = fails_with(WorkloadKind::Write, |_, b| {
        reads += usize::from(!b.is_empty());
        if reads == 5 {
            b[42] ^= 1;
        }
    });
    assert!(
        e.contains("RDMA WRITE target") && e.contains("byte 42"),
        "{e}"
    );
}

#[test]
fn a_completion_of_another_qp_is_refused() {
    let e = fails_with(WorkloadKind::Send, |got, _| {
        if let Some((_, wc)) = got.first_mut() {
            wc.qp_num ^= 0x10;
        }
    });
    assert!(e.contains("not the run's"), "{e}");
}

#[test]
fn a_duplicated_completion_is_refused() {
    let mut once = true;
    let e = fails_with(WorkloadKind::Read, |got, _| {
        if let Some(&(Side::A, wc)) = got.first().filter(|_| once) {
            once = false;
            got.push((Side::A, wc));
        }
    });
    // Refused as a duplicate of what is in flight, or as one with nothing in flight.
    assert!(
        e.contains("out of order or duplicate") || e.contains("nothing in flight"),
        "{e}"
    );
}

#[test]
fn an_atomic_that_returns_a_stale_value_is_refused() {
    let mut reads = 0;
    // Fetch-and-add and compare-and-swap alternate: the third result read is the second
    // fetch-and-add's, which must return 1.
    let e = fails_with(WorkloadKind::Atomic, |_, b| {
        reads += usize::from(!b.is_empty());
        if reads == 3 && !b.is_empty() {
            b.fill(0);
        }
    });
    assert!(e.contains("returned 0, expected 1"), "{e}");
}

#[test]
fn a_lost_receive_completion_is_named() {
    let mut dropped = false;
    let e = fails_with(WorkloadKind::Send, |got, _| {
        if !dropped {
            if let Some(i) = got.iter().position(|(s, _)| *s == Side::B) {
                got.remove(i);
                dropped = true;
            }
        }
    });
    assert!(e.contains("B expected receive 0"), "{e}");
}

/// The simulated pair whose B completions come late: B's completion of message `i` reaches
/// the workload only in the call after the one that returned A's completion of `i`, as on
/// real engines where the ACK can overtake B's completion event.
struct LateB<'a> {
    inner: SimConn<'a>,
    /// B's completions whose A completion has not been returned yet.
    pending: Vec<(Side, WorkCompletion)>,
    /// B's completions to return by the next call.
    ready: Vec<(Side, WorkCompletion)>,
    /// The highest message A has completed.
    a_done: Option<u64>,
    /// B's completions returned late.
    late: usize,
}

impl LateB<'_> {
    fn hold(&mut self, got: Vec<(Side, WorkCompletion)>) -> Vec<(Side, WorkCompletion)> {
        let (b, a): (Vec<_>, Vec<_>) = got.into_iter().partition(|(s, _)| *s == Side::B);
        self.pending.extend(b);
        self.a_done = a.iter().map(|(_, wc)| wc.wr_id).max().max(self.a_done);
        let done = self.a_done;
        let (ready, pending) = self
            .pending
            .drain(..)
            .partition(|(_, wc)| Some(wc.wr_id) <= done);
        self.pending = pending;
        self.late += Vec::len(&ready);
        self.ready.extend(ready);
        a
    }
}

impl Endpoints for LateB<'_> {
    pass_through!();
    fn read(
        &mut self,
        side: Side,
        r: &Region,
        at: usize,
        len: usize,
    ) -> Result<Vec<u8>, WorkloadError> {
        self.inner.read(side, r, at, len)
    }
    fn completions(
        &mut self,
        limit: Duration,
    ) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError> {
        if !self.ready.is_empty() {
            return Ok(std::mem::take(&mut self.ready));
        }
        let got = self.inner.completions(limit)?;
        Ok(self.hold(got))
    }
    fn settle(&mut self) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError> {
        let mut got = std::mem::take(&mut self.ready);
        got.append(&mut self.pending);
        got.extend(self.inner.settle()?);
        Ok(got)
    }
}

#[test]
fn a_receive_completing_after_the_senders_completion_is_still_checked_intact() {
    let mut pair = Pair::new(LinkConfig::clean());
    let conn = pair.connect(&ConnSpec::default()).expect("connect");
    let mut ends = LateB {
        inner: SimConn::new(&mut pair, conn),
        pending: Vec::new(),
        ready: Vec::new(),
        a_done: None,
        late: 0,
    };
    let spec = WorkloadSpec {
        count: 28,
        ..spec(WorkloadKind::Mixed)
    };
    let r = run_verified(&mut ends, &spec).expect("late receive completions");
    assert_eq!((r.completions_a, r.completions_b), (28, 12));
    assert_eq!(ends.late, 12, "every receive completion came late");
}
