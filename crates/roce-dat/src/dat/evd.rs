//! Event dispatchers (dat_evd_create / dequeue / wait / free): a bounded ring the engine's
//! shards push into, dequeued without waiting (DAT_QUEUE_EMPTY) or waited on with a timeout
//! and a threshold (DAT_TIMEOUT_EXPIRED). Dequeuing a connection event moves its EP's state;
//! a connection request becomes a [`Cr`].
//!
//! The EVD state of DAT 2.0 §6.3.2: dat_evd_query, dat_evd_resize (never below the queued
//! count: DAT_INVALID_STATE), dat_evd_enable / dat_evd_disable (a disabled EVD does not trigger
//! its CNO; events still queue, dequeue and end a dat_evd_wait), dat_evd_set_unwaitable /
//! dat_evd_clear_unwaitable (dat_evd_wait fails with DAT_INVALID_STATE and releases waiters),
//! dat_evd_post_se (DAT_SOFTWARE_EVENT, only on an EVD created with DAT_EVD_SOFTWARE_FLAG) and
//! dat_evd_modify_cno.

use super::cno::{Cno, CnoInner};
use super::conn_qual::ConnQual;
use super::context::ConsumerContext;
use super::cr::Cr;
use super::ep::Ep;
use super::error::{DatError, Refused, StateKind};
use super::ia::{Ia, IaInner};
use super::pz::Pz;
use crate::engine::event_queue::GatedWaitError;
use crate::engine::runtime::{AsyncEvent, ConnEvent, Event, EventSink};
use crate::transport::types::{WcOpcode, WcStatus};
use crate::wire::cm_msg::RejReason;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

pub use super::evd_flags::EvdFlags;

/// A DTO completion (DAT_DTO_COMPLETION_EVENT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DtoEvent {
    /// The EP's QPN (its identity; [`Ep::qpn`](super::ep::Ep::qpn)).
    pub ep: u32,
    /// DAT_DTO_COMPLETION_EVENT_DATA.user_cookie: the cookie given to the post.
    pub cookie: u64,
    /// DAT_DTO_COMPLETION_EVENT_DATA.status (the C layer maps it onto DAT_DTO_*): `Success`,
    /// or an error; an error breaks the connection, and the DTOs still outstanding then
    /// complete with `WrFlushErr`.
    pub status: WcStatus,
    /// DAT_DTO_COMPLETION_EVENT_DATA.transfered_length: the bytes moved (a receive: placed
    /// in its buffers; an RDMA read: read).
    pub transferred_length: u32,
    /// DAT_DTO_COMPLETION_EVENT_DATA.operation: which post or receive completed.
    pub opcode: WcOpcode,
    /// Immediate data of an RDMA write with immediate (DAT IB extension event).
    pub immediate: Option<u32>,
    /// A receive of a send with invalidate: the `rmr_context` (R_Key) the sender invalidated
    /// here (IBTA vol. 1 §9.4.1.1.1; dat_ep_post_send_with_invalidate).
    pub invalidated_rmr: Option<u32>,
    /// A bind's completion (opcode `BindMw`, DAT_RMR_BIND_COMPLETION_EVENT): the RMR bound or
    /// unbound ([`Rmr::id`](super::Rmr::id)).
    pub rmr: Option<u64>,
}

