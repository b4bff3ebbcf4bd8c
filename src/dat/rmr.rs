//! Remote memory regions (dat_rmr_create / dat_rmr_bind / dat_rmr_query / dat_rmr_free,
//! DAT 2.0 §6.6): memory windows. Binding an RMR over a range of an LMR (same PZ) with remote
//! rights yields a new `rmr_context`, an R_Key that reaches only that range; the bind
//! completes with DAT_RMR_BIND_COMPLETION_EVENT on the EP's request EVD (a [`DtoEvent`] with
//! opcode [`WcOpcode::BindMw`], cookie and status). Unbinding or freeing the RMR invalidates
//! the key: a peer's RDMA with it then fails with a remote access error. The bound LMR stays
//! registered while the RMR is bound (its `free` is refused: DAT_INVALID_STATE).
//!
//! [`DtoEvent`]: super::evd::DtoEvent

use super::context::ConsumerContext;
use super::ep::Ep;
use super::error::{DatError, HandleKind};
use super::lmr::{Lmr, LmrTriplet, Registered};
use super::pz::{Pz, PzInner};
use crate::engine::runtime::Event;
use crate::mem::{MrError, Region};
use crate::transport::memory::Access;
use crate::transport::types::{WcOpcode, WcStatus, WorkCompletion};
use std::sync::{Arc, Mutex, MutexGuard};

struct Binding {
    lmr: Arc<Registered>,
    window: Region,
    triplet: LmrTriplet,
    access: Access,
}

/// What dat_rmr_query reports (DAT_RMR_PARAM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmrParam {
    pub pz_id: u32,
    /// The bound range, `None` while unbound.
    pub lmr_triplet: Option<LmrTriplet>,
    pub access: Access,
    /// The R_Key while bound.
    pub rmr_context: Option<u32>,
}

/// A memory window.
pub struct Rmr {
    pz: Arc<PzInner>,
    bound: Mutex<Option<Binding>>,
    context: ConsumerContext,
}

impl Rmr {
    /// dat_rmr_create: an unbound RMR in `pz`.
    pub fn create(pz: &Pz) -> Result<Rmr, DatError> {
        Ok(Rmr {
            pz: pz.inner.clone(),
            bound: Mutex::new(None),
            context: ConsumerContext::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Option<Binding>> {
        self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release(&self, b: Binding) {
        // Waits for RDMA in flight through the window, then the key is dead.
        let _ = self.pz.ia.mem.deregister(b.window.lkey);
        drop(b.lmr);
    }

    /// Checks `ep` (same PZ) and queues the bind completion on its request EVD.
    fn complete(&self, ep: &Ep, cookie: u64) -> Result<(), DatError> {
        let c = ep.inner.lock();
        if !Arc::ptr_eq(&c.pz, &self.pz) {
            return Err(DatError::InvalidArg {
                arg: 6,
                what: "EP of another PZ",
            });
        }
        if let Some(evd) = &c.request_evd {
            let wc = WorkCompletion {
                wr_id: cookie,
                status: WcStatus::Success,
                opcode: WcOpcode::BindMw,
                byte_len: 0,
                imm_data: None,
                invalidated_rkey: None,
                qp_num: c.qpn,
                srq: None,
            };
            evd.sink
                .queue
                .try_push(Event::Dto(wc))
                .map_err(|_| DatError::InsufficientResources("request EVD full".into()))?;
        }
        Ok(())
    }

    /// dat_rmr_bind: binds the RMR over `triplet` of `lmr` (same PZ) with the remote rights
    /// `access` (a subset of the LMR's), replacing a previous binding; returns the new
    /// `rmr_context`. The completion (cookie `cookie`) goes to `ep`'s request EVD.
    pub fn bind(
        &self,
        lmr: &Lmr,
        triplet: LmrTriplet,
        access: Access,
        ep: &Ep,
        cookie: u64,
    ) -> Result<u32, DatError> {
        if !Arc::ptr_eq(&lmr.reg.pz, &self.pz) {
            return Err(DatError::InvalidArg {
                arg: 2,
                what: "LMR of another PZ",
            });
        }
        if triplet.lmr_context != lmr.lmr_context() {
            return Err(DatError::InvalidArg {
                arg: 3,
                what: "triplet names another LMR",
            });
        }
        let window = self
            .pz
            .ia
            .mem
            .bind_window(
                triplet.lmr_context,
                self.pz.pz.id(),
                triplet.virtual_address,
                triplet.segment_length,
                access,
            )
            .map_err(|e| match e {
                MrError::InvalidParameter => DatError::InvalidArg {
                    arg: 3,
                    what: "range outside the LMR, or rights the LMR lacks",
                },
                MrError::InvalidKey => DatError::InvalidHandleOf {
                    kind: HandleKind::Lmr,
                    what: "LMR not registered",
                },
                e => DatError::InsufficientResources(e.to_string()),
            })?;
        let binding = Binding {
            lmr: lmr.reg.clone(),
            window,
            triplet,
            access,
        };
        if let Err(e) = self.complete(ep, cookie) {
            self.release(binding);
            return Err(e);
        }
        let rkey = binding.window.rkey;
        let old = self.lock().replace(binding);
        if let Some(old) = old {
            self.release(old);
        }
        Ok(rkey)
    }

    /// dat_rmr_bind with DAT_HANDLE_NULL as LMR: unbinds (the key stops working); the
    /// completion goes to `ep`'s request EVD.
    pub fn unbind(&self, ep: &Ep, cookie: u64) -> Result<(), DatError> {
        self.complete(ep, cookie)?;
        let old = self.lock().take();
        if let Some(old) = old {
            self.release(old);
        }
        Ok(())
    }

    /// dat_rmr_query.
    pub fn query(&self) -> RmrParam {
        let b = self.lock();
        RmrParam {
            pz_id: self.pz.pz.id(),
            lmr_triplet: b.as_ref().map(|b| b.triplet),
            access: b.as_ref().map_or(Access::empty(), |b| b.access),
            rmr_context: b.as_ref().map(|b| b.window.rkey),
        }
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.context
    }

    /// dat_rmr_free: unbinds (the key dies) and frees.
    pub fn free(self) {}
}

impl Drop for Rmr {
    fn drop(&mut self) {
        if let Some(b) = self.lock().take() {
            self.release(b);
        }
    }
}
