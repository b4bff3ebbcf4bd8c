//! Connection requests (dat_cr_query / dat_cr_accept / dat_cr_reject): dequeued from a PSP's
//! EVD; answered once, by accepting on an UNCONNECTED EP or rejecting, both with private data.
//! A request dropped unanswered is rejected, so the peer is not left waiting.
//! dat_cr_handoff ([`Cr::handoff`]) passes an unanswered request on to the PSP of another
//! connection qualifier of the same IA.

use super::conn_qual::ConnQual;
use super::context::ConsumerContext;
use super::ep::{Ep, EpInner};
use super::ep_state::EpState;
use super::error::{DatError, Refused};
use super::ia::IaInner;
use crate::cm::{AcceptParams, CmId};
use crate::engine::runtime::{ConnRequest, Event};
use crate::mem::access::Access;
use crate::wire::psn::Psn;
use std::net::IpAddr;
use std::sync::Arc;

/// A pending connection request.
pub struct Cr {
    ia: Arc<IaInner>,
    id: CmId,
    conn_qual: ConnQual,
    remote_ip: IpAddr,
    remote_port: u16,
    remote_qpn: u32,
    private_data: Vec<u8>,
    answered: bool,
    context: ConsumerContext,
    /// The EP of the RSP the request arrived on (dat_rsp_create), or the one the provider
    /// made for it (`provider_ep`).
    reserved: Option<Arc<EpInner>>,
    /// `reserved` was made by the provider (a PSP with [`PspFlag::Provider`](super::PspFlag::Provider)).
    provider_ep: bool,
}

/// What dat_cr_query reports (DAT_CR_PARAM); the private data is writable through
/// [`Cr::private_data_mut`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrParam {
    /// DAT_CR_PARAM.remote_ia_address_ptr: the IPv4 address of the requesting IA.
    pub remote_address: IpAddr,
    /// DAT_CR_PARAM.remote_port_qual: the requester's port (the IP CM header's source port,
    /// what [`Ep::remote`](super::Ep::remote) reports once the request is accepted).
    pub remote_port: u16,
    /// The local connection qualifier the request arrived on (the PSP's or RSP's, as it was
    /// created; the C layer reports it as the event's `conn_qual`).
    pub conn_qual: ConnQual,
    /// DAT_CR_PARAM.private_data: what the requester passed to dat_ep_connect, at most
    /// [`IaAttr::max_private_data_size`](super::IaAttr::max_private_data_size) bytes.
    pub private_data: Vec<u8>,
    /// The reserved EP's QPN for a request on an RSP.
    pub ep: Option<u32>,
}

impl core::fmt::Debug for Cr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Cr")
            .field("conn_qual", &self.conn_qual)
            .field("remote_ip", &self.remote_ip)
            .field("remote_qpn", &self.remote_qpn)
            .finish()
    }
}

impl Cr {
    /// The request `req`, naming the qualifier of the service point listening on its port
    /// (`qual`: the PSP's or RSP's).
    pub(crate) fn new(ia: &Arc<IaInner>, req: ConnRequest, qual: ConnQual) -> Cr {
        ia.objects.cr.add();
        Cr {
            ia: ia.clone(),
            id: req.id,
            conn_qual: qual,
            remote_ip: req.src_ip,
            remote_port: req.src_port,
            remote_qpn: req.remote_qpn,
            private_data: req.private_data,
            answered: false,
            context: ConsumerContext::default(),
            reserved: None,
            provider_ep: false,
        }
    }

    /// A request that arrived on the RSP of `ep`: the EP moves from RESERVED to
    /// PASSIVE_CONNECTION_PENDING.
    pub(crate) fn with_reserved(mut self, ep: Arc<EpInner>) -> Cr {
        {
            let mut c = ep.lock();
            if c.state == EpState::Reserved {
                c.state = EpState::PassiveConnectionPending;
                c.remote = Some((self.remote_ip, self.remote_port));
            }
        }
        self.reserved = Some(ep);
        self
    }

    /// A request that arrived on a PSP created with DAT_PSP_PROVIDER_FLAG, for which the
    /// provider created `ep` (dat_psp_create(3DAT)): the EP is TENTATIVE_CONNECTION_PENDING
    /// until the request is answered, and the request is accepted on it.
    pub(crate) fn with_provider_ep(mut self, ep: Arc<EpInner>) -> Cr {
        {
            let mut c = ep.lock();
            c.state = EpState::TentativeConnectionPending;
            c.remote = Some((self.remote_ip, self.remote_port));
        }
        self.reserved = Some(ep);
        self.provider_ep = true;
        self
    }

