//! Two endpoints joined by the simulated wire, driven by a virtual clock: the in-memory
//! stand-in for two hosts on a link. Everything is deterministic for a link seed.

use super::endpoint::{Endpoint, EndpointError, QpOptions};
use super::link::{Link, LinkConfig, Side};
use crate::capture::{CaptureError, PcapCapture};
use crate::cm::{AcceptParams, CmEvent, ConnectParams};
use crate::host::{HostConfig, QpnPolicy};
use crate::mem::vec_memory::VecMemory;
use crate::net::NetConfig;
use crate::time::Instant;
use crate::transport::types::Mtu;
use crate::wire::ethernet::EthernetAddress;
use crate::wire::psn::Psn;
use core::time::Duration;
use std::fs::File;
use std::io::BufWriter;
use std::net::Ipv4Addr;
use std::path::Path;

/// IPv4 address of side A (a documentation range, never routed).
pub const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
/// IPv4 address of side B.
pub const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
/// MAC of side A (locally administered).
pub const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0a]);
/// MAC of side B.
pub const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0b]);

/// Why a simulation run stopped short.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("nothing left to happen before the condition was met (at {0:?})")]
    Stalled(Instant),
    #[error("virtual time limit reached before the condition was met (at {0:?})")]
    TimeLimit(Instant),
    #[error("endpoint: {0}")]
    Endpoint(#[from] EndpointError),
    #[error("connection failed: {0:?}")]
    ConnectFailed(CmEvent),
    #[error("capture: {0}")]
    Capture(#[from] CaptureError),
    #[error("configuration: {0}")]
    Config(String),
}

/// A real wire between the two sides (e.g. two DPDK ports on the ends of a veth pair).
pub trait RealWireIo {
    /// Sends `frame` from side `from`'s port.
    fn send(&mut self, from: Side, frame: &[u8]);
    /// Receives whatever arrived on either port, calling `f(receiving side, frame)`.
    fn receive(&mut self, f: &mut dyn FnMut(Side, &[u8]));
}

struct RealWire {
    wire: Box<dyn RealWireIo>,
    clock: std::time::Instant,
    epoch: Instant,
}

/// Parameters of one RC connection set up by [`Pair::connect`].
#[derive(Clone, Debug)]
pub struct ConnSpec {
    pub port: u16,
    pub pmtu: Mtu,
    /// PSN side A sends first (B's receive PSN).
    pub psn_a: Psn,
    /// PSN side B sends first (A's receive PSN).
    pub psn_b: Psn,
    pub qp_a: QpOptions,
    pub qp_b: QpOptions,
    /// Reads/atomics in flight each way.
    pub rd_atomic: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    /// Local ACK timeout exponent (4.096 us * 2^t).
    pub timeout: u8,
    /// RNR timer code the responders advertise.
    pub min_rnr_timer: u8,
    pub private_data: Vec<u8>,
}

impl Default for ConnSpec {
    fn default() -> Self {
        ConnSpec {
            port: 7471,
            pmtu: Mtu::Mtu1024,
            psn_a: Psn::new(0x1000),
            psn_b: Psn::new(0x2000),
            qp_a: QpOptions::default(),
            qp_b: QpOptions::default(),
            rd_atomic: 16,
            retry_cnt: 7,
            rnr_retry: 7,
            timeout: 10,
            min_rnr_timer: 1,
            private_data: Vec::new(),
        }
    }
}

/// A connected QP pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conn {
    pub qpn_a: u32,
    pub qpn_b: u32,
}

/// Two endpoints, a wire and a clock.
pub struct Pair {
    pub a: Endpoint,
    pub b: Endpoint,
    pub link: Link,
    /// A real wire replacing the simulated one (e.g. two DPDK ports); time then follows the
    /// wall clock instead of jumping to the next event.
    real: Option<RealWire>,
    now: Instant,
    capture: Option<PcapCapture<BufWriter<File>>>,
    /// Frames put on the wire while recording ([`record`](Self::record)).
    recorded: Option<Vec<(Side, Vec<u8>)>>,
    steps: u64,
}

impl Pair {
    /// Two endpoints over a wire with the given impairments, each knowing the other's MAC
    /// statically (no ARP on the wire: captures hold RoCEv2 only).
    pub fn new(link: LinkConfig) -> Pair {
        let mut p = Pair::with_arp(link);
        p.a.add_neighbour(IP_B, MAC_B).expect("B is on A's subnet");
        p.b.add_neighbour(IP_A, MAC_A).expect("A is on B's subnet");
        p
    }

