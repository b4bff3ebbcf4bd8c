//! Remote memory regions (dat_rmr_create / dat_rmr_bind / dat_rmr_query / dat_rmr_free,
//! DAT 2.0 §6.6): memory windows. Binding an RMR over a range of an LMR (same PZ) with remote
//! rights yields a new `rmr_context`, an R_Key that reaches only that range; the bind
//! completes with DAT_RMR_BIND_COMPLETION_EVENT on the EP's request EVD (a [`DtoEvent`] with
//! opcode [`WcOpcode::BindMw`], cookie and status). Unbinding or freeing the RMR invalidates
//! the key: a peer's RDMA with it then fails with a remote access error. The bound LMR stays
//! registered while the RMR is bound (its `free` is refused: DAT_INVALID_STATE).
//!
//! A peer's send with invalidate naming the `rmr_context` (IBTA vol. 1 §9.4.1.1.1) kills the
//! key too; [`Rmr::query`] then reports the RMR unbound.
//!
//! An RMR made by [`Rmr::create_for_ep`] (dat_rmr_create_for_ep, DAT 2.0 scope EP: an IB
//! type 2 memory window) is bound to at most one EP at a time: the EP it is bound through.
//! Its context then reaches memory only through that EP's connection: the peer of another
//! connection using it gets a remote access error.
//!
//! [`DtoEvent`]: super::evd::DtoEvent

use super::context::ConsumerContext;
use super::ep::{Ep, EpInner};
use super::ep_attr::CompletionFlags;
use super::error::{DatError, HandleKind};
use super::lmr::{Lmr, Registered};
use super::mem_priv::MemPriv;
use super::pz::{Pz, PzInner};
use super::triplet::LmrTriplet;
use super::window_sink::WindowSink;
use crate::engine::deregister::Deregister;
use crate::engine::runtime::Event;
use crate::mem::access::Access;
use crate::mem::{MrError, Region};
use crate::transport::types::{WcOpcode, WcStatus, WorkCompletion};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

/// The rights a window can grant: remote ones (its local use is the LMR's own).
pub const REMOTE_RIGHTS: Access = Access::REMOTE_READ
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

struct Binding {
    lmr: Arc<Registered>,
    window: Region,
    triplet: LmrTriplet,
    access: Access,
    /// The privileges as the consumer gave them.
    mem_priv: MemPriv,
    /// Scope EP: the EP it was bound through.
    ep: Option<Weak<EpInner>>,
}

/// What dat_rmr_query reports (DAT_RMR_PARAM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmrParam {
    /// DAT_RMR_PARAM.pz_handle as the PZ's id ([`Pz::id`]).
    pub pz_id: u32,
    /// The bound range, `None` while unbound.
    pub lmr_triplet: Option<LmrTriplet>,
    /// What the bind granted the peer (remote rights only, [`REMOTE_RIGHTS`]); empty while
    /// unbound.
    pub access: Access,
    /// DAT_RMR_PARAM.mem_priv: the privileges as the bind was given them; empty while
    /// unbound.
    pub mem_priv: MemPriv,
    /// The R_Key while bound.
    pub rmr_context: Option<u32>,
    /// Scope EP (dat_rmr_create_for_ep) rather than PZ.
    pub scope_ep: bool,
}

/// A memory window.
pub struct Rmr {
    /// Process-unique, never reused ([`Rmr::id`]).
    id: u64,
    pz: Arc<PzInner>,
    bound: Mutex<Option<Binding>>,
    context: ConsumerContext,
    /// dat_rmr_create_for_ep: scope EP (a binding belongs to the EP it was made through).
    for_ep: bool,
}

