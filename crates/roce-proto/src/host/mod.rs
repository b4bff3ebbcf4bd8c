//! The protocol state of one RoCEv2 port, sans-IO: the IPv4/ARP neighbour layer (`net`), the IB
//! CM on QP1, RC queue pairs, shared receive queues and registered memory. It turns `Transmit`s,
//! CM MADs and ARP packets into complete Ethernet frames (ICRC included) and demultiplexes
//! received frames by destination QP. The DPDK engine and the in-memory simulator both drive a
//! `Host`: frames in with `handle_frame`, frames out with `poll_transmit`, time passed in.
//!
//! # Work tracking (no scan of every QP per call)
//!
//! A QP is *touched* when it handled a packet or a timeout, got a post, or the CM changed its
//! state. Touching puts it (once: a flag per QP) on two lists with room reserved at
//! `create_qp`, so the fast path does not allocate:
//! - `cq_dirty`: `collect` drains completions and watermark events of these QPs only;
//! - `tx_ready`: `poll_transmit_into` asks only these QPs for packets, round robin; a QP whose
//!   peer's MAC is not known waits on `arp_wait` until the neighbour layer changes.
//!
//! CM events are drained only after the CM ran, SRQ limit flags checked only after a QP on that
//! SRQ took a WQE (or the limit was armed through the host). QP timers are summarised by a
//! lower bound (`qp_deadline`) lowered whenever a touched QP's deadline is earlier; when it is
//! reached, `handle_timeout` scans the QPs once and recomputes it exactly. The CM's deadline is
//! cached and recomputed after the CM ran.
//!
//! # Receive accounting
//!
//! Every QP has an [`EpRecvAccount`] (own receive queue: buffers allocated when posted) or an
//! [`SrqPort`] (on a [`SharedSrq`]: allocated when taken), completed in completion order, for
//! `dat_ep_recv_query` and the EP watermarks (seeds 002/004): [`Host::ep_recv_handle`].
//!
//! # Files, along the path a frame takes
//!
//! - `receive`: frames in (`handle_frame`), header prediction, demultiplexing by QP;
//! - `qps`: the QP table, posts, completions and the work lists;
//! - `qpn`: how QPs are numbered (at random, with a quarantine);
//! - `cm_glue`: connection management on QP1 and what it does to QPs;
//! - `event_log`, `log_limit`: what the host logs of its events, at most a few a second per kind;
//! - `transmit`: which QP or MAD sends next (`poll_transmit*`);
//! - `frames`: the frame builder (headers, payload, ICRC) and pinned frames;
//! - this file: the host itself, its identity, counters, errors and timers.

mod cm_glue;
mod event_log;
mod frames;
mod log_limit;
mod qpn;
mod qps;
mod receive;
mod req_gate;

pub use qpn::{QpnPolicy, QPN_QUARANTINE};
mod transmit;

use frames::{Body, FrameBuilder, To, ZERO_PAYLOAD};
pub use frames::{PinnedTx, TxOut};
use qps::{QpEntry, QpTable, RecvAcct, Work};

use crate::cc::CcConfig;
use crate::cm::{AcceptParams, Cm, CmError, CmEvent, CmId, ConnectParams, QpControl, CM_QPN};
use crate::mem::access::Access;
use crate::mem::access::KeyKind;
use crate::mem::access::Memory;
use crate::mem::{MrTable, PinToken, Pz};
use crate::net::{Inbound, Net, NetConfig, NetEvent, NetStats, Resolve, Route, TrafficClass};
use crate::srq::{EpRecvAccount, EpRecvHandle, RecvSource, SharedSrq, SrqPort, WatermarkEvents};
use crate::time::Instant;
use crate::transport::qp::Qp;
use crate::transport::transmit::Transmit;
use crate::transport::types::{
    QpAttr, QpConfig, QpError, QpState, RecvWr, SendWr, WcOpcode, WorkCompletion, MAX_SGE,
};
use crate::transport::WriteOnlyRequest;
use crate::wire::bth::{BthRepr, BTH_LEN, DEFAULT_PKEY};
use crate::wire::deth::{DethRepr, GSI_QKEY};
use crate::wire::ethernet::EthernetAddress;
use crate::wire::frame::pad_for;
use crate::wire::frame::ReceivedPacket;
use crate::wire::icrc::{icrc_in_place, IcrcHasher, ICRC_LEN};
use crate::wire::mad::MAD_LEN;
use crate::wire::opcode::Opcode;
use crate::wire::psn::Psn;
use crate::wire::reth::RETH_LEN;
use crate::wire::roce::RoceHeaders;
use crate::wire::write_only::WriteOnlyFrame;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;

