//! The CM of one local IP address, sans-IO (IBTA vol. 1 §12.9 state machine, §12.6 messages):
//! MADs in through `handle_mad`, time through `handle_timeout`, consumer calls (`listen`,
//! `connect`, `accept`, `reject`, `disconnect`); MADs out through `poll_transmit`, events through
//! `poll_event`, the next deadline through `poll_timeout`. It never reads a clock.
//!
//! PSNs follow Linux `ib_cm` and the rdma_cm capture in `tests/vectors`: the REQ's starting
//! PSN is the active side's receive PSN (its `rq_psn`, the passive side's `sq_psn`); the REP's
//! is the passive side's receive PSN (its `rq_psn`, the active side's `sq_psn`).
//!
//! QPs: active side on REP: INIT, RTR, RTS, then RTU and `Established`. Passive side on
//! `accept`: INIT, RTR, then REP; on RTU (or `implicit_rtu` when the first data packet arrives
//! before a lost RTU): RTS and `Established`. DREQ received or `disconnect`: ERROR.

use super::conn::{Conn, State};
use super::event::{CmError, CmEvent, CmId, CmStats, CmTransmit};
use super::ip_cm::{
    gid_of, port_of_service_id, service_id_for_port, IpCmHeader, IP_CM_HEADER_LEN,
    IP_CM_REQ_USER_LEN,
};
use super::local_ips::LocalIps;
use super::params::{peer_ack_timeout, AcceptParams, CmConfig, ConnectParams, PEER_CM_TIMEOUT_MAX};
use super::qp_control::QpControl;
use super::timeout::cm_timeout;
use crate::time::Instant;
use crate::transport::types::{Mtu, QpAttr, QpError, QpState};
use crate::wire::bth::{port_pkey_ok, DEFAULT_PKEY};
use crate::wire::cm_msg::*;
use crate::wire::mad::{MadHeader, MAD_LEN};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashMap, VecDeque};
use std::net::IpAddr;

/// The connection manager of a port's local addresses (one per family).
pub struct Cm {
    local: LocalIps,
    ca_guid: u64,
    config: CmConfig,
    rng: ChaCha8Rng,
    listeners: BTreeSet<u16>,
    conns: BTreeMap<u32, Conn>,
    /// Every deadline set on a connection (its timer or connect deadline), earliest first, so
    /// neither `poll_timeout` nor `handle_timeout` scans the connections (set-up cost stays
    /// flat in their number). Entries go stale when a timer changes or its connection goes;
    /// `poll_timeout` drops stale ones from the top, `handle_timeout` those that are due.
    deadlines: RefCell<BinaryHeap<Reverse<(Instant, u32)>>>,
    /// (peer IP, peer comm ID) -> local comm ID, for duplicate detection.
    by_remote: HashMap<(IpAddr, u32), u32>,
    transmits: VecDeque<CmTransmit>,
    events: VecDeque<CmEvent>,
    stats: CmStats,
    /// Unanswered requests (`Conn::unanswered`) by listener port, and in all.
    requests: HashMap<u16, usize>,
    requests_total: usize,
}

impl Cm {
    /// A CM for `local` (an address, or both of a dual-stack port) whose CA GUID is `ca_guid`;
    /// comm IDs and transaction IDs are drawn from a generator seeded with `seed`, so runs are
    /// reproducible.
    pub fn new(local: impl Into<LocalIps>, ca_guid: u64, seed: u64) -> Cm {
        Cm::with_config(local, ca_guid, seed, CmConfig::default())
    }

    pub fn with_config(
        local: impl Into<LocalIps>,
        ca_guid: u64,
        seed: u64,
        config: CmConfig,
    ) -> Cm {
        Cm {
            local: local.into(),
            ca_guid,
            config,
            rng: ChaCha8Rng::seed_from_u64(seed),
            listeners: BTreeSet::new(),
            conns: BTreeMap::new(),
            deadlines: RefCell::new(BinaryHeap::new()),
            by_remote: HashMap::new(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: CmStats::default(),
            requests: HashMap::new(),
            requests_total: 0,
        }
    }

    /// The port's first address (IPv4 if it has one).
    pub fn local_ip(&self) -> IpAddr {
        self.local.primary()
    }

    /// The port's addresses.
    pub fn local_ips(&self) -> LocalIps {
        self.local
    }

    pub fn stats(&self) -> CmStats {
        self.stats
    }

    /// Number of connections held (including those in time-wait).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// The QP attributes negotiated so far for `id`.
    pub fn qp_attr(&self, id: CmId) -> Option<QpAttr> {
        self.conns.get(&id.0).map(|c| c.attr)
    }

    /// Accept REQs for service ID `0x0000000001060000 | port`.
    pub fn listen(&mut self, port: u16) -> Result<(), CmError> {
        if self.listeners.insert(port) {
            Ok(())
        } else {
            Err(CmError::PortInUse(port))
        }
    }

    /// Stop accepting REQs for `port` (REQs then get REJ "invalid service ID").
    pub fn unlisten(&mut self, port: u16) -> Result<(), CmError> {
        if self.listeners.remove(&port) {
            Ok(())
        } else {
            Err(CmError::InvalidState)
        }
    }

    /// The next MAD to send.
    pub fn poll_transmit(&mut self, _now: Instant) -> Option<CmTransmit> {
        self.transmits.pop_front()
    }

    /// True when a MAD waits to be sent.
    pub fn has_transmit(&self) -> bool {
        !self.transmits.is_empty()
    }

    /// The next consumer event.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When `handle_timeout` must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut heap = self.deadlines.borrow_mut();
        while let Some(&Reverse((t, id))) = heap.peek() {
            if self.conns.get(&id).is_some_and(|c| c.has_deadline(t)) {
                return Some(t);
            }
            heap.pop();
        }
        None
    }

