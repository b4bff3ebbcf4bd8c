//! One simulated RoCEv2 port: an IPv4/MAC identity, the IB CM on QP1, RC queue pairs, shared
//! receive queues and registered memory (`VecMemory`). It turns `Transmit`s and CM MADs into
//! complete Ethernet frames (ICRC included) and demultiplexes received frames by destination QP,
//! exactly as the DPDK engine will, but with a static neighbour table instead of ARP.

use crate::cm::{AcceptParams, Cm, CmError, CmEvent, CmId, ConnectParams, QpControl, CM_QPN};
use crate::time::Instant;
use crate::transport::memory::Access;
use crate::transport::qp::Qp;
use crate::transport::srq::Srq;
use crate::transport::types::{
    QpAttr, QpConfig, QpError, QpState, RecvWr, SendWr, WorkCompletion, MAX_SGE,
};
use crate::transport::vec_memory::{Region, VecMemory};
use crate::wire::bth::{BthRepr, DEFAULT_PKEY};
use crate::wire::deth::{DethRepr, GSI_QKEY};
use crate::wire::ethernet::{EtherType, EthernetAddress, EthernetRepr};
use crate::wire::frame::{FrameError, RoceFrame};
use crate::wire::ipv4::{Ipv4Repr, IPPROTO_UDP};
use crate::wire::opcode::Opcode;
use crate::wire::psn::Psn;
use crate::wire::roce::RoceHeaders;
use crate::wire::udp::UdpRepr;
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

/// Identity of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointConfig {
    pub mac: EthernetAddress,
    pub ip: Ipv4Addr,
    /// CA GUID the CM advertises.
    pub ca_guid: u64,
    /// Seed of the CM's comm ID / transaction ID generator.
    pub seed: u64,
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

/// Frame counters of a port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    pub rx_frames: u64,
    /// Frames that failed `RoceFrame::parse`, by error kind.
    pub rx_bad: BTreeMap<&'static str, u64>,
    /// Valid RoCEv2 frames for an IP address that is not ours.
    pub rx_not_for_us: u64,
    /// Valid RoCEv2 frames for a QP that does not exist.
    pub rx_unknown_qp: u64,
    /// Frames to QP1 that are not UD SEND only with the GSI Q_Key.
    pub rx_bad_gsi: u64,
    pub tx_frames: u64,
    /// Packets not sent because the peer's MAC is unknown.
    pub tx_no_neighbour: u64,
    /// Packets not sent because their payload could not be read (region freed in flight).
    pub tx_payload_errors: u64,
}

impl EndpointStats {
    /// Total frames rejected by the parser.
    pub fn rx_bad_total(&self) -> u64 {
        self.rx_bad.values().sum()
    }
}

/// Errors of the endpoint API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
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

/// One port with its CM, QPs, SRQs and memory.
pub struct Endpoint {
    config: EndpointConfig,
    /// Registered memory of this port.
    pub mem: VecMemory,
    cm: Cm,
    qps: BTreeMap<u32, Qp>,
    srqs: BTreeMap<u32, Srq>,
    /// Peer IP of each connected (or connecting) QP.
    peer_ip: BTreeMap<u32, Ipv4Addr>,
    /// CM connection of each QP.
    conn_of_qp: BTreeMap<u32, CmId>,
    /// Remote IP of each pending connection request.
    request_src: BTreeMap<CmId, Ipv4Addr>,
    neighbours: BTreeMap<Ipv4Addr, EthernetAddress>,
    next_qpn: u32,
    next_srqn: u32,
    gsi_psn: Psn,
    ip_ident: u16,
    tx_cursor: u32,
    completions: VecDeque<WorkCompletion>,
    events: VecDeque<CmEvent>,
    srq_limit_events: VecDeque<u32>,
    stats: EndpointStats,
    scratch: Vec<u8>,
}

impl Endpoint {
    /// A port with no QPs.
    pub fn new(config: EndpointConfig) -> Endpoint {
        Endpoint {
            cm: Cm::new(config.ip, config.ca_guid, config.seed),
            config,
            mem: VecMemory::new(),
            qps: BTreeMap::new(),
            srqs: BTreeMap::new(),
            peer_ip: BTreeMap::new(),
            conn_of_qp: BTreeMap::new(),
            request_src: BTreeMap::new(),
            neighbours: BTreeMap::new(),
            // QPNs 0 and 1 are special; start somewhere recognisable in captures.
            next_qpn: 0x11,
            next_srqn: 1,
            gsi_psn: Psn::new(0),
            ip_ident: 0,
            tx_cursor: 0,
            completions: VecDeque::new(),
            events: VecDeque::new(),
            srq_limit_events: VecDeque::new(),
            stats: EndpointStats::default(),
            scratch: Vec::new(),
        }
    }