/// The id of the next RMR (64 bits: never wraps).
static NEXT_RMR_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Rmr {
    /// Its identity: what its bind completions name ([`DtoEvent::rmr`](super::DtoEvent::rmr)).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// dat_rmr_create: an unbound RMR in `pz`.
    pub fn create(pz: &Pz) -> Result<Rmr, DatError> {
        Ok(Self::unbound(pz, false))
    }

    /// An unbound RMR in `pz`, of scope EP when `for_ep`.
    fn unbound(pz: &Pz, for_ep: bool) -> Rmr {
        pz.inner.ia.objects.rmr.created();
        Rmr {
            id: NEXT_RMR_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            pz: pz.inner.clone(),
            bound: Mutex::new(None),
            context: ConsumerContext::default(),
            for_ep,
        }
    }

    /// dat_rmr_create_for_ep: an unbound RMR in `pz` of scope EP (DAT_RMR_SCOPE_EP, "bound to
    /// at most one EP at a time"; an IB type 2 memory window, vol. 1 §10.6.7): a binding
    /// belongs to the EP it was bound through. While bound, binding or unbinding it through
    /// another EP is refused (DAT_INVALID_STATE), and only that EP may use its context as a
    /// dat_ep_post_rdma_read_to_rmr sink; after an unbind (or a peer's invalidation) any EP of
    /// the PZ may bind it again.
    pub fn create_for_ep(pz: &Pz) -> Result<Rmr, DatError> {
        Ok(Self::unbound(pz, true))
    }

    /// True for an RMR of dat_rmr_create_for_ep (scope EP).
    pub fn is_for_ep(&self) -> bool {
        self.for_ep
    }

    /// The EP the current binding of an RMR of scope EP belongs to.
    pub fn bound_ep(&self) -> Option<u32> {
        let b = self.lock();
        let ep = b.as_ref()?.ep.as_ref()?.upgrade()?;
        let qpn = ep.lock().qpn;
        Some(qpn)
    }

    /// For an RMR of scope EP bound (with a live key) through another EP than `ep`: the
    /// refusal.
    fn check_scope(&self, ep: &Ep) -> Result<(), DatError> {
        let b = self.lock();
        let Some(b) = b.as_ref() else {
            return Ok(());
        };
        let Some(own) = &b.ep else {
            return Ok(());
        };
        let live = matches!(self.pz.ia.mem.query(b.window.lkey), Ok(i) if i.rkey.is_some());
        if live && !core::ptr::eq(own.as_ptr(), Arc::as_ptr(&ep.inner)) {
            return Err(DatError::InvalidState(
                "RMR of scope EP bound through another EP".into(),
            ));
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Option<Binding>> {
        self.bound.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn release(&self, b: Binding) {
        self.pz.ia.lock_windows().remove(&b.window.rkey);
        // Waits for RDMA in flight through the window, then the key is dead.
        let _ = self.pz.ia.mem.deregister(b.window.lkey);
        drop(b.lmr);
    }

    /// Checks `ep` (same PZ) and queues the bind completion on its request EVD, unless
    /// `flags` suppress it (DAT_COMPLETION_SUPPRESS_FLAG: a bind that succeeds reports
    /// nothing, dat_rmr_bind(3DAT)).
    fn complete(&self, ep: &Ep, cookie: u64, flags: CompletionFlags) -> Result<(), DatError> {
        let c = ep.inner.lock();
        if !Arc::ptr_eq(&c.pz, &self.pz) {
            return Err(DatError::InvalidArg {
                arg: 6,
                what: "EP of another PZ",
            });
        }
        if flags.contains(CompletionFlags::SUPPRESS) {
            return Ok(());
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
                .try_push(Event::Bind { wc, rmr: self.id })
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
        self.bind_with(lmr, triplet, access, ep, cookie, CompletionFlags::DEFAULT)
    }

    /// [`Rmr::bind`] with completion flags (SUPPRESS: no completion when it succeeds); a flag
    /// outside [`CompletionFlags::RMR_BIND`] is DAT_INVALID_PARAMETER (argument 8).
    pub fn bind_with(
        &self,
        lmr: &Lmr,
        triplet: LmrTriplet,
        access: Access,
        ep: &Ep,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<u32, DatError> {
        let privs = MemPriv::of_access(access);
        self.bind_inner(
            lmr,
            triplet,
            access & REMOTE_RIGHTS,
            privs,
            ep,
            cookie,
            flags,
        )
    }

    /// dat_rmr_bind(3DAT) with DAT_MEM_PRIV_FLAGS as the consumer gives them: the window
    /// grants what they grant remotely ([`MemPriv::access`] within [`REMOTE_RIGHTS`]), and
    /// dat_rmr_query reports them as given.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_privileges(
        &self,
        lmr: &Lmr,
        triplet: LmrTriplet,
        privs: MemPriv,
        ep: &Ep,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<u32, DatError> {
        let access = privs.access() & REMOTE_RIGHTS;
        self.bind_inner(lmr, triplet, access, privs, ep, cookie, flags)
    }

    #[allow(clippy::too_many_arguments)]
    fn bind_inner(
        &self,
        lmr: &Lmr,
        triplet: LmrTriplet,
        access: Access,
        mem_priv: MemPriv,
        ep: &Ep,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<u32, DatError> {
        check_bind_flags(flags)?;
        if !Arc::ptr_eq(&lmr.reg.pz, &self.pz) {
            return Err(DatError::InvalidArg {
                arg: 2,
                what: "LMR of another PZ",
            });
        }
        self.check_scope(ep)?;
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
            .bind_window_on_qp(
                triplet.lmr_context,
                self.pz.pz.id(),
                triplet.virtual_address,
                triplet.segment_length,
                access,
                // Scope EP: a type 2 window of the EP's QP; scope PZ: any QP.
                if self.for_ep { ep.qpn() } else { 0 },
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
            mem_priv,
            ep: self.for_ep.then(|| Arc::downgrade(&ep.inner)),
        };
        if let Err(e) = self.complete(ep, cookie, flags) {
            self.release(binding);
            return Err(e);
        }
        let rkey = binding.window.rkey;
        self.pz.ia.lock_windows().insert(
            rkey,
            WindowSink {
                window_lkey: binding.window.lkey,
                pz_id: self.pz.pz.id(),
                triplet,
                access,
                ep: binding.ep.clone(),
            },
        );
        let old = self.lock().replace(binding);
        if let Some(old) = old {
            self.release(old);
        }
        Ok(rkey)
    }

    /// dat_rmr_bind with DAT_HANDLE_NULL as LMR: unbinds (the key stops working); the
    /// completion goes to `ep`'s request EVD.
    pub fn unbind(&self, ep: &Ep, cookie: u64) -> Result<(), DatError> {
        self.unbind_with(ep, cookie, CompletionFlags::DEFAULT)
    }

    /// [`Rmr::unbind`] with completion flags, as [`Rmr::bind_with`].
    pub fn unbind_with(
        &self,
        ep: &Ep,
        cookie: u64,
        flags: CompletionFlags,
    ) -> Result<(), DatError> {
        check_bind_flags(flags)?;
        self.check_scope(ep)?;
        self.complete(ep, cookie, flags)?;
        let old = self.lock().take();
        if let Some(old) = old {
            self.release(old);
        }
        Ok(())
    }

    /// dat_rmr_query. An RMR whose key a peer invalidated (send with invalidate) reports
    /// itself unbound.
    pub fn query(&self) -> RmrParam {
        let mut b = self.lock();
        let dead = b.as_ref().is_some_and(
            |b| !matches!(self.pz.ia.mem.query(b.window.lkey), Ok(i) if i.rkey.is_some()),
        );
        if dead {
            if let Some(old) = b.take() {
                drop(b);
                self.release(old);
                b = self.lock();
            }
        }
        RmrParam {
            pz_id: self.pz.pz.id(),
            lmr_triplet: b.as_ref().map(|b| b.triplet),
            access: b.as_ref().map_or(Access::empty(), |b| b.access),
            mem_priv: b.as_ref().map_or(MemPriv::empty(), |b| b.mem_priv),
            rmr_context: b.as_ref().map(|b| b.window.rkey),
            scope_ep: self.for_ep,
        }
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.context
    }

    /// dat_rmr_free: unbinds (the key dies) and frees.
    pub fn free(self) {}
}

/// dat_rmr_bind(3DAT)'s `completion_flags`: suppression and unsignaled only (argument 8).
fn check_bind_flags(flags: CompletionFlags) -> Result<(), DatError> {
    if CompletionFlags::RMR_BIND.contains(flags) {
        Ok(())
    } else {
        Err(DatError::InvalidArg {
            arg: 8,
            what: "a bind takes only the suppress and unsignaled completion flags",
        })
    }
}

impl Drop for Rmr {
    fn drop(&mut self) {
        self.pz.ia.objects.rmr.freed();
        if let Some(b) = self.lock().take() {
            self.release(b);
        }
    }
}
