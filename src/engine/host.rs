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

use crate::cm::{AcceptParams, Cm, CmError, CmEvent, CmId, ConnectParams, QpControl, CM_QPN};
use crate::mem::{MrTable, PinToken, Pz};
use crate::net::HEADERS_LEN;
use crate::net::{Inbound, Net, NetConfig, NetEvent, NetStats, Resolve, Route};
use crate::srq::{EpRecvAccount, EpRecvHandle, RecvSource, SharedSrq, SrqPort, WatermarkEvents};
use crate::time::Instant;
use crate::transport::memory::Access;
use crate::transport::memory::KeyKind;
use crate::transport::memory::Memory;
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
use crate::wire::frame::{ReceivedPacket, RoceFrame};
use crate::wire::icrc::{icrc_in_place, IcrcHasher, ICRC_LEN};
use crate::wire::mad::MAD_LEN;
use crate::wire::opcode::Opcode;
use crate::wire::psn::Psn;
use crate::wire::reth::RETH_LEN;
use crate::wire::roce::RoceHeaders;
use crate::wire::write_only::WriteOnlyFrame;
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::Arc;

/// Identity of a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostConfig {
    /// MAC, IPv4 address/prefix, MTU, traffic class and ARP timing.
    pub net: NetConfig,
    /// CA GUID the CM advertises.
    pub ca_guid: u64,
    /// Seed of the CM's comm ID / transaction ID generator.
    pub seed: u64,
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
    /// How long a lone ACK may wait to leave with this QP's next request
    /// (`Qp::set_ack_delay`; zero sends ACKs at once).
    pub ack_delay: core::time::Duration,
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
            ack_delay: DEFAULT_ACK_DELAY,
        }
    }
}

/// The default ACK delay of new QPs: none. A responder coalesces ACKs only over what has
/// already arrived (the ACKs of one receive burst leave as one, when the burst is handled) and
/// never holds one for a request that may come later, so a lone RDMA WRITE or SEND completes in
/// one network round trip. A delay (`QpOptions::ack_delay`, `Qp::set_ack_delay`) lets a
/// ping-pong's ACK ride with the answer at the cost of every lone completion; it is a knob for
/// that benchmark only (`roce-lat --ack-delay-us`).
pub const DEFAULT_ACK_DELAY: core::time::Duration = core::time::Duration::ZERO;

/// Frame counters of a port above the neighbour layer (which counts its own drops).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// Valid RoCEv2 frames for a QP that does not exist.
    pub rx_unknown_qp: u64,
    /// Frames to QP1 that are not UD SEND only with the GSI Q_Key.
    pub rx_bad_gsi: u64,
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

/// How a QP's receive buffers are accounted (seeds 002/004).
#[derive(Debug)]
enum RecvAcct {
    /// Own receive queue: a buffer is allocated to the EP when it is posted.
    Own(EpRecvAccount),
    /// On a shared SRQ: allocated when the QP takes it from the pool.
    Srq(SrqPort),
}

impl RecvAcct {
    fn handle(&self) -> EpRecvHandle {
        match self {
            RecvAcct::Own(a) => a.handle(),
            RecvAcct::Srq(p) => p.handle(),
        }
    }

    /// A receive completion was generated (in completion order).
    fn completed(&mut self, wc: &WorkCompletion) {
        if !matches!(wc.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
            return;
        }
        match self {
            RecvAcct::Own(a) => {
                a.complete_posted();
            }
            RecvAcct::Srq(p) => {
                if wc.srq.is_some() {
                    p.completed();
                }
            }
        }
    }
}

/// A QP with its bookkeeping.
#[derive(Debug)]
struct QpEntry {
    qp: Qp,
    recv: RecvAcct,
    /// On `cq_dirty`.
    cq_dirty: bool,
    /// On `tx_ready` or `arp_wait`.
    tx_queued: bool,
    /// The path of its packets, while `Net::route_valid` says it holds.
    route: Option<Route>,
    /// Peer IP once connected (or connecting).
    peer: Option<Ipv4Addr>,
}

/// Which QPs did something since they were last looked at (see the module documentation).
#[derive(Debug, Default)]
struct Work {
    cq_dirty: Vec<u32>,
    tx_ready: VecDeque<u32>,
    arp_wait: Vec<u32>,
    /// QPs the CM moved to ERROR: their last acknowledgements leave before the CM's next MAD
    /// (the DREQ), so the peer sees its sends acknowledged before it tears down and does not
    /// flush sends that completed here.
    before_cm: Vec<u32>,
    /// At or before the earliest QP timer (`None`: no QP timer armed).
    qp_deadline: Option<Instant>,
}

impl Work {
    /// QP `qpn` changed: drain its completions and ask it for packets at the next chance.
    fn touch(&mut self, qpn: u32, e: &mut QpEntry) {
        if !e.cq_dirty {
            e.cq_dirty = true;
            self.cq_dirty.push(qpn);
        }
        if !e.tx_queued {
            e.tx_queued = true;
            self.tx_ready.push_back(qpn);
        }
        self.timer_changed(e);
    }

    /// QP `qpn` handled a received packet or took a send post: like [`touch`](Self::touch),
    /// but it is asked for packets and completions only if it has some (an RDMA WRITE without
    /// AckReq or immediate leaves neither; a send posted to a QP that cannot send yet leaves
    /// no packet). A QP on an SRQ is always collected (its SRQ may have events).
    #[inline]
    fn ran(&mut self, qpn: u32, e: &mut QpEntry) {
        if !e.cq_dirty && (e.qp.has_completion() || matches!(e.recv, RecvAcct::Srq(_))) {
            e.cq_dirty = true;
            self.cq_dirty.push(qpn);
        }
        if !e.tx_queued && e.qp.has_output() {
            e.tx_queued = true;
            self.tx_ready.push_back(qpn);
        }
        self.timer_changed(e);
    }

    /// QP `qpn` was asked for a packet: that can complete WRs without one (a WQE that failed
    /// its L_Key check at post time completes in error when the QP reaches it), and those
    /// completions must be collected.
    fn polled(&mut self, qpn: u32, e: &mut QpEntry) {
        if !e.cq_dirty && e.qp.has_completion() {
            e.cq_dirty = true;
            self.cq_dirty.push(qpn);
        }
    }

    /// `e`'s timer may be earlier now.
    fn timer_changed(&mut self, e: &QpEntry) {
        if let Some(t) = e.qp.poll_timeout() {
            if self.qp_deadline.is_none_or(|d| t < d) {
                self.qp_deadline = Some(t);
            }
        }
    }