/// Identity of a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// MAC, IPv4 address/prefix, MTU, traffic class and ARP timing.
    pub net: NetConfig,
    /// CA GUID the CM advertises.
    pub ca_guid: u64,
    /// Seed of the CM's comm ID / transaction ID generator and of the QP numbers (a
    /// provider facing a network seeds it from the OS, [`crate::random`]).
    pub seed: u64,
    /// How QPs are numbered.
    pub qpns: QpnPolicy,
    /// The connection manager's settings (its timers: the profile's `roce.cm_*`).
    pub cm: crate::cm::CmConfig,
}

/// A CNP's traffic class: the configured DSCP (masked to 6 bits), Not-ECT.
pub(super) fn cnp_traffic_class(cc: &CcConfig) -> TrafficClass {
    TrafficClass::new(cc.cnp_dscp & 0x3f, 0).unwrap_or_default()
}

/// MADs held while their destination is being resolved, at most.
const MAX_HELD_MADS: usize = 64;

/// What a host reports besides work completions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HostEvent {
    /// A connection-manager event.
    Cm(CmEvent),
    /// A neighbour-layer event (e.g. a peer that does not answer ARP).
    Net(NetEvent),
    /// The limit (low watermark) of SRQ `srqn` fired: fewer WQEs than the armed limit are
    /// posted (IBTA vol. 1 §11.5.2.4 "SRQ limit reached"; DAT `dat_srq_set_lw`). Also returned,
    /// one at a time, by [`Host::poll_srq_limit`].
    SrqLimit { srqn: u32 },
    /// A receive-buffer watermark of the EP on QP `qpn` was exceeded (seed 002,
    /// `dat_ep_set_watermark`): `soft` is an asynchronous event for the consumer; `hard` means
    /// the connection must be broken (the DAT layer disconnects and reports it broken).
    EpWatermark { qpn: u32, soft: bool, hard: bool },
}

/// Options of a new RC QP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpOptions {
    pub pd: u32,
    pub sq_depth: u32,
    pub rq_depth: u32,
    /// Draw receives from this SRQ instead of the QP's own receive queue.
    pub srq: Option<u32>,
    /// Remote access rights granted on this QP.
    pub access: Access,
    pub sig_all: bool,
}

impl Default for QpOptions {
    fn default() -> Self {
        QpOptions {
            pd: 1,
            sq_depth: 256,
            rq_depth: 256,
            srq: None,
            access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            sig_all: false,
        }
    }
}

/// Frame counters of a port above the neighbour layer (which counts its own drops).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Valid RoCEv2 frames for a QP that does not exist.
    pub rx_unknown_qp: u64,
    /// Frames to QP1 that are not UD SEND only with the GSI Q_Key.
    pub rx_bad_gsi: u64,
    /// Frames for a connected QP from an address that is not its peer's (dropped unread:
    /// IBTA requires a packet's source to match the QP's path, as Linux rxe's check_addr).
    pub rx_wrong_origin: u64,
    pub tx_frames: u64,
    /// Packets not sent because the QP has no peer address.
    pub tx_no_peer: u64,
    /// MADs dropped because too many were waiting for address resolution.
    pub tx_mads_dropped: u64,
    /// Frames that could not be built (e.g. larger than the MTU).
    pub tx_build_errors: u64,
    /// Packets not sent because their payload could not be read (region freed in flight).
    pub tx_payload_errors: u64,
    /// QPs whose completions `collect` looked at (only QPs touched since the last look).
    pub qps_collected: u64,
    /// Frames handed out with their payload pinned in registered memory (zero-copy).
    pub tx_pinned: u64,
    /// Frames taken by header prediction (`Host::set_header_prediction`); also counted where
    /// the general path counts them.
    pub rx_predicted: u64,
    /// REQs from a source of unknown MAC, held while ARP asks for it (`req_gate`), and those
    /// dropped unheard (ARP gave up, or a newer request took the slot).
    pub rx_requests_held: u64,
    pub rx_requests_unverified: u64,
    /// Frames built by the send side of header prediction (an RC RDMA WRITE Only written from
    /// the QP's headers without the general header set: `Qp::next_write_only`); also counted
    /// in `tx_frames`.
    pub tx_predicted: u64,
}

