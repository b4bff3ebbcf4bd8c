//! Endpoints (dat_ep_create, dat_ep_connect, dat_ep_disconnect, dat_ep_reset, dat_ep_free,
//! dat_ep_post_*, dat_ep_get_status): an RC QP of the engine with the DAT state machine of the
//! seed man pages. Created UNCONNECTED (dat_ep_create(3DAT)); CONNECTED once `Established` is
//! dequeued from its connection EVD; DISCONNECTED after a disconnect, a rejection or an
//! unreachable peer; `reset` brings it back to UNCONNECTED on a fresh QP. A call that the
//! current state does not allow returns DAT_INVALID_STATE naming the state.

use super::error::DatError;
use super::evd::{ConnectionEventKind, Evd, EvdFlags, EvdInner};
use super::ia::{Ia, IaInner};
use super::lmr::{LmrTriplet, RmrTriplet};
use super::pz::{Pz, PzInner};
use super::srq::{Srq, SrqInner};
use crate::cm::ConnectParams;
use crate::engine::host::QpOptions;
use crate::engine::runtime::{shard_of_qpn, DtoCounters, QpRoute};
use crate::transport::memory::Access;
use crate::transport::types::{RecvWr, SendOp, SendWr, Sge, MAX_SGE};
use crate::wire::psn::Psn;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

/// EP states (DAT_EP_STATE_*, dat_ep_get_status(3DAT)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpState {
    Unconnected,
    Reserved,
    PassiveConnectionPending,
    ActiveConnectionPending,
    TentativeConnectionPending,
    Connected,
    DisconnectPending,
    Disconnected,
}

/// EP attributes (DAT_EP_ATTR, the parts this provider uses). `Default` is what a NULL
/// attribute pointer gets (dat_ep_create(3DAT): reasonable provider defaults; dapltest needs
/// 4 IOVs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpAttr {
    pub max_message_size: u32,
    pub max_rdma_size: u32,
    pub max_recv_dtos: u32,
    pub max_request_dtos: u32,
    pub max_recv_iov: u32,
    pub max_request_iov: u32,
    /// Outstanding RDMA reads/atomics as target / as originator.
    pub max_rdma_read_in: u8,
    pub max_rdma_read_out: u8,
}

impl Default for EpAttr {
    fn default() -> Self {
        EpAttr {
            max_message_size: crate::transport::MAX_MSG_SIZE,
            max_rdma_size: crate::transport::MAX_MSG_SIZE,
            max_recv_dtos: 256,
            max_request_dtos: 256,
            max_recv_iov: 4,
            max_request_iov: 4,
            max_rdma_read_in: 4,
            max_rdma_read_out: 4,
        }
    }
}

/// Mutable part of an EP.
struct EpCore {
    state: EpState,
    qpn: u32,
    shard: usize,
    posted_requests: u64,
    posted_recvs: u64,
    counters: Arc<DtoCounters>,
}

pub(crate) struct EpInner {
    ia: Arc<IaInner>,
    pz: Arc<PzInner>,
    recv_evd: Option<Arc<EvdInner>>,
    request_evd: Option<Arc<EvdInner>>,
    connect_evd: Option<Arc<EvdInner>>,
    srq: Option<Arc<SrqInner>>,
    attr: EpAttr,
    core: Mutex<EpCore>,
}

/// An endpoint.
pub struct Ep {
    pub(crate) inner: Arc<EpInner>,
}

fn state_error(state: EpState) -> DatError {
    DatError::EpState { state }
}

impl EpInner {
    fn lock(&self) -> std::sync::MutexGuard<'_, EpCore> {
        self.core.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn route(&self, counters: &Arc<DtoCounters>) -> QpRoute {
        QpRoute {
            request: self.request_evd.as_ref().map(|e| e.sink.clone()),
            recv: self.recv_evd.as_ref().map(|e| e.sink.clone()),
            conn: self.connect_evd.as_ref().map(|e| e.sink.clone()),
            counters: Some(counters.clone()),
        }
    }

    fn qp_options(&self) -> QpOptions {
        QpOptions {
            pd: self.pz.pz.id(),
            sq_depth: self.attr.max_request_dtos,
            rq_depth: self.attr.max_recv_dtos,
            srq: self.srq.as_ref().map(|s| s.srqn),
            access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
            sig_all: true,
            ..QpOptions::default()
        }
    }

