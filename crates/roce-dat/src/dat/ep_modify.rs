//! dat_ep_modify(3DAT) (seed 000): which EP parameters may change, in which EP states.
//!
//! - IA, EP state, communicator, local/remote IA address and port qualifier, and the SRQ
//!   cannot be modified: DAT_INVALID_PARAMETER (argument 2, the mask).
//! - Protection Zone: only in the quiescent states UNCONNECTED and TENTATIVE CONNECTION
//!   PENDING. Receives posted later whose LMRs are in another PZ fail with
//!   DAT_PROTECTION_VIOLATION; receives already posted complete with a protection error when a
//!   message lands in them.
//! - EVDs, service type, sizes, QoS, completion flags, DTO and IOV counts, RDMA read depths:
//!   in UNCONNECTED, RESERVED, PASSIVE CONNECTION PENDING and TENTATIVE CONNECTION PENDING
//!   (before a connection is requested or a request accepted). Recv Completion Flags also only
//!   before any receive was posted.
//! - Transport- and provider-specific attributes: only in UNCONNECTED (this provider has none:
//!   a non-zero count is DAT_INVALID_PARAMETER).
//!
//! A parameter in a state that does not allow it is DAT_INVALID_STATE (EP state subtype).
//! Nothing changes unless the whole call succeeds, and only masked parameters change.

use super::ep::{attach_streams, check_attr, detach_streams, state_error, Ep};
use super::ep_attr::{EpAttr, EpParamMask};
use super::ep_modifiable::UNMODIFIABLE;
use super::error::{DatError, HandleKind};
use super::evd::Evd;
use super::evd_flags::EvdFlags;
use super::pz::Pz;
use std::sync::Arc;

pub use super::ep_modifiable::modifiable_states;

/// The consumer-requested parameters of `dat_ep_modify` (DAT_EP_PARAM: the modifiable part);
/// only the fields the mask names are read. An EVD of `None` is DAT_HANDLE_NULL.
#[derive(Clone, Copy, Default)]
pub struct EpParam<'a> {
    /// DAT_EP_PARAM.pz_handle (`PZ_HANDLE`): the new protection zone, of the EP's IA;
    /// `None` is DAT_INVALID_HANDLE. An EP on an SRQ stays in the SRQ's PZ.
    pub pz: Option<&'a Pz>,
    /// DAT_EP_PARAM.recv_evd_handle (`RECV_EVD_HANDLE`): the EVD of receive completions.
    pub recv_evd: Option<&'a Evd>,
    /// DAT_EP_PARAM.request_evd_handle (`REQUEST_EVD_HANDLE`): the EVD of request
    /// completions.
    pub request_evd: Option<&'a Evd>,
    /// DAT_EP_PARAM.connect_evd_handle (`CONNECT_EVD_HANDLE`): the EVD of connection events;
    /// it needs [`EvdFlags::CONNECTION`].
    pub connect_evd: Option<&'a Evd>,
    /// DAT_EP_PARAM.ep_attr: the attributes, each read only when its `EpParamMask` bit is
    /// set, and checked against the IA's limits as at creation (dat_ep_create(3DAT)).
    pub attr: EpAttr,
    /// DAT_SERVICE_TYPE (only DAT_SERVICE_TYPE_RC = 0).
    pub service_type: u32,
    /// DAT_QOS (`QOS`): one of the five values ([`Qos`](super::Qos)).
    pub qos: u32,
    /// DAT_EP_ATTR.num_transport_attr (`NUM_TRANSPORT_ATTR`): only 0, this provider has no
    /// transport-specific attributes.
    pub num_transport_attr: u32,
    /// DAT_EP_ATTR.num_provider_attr (`NUM_PROVIDER_ATTR`): only 0, this provider has no
    /// provider-specific attributes.
    pub num_provider_attr: u32,
}

