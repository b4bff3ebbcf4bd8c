//! Consumer notification objects (dat_cno_create / dat_cno_wait / dat_cno_query /
//! dat_cno_free, DAT 2.0 §6.3.1): one wait over many EVDs. An EVD attached with
//! [`Evd::modify_cno`](super::evd::Evd::modify_cno) (or created with
//! [`Evd::create_with_cno`](super::evd::Evd::create_with_cno)) triggers its CNO when an event
//! arrives while it is enabled, once until it was emptied again (dat_cno_wait(3): a
//! notification, not a level); `wait` names that EVD and leaves the event on it to be
//! dequeued.
//! A CNO with attached EVDs is not freed (DAT_INVALID_STATE, DAT_INVALID_STATE_CNO_IN_USE).

use super::context::ConsumerContext;
use super::error::{DatError, Refused, StateKind};
use super::evd::EvdInner;
use super::ia::{Ia, IaInner};
use crate::engine::event_queue::Idle;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

/// Idle rounds a CNO waiter spins (driving progress) before it naps.
const CNO_SPIN_ROUNDS: u32 = 2_000;

static NEXT_CNO_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) struct CnoInner {
    pub ia: Arc<IaInner>,
    id: u64,
    /// The attached EVDs (an EVD dropped without detaching simply disappears).
    evds: Mutex<Vec<Weak<EvdInner>>>,
    context: ConsumerContext,
}

impl CnoInner {
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Weak<EvdInner>>> {
        let mut g = self.evds.lock().unwrap_or_else(|p| p.into_inner());
        g.retain(|w| w.strong_count() > 0);
        g
    }

    pub(crate) fn attach(&self, evd: &Arc<EvdInner>) {
        self.lock().push(Arc::downgrade(evd));
    }

    pub(crate) fn detach(&self, evd: &Arc<EvdInner>) {
        let target = Arc::as_ptr(evd);
        self.lock().retain(|w| w.as_ptr() != target);
    }

    /// The first attached EVD that triggers the CNO (taking its trigger).
    fn triggered(&self) -> Option<u64> {
        let evds: Vec<Arc<EvdInner>> = self.lock().iter().filter_map(Weak::upgrade).collect();
        evds.iter().find(|e| e.take_trigger()).map(|e| e.sink.id())
    }
}

/// What dat_cno_query reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnoParam {
    /// The IA's address (the CNO's IA).
    pub ia_address: std::net::IpAddr,
    /// EVDs attached now.
    pub attached: usize,
}

/// A consumer notification object.
pub struct Cno {
    pub(crate) inner: Arc<CnoInner>,
}

impl Cno {
    /// dat_cno_create.
    pub fn create(ia: &Ia) -> Result<Cno, DatError> {
        Ok(Cno {
            inner: Arc::new(CnoInner {
                ia: ia.inner.clone(),
                id: NEXT_CNO_ID.fetch_add(1, Ordering::Relaxed),
                evds: Mutex::new(Vec::new()),
                context: ConsumerContext::default(),
            }),
        })
    }

    /// A process-unique id (what [`EvdParam::cno`](super::evd::EvdParam::cno) names).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    /// dat_cno_trigger: the [`Evd::id`](super::evd::Evd::id) of the attached EVD that made
    /// the CNO ready, if one did; DAT_TIMEOUT_EXPIRED at once otherwise ([`Cno::wait`] that
    /// does not wait).
    pub fn trigger(&self) -> Result<u64, DatError> {
        self.wait(Some(Duration::ZERO))
    }

    /// dat_cno_wait: waits until an attached, enabled EVD got an event and returns that EVD's
    /// [`Evd::id`](super::evd::Evd::id); DAT_TIMEOUT_EXPIRED after `timeout` (`None`: forever).
    /// Inline progress is driven meanwhile; in core mode the wait spins, then naps briefly.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<u64, DatError> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut rounds = 0u32;
        loop {
            if let Some(evd) = self.inner.triggered() {
                return Ok(evd);
            }
            let engine = &self.inner.ia.engine;
            if engine.progress() {
                // Work was done: spin again before napping.
                rounds = 0;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(DatError::TimeoutExpired);
            }
            rounds = rounds.saturating_add(1);
            match engine.idle() {
                Idle::Nap(nap) if rounds > CNO_SPIN_ROUNDS => std::thread::sleep(nap),
                // Core mode: the poll threads fire the CNO; a short sleep keeps the wait cheap.
                Idle::UntilWoken if rounds > CNO_SPIN_ROUNDS => {
                    std::thread::sleep(Duration::from_micros(50))
                }
                _ => core::hint::spin_loop(),
            }
        }
    }

    /// dat_cno_query.
    pub fn query(&self) -> CnoParam {
        CnoParam {
            ia_address: self.inner.ia.ips.primary(),
            attached: self.inner.lock().len(),
        }
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.inner.context
    }

    /// Whether [`Cno::free`] would free the CNO: DAT_INVALID_STATE (CNO_IN_USE) while EVDs are
    /// attached (dat_cno_free(3DAT)).
    pub fn can_free(&self) -> Result<(), DatError> {
        let attached = self.inner.lock().len();
        if attached > 0 {
            return Err(DatError::InvalidStateOf {
                kind: StateKind::CnoInUse,
                what: format!("{attached} EVDs attached"),
            });
        }
        Ok(())
    }

    /// dat_cno_free: refused as [`Cno::can_free`] says.
    pub fn free(self) -> Result<(), Refused<Cno>> {
        match self.can_free() {
            Ok(()) => Ok(()),
            Err(error) => Err(Refused {
                object: self,
                error,
            }),
        }
    }
}