    /// A connection event was dequeued for QP `qpn` (a stale QPN after a reset is ignored).
    pub(crate) fn on_connection_event(&self, qpn: u32, kind: ConnectionEventKind) {
        let mut c = self.lock();
        if c.qpn != qpn {
            return;
        }
        c.state = match (c.state, kind) {
            (
                EpState::ActiveConnectionPending | EpState::PassiveConnectionPending,
                ConnectionEventKind::Established,
            ) => EpState::Connected,
            (_, ConnectionEventKind::Established) => c.state,
            _ => EpState::Disconnected,
        };
    }

    /// Passive side: `dat_cr_accept` with this EP.
    pub(crate) fn accept_qpn(&self) -> Result<(u32, bool), DatError> {
        let c = self.lock();
        if c.state != EpState::Unconnected {
            return Err(state_error(c.state));
        }
        Ok((c.qpn, self.srq.is_some()))
    }

    pub(crate) fn set_state(&self, state: EpState) {
        self.lock().state = state;
    }

    pub(crate) fn ia(&self) -> &Arc<IaInner> {
        &self.ia
    }
}

impl Drop for EpInner {
    fn drop(&mut self) {
        let c = self.core.get_mut().unwrap_or_else(|p| p.into_inner());
        if matches!(
            c.state,
            EpState::Connected
                | EpState::ActiveConnectionPending
                | EpState::PassiveConnectionPending
        ) {
            // dat_ep_free of a connected EP: abrupt disconnect.
            let _ = self.ia.engine.disconnect(c.qpn);
        }
        let _ = self.ia.engine.destroy_qp(c.qpn);
        self.ia.lock_eps().remove(&c.qpn);
    }
}

impl Ep {
    /// Creates an EP in UNCONNECTED on `pz` with its receive, request and connection EVDs
    /// (`None` = DAT_HANDLE_NULL) and attributes (`None` = provider defaults); with an SRQ its
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
        let attr = attr.unwrap_or_default();
        for (evd, flag, what) in [
            (recv_evd, EvdFlags::DTO, "recv EVD without DTO flag"),
            (request_evd, EvdFlags::DTO, "request EVD without DTO flag"),
            (
                connect_evd,
                EvdFlags::CONNECTION,
                "connect EVD without CONNECTION flag",
            ),
        ] {
            if let Some(e) = evd {
                if !Arc::ptr_eq(&e.inner.ia, &ia.inner) {
                    return Err(DatError::InvalidHandle("EVD of another IA"));
                }
                if !e.flags().contains(flag) {
                    return Err(DatError::InvalidParameter(what));
                }
            }
        }
        if !Arc::ptr_eq(&pz.inner.ia, &ia.inner) {
            return Err(DatError::InvalidHandle("PZ of another IA"));
        }
        if let Some(s) = srq {
            if !Arc::ptr_eq(&s.inner.pz, &pz.inner) {
                return Err(DatError::InvalidParameter("SRQ of another PZ"));
            }
        }
        if attr.max_recv_iov as usize > MAX_SGE
            || attr.max_request_iov as usize > MAX_SGE
            || attr.max_request_dtos == 0
            || (srq.is_none() && attr.max_recv_dtos == 0)
        {
            return Err(DatError::InvalidParameter("EP attributes"));
        }
        let counters = Arc::new(DtoCounters::default());
        let inner = Arc::new(EpInner {
            ia: ia.inner.clone(),
            pz: pz.inner.clone(),
            recv_evd: recv_evd.map(|e| e.inner.clone()),
            request_evd: request_evd.map(|e| e.inner.clone()),
            connect_evd: connect_evd.map(|e| e.inner.clone()),
            srq: srq.map(|s| s.inner.clone()),
            attr,
            core: Mutex::new(EpCore {
                state: EpState::Unconnected,
                qpn: 0,
                shard: 0,
                posted_requests: 0,
                posted_recvs: 0,
                counters: counters.clone(),
            }),
        });
        let shard = inner
            .srq
            .as_ref()
            .map_or_else(|| ia.inner.next_shard(), |s| s.shard);
        let qpn = ia
            .inner
            .engine
            .create_qp(shard, inner.qp_options(), inner.route(&counters))?;
        {
            let mut c = inner.lock();
            c.qpn = qpn;
            c.shard = shard;
        }
        ia.inner.lock_eps().insert(qpn, Arc::downgrade(&inner));
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

