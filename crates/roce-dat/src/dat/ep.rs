//! Endpoints (dat_ep_create, dat_ep_connect, dat_ep_disconnect, dat_ep_reset, dat_ep_free,
//! dat_ep_post_*, dat_ep_get_status): an RC QP of the engine with the DAT state machine of the
//! seed man pages. Created UNCONNECTED (dat_ep_create(3DAT)); CONNECTED once `Established` is
//! dequeued from its connection EVD; DISCONNECTED after a disconnect, a rejection, a broken
//! connection or an unreachable peer; `reset` brings it back to UNCONNECTED on a fresh QP. A
//! call that the current state does not allow returns DAT_INVALID_STATE naming the state.
//! `dat_ep_modify` is in [`ep_modify`](super::ep_modify), the receive watermarks and
//! `dat_ep_recv_query` in [`ep_recv`](super::ep_recv).

use super::conn_qual::ConnQual;
use super::context::ConsumerContext;
use super::counters::EpCounters;
use super::ep_attr::{CompletionFlags, EpAttr};
use super::error::{AccessKind, DatError, HandleKind};
use super::evd::{ConnectionEventKind, Evd, EvdInner};
use super::evd_streams::Stream;
use super::ia::{Ia, IaInner};
use super::limits;
use super::pz::{Pz, PzInner};
use super::srq::{Srq, SrqInner};
use super::triplet::{LmrTriplet, RmrTriplet};
use crate::cm::ConnectParams;
use crate::engine::runtime::{shard_of_qpn, DtoCounters, QpRoute};
use crate::host::QpOptions;
use crate::mem::access::Access;
use crate::srq::EpRecvHandle;
use crate::transport::qp::{Qp, QpStats};
use crate::transport::snapshot::QpSnapshot;
use crate::transport::types::{RecvWr, SendOp, SendWr, Sge, MAX_SGE};
use crate::wire::psn::Psn;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

pub use super::ep_attr::EpParamMask;
pub use super::ep_state::EpState;

/// Mutable part of an EP.
pub(crate) struct EpCore {
    pub state: EpState,
    pub qpn: u32,
    pub shard: usize,
    pub posted_requests: u64,
    pub posted_recvs: u64,
    pub counters: Arc<DtoCounters>,
    pub pz: Arc<PzInner>,
    pub recv_evd: Option<Arc<EvdInner>>,
    pub request_evd: Option<Arc<EvdInner>>,
    pub connect_evd: Option<Arc<EvdInner>>,
    pub attr: EpAttr,
    /// Receive accounting of the current QP (seeds 002/004).
    pub recv: Option<EpRecvHandle>,
    /// A receive was ever posted (Recv Completion Flags are then fixed, dat_ep_modify(3DAT)).
    pub recvs_posted: bool,
    /// Remote address and connection qualifier once connecting.
    pub remote: Option<(IpAddr, u16)>,
    /// Posts and connections counted here; receives are counted in `counters`.
    pub posts: EpCounters,
    /// The reading of the counters at the last reset (dat_query_counters).
    pub counters_base: EpCounters,
}

pub(crate) struct EpInner {
    pub ia: Arc<IaInner>,
    pub srq: Option<Arc<SrqInner>>,
    pub core: Mutex<EpCore>,
    pub context: ConsumerContext,
}

/// An endpoint.
pub struct Ep {
    pub(crate) inner: Arc<EpInner>,
}

pub(crate) fn state_error(state: EpState) -> DatError {
    DatError::EpState { state }
}

/// Attaches `ep`'s completion streams to its EVDs (all or nothing); the error names the EVD
/// argument (recv_evd is argument 3 of dat_ep_create, request_evd argument 4).
pub(crate) fn attach_streams(
    recv: Option<&Arc<EvdInner>>,
    request: Option<&Arc<EvdInner>>,
    attr: &EpAttr,
) -> Result<(), DatError> {
    if let Some(e) = recv {
        e.lock_streams()
            .attach(e.flags, Stream::Recv, attr.recv_completion_flags)
            .map_err(|what| DatError::InvalidArg { arg: 3, what })?;
    }
    if let Some(e) = request {
        let r = e
            .lock_streams()
            .attach(e.flags, Stream::Request, attr.request_completion_flags);
        if let Err(what) = r {
            if let Some(r) = recv {
                r.lock_streams().detach(Stream::Recv);
            }
            return Err(DatError::InvalidArg { arg: 4, what });
        }
    }
    Ok(())
}

