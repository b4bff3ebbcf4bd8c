//! Public service points (dat_psp_create / dat_psp_free): listen on a connection qualifier
//! (an rdma_cm TCP-space port); connection requests arrive as [`Cr`](super::cr::Cr)s on the
//! PSP's EVD.

use super::context::ConsumerContext;
use super::error::DatError;
use super::evd::{Evd, EvdFlags, EvdInner};
use super::ia::Ia;
use std::sync::Arc;

/// A listening service point.
pub struct Psp {
    evd: Arc<EvdInner>,
    conn_qual: u16,
    context: ConsumerContext,
}

impl Psp {
    /// Listens on `conn_qual`; requests go to `evd` (which needs the CR flag).
    pub fn create(ia: &Ia, conn_qual: u16, evd: &Evd) -> Result<Psp, DatError> {
        if !Arc::ptr_eq(&evd.inner.ia, &ia.inner) {
            return Err(DatError::InvalidHandle("EVD of another IA"));
        }
        if !evd.flags().contains(EvdFlags::CR) {
            return Err(DatError::InvalidParameter("EVD without CR flag"));
        }
        ia.inner.engine.listen(conn_qual, evd.inner.sink.clone())?;
        Ok(Psp {
            evd: evd.inner.clone(),
            conn_qual,
            context: ConsumerContext::default(),
        })
    }

    /// The connection qualifier.
    pub fn conn_qual(&self) -> u16 {
        self.conn_qual
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.context
    }

    /// dat_psp_free: stops listening (requests already queued stay answerable).
    pub fn free(self) {}
}

impl Drop for Psp {
    fn drop(&mut self) {
        let _ = self.evd.ia.engine.unlisten(self.conn_qual);
    }
}