    /// Room for one more QP on every list, so pushes never allocate on the fast path.
    fn reserve(&mut self, qps: usize) {
        self.cq_dirty
            .reserve(qps.saturating_sub(self.cq_dirty.len()));
        self.tx_ready
            .reserve(qps.saturating_sub(self.tx_ready.len()));
        self.arp_wait
            .reserve(qps.saturating_sub(self.arp_wait.len()));
    }

    /// The neighbour layer changed: QPs waiting for a MAC try again.
    fn neighbours_changed(&mut self) {
        self.tx_ready.extend(self.arp_wait.drain(..));
    }
}

/// The QP table as the CM sees it: every QP the CM modifies is touched.
struct QpTable<'a> {
    qps: &'a mut BTreeMap<u32, QpEntry>,
    work: &'a mut Work,
}

impl QpControl for QpTable<'_> {
    fn modify_qp(
        &mut self,
        now: Instant,
        qpn: u32,
        state: QpState,
        attr: &QpAttr,
    ) -> Result<(), QpError> {
        let e = self.qps.get_mut(&qpn).ok_or(QpError::InvalidArgument)?;
        let r = e.qp.modify(now, state, attr);
        self.work.touch(qpn, e);
        if state == QpState::Error && !self.work.before_cm.contains(&qpn) {
            self.work.before_cm.push(qpn);
        }
        r
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
    held_mads: VecDeque<(Ipv4Addr, [u8; MAD_LEN])>,
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
    /// Remote IP of each pending connection request.
    request_src: BTreeMap<CmId, Ipv4Addr>,
    next_qpn: u32,
    next_srqn: u32,
    gsi_psn: Psn,
    completions: VecDeque<WorkCompletion>,
    events: VecDeque<HostEvent>,
    stats: HostStats,
    /// Header prediction on receive and send (on by default).
    predict: bool,
}

impl<M: Memory> Host<M> {
    /// A port with no QPs over memory `mem`; fails if the network configuration is invalid.
    pub fn new(config: HostConfig, mem: M) -> Result<Host<M>, crate::net::ConfigError> {
        Ok(Host {
            net: Net::new(config.net)?,
            cm: Cm::new(config.net.ip, config.ca_guid, config.seed),
            held_mads: VecDeque::new(),
            config,
            mem,
            qps: BTreeMap::new(),
            srqs: BTreeMap::new(),
            work: Work::default(),
            cm_ran: false,
            cm_deadline: None,
            srq_check: Vec::new(),
            conn_of_qp: BTreeMap::new(),
            request_src: BTreeMap::new(),
            // QPNs 0 and 1 are special; start somewhere recognisable in captures.
            next_qpn: 0x11,
            next_srqn: 1,
            gsi_psn: Psn::new(0),
            completions: VecDeque::new(),
            events: VecDeque::new(),
            stats: HostStats::default(),
            predict: true,
        })
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

    /// Adds a static neighbour entry (never expires, never changed by ARP).
    pub fn add_neighbour(
        &mut self,
        ip: Ipv4Addr,
        mac: EthernetAddress,
    ) -> Result<(), crate::net::NetError> {
        let r = self.net.add_static(ip, mac);
        self.work.neighbours_changed();
        r
    }

    /// Creates an RC QP and moves it to INIT, so receives can be posted before connecting.
    pub fn create_qp(&mut self, now: Instant, opts: QpOptions) -> Result<u32, HostError> {
        if self.next_qpn > 0x00ff_ffff {
            return Err(HostError::NoQpn);
        }
        let qpn = self.create_qp_numbered(now, self.next_qpn, opts)?;
        self.next_qpn = qpn + 1;
        Ok(qpn)
    }

    /// Creates an RC QP (in INIT) whose QPN is in the space of shard `shard` of `shards`:
    /// the next free number `n` with `n % shards == shard` (the runtime's QPN-to-shard rule).
    pub fn create_qp_in_space(
        &mut self,
        now: Instant,
        opts: QpOptions,
        shard: u32,
        shards: u32,
    ) -> Result<u32, HostError> {
        let shards = shards.max(1);
        let mut qpn = self.next_qpn;
        while qpn % shards != shard % shards || self.qps.contains_key(&qpn) {
            qpn += 1;
        }
        let qpn = self.create_qp_numbered(now, qpn, opts)?;
        self.next_qpn = qpn + 1;
        Ok(qpn)
    }

    /// Creates an RC QP (in INIT) with the given number (2..=0xFFFFFF, not in use). The runtime
    /// uses it for the CM's stand-in of a QP that lives on another shard.
    pub fn create_qp_numbered(
        &mut self,
        now: Instant,
        qpn: u32,
        opts: QpOptions,
    ) -> Result<u32, HostError> {
        let srq = match opts.srq {
            Some(s) => Some(self.srqs.get(&s).ok_or(HostError::UnknownSrq)?.clone()),
            None => None,
        };
        if !(2..=0x00ff_ffff).contains(&qpn) {
            return Err(HostError::NoQpn);
        }
        if self.qps.contains_key(&qpn) {
            return Err(HostError::Qp(QpError::InvalidArgument));
        }
        let mut qp = Qp::new(QpConfig {
            qpn,
            pd: opts.pd,
            sq_depth: opts.sq_depth,
            rq_depth: opts.rq_depth,
            max_send_sge: MAX_SGE as u32,
            max_recv_sge: MAX_SGE as u32,
            srq: opts.srq,
            sig_all: opts.sig_all,
        });
        let attr = QpAttr {
            access: opts.access,
            ..QpAttr::default()
        };
        qp.modify(now, QpState::Init, &attr)?;
        qp.set_ack_delay(opts.ack_delay);
        let recv = match srq {
            Some(pool) => RecvAcct::Srq(SrqPort::new(pool).0),
            None => RecvAcct::Own(EpRecvAccount::new(0).0),
        };
        self.qps.insert(
            qpn,
            QpEntry {
                qp,
                recv,
                cq_dirty: false,
                tx_queued: false,
                route: None,
                peer: None,
            },
        );
        self.work.reserve(self.qps.len());
        Ok(qpn)
    }

    /// Moves a QP to `state` with `attr` (IBTA vol. 1 §10.3.1 transitions, see `Qp::modify`);
    /// the runtime replays here the transitions the CM made on another shard.
    pub fn modify_qp(
        &mut self,
        now: Instant,
        qpn: u32,
        state: QpState,
        attr: &QpAttr,
    ) -> Result<(), HostError> {
        let e = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        let r = e.qp.modify(now, state, attr);
        self.work.touch(qpn, e);
        Ok(r?)
    }

    /// Sets the peer address of a QP whose connection another shard's CM made.
    pub fn set_peer(&mut self, qpn: u32, ip: Ipv4Addr) -> Result<(), HostError> {
        let e = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        e.peer = Some(ip);
        Ok(())
    }

    /// Stops listening on an rdma_cm TCP-space port.
    pub fn unlisten(&mut self, port: u16) -> Result<(), HostError> {
        Ok(self.cm.unlisten(port)?)
    }

    /// Creates a shared receive queue of `depth` WQEs; returns its number (see
    /// [`srq`](Self::srq) for the pool itself).
    pub fn create_srq(&mut self, depth: u32) -> u32 {
        self.create_shared_srq(depth).0
    }

    /// Creates a shared receive queue; returns its number and the pool, which consumer threads
    /// may post receives to directly (`SharedSrq::post_recv`), without the poll core.
    pub fn create_shared_srq(&mut self, depth: u32) -> (u32, Arc<SharedSrq>) {
        let n = self.next_srqn;
        self.next_srqn += 1;
        let pool = Arc::new(SharedSrq::new(n, depth, MAX_SGE as u32));
        self.srqs.insert(n, pool.clone());
        self.srq_check.reserve(self.srqs.len());
        (n, pool)
    }

    /// Destroys an SRQ no QP uses any more; its posted receives are discarded.
    pub fn destroy_srq(&mut self, srqn: u32) -> Result<(), HostError> {
        if !self.srqs.contains_key(&srqn) {
            return Err(HostError::UnknownSrq);
        }
        if self.qps.values().any(|e| e.qp.config().srq == Some(srqn)) {
            return Err(HostError::Qp(QpError::InvalidState));
        }
        self.srqs.remove(&srqn);
        Ok(())
    }

    /// A QP, to read its state and counters.
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get(&qpn).map(|e| &e.qp)
    }