pub(crate) fn detach_streams(recv: Option<&Arc<EvdInner>>, request: Option<&Arc<EvdInner>>) {
    if let Some(e) = recv {
        e.lock_streams().detach(Stream::Recv);
    }
    if let Some(e) = request {
        e.lock_streams().detach(Stream::Request);
    }
}

/// Attributes within the limits `dat_ia_query` reports (dat_ep_create(3DAT)); `arg` is the
/// attribute argument's number in the C call.
pub(crate) fn check_attr(attr: &EpAttr, srq: bool, arg: u8) -> Result<(), DatError> {
    let bad = |what| Err(DatError::InvalidArg { arg, what });
    let sge = MAX_SGE as u32;
    if attr.max_recv_iov > sge
        || attr.max_request_iov > sge
        || attr.max_rdma_read_iov > sge
        || attr.max_rdma_write_iov > sge
    {
        return bad("more IOV segments than the IA supports");
    }
    if attr.max_request_dtos == 0
        || (!srq && attr.max_recv_dtos == 0)
        || attr.max_request_dtos > limits::MAX_DTO_PER_EP
        || attr.max_recv_dtos > limits::MAX_DTO_PER_EP
    {
        return bad("DTO counts outside 1..=max_dto_per_ep");
    }
    if attr.max_message_size > crate::transport::MAX_MSG_SIZE
        || attr.max_rdma_size > crate::transport::MAX_MSG_SIZE
    {
        return bad("sizes above the IA's maximum");
    }
    if u32::from(attr.max_rdma_read_in) > limits::MAX_RDMA_READ_PER_EP
        || u32::from(attr.max_rdma_read_out) > limits::MAX_RDMA_READ_PER_EP
    {
        return bad("RDMA reads above the IA's maximum");
    }
    if !attr.flags_valid() {
        return bad("completion flags the EP cannot take");
    }
    Ok(())
}

impl EpInner {
    pub(crate) fn lock(&self) -> MutexGuard<'_, EpCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Where the QP's events go: the EP's EVDs, and its IA's async EVD.
    pub(crate) fn route(&self, c: &EpCore) -> QpRoute {
        QpRoute {
            async_events: Some(self.ia.async_sink.clone()),
            request: c.request_evd.as_ref().map(|e| e.sink.clone()),
            recv: c.recv_evd.as_ref().map(|e| e.sink.clone()),
            conn: c.connect_evd.as_ref().map(|e| e.sink.clone()),
            counters: Some(c.counters.clone()),
        }
    }

    fn qp_options(&self, c: &EpCore) -> QpOptions {
        QpOptions {
            pd: c.pz.pz.id(),
            sq_depth: c.attr.max_request_dtos,
            rq_depth: c.attr.max_recv_dtos.max(1),
            srq: self.srq.as_ref().map(|s| s.srqn),
            access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            // A post with DAT_COMPLETION_SUPPRESS_FLAG is unsignaled: it completes without a
            // completion, and the QP counts it (`DtoCounters::unsignaled`) for the slots.
            sig_all: false,
        }
    }

    /// Creates the QP of this EP on `shard` and fetches its receive accounting.
    fn new_qp(self: &Arc<Self>, c: &mut EpCore, shard: usize) -> Result<(), DatError> {
        let counters = Arc::new(DtoCounters::default());
        c.counters = counters;
        let qpn = self
            .ia
            .engine
            .create_qp(shard, self.qp_options(c), self.route(c))?;
        c.qpn = qpn;
        c.shard = shard;
        self.apply_qos(c, c.attr.qos)?;
        c.recv = self
            .ia
            .engine
            .with_host(shard, move |h| h.ep_recv_handle(qpn))?;
        c.posted_requests = 0;
        c.posted_recvs = 0;
        self.ia
            .lock_eps()
            .insert(qpn, Arc::downgrade(self) as Weak<EpInner>);
        Ok(())
    }

    /// Gives the QP of `c` the DSCP of `qos` (`Qos::dscp`; best effort: the port's).
    pub(crate) fn apply_qos(&self, c: &EpCore, qos: super::Qos) -> Result<(), DatError> {
        let qpn = c.qpn;
        self.ia
            .engine
            .with_host(c.shard, move |h| h.set_qp_dscp(qpn, qos.dscp()))?
            .map_err(|_| DatError::Internal("the EP's QP is gone".into()))
    }