    /// The attributes.
    pub fn attr(&self) -> EpAttr {
        self.inner.attr
    }

    /// dat_ep_get_status(3DAT): the state, and whether no receive / no request DTO is
    /// outstanding (a snapshot; completions count when the shard generates them). An EP on an
    /// SRQ holds no receive of its own: its `recv_idle` is always true.
    pub fn get_status(&self) -> (EpState, bool, bool) {
        let c = self.inner.lock();
        let recvs = c.counters.recvs.load(Ordering::Acquire);
        let requests = c.counters.requests.load(Ordering::Acquire);
        let recv_idle = self.inner.srq.is_some() || recvs >= c.posted_recvs;
        (c.state, recv_idle, requests >= c.posted_requests)
    }

    /// dat_ep_connect: requests a connection to `conn_qual` at `remote`; the outcome arrives
    /// on the connection EVD (Established, PeerRejected, Unreachable).
    pub fn connect(
        &self,
        remote: Ipv4Addr,
        conn_qual: u16,
        private_data: &[u8],
    ) -> Result<(), DatError> {
        if self.inner.connect_evd.is_none() {
            return Err(DatError::InvalidParameter("EP without connection EVD"));
        }
        let mut c = self.inner.lock();
        if c.state != EpState::Unconnected {
            return Err(state_error(c.state));
        }
        let ia = &self.inner.ia;
        let mut p = ConnectParams::new(remote, conn_qual, c.qpn, Psn::new(ia.next_psn()));
        p.pmtu = ia.pmtu;
        p.responder_resources = self.inner.attr.max_rdma_read_in;
        p.initiator_depth = self.inner.attr.max_rdma_read_out;
        p.srq = self.inner.srq.is_some();
        p.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        p.private_data = private_data.to_vec();
        ia.engine.connect(p)?;
        c.state = EpState::ActiveConnectionPending;
        Ok(())
    }

    /// dat_ep_disconnect: tears the connection down; DISCONNECTED follows on the connection
    /// EVD and outstanding DTOs flush. A disconnected EP answers Ok.
    pub fn disconnect(&self) -> Result<(), DatError> {
        let mut c = self.inner.lock();
        match c.state {
            EpState::Disconnected => Ok(()),
            EpState::Connected
            | EpState::ActiveConnectionPending
            | EpState::PassiveConnectionPending => {
                self.inner.ia.engine.disconnect(c.qpn)?;
                c.state = EpState::DisconnectPending;
                Ok(())
            }
            s => Err(state_error(s)),
        }
    }

    /// dat_ep_reset: a DISCONNECTED EP goes back to UNCONNECTED on a fresh QP.
    pub fn reset(&self) -> Result<(), DatError> {
        let mut c = self.inner.lock();
        match c.state {
            EpState::Unconnected => return Ok(()),
            EpState::Disconnected => {}
            s => return Err(state_error(s)),
        }
        let ia = &self.inner.ia;
        let counters = Arc::new(DtoCounters::default());
        let qpn = ia.engine.create_qp(
            c.shard,
            self.inner.qp_options(),
            self.inner.route(&counters),
        )?;
        let old = c.qpn;
        let _ = ia.engine.destroy_qp(old);
        {
            let mut eps = ia.lock_eps();
            eps.remove(&old);
            eps.insert(qpn, Arc::downgrade(&self.inner) as Weak<EpInner>);
        }
        *c = EpCore {
            state: EpState::Unconnected,
            qpn,
            shard: c.shard,
            posted_requests: 0,
            posted_recvs: 0,
            counters,
        };
        Ok(())
    }

    fn sgl(
        local: &[LmrTriplet],
        max_iov: u32,
    ) -> Result<(crate::transport::types::SgList, u64), DatError> {
        if local.len() > max_iov as usize {
            return Err(DatError::InvalidParameter("more segments than max IOV"));
        }
        let mut total = 0u64;
        let sgl = local
            .iter()
            .map(|t| {
                total += u64::from(t.segment_length);
                Sge {
                    addr: t.virtual_address,
                    len: t.segment_length,
                    lkey: t.lmr_context,
                }
            })
            .collect();
        Ok((sgl, total))
    }