    /// The shared pool of SRQ `srqn`.
    pub fn srq(&self, srqn: u32) -> Option<&Arc<SharedSrq>> {
        self.srqs.get(&srqn)
    }

    /// Arms the limit of SRQ `srqn` (`dat_srq_set_lw`; 0 disarms). The event is reported as
    /// [`HostEvent::SrqLimit`] (also when it fires during this call); returns whether it did.
    pub fn arm_srq_limit(&mut self, srqn: u32, limit: u32) -> Result<bool, HostError> {
        let srq = self.srqs.get(&srqn).ok_or(HostError::UnknownSrq)?;
        let fired = srq.arm_limit(limit);
        self.srq_check.push(srqn);
        Ok(fired)
    }

    /// The consumer's view of the receive accounting of the EP on QP `qpn`
    /// (`dat_ep_recv_query`, `dat_ep_set_watermark`; seeds 004/002).
    pub fn ep_recv_handle(&self, qpn: u32) -> Option<EpRecvHandle> {
        self.qps.get(&qpn).map(|e| e.recv.handle())
    }

    /// Changes the PD and queue depths of a QP that is not connected (`Qp::reconfigure`;
    /// DAT `dat_ep_modify` in the quiescent states).
    pub fn reconfigure_qp(
        &mut self,
        qpn: u32,
        pd: Option<u32>,
        sq_depth: Option<u32>,
        rq_depth: Option<u32>,
    ) -> Result<(), HostError> {
        let e = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        Ok(e.qp.reconfigure(pd, sq_depth, rq_depth)?)
    }

    /// The connection of QP `qpn` is up (arms its hard receive watermark, seed 002; an
    /// exceeded one fires at once) or down. The CM's host does this itself; the runtime calls
    /// it on the shard that owns a QP the CM of another shard connected.
    pub fn set_ep_connected(&mut self, qpn: u32, up: bool) {
        let Some(e) = self.qps.get_mut(&qpn) else {
            return;
        };
        let ev = match (&mut e.recv, up) {
            (RecvAcct::Own(a), true) => a.connected(),
            (RecvAcct::Srq(p), true) => {
                p.connected();
                p.take_events()
            }
            (RecvAcct::Own(a), false) => {
                a.disconnected();
                WatermarkEvents::default()
            }
            (RecvAcct::Srq(p), false) => {
                p.account().disconnected();
                WatermarkEvents::default()
            }
        };
        push_watermark(&mut self.events, qpn, ev);
    }

    /// True when QP `qpn` draws its receives from an SRQ.
    pub fn qp_uses_srq(&self, qpn: u32) -> bool {
        self.qps
            .get(&qpn)
            .is_some_and(|e| matches!(e.recv, RecvAcct::Srq(_)))
    }

