//! The verified workload over the simulated pair: its virtual clock, or the wall clock of a
//! real wire (`Pair::over_real_wire`).

use super::endpoints::{missing, read_region, write_region, Endpoints, Side};
use super::{run_verified, WorkloadError, WorkloadReport, WorkloadSpec};
use crate::mem::access::Access;
use crate::mem::vec_memory::Region;
use crate::pair::{Conn, Pair, SimError};
use crate::time::Instant;
use crate::transport::qp::QpStats;
use crate::transport::types::{RecvWr, SendWr, WorkCompletion};
use core::time::Duration;

/// Protection domain the workload registers its memory in (the QPs' default PD).
const PD: u32 = 1;

/// One connection of a [`Pair`].
pub struct SimConn<'a> {
    pub pair: &'a mut Pair,
    pub conn: Conn,
    start: Instant,
}

impl<'a> SimConn<'a> {
    pub fn new(pair: &'a mut Pair, conn: Conn) -> SimConn<'a> {
        let start = pair.now();
        SimConn { pair, conn, start }
    }
}

/// Runs a verified workload from A to B on `conn`.
pub fn run_workload(
    pair: &mut Pair,
    conn: Conn,
    spec: &WorkloadSpec,
) -> Result<WorkloadReport, WorkloadError> {
    run_verified(&mut SimConn::new(pair, conn), spec)
}

impl Endpoints for SimConn<'_> {
    fn qpns(&self) -> (u32, u32) {
        (self.conn.qpn_a, self.conn.qpn_b)
    }

    fn register(
        &mut self,
        side: Side,
        len: usize,
        access: Access,
    ) -> Result<Region, WorkloadError> {
        Ok(self.pair.side(side).register(PD, len, access))
    }

    fn deregister(&mut self, side: Side, region: &Region) -> Result<(), WorkloadError> {
        self.pair
            .side(side)
            .mem
            .deregister(region.lkey)
            .map(drop)
            .map_err(|e| WorkloadError::Endpoints(format!("{side:?}: {e:?}")))
    }

    fn write(
        &mut self,
        side: Side,
        region: &Region,
        at: usize,
        data: &[u8],
    ) -> Result<(), WorkloadError> {
        write_region(&mut self.pair.side(side).mem, region.lkey, at, data)
            .ok_or_else(|| missing(side, region.lkey))
    }

    fn read(
        &mut self,
        side: Side,
        region: &Region,
        at: usize,
        len: usize,
    ) -> Result<Vec<u8>, WorkloadError> {
        read_region(&self.pair.side(side).mem, region.lkey, at, len)
            .ok_or_else(|| missing(side, region.lkey))
    }

    fn post_send(&mut self, wr: SendWr) -> Result<(), WorkloadError> {
        let now = self.pair.now();
        self.pair
            .a
            .post_send(now, self.conn.qpn_a, wr)
            .map_err(|e| SimError::from(e).into())
    }

    fn post_recv(&mut self, wr: RecvWr) -> Result<(), WorkloadError> {
        self.pair
            .b
            .post_recv(self.conn.qpn_b, wr)
            .map_err(|e| SimError::from(e).into())
    }

    fn completions(
        &mut self,
        limit: Duration,
    ) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError> {
        let mut got = Vec::new();
        self.pair.run_until(limit, |p| {
            got.extend(ready(p));
            !got.is_empty()
        })?;
        Ok(got)
    }

    fn settle(&mut self) -> Result<Vec<(Side, WorkCompletion)>, WorkloadError> {
        self.pair.run_idle(Duration::from_secs(60))?;
        Ok(ready(self.pair))
    }

    fn elapsed(&self) -> Duration {
        self.pair.now().saturating_duration_since(self.start)
    }

    fn qp_stats(&mut self) -> Result<QpStats, WorkloadError> {
        let stats = |e: &crate::endpoint::Endpoint, qpn| e.qp(qpn).map(|q| *q.stats());
        Ok(stats(&self.pair.a, self.conn.qpn_a).unwrap_or_default()
            + stats(&self.pair.b, self.conn.qpn_b).unwrap_or_default())
    }
}

/// Every completion ready on the two sides, B's first.
fn ready(p: &mut Pair) -> Vec<(Side, WorkCompletion)> {
    let mut got = Vec::new();
    while let Some(wc) = p.b.poll_completion() {
        got.push((Side::B, wc));
    }
    while let Some(wc) = p.a.poll_completion() {
        got.push((Side::A, wc));
    }
    got
}