impl Ep {
    /// dat_ep_modify: changes the parameters `mask` names to their values in `param`. An empty
    /// mask asks for nothing and changes nothing (success, as the C entry always answered).
    pub fn modify(&self, mask: EpParamMask, param: &EpParam<'_>) -> Result<(), DatError> {
        if mask.is_empty() {
            return Ok(());
        }
        if mask.intersects(UNMODIFIABLE) {
            return Err(DatError::InvalidArg {
                arg: 2,
                what: "the mask names a parameter that cannot be modified",
            });
        }
        let inner = &self.inner;
        let mut c = inner.lock();
        // States first: each masked parameter must be modifiable now.
        for field in mask.iter() {
            let states = modifiable_states(field).unwrap_or(&[]);
            if !states.contains(&c.state) {
                return Err(state_error(c.state));
            }
        }
        if mask.contains(EpParamMask::RECV_COMPLETION_FLAGS)
            && c.recvs_posted
            && param.attr.recv_completion_flags != c.attr.recv_completion_flags
        {
            // "... but before posting of any Recvs".
            return Err(state_error(c.state));
        }
        // Values.
        let bad = |what| Err(DatError::InvalidArg { arg: 3, what });
        if mask.contains(EpParamMask::SERVICE_TYPE) && param.service_type != 0 {
            return bad("only DAT_SERVICE_TYPE_RC");
        }
        let qos = if mask.contains(EpParamMask::QOS) {
            match super::Qos::from_dat(param.qos) {
                Some(q) => q,
                None => return bad("not a DAT_QOS value"),
            }
        } else {
            c.attr.qos
        };
        if (mask.contains(EpParamMask::NUM_TRANSPORT_ATTR) && param.num_transport_attr != 0)
            || (mask.contains(EpParamMask::NUM_PROVIDER_ATTR) && param.num_provider_attr != 0)
        {
            return bad("no transport- or provider-specific EP attributes");
        }
        let mut attr = c.attr;
        merge_attr(&mut attr, &param.attr, mask);
        attr.qos = qos;
        check_attr(&attr, inner.srq.is_some(), 3)?;
        let pz = if mask.contains(EpParamMask::PZ_HANDLE) {
            let pz = param.pz.ok_or(DatError::InvalidHandleOf {
                kind: HandleKind::Pz,
                what: "DAT_HANDLE_NULL PZ",
            })?;
            if !Arc::ptr_eq(&pz.inner.ia, &inner.ia) {
                return Err(DatError::InvalidHandleOf {
                    kind: HandleKind::Pz,
                    what: "PZ of another IA",
                });
            }
            if inner
                .srq
                .as_ref()
                .is_some_and(|s| !Arc::ptr_eq(&s.pz, &pz.inner))
            {
                return bad("an SRQ EP stays in its SRQ's PZ");
            }
            pz.inner.clone()
        } else {
            c.pz.clone()
        };
        let pick = |bit, new: Option<&Evd>, old: &Option<Arc<super::evd::EvdInner>>| {
            if mask.contains(bit) {
                new.map(|e| e.inner.clone())
            } else {
                old.clone()
            }
        };
        let recv_evd = pick(EpParamMask::RECV_EVD_HANDLE, param.recv_evd, &c.recv_evd);
        let request_evd = pick(
            EpParamMask::REQUEST_EVD_HANDLE,
            param.request_evd,
            &c.request_evd,
        );
        let connect_evd = pick(
            EpParamMask::CONNECT_EVD_HANDLE,
            param.connect_evd,
            &c.connect_evd,
        );
        for (e, kind) in [
            (&recv_evd, HandleKind::EvdRecv),
            (&request_evd, HandleKind::EvdRequest),
            (&connect_evd, HandleKind::EvdConn),
        ] {
            if e.as_ref().is_some_and(|e| !Arc::ptr_eq(&e.ia, &inner.ia)) {
                return Err(DatError::InvalidHandleOf {
                    kind,
                    what: "EVD of another IA",
                });
            }
        }
        if connect_evd
            .as_ref()
            .is_some_and(|e| !e.flags.contains(EvdFlags::CONNECTION))
        {
            return bad("connect EVD without CONNECTION flag");
        }
        // Completion streams: swap the old registration for the new one (or restore it).
        detach_streams(c.recv_evd.as_ref(), c.request_evd.as_ref());
        if let Err(e) = attach_streams(recv_evd.as_ref(), request_evd.as_ref(), &attr) {
            attach_streams(c.recv_evd.as_ref(), c.request_evd.as_ref(), &c.attr)
                .expect("the previous streams were compatible");
            return Err(DatError::InvalidArg {
                arg: 3,
                what: match e {
                    DatError::InvalidArg { what, .. } => what,
                    _ => "EVD completion flags",
                },
            });
        }
        // Apply to the QP: PZ and depths, then the event routes.
        let engine = &inner.ia.engine;
        let new_pd = (!Arc::ptr_eq(&pz, &c.pz)).then(|| pz.pz.id());
        let sq =
            (attr.max_request_dtos != c.attr.max_request_dtos).then_some(attr.max_request_dtos);
        let rq = (attr.max_recv_dtos != c.attr.max_recv_dtos && inner.srq.is_none())
            .then_some(attr.max_recv_dtos);
        let restore = |c: &super::ep::EpCore, recv: Option<&_>, request: Option<&_>| {
            detach_streams(recv, request);
            let _ = attach_streams(c.recv_evd.as_ref(), c.request_evd.as_ref(), &c.attr);
        };
        if new_pd.is_some() || sq.is_some() || rq.is_some() {
            let qpn = c.qpn;
            let r = engine
                .with_host(c.shard, move |h| h.reconfigure_qp(qpn, new_pd, sq, rq))
                .map_err(DatError::from)
                .and_then(|r| {
                    r.map_err(|_| DatError::InsufficientResources("QP reconfiguration".into()))
                });
            if let Err(e) = r {
                restore(&c, recv_evd.as_ref(), request_evd.as_ref());
                return Err(e);
            }
        }
        if qos != c.attr.qos {
            if let Err(e) = inner.apply_qos(&c, qos) {
                restore(&c, recv_evd.as_ref(), request_evd.as_ref());
                return Err(e);
            }
        }
        let mut next = super::ep::EpCore {
            state: c.state,
            qpn: c.qpn,
            shard: c.shard,
            posted_requests: c.posted_requests,
            posted_recvs: c.posted_recvs,
            counters: c.counters.clone(),
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            attr,
            recv: c.recv.clone(),
            recvs_posted: c.recvs_posted,
            remote: c.remote,
            posts: c.posts,
            counters_base: c.counters_base,
        };
        if mask.intersects(
            EpParamMask::RECV_EVD_HANDLE
                | EpParamMask::REQUEST_EVD_HANDLE
                | EpParamMask::CONNECT_EVD_HANDLE,
        ) {
            if let Err(e) = engine.set_route(c.qpn, inner.route(&next)) {
                restore(&c, next.recv_evd.as_ref(), next.request_evd.as_ref());
                return Err(e.into());
            }
        }
        std::mem::swap(&mut *c, &mut next);
        Ok(())
    }
}