    /// The EP the provider made for this request (a PSP with [`PspFlag::Provider`](super::PspFlag::Provider),
    /// dat_psp_create(3DAT)), TENTATIVE_CONNECTION_PENDING: the consumer gives it its PZ and
    /// EVDs with dat_ep_modify and accepts on it ([`Cr::accept_reserved`]). The request holds
    /// it too: rejected, the request takes it along once the consumer lets go of this handle
    /// (the C layer frees the EP handle it made for it).
    pub fn provider_ep(&self) -> Option<Ep> {
        let ep = self.reserved.as_ref().filter(|_| self.provider_ep)?;
        Some(Ep { inner: ep.clone() })
    }

    /// dat_cr_query.
    pub fn query(&self) -> CrParam {
        CrParam {
            remote_address: self.remote_ip,
            remote_port: self.remote_port,
            conn_qual: self.conn_qual,
            private_data: self.private_data.clone(),
            ep: self.reserved_ep(),
        }
    }

    /// The QPN of the EP reserved for this request (requests on an RSP), `None` for a PSP.
    pub fn reserved_ep(&self) -> Option<u32> {
        self.reserved.as_ref().map(|e| e.lock().qpn)
    }

    /// dat_cr_accept with DAT_HANDLE_NULL (dat_cr_accept(3DAT): "the local Endpoint is
    /// specified by the Connection Request"): accepts on the EP the request names, an RSP's
    /// reserved EP or the one the provider created for a PSP with DAT_PSP_PROVIDER_FLAG.
    /// Refused, the request still pending, with DAT_INVALID_PARAMETER (argument 2) when it
    /// names none (a consumer PSP's request), or as [`Cr::try_accept`].
    pub fn accept_reserved(self, private_data: &[u8]) -> Result<(), Refused<Cr>> {
        let Some(ep) = self.reserved.clone() else {
            return self.refuse(DatError::InvalidArg {
                arg: 2,
                what: "no EP reserved for this request (a PSP's)",
            });
        };
        self.accept_on(&ep, private_data)
    }

    /// The listened connection qualifier.
    pub fn conn_qual(&self) -> ConnQual {
        self.conn_qual
    }

    /// The requester's IA address.
    pub fn remote_address(&self) -> IpAddr {
        self.remote_ip
    }

    /// The requester's port (DAT_CR_PARAM.remote_port_qual, dat_cr_query(3DAT)).
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// The requester's private data.
    pub fn private_data(&self) -> &[u8] {
        &self.private_data
    }