    /// A connection event was dequeued for QP `qpn` (a stale QPN after a reset is ignored).
    pub(crate) fn on_connection_event(&self, qpn: u32, kind: ConnectionEventKind) {
        let mut c = self.lock();
        if c.qpn != qpn {
            return;
        }
        c.state = match (c.state, kind) {
            (
                EpState::ActiveConnectionPending
                | EpState::PassiveConnectionPending
                | EpState::TentativeConnectionPending
                | EpState::CompletionPending,
                ConnectionEventKind::Established,
            ) => EpState::Connected,
            (_, ConnectionEventKind::Established) => c.state,
            _ => EpState::Disconnected,
        };
    }

    /// Passive side: `dat_cr_accept` with this EP (UNCONNECTED, or the EP the request arrived
    /// for: PASSIVE/TENTATIVE CONNECTION PENDING).
    pub(crate) fn accept_qpn(&self) -> Result<(u32, bool), DatError> {
        let c = self.lock();
        if !matches!(
            c.state,
            EpState::Unconnected
                | EpState::PassiveConnectionPending
                | EpState::TentativeConnectionPending
        ) {
            return Err(state_error(c.state));
        }
        Ok((c.qpn, self.srq.is_some()))
    }

    pub(crate) fn ia(&self) -> &Arc<IaInner> {
        &self.ia
    }
}

impl Drop for EpInner {
    fn drop(&mut self) {
        self.ia.objects.ep.freed();
        let c = self.core.get_mut().unwrap_or_else(|p| p.into_inner());
        if matches!(
            c.state,
            EpState::Connected
                | EpState::ActiveConnectionPending
                | EpState::CompletionPending
                | EpState::DisconnectPending
        ) {
            // dat_ep_free of a connected EP: abrupt disconnect.
            let _ = self.ia.engine.disconnect(c.qpn);
        }
        let _ = self.ia.engine.destroy_qp(c.qpn);
        self.ia.lock_eps().remove(&c.qpn);
        detach_streams(c.recv_evd.as_ref(), c.request_evd.as_ref());
    }
}

/// The completion flags of one post (dat_ep_post_*(3DAT) `completion_flags`).
pub(crate) struct PostFlags {
    pub signaled: bool,
    pub solicited: bool,
    pub fence: bool,
}

impl Ep {
    /// Creates an EP in UNCONNECTED on `pz` with its receive, request and connection EVDs
    /// (`None` = DAT_HANDLE_NULL) and attributes (`None` = provider defaults; zeros as
    /// [`EpAttr::with_zeros_resolved`] reads them); with an SRQ its
    /// receives come from the SRQ and it lives on the SRQ's shard.
    pub fn create(
        ia: &Ia,
        pz: &Pz,
        recv_evd: Option<&Evd>,
        request_evd: Option<&Evd>,
        connect_evd: Option<&Evd>,
        srq: Option<&Srq>,
        attr: Option<EpAttr>,
    ) -> Result<Ep, DatError> {
        Self::create_in(&ia.inner, pz, recv_evd, request_evd, connect_evd, srq, attr)
    }