    /// The port's identity.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    /// Frame counters.
    pub fn stats(&self) -> &EndpointStats {
        &self.stats
    }

    /// The CM (for its counters).
    pub fn cm(&self) -> &Cm {
        &self.cm
    }

    /// Adds a static neighbour entry (the simulated stand-in for ARP).
    pub fn add_neighbour(&mut self, ip: Ipv4Addr, mac: EthernetAddress) {
        self.neighbours.insert(ip, mac);
    }

    /// Registers `len` bytes of zeroed memory in protection domain `pd`.
    pub fn register(&mut self, pd: u32, len: usize, access: Access) -> Region {
        self.mem.register(pd, len, access)
    }

    /// Creates an RC QP and moves it to INIT, so receives can be posted before connecting.
    pub fn create_qp(&mut self, now: Instant, opts: QpOptions) -> Result<u32, EndpointError> {
        if let Some(s) = opts.srq {
            if !self.srqs.contains_key(&s) {
                return Err(EndpointError::UnknownSrq);
            }
        }
        if self.next_qpn > 0x00ff_ffff {
            return Err(EndpointError::NoQpn);
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
        self.qps.insert(qpn, qp);
        Ok(qpn)
    }

    /// Creates a shared receive queue.
    pub fn create_srq(&mut self, depth: u32) -> u32 {
        let n = self.next_srqn;
        self.next_srqn += 1;
        self.srqs.insert(n, Srq::new(n, depth, MAX_SGE as u32));
        n
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
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), EndpointError> {
        self.qps.remove(&qpn).ok_or(EndpointError::UnknownQp)?;
        self.peer_ip.remove(&qpn);
        self.conn_of_qp.remove(&qpn);
        Ok(())
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, now: Instant, qpn: u32, wr: SendWr) -> Result<(), EndpointError> {
        let qp = self.qps.get_mut(&qpn).ok_or(EndpointError::UnknownQp)?;
        qp.post_send(now, wr, &self.mem)?;
        Ok(())
    }

    /// Posts a receive work request to a QP's own receive queue.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), EndpointError> {
        let qp = self.qps.get_mut(&qpn).ok_or(EndpointError::UnknownQp)?;
        qp.post_recv(wr)?;
        Ok(())
    }

    /// Posts a receive work request to an SRQ.
    pub fn post_srq_recv(&mut self, srqn: u32, wr: RecvWr) -> Result<(), EndpointError> {
        let srq = self.srqs.get_mut(&srqn).ok_or(EndpointError::UnknownSrq)?;
        srq.post_recv(wr)?;
        Ok(())
    }

    /// Listens for connection requests on an rdma_cm TCP-space port.
    pub fn listen(&mut self, port: u16) -> Result<(), EndpointError> {
        Ok(self.cm.listen(port)?)
    }

    /// Starts connecting `params.local_qpn` to a remote listener.
    pub fn connect(&mut self, now: Instant, params: ConnectParams) -> Result<CmId, EndpointError> {
        if !self.qps.contains_key(&params.local_qpn) {
            return Err(EndpointError::UnknownQp);
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
    ) -> Result<(), EndpointError> {
        let qpn = params.local_qpn;
        if !self.qps.contains_key(&qpn) {
            return Err(EndpointError::UnknownQp);
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
    pub fn reject(&mut self, now: Instant, id: CmId, private: &[u8]) -> Result<(), EndpointError> {
        self.cm.reject(now, id, private)?;
        self.request_src.remove(&id);
        Ok(())
    }

    /// Disconnects the connection of `qpn`: DREQ, QP to ERROR (outstanding work flushes).
    pub fn disconnect(&mut self, now: Instant, qpn: u32) -> Result<(), EndpointError> {
        let id = *self.conn_of_qp.get(&qpn).ok_or(EndpointError::UnknownQp)?;
        self.cm.disconnect(now, id, &mut QpTable(&mut self.qps))?;
        Ok(())
    }

    /// The next work completion of any QP.
    pub fn poll_completion(&mut self) -> Option<WorkCompletion> {
        self.collect();
        self.completions.pop_front()
    }

    /// The next CM event.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.collect();
        self.events.pop_front()
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
            self.events.push_back(ev);
        }
        for (n, srq) in self.srqs.iter_mut() {
            if srq.poll_limit_event() {
                self.srq_limit_events.push_back(*n);
            }
        }
    }

    /// Earliest timer of the CM and the QPs.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.qps
            .values()
            .filter_map(Qp::poll_timeout)
            .chain(self.cm.poll_timeout())
            .min()
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
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

    /// A frame received from the wire.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.stats.rx_frames += 1;
        let f = match RoceFrame::parse(frame) {
            Ok(f) => f,
            Err(e) => {
                *self.stats.rx_bad.entry(error_kind(&e)).or_default() += 1;
                return;
            }
        };
        if f.ipv4.dst_addr != self.config.ip {
            self.stats.rx_not_for_us += 1;
            return;
        }
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
        } else {
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
        self.collect();
    }