    fn post_request(&self, op: SendOp, local: &[LmrTriplet], cookie: u64) -> Result<(), DatError> {
        let (sgl, total) = Self::sgl(local, self.inner.attr.max_request_iov)?;
        let limit = match op {
            SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => {
                self.inner.attr.max_message_size
            }
            _ => self.inner.attr.max_rdma_size,
        };
        if total > u64::from(limit) {
            return Err(DatError::InvalidParameter(
                "message larger than the EP allows",
            ));
        }
        let mut c = self.inner.lock();
        if c.state != EpState::Connected {
            return Err(state_error(c.state));
        }
        let done = c.counters.requests.load(Ordering::Acquire);
        if c.posted_requests.saturating_sub(done) >= u64::from(self.inner.attr.max_request_dtos) {
            return Err(DatError::InsufficientResources("request queue full".into()));
        }
        let wr = SendWr {
            wr_id: cookie,
            op,
            sgl,
            signaled: true,
            fence: false,
            solicited: false,
        };
        self.inner.ia.engine.post_send(c.qpn, wr)?;
        c.posted_requests += 1;
        Ok(())
    }

    /// dat_ep_post_send.
    pub fn post_send(&self, local: &[LmrTriplet], cookie: u64) -> Result<(), DatError> {
        self.post_request(SendOp::Send, local, cookie)
    }

    /// dat_ep_post_rdma_write.
    pub fn post_rdma_write(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        cookie: u64,
    ) -> Result<(), DatError> {
        let op = SendOp::Write {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
        };
        self.post_request(op, local, cookie)
    }

    /// dat_ib_post_rdma_write_immed (IB extension): the peer's receive completes with `imm`.
    pub fn post_rdma_write_imm(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        imm: u32,
        cookie: u64,
    ) -> Result<(), DatError> {
        let op = SendOp::WriteWithImm {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
            imm,
        };
        self.post_request(op, local, cookie)
    }

    /// dat_ep_post_rdma_read.
    pub fn post_rdma_read(
        &self,
        local: &[LmrTriplet],
        remote: &RmrTriplet,
        cookie: u64,
    ) -> Result<(), DatError> {
        let op = SendOp::Read {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
        };
        self.post_request(op, local, cookie)
    }

    fn atomic_args(local: &LmrTriplet, remote: &RmrTriplet) -> Result<(), DatError> {
        if local.segment_length != 8 || remote.segment_length != 8 {
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
        Self::atomic_args(local, remote)?;
        let op = SendOp::CompareSwap {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
            compare,
            swap,
        };
        self.post_request(op, std::slice::from_ref(local), cookie)
    }

    /// dat_ib_post_fetch_and_add: the original remote value lands in `local`.
    pub fn post_fetch_add(
        &self,
        add: u64,
        local: &LmrTriplet,
        remote: &RmrTriplet,
        cookie: u64,
    ) -> Result<(), DatError> {
        Self::atomic_args(local, remote)?;
        let op = SendOp::FetchAdd {
            remote_addr: remote.target_address,
            rkey: remote.rmr_context,
            add,
        };
        self.post_request(op, std::slice::from_ref(local), cookie)
    }

    /// dat_ep_post_recv (not on an SRQ EP: post to the SRQ).
    pub fn post_recv(&self, local: &[LmrTriplet], cookie: u64) -> Result<(), DatError> {
        if self.inner.srq.is_some() {
            return Err(DatError::InvalidParameter("EP receives from its SRQ"));
        }
        let (sgl, _) = Self::sgl(local, self.inner.attr.max_recv_iov)?;
        let mut c = self.inner.lock();
        if matches!(c.state, EpState::Disconnected | EpState::DisconnectPending) {
            return Err(state_error(c.state));
        }
        let done = c.counters.recvs.load(Ordering::Acquire);
        if c.posted_recvs.saturating_sub(done) >= u64::from(self.inner.attr.max_recv_dtos) {
            return Err(DatError::InsufficientResources("receive queue full".into()));
        }
        self.inner
            .ia
            .engine
            .post_recv(c.qpn, RecvWr { wr_id: cookie, sgl })?;
        c.posted_recvs += 1;
        Ok(())
    }

    /// The current state.
    pub fn state(&self) -> EpState {
        self.inner.lock().state
    }

    /// dat_ep_free: disconnects abruptly if needed, destroys the QP (any state).
    pub fn free(self) {}
}