/// Kinds of connection events (DAT_CONNECTION_EVENT_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionEventKind {
    /// DAT_CONNECTION_EVENT_ESTABLISHED: the connection is up; dequeuing it makes the EP
    /// CONNECTED.
    Established,
    /// DAT_CONNECTION_EVENT_PEER_REJECTED: the peer's consumer rejected (a REJ with reason
    /// "consumer defined", IBTA vol. 1 §12.6.7.2: dat_cr_reject, or a request dropped
    /// unanswered); the REJ's private data comes with it.
    PeerRejected,
    /// DAT_CONNECTION_EVENT_NON_PEER_REJECTED: the peer's provider rejected for another reason
    /// (no listener on the qualifier, no resources, a timeout, ...; DAT 2.0 §6.3.2.3); see the
    /// event's `reject_reason`.
    NonPeerRejected,
    /// Nobody answered (DAT_CONNECTION_EVENT_UNREACHABLE).
    Unreachable,
    /// No answer before dat_ep_connect's timeout (DAT_CONNECTION_EVENT_TIMED_OUT).
    TimedOut,
    /// DAT_CONNECTION_EVENT_BROKEN: setting the connection up failed locally, or the provider
    /// broke an established connection (a DTO completed in error, DAT 2.0 §6.6; the hard
    /// receive watermark, dat_ep_set_watermark(3DAT)).
    Broken,
    /// DAT_CONNECTION_EVENT_DISCONNECTED: the connection was torn down, by
    /// [`Ep::disconnect`](super::ep::Ep::disconnect) on either side or an unanswered DREQ.
    Disconnected,
}

/// An event dequeued from an EVD.
#[derive(Debug)]
pub enum DatEvent {
    /// DAT_DTO_COMPLETION_EVENT (and DAT_RMR_BIND_COMPLETION_EVENT): a post or receive
    /// completed.
    Dto(DtoEvent),
    /// DAT_CONNECTION_EVENT_*: the connection of an EP changed; dequeuing it moves the EP's
    /// state.
    Connection {
        /// The EP's QPN ([`Ep::qpn`](super::ep::Ep::qpn)).
        ep: u32,
        /// What happened.
        kind: ConnectionEventKind,
        /// The peer's private data: of its accept (the REP) for `Established` on the active
        /// side, of its REJ for `PeerRejected` / `NonPeerRejected`; empty otherwise.
        private_data: Vec<u8>,
        /// For `PeerRejected` / `NonPeerRejected`: the CM's reason.
        reject_reason: Option<RejReason>,
    },
    /// DAT_CONNECTION_REQUEST_EVENT: a peer asks to connect to a PSP or RSP of this IA;
    /// answer it with [`Cr::accept`] or [`Cr::reject`] (dropping it unanswered rejects it).
    ConnectionRequest(Cr),
    /// An asynchronous event; a software event (dat_evd_post_se) is
    /// `Async(AsyncEvent::Software { pointer })` ([`DatEvent::software`]).
    Async(AsyncEvent),
}

impl DatEvent {
    /// The pointer value of a DAT_SOFTWARE_EVENT, `None` for every other event.
    pub fn software(&self) -> Option<u64> {
        match self {
            DatEvent::Async(AsyncEvent::Software { pointer }) => Some(*pointer),
            _ => None,
        }
    }
}

/// What dat_evd_query reports (DAT_EVD_PARAM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvdParam {
    /// evd_qlen: the capacity.
    pub size: usize,
    /// DAT_EVD_PARAM.evd_flags: the streams the EVD was created for.
    pub flags: EvdFlags,
    /// Events queued at the time of the query.
    pub queued: usize,
    /// DAT_EVD_PARAM.evd_state: enabled (dat_evd_enable) or disabled (dat_evd_disable).
    pub enabled: bool,
    /// DAT_EVD_PARAM.evd_state: waitable, or set unwaitable (dat_evd_set_unwaitable).
    pub waitable: bool,
    /// The attached CNO's id ([`Cno::id`]).
    pub cno: Option<u64>,
}

pub(crate) struct EvdInner {
    pub ia: Arc<IaInner>,
    pub sink: Arc<EventSink>,
    pub flags: EvdFlags,
    /// EP completion streams fed into this EVD (completion-flag rules of dat_ep_create).
    pub streams: std::sync::Mutex<super::evd_streams::DtoStreams>,
    /// dat_evd_enable / dat_evd_disable.
    pub enabled: AtomicBool,
    /// dat_evd_clear_unwaitable / dat_evd_set_unwaitable.
    pub waitable: AtomicBool,
    /// The attached CNO (dat_evd_modify_cno).
    pub cno: Mutex<Option<Arc<CnoInner>>>,
    /// The CNO was told about the events queued now; cleared when the EVD is emptied. A CNO
    /// notifies of an arrival, not of a level (dat_cno_wait(3)): an EVD whose events stay
    /// queued after it was reported does not wake the CNO again until it was emptied, so a
    /// consumer that waits on the CNO and then serves another EVD is not woken in a loop.
    notified: AtomicBool,
    pub context: ConsumerContext,
}

