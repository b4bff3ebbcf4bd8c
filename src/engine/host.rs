//! The protocol state of one RoCEv2 port, sans-IO: the IPv4/ARP neighbour layer (`net`), the IB
//! CM on QP1, RC queue pairs, shared receive queues and registered memory. It turns `Transmit`s,
//! CM MADs and ARP packets into complete Ethernet frames (ICRC included) and demultiplexes
//! received frames by destination QP. The DPDK engine and the in-memory simulator both drive a
//! `Host`: frames in with `handle_frame`, frames out with `poll_transmit`, time passed in.

use crate::cm::{AcceptParams, Cm, CmError, CmEvent, CmId, ConnectParams, QpControl, CM_QPN};
use crate::net::{Inbound, Net, NetConfig, NetEvent, NetStats, Resolve};
use crate::time::Instant;
use crate::transport::memory::Access;
use crate::transport::memory::Memory;
use crate::transport::qp::Qp;
use crate::transport::srq::Srq;
use crate::transport::types::{
    QpAttr, QpConfig, QpError, QpState, RecvWr, SendWr, WorkCompletion, MAX_SGE,
};
use crate::wire::bth::{BthRepr, DEFAULT_PKEY};
use crate::wire::deth::{DethRepr, GSI_QKEY};
use crate::wire::ethernet::EthernetAddress;
use crate::wire::frame::RoceFrame;
use crate::wire::mad::MAD_LEN;
use crate::wire::opcode::Opcode;
use crate::wire::psn::Psn;
use crate::wire::roce::RoceHeaders;
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

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

/// The default ACK delay of new QPs: none. A delay (e.g. 20 µs) lets a ping-pong's ACK leave
/// with the answer (one frame per direction instead of two: `roce-lat --ack-delay-us`), but
/// bulk transfers then see fewer, later ACKs; over net_af_packet with a loaded CPU a 1 MiB
/// SEND's go-back-N rounds ran out of retries with it, so it is opt-in.
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
}

/// The QP table as the CM sees it.
struct QpTable<'a>(&'a mut BTreeMap<u32, Qp>);