    /// Writable, as dtest expects of the buffer `dat_cr_query` returns.
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.private_data
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.context
    }

    /// dat_cr_accept: connects the request to `ep` (UNCONNECTED, same IA); Established follows
    /// on the EP's connection EVD.
    /// A request on an RSP is accepted only on its reserved EP (else DAT_INVALID_PARAMETER,
    /// argument 2). A refused accept drops (rejects) the request; [`Cr::try_accept`] keeps it.
    pub fn accept(self, ep: &Ep, private_data: &[u8]) -> Result<(), DatError> {
        self.try_accept(ep, private_data).map_err(|r| r.error)
    }

    /// [`Cr::accept`] that gives the request back when refused: dat_cr_accept(3DAT), "If the
    /// provided local Endpoint does not satisfy the requested Connection Request, the
    /// operation fails without any effect on the local Endpoint, Pending Connection Request".
    pub fn try_accept(self, ep: &Ep, private_data: &[u8]) -> Result<(), Refused<Cr>> {
        if let Some(r) = &self.reserved {
            if !Arc::ptr_eq(r, &ep.inner) {
                return self.refuse(DatError::InvalidArg {
                    arg: 2,
                    what: "not the EP reserved for this request",
                });
            }
        }
        self.accept_on(&ep.inner.clone(), private_data)
    }

    fn accept_on(mut self, ep: &Arc<EpInner>, private_data: &[u8]) -> Result<(), Refused<Cr>> {
        if let Err(error) = super::limits::check_private_data(private_data, 3) {
            return self.refuse(error);
        }
        if !Arc::ptr_eq(ep.ia(), &self.ia) {
            return self.refuse(DatError::InvalidHandle("EP of another IA"));
        }
        let (qpn, srq) = match ep.accept_qpn() {
            Ok(v) => v,
            Err(error) => return self.refuse(error),
        };
        let attr = ep.lock().attr;
        let mut p = AcceptParams::new(qpn, Psn::new(self.ia.next_psn()));
        p.pmtu = Some(self.ia.pmtu);
        p.responder_resources = attr.max_rdma_read_in;
        p.initiator_depth = attr.max_rdma_read_out;
        p.srq = srq;
        p.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        p.private_data = private_data.to_vec();
        if let Err(e) = self.ia.engine.accept(self.id, p) {
            return self.refuse(e.into());
        }
        self.answered = true;
        self.ia.objects.cr_accepted.add();
        {
            let mut c = ep.lock();
            c.state = EpState::CompletionPending;
            // dat_ep_query(3DAT): the remote end is the requester's from here on.
            c.remote = Some((self.remote_ip, self.remote_port));
            c.posts.connect += 1;
        }
        Ok(())
    }

    /// The call is refused: the request goes back to the caller with `error`.
    fn refuse<T>(self, error: DatError) -> Result<T, Refused<Cr>> {
        Err(Refused {
            object: self,
            error,
        })
    }

    /// dat_cr_reject: the requester gets PEER_REJECTED with `private_data`.
    /// A reserved EP returns to RESERVED. Private data over
    /// [`MAX_PRIVATE_DATA_SIZE`](super::ia_attr::MAX_PRIVATE_DATA_SIZE) is argument 2, and the
    /// request is given back still pending ([`RejectError::Pending`]), as a refused accept's
    /// is; a rejection the engine could not send ends the request all the same
    /// ([`RejectError::Ended`]).
    pub fn reject(mut self, private_data: &[u8]) -> Result<(), RejectError> {
        if let Err(error) = super::limits::check_private_data(private_data, 2) {
            return self.refuse(error).map_err(RejectError::Pending);
        }
        self.answered = true;
        let sent = self.ia.engine.reject(self.id, private_data.to_vec());
        self.unreserve();
        match sent {
            Ok(()) => {
                self.ia.objects.cr_rejected.add();
                Ok(())
            }
            Err(e) => Err(RejectError::Ended(e.into())),
        }
    }

    /// dat_cr_handoff (DAT 2.0): hands the request over to the PSP listening on `conn_qual` in
    /// this IA. This `Cr` is consumed; a new connection-request event for the same request
    /// (now naming `conn_qual`) is queued on that PSP's EVD, where it is accepted or rejected
    /// like any other. Refused, the request left with the caller, with DAT_INVALID_PARAMETER
    /// (argument 2) when no PSP of this IA listens on `conn_qual`, and DAT_QUEUE_FULL when
    /// its EVD is full. A reserved EP (request on an RSP) returns to RESERVED. The PSP must
    /// have been created on exactly `conn_qual` (not merely on its CM port).
    pub fn handoff(mut self, conn_qual: impl Into<ConnQual>) -> Result<(), Refused<Cr>> {
        let conn_qual = conn_qual.into();
        let evd = self
            .ia
            .lock_psps()
            .get(&conn_qual.port())
            .filter(|l| l.qual == conn_qual)
            .and_then(|l| l.evd.upgrade());
        let Some(evd) = evd else {
            return self.refuse(DatError::InvalidArg {
                arg: 2,
                what: "no PSP of this IA on the connection qualifier",
            });
        };
        let req = ConnRequest {
            id: self.id,
            port: conn_qual.port(),
            src_ip: self.remote_ip,
            src_port: self.remote_port,
            remote_qpn: self.remote_qpn,
            private_data: core::mem::take(&mut self.private_data),
        };
        match evd.sink.queue.try_push(Event::Request(req)) {
            Ok(()) => {
                self.answered = true;
                self.unreserve();
                Ok(())
            }
            Err(ev) => {
                if let Event::Request(req) = ev {
                    self.private_data = req.private_data;
                }
                self.refuse(DatError::QueueFull)
            }
        }
    }

    fn unreserve(&self) {
        if let Some(ep) = &self.reserved {
            let mut c = ep.lock();
            if c.state == EpState::PassiveConnectionPending {
                c.state = EpState::Reserved;
                c.remote = None;
            }
        }
    }
}

/// Why [`Cr::reject`] failed.
#[derive(Debug)]
pub enum RejectError {
    /// Refused before anything was sent: the request, still pending, is given back.
    Pending(Refused<Cr>),
    /// The rejection could not be sent; the request is ended all the same (nothing to give
    /// back).
    Ended(DatError),
}

impl RejectError {
    /// The reason.
    pub fn error(&self) -> &DatError {
        match self {
            RejectError::Pending(r) => &r.error,
            RejectError::Ended(e) => e,
        }
    }
}

impl Drop for Cr {
    fn drop(&mut self) {
        if !self.answered {
            let _ = self.ia.engine.reject(self.id, Vec::new());
            self.unreserve();
        }
    }
}