    /// Stores connection `id` and indexes its deadlines.
    fn put(&mut self, id: u32, c: Conn) {
        self.arm(id, &c);
        self.conns.insert(id, c);
    }

    /// Indexes the deadlines of `c` (connection `id`).
    fn arm(&self, id: u32, c: &Conn) {
        self.index_deadlines(id, [c.timer, c.connect_deadline()]);
    }

    /// Indexes connection `id`'s timer and connect deadline, where set.
    fn index_deadlines(&self, id: u32, deadlines: [Option<Instant>; 2]) {
        let mut heap = self.deadlines.borrow_mut();
        for t in deadlines.into_iter().flatten() {
            heap.push(Reverse((t, id)));
        }
    }

    fn alloc_comm_id(&mut self) -> u32 {
        loop {
            let id = self.rng.next_u32();
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    fn send(&mut self, dst: IpAddr, tid: u64, msg: &CmMessage) -> [u8; MAD_LEN] {
        let mut mad = [0u8; MAD_LEN];
        msg.emit(&MadHeader::cm(msg.attribute_id(), tid), &mut mad);
        self.transmits.push_back(CmTransmit { dst, mad });
        self.stats.sent.count(msg);
        mad
    }

    fn resend(&mut self, dst: IpAddr, mad: [u8; MAD_LEN]) {
        self.transmits.push_back(CmTransmit { dst, mad });
    }

    fn rej(
        local: u32,
        remote: u32,
        msg_rejected: MsgRef,
        reason: RejReason,
        ari: &[u8],
        private: &[u8],
    ) -> CmMessage {
        let mut r = RejRepr {
            local_comm_id: local,
            remote_comm_id: remote,
            msg_rejected,
            reject_info_length: ari.len().min(REJ_ARI_LEN) as u8,
            reason,
            ari: [0; REJ_ARI_LEN],
            private_data: [0; REJ_PRIVATE_LEN],
        };
        copy_prefix(&mut r.ari, ari);
        copy_prefix(&mut r.private_data, private);
        CmMessage::Rej(r)
    }

    /// Move to time-wait: kept for `config.time_wait` to answer duplicates from `last`.
    /// Gives up on connection `id`: a REJ with reason Timeout to the peer (IBTA vol. 1
    /// §12.9.6), then TimeWait.
    fn reject_timed_out(&mut self, now: Instant, id: u32, c: &mut Conn) {
        let guid = self.ca_guid.to_be_bytes();
        let rej = Self::rej(
            id,
            c.remote_comm_id,
            MsgRef::Other,
            RejReason::Timeout,
            &guid,
            &[],
        );
        c.last = Some(self.send(c.remote_ip, c.tid, &rej));
        self.time_wait(now, c);
    }

    fn time_wait(&self, now: Instant, c: &mut Conn) {
        c.state = State::TimeWait;
        c.timer = Some(now + cm_timeout(self.config.time_wait));
    }

    /// `c` (taken out of the table) leaves the unanswered requests: accepted, rejected or
    /// given up.
    fn answered(&mut self, c: &Conn) {
        if c.active || !c.unanswered() {
            return;
        }
        self.requests_total = self.requests_total.saturating_sub(1);
        if let Some(n) = self.requests.get_mut(&c.listener) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.requests.remove(&c.listener);
            }
        }
    }

    /// Unanswered requests now (all listeners).
    pub fn unanswered_requests(&self) -> usize {
        self.requests_total
    }

    fn forget(&mut self, id: u32) {
        if let Some(c) = self.conns.remove(&id) {
            if c.remote_comm_id != 0 {
                self.by_remote.remove(&(c.remote_ip, c.remote_comm_id));
            }
        }
    }

    // ---- consumer calls -------------------------------------------------------------------