    /// Two endpoints that find each other with ARP.
    pub fn with_arp(link: LinkConfig) -> Pair {
        let host = |mac, ip, guid, seed| {
            Endpoint::new(
                HostConfig {
                    net: NetConfig::new(mac, ip, 24),
                    ca_guid: guid,
                    seed,
                    qpns: QpnPolicy::Random,
                    cm: Default::default(),
                },
                VecMemory::new(),
            )
            .expect("the simulator's addresses are valid")
        };
        Pair {
            a: host(MAC_A, IP_A, 0x0200_00ff_fe00_000a, link.seed ^ 0xa),
            b: host(MAC_B, IP_B, 0x0200_00ff_fe00_000b, link.seed ^ 0xb),
            link: Link::new(link),
            real: None,
            // Start at a realistic epoch so capture timestamps are not 1970-01-01 00:00.
            now: Instant::from_nanos(1_700_000_000_000_000_000),
            capture: None,
            recorded: None,
            steps: 0,
        }
    }

    /// Two endpoints on a real wire (`wire` moves frames between side A's and side B's ports),
    /// with the given MACs and addresses on one /24; they find each other with ARP. Time follows
    /// the wall clock.
    pub fn over_real_wire(
        wire: Box<dyn RealWireIo>,
        a: (EthernetAddress, Ipv4Addr),
        b: (EthernetAddress, Ipv4Addr),
    ) -> Result<Pair, SimError> {
        let host = |mac, ip, guid, seed| {
            Endpoint::new(
                HostConfig {
                    net: NetConfig::new(mac, ip, 24),
                    ca_guid: guid,
                    seed,
                    qpns: QpnPolicy::Random,
                    cm: Default::default(),
                },
                VecMemory::new(),
            )
            .map_err(|e| SimError::Config(e.to_string()))
        };
        let epoch = Instant::from_nanos(1_700_000_000_000_000_000);
        Ok(Pair {
            a: host(a.0, a.1, 0x0200_00ff_fe00_000a, 0xa)?,
            b: host(b.0, b.1, 0x0200_00ff_fe00_000b, 0xb)?,
            link: Link::new(LinkConfig::clean()),
            real: Some(RealWire {
                wire,
                clock: std::time::Instant::now(),
                epoch,
            }),
            now: epoch,
            capture: None,
            recorded: None,
            steps: 0,
        })
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// An endpoint by side.
    pub fn side(&mut self, s: Side) -> &mut Endpoint {
        match s {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    /// Writes every frame either side puts on the wire to a pcap file from now on.
    pub fn capture_to(&mut self, path: &Path) -> Result<(), SimError> {
        self.capture = Some(PcapCapture::create(path)?);
        Ok(())
    }

    /// Flushes and closes the capture; returns the number of frames written.
    pub fn finish_capture(&mut self) -> Result<u64, SimError> {
        match self.capture.take() {
            Some(c) => {
                let n = c.frames();
                c.finish()?;
                Ok(n)
            }
            None => Ok(0),
        }
    }

    /// Moves every pending frame onto the wire and delivers every frame due. Returns whether
    /// anything moved.
    fn pump(&mut self) -> Result<bool, SimError> {
        let mut moved = false;
        for side in [Side::A, Side::B] {
            let now = self.now;
            while let Some(frame) = self.side(side).poll_transmit(now) {
                if let Some(c) = self.capture.as_mut() {
                    c.write(now, &frame)?;
                }
                if let Some(r) = self.recorded.as_mut() {
                    r.push((side, frame.clone()));
                }
                match self.real.as_mut() {
                    Some(r) => r.wire.send(side, &frame),
                    None => self.link.send(now, side, frame),
                }
                moved = true;
            }
        }
        if let Some(r) = self.real.as_mut() {
            let mut got = Vec::new();
            r.wire
                .receive(&mut |to, frame| got.push((to, frame.to_vec())));
            for (to, frame) in got {
                let now = self.now;
                if let Some(c) = self.capture.as_mut() {
                    c.write(now, &frame)?;
                }
                self.side(to).handle_frame(now, &frame);
                moved = true;
            }
            return Ok(moved);
        }
        while let Some((to, frame)) = self.link.poll_deliver(self.now) {
            let now = self.now;
            self.side(to).handle_frame(now, &frame);
            moved = true;
        }
        Ok(moved)
    }

    /// Starts (`true`) or stops keeping a copy of every frame either side sends.
    pub fn record(&mut self, on: bool) {
        if on {
            self.recorded.get_or_insert_with(Vec::new);
        } else {
            self.recorded = None;
        }
    }

    /// The frames recorded so far, with the side that sent each (recording goes on).
    pub fn take_recorded(&mut self) -> Vec<(Side, Vec<u8>)> {
        self.recorded
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// One step: pump; if nothing moved, fire due timers or advance the clock to the next
    /// event. Returns false when nothing at all is scheduled.
    pub fn step(&mut self) -> Result<bool, SimError> {
        self.steps += 1;
        if let Some(r) = &self.real {
            // Real time: follow the wall clock, fire due timers, never "run out" of events
            // (frames may still arrive).
            self.now = r.epoch + r.clock.elapsed();
            self.pump()?;
            let now = self.now;
            if self.a.poll_timeout().is_some_and(|t| t <= now) {
                self.a.handle_timeout(now);
            }
            if self.b.poll_timeout().is_some_and(|t| t <= now) {
                self.b.handle_timeout(now);
            }
            return Ok(true);
        }
        if self.pump()? {
            return Ok(true);
        }
        let next = [
            self.link.next_delivery(),
            self.a.poll_timeout(),
            self.b.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next else {
            return Ok(false);
        };
        if next > self.now {
            self.now = next;
        }
        let now = self.now;
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
        Ok(true)
    }

    /// Runs until `done` holds, at most `limit` of virtual time from now.
    pub fn run_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&mut Pair) -> bool,
    ) -> Result<(), SimError> {
        let deadline = self.now + limit;
        loop {
            if done(self) {
                return Ok(());
            }
            if self.now > deadline {
                return Err(SimError::TimeLimit(self.now));
            }
            if !self.step()? {
                return if done(self) {
                    Ok(())
                } else {
                    Err(SimError::Stalled(self.now))
                };
            }
        }
    }

    /// Runs until nothing is scheduled any more (or `limit` passes).
    pub fn run_idle(&mut self, limit: Duration) -> Result<(), SimError> {
        if self.real.is_some() {
            // A real wire never goes quiet for sure: settle for a bounded wall-clock time.
            let end = self.now + limit.min(Duration::from_millis(50));
            while self.now < end {
                self.step()?;
            }
            return Ok(());
        }
        let deadline = self.now + limit;
        while self.step()? {
            if self.now > deadline {
                return Err(SimError::TimeLimit(self.now));
            }
        }
        Ok(())
    }

    /// Creates a QP on each side and connects them through the CM: B listens on `spec.port`,
    /// A connects, B accepts; returns once both sides report `Established`.
    pub fn connect(&mut self, spec: &ConnSpec) -> Result<Conn, SimError> {
        let now = self.now;
        let qpn_a = self.a.create_qp(now, spec.qp_a)?;
        let qpn_b = self.b.create_qp(now, spec.qp_b)?;
        self.connect_qps(spec, qpn_a, qpn_b)
    }

    /// Connects existing QPs (in INIT) through the CM.
    pub fn connect_qps(
        &mut self,
        spec: &ConnSpec,
        qpn_a: u32,
        qpn_b: u32,
    ) -> Result<Conn, SimError> {
        // A second connection on the same port reuses the listener.
        let _ = self.b.listen(spec.port);
        let b_ip = self
            .b
            .config()
            .net
            .ipv4_addr()
            .expect("simulated hosts have IPv4");
        let mut cp = ConnectParams::new(b_ip, spec.port, qpn_a, spec.psn_b);
        cp.pmtu = spec.pmtu;
        cp.responder_resources = spec.rd_atomic;
        cp.initiator_depth = spec.rd_atomic;
        cp.retry_cnt = spec.retry_cnt;
        cp.rnr_retry = spec.rnr_retry;
        cp.local_ack_timeout = spec.timeout;
        cp.min_rnr_timer = spec.min_rnr_timer;
        cp.srq = spec.qp_a.srq.is_some();
        cp.access = spec.qp_a.access;
        cp.private_data = spec.private_data.clone();
        let now = self.now;
        let id_a = self.a.connect(now, cp)?;

        let mut request = None;
        self.run_until(Duration::from_secs(60), |p| {
            while let Some(ev) = p.b.poll_event() {
                if let CmEvent::ConnectRequest { id, .. } = ev {
                    request = Some(id);
                }
            }
            request.is_some()
        })?;
        let id_b = request.ok_or(SimError::Stalled(self.now))?;
        let mut ap = AcceptParams::new(qpn_b, spec.psn_a);
        ap.responder_resources = spec.rd_atomic;
        ap.initiator_depth = spec.rd_atomic;
        ap.rnr_retry = spec.rnr_retry;
        ap.min_rnr_timer = spec.min_rnr_timer;
        ap.srq = spec.qp_b.srq.is_some();
        ap.access = spec.qp_b.access;
        let now = self.now;
        self.b.accept(now, id_b, ap)?;

        let (mut up_a, mut up_b) = (false, false);
        let mut failure = None;
        self.run_until(Duration::from_secs(60), |p| {
            while let Some(ev) = p.a.poll_event() {
                match ev {
                    CmEvent::Established { id, .. } if id == id_a => up_a = true,
                    CmEvent::Rejected { .. }
                    | CmEvent::Unreachable { .. }
                    | CmEvent::TimedOut { .. }
                    | CmEvent::ConnectError { .. } => failure = Some(ev),
                    _ => {}
                }
            }
            while let Some(ev) = p.b.poll_event() {
                if let CmEvent::Established { id, .. } = ev {
                    if id == id_b {
                        up_b = true;
                    }
                }
            }
            failure.is_some() || (up_a && up_b)
        })?;
        if let Some(ev) = failure {
            return Err(SimError::ConnectFailed(ev));
        }
        Ok(Conn { qpn_a, qpn_b })
    }
}