impl Drop for EvdInner {
    fn drop(&mut self) {
        self.ia.objects.evd.freed();
    }
}

impl EvdInner {
    pub(crate) fn lock_cno(&self) -> MutexGuard<'_, Option<Arc<CnoInner>>> {
        self.cno.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True (once per arrival on an empty EVD, see `notified`) when an enabled EVD holds an
    /// event the CNO was not told about: what triggers its CNO.
    pub(crate) fn take_trigger(&self) -> bool {
        if self.sink.queue.is_empty() {
            self.rearm();
            false
        } else {
            self.enabled.load(Ordering::Acquire) && !self.notified.swap(true, Ordering::AcqRel)
        }
    }

    /// The EVD was seen empty: its next event triggers the CNO again.
    fn rearm(&self) {
        if self.notified.load(Ordering::Relaxed) {
            self.notified.store(false, Ordering::Release);
        }
    }

    pub(crate) fn lock_streams(&self) -> std::sync::MutexGuard<'_, super::evd_streams::DtoStreams> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An event dispatcher (DAT_EVD_HANDLE): a bounded queue of events of the streams its
/// [`EvdFlags`] name, dequeued or waited on by the consumer.
pub struct Evd {
    pub(crate) inner: Arc<EvdInner>,
}

impl Evd {
    /// Creates an EVD holding up to `size` events of the `flags` streams (dat_evd_create(3DAT)).
    /// Refused with DAT_INVALID_PARAMETER: a size outside 1..=max_evd_qlen (argument 2,
    /// [`check_evd_qlen`](super::ia_attr::check_evd_qlen)), no stream or
    /// [`EvdFlags::ASYNC`] (argument 4: the IA's one async EVD is made by dat_ia_open).
    pub fn create(ia: &Ia, size: usize, flags: EvdFlags) -> Result<Evd, DatError> {
        super::limits::check_evd_qlen(size, 2)?;
        if flags.is_empty() || flags.contains(EvdFlags::ASYNC) {
            return Err(DatError::InvalidArg {
                arg: 4,
                what: "EVD flags: none, or the async EVD's",
            });
        }
        // Its overflows are reported on the async EVD of its own IA.
        let sink = EventSink::reporting_to(size, &ia.inner.async_sink);
        Ok(Self::from_sink(&ia.inner, sink, flags))
    }

    pub(crate) fn from_sink(ia: &Arc<IaInner>, sink: Arc<EventSink>, flags: EvdFlags) -> Evd {
        ia.objects.evd.created();
        Evd {
            inner: Arc::new(EvdInner {
                ia: ia.clone(),
                sink,
                flags,
                streams: Default::default(),
                enabled: AtomicBool::new(true),
                waitable: AtomicBool::new(true),
                cno: Mutex::new(None),
                notified: AtomicBool::new(false),
                context: ConsumerContext::default(),
            }),
        }
    }

    /// dat_evd_create with a CNO: as [`Evd::create`], attached to `cno`.
    pub fn create_with_cno(
        ia: &Ia,
        size: usize,
        cno: Option<&Cno>,
        flags: EvdFlags,
    ) -> Result<Evd, DatError> {
        let evd = Self::create(ia, size, flags)?;
        evd.modify_cno(cno)?;
        Ok(evd)
    }

    /// A process-unique id of this EVD (what [`Cno::wait`] returns).
    pub fn id(&self) -> u64 {
        self.inner.sink.id()
    }

    /// dat_evd_query.
    pub fn query(&self) -> EvdParam {
        EvdParam {
            size: self.size(),
            flags: self.inner.flags,
            queued: self.len(),
            enabled: self.inner.enabled.load(Ordering::Acquire),
            waitable: self.inner.waitable.load(Ordering::Acquire),
            cno: self.inner.lock_cno().as_ref().map(|c| c.id()),
        }
    }

