//! Event dispatchers (dat_evd_create / dequeue / wait / free): a bounded ring the engine's
//! shards push into, dequeued without waiting (DAT_QUEUE_EMPTY) or waited on with a timeout
//! and a threshold (DAT_TIMEOUT_EXPIRED). Dequeuing a connection event moves its EP's state;
//! a connection request becomes a [`Cr`](super::cr::Cr).

use super::cr::Cr;
use super::error::{DatError, Refused};
use super::ia::{Ia, IaInner};
use crate::engine::event_queue::WaitError;
use crate::engine::runtime::{AsyncEvent, ConnEvent, Event, EventSink};
use crate::transport::types::{WcOpcode, WcStatus};
use crate::wire::cm_msg::RejReason;
use bitflags::bitflags;
use std::sync::Arc;
use std::time::Duration;

bitflags! {
    /// Event streams an EVD accepts (DAT_EVD_*_FLAG, with the DAT values).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct EvdFlags: u32 {
        const SOFTWARE = 0x001;
        const CR = 0x010;
        const DTO = 0x020;
        const CONNECTION = 0x040;
        const RMR_BIND = 0x080;
        const ASYNC = 0x100;
    }
}

/// A DTO completion (DAT_DTO_COMPLETION_EVENT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DtoEvent {
    /// The EP's QPN (its identity; [`Ep::qpn`](super::ep::Ep::qpn)).
    pub ep: u32,
    pub cookie: u64,
    pub status: WcStatus,
    pub transferred_length: u32,
    pub opcode: WcOpcode,
    /// Immediate data of an RDMA write with immediate (DAT IB extension event).
    pub immediate: Option<u32>,
}

/// Kinds of connection events (DAT_CONNECTION_EVENT_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectionEventKind {
    Established,
    PeerRejected,
    /// Nobody answered (DAT_CONNECTION_EVENT_UNREACHABLE).
    Unreachable,
    /// Setting the connection up failed locally (DAT_CONNECTION_EVENT_BROKEN).
    Broken,
    Disconnected,
}

/// An event dequeued from an EVD.
#[derive(Debug)]
pub enum DatEvent {
    Dto(DtoEvent),
    Connection {
        ep: u32,
        kind: ConnectionEventKind,
        private_data: Vec<u8>,
        /// For PeerRejected: the CM's reason.
        reject_reason: Option<RejReason>,
    },
    ConnectionRequest(Cr),
    Async(AsyncEvent),
}

pub(crate) struct EvdInner {
    pub ia: Arc<IaInner>,
    pub sink: Arc<EventSink>,
    pub flags: EvdFlags,
    /// EP completion streams fed into this EVD (completion-flag rules of dat_ep_create).
    pub streams: std::sync::Mutex<super::evd_streams::DtoStreams>,
}

impl EvdInner {
    pub(crate) fn lock_streams(&self) -> std::sync::MutexGuard<'_, super::evd_streams::DtoStreams> {
        self.streams.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// An event dispatcher.
pub struct Evd {
    pub(crate) inner: Arc<EvdInner>,
}

impl Evd {
    /// Creates an EVD holding up to `size` events of the `flags` streams.
    pub fn create(ia: &Ia, size: usize, flags: EvdFlags) -> Result<Evd, DatError> {
        if size == 0 || flags.is_empty() {
            return Err(DatError::InvalidParameter("EVD size and flags"));
        }
        Ok(Self::from_sink(&ia.inner, EventSink::new(size), flags))
    }

    pub(crate) fn from_sink(ia: &Arc<IaInner>, sink: Arc<EventSink>, flags: EvdFlags) -> Evd {
        Evd {
            inner: Arc::new(EvdInner {
                ia: ia.clone(),
                sink,
                flags,
                streams: Default::default(),
            }),
        }
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

    /// Dequeues an event without waiting (DAT_QUEUE_EMPTY when none). In inline progress the
    /// shards are polled once first.
    pub fn dequeue(&self) -> Result<DatEvent, DatError> {
        if self.inner.sink.queue.is_empty() {
            self.inner.ia.engine.progress();
        }
        let ev = self.inner.sink.queue.pop().ok_or(DatError::QueueEmpty)?;
        Ok(self.convert(ev))
    }

    /// Waits until `threshold` events are queued (at least 1), then dequeues one;
    /// DAT_TIMEOUT_EXPIRED after `timeout` (`None`: DAT_TIMEOUT_INFINITE).
    pub fn wait(&self, timeout: Option<Duration>, threshold: usize) -> Result<DatEvent, DatError> {
        if threshold > self.size() {
            return Err(DatError::InvalidParameter("threshold above the EVD size"));
        }
        match self
            .inner
            .ia
            .engine
            .wait(&self.inner.sink, timeout, threshold.max(1))
        {
            Ok(ev) => Ok(self.convert(ev)),
            Err(WaitError::Timeout) => Err(DatError::TimeoutExpired),
        }
    }

    fn convert(&self, ev: Event) -> DatEvent {
        match ev {
            Event::Dto(wc) => DatEvent::Dto(DtoEvent {
                ep: wc.qp_num,
                cookie: wc.wr_id,
                status: wc.status,
                transferred_length: wc.byte_len,
                opcode: wc.opcode,
                immediate: wc.imm_data,
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
                        ConnectionEventKind::PeerRejected,
                        private_data,
                        Some(reason),
                    ),
                    ConnEvent::Unreachable => (ConnectionEventKind::Unreachable, Vec::new(), None),
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
            Event::Request(req) => DatEvent::ConnectionRequest(Cr::new(&self.inner.ia, req)),
            Event::Async(a) => DatEvent::Async(a),
        }
    }

    /// Frees the EVD; refused (DAT_INVALID_STATE) while an EP or PSP still uses it.
    pub fn free(self) -> Result<(), Refused<Evd>> {
        let users = Arc::strong_count(&self.inner) - 1;
        if users > 0 {
            return Err(Refused {
                object: self,
                error: DatError::InvalidState(format!("EVD used by {users} EPs/PSPs")),
            });
        }
        Ok(())
    }
}