/// Copies the masked attribute fields of `new` into `attr`.
fn merge_attr(attr: &mut EpAttr, new: &EpAttr, mask: EpParamMask) {
    macro_rules! take {
        ($bit:ident, $field:ident) => {
            if mask.contains(EpParamMask::$bit) {
                attr.$field = new.$field;
            }
        };
    }
    take!(MAX_MESSAGE_SIZE, max_message_size);
    take!(MAX_RDMA_SIZE, max_rdma_size);
    take!(RECV_COMPLETION_FLAGS, recv_completion_flags);
    take!(REQUEST_COMPLETION_FLAGS, request_completion_flags);
    take!(MAX_RECV_DTOS, max_recv_dtos);
    take!(MAX_REQUEST_DTOS, max_request_dtos);
    take!(MAX_RECV_IOV, max_recv_iov);
    take!(MAX_REQUEST_IOV, max_request_iov);
    take!(MAX_RDMA_READ_IN, max_rdma_read_in);
    take!(MAX_RDMA_READ_OUT, max_rdma_read_out);
    take!(SRQ_SOFT_HW, srq_soft_hw);
    take!(MAX_RDMA_READ_IOV, max_rdma_read_iov);
    take!(MAX_RDMA_WRITE_IOV, max_rdma_write_iov);
}