    /// dat_evd_resize: the capacity becomes `size`, the queued events stay; refused with
    /// DAT_INVALID_STATE when more events are queued than `size` holds, DAT_INVALID_PARAMETER
    /// (argument 2) outside 1..=max_evd_qlen, as [`Evd::create`].
    pub fn resize(&self, size: usize) -> Result<(), DatError> {
        super::limits::check_evd_qlen(size, 2)?;
        self.inner.sink.queue.resize(size).map_err(|queued| {
            DatError::InvalidState(format!("{queued} events queued, more than {size}"))
        })
    }

    /// Enabled (dat_evd_enable / dat_evd_disable).
    pub fn is_enabled(&self) -> bool {
        self.inner.enabled.load(Ordering::Acquire)
    }

    /// Waitable (dat_evd_clear_unwaitable / dat_evd_set_unwaitable).
    pub fn is_waitable(&self) -> bool {
        self.inner.waitable.load(Ordering::Acquire)
    }

    /// dat_evd_enable.
    pub fn enable(&self) {
        self.inner.enabled.store(true, Ordering::Release);
    }

    /// dat_evd_disable: events still queue, dequeue and end a dat_evd_wait, but the CNO is
    /// not triggered until the EVD is enabled again.
    pub fn disable(&self) {
        self.inner.enabled.store(false, Ordering::Release);
    }

    /// dat_evd_set_unwaitable: waiters return DAT_INVALID_STATE, and so does every
    /// dat_evd_wait until dat_evd_clear_unwaitable.
    pub fn set_unwaitable(&self) {
        self.inner.waitable.store(false, Ordering::Release);
        self.inner.sink.queue.wake_all();
    }

    /// dat_evd_clear_unwaitable.
    pub fn clear_unwaitable(&self) {
        self.inner.waitable.store(true, Ordering::Release);
    }

    /// dat_evd_post_se: queues a DAT_SOFTWARE_EVENT carrying `pointer`. Only an EVD created
    /// with DAT_EVD_SOFTWARE_FLAG takes one (else DAT_INVALID_PARAMETER, argument 1: the EVD
    /// is the wrong one); a full EVD refuses it with DAT_QUEUE_FULL.
    pub fn post_se(&self, pointer: u64) -> Result<(), DatError> {
        if !self.inner.flags.contains(EvdFlags::SOFTWARE) {
            return Err(DatError::InvalidArg {
                arg: 1,
                what: "EVD created without DAT_EVD_SOFTWARE_FLAG",
            });
        }
        self.inner
            .sink
            .queue
            .try_push(Event::Async(AsyncEvent::Software { pointer }))
            .map_err(|_| DatError::QueueFull)
    }

    /// dat_evd_modify_cno: attaches this EVD to `cno` (detaching it from its previous CNO),
    /// or detaches it (`None`). The CNO must belong to the EVD's IA.
    pub fn modify_cno(&self, cno: Option<&Cno>) -> Result<(), DatError> {
        if let Some(c) = cno {
            if !Arc::ptr_eq(&c.inner.ia, &self.inner.ia) {
                return Err(DatError::InvalidHandleOf {
                    kind: super::error::HandleKind::Cno,
                    what: "CNO of another IA",
                });
            }
        }
        let mut slot = self.inner.lock_cno();
        if let Some(old) = slot.take() {
            old.detach(&self.inner);
        }
        if let Some(c) = cno {
            c.inner.attach(&self.inner);
            *slot = Some(c.inner.clone());
        }
        Ok(())
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.inner.context
    }

    /// The stream flags.
    pub fn flags(&self) -> EvdFlags {
        self.inner.flags
    }

    /// Capacity.
    pub fn size(&self) -> usize {
        self.inner.sink.queue.capacity()
    }

    /// Events queued now.
    pub fn len(&self) -> usize {
        self.inner.sink.queue.len()
    }

    /// True when no event is queued.
    pub fn is_empty(&self) -> bool {
        self.inner.sink.queue.is_empty()
    }

