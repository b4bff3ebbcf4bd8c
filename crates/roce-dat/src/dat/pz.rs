//! Protection zones (dat_pz_create / dat_pz_free): memory regions and EPs of one PZ only
//! access each other (IBTA vol. 1 §10.6.3.2, checked by the `MrTable`).

use super::context::ConsumerContext;
use super::error::{DatError, Refused, StateKind};
use super::ia::{Ia, IaInner};
use std::sync::Arc;

pub(crate) struct PzInner {
    pub ia: Arc<IaInner>,
    pub pz: crate::mem::Pz,
    pub context: ConsumerContext,
}

impl Drop for PzInner {
    fn drop(&mut self) {
        // Every LMR/EP/SRQ of the zone is gone (they hold this): the zone is empty.
        let _ = self.ia.mem.free_pz(self.pz);
        self.ia.objects.pz.freed();
    }
}

/// A protection zone (DAT_PZ_HANDLE): LMRs, RMRs, EPs and SRQs created in it only access
/// each other. Dropping it frees the zone once nothing uses it.
pub struct Pz {
    pub(crate) inner: Arc<PzInner>,
}

impl Pz {
    /// dat_pz_create: a new, empty protection zone of `ia`. Succeeds today (zones are not
    /// counted against [`IaAttr::max_pzs`](super::IaAttr::max_pzs)).
    pub fn create(ia: &Ia) -> Result<Pz, DatError> {
        ia.inner.objects.pz.created();
        Ok(Pz {
            inner: Arc::new(PzInner {
                ia: ia.inner.clone(),
                pz: ia.inner.mem.create_pz(),
                context: ConsumerContext::default(),
            }),
        })
    }

    /// The zone's number (the `pd` of the transport).
    pub fn id(&self) -> u32 {
        self.inner.pz.id()
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.inner.context
    }

    /// Whether [`Pz::free`] would free the zone: DAT_INVALID_STATE (PZ_IN_USE) while LMRs,
    /// RMRs, EPs or SRQs use it (dat_pz_free(3DAT)).
    pub fn can_free(&self) -> Result<(), DatError> {
        let users = Arc::strong_count(&self.inner) - 1;
        if users > 0 {
            return Err(DatError::InvalidStateOf {
                kind: StateKind::PzInUse,
                what: format!("PZ used by {users} objects"),
            });
        }
        Ok(())
    }

    /// Frees the zone; refused as [`Pz::can_free`] says.
    pub fn free(self) -> Result<(), Refused<Pz>> {
        match self.can_free() {
            Ok(()) => Ok(()),
            Err(error) => Err(Refused {
                object: self,
                error,
            }),
        }
    }
}