    /// Destroys a QP (any state); its outstanding work is discarded without completions, as
    /// `ibv_destroy_qp` does.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), HostError> {
        self.qps.remove(&qpn).ok_or(HostError::UnknownQp)?;
        self.conn_of_qp.remove(&qpn);
        Ok(())
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, now: Instant, qpn: u32, wr: SendWr) -> Result<(), HostError> {
        let e = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        let r = e.qp.post_send(now, wr, &self.mem);
        self.work.ran(qpn, e);
        Ok(r?)
    }

    /// Posts a receive work request to a QP's own receive queue.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), HostError> {
        let e = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        e.qp.post_recv(wr)?;
        if let RecvAcct::Own(a) = &mut e.recv {
            let ev = a.allocate_posted();
            push_watermark(&mut self.events, qpn, ev);
        }
        self.work.touch(qpn, e);
        Ok(())
    }

    /// Posts a receive work request to an SRQ (consumer threads can also post to the pool from
    /// [`srq`](Self::srq) directly).
    pub fn post_srq_recv(&mut self, srqn: u32, wr: RecvWr) -> Result<(), HostError> {
        let srq = self.srqs.get(&srqn).ok_or(HostError::UnknownSrq)?;
        srq.post_recv(wr).map_err(HostError::Srq)
    }

    /// Listens for connection requests on an rdma_cm TCP-space port.
    pub fn listen(&mut self, port: u16) -> Result<(), HostError> {
        Ok(self.cm.listen(port)?)
    }

    /// The CM ran: its events and deadline may have changed.
    fn cm_ran(&mut self) {
        self.cm_ran = true;
        self.cm_deadline = self.cm.poll_timeout();
    }

    /// Starts connecting `params.local_qpn` to a remote listener.
    pub fn connect(&mut self, now: Instant, params: ConnectParams) -> Result<CmId, HostError> {
        let Some(e) = self.qps.get_mut(&params.local_qpn) else {
            return Err(HostError::UnknownQp);
        };
        let (qpn, ip) = (params.local_qpn, params.dst_ip);
        self.work.touch(qpn, e);
        let r = self.cm.connect(now, params);
        self.cm_ran();
        let id = r?;
        if let Some(e) = self.qps.get_mut(&qpn) {
            e.peer = Some(ip);
        }
        self.conn_of_qp.insert(qpn, id);
        Ok(id)
    }

    /// Accepts a connection request on `params.local_qpn`.
    pub fn accept(
        &mut self,
        now: Instant,
        id: CmId,
        params: AcceptParams,
    ) -> Result<(), HostError> {
        let qpn = params.local_qpn;
        let Some(e) = self.qps.get_mut(&qpn) else {
            return Err(HostError::UnknownQp);
        };
        self.work.touch(qpn, e);
        let src = self.request_src.get(&id).copied();
        let r = self.cm.accept(
            now,
            id,
            params,
            &mut QpTable {
                qps: &mut self.qps,
                work: &mut self.work,
            },
        );
        self.cm_ran();
        r?;
        self.request_src.remove(&id);
        if let (Some(ip), Some(e)) = (src, self.qps.get_mut(&qpn)) {
            e.peer = Some(ip);
        }
        self.conn_of_qp.insert(qpn, id);
        Ok(())
    }

    /// Rejects a connection request.
    pub fn reject(&mut self, now: Instant, id: CmId, private: &[u8]) -> Result<(), HostError> {
        let r = self.cm.reject(now, id, private);
        self.cm_ran();
        r?;
        self.request_src.remove(&id);
        Ok(())
    }

    /// Disconnects the connection of `qpn`: DREQ, QP to ERROR (outstanding work flushes).
    /// Whether the connection of `qpn` is up (not connecting, not going down).
    pub fn connection_up(&self, qpn: u32) -> bool {
        self.conn_of_qp
            .get(&qpn)
            .is_some_and(|&id| self.cm.is_up(id))
    }

    pub fn disconnect(&mut self, now: Instant, qpn: u32) -> Result<(), HostError> {
        let id = *self.conn_of_qp.get(&qpn).ok_or(HostError::UnknownQp)?;
        let r = self.cm.disconnect(
            now,
            id,
            &mut QpTable {
                qps: &mut self.qps,
                work: &mut self.work,
            },
        );
        self.cm_ran();
        r?;
        Ok(())
    }

    /// The next work completion of any QP.
    pub fn poll_completion(&mut self) -> Option<WorkCompletion> {
        self.collect();
        self.completions.pop_front()
    }

    /// The next CM, neighbour, SRQ-limit or EP-watermark event.
    pub fn poll_host_event(&mut self) -> Option<HostEvent> {
        self.collect();
        self.events.pop_front()
    }

    /// The next CM event. Other events stay queued for
    /// [`poll_host_event`](Self::poll_host_event) (none is dropped).
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.collect();
        let i = self
            .events
            .iter()
            .position(|e| matches!(e, HostEvent::Cm(_)))?;
        match self.events.remove(i) {
            Some(HostEvent::Cm(ev)) => Some(ev),
            _ => None,
        }
    }

    /// The next SRQ whose limit (low watermark) fired (the same events as
    /// [`HostEvent::SrqLimit`], taken out of the event queue). Checks every SRQ, so limits
    /// armed on the pools directly by consumer threads are seen too.
    pub fn poll_srq_limit(&mut self) -> Option<u32> {
        self.srq_check.extend(self.srqs.keys().copied());
        self.collect();
        let i = self
            .events
            .iter()
            .position(|e| matches!(e, HostEvent::SrqLimit { .. }))?;
        match self.events.remove(i) {
            Some(HostEvent::SrqLimit { srqn }) => Some(srqn),
            _ => None,
        }
    }

    /// Moves what the touched QPs, the CM, the neighbour layer and the SRQs produced since the
    /// last call into the host's queues. Looks only at what may have changed.
    #[inline(always)]
    fn collect(&mut self) {
        // Called on every completion or event poll of a waiting consumer: nothing to do is
        // the common case, decided with four loads inlined into the caller (the work itself
        // is out of line, so the idle check saves no registers).
        if self.work.cq_dirty.is_empty()
            && self.srq_check.is_empty()
            && !self.cm_ran
            && !self.net.has_event()
        {
            return;
        }
        self.collect_changes();
    }

    /// The work of [`collect`](Self::collect) once something may have changed.
    #[inline(never)]
    fn collect_changes(&mut self) {
        for i in 0..self.work.cq_dirty.len() {
            let qpn = self.work.cq_dirty[i];
            let Some(e) = self.qps.get_mut(&qpn) else {
                continue;
            };
            e.cq_dirty = false;
            self.stats.qps_collected += 1;
            while let Some(wc) = e.qp.poll_completion() {
                e.recv.completed(&wc);
                self.completions.push_back(wc);
            }
            if let RecvAcct::Srq(p) = &mut e.recv {
                let ev = p.take_events();
                push_watermark(&mut self.events, qpn, ev);
                self.srq_check.push(p.srq().srqn());
            }
        }
        self.work.cq_dirty.clear();
        // Neighbour events first: an unresolvable address fails the CM's connection requests
        // to it, whose events are collected just below.
        while let Some(ev) = self.net.poll_event() {
            if let NetEvent::Unresolvable { ip } = ev {
                self.cm.destination_unresolvable(ip);
                self.cm_ran = true;
            }
            self.events.push_back(HostEvent::Net(ev));
        }
        if core::mem::take(&mut self.cm_ran) {
            while let Some(ev) = self.cm.poll_event() {
                match &ev {
                    CmEvent::ConnectRequest { id, src_ip, .. } => {
                        self.request_src.insert(*id, *src_ip);
                    }
                    CmEvent::Established { id, .. } => self.connection_changed(*id, true),
                    CmEvent::Disconnected { id } => self.connection_changed(*id, false),
                    _ => {}
                }
                self.events.push_back(HostEvent::Cm(ev));
            }
        }
        for i in 0..self.srq_check.len() {
            let n = self.srq_check[i];
            if self.srqs.get(&n).is_some_and(|s| s.poll_limit_event()) {
                self.events.push_back(HostEvent::SrqLimit { srqn: n });
            }
        }
        self.srq_check.clear();
    }

    /// Connection `id` was established (arms the hard watermark, seed 002) or went down.
    fn connection_changed(&mut self, id: CmId, up: bool) {
        let Some(qpn) = self
            .conn_of_qp
            .iter()
            .find_map(|(&q, &c)| (c == id).then_some(q))
        else {
            return;
        };
        self.set_ep_connected(qpn, up);
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

    /// Turns header prediction on or off (on by default). On receive, an in-sequence RC RDMA
    /// WRITE Only for a QP in RTS skips the general parse and dispatch (`wire::write_only`,
    /// `Qp::handle_write_only`); on send, a new WRITE Only is written from its BTH and RETH
    /// without the general header set (`Qp::next_write_only`). Both have the general paths'
    /// effects and bytes. Off, every frame takes the general paths (for A/B measurements and
    /// the equivalence tests).
    pub fn set_header_prediction(&mut self, on: bool) {
        self.predict = on;
    }

    /// A frame received from the wire. ARP is answered and learnt from, RoCEv2 for us goes to
    /// the CM (QP1) or the destination QP, everything else is counted and dropped.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        if self.predict && self.handle_predicted(now, frame) {
            return;
        }
        // Matched in place: the parsed frame is not moved out of the `Inbound`.
        let inbound = self.net.handle_frame(now, frame);
        let f = match &inbound {
            Inbound::Roce(f) => f,
            Inbound::Consumed => {
                // ARP: a MAC may have become known.
                self.work.neighbours_changed();
                self.collect();
                return;
            }
            Inbound::Dropped(_) => return,
        };
        self.handle_roce(now, f);
        self.collect();
    }

    /// Header prediction (`wire::write_only`): an in-sequence RC RDMA WRITE Only for a QP in
    /// RTS is checked and executed without the general parse and dispatch, with the same
    /// effects and counts (`Qp::handle_write_only`). False, with nothing changed, for every
    /// other frame: `handle_frame` then takes the general path.
    #[inline(always)]
    fn handle_predicted(&mut self, now: Instant, frame: &[u8]) -> bool {
        let c = self.net.config();
        let Some(w) = WriteOnlyFrame::predict(frame, c.mac, c.ip) else {
            return false;
        };
        let dest = w.bth.dest_qp;
        if dest == CM_QPN {
            return false;
        }
        let Some(e) = self.qps.get_mut(&dest) else {
            return false;
        };
        if !e
            .qp
            .handle_write_only(now, &w.bth, &w.reth, w.payload, &mut self.mem)
        {
            return false;
        }
        self.net.count_predicted_roce();
        self.stats.rx_predicted += 1;
        self.work.ran(dest, e);
        self.collect();
        true
    }

    fn handle_roce(&mut self, now: Instant, f: &ReceivedPacket<'_>) {
        let dest = f.packet.headers.bth.dest_qp;
        if dest == CM_QPN {
            let gsi = f.packet.headers.bth.opcode == Opcode::UD_SEND_ONLY
                && f.packet.headers.deth.is_some_and(|d| d.qkey == GSI_QKEY);
            if !gsi {
                self.stats.rx_bad_gsi += 1;
                return;
            }
            self.cm.handle_mad(
                now,
                f.src_ip,
                f.packet.payload,
                &mut QpTable {
                    qps: &mut self.qps,
                    work: &mut self.work,
                },
            );
            self.cm_ran();
            return;
        }
        let Some(e) = self.qps.get_mut(&dest) else {
            self.stats.rx_unknown_qp += 1;
            return;
        };
        let e = if e.qp.state() == QpState::Rtr {
            // A data packet before the RTU: the implicit RTU of IBTA §12.9.6.
            self.cm.implicit_rtu(
                now,
                dest,
                &mut QpTable {
                    qps: &mut self.qps,
                    work: &mut self.work,
                },
            );
            self.cm_ran();
            let Some(e) = self.qps.get_mut(&dest) else {
                return;
            };
            e
        } else {
            e
        };
        let srq: Option<&mut dyn RecvSource> = match &mut e.recv {
            RecvAcct::Srq(p) => Some(p),
            RecvAcct::Own(_) => None,
        };
        e.qp.handle_packet(now, &f.packet, &mut self.mem, srq);
        self.work.ran(dest, e);
    }

    /// The next frame to send, if any: ARP first, then CM MADs, then the QPs round robin. A QP
    /// whose peer's MAC is not known yet is skipped (its packets wait in the QP, and ARP
    /// resolution starts); MADs wait in a small queue.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.poll_transmit_into(now, &mut out).then_some(out)
    }

    /// Like [`poll_transmit`](Self::poll_transmit), but into a reused buffer (no allocation on
    /// the fast path): `out` holds the frame when this returns true.
    pub fn poll_transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        self.poll_outgoing(now, out, None).is_some()
    }

    /// True when a frame may be waiting for `poll_transmit_*` (ARP, MADs, QPs touched since
    /// they last ran dry); timers aside, which [`poll_timeout`](Self::poll_timeout) reports.
    /// False means a transmit poll would find nothing.
    pub fn has_output(&self) -> bool {
        !self.work.tx_ready.is_empty()
            || !self.work.before_cm.is_empty()
            || !self.held_mads.is_empty()
            || self.cm.has_transmit()
            || self.net.has_transmit()
    }

    /// Like [`poll_transmit_into`](Self::poll_transmit_into), but a QP packet whose payload
    /// has at least `min_pinned` bytes comes out as a pinned frame when the memory supports it
    /// ([`Memory::pin_table`]): `out` then holds only the Ethernet/IPv4/UDP/BTH/extension
    /// headers, `pinned.segments` the payload ranges pinned in registered memory (in order) and
    /// `pinned.trailer()` the BTH pad and the ICRC, computed over the pinned bytes. The caller
    /// owns the pins (see `engine::io::PinnedFrame`). Everything else (ARP, CM MADs, small
    /// payloads) comes out whole in `out`.
    pub fn poll_transmit_pinned(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        pinned: &mut PinnedTx,
        min_pinned: usize,
    ) -> Option<TxOut> {
        self.poll_outgoing(now, out, Some((pinned, min_pinned)))
    }

    fn poll_outgoing(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        mut pinned: Option<(&mut PinnedTx, usize)>,
    ) -> Option<TxOut> {
        if let Some(arp) = self.net.poll_transmit(now) {
            self.stats.tx_frames += 1;
            out.clear();
            out.extend_from_slice(&arp.padded());
            return Some(TxOut::Whole);
        }
        // Held MADs whose destination got resolved (or failed: then they are dropped; the CM
        // retransmits and finally reports the connection unreachable).
        for _ in 0..self.held_mads.len() {
            let Some((dst, mad)) = self.held_mads.pop_front() else {
                break;
            };
            match self.net.resolve(now, dst) {
                Resolve::Ready(_) => {
                    if self.mad_frame(now, dst, &mad, out) {
                        return Some(TxOut::Whole);
                    }
                }
                Resolve::Pending => self.held_mads.push_back((dst, mad)),
                Resolve::Failed(_) => self.stats.tx_mads_dropped += 1,
            }
        }
        while let Some(&qpn) = self.work.before_cm.last() {
            if self.qp_frame_before_cm(now, qpn, out) {
                return Some(TxOut::Whole);
            }
            self.work.before_cm.pop();
        }
        while let Some(t) = self.cm.poll_transmit(now) {
            match self.net.resolve(now, t.dst) {
                Resolve::Ready(_) => {
                    if self.mad_frame(now, t.dst, &t.mad, out) {
                        return Some(TxOut::Whole);
                    }
                }
                Resolve::Pending if self.held_mads.len() < MAX_HELD_MADS => {
                    self.held_mads.push_back((t.dst, t.mad));
                    if let Some(arp) = self.net.poll_transmit(now) {
                        self.stats.tx_frames += 1;
                        out.clear();
                        out.extend_from_slice(&arp.padded());
                        return Some(TxOut::Whole);
                    }
                }
                Resolve::Pending | Resolve::Failed(_) => self.stats.tx_mads_dropped += 1,
            }
        }
        // QPs touched since they last ran dry, round robin: one frame per turn.
        for _ in 0..self.work.tx_ready.len() {
            let Some(qpn) = self.work.tx_ready.pop_front() else {
                break;
            };
            let Some(e) = self.qps.get_mut(&qpn) else {
                continue;
            };
            let Some(dst) = e.peer else {
                // Not connected: nothing can be sent; `connect`/`accept` touch it again.
                e.tx_queued = false;
                continue;
            };
            let routed = e.route.as_ref().is_some_and(|r| {
                r.leads_to(dst, e.qp.attr().dest_qpn) && self.net.route_valid(r, now)
            });
            if !routed && self.net.lookup(dst).is_none() {
                // Start (or keep) resolving; the QP's packets wait for the neighbour layer.
                self.work.arp_wait.push(qpn);
                let _ = self.net.resolve(now, dst);
                if let Some(arp) = self.net.poll_transmit(now) {
                    self.stats.tx_frames += 1;
                    out.clear();
                    out.extend_from_slice(&arp.padded());
                    return Some(TxOut::Whole);
                }
                continue;
            }
            // The entry looked up above serves the first frame; it is looked up again only
            // after a packet that could not be built. The route checked above stays valid for
            // the first frame (polling the QP changes neither it, the peer nor the neighbour
            // layer); later ones check it again.
            let mut e = e;
            let mut checked_fresh = routed;
            // Header prediction on send: a new WRITE Only (not for the pinned path) is written
            // from its BTH and RETH straight into the frame, along the route checked above.
            let fast_max = match pinned.as_ref() {
                Some((_, min)) => u32::try_from(*min).unwrap_or(u32::MAX).saturating_sub(1),
                None => u32::MAX,
            };
            if self.predict && routed {
                if let Some(w) = e.qp.next_write_only(now, fast_max) {
                    // It completes nothing (no `polled`): only its bookkeeping follows.
                    let more = e.qp.has_output();
                    if !more {
                        e.tx_queued = false;
                    }
                    self.work.timer_changed(e);
                    let mut b = FrameBuilder {
                        mem: &self.mem,
                        net: &mut self.net,
                        stats: &mut self.stats,
                    };
                    if let Some(route) = e.route.as_ref() {
                        if b.build_write_only(route, &w, out) {
                            if more {
                                self.work.tx_ready.push_back(qpn);
                            }
                            return Some(TxOut::Whole);
                        }
                    }
                    // Dropped and counted: its next packet, if any, by the general path.
                    checked_fresh = false;
                }
            }
            loop {
                let dest_qpn = e.qp.attr().dest_qpn;
                let polled = e.qp.poll_transmit(now);
                self.work.polled(qpn, e);
                let Some(tx) = polled.as_ref() else {
                    e.tx_queued = false;
                    break;
                };
                // A QP with nothing more leaves the line now, so the caller's next
                // `has_output` is false and no empty transmit poll follows this frame.
                let more = e.qp.has_output();
                if !more {
                    e.tx_queued = false;
                }
                self.work.timer_changed(e);
                // The QP's cached route, rebuilt when the neighbour layer says it is stale
                // (a failure leaves none: `build_frame` then counts the packet as unroutable).
                let fresh = checked_fresh
                    || e.route
                        .as_ref()
                        .is_some_and(|r| r.leads_to(dst, dest_qpn) && self.net.route_valid(r, now));
                checked_fresh = false;
                if !fresh {
                    e.route = self.net.route(now, dst, qpn, dest_qpn).ok();
                }
                // Built from the host's other parts while the entry (its route) stays borrowed.
                let mut b = FrameBuilder {
                    mem: &self.mem,
                    net: &mut self.net,
                    stats: &mut self.stats,
                };
                let pinned_built = match pinned.as_mut() {
                    Some((p, min))
                        if tx.payload.len() >= *min && tx.payload.len() <= ZERO_PAYLOAD.len() =>
                    {
                        b.build_pinned(now, dst, qpn, dest_qpn, tx, out, p)
                    }
                    _ => None,
                };
                let out_kind = match pinned_built {
                    Some(true) => Some(TxOut::Pinned),
                    Some(false) => None,
                    None => {
                        let body = Body::Gather(&tx.payload);
                        let to = To::Route(dst, e.route.as_ref());
                        b.build_frame(now, to, qpn, dest_qpn, &tx.headers, body, out)
                            .then_some(TxOut::Whole)
                    }
                };
                if let Some(kind) = out_kind {
                    // It may have more: back to the end of the line.
                    if more {
                        self.work.tx_ready.push_back(qpn);
                    }
                    return Some(kind);
                }
                // Dropped and counted: its next packet, if any.
                let Some(again) = self.qps.get_mut(&qpn) else {
                    break;
                };
                e = again;
            }
        }
        None
    }

    /// The next packet of QP `qpn` (moved to ERROR by the CM: only its last acknowledgements
    /// remain) as a whole frame in `out`; false when it has none (or cannot send any).
    fn qp_frame_before_cm(&mut self, now: Instant, qpn: u32, out: &mut Vec<u8>) -> bool {
        let Some(dst) = self.qps.get(&qpn).and_then(|e| e.peer) else {
            return false;
        };
        if self.net.lookup(dst).is_none() {
            return false;
        }
        while let Some((tx, dest_qpn)) = self.qps.get_mut(&qpn).and_then(|e| {
            let polled = e.qp.poll_transmit(now);
            self.work.polled(qpn, e);
            Some((polled?, e.qp.attr().dest_qpn))
        }) {
            let body = Body::Gather(&tx.payload);
            if self.frame_builder().build_frame(
                now,
                To::Ip(dst),
                qpn,
                dest_qpn,
                &tx.headers,
                body,
                out,
            ) {
                return true;
            }
        }
        false
    }

    fn mad_frame(&mut self, now: Instant, dst: Ipv4Addr, mad: &[u8], out: &mut Vec<u8>) -> bool {
        let bth = BthRepr::new(Opcode::UD_SEND_ONLY, CM_QPN, self.gsi_psn);
        debug_assert_eq!(bth.pkey, DEFAULT_PKEY);
        self.gsi_psn = self.gsi_psn.next();
        let headers = RoceHeaders::new(bth).with_deth(DethRepr {
            qkey: GSI_QKEY,
            src_qp: CM_QPN,
        });
        self.frame_builder().build_frame(
            now,
            To::Ip(dst),
            CM_QPN,
            CM_QPN,
            &headers,
            Body::Bytes(mad),
            out,
        )
    }

    /// The parts of the host a frame is built from (see [`FrameBuilder`]).
    fn frame_builder(&mut self) -> FrameBuilder<'_, M> {
        FrameBuilder {
            mem: &self.mem,
            net: &mut self.net,
            stats: &mut self.stats,
        }
    }
}