/// Errors of the host API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    #[error("no such QP")]
    UnknownQp,
    #[error("no such SRQ")]
    UnknownSrq,
    #[error("QP: {0}")]
    Qp(#[from] QpError),
    #[error("CM: {0}")]
    Cm(#[from] CmError),
    #[error("QP numbers exhausted")]
    NoQpn,
    #[error("SRQ: {0}")]
    Srq(QpError),
}

impl HostError {
    /// The reason a work request's completion reports for it: the QP's or SRQ's own error,
    /// else an invalid argument (an unknown QP or SRQ, a CM error).
    pub fn work_request_error(&self) -> QpError {
        match self {
            HostError::Qp(e) | HostError::Srq(e) => *e,
            _ => QpError::InvalidArgument,
        }
    }
}

/// One port with its neighbour layer, CM, QPs, SRQs and memory.
pub struct Host<M: Memory> {
    config: HostConfig,
    /// Registered memory of this port.
    pub mem: M,
    net: Net,
    cm: Cm,
    /// MADs waiting for their destination's MAC.
    held_mads: VecDeque<(IpAddr, [u8; MAD_LEN])>,
    /// REQs waiting for their source to answer ARP (`req_gate`).
    request_gate: req_gate::RequestGate,
    qps: BTreeMap<u32, QpEntry>,
    srqs: BTreeMap<u32, Arc<SharedSrq>>,
    work: Work,
    /// The CM ran since its events were last drained.
    cm_ran: bool,
    /// The CM's next deadline, recomputed after it ran.
    cm_deadline: Option<Instant>,
    /// SRQs whose limit flag may have been set since the last check.
    srq_check: Vec<u32>,
    /// CM connection of each QP.
    conn_of_qp: BTreeMap<u32, CmId>,
    /// The QP of each connection (the reverse of `conn_of_qp`, so a connection change finds
    /// its QP without a scan; an entry whose QP has moved on to another connection is stale
    /// and ignored).
    qp_of_conn: BTreeMap<CmId, u32>,
    /// Remote IP of each pending connection request.
    request_src: BTreeMap<CmId, IpAddr>,
    qpns: qpn::QpnAllocator,
    next_srqn: u32,
    gsi_psn: Psn,
    completions: VecDeque<WorkCompletion>,
    events: VecDeque<HostEvent>,
    stats: HostStats,
    /// Header prediction on receive and send (on by default).
    predict: bool,
    /// The frame `poll_transmit_*` returned last is awaited (`take_awaited`).
    awaited: bool,
    /// The limit on the log messages a peer can cause (`event_log`).
    log_limit: log_limit::LogLimit,
    /// The latest `now` passed to `handle_frame` or `handle_timeout`: the limiter's clock
    /// (events are logged when collected, possibly by a call without a time).
    clock: Instant,
    /// Congestion control of every QP (`cc`; `set_congestion`).
    cc: CcConfig,
}

impl<M: Memory> Host<M> {
    /// A port with no QPs over memory `mem`; fails if the network configuration is invalid.
    pub fn new(config: HostConfig, mem: M) -> Result<Host<M>, crate::net::ConfigError> {
        let qpns = qpn::QpnAllocator::new(config.qpns, config.seed);
        Ok(Host {
            net: Net::new(config.net)?,
            cm: Cm::with_config(
                crate::cm::LocalIps {
                    v4: config.net.ipv4_addr(),
                    v6: config.net.ipv6.map(|v6| v6.ip),
                },
                config.ca_guid,
                config.seed,
                config.cm,
            ),
            held_mads: VecDeque::new(),
            request_gate: req_gate::RequestGate::default(),
            config,
            mem,
            qps: BTreeMap::new(),
            srqs: BTreeMap::new(),
            work: Work::default(),
            cm_ran: false,
            cm_deadline: None,
            srq_check: Vec::new(),
            conn_of_qp: BTreeMap::new(),
            qp_of_conn: BTreeMap::new(),
            request_src: BTreeMap::new(),
            qpns,
            next_srqn: 1,
            gsi_psn: Psn::new(0),
            completions: VecDeque::new(),
            events: VecDeque::new(),
            stats: HostStats::default(),
            predict: true,
            awaited: false,
            log_limit: log_limit::LogLimit::default(),
            clock: Instant::ZERO,
            cc: CcConfig::default(),
        })
    }

    /// Congestion control for every QP, those there already (their counters start again)
    /// and those created later: the profile's `[congestion]` (`cc`).
    pub fn set_congestion(&mut self, cc: CcConfig) {
        self.cc = cc;
        for e in self.qps.values_mut() {
            e.qp.set_congestion(&cc);
        }
    }

    /// The ECN codepoint of the port's RoCEv2 packets from now on (0 not ECT, 1 ECT(1), 2
    /// ECT(0)): DCQCN's switches mark only ECN-capable packets.
    pub fn set_ecn(&mut self, ecn: u8) -> Result<(), crate::net::ConfigError> {
        self.net.set_ecn(ecn)
    }

    /// The congestion control QPs get.
    pub fn congestion(&self) -> &CcConfig {
        &self.cc
    }

    /// The congestion-control counters of the QPs there are now, summed, and how many of
    /// them a rate or window limits now.
    pub fn congestion_stats(&self) -> (crate::cc::CcStats, u64) {
        let mut sum = crate::cc::CcStats::default();
        let mut limited = 0;
        let full_window = f64::from(crate::transport::MAX_OUTSTANDING_PSNS);
        for e in self.qps.values() {
            let c = e.qp.congestion();
            sum += c.stats;
            if c.rate_bps().is_some() || c.cwnd().is_some_and(|w| w < full_window) {
                limited += 1;
            }
        }
        (sum, limited)
    }

    /// The port's identity.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Counters above the neighbour layer.
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// The neighbour layer's counters (ARP, and every received frame dropped, by reason).
    pub fn net_stats(&self) -> &NetStats {
        self.net.stats()
    }

    /// The neighbour layer.
    pub fn net(&self) -> &Net {
        &self.net
    }

    /// The CM (for its counters).
    pub fn cm(&self) -> &Cm {
        &self.cm
    }

    /// Connection requests held until their source answers ARP (`req_gate`; bounded).
    pub fn requests_held(&self) -> usize {
        self.request_gate.len()
    }

    /// Adds a static neighbour entry (never expires, never changed by ARP).
    pub fn add_neighbour(
        &mut self,
        ip: impl Into<IpAddr>,
        mac: EthernetAddress,
    ) -> Result<(), crate::net::NetError> {
        let r = self.net.add_static(ip.into(), mac);
        self.work.neighbours_changed();
        r
    }

    /// Earliest timer of the neighbour layer, the CM and the QPs (for the QPs possibly a bit
    /// early: a lower bound, exact again after `handle_timeout` reaches it).
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Called on every turn of the poll loop: plain comparisons, no iterator adaptors.
        let earliest = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, None) => x,
            (None, y) => y,
        };
        earliest(
            earliest(self.work.qp_deadline, self.cm_deadline),
            self.net.poll_timeout(),
        )
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.clock = self.clock.max(now);
        if self.net.poll_timeout().is_some_and(|t| t <= now) {
            self.net.handle_timeout(now);
        }
        // ARP retries, failures and expiries change what QPs waiting for a MAC can do.
        self.work.neighbours_changed();
        if self.cm_deadline.is_some_and(|t| t <= now) {
            self.cm.handle_timeout(
                now,
                &mut QpTable {
                    qps: &mut self.qps,
                    work: &mut self.work,
                },
            );
            self.cm_ran();
        }
        if self.work.qp_deadline.is_some_and(|t| t <= now) {
            let mut next: Option<Instant> = None;
            for (&qpn, e) in self.qps.iter_mut() {
                if e.qp.poll_timeout().is_some_and(|t| t <= now) {
                    e.qp.handle_timeout(now);
                    if !e.cq_dirty {
                        e.cq_dirty = true;
                        self.work.cq_dirty.push(qpn);
                    }
                    if !e.tx_queued {
                        e.tx_queued = true;
                        self.work.tx_ready.push_back(qpn);
                    }
                }
                if let Some(t) = e.qp.poll_timeout() {
                    next = Some(next.map_or(t, |n| n.min(t)));
                }
            }
            self.work.qp_deadline = next;
        }
        self.collect();
    }
}

impl Host<crate::mem::vec_memory::VecMemory> {
    /// Registers `len` bytes of zeroed memory in protection domain `pd` (test memory).
    pub fn register(
        &mut self,
        pd: u32,
        len: usize,
        access: Access,
    ) -> crate::mem::vec_memory::Region {
        self.mem.register(pd, len, access)
    }
}

/// A port whose memory is the checked region table of `crate::mem`: protection zones from the
/// table, regions registered from consumer memory or the table's allocator (DPDK hugepages).
impl Host<Arc<MrTable>> {
    /// The region table (register, deregister, query, pin).
    pub fn mr_table(&self) -> &Arc<MrTable> {
        &self.mem
    }

    /// A new protection zone (`dat_pz_create`); pass its id as `QpOptions::pd`.
    pub fn create_pz(&self) -> Pz {
        self.mem.create_pz()
    }
}