    /// Send a REQ to `p.dst_ip`; the answer comes as `Established`, `Rejected`, `Unreachable` or
    /// `ConnectError`.
    pub fn connect(&mut self, now: Instant, p: ConnectParams) -> Result<CmId, CmError> {
        if p.private_data.len() > IP_CM_REQ_USER_LEN {
            return Err(CmError::PrivateDataTooLong {
                len: p.private_data.len(),
                max: IP_CM_REQ_USER_LEN,
            });
        }
        let local_ip = self
            .local
            .toward(p.dst_ip)
            .ok_or(CmError::NoLocalAddress(p.dst_ip))?;
        let id = self.alloc_comm_id();
        let tid = self.rng.next_u64();
        let mut private = [0u8; REQ_PRIVATE_LEN];
        IpCmHeader::new(local_ip, p.src_port, p.dst_ip)
            .ok_or(CmError::NoLocalAddress(p.dst_ip))?
            .emit(&mut private);
        private[IP_CM_HEADER_LEN..IP_CM_HEADER_LEN + p.private_data.len()]
            .copy_from_slice(&p.private_data);
        let path = PathInfo {
            local_lid: 0xffff,
            remote_lid: 0xffff,
            local_gid: gid_of(local_ip),
            remote_gid: gid_of(p.dst_ip),
            flow_label: 0,
            packet_rate: 0,
            traffic_class: 0,
            hop_limit: self.config.hop_limit,
            sl: 0,
            subnet_local: false,
            local_ack_timeout: p.local_ack_timeout & 0x1f,
        };
        let req = ReqRepr {
            local_comm_id: id,
            service_id: service_id_for_port(p.port),
            local_ca_guid: self.ca_guid,
            local_qkey: 0,
            local_qpn: p.local_qpn & 0xff_ffff,
            responder_resources: p.responder_resources,
            local_eecn: 0,
            initiator_depth: p.initiator_depth,
            remote_eecn: 0,
            remote_cm_response_timeout: self.config.cm_response_timeout,
            transport_type: 0,
            end_to_end_flow_control: false,
            starting_psn: p.starting_psn,
            local_cm_response_timeout: self.config.cm_response_timeout,
            retry_count: p.retry_cnt & 7,
            pkey: DEFAULT_PKEY,
            path_mtu: p.pmtu as u8,
            rdc_exists: false,
            rnr_retry_count: p.rnr_retry & 7,
            max_cm_retries: self.config.max_cm_retries & 0xf,
            srq: p.srq,
            extended_transport_type: 0,
            primary_path: path,
            alternate_path: PathInfo::default(),
            private_data: private,
        };
        let mad = self.send(p.dst_ip, tid, &CmMessage::Req(req));
        let attr = QpAttr {
            pmtu: p.pmtu,
            rq_psn: p.starting_psn,
            retry_cnt: p.retry_cnt & 7,
            timeout: p.local_ack_timeout & 0x1f,
            min_rnr_timer: p.min_rnr_timer,
            pkey: DEFAULT_PKEY,
            access: p.access,
            ..QpAttr::default()
        };
        self.put(
            id,
            Conn {
                state: State::ReqSent,
                active: true,
                remote_ip: p.dst_ip,
                remote_comm_id: 0,
                tid,
                local_qpn: p.local_qpn,
                attr,
                offered_initiator_depth: p.initiator_depth,
                offered_responder_resources: p.responder_resources,
                peer_timeout: self.config.cm_response_timeout,
                max_retries: self.config.max_cm_retries,
                retries: 0,
                timer: Some(now + cm_timeout(self.config.cm_response_timeout)),
                deadline: p.timeout.map(|t| now + t),
                listener: 0,
                last: Some(mad),
                req: None,
            },
        );
        Ok(CmId(id))
    }