/// The parts of a [`Host`] a frame is built from, borrowed apart from its QP table: the
/// transmit path builds a QP's frame while that QP's entry (its cached route) stays borrowed.
struct FrameBuilder<'h, M> {
    mem: &'h M,
    net: &'h mut Net,
    stats: &'h mut HostStats,
}

impl<M: Memory> FrameBuilder<'_, M> {
    /// Builds a pinned frame (see `poll_transmit_pinned`); `None` when the memory cannot pin
    /// (build a whole frame instead), `Some(false)` when the packet was dropped and counted.
    #[allow(clippy::too_many_arguments)]
    fn build_pinned(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        src_qpn: u32,
        dst_qpn: u32,
        tx: &Transmit,
        out: &mut Vec<u8>,
        pinned: &mut PinnedTx,
    ) -> Option<bool> {
        let table = self.mem.pin_table()?;
        pinned.segments.clear();
        for seg in tx.payload.segments() {
            let access = match seg.kind {
                KeyKind::Local => Access::empty(),
                KeyKind::Remote => Access::REMOTE_READ,
            };
            match table.pin(seg, access) {
                Ok(g) => pinned.segments.push(g.into_token()),
                Err(_) => {
                    for t in pinned.segments.drain(..) {
                        table.unpin(t);
                    }
                    self.stats.tx_payload_errors += 1;
                    return Some(false);
                }
            }
        }
        let unpin = |pinned: &mut PinnedTx| {
            for t in pinned.segments.drain(..) {
                table.unpin(t);
            }
        };
        let Ok((eth, ipv4, udp)) = self.net.frame_for(now, dst, src_qpn, dst_qpn) else {
            unpin(pinned);
            self.stats.tx_no_peer += 1;
            return Some(false);
        };
        let len = tx.payload.len();
        let pad = usize::from(pad_for(len));
        let mut headers = tx.headers;
        headers.bth.pad_count = pad as u8;
        // `emit_headers` needs only the payload's length: a zero slice of that length stands in.
        let frame = RoceFrame {
            eth,
            ipv4,
            udp,
            headers,
            payload: &ZERO_PAYLOAD[..len],
            pad: pad as u8,
            icrc: 0,
            bth_resv: 0,
        };
        out.clear();
        out.resize(ETH_LEN + 20 + 8 + 64, 0);
        let n = match frame.emit_headers(out) {
            Ok(n) => n,
            Err(_) => {
                unpin(pinned);
                self.stats.tx_build_errors += 1;
                return Some(false);
            }
        };
        out.truncate(n);
        let mut h = IcrcHasher::new();
        if h.update_headers(&out[ETH_LEN..]).is_err() {
            unpin(pinned);
            self.stats.tx_build_errors += 1;
            return Some(false);
        }
        for t in &pinned.segments {
            table.for_each_pinned_chunk(t, &mut |c| h.update(c));
        }
        h.update(&[0u8; 3][..pad]);
        pinned.trailer = [0; 7];
        pinned.trailer[pad..pad + 4].copy_from_slice(&h.finalize().to_le_bytes());
        pinned.trailer_len = (pad + 4) as u8;
        self.stats.tx_frames += 1;
        self.stats.tx_pinned += 1;
        Some(true)
    }

    /// Builds the frame of an RC RDMA WRITE Only request (header prediction on send) into
    /// `out` along `route`: the bytes `build_frame` writes for the same packet, in the same
    /// order (payload read first, so a packet dropped for it takes no IP identification).
    /// False (and counted as `build_frame` counts it) when it cannot be built.
    #[inline(always)]
    fn build_write_only(&mut self, route: &Route, w: &WriteOnlyRequest, out: &mut Vec<u8>) -> bool {
        const AT_BTH: usize = HEADERS_LEN;
        const AT_RETH: usize = AT_BTH + BTH_LEN;
        const AT_PAYLOAD: usize = AT_RETH + RETH_LEN;
        let plen = w.payload.len as usize;
        let pad = pad_for(plen);
        let pay_end = AT_PAYLOAD + plen;
        let body_end = pay_end + usize::from(pad);
        let len = body_end + ICRC_LEN;
        // Sized, not cleared: every byte is written below.
        out.resize(len, 0);
        out[pay_end..pay_end + ICRC_LEN].copy_from_slice(&[0; ICRC_LEN]);
        if self
            .mem
            .read(&w.payload, Access::empty(), &mut out[AT_PAYLOAD..pay_end])
            .is_err()
        {
            self.stats.tx_payload_errors += 1;
            return false;
        }
        let written =
            self.net
                .write_route_headers(route, len - HEADERS_LEN, &mut out[..HEADERS_LEN]);
        if !self.headers_written(written) {
            return false;
        }
        // `out` is `len` bytes long: both chunks are there (a failure would be counted).
        let Some((bth, rest)) = out[AT_BTH..].split_first_chunk_mut::<BTH_LEN>() else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        let Some((reth, _)) = rest.split_first_chunk_mut::<RETH_LEN>() else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        BthRepr {
            pad_count: pad,
            ..w.bth
        }
        .write_to(bth);
        w.reth.write_to(reth);
        if !self.seal(out, body_end) {
            return false;
        }
        self.stats.tx_predicted += 1;
        true
    }

    /// Counts a failed Ethernet/IPv4/UDP header write: a packet too long for IPv4 is a build
    /// error, anything else has no peer. True when the headers were written.
    #[inline(always)]
    fn headers_written(&mut self, written: Result<usize, crate::net::NetError>) -> bool {
        match written {
            Ok(_) => true,
            Err(crate::net::NetError::TooLong { .. }) => {
                self.stats.tx_build_errors += 1;
                false
            }
            Err(_) => {
                self.stats.tx_no_peer += 1;
                false
            }
        }
    }

    /// Writes the ICRC over `out[ETH_LEN..body_end]` into `out[body_end..]` and counts the
    /// frame; false (a build error, counted) when the headers do not hash.
    #[inline(always)]
    fn seal(&mut self, out: &mut [u8], body_end: usize) -> bool {
        let Ok(icrc) = icrc_in_place(&mut out[ETH_LEN..body_end]) else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        out[body_end..].copy_from_slice(&icrc.to_le_bytes());
        self.stats.tx_frames += 1;
        true
    }

    /// Builds the complete frame into `out`, in place: the payload read (or copied) into its
    /// place, the Ethernet/IPv4/UDP headers from the destination's template, the RoCE headers,
    /// the zero pad and the ICRC over the emitted bytes. The bytes are those of
    /// `RoceFrame::new(frame_for(..), ..).emit(..)`. False (and counted) when it cannot be
    /// built: payload unreadable, no peer MAC, or headers that do not emit.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn build_frame(
        &mut self,
        now: Instant,
        to: To<'_>,
        src_qpn: u32,
        dst_qpn: u32,
        headers: &RoceHeaders,
        body: Body<'_>,
        out: &mut Vec<u8>,
    ) -> bool {
        let payload_len = match body {
            Body::Bytes(b) => b.len(),
            Body::Gather(p) => p.len(),
        };
        let pad = pad_for(payload_len);
        let at_payload = HEADERS_LEN + headers.header_len();
        let body_end = at_payload + payload_len + usize::from(pad);
        let len = body_end + ICRC_LEN;
        // Sized, not cleared: every byte is written below (the template's headers, the RoCE
        // headers, whose emit writes each byte of their span, the payload, the zero pad and
        // the ICRC), so the bytes of the previous frame in the reused buffer do not matter.
        out.resize(len, 0);
        let pay_end = at_payload + payload_len;
        // The pad (at most 3 bytes) is zero; the ICRC after it is written last.
        out[pay_end..pay_end + ICRC_LEN].copy_from_slice(&[0; ICRC_LEN]);
        let payload = &mut out[at_payload..pay_end];
        match body {
            Body::Bytes(b) => payload.copy_from_slice(b),
            Body::Gather(p) => {
                if p.gather(self.mem, payload).is_err() {
                    self.stats.tx_payload_errors += 1;
                    return false;
                }
            }
        }
        let roce_len = len - HEADERS_LEN;
        let written = match to {
            To::Route(_, Some(route)) => {
                self.net
                    .write_route_headers(route, roce_len, &mut out[..HEADERS_LEN])
            }
            To::Route(dst, None) | To::Ip(dst) => self.net.write_headers_any_len(
                now,
                dst,
                src_qpn,
                dst_qpn,
                roce_len,
                &mut out[..HEADERS_LEN],
            ),
        };
        if !self.headers_written(written) {
            return false;
        }
        // Emitted as the QP made them, then the pad count set in the BTH (no header copy).
        if headers
            .emit_inlined(&mut out[HEADERS_LEN..at_payload])
            .is_err()
        {
            self.stats.tx_build_errors += 1;
            return false;
        }
        crate::wire::bth::Packet::new_unchecked(&mut out[HEADERS_LEN..]).set_pad_count(pad);
        self.seal(out, body_end)
    }
}