    /// [`Ep::create`] on the IA `ia`.
    pub(crate) fn create_in(
        ia: &Arc<IaInner>,
        pz: &Pz,
        recv_evd: Option<&Evd>,
        request_evd: Option<&Evd>,
        connect_evd: Option<&Evd>,
        srq: Option<&Srq>,
        attr: Option<EpAttr>,
    ) -> Result<Ep, DatError> {
        let attr_arg = if srq.is_some() { 7 } else { 6 };
        let attr = attr.unwrap_or_default().with_zeros_resolved();
        if !Arc::ptr_eq(&pz.inner.ia, ia) {
            return Err(DatError::InvalidHandleOf {
                kind: HandleKind::Pz,
                what: "PZ of another IA",
            });
        }
        for (evd, kind) in [
            (recv_evd, HandleKind::EvdRecv),
            (request_evd, HandleKind::EvdRequest),
            (connect_evd, HandleKind::EvdConn),
        ] {
            if let Some(e) = evd {
                if !Arc::ptr_eq(&e.inner.ia, ia) {
                    return Err(DatError::InvalidHandleOf {
                        kind,
                        what: "EVD of another IA",
                    });
                }
            }
        }
        if let Some(s) = srq {
            if !Arc::ptr_eq(&s.inner.ia, ia) {
                return Err(DatError::InvalidHandleOf {
                    kind: HandleKind::Srq,
                    what: "SRQ of another IA",
                });
            }
        }
        if let Some(e) = connect_evd {
            if !e.flags().contains(super::evd_flags::EvdFlags::CONNECTION) {
                return Err(DatError::InvalidArg {
                    arg: 5,
                    what: "connect EVD without CONNECTION flag",
                });
            }
        }
        if let Some(s) = srq {
            if !Arc::ptr_eq(&s.inner.pz, &pz.inner) {
                return Err(DatError::InvalidArg {
                    arg: 6,
                    what: "SRQ of another PZ",
                });
            }
        }
        check_attr(&attr, srq.is_some(), attr_arg)?;
        if ia.lock_eps().len() >= limits::MAX_EPS as usize {
            return Err(DatError::InsufficientResources(
                "the IA's max_eps EPs exist".into(),
            ));
        }
        let recv_evd = recv_evd.map(|e| e.inner.clone());
        let request_evd = request_evd.map(|e| e.inner.clone());
        attach_streams(recv_evd.as_ref(), request_evd.as_ref(), &attr)?;
        ia.objects.ep.created();
        let inner = Arc::new(EpInner {
            ia: ia.clone(),
            srq: srq.map(|s| s.inner.clone()),
            core: Mutex::new(EpCore {
                state: EpState::Unconnected,
                qpn: 0,
                shard: 0,
                posted_requests: 0,
                posted_recvs: 0,
                counters: Arc::default(),
                pz: pz.inner.clone(),
                recv_evd,
                request_evd,
                connect_evd: connect_evd.map(|e| e.inner.clone()),
                attr,
                recv: None,
                recvs_posted: false,
                remote: None,
                posts: EpCounters::default(),
                counters_base: EpCounters::default(),
            }),
            context: ConsumerContext::default(),
        });
        if let Some(s) = &inner.srq {
            s.users
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(Arc::downgrade(&inner));
        }
        let shard = inner
            .srq
            .as_ref()
            .map_or_else(|| ia.next_shard(), |s| s.shard);
        {
            let mut c = inner.lock();
            if let Err(e) = inner.new_qp(&mut c, shard) {
                // No QP: nothing to destroy; the drop detaches the streams.
                c.state = EpState::Unconnected;
                drop(c);
                return Err(e);
            }
        }
        Ok(Ep { inner })
    }

    /// The QPN (the EP's identity in events).
    pub fn qpn(&self) -> u32 {
        self.inner.lock().qpn
    }

    /// The shard the EP lives on.
    pub fn shard(&self) -> usize {
        shard_of_qpn(self.qpn(), self.inner.ia.engine.shards())
    }

    /// The transport counters of the EP's QP: packets, retransmissions, local ACK timeouts
    /// (tail probes among them), NAKs by kind, drops; what telemetry's `/roce/qp,<qpn>` reports.
    pub fn transport_stats(&self) -> Result<QpStats, DatError> {
        self.with_qp(|q| *q.stats())
    }

    /// Where the EP's QP stands now: PSNs outstanding, retry budgets, timers, queued
    /// responses (`QpSnapshot`); what a program that finds the connection stalled reports.
    pub fn transport_snapshot(&self) -> Result<QpSnapshot, DatError> {
        self.with_qp(Qp::snapshot)
    }

