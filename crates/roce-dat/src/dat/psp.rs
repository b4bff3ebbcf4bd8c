//! Public service points (dat_psp_create / dat_psp_free): listen on a connection qualifier
//! (an rdma_cm TCP-space port); connection requests arrive as [`Cr`](super::cr::Cr)s on the
//! PSP's EVD.

use super::conn_qual::ConnQual;
use super::context::ConsumerContext;
use super::error::{DatError, HandleKind};
use super::evd::{Evd, EvdInner};
use super::evd_flags::EvdFlags;
use super::ia::Ia;
use super::listener::Listener;
use super::pz::Pz;
use std::sync::Arc;

/// DAT_PSP_FLAGS (dat_psp_create(3DAT)): who provides the EP of a request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PspFlag {
    /// DAT_PSP_CONSUMER_FLAG: the consumer accepts on an EP of its own.
    #[default]
    Consumer,
    /// DAT_PSP_PROVIDER_FLAG: the provider creates an EP for each request (default
    /// attributes, in a PZ of the PSP's own, no EVDs: the consumer gives it its PZ and EVDs
    /// with dat_ep_modify); the request names it ([`Cr::provider_ep`](super::Cr::provider_ep)),
    /// and a rejected request takes it along.
    Provider,
}

/// A listening service point.
pub struct Psp {
    evd: Arc<EvdInner>,
    conn_qual: ConnQual,
    flag: PspFlag,
    context: ConsumerContext,
}

impl Psp {
    /// Listens on `conn_qual` (carried by its CM port, [`ConnQual::port`]); requests go to
    /// `evd` (which needs the CR flag).
    pub fn create(ia: &Ia, conn_qual: impl Into<ConnQual>, evd: &Evd) -> Result<Psp, DatError> {
        Self::create_with(ia, conn_qual, evd, PspFlag::Consumer)
    }

    /// [`Psp::create`] with the PSP flag.
    pub fn create_with(
        ia: &Ia,
        conn_qual: impl Into<ConnQual>,
        evd: &Evd,
        flag: PspFlag,
    ) -> Result<Psp, DatError> {
        let conn_qual = conn_qual.into();
        // dat_psp_create(3DAT): the EVD must be a CR EVD of this IA (DAT_INVALID_HANDLE_EVD_CR),
        // as for an RSP.
        if !Arc::ptr_eq(&evd.inner.ia, &ia.inner) {
            return Err(DatError::InvalidHandleOf {
                kind: HandleKind::EvdCr,
                what: "EVD of another IA",
            });
        }
        if !evd.flags().contains(EvdFlags::CR) {
            return Err(DatError::InvalidHandleOf {
                kind: HandleKind::EvdCr,
                what: "EVD without the CR flag",
            });
        }
        let provider_pz = match flag {
            PspFlag::Provider => Some(Pz::create(ia)?.inner),
            PspFlag::Consumer => None,
        };
        ia.inner
            .engine
            .listen(conn_qual.port(), evd.inner.sink.clone())?;
        ia.inner.lock_psps().insert(
            conn_qual.port(),
            Listener {
                qual: conn_qual,
                evd: Arc::downgrade(&evd.inner),
                provider_pz,
            },
        );
        ia.inner.objects.psp.created();
        Ok(Psp {
            evd: evd.inner.clone(),
            conn_qual,
            flag,
            context: ConsumerContext::default(),
        })
    }

    /// dat_psp_create_any: listens on a connection qualifier the provider picks among the free
    /// ones of [`Psp::ANY_RANGE`] and reports ([`Psp::conn_qual`]); DAT_CONN_QUAL_UNAVAILABLE
    /// when every one is taken.
    pub fn create_any(ia: &Ia, evd: &Evd) -> Result<Psp, DatError> {
        Self::create_any_with(ia, evd, PspFlag::Consumer)
    }

    /// [`Psp::create_any`] with the PSP flag.
    pub fn create_any_with(ia: &Ia, evd: &Evd, flag: PspFlag) -> Result<Psp, DatError> {
        let span = u32::from(*Self::ANY_RANGE.end() - *Self::ANY_RANGE.start()) + 1;
        let start = ia
            .inner
            .next_any_qual
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        for i in 0..span {
            let qual = *Self::ANY_RANGE.start() + ((start.wrapping_add(i)) % span) as u16;
            match Self::create_with(ia, qual, evd, flag) {
                Err(DatError::ConnQualInUse(_)) => continue,
                other => return other,
            }
        }
        Err(DatError::ConnQualUnavailable)
    }

    /// The qualifiers dat_psp_create_any chooses from (the dynamic port range of RFC 6335).
    pub const ANY_RANGE: core::ops::RangeInclusive<u16> = 49152..=65535;

    /// The connection qualifier (as given to [`Psp::create`]).
    pub fn conn_qual(&self) -> ConnQual {
        self.conn_qual
    }

    /// The PSP flag it was created with.
    pub fn flag(&self) -> PspFlag {
        self.flag
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
        self.evd.ia.objects.psp.freed();
        self.evd.ia.lock_psps().remove(&self.conn_qual.port());
        let _ = self.evd.ia.engine.unlisten(self.conn_qual.port());
    }
}