    /// True (once) if an event did not fit since the last call (DAT_EVD_OVERFLOW).
    pub fn take_overflow(&self) -> bool {
        self.inner.sink.queue.take_overflow()
    }

    /// Dequeues an event without waiting (DAT_QUEUE_EMPTY when none). When the ring is empty,
    /// inline progress polls the shards once and looks again.
    pub fn dequeue(&self) -> Result<DatEvent, DatError> {
        let queue = &self.inner.sink.queue;
        let (ev, emptied) = match queue.pop_noting_empty() {
            Some(got) => got,
            None => {
                self.inner.ia.engine.progress();
                queue.pop_noting_empty().ok_or(DatError::QueueEmpty)?
            }
        };
        if emptied {
            self.inner.rearm();
        }
        Ok(self.convert(ev))
    }

    /// Threads blocked in [`Evd::wait`] on this EVD now.
    pub fn waiters(&self) -> usize {
        self.inner.sink.queue.waiting()
    }

    /// Waits until `threshold` events are queued, then dequeues one; DAT_TIMEOUT_EXPIRED
    /// after `timeout` (`None`: DAT_TIMEOUT_INFINITE). dat_evd_wait(3DAT): a threshold outside
    /// 1..=the EVD's size is DAT_INVALID_PARAMETER (argument 3); an unwaitable EVD is
    /// DAT_INVALID_STATE_EVD_UNWAITABLE at once. The enable state does not matter: disabling
    /// stops the CNO's notifications only (dat_cno_wait(3DAT): "A uDAPL Consumer waiting
    /// directly upon an Event Dispatcher preempts the CNO"), as in the OFA reference provider,
    /// whose dat_evd_wait checks the waitable state alone.
    pub fn wait(&self, timeout: Option<Duration>, threshold: usize) -> Result<DatEvent, DatError> {
        if threshold == 0 || threshold > self.size() {
            return Err(DatError::InvalidArg {
                arg: 3,
                what: "threshold outside 1..=the EVD size",
            });
        }
        let unwaitable = || DatError::InvalidStateOf {
            kind: StateKind::EvdUnwaitable,
            what: "dat_evd_wait on an unwaitable EVD".into(),
        };
        if !self.is_waitable() {
            return Err(unwaitable());
        }
        let inner = &self.inner;
        let engine = &inner.ia.engine;
        let got = inner.sink.queue.wait_gated(
            timeout,
            threshold,
            || engine.progress(),
            || {
                if engine.failed() && inner.sink.queue.len() < threshold {
                    // What is queued is still delivered (the catastrophic event itself).
                    Err(true)
                } else if inner.waitable.load(Ordering::Acquire) {
                    Ok(())
                } else {
                    Err(false)
                }
            },
            engine.idle(),
        );
        match got {
            Ok(ev) => {
                if inner.sink.queue.is_empty() {
                    inner.rearm();
                }
                Ok(self.convert(ev))
            }
            Err(GatedWaitError::Timeout) => Err(DatError::TimeoutExpired),
            Err(GatedWaitError::Gate(false)) => Err(unwaitable()),
            // A poll thread died (AsyncEvent::ShardFailed): nothing will come.
            Err(GatedWaitError::Gate(true)) => Err(DatError::Internal(
                "the provider's poll thread failed".into(),
            )),
        }
    }