impl QpControl for QpTable<'_> {
    fn modify_qp(
        &mut self,
        now: Instant,
        qpn: u32,
        state: QpState,
        attr: &QpAttr,
    ) -> Result<(), QpError> {
        self.0
            .get_mut(&qpn)
            .ok_or(QpError::InvalidArgument)?
            .modify(now, state, attr)
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
    qps: BTreeMap<u32, Qp>,
    srqs: BTreeMap<u32, Srq>,
    /// Peer IP of each connected (or connecting) QP.
    peer_ip: BTreeMap<u32, Ipv4Addr>,
    /// CM connection of each QP.
    conn_of_qp: BTreeMap<u32, CmId>,
    /// Remote IP of each pending connection request.
    request_src: BTreeMap<CmId, Ipv4Addr>,
    next_qpn: u32,
    next_srqn: u32,
    gsi_psn: Psn,
    tx_cursor: u32,
    completions: VecDeque<WorkCompletion>,
    events: VecDeque<HostEvent>,
    srq_limit_events: VecDeque<u32>,
    stats: HostStats,
    scratch: Vec<u8>,
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
            peer_ip: BTreeMap::new(),
            conn_of_qp: BTreeMap::new(),
            request_src: BTreeMap::new(),
            // QPNs 0 and 1 are special; start somewhere recognisable in captures.
            next_qpn: 0x11,
            next_srqn: 1,
            gsi_psn: Psn::new(0),
            tx_cursor: 0,
            completions: VecDeque::new(),
            events: VecDeque::new(),
            srq_limit_events: VecDeque::new(),
            stats: HostStats::default(),
            scratch: Vec::new(),
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
        self.net.add_static(ip, mac)
    }

    /// Creates an RC QP and moves it to INIT, so receives can be posted before connecting.
    pub fn create_qp(&mut self, now: Instant, opts: QpOptions) -> Result<u32, HostError> {
        if let Some(s) = opts.srq {
            if !self.srqs.contains_key(&s) {
                return Err(HostError::UnknownSrq);
            }
        }
        if self.next_qpn > 0x00ff_ffff {
            return Err(HostError::NoQpn);
        }
        let qpn = self.next_qpn;
        self.next_qpn += 1;
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
        self.qps.insert(qpn, qp);
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
        if let Some(s) = opts.srq {
            if !self.srqs.contains_key(&s) {
                return Err(HostError::UnknownSrq);
            }
        }
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
        self.qps.insert(qpn, qp);
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
        let qp = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        qp.modify(now, state, attr)?;
        Ok(())
    }

    /// Sets the peer address of a QP whose connection another shard's CM made.
    pub fn set_peer(&mut self, qpn: u32, ip: Ipv4Addr) -> Result<(), HostError> {
        if !self.qps.contains_key(&qpn) {
            return Err(HostError::UnknownQp);
        }
        self.peer_ip.insert(qpn, ip);
        Ok(())
    }

    /// Stops listening on an rdma_cm TCP-space port.
    pub fn unlisten(&mut self, port: u16) -> Result<(), HostError> {
        Ok(self.cm.unlisten(port)?)
    }

    /// Creates a shared receive queue.
    pub fn create_srq(&mut self, depth: u32) -> u32 {
        let n = self.next_srqn;
        self.next_srqn += 1;
        self.srqs.insert(n, Srq::new(n, depth, MAX_SGE as u32));
        n
    }

    /// Destroys an SRQ no QP uses any more; its posted receives are discarded.
    pub fn destroy_srq(&mut self, srqn: u32) -> Result<(), HostError> {
        if !self.srqs.contains_key(&srqn) {
            return Err(HostError::UnknownSrq);
        }
        if self.qps.values().any(|qp| qp.config().srq == Some(srqn)) {
            return Err(HostError::Qp(QpError::InvalidState));
        }
        self.srqs.remove(&srqn);
        Ok(())
    }

    /// A QP, to read its state and counters.
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get(&qpn)
    }

    /// An SRQ.
    pub fn srq_mut(&mut self, srqn: u32) -> Option<&mut Srq> {
        self.srqs.get_mut(&srqn)
    }

    /// Destroys a QP (any state); its outstanding work is discarded without completions, as
    /// `ibv_destroy_qp` does.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), HostError> {
        self.qps.remove(&qpn).ok_or(HostError::UnknownQp)?;
        self.peer_ip.remove(&qpn);
        self.conn_of_qp.remove(&qpn);
        Ok(())
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, now: Instant, qpn: u32, wr: SendWr) -> Result<(), HostError> {
        let qp = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        qp.post_send(now, wr, &self.mem)?;
        Ok(())
    }

    /// Posts a receive work request to a QP's own receive queue.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), HostError> {
        let qp = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        qp.post_recv(wr)?;
        Ok(())
    }

    /// Posts a receive work request to an SRQ.
    pub fn post_srq_recv(&mut self, srqn: u32, wr: RecvWr) -> Result<(), HostError> {
        let srq = self.srqs.get_mut(&srqn).ok_or(HostError::UnknownSrq)?;
        srq.post_recv(wr)?;
        Ok(())
    }

    /// Listens for connection requests on an rdma_cm TCP-space port.
    pub fn listen(&mut self, port: u16) -> Result<(), HostError> {
        Ok(self.cm.listen(port)?)
    }

    /// Starts connecting `params.local_qpn` to a remote listener.
    pub fn connect(&mut self, now: Instant, params: ConnectParams) -> Result<CmId, HostError> {
        if !self.qps.contains_key(&params.local_qpn) {
            return Err(HostError::UnknownQp);
        }
        let (qpn, ip) = (params.local_qpn, params.dst_ip);
        let id = self.cm.connect(now, params)?;
        self.peer_ip.insert(qpn, ip);
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
        if !self.qps.contains_key(&qpn) {
            return Err(HostError::UnknownQp);
        }
        let src = self.request_src.get(&id).copied();
        self.cm
            .accept(now, id, params, &mut QpTable(&mut self.qps))?;
        self.request_src.remove(&id);
        if let Some(ip) = src {
            self.peer_ip.insert(qpn, ip);
        }
        self.conn_of_qp.insert(qpn, id);
        Ok(())
    }

    /// Rejects a connection request.
    pub fn reject(&mut self, now: Instant, id: CmId, private: &[u8]) -> Result<(), HostError> {
        self.cm.reject(now, id, private)?;
        self.request_src.remove(&id);
        Ok(())
    }

    /// Disconnects the connection of `qpn`: DREQ, QP to ERROR (outstanding work flushes).
    pub fn disconnect(&mut self, now: Instant, qpn: u32) -> Result<(), HostError> {
        let id = *self.conn_of_qp.get(&qpn).ok_or(HostError::UnknownQp)?;
        self.cm.disconnect(now, id, &mut QpTable(&mut self.qps))?;
        Ok(())
    }

    /// The next work completion of any QP.
    pub fn poll_completion(&mut self) -> Option<WorkCompletion> {
        self.collect();
        self.completions.pop_front()
    }

    /// The next CM or neighbour event.
    pub fn poll_host_event(&mut self) -> Option<HostEvent> {
        self.collect();
        self.events.pop_front()
    }

    /// The next CM event (neighbour events are skipped: see `poll_host_event`).
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        while let Some(ev) = self.poll_host_event() {
            if let HostEvent::Cm(ev) = ev {
                return Some(ev);
            }
        }
        None
    }

    /// The next SRQ whose limit (low watermark) fired.
    pub fn poll_srq_limit(&mut self) -> Option<u32> {
        self.collect();
        self.srq_limit_events.pop_front()
    }

    fn collect(&mut self) {
        for qp in self.qps.values_mut() {
            while let Some(wc) = qp.poll_completion() {
                self.completions.push_back(wc);
            }
        }
        while let Some(ev) = self.cm.poll_event() {
            if let CmEvent::ConnectRequest { id, src_ip, .. } = &ev {
                self.request_src.insert(*id, *src_ip);
            }
            self.events.push_back(HostEvent::Cm(ev));
        }
        while let Some(ev) = self.net.poll_event() {
            self.events.push_back(HostEvent::Net(ev));
        }
        for (n, srq) in self.srqs.iter_mut() {
            if srq.poll_limit_event() {
                self.srq_limit_events.push_back(*n);
            }
        }
    }

    /// Earliest timer of the neighbour layer, the CM and the QPs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.qps
            .values()
            .filter_map(Qp::poll_timeout)
            .chain(self.cm.poll_timeout())
            .chain(self.net.poll_timeout())
            .min()
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.net.poll_timeout().is_some_and(|t| t <= now) {
            self.net.handle_timeout(now);
        }
        if self.cm.poll_timeout().is_some_and(|t| t <= now) {
            self.cm.handle_timeout(now, &mut QpTable(&mut self.qps));
        }
        for qp in self.qps.values_mut() {
            if qp.poll_timeout().is_some_and(|t| t <= now) {
                qp.handle_timeout(now);
            }
        }
        self.collect();
    }

    /// A frame received from the wire. ARP is answered and learnt from, RoCEv2 for us goes to
    /// the CM (QP1) or the destination QP, everything else is counted and dropped.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        let f = match self.net.handle_frame(now, frame) {
            Inbound::Roce(f) => f,
            Inbound::Consumed | Inbound::Dropped(_) => {
                self.collect();
                return;
            }
        };
        self.handle_roce(now, &f);
        self.collect();
    }

    fn handle_roce(&mut self, now: Instant, f: &RoceFrame<'_>) {
        let dest = f.headers.bth.dest_qp;
        if dest == CM_QPN {
            let gsi = f.headers.bth.opcode == Opcode::UD_SEND_ONLY
                && f.headers.deth.is_some_and(|d| d.qkey == GSI_QKEY);
            if !gsi {
                self.stats.rx_bad_gsi += 1;
                return;
            }
            self.cm
                .handle_mad(now, f.ipv4.src_addr, f.payload, &mut QpTable(&mut self.qps));
            return;
        }
        let Some(state) = self.qps.get(&dest).map(Qp::state) else {
            self.stats.rx_unknown_qp += 1;
            return;
        };
        if state == QpState::Rtr {
            // A data packet before the RTU: the implicit RTU of IBTA §12.9.6.
            self.cm.implicit_rtu(now, dest, &mut QpTable(&mut self.qps));
        }
        let Some(qp) = self.qps.get_mut(&dest) else {
            return;
        };
        let srq = qp.config().srq.and_then(|n| self.srqs.get_mut(&n));
        qp.handle_packet(now, &f.packet(), &mut self.mem, srq);
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
        if let Some(arp) = self.net.poll_transmit(now) {
            self.stats.tx_frames += 1;
            out.clear();
            out.extend_from_slice(&arp.padded());
            return true;
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
                        return true;
                    }
                }
                Resolve::Pending => self.held_mads.push_back((dst, mad)),
                Resolve::Failed(_) => self.stats.tx_mads_dropped += 1,
            }
        }
        while let Some(t) = self.cm.poll_transmit(now) {
            match self.net.resolve(now, t.dst) {
                Resolve::Ready(_) => {
                    if self.mad_frame(now, t.dst, &t.mad, out) {
                        return true;
                    }
                }
                Resolve::Pending if self.held_mads.len() < MAX_HELD_MADS => {
                    self.held_mads.push_back((t.dst, t.mad));
                    if let Some(arp) = self.net.poll_transmit(now) {
                        self.stats.tx_frames += 1;
                        out.clear();
                        out.extend_from_slice(&arp.padded());
                        return true;
                    }
                }
                Resolve::Pending | Resolve::Failed(_) => self.stats.tx_mads_dropped += 1,
            }
        }
        // Round robin over the QPs from the cursor, without collecting the keys.
        let mut cursor = self.tx_cursor;
        for _ in 0..self.qps.len() {
            let Some(qpn) = self
                .qps
                .range(cursor..)
                .next()
                .or_else(|| self.qps.iter().next())
                .map(|(&k, _)| k)
            else {
                break;
            };
            cursor = qpn.wrapping_add(1);
            let Some(&dst) = self.peer_ip.get(&qpn) else {
                continue;
            };
            if self.net.lookup(dst).is_none() {
                // Start (or keep) resolving; the QP's packets wait.
                let _ = self.net.resolve(now, dst);
                if let Some(arp) = self.net.poll_transmit(now) {
                    self.stats.tx_frames += 1;
                    out.clear();
                    out.extend_from_slice(&arp.padded());
                    return true;
                }
                continue;
            }
            while let Some((tx, dest_qpn)) = self
                .qps
                .get_mut(&qpn)
                .and_then(|qp| Some((qp.poll_transmit(now)?, qp.attr().dest_qpn)))
            {
                let mut payload = core::mem::take(&mut self.scratch);
                payload.resize(tx.payload.len(), 0);
                let built = match tx.payload.gather(&self.mem, &mut payload) {
                    Ok(_) => self.build_frame(now, dst, qpn, dest_qpn, tx.headers, &payload, out),
                    Err(_) => {
                        self.stats.tx_payload_errors += 1;
                        false
                    }
                };
                self.scratch = payload;
                if built {
                    self.tx_cursor = qpn.wrapping_add(1);
                    return true;
                }
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
        self.build_frame(now, dst, CM_QPN, CM_QPN, headers, mad, out)
    }

    /// Builds the complete frame into `out`; false (and counted) when it cannot be built.
    #[allow(clippy::too_many_arguments)]
    fn build_frame(
        &mut self,
        now: Instant,
        dst: Ipv4Addr,
        src_qpn: u32,
        dst_qpn: u32,
        headers: RoceHeaders,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> bool {
        let Ok((eth, ip, udp)) = self.net.frame_for(now, dst, src_qpn, dst_qpn) else {
            self.stats.tx_no_peer += 1;
            return false;
        };
        let built = RoceFrame::new(eth, ip, udp, headers, payload).and_then(|frame| {
            out.clear();
            out.resize(frame.buffer_len(), 0);
            let n = frame.emit(out)?;
            out.truncate(n);
            Ok(())
        });
        match built {
            Ok(()) => {
                self.stats.tx_frames += 1;
                true
            }
            Err(_) => {
                self.stats.tx_build_errors += 1;
                false
            }
        }
    }
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