    /// The next frame to send, if any: CM MADs first, then the QPs round robin.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        while let Some(t) = self.cm.poll_transmit(now) {
            let mut bth = BthRepr::new(Opcode::UD_SEND_ONLY, CM_QPN, self.gsi_psn);
            bth.pkey = DEFAULT_PKEY;
            self.gsi_psn = self.gsi_psn.next();
            let headers = RoceHeaders::new(bth).with_deth(DethRepr {
                qkey: GSI_QKEY,
                src_qp: CM_QPN,
            });
            let sport = udp_source_port(CM_QPN, CM_QPN);
            if let Some(frame) = self.build_frame(t.dst, sport, headers, &t.mad) {
                return Some(frame);
            }
        }
        let qpns: Vec<u32> = self.qps.keys().copied().collect();
        if qpns.is_empty() {
            return None;
        }
        let start = qpns.partition_point(|&q| q < self.tx_cursor);
        for i in 0..qpns.len() {
            let qpn = qpns[(start + i) % qpns.len()];
            while let Some((tx, dest_qpn)) = self
                .qps
                .get_mut(&qpn)
                .and_then(|qp| Some((qp.poll_transmit(now)?, qp.attr().dest_qpn)))
            {
                let Some(&dst) = self.peer_ip.get(&qpn) else {
                    self.stats.tx_no_neighbour += 1;
                    continue;
                };
                let mut payload = core::mem::take(&mut self.scratch);
                payload.resize(tx.payload.len(), 0);
                let frame = match tx.payload.gather(&self.mem, &mut payload) {
                    Ok(_) => {
                        self.build_frame(dst, udp_source_port(qpn, dest_qpn), tx.headers, &payload)
                    }
                    Err(_) => {
                        self.stats.tx_payload_errors += 1;
                        None
                    }
                };
                self.scratch = payload;
                if let Some(frame) = frame {
                    self.tx_cursor = qpn + 1;
                    return Some(frame);
                }
            }
        }
        None
    }

    fn build_frame(
        &mut self,
        dst: Ipv4Addr,
        sport: u16,
        headers: RoceHeaders,
        payload: &[u8],
    ) -> Option<Vec<u8>> {
        let Some(&dst_mac) = self.neighbours.get(&dst) else {
            self.stats.tx_no_neighbour += 1;
            return None;
        };
        let eth = EthernetRepr {
            src_addr: self.config.mac,
            dst_addr: dst_mac,
            ethertype: EtherType::IPV4,
        };
        self.ip_ident = self.ip_ident.wrapping_add(1);
        let ip = Ipv4Repr {
            src_addr: self.config.ip,
            dst_addr: dst,
            protocol: IPPROTO_UDP,
            dscp: 0,
            ecn: 0,
            ident: self.ip_ident,
            dont_frag: true,
            ttl: 64,
        };
        let frame = RoceFrame::new(eth, ip, UdpRepr::rocev2(sport), headers, payload).ok()?;
        let mut buf = vec![0u8; frame.buffer_len()];
        let n = frame.emit(&mut buf).ok()?;
        buf.truncate(n);
        self.stats.tx_frames += 1;
        Some(buf)
    }
}

/// UDP source port for a QP pair: in 0xC000..=0xFFFF (RoCEv2 annex A17.3.1 entropy; low ports
/// make Wireshark pick another dissector), stable per connection so ECMP keeps its order.
pub fn udp_source_port(qpn: u32, dest_qpn: u32) -> u16 {
    let h = qpn ^ dest_qpn.rotate_left(7) ^ (qpn >> 14);
    0xc000 | (h & 0x3fff) as u16
}

/// A short stable name of a frame error, for counters.
pub fn error_kind(e: &FrameError) -> &'static str {
    match e {
        FrameError::BadIcrc { .. } => "bad_icrc",
        FrameError::BadIpChecksum => "bad_ip_checksum",
        FrameError::BadUdpChecksum => "bad_udp_checksum",
        FrameError::NotIpv4(_) | FrameError::NotUdp(_) | FrameError::NotRoce(_) => "not_roce",
        FrameError::Truncated { .. } => "truncated",
        _ => "bad_headers",
    }
}