    fn convert(&self, ev: Event) -> DatEvent {
        match ev {
            Event::Dto(wc) => DatEvent::Dto(DtoEvent {
                ep: wc.qp_num,
                cookie: wc.wr_id,
                status: wc.status,
                // An atomic moves its 8-byte original value (dat_ib_extensions.h).
                transferred_length: match wc.opcode {
                    WcOpcode::CompSwap | WcOpcode::FetchAdd => 8,
                    _ => wc.byte_len,
                },
                opcode: wc.opcode,
                immediate: wc.imm_data.map(super::immediate::from_transport),
                invalidated_rmr: wc.invalidated_rkey,
                rmr: None,
            }),
            Event::Bind { wc, rmr } => DatEvent::Dto(DtoEvent {
                ep: wc.qp_num,
                cookie: wc.wr_id,
                status: wc.status,
                transferred_length: 0,
                opcode: wc.opcode,
                immediate: None,
                invalidated_rmr: None,
                rmr: Some(rmr),
            }),
            Event::Connection { qpn, event } => {
                let (kind, private_data, reject_reason) = match event {
                    ConnEvent::Established { private_data } => {
                        (ConnectionEventKind::Established, private_data, None)
                    }
                    ConnEvent::PeerRejected {
                        reason,
                        private_data,
                    } => (
                        if reason == RejReason::ConsumerDefined {
                            ConnectionEventKind::PeerRejected
                        } else {
                            ConnectionEventKind::NonPeerRejected
                        },
                        private_data,
                        Some(reason),
                    ),
                    ConnEvent::Unreachable => (ConnectionEventKind::Unreachable, Vec::new(), None),
                    ConnEvent::TimedOut => (ConnectionEventKind::TimedOut, Vec::new(), None),
                    ConnEvent::Disconnected => {
                        (ConnectionEventKind::Disconnected, Vec::new(), None)
                    }
                    ConnEvent::Broken(_) => (ConnectionEventKind::Broken, Vec::new(), None),
                };
                let ep = self.inner.ia.lock_eps().get(&qpn).and_then(|w| w.upgrade());
                if let Some(ep) = ep {
                    ep.on_connection_event(qpn, kind);
                }
                DatEvent::Connection {
                    ep: qpn,
                    kind,
                    private_data,
                    reject_reason,
                }
            }
            Event::Request(req) => {
                let ia = &self.inner.ia;
                let rsp = ia.lock_rsps().get(&req.port).cloned();
                // The request names the qualifier its service point was created on.
                let (qual, provider_pz) = match &rsp {
                    Some((q, _)) => (Some(*q), None),
                    None => ia
                        .lock_psps()
                        .get(&req.port)
                        .map_or((None, None), |l| (Some(l.qual), l.provider_pz.clone())),
                };
                let qual = qual.unwrap_or(ConnQual::from(req.port));
                let reserved = rsp.and_then(|(_, w)| w.upgrade());
                let cr = Cr::new(ia, req, qual);
                // A PSP with PspFlag::Provider: the provider makes the request's EP. If it
                // cannot (the IA's EP limit), the request comes without one and the consumer
                // may accept on an EP of its own.
                let provider_ep = provider_pz.and_then(|inner| {
                    Ep::create_in(ia, &Pz { inner }, None, None, None, None, None).ok()
                });
                DatEvent::ConnectionRequest(match (reserved, provider_ep) {
                    (Some(ep), _) => cr.with_reserved(ep),
                    (None, Some(ep)) => cr.with_provider_ep(ep.inner),
                    (None, None) => cr,
                })
            }
            Event::Async(a) => DatEvent::Async(a),
        }
    }

    /// Whether [`Evd::free`] would free the EVD (dat_evd_free(3DAT)): DAT_INVALID_STATE with
    /// EVD_ASYNC for the IA's asynchronous EVD (it goes with the IA), EVD_IN_USE while an EP
    /// or a service point still uses it.
    pub fn can_free(&self) -> Result<(), DatError> {
        if self.flags().contains(EvdFlags::ASYNC) {
            return Err(DatError::InvalidStateOf {
                kind: StateKind::EvdAsync,
                what: "the IA's asynchronous EVD".into(),
            });
        }
        let users = Arc::strong_count(&self.inner) - 1;
        if users > 0 {
            return Err(DatError::InvalidStateOf {
                kind: StateKind::EvdInUse,
                what: format!("EVD used by {users} EPs/PSPs"),
            });
        }
        Ok(())
    }

    /// Frees the EVD; refused as [`Evd::can_free`] says.
    pub fn free(self) -> Result<(), Refused<Evd>> {
        if let Err(error) = self.can_free() {
            return Err(Refused {
                object: self,
                error,
            });
        }
        if let Some(cno) = self.inner.lock_cno().take() {
            cno.detach(&self.inner);
        }
        Ok(())
    }
}
