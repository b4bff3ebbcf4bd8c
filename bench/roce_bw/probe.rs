//! The latency probe (`--probe`): one more QP beside the stream's, on which the client sends a
//! 64-byte SEND and the server sends it straight back, one round trip at a time with a pause
//! between (so the probe adds next to no load). What a latency-sensitive application sharing
//! the bottleneck with the stream would see: the client times each round trip, first alone
//! (before the stream starts: the idle figure), then while the stream runs.

use dpdk_roce::host::Host;
use dpdk_roce::mem::MrTable;
use dpdk_roce::transport::types::{RecvWr, SendOp, SendWr, Sge, WcOpcode, WorkCompletion};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of a probe message.
const LEN: u32 = 64;
/// Receives kept posted (a late echo and the next one never find the queue empty).
const RECVS: u64 = 4;
/// The pause between a round trip's end and the next probe.
const GAP: Duration = Duration::from_micros(200);
/// The idle phase's length before the stream.
pub(crate) const IDLE: Duration = Duration::from_secs(1);

/// Bytes of registered memory a probe needs: its message and its receive buffer.
pub(crate) const BYTES: usize = 2 * LEN as usize;

pub(crate) struct Probe {
    pub qpn: u32,
    /// `BYTES` of local-write memory: the message, then the receive buffer.
    addr: u64,
    lkey: u32,
    client: bool,
    /// When the probe in flight left (client).
    sent_at: Option<Instant>,
    next_at: Instant,
    /// This phase's round trips, in nanoseconds.
    samples: Vec<u64>,
    sends: u64,
}

impl Probe {
    /// The probe on QP `qpn` (connected), over [`BYTES`] of local-write memory at `addr`
    /// (`lkey`), its receives posted.
    pub fn new(
        host: &mut Host<Arc<MrTable>>,
        qpn: u32,
        (addr, lkey): (u64, u32),
        client: bool,
    ) -> Result<Probe, String> {
        let p = Probe {
            qpn,
            addr,
            lkey,
            client,
            sent_at: None,
            next_at: Instant::now(),
            samples: Vec::new(),
            sends: 0,
        };
        for i in 0..RECVS {
            p.post_recv(host, i)?;
        }
        Ok(p)
    }

    fn post_recv(&self, host: &mut Host<Arc<MrTable>>, id: u64) -> Result<(), String> {
        let wr = RecvWr {
            wr_id: id,
            sgl: dpdk_roce::sgl![Sge {
                addr: self.addr + u64::from(LEN),
                len: LEN,
                lkey: self.lkey,
            }],
        };
        host.post_recv(self.qpn, wr)
            .map_err(|e| format!("posting the probe's receive: {e}"))
    }

    fn send(
        &mut self,
        host: &mut Host<Arc<MrTable>>,
        now: dpdk_roce::time::Instant,
    ) -> Result<(), String> {
        self.sends += 1;
        let wr = SendWr {
            wr_id: self.sends,
            op: SendOp::Send,
            sgl: dpdk_roce::sgl![Sge {
                addr: self.addr,
                len: LEN,
                lkey: self.lkey,
            }],
            signaled: true,
            fence: false,
            solicited: false,
        };
        host.post_send(now, self.qpn, wr)
            .map_err(|e| format!("posting the probe: {e}"))
    }

    /// A completion of the probe's QP: the server echoes a receive, the client times it.
    pub fn on_completion(
        &mut self,
        host: &mut Host<Arc<MrTable>>,
        now: dpdk_roce::time::Instant,
        wc: &WorkCompletion,
    ) -> Result<(), String> {
        if wc.opcode != WcOpcode::Recv {
            return Ok(());
        }
        self.post_recv(host, wc.wr_id)?;
        if !self.client {
            return self.send(host, now);
        }
        if let Some(t0) = self.sent_at.take() {
            let at = Instant::now();
            self.samples.push(at.duration_since(t0).as_nanos() as u64);
            self.next_at = at + GAP;
        }
        Ok(())
    }

    /// The client sends the next probe when the last one came back and the pause is over.
    pub fn tick(
        &mut self,
        host: &mut Host<Arc<MrTable>>,
        now: dpdk_roce::time::Instant,
    ) -> Result<(), String> {
        if !self.client || self.sent_at.is_some() {
            return Ok(());
        }
        let t = Instant::now();
        if t < self.next_at {
            return Ok(());
        }
        self.sent_at = Some(t);
        self.send(host, now)
    }

    /// This phase's round trips (a new phase starts), sorted.
    pub fn take_phase(&mut self) -> Vec<u64> {
        let mut s = std::mem::take(&mut self.samples);
        s.sort_unstable();
        s
    }
}

/// The wall clock in nanoseconds since the Unix epoch (a capture's timestamps).
pub(crate) fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// `p50 X p99 Y max Z us (N round trips)` of sorted `s`.
pub(crate) fn summary(s: &[u64]) -> String {
    if s.is_empty() {
        return "no round trips".into();
    }
    let at = |q: f64| s[((s.len() - 1) as f64 * q).round() as usize] as f64 / 1000.0;
    format!(
        "p50 {:.1} p99 {:.1} max {:.1} us ({} round trips)",
        at(0.5),
        at(0.99),
        at(1.0),
        s.len()
    )
}

/// `probe QP: …` on stderr: the probe QP's own recovery (packets sent again, timeouts, tail
/// probes) and congestion state (its window or rate, pacer waits, cuts), beside the
/// stream's summary.
pub(crate) fn print_qp(host: &Host<Arc<MrTable>>, qpn: u32) {
    let Some(qp) = host.qp(qpn) else {
        return;
    };
    let (q, c) = (qp.stats(), qp.congestion());
    let now = match (c.rate_bps(), c.cwnd()) {
        (Some(r), _) => format!("{:.1} Mbit/s", r as f64 / 1e6),
        (None, Some(w)) => format!("window {w:.2}"),
        (None, None) => "-".into(),
    };
    eprintln!(
        "probe QP: packets_sent: {}  retransmits: {}  timeouts: {}  tail_probes: {}  \
         spurious: {}  duplicates: {}  ce_marks: {}  cnps_received: {}  rate_cuts: {}  \
         paced_waits: {}  now: {now}",
        q.packets_sent,
        q.retransmits,
        q.timeouts,
        q.tail_probes,
        q.spurious_retransmits,
        q.duplicates,
        c.stats.ce_marks,
        c.stats.cnps_received,
        c.stats.rate_cuts,
        c.stats.paced_waits,
    );
}