    /// Accept a `ConnectRequest`: the QP goes to INIT and RTR, then the REP is sent.
    pub fn accept(
        &mut self,
        now: Instant,
        id: CmId,
        p: AcceptParams,
        qpc: &mut dyn QpControl,
    ) -> Result<(), CmError> {
        if p.private_data.len() > REP_PRIVATE_LEN {
            return Err(CmError::PrivateDataTooLong {
                len: p.private_data.len(),
                max: REP_PRIVATE_LEN,
            });
        }
        let c = self.conns.get(&id.0).ok_or(CmError::UnknownId)?;
        let req = match (c.state, c.req) {
            (State::ReqRcvd | State::MraReqSent, Some(r)) => r,
            _ => return Err(CmError::InvalidState),
        };
        let Some(mut c) = self.conns.remove(&id.0) else {
            return Err(CmError::UnknownId);
        };
        self.answered(&c);
        let req_mtu = Mtu::from_code(req.path_mtu).unwrap_or(Mtu::Mtu256);
        let pmtu = p.pmtu.map_or(req_mtu, |m| m.min(req_mtu));
        let responder_resources = p.responder_resources.min(req.initiator_depth);
        let initiator_depth = p.initiator_depth.min(req.responder_resources);
        c.local_qpn = p.local_qpn;
        c.attr = QpAttr {
            pmtu,
            sq_psn: req.starting_psn,
            rq_psn: p.starting_psn,
            retry_cnt: req.retry_count,
            rnr_retry: req.rnr_retry_count,
            timeout: peer_ack_timeout(req.primary_path.local_ack_timeout),
            min_rnr_timer: p.min_rnr_timer,
            max_rd_atomic: initiator_depth,
            max_dest_rd_atomic: responder_resources,
            dest_qpn: req.local_qpn,
            pkey: req.pkey,
            access: p.access,
        };
        let moved = qpc
            .modify_qp(now, c.local_qpn, QpState::Init, &c.attr)
            .and_then(|_| qpc.modify_qp(now, c.local_qpn, QpState::Rtr, &c.attr));
        if let Err(e) = moved {
            let rej = Self::rej(
                id.0,
                c.remote_comm_id,
                MsgRef::Req,
                RejReason::NoResources,
                &[],
                &[],
            );
            c.last = Some(self.send(c.remote_ip, c.tid, &rej));
            self.time_wait(now, &mut c);
            self.put(id.0, c);
            return Err(CmError::Qp(e));
        }
        let mut rep = RepRepr {
            local_comm_id: id.0,
            remote_comm_id: c.remote_comm_id,
            local_qkey: 0,
            local_qpn: p.local_qpn & 0xff_ffff,
            local_eecn: 0,
            starting_psn: p.starting_psn,
            responder_resources,
            initiator_depth,
            target_ack_delay: self.config.target_ack_delay,
            failover_accepted: 0,
            end_to_end_flow_control: false,
            rnr_retry_count: p.rnr_retry & 7,
            srq: p.srq,
            local_ca_guid: self.ca_guid,
            private_data: [0; REP_PRIVATE_LEN],
        };
        copy_prefix(&mut rep.private_data, &p.private_data);
        c.last = Some(self.send(c.remote_ip, c.tid, &CmMessage::Rep(rep)));
        c.state = State::RepSent;
        c.retries = 0;
        c.timer = Some(now + cm_timeout(c.peer_timeout));
        self.put(id.0, c);
        Ok(())
    }

    /// Refuse a `ConnectRequest` with REJ reason "consumer defined" and `private_data`
    /// (at most 148 bytes).
    pub fn reject(&mut self, now: Instant, id: CmId, private_data: &[u8]) -> Result<(), CmError> {
        if private_data.len() > REJ_PRIVATE_LEN {
            return Err(CmError::PrivateDataTooLong {
                len: private_data.len(),
                max: REJ_PRIVATE_LEN,
            });
        }
        let c = self.conns.get(&id.0).ok_or(CmError::UnknownId)?;
        if !matches!(c.state, State::ReqRcvd | State::MraReqSent) {
            return Err(CmError::InvalidState);
        }
        let Some(mut c) = self.conns.remove(&id.0) else {
            return Err(CmError::UnknownId);
        };
        self.answered(&c);
        let rej = Self::rej(
            id.0,
            c.remote_comm_id,
            MsgRef::Req,
            RejReason::ConsumerDefined,
            &[],
            private_data,
        );
        c.last = Some(self.send(c.remote_ip, c.tid, &rej));
        self.time_wait(now, &mut c);
        self.put(id.0, c);
        Ok(())
    }