    /// `f` of the EP's QP, on its shard.
    fn with_qp<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Qp) -> T + Send + 'static,
    ) -> Result<T, DatError> {
        let (qpn, shard) = {
            let c = self.inner.lock();
            (c.qpn, c.shard)
        };
        self.inner
            .ia
            .engine
            .with_host(shard, move |h| h.qp(qpn).map(f))?
            .ok_or_else(|| DatError::InvalidState(format!("QP {qpn:#x} is gone")))
    }

    /// The attributes.
    pub fn attr(&self) -> EpAttr {
        self.inner.lock().attr
    }

    /// The PZ's number.
    pub fn pz_id(&self) -> u32 {
        self.inner.lock().pz.pz.id()
    }

    /// The remote IA address and connection qualifier (once connecting).
    pub fn remote(&self) -> Option<(IpAddr, u16)> {
        self.inner.lock().remote
    }

    /// dat_ep_get_status(3DAT): the state, `recv_idle` (TRUE: no receive DTO outstanding or
    /// in progress at the EP) and `request_idle` (TRUE: no send, RDMA or RMR bind outstanding
    /// or in progress). A snapshot: completions count when the shard generates them. For an
    /// EP on an SRQ the receives outstanding at the EP are the buffers it took from the SRQ and
    /// has not completed yet (seed 004's allocation rule).
    pub fn get_status(&self) -> (EpState, bool, bool) {
        let c = self.inner.lock();
        let requests = c.counters.requests_done();
        let recv_idle = if self.inner.srq.is_some() {
            c.recv
                .as_ref()
                .is_none_or(|h| h.recv_query().nbufs_allocated == 0)
        } else {
            c.counters.recvs.load(Ordering::Acquire) >= c.posted_recvs
        };
        (c.state, recv_idle, requests >= c.posted_requests)
    }

    /// dat_ep_connect: requests a connection to `conn_qual` at `remote`; the outcome arrives
    /// on the connection EVD (Established, PeerRejected, Unreachable).
    pub fn connect(
        &self,
        remote: impl Into<IpAddr>,
        conn_qual: impl Into<ConnQual>,
        private_data: &[u8],
    ) -> Result<(), DatError> {
        self.connect_with_timeout(remote, conn_qual, private_data, None)
    }

    /// dat_ep_connect with its `timeout`: without an answer by then the connection EVD gets
    /// TimedOut (DAT_CONNECTION_EVENT_TIMED_OUT) and the EP is DISCONNECTED. `None`: the
    /// CM's retries decide (Unreachable). Private data over
    /// [`MAX_PRIVATE_DATA_SIZE`](super::ia_attr::MAX_PRIVATE_DATA_SIZE) is argument 5. The
    /// request carries the qualifier's CM port ([`ConnQual::port`]).
    pub fn connect_with_timeout(
        &self,
        remote: impl Into<IpAddr>,
        conn_qual: impl Into<ConnQual>,
        private_data: &[u8],
        timeout: Option<std::time::Duration>,
    ) -> Result<(), DatError> {
        let remote = remote.into();
        let conn_qual = conn_qual.into().port();
        let mut c = self.inner.lock();
        if c.connect_evd.is_none() {
            return Err(DatError::InvalidParameter("EP without connection EVD"));
        }
        if c.state != EpState::Unconnected {
            return Err(state_error(c.state));
        }
        super::limits::check_private_data(private_data, 5)?;
        let ia = &self.inner.ia;
        let mut p = ConnectParams::new(remote, conn_qual, c.qpn, Psn::new(ia.next_psn()));
        p.src_port = ia.next_src_port();
        p.pmtu = ia.pmtu;
        p.responder_resources = c.attr.max_rdma_read_in;
        p.initiator_depth = c.attr.max_rdma_read_out;
        p.srq = self.inner.srq.is_some();
        p.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        p.private_data = private_data.to_vec();
        p.timeout = timeout;
        ia.engine.connect(p)?;
        c.state = EpState::ActiveConnectionPending;
        c.remote = Some((remote, conn_qual));
        c.posts.connect += 1;
        Ok(())
    }

    /// The QoS of a connection not yet requested (dat_ep_connect(3DAT)'s and
    /// dat_ep_dup_connect(3DAT)'s `qos`): as dat_ep_modify(3DAT) changes it, allowed until a
    /// connection is requested or accepted (else the EP's state error); the same QoS is no
    /// change in any state.
    pub fn set_qos(&self, qos: super::Qos) -> Result<(), DatError> {
        let mut c = self.inner.lock();
        if c.attr.qos == qos {
            return Ok(());
        }
        let states =
            super::ep_modifiable::modifiable_states(super::EpParamMask::QOS).unwrap_or(&[]);
        if !states.contains(&c.state) {
            return Err(state_error(c.state));
        }
        self.inner.apply_qos(&c, qos)?;
        c.attr.qos = qos;
        Ok(())
    }

    /// dat_ep_disconnect: tears the connection down; DISCONNECTED follows on the connection
    /// EVD and outstanding DTOs flush. A disconnected EP answers Ok.
    pub fn disconnect(&self) -> Result<(), DatError> {
        let mut c = self.inner.lock();
        match c.state {
            EpState::Disconnected | EpState::DisconnectPending => Ok(()),
            EpState::Connected | EpState::ActiveConnectionPending | EpState::CompletionPending => {
                use crate::engine::runtime::EngineError;
                use crate::host::HostError;
                match self.inner.ia.engine.disconnect(c.qpn) {
                    Ok(()) => {}
                    // The peer tore the connection down and the CM is done with it; its
                    // DISCONNECTED waits on the connection EVD (the EP's state follows the
                    // events the consumer dequeues). Disconnecting a disconnected EP is no
                    // error, as in the OFA providers.
                    Err(EngineError::Host(
                        HostError::UnknownQp | HostError::Cm(crate::cm::CmError::UnknownId),
                    )) => {}
                    Err(e) => return Err(e.into()),
                }
                c.state = EpState::DisconnectPending;
                c.posts.disconnect += 1;
                Ok(())
            }
            s => Err(state_error(s)),
        }
    }

    /// dat_ep_dup_connect: connects to the same remote IA address and connection qualifier
    /// as `dup` (an EP that is connected or connecting; else DAT_INVALID_PARAMETER, argument 2).
    pub fn dup_connect(&self, dup: &Ep, private_data: &[u8]) -> Result<(), DatError> {
        self.dup_connect_with_timeout(dup, private_data, None)
    }

    /// dat_ep_dup_connect with its `timeout` (as [`Ep::connect_with_timeout`]).
    pub fn dup_connect_with_timeout(
        &self,
        dup: &Ep,
        private_data: &[u8],
        timeout: Option<std::time::Duration>,
    ) -> Result<(), DatError> {
        if !Arc::ptr_eq(&dup.inner.ia, &self.inner.ia) {
            // The second handle (DAT_INVALID_HANDLE2), as for a dup_ep_handle that is no EP.
            return Err(DatError::InvalidHandleOf {
                kind: super::error::HandleKind::Arg(2),
                what: "dup EP of another IA",
            });
        }
        super::limits::check_private_data(private_data, 4)?;
        let Some((remote, qual)) = dup.remote() else {
            return Err(DatError::InvalidArg {
                arg: 2,
                what: "the dup EP has no connection to copy",
            });
        };
        self.connect_with_timeout(remote, qual, private_data, timeout)
    }

    /// dat_ep_disconnect with DAT_CLOSE_GRACEFUL_FLAG: waits until every request DTO
    /// outstanding at the EP has completed (driving inline progress meanwhile), then
    /// disconnects, so those requests complete instead of flushing. Receives still flush.
    /// `disconnect` is the abrupt form (DAT_CLOSE_ABRUPT_FLAG).
    pub fn disconnect_graceful(&self) -> Result<(), DatError> {
        loop {
            let (state, _, request_idle) = self.get_status();
            if request_idle || state != EpState::Connected {
                break;
            }
            if !self.inner.ia.engine.progress() {
                std::thread::yield_now();
            }
        }
        self.disconnect()
    }

    /// dat_ep_reset: a DISCONNECTED EP goes back to UNCONNECTED on a fresh QP.
    pub fn reset(&self) -> Result<(), DatError> {
        let mut c = self.inner.lock();
        match c.state {
            EpState::Unconnected => return Ok(()),
            EpState::Disconnected => {}
            s => return Err(state_error(s)),
        }
        let old = c.qpn;
        let shard = c.shard;
        self.inner.new_qp(&mut c, shard)?;
        let ia = &self.inner.ia;
        let _ = ia.engine.destroy_qp(old);
        ia.lock_eps().remove(&old);
        c.state = EpState::Unconnected;
        c.remote = None;
        Ok(())
    }

    /// Segments of one post: at most `max_iov`, each naming an LMR of the EP's PZ
    /// (DAT_PROTECTION_VIOLATION otherwise: dat_ep_modify(3DAT), a PZ change fails receives
    /// whose LMRs are in another PZ).
    fn sgl(
        c: &EpCore,
        mem: &crate::mem::MrTable,
        local: &[LmrTriplet],
        max_iov: u32,
        access: AccessKind,
    ) -> Result<(crate::transport::types::SgList, u64), DatError> {
        if local.len() > max_iov as usize {
            return Err(DatError::InvalidArg {
                arg: 2,
                what: "more segments than max IOV",
            });
        }
        let pz = c.pz.pz;
        let mut total = 0u64;
        let mut sgl = crate::transport::types::SgList::with_capacity(local.len());
        for t in local {
            if t.segment_length > 0 && mem.local_pz(t.lmr_context).is_some_and(|p| p != pz) {
                return Err(DatError::ProtectionViolation(access));
            }
            total += u64::from(t.segment_length);
            sgl.push(Sge {
                addr: t.virtual_address,
                len: t.segment_length,
                lkey: t.lmr_context,
            });
        }
        Ok((sgl, total))
    }

    /// Checks a post's completion flags (`arg`: their argument number) against the EP's
    /// request completion flags attribute.
    fn post_flags(c: &EpCore, flags: CompletionFlags, arg: u8) -> Result<PostFlags, DatError> {
        if flags.contains(CompletionFlags::UNSIGNALLED)
            && !c
                .attr
                .request_completion_flags
                .contains(CompletionFlags::UNSIGNALLED)
        {
            return Err(DatError::InvalidArg {
                arg,
                what: "UNSIGNALLED needs the EP's UNSIGNALLED request completion flag",
            });
        }
        Ok(PostFlags {
            signaled: !flags.intersects(CompletionFlags::SUPPRESS | CompletionFlags::UNSIGNALLED),
            solicited: flags.contains(CompletionFlags::SOLICITED_WAIT),
            fence: flags.contains(CompletionFlags::BARRIER_FENCE),
        })
    }

    pub(super) fn post_request(
        &self,
        op: SendOp,
        local: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
        flags_arg: u8,
    ) -> Result<(), DatError> {
        let mut c = self.inner.lock();
        let (max_iov, access) = match op {
            SendOp::Read { .. } => (c.attr.max_rdma_read_iov, AccessKind::Write),
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => {
                (c.attr.max_rdma_write_iov, AccessKind::Read)
            }
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => (1, AccessKind::Write),
            _ => (c.attr.max_request_iov, AccessKind::Read),
        };
        let max_iov = max_iov.min(c.attr.max_request_iov);
        let (sgl, total) = Self::sgl(&c, &self.inner.ia.mem, local, max_iov, access)?;
        // The EP's max_message_size / max_rdma_size are the consumer's hints: like the OFA
        // reference providers, a post is refused only beyond what the transport carries
        // (dtest asks for 64 KiB RDMA and writes its whole buffer).
        if total > u64::from(crate::transport::MAX_MSG_SIZE) {
            return Err(DatError::LengthError(
                "message larger than the transport carries",
            ));
        }
        let pf = Self::post_flags(&c, flags, flags_arg)?;
        if c.state != EpState::Connected {
            return Err(state_error(c.state));
        }
        let done = c.counters.requests_done();
        if c.posted_requests.saturating_sub(done) >= u64::from(c.attr.max_request_dtos) {
            return Err(DatError::InsufficientResources("request queue full".into()));
        }
        let wr = SendWr {
            wr_id: cookie,
            op,
            sgl,
            signaled: pf.signaled,
            fence: pf.fence,
            solicited: pf.solicited,
        };
        self.inner.ia.engine.post_send(c.qpn, wr)?;
        c.posted_requests += 1;
        c.posts.posted(&op, total);
        Ok(())
    }

    /// dat_ep_post_send.
    pub fn post_send(&self, local: &[LmrTriplet], cookie: u64) -> Result<(), DatError> {
        self.post_send_with(local, cookie, CompletionFlags::DEFAULT)
    }

    /// dat_ep_post_send with completion flags (SUPPRESS: no event for a success, the queue
    /// slot is freed all the same; UNSIGNALLED when the EP allows it; SOLICITED_WAIT;
    /// BARRIER_FENCE).
    pub fn post_send_with(
        &self,
        local: &[LmrTriplet],
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        self.post_request(SendOp::Send, local, cookie, flags, 5)
    }

    /// dat_ep_post_rdma_write.
    pub fn post_rdma_write(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        cookie: u64,
    ) -> Result<(), DatError> {
        self.post_rdma_write_with(local, remote, cookie, CompletionFlags::DEFAULT)
    }

    /// dat_ep_post_rdma_write with completion flags.
    pub fn post_rdma_write_with(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        let op = SendOp::Write {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
        };
        self.post_request(op, local, cookie, flags, 6)
    }

    /// dat_ib_post_rdma_write_immed (IB extension): the peer's receive completes with `imm`;
    /// this side's completion carries `imm` too (a DAT_IB_DTO_EVENT, not a plain WRITE's).
    /// The wire carries `imm`'s host-order bytes, as the OFA provider's (`super::immediate`).
    pub fn post_rdma_write_imm(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        imm: u32,
        cookie: u64,
    ) -> Result<(), DatError> {
        self.post_rdma_write_imm_with(local, remote, imm, cookie, CompletionFlags::DEFAULT)
    }

    /// dat_ib_post_rdma_write_immed with completion flags.
    pub fn post_rdma_write_imm_with(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        imm: u32,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        let op = SendOp::WriteWithImm {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
            imm: super::immediate::to_transport(imm),
        };
        self.post_request(op, local, cookie, flags, 7)
    }

    /// dat_ep_post_rdma_read.
    pub fn post_rdma_read(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        cookie: u64,
    ) -> Result<(), DatError> {
        self.post_rdma_read_with(local, remote, cookie, CompletionFlags::DEFAULT)
    }

    /// dat_ep_post_rdma_read with completion flags.
    pub fn post_rdma_read_with(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        let op = SendOp::Read {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
        };
        self.post_request(op, local, cookie, flags, 6)
    }

    /// The local buffer receives exactly the 8-byte original value; the remote triplet names
    /// the target (at `target_address`) inside a segment the consumer was given, which may be
    /// longer (dtestx passes the peer's whole 256-byte buffer), never shorter than 8 bytes.
    fn atomic_args(local: &LmrTriplet, remote: &RmrTriplet) -> Result<(), DatError> {
        if local.segment_length != 8 || remote.segment_length < 8 {
            return Err(DatError::InvalidParameter("atomics move 8 bytes"));
        }
        Ok(())
    }

    /// dat_ib_post_cmp_and_swap: the original remote value lands in `local`.
    pub fn post_cmp_and_swap(
        &self,
        compare: u64,
        swap: u64,
        local: &LmrTriplet,
        remote: &RmrTriplet,
        cookie: u64,
    ) -> Result<(), DatError> {
        self.post_cmp_and_swap_with(
            compare,
            swap,
            local,
            remote,
            cookie,
            CompletionFlags::DEFAULT,
        )
    }

    /// dat_ib_post_cmp_and_swap with completion flags.
    pub fn post_cmp_and_swap_with(
        &self,
        compare: u64,
        swap: u64,
        local: &LmrTriplet,
        remote: &RmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        Self::atomic_args(local, remote)?;
        let op = SendOp::CompareSwap {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
            compare,
            swap,
        };
        self.post_request(op, std::slice::from_ref(local), cookie, flags, 7)
    }

    /// dat_ib_post_fetch_and_add: the original remote value lands in `local`.
    pub fn post_fetch_add(
        &self,
        add: u64,
        local: &LmrTriplet,
        remote: &RmrTriplet,
        cookie: u64,
    ) -> Result<(), DatError> {
        self.post_fetch_add_with(add, local, remote, cookie, CompletionFlags::DEFAULT)
    }

    /// dat_ib_post_fetch_and_add with completion flags.
    pub fn post_fetch_add_with(
        &self,
        add: u64,
        local: &LmrTriplet,
        remote: &RmrTriplet,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        Self::atomic_args(local, remote)?;
        let op = SendOp::FetchAdd {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
            add,
        };
        self.post_request(op, std::slice::from_ref(local), cookie, flags, 6)
    }

    /// dat_ep_post_recv (not on an SRQ EP: post to the SRQ). Segments of an LMR in another PZ
    /// than the EP's are DAT_PROTECTION_VIOLATION.
    pub fn post_recv(&self, local: &[LmrTriplet], cookie: u64) -> Result<(), DatError> {
        self.post_recv_with(local, cookie, CompletionFlags::DEFAULT)
    }

    /// [`Ep::post_recv`] with the consumer's completion flags. Every flag is accepted and
    /// none changes a receive: a receive always completes (IBTA has no unsignaled receive,
    /// and the OFA uDAPL providers ignore a receive's flags too); a fence orders requests only.
    pub fn post_recv_with(
        &self,
        local: &[LmrTriplet],
        cookie: u64,
        _flags: CompletionFlags,
    ) -> Result<(), DatError> {
        if self.inner.srq.is_some() {
            return Err(DatError::InvalidParameter("EP receives from its SRQ"));
        }
        let mut c = self.inner.lock();
        let (sgl, total) = Self::sgl(
            &c,
            &self.inner.ia.mem,
            local,
            c.attr.max_recv_iov,
            AccessKind::Write,
        )?;
        if matches!(c.state, EpState::Disconnected | EpState::DisconnectPending) {
            return Err(state_error(c.state));
        }
        let done = c.counters.recvs.load(Ordering::Acquire);
        if c.posted_recvs.saturating_sub(done) >= u64::from(c.attr.max_recv_dtos) {
            return Err(DatError::InsufficientResources("receive queue full".into()));
        }
        self.inner
            .ia
            .engine
            .post_recv(c.qpn, RecvWr { wr_id: cookie, sgl })?;
        c.posted_recvs += 1;
        c.recvs_posted = true;
        c.posts.post_recv += 1;
        c.posts.post_recv_data += total;
        Ok(())
    }

    /// The current state.
    pub fn state(&self) -> EpState {
        self.inner.lock().state
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.inner.context
    }

    /// dat_ep_free: disconnects abruptly if needed, destroys the QP (any state).
    pub fn free(self) {}
}