/// Where a frame being built goes.
#[derive(Clone, Copy)]
enum To<'a> {
    /// To this address, looked up in the neighbour layer for this frame.
    Ip(Ipv4Addr),
    /// To this address along the sending QP's route, checked fresh by the caller (`None`: no
    /// route could be built; the lookup then reports why).
    Route(Ipv4Addr, Option<&'a Route>),
}

/// Where the payload of a frame being built comes from.
#[derive(Clone, Copy)]
enum Body<'a> {
    /// These bytes (a CM MAD).
    Bytes(&'a [u8]),
    /// A QP packet's segments in registered memory, read through the checked accessor.
    Gather(&'a crate::transport::transmit::Payload),
}

impl Host<crate::transport::vec_memory::VecMemory> {
    /// Registers `len` bytes of zeroed memory in protection domain `pd` (test memory).
    pub fn register(
        &mut self,
        pd: u32,
        len: usize,
        access: Access,
    ) -> crate::transport::vec_memory::Region {
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

/// Largest payload of one packet (the largest path MTU, IBTA vol. 1 §9.6.1.1: 4096).
static ZERO_PAYLOAD: [u8; 4096] = [0; 4096];

/// Ethernet header length.
const ETH_LEN: usize = crate::wire::ethernet::HEADER_LEN;

/// What `Host::poll_transmit_pinned` produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOut {
    /// A whole frame in `out`.
    Whole,
    /// Headers in `out`, payload pins and trailer in the [`PinnedTx`].
    Pinned,
}

/// The pinned part of a frame from `Host::poll_transmit_pinned` (reused between calls).
#[derive(Debug, Default)]
pub struct PinnedTx {
    /// Pins of the payload segments, in order; the caller must unpin each exactly once.
    pub segments: Vec<PinToken>,
    trailer: [u8; 7],
    trailer_len: u8,
}

impl PinnedTx {
    /// Room for the most segments a packet can have (no allocation later).
    pub fn new() -> PinnedTx {
        PinnedTx {
            segments: Vec::with_capacity(crate::transport::transmit::MAX_TX_SEGS),
            trailer: [0; 7],
            trailer_len: 0,
        }
    }

    /// BTH pad bytes and the ICRC (little-endian), which follow the payload.
    pub fn trailer(&self) -> &[u8] {
        &self.trailer[..usize::from(self.trailer_len)]
    }

    /// The trailer by value (array and length), to use while `segments` is borrowed mutably.
    pub fn trailer_bytes(&self) -> ([u8; 7], usize) {
        (self.trailer, usize::from(self.trailer_len))
    }
}

/// Queues a watermark event of QP `qpn` when one fired.
fn push_watermark(events: &mut VecDeque<HostEvent>, qpn: u32, ev: WatermarkEvents) {
    if ev.any() {
        events.push_back(HostEvent::EpWatermark {
            qpn,
            soft: ev.soft,
            hard: ev.hard,
        });
    }
}
