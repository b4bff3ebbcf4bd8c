//! Reserved service points (dat_rsp_create / dat_rsp_query / dat_rsp_free, DAT 2.0 §6.4.2):
//! a connection qualifier bound to one EP. Creating it moves the EP (UNCONNECTED) to RESERVED;
//! a request arriving on it names that EP ([`Cr::reserved_ep`](super::cr::Cr::reserved_ep)),
//! which moves to PASSIVE_CONNECTION_PENDING and is the one `dat_cr_accept` connects
//! ([`Cr::accept_reserved`](super::cr::Cr::accept_reserved)); a rejected request returns it to
//! RESERVED. Freeing the RSP stops listening and returns a still-RESERVED EP to UNCONNECTED.

use super::conn_qual::ConnQual;
use super::context::ConsumerContext;
use super::ep::{state_error, Ep, EpInner};
use super::ep_state::EpState;
use super::error::{DatError, HandleKind};
use super::evd::{Evd, EvdInner};
use super::evd_flags::EvdFlags;
use super::ia::Ia;
use std::sync::Arc;

/// A reserved service point.
pub struct Rsp {
    evd: Arc<EvdInner>,
    ep: Arc<EpInner>,
    conn_qual: ConnQual,
    context: ConsumerContext,
}

impl Rsp {
    /// dat_rsp_create: listens on `conn_qual` for `ep` (UNCONNECTED, of this IA); requests go
    /// to `evd` (which needs the CR flag).
    pub fn create(
        ia: &Ia,
        conn_qual: impl Into<ConnQual>,
        ep: &Ep,
        evd: &Evd,
    ) -> Result<Rsp, DatError> {
        let conn_qual = conn_qual.into();
        if !Arc::ptr_eq(&evd.inner.ia, &ia.inner) {
            return Err(DatError::InvalidHandleOf {
                kind: HandleKind::EvdCr,
                what: "EVD of another IA",
            });
        }
        if !Arc::ptr_eq(ep.inner.ia(), &ia.inner) {
            return Err(DatError::InvalidHandleOf {
                kind: HandleKind::Ep,
                what: "EP of another IA",
            });
        }
        if !evd.flags().contains(EvdFlags::CR) {
            return Err(DatError::InvalidHandleOf {
                kind: HandleKind::EvdCr,
                what: "EVD without the CR flag",
            });
        }
        let mut c = ep.inner.lock();
        if c.state != EpState::Unconnected {
            return Err(state_error(c.state));
        }
        ia.inner
            .engine
            .listen(conn_qual.port(), evd.inner.sink.clone())?;
        c.state = EpState::Reserved;
        ia.inner
            .lock_rsps()
            .insert(conn_qual.port(), (conn_qual, Arc::downgrade(&ep.inner)));
        ia.inner.objects.rsp.created();
        Ok(Rsp {
            evd: evd.inner.clone(),
            ep: ep.inner.clone(),
            conn_qual,
            context: ConsumerContext::default(),
        })
    }

    /// The connection qualifier (as given to [`Rsp::create`]).
    pub fn conn_qual(&self) -> ConnQual {
        self.conn_qual
    }

    /// The reserved EP's QPN ([`Ep::qpn`]).
    pub fn ep_qpn(&self) -> u32 {
        self.ep.lock().qpn
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.context
    }

    /// dat_rsp_free.
    pub fn free(self) {}
}

impl Drop for Rsp {
    fn drop(&mut self) {
        let ia = &self.evd.ia;
        ia.objects.rsp.freed();
        let _ = ia.engine.unlisten(self.conn_qual.port());
        ia.lock_rsps().remove(&self.conn_qual.port());
        let mut c = self.ep.lock();
        if c.state == EpState::Reserved {
            c.state = EpState::Unconnected;
        }
    }
}