    /// The neighbour layer could not resolve the next hop of the destinations `lost` names
    /// (its ARP requests went unanswered: the peer on the link, or the router before it): every
    /// connection request to them still waiting for a first answer fails now with
    /// `Unreachable` (its REQ never left; dat_ep_connect(3DAT):
    /// DAT_CONNECTION_EVENT_UNREACHABLE) instead of after the last of the CM's retries.
    pub fn destinations_unresolvable(&mut self, lost: impl Fn(IpAddr) -> bool) {
        let ids: Vec<u32> = self
            .conns
            .iter()
            .filter(|(_, c)| {
                c.active && lost(c.remote_ip) && c.state == State::ReqSent && c.remote_comm_id == 0
            })
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.forget(id);
            self.events.push_back(CmEvent::Unreachable { id: CmId(id) });
        }
    }

    /// Whether connection `id` is up (established, or the passive side waiting for the RTU):
    /// what `disconnect` tears down with a DREQ.
    pub fn is_up(&self, id: CmId) -> bool {
        self.conns.get(&id.0).is_some_and(|c| {
            matches!(
                c.state,
                State::Established | State::RepSent | State::MraRepRcvd
            )
        })
    }

    /// Tear down an established connection: the QP goes to ERROR and a DREQ is sent;
    /// `Disconnected` follows on DREP or when the DREQ retries run out. A no-op when the
    /// connection is already disconnecting or disconnected.
    pub fn disconnect(
        &mut self,
        now: Instant,
        id: CmId,
        qpc: &mut dyn QpControl,
    ) -> Result<(), CmError> {
        let c = self.conns.get(&id.0).ok_or(CmError::UnknownId)?;
        match c.state {
            State::Established | State::RepSent | State::MraRepRcvd => {}
            State::DreqSent | State::TimeWait => return Ok(()),
            _ => return Err(CmError::InvalidState),
        }
        let Some(mut c) = self.conns.remove(&id.0) else {
            return Err(CmError::UnknownId);
        };
        let qp = qpc.modify_qp(now, c.local_qpn, QpState::Error, &c.attr);
        let dreq = DreqRepr {
            local_comm_id: id.0,
            remote_comm_id: c.remote_comm_id,
            remote_qpn: c.attr.dest_qpn & 0xff_ffff,
            private_data: [0; DREQ_PRIVATE_LEN],
        };
        c.last = Some(self.send(c.remote_ip, c.tid, &CmMessage::Dreq(dreq)));
        c.state = State::DreqSent;
        c.retries = 0;
        c.timer = Some(now + cm_timeout(c.peer_timeout));
        self.put(id.0, c);
        qp.map_err(CmError::Qp)
    }

    /// The passive side saw the first data packet on `local_qpn` before the RTU: treat it as
    /// the RTU (IBTA §12.9.6 allows the "first packet received" as an implicit RTU).
    pub fn implicit_rtu(&mut self, now: Instant, local_qpn: u32, qpc: &mut dyn QpControl) {
        let id = self
            .conns
            .iter()
            .find(|(_, c)| {
                !c.active
                    && c.local_qpn == local_qpn
                    && matches!(c.state, State::RepSent | State::MraRepRcvd)
            })
            .map(|(&id, _)| id);
        if let Some(id) = id {
            self.establish_passive(now, id, qpc);
        }
    }

    // ---- input ----------------------------------------------------------------------------

    /// A MAD received on QP1 from `src`. Malformed or unexpected MADs are counted in `stats`
    /// and dropped.
    pub fn handle_mad(
        &mut self,
        now: Instant,
        src: impl Into<IpAddr>,
        mad: &[u8],
        qpc: &mut dyn QpControl,
    ) {
        let src = src.into();
        let Ok((hdr, msg)) = CmMessage::parse(mad) else {
            self.stats.malformed += 1;
            return;
        };
        self.stats.received.count(&msg);
        match msg {
            CmMessage::Req(m) => self.on_req(now, src, &hdr, &m),
            CmMessage::Rep(m) => self.on_rep(now, src, &m, qpc),
            CmMessage::Rtu(m) => self.on_rtu(now, src, &m, qpc),
            CmMessage::Rej(m) => self.on_rej(src, &m, qpc, now),
            CmMessage::Mra(m) => self.on_mra(now, src, &m),
            CmMessage::Dreq(m) => self.on_dreq(now, src, &hdr, &m, qpc),
            CmMessage::Drep(m) => self.on_drep(now, src, &m),
        }
    }

    /// The connection `local` if it exists and belongs to `src` (and `remote`, when known).
    fn lookup(&self, src: IpAddr, local: u32, remote: u32) -> Option<u32> {
        let c = self.conns.get(&local)?;
        (c.remote_ip == src && (c.remote_comm_id == 0 || c.remote_comm_id == remote))
            .then_some(local)
    }

    fn on_req(&mut self, now: Instant, src: IpAddr, hdr: &MadHeader, req: &ReqRepr) {
        if let Some(&id) = self.by_remote.get(&(src, req.local_comm_id)) {
            self.on_dup_req(id);
            return;
        }
        let reject = |me: &mut Self, reason: RejReason| {
            let rej = Self::rej(0, req.local_comm_id, MsgRef::Req, reason, &[], &[]);
            me.send(src, hdr.transaction_id, &rej);
        };
        let port = match port_of_service_id(req.service_id) {
            Some(p) if self.listeners.contains(&p) => p,
            _ => return reject(self, RejReason::InvalidServiceId),
        };
        // The header's addresses are of the frame's family (rdma_cm writes its own source).
        let header = IpCmHeader::parse(&req.private_data).and_then(|h| Ok((h, h.dst_addr()?)));
        let (ip, dst_ip) = match header {
            Ok((h, dst)) if dst.is_ipv4() == src.is_ipv4() => (h, dst),
            _ => {
                self.stats.malformed += 1;
                return reject(self, RejReason::Unsupported);
            }
        };
        if req.transport_type != 0 {
            return reject(self, RejReason::InvalidTransportType);
        }
        let Some(pmtu) = Mtu::from_code(req.path_mtu) else {
            return reject(self, RejReason::InvalidMtu);
        };
        if !port_pkey_ok(req.pkey) {
            // No REJ reason names the P_Key; it is part of the path, whose reason this is.
            self.stats.foreign_pkey += 1;
            return reject(self, RejReason::InvalidGid);
        }
        let waiting = self.requests.get(&port).copied().unwrap_or(0);
        if waiting >= self.config.max_requests_per_listener
            || self.requests_total >= self.config.max_requests
        {
            self.stats.requests_refused += 1;
            return reject(self, RejReason::NoResources);
        }
        *self.requests.entry(port).or_default() += 1;
        self.requests_total += 1;
        let id = self.alloc_comm_id();
        self.put(
            id,
            Conn {
                state: State::ReqRcvd,
                active: false,
                remote_ip: src,
                remote_comm_id: req.local_comm_id,
                tid: hdr.transaction_id,
                local_qpn: 0,
                attr: QpAttr::default(),
                offered_initiator_depth: 0,
                offered_responder_resources: 0,
                peer_timeout: req.local_cm_response_timeout.min(PEER_CM_TIMEOUT_MAX),
                max_retries: req.max_cm_retries,
                retries: 0,
                timer: None,
                deadline: Some(now + cm_timeout(self.config.mra_service_timeout)),
                listener: port,
                last: None,
                req: Some(*req),
            },
        );
        self.by_remote.insert((src, req.local_comm_id), id);
        self.events.push_back(CmEvent::ConnectRequest {
            id: CmId(id),
            port,
            // The sender is the frame's source, not what its IP CM header claims: the
            // accepted QP takes packets from this address only.
            src_ip: src,
            src_port: ip.src_port,
            dst_ip,
            remote_qpn: req.local_qpn,
            remote_ca_guid: req.local_ca_guid,
            responder_resources: req.responder_resources,
            initiator_depth: req.initiator_depth,
            pmtu,
            private_data: req.private_data[IP_CM_HEADER_LEN..].to_vec(),
        });
    }

    /// A REQ repeated by the peer: answer from saved state, never a second `ConnectRequest`.
    fn on_dup_req(&mut self, id: u32) {
        self.stats.duplicates += 1;
        let Some(c) = self.conns.get(&id) else {
            return;
        };
        let (dst, state, last, last_attr) = (c.remote_ip, c.state, c.last, c.last_attr());
        match state {
            State::ReqRcvd => {
                let Some(c) = self.conns.get(&id) else { return };
                let (remote, tid) = (c.remote_comm_id, c.tid);
                let mra = MraRepr {
                    local_comm_id: id,
                    remote_comm_id: remote,
                    msg_mraed: MsgRef::Req,
                    service_timeout: self.config.mra_service_timeout,
                    private_data: [0; MRA_PRIVATE_LEN],
                };
                let mad = self.send(dst, tid, &CmMessage::Mra(mra));
                if let Some(c) = self.conns.get_mut(&id) {
                    c.state = State::MraReqSent;
                    c.last = Some(mad);
                }
            }
            State::MraReqSent | State::RepSent | State::MraRepRcvd => {
                if let Some(m) = last {
                    self.resend(dst, m);
                }
            }
            State::TimeWait if last_attr == Some(attr::REJ) => {
                if let Some(m) = last {
                    self.resend(dst, m);
                }
            }
            _ => {}
        }
    }

    fn on_rep(&mut self, now: Instant, src: IpAddr, rep: &RepRepr, qpc: &mut dyn QpControl) {
        let Some(id) = self.lookup(src, rep.remote_comm_id, rep.local_comm_id) else {
            self.stats.unmatched += 1;
            return;
        };
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        match c.state {
            State::ReqSent | State::MraReqRcvd if c.active => {
                c.remote_comm_id = rep.local_comm_id;
                self.by_remote.insert((src, rep.local_comm_id), id);
                c.attr.sq_psn = rep.starting_psn;
                c.attr.dest_qpn = rep.local_qpn;
                c.attr.rnr_retry = rep.rnr_retry_count;
                c.attr.max_rd_atomic = rep.responder_resources.min(c.offered_initiator_depth);
                c.attr.max_dest_rd_atomic = rep.initiator_depth.min(c.offered_responder_resources);
                let moved = [QpState::Init, QpState::Rtr, QpState::Rts]
                    .into_iter()
                    .try_for_each(|s| qpc.modify_qp(now, c.local_qpn, s, &c.attr));
                if let Err(e) = moved {
                    self.fail_connect(now, c, id, MsgRef::Rep, e, qpc);
                    return;
                }
                let rtu = RtuRepr {
                    local_comm_id: id,
                    remote_comm_id: c.remote_comm_id,
                    private_data: [0; RTU_PRIVATE_LEN],
                };
                c.last = Some(self.send(src, c.tid, &CmMessage::Rtu(rtu)));
                c.state = State::Established;
                c.timer = None;
                self.stats.established_active += 1;
                self.events.push_back(CmEvent::Established {
                    id: CmId(id),
                    private_data: rep.private_data.to_vec(),
                });
            }
            State::Established if c.active => {
                // Our RTU was lost and the passive side resent its REP.
                self.stats.duplicates += 1;
                if let Some(m) = c.last {
                    self.resend(src, m);
                }
            }
            _ => self.stats.unmatched += 1,
        }
        self.put(id, c);
    }

    /// A QP transition failed while connecting: REJ the peer, QP to ERROR, tell the consumer.
    fn fail_connect(
        &mut self,
        now: Instant,
        mut c: Conn,
        id: u32,
        msg: MsgRef,
        e: QpError,
        qpc: &mut dyn QpControl,
    ) {
        let _ = qpc.modify_qp(now, c.local_qpn, QpState::Error, &c.attr);
        let rej = Self::rej(id, c.remote_comm_id, msg, RejReason::NoResources, &[], &[]);
        c.last = Some(self.send(c.remote_ip, c.tid, &rej));
        self.time_wait(now, &mut c);
        self.put(id, c);
        self.events.push_back(CmEvent::ConnectError {
            id: CmId(id),
            error: e,
        });
    }

    fn on_rtu(&mut self, now: Instant, src: IpAddr, rtu: &RtuRepr, qpc: &mut dyn QpControl) {
        let Some(id) = self.lookup(src, rtu.remote_comm_id, rtu.local_comm_id) else {
            self.stats.unmatched += 1;
            return;
        };
        match self.conns.get(&id).map(|c| (c.state, c.active)) {
            Some((State::RepSent | State::MraRepRcvd, false)) => {
                self.establish_passive(now, id, qpc)
            }
            Some((State::Established, false)) => self.stats.duplicates += 1,
            _ => self.stats.unmatched += 1,
        }
    }

    fn establish_passive(&mut self, now: Instant, id: u32, qpc: &mut dyn QpControl) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        if let Err(e) = qpc.modify_qp(now, c.local_qpn, QpState::Rts, &c.attr) {
            self.fail_connect(now, c, id, MsgRef::Other, e, qpc);
            return;
        }
        c.state = State::Established;
        c.timer = None;
        self.put(id, c);
        self.stats.established_passive += 1;
        self.events.push_back(CmEvent::Established {
            id: CmId(id),
            private_data: Vec::new(),
        });
    }

    fn on_rej(&mut self, src: IpAddr, rej: &RejRepr, qpc: &mut dyn QpControl, now: Instant) {
        let Some(id) = self.lookup(src, rej.remote_comm_id, rej.local_comm_id) else {
            self.stats.unmatched += 1;
            return;
        };
        let Some(c) = self.conns.get(&id) else { return };
        let event = CmEvent::Rejected {
            id: CmId(id),
            reason: rej.reason,
            private_data: rej.private_data.to_vec(),
        };
        match (c.state, c.active) {
            (State::ReqSent | State::MraReqRcvd, true) => {
                self.forget(id);
                self.events.push_back(event);
            }
            (State::RepSent | State::MraRepRcvd, false) => {
                let _ = qpc.modify_qp(now, c.local_qpn, QpState::Error, &c.attr);
                if let Some(mut c) = self.conns.remove(&id) {
                    c.last = None;
                    self.time_wait(now, &mut c);
                    self.put(id, c);
                }
                self.events.push_back(event);
            }
            _ => self.stats.unmatched += 1,
        }
    }

    fn on_mra(&mut self, now: Instant, src: IpAddr, mra: &MraRepr) {
        let Some(id) = self.lookup(src, mra.remote_comm_id, mra.local_comm_id) else {
            self.stats.unmatched += 1;
            return;
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let next = match (c.state, mra.msg_mraed) {
            (State::ReqSent | State::MraReqRcvd, MsgRef::Req) if c.active => State::MraReqRcvd,
            (State::RepSent | State::MraRepRcvd, MsgRef::Rep) if !c.active => State::MraRepRcvd,
            _ => {
                self.stats.unmatched += 1;
                return;
            }
        };
        c.state = next;
        c.timer = Some(
            now + cm_timeout(mra.service_timeout.min(PEER_CM_TIMEOUT_MAX))
                + cm_timeout(c.peer_timeout),
        );
        let deadlines = [c.timer, c.connect_deadline()];
        self.index_deadlines(id, deadlines);
    }

    fn on_dreq(
        &mut self,
        now: Instant,
        src: IpAddr,
        hdr: &MadHeader,
        dreq: &DreqRepr,
        qpc: &mut dyn QpControl,
    ) {
        let drep = |local: u32, remote: u32| {
            CmMessage::Drep(DrepRepr {
                local_comm_id: local,
                remote_comm_id: remote,
                private_data: [0; DREP_PRIVATE_LEN],
            })
        };
        let found = self
            .lookup(src, dreq.remote_comm_id, dreq.local_comm_id)
            .and_then(|id| self.conns.get(&id).map(|c| (id, c.clone())))
            .filter(|(_, c)| c.remote_comm_id != 0 && c.local_qpn == dreq.remote_qpn);
        let Some((id, mut c)) = found else {
            // Unknown connection: answer anyway so the peer stops retrying (as Linux does).
            self.stats.unmatched += 1;
            self.send(
                src,
                hdr.transaction_id,
                &drep(dreq.remote_comm_id, dreq.local_comm_id),
            );
            return;
        };
        match c.state {
            State::Established | State::RepSent | State::MraRepRcvd | State::DreqSent => {
                if c.state != State::DreqSent {
                    let _ = qpc.modify_qp(now, c.local_qpn, QpState::Error, &c.attr);
                }
                c.last = Some(self.send(src, hdr.transaction_id, &drep(id, c.remote_comm_id)));
                self.time_wait(now, &mut c);
                self.put(id, c);
                self.events
                    .push_back(CmEvent::Disconnected { id: CmId(id) });
            }
            State::TimeWait if c.last_attr() == Some(attr::DREP) => {
                self.stats.duplicates += 1;
                if let Some(m) = c.last {
                    self.resend(src, m);
                }
            }
            _ => self.stats.unmatched += 1,
        }
    }

    fn on_drep(&mut self, now: Instant, src: IpAddr, drep: &DrepRepr) {
        let Some(id) = self.lookup(src, drep.remote_comm_id, drep.local_comm_id) else {
            self.stats.unmatched += 1;
            return;
        };
        match self.conns.remove(&id) {
            Some(mut c) if c.state == State::DreqSent => {
                c.last = None;
                self.time_wait(now, &mut c);
                self.put(id, c);
                self.events
                    .push_back(CmEvent::Disconnected { id: CmId(id) });
            }
            Some(c) => {
                self.stats.unmatched += 1;
                self.put(id, c);
            }
            None => self.stats.unmatched += 1,
        }
    }

    // ---- time -----------------------------------------------------------------------------

    /// Retransmit what is due, give up where retries are exhausted, end time-waits.
    pub fn handle_timeout(&mut self, now: Instant, qpc: &mut dyn QpControl) {
        let mut due = Vec::new();
        {
            let mut heap = self.deadlines.borrow_mut();
            while let Some(&Reverse((t, id))) = heap.peek() {
                if t > now {
                    break;
                }
                heap.pop();
                if self.conns.get(&id).is_some_and(|c| c.has_deadline(t)) {
                    due.push(id);
                }
            }
        }
        // In connection order, each once (a deadline may be indexed more than once).
        due.sort_unstable();
        due.dedup();
        for id in due {
            let Some(mut c) = self.conns.remove(&id) else {
                continue;
            };
            if c.unanswered() && c.connect_deadline().is_some_and(|t| t <= now) {
                // A request the consumer left unanswered past the MRA's service timeout:
                // rejected (Timeout) and forgotten after time-wait, so it holds no state.
                self.answered(&c);
                self.stats.requests_expired += 1;
                c.deadline = None;
                self.reject_timed_out(now, id, &mut c);
                self.put(id, c);
                self.events.push_back(CmEvent::TimedOut { id: CmId(id) });
                continue;
            }
            if c.connect_deadline().is_some_and(|t| t <= now) {
                // dat_ep_connect(3DAT): the connect timeout expired before the REP.
                c.deadline = None;
                self.reject_timed_out(now, id, &mut c);
                self.put(id, c);
                self.events.push_back(CmEvent::TimedOut { id: CmId(id) });
                continue;
            }
            if c.state == State::TimeWait {
                self.put(id, c);
                self.forget(id);
                continue;
            }
            if c.retries < c.max_retries {
                c.retries += 1;
                self.stats.retransmits += 1;
                if let Some(m) = c.last {
                    self.resend(c.remote_ip, m);
                }
                c.state = match c.state {
                    State::MraReqRcvd => State::ReqSent,
                    State::MraRepRcvd => State::RepSent,
                    s => s,
                };
                c.timer = Some(now + cm_timeout(c.peer_timeout));
                self.put(id, c);
                continue;
            }
            match c.state {
                State::ReqSent | State::MraReqRcvd | State::RepSent | State::MraRepRcvd => {
                    if !c.active {
                        let _ = qpc.modify_qp(now, c.local_qpn, QpState::Error, &c.attr);
                    }
                    self.reject_timed_out(now, id, &mut c);
                    self.put(id, c);
                    self.events.push_back(CmEvent::Unreachable { id: CmId(id) });
                }
                State::DreqSent => {
                    c.last = None;
                    self.time_wait(now, &mut c);
                    self.put(id, c);
                    self.events
                        .push_back(CmEvent::Disconnected { id: CmId(id) });
                }
                _ => {
                    c.timer = None;
                    self.put(id, c);
                }
            }
        }
    }
}

fn copy_prefix(dst: &mut [u8], src: &[u8]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}
