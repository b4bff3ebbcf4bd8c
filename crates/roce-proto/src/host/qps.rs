//! The QP table of a host: QP and SRQ life cycle, posts, completions and events, and the
//! work lists that keep every call from scanning all QPs (see the module documentation).

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};

/// How a QP's receive buffers are accounted (seeds 002/004).
#[derive(Debug)]
pub(super) enum RecvAcct {
    /// Own receive queue: a buffer is allocated to the EP when it is posted.
    Own(EpRecvAccount),
    /// On a shared SRQ: allocated when the QP takes it from the pool.
    Srq(SrqPort),
}

impl RecvAcct {
    pub(super) fn handle(&self) -> EpRecvHandle {
        match self {
            RecvAcct::Own(a) => a.handle(),
            RecvAcct::Srq(p) => p.handle(),
        }
    }

    /// A receive completion was generated (in completion order).
    pub(super) fn completed(&mut self, wc: &WorkCompletion) {
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
pub(super) struct QpEntry {
    pub(super) qp: Qp,
    pub(super) recv: RecvAcct,
    /// On `cq_dirty`.
    pub(super) cq_dirty: bool,
    /// On `tx_ready` or `arp_wait`.
    pub(super) tx_queued: bool,
    /// The path of its packets, while `Net::route_valid` says it holds.
    pub(super) route: Option<Route>,
    /// Peer IP once connected (or connecting).
    pub(super) peer: Option<IpAddr>,
    /// Where the QP's count of send WRs completed without a completion goes
    /// ([`Host::count_unsignaled_into`]).
    pub(super) unsignaled_sink: Option<Arc<AtomicU64>>,
}

/// Which QPs did something since they were last looked at (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Work {
    pub(super) cq_dirty: Vec<u32>,
    pub(super) tx_ready: VecDeque<u32>,
    pub(super) arp_wait: Vec<u32>,
    /// QPs the CM moved to ERROR: their last acknowledgements leave before the CM's next MAD
    /// (the DREQ), so the peer sees its sends acknowledged before it tears down and does not
    /// flush sends that completed here.
    pub(super) before_cm: Vec<u32>,
    /// At or before the earliest QP timer (`None`: no QP timer armed).
    pub(super) qp_deadline: Option<Instant>,
}

impl Work {
    /// QP `qpn` changed: drain its completions and ask it for packets at the next chance.
    pub(super) fn touch(&mut self, qpn: u32, e: &mut QpEntry) {
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
    pub(super) fn ran(&mut self, qpn: u32, e: &mut QpEntry) {
        if let Some(sink) = &e.unsignaled_sink {
            // This shard is the only writer: a store when the count moved, none otherwise.
            let n = e.qp.unsignaled_done();
            if sink.load(Ordering::Relaxed) != n {
                sink.store(n, Ordering::Release);
            }
        }
        if !e.cq_dirty
            && (e.qp.has_completion()
                || e.qp.has_error_entry()
                || matches!(e.recv, RecvAcct::Srq(_)))
        {
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
    pub(super) fn polled(&mut self, qpn: u32, e: &mut QpEntry) {
        if !e.cq_dirty && (e.qp.has_completion() || e.qp.has_error_entry()) {
            e.cq_dirty = true;
            self.cq_dirty.push(qpn);
        }
    }

    /// `e`'s timer may be earlier now.
    pub(super) fn timer_changed(&mut self, e: &QpEntry) {
        if let Some(t) = e.qp.poll_timeout() {
            if self.qp_deadline.is_none_or(|d| t < d) {
                self.qp_deadline = Some(t);
            }
        }
    }

    /// Room for one more QP on every list, so pushes never allocate on the fast path.
    pub(super) fn reserve(&mut self, qps: usize) {
        self.cq_dirty
            .reserve(qps.saturating_sub(self.cq_dirty.len()));
        self.tx_ready
            .reserve(qps.saturating_sub(self.tx_ready.len()));
        self.arp_wait
            .reserve(qps.saturating_sub(self.arp_wait.len()));
    }

    /// The neighbour layer changed: QPs waiting for a MAC try again.
    pub(super) fn neighbours_changed(&mut self) {
        self.tx_ready.extend(self.arp_wait.drain(..));
    }
}

/// The QP table as the CM sees it: every QP the CM modifies is touched.
pub(super) struct QpTable<'a> {
    pub(super) qps: &'a mut BTreeMap<u32, QpEntry>,
    pub(super) work: &'a mut Work,
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

impl<M: Memory> Host<M> {
    /// Creates an RC QP and moves it to INIT, so receives can be posted before connecting.
    pub fn create_qp(&mut self, now: Instant, opts: QpOptions) -> Result<u32, HostError> {
        self.create_qp_in_space(now, opts, 0, 1)
    }

    /// Creates an RC QP (in INIT) whose QPN is in the space of shard `shard` of `shards`: a
    /// free number `n` with `n % shards == shard` (the runtime's QPN-to-shard rule), chosen as
    /// the host's [`QpnPolicy`] says.
    pub fn create_qp_in_space(
        &mut self,
        now: Instant,
        opts: QpOptions,
        shard: u32,
        shards: u32,
    ) -> Result<u32, HostError> {
        let qps = &self.qps;
        let qpn = self
            .qpns
            .allocate(shard, shards, |n| qps.contains_key(&n))
            .ok_or(HostError::NoQpn)?;
        self.create_qp_numbered(now, qpn, opts)
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
        qp.set_congestion(&self.cc);
        let attr = QpAttr {
            access: opts.access,
            ..QpAttr::default()
        };
        qp.modify(now, QpState::Init, &attr)?;
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
                unsignaled_sink: None,
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
    pub fn set_peer(&mut self, qpn: u32, ip: IpAddr) -> Result<(), HostError> {
        let e = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        e.peer = Some(ip);
        Ok(())
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

    /// Every QP of this host in QPN order (in an engine, shard 0's also include the CM's
    /// stand-ins of other shards' QPs), with its peer's address once it has one.
    pub fn qps(&self) -> impl Iterator<Item = (&Qp, Option<IpAddr>)> + '_ {
        self.qps.values().map(|e| (&e.qp, e.peer))
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
        self.qpns.release(qpn);
        self.net.clear_qp_traffic_class(qpn);
        if let Some(id) = self.conn_of_qp.remove(&qpn) {
            self.qp_of_conn.remove(&id);
        }
        Ok(())
    }

    /// The DSCP of QP `qpn`'s packets (an EP's DAT QoS; ECN stays the port's), or `None`:
    /// the port's.
    pub fn set_qp_dscp(&mut self, qpn: u32, dscp: Option<u8>) -> Result<(), HostError> {
        if !self.qps.contains_key(&qpn) {
            return Err(HostError::UnknownQp);
        }
        let ecn = self.net.config().ecn;
        match dscp.map(|d| crate::net::TrafficClass::new(d, ecn)) {
            Some(Ok(tc)) => self.net.set_qp_traffic_class(qpn, tc),
            Some(Err(_)) => return Err(HostError::Qp(QpError::InvalidArgument)),
            None => self.net.clear_qp_traffic_class(qpn),
        }
        Ok(())
    }

    /// Keeps `sink` equal to QP `qpn`'s count of send WRs completed successfully without a
    /// completion ([`Qp::unsignaled_done`]), updated whenever the QP runs: a consumer counting
    /// its queue's free slots (the DAT EP) then needs no completion per unsignaled WR.
    pub fn count_unsignaled_into(
        &mut self,
        qpn: u32,
        sink: Arc<AtomicU64>,
    ) -> Result<(), HostError> {
        let e = self.qps.get_mut(&qpn).ok_or(HostError::UnknownQp)?;
        sink.store(e.qp.unsignaled_done(), Ordering::Release);
        e.unsignaled_sink = Some(sink);
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
    pub(super) fn collect(&mut self) {
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
    pub(super) fn collect_changes(&mut self) {
        for i in 0..self.work.cq_dirty.len() {
            let qpn = self.work.cq_dirty[i];
            let Some(e) = self.qps.get_mut(&qpn) else {
                continue;
            };
            e.cq_dirty = false;
            self.stats.qps_collected += 1;
            if let Some(from) = e.qp.take_error_entry() {
                super::event_log::qp_error(&mut self.log_limit, self.clock, qpn, from);
            }
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
            super::event_log::net_event(&mut self.log_limit, self.clock, &ev);
            if let NetEvent::IcmpUnreachable { ip } = ev {
                self.cm.destinations_unresolvable(|dst| dst == ip);
                self.cm_ran = true;
            }
            if let NetEvent::Unresolvable { ip } = ev {
                if self.request_gate.forget(ip) {
                    self.stats.rx_requests_unverified += 1;
                }
                // `ip` is a next hop: the peer itself, or the router before the peers behind it.
                let net = &self.net;
                self.cm
                    .destinations_unresolvable(|dst| net.next_hop(dst) == Ok(ip));
                self.cm_ran = true;
            }
            self.events.push_back(HostEvent::Net(ev));
        }
        if core::mem::take(&mut self.cm_ran) {
            while let Some(ev) = self.cm.poll_event() {
                super::event_log::cm_event(&mut self.log_limit, self.clock, &ev);
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
}

/// Queues a watermark event of QP `qpn` when one fired.
pub(super) fn push_watermark(events: &mut VecDeque<HostEvent>, qpn: u32, ev: WatermarkEvents) {
    if ev.any() {
        events.push_back(HostEvent::EpWatermark {
            qpn,
            soft: ev.soft,
            hard: ev.hard,
        });
    }
}
