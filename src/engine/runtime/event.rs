//! What the engine delivers to consumers: DTO completions, connection events, connection
//! requests and asynchronous errors, each pushed to the event queue (EVD ring) the consumer
//! named for it (DAT 2.0 §6.3 event streams: DTO, connection, CR, async).

use crate::cm::CmId;
use crate::engine::event_queue::EventQueue;
use crate::net::NetEvent;
use crate::transport::types::{QpError, WorkCompletion};
use crate::wire::cm_msg::RejReason;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A connection event of one QP (DAT_CONNECTION_EVENT_*).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConnEvent {
    /// Both sides are connected; the active side gets the REP's private data.
    Established { private_data: Vec<u8> },
    /// The peer rejected the request (DAT_CONNECTION_EVENT_PEER_REJECTED).
    PeerRejected {
        reason: RejReason,
        private_data: Vec<u8>,
    },
    /// Nobody answered (DAT_CONNECTION_EVENT_UNREACHABLE / TIMED_OUT).
    Unreachable,
    /// The connection was torn down (DAT_CONNECTION_EVENT_DISCONNECTED).
    Disconnected,
    /// Setting up the QP failed while connecting (DAT_CONNECTION_EVENT_BROKEN).
    Broken(QpError),
}

/// A connection request that arrived on a listened port (DAT_CONNECTION_REQUEST_EVENT).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnRequest {
    pub id: CmId,
    /// The listened port (DAT connection qualifier).
    pub port: u16,
    pub src_ip: Ipv4Addr,
    pub src_port: u16,
    pub remote_qpn: u32,
    pub private_data: Vec<u8>,
}

/// An asynchronous event of the interface (DAT_ASYNC_ERROR_*).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// An EVD was full and an event could not be queued (DAT_ASYNC_ERROR_EVD_OVERFLOW).
    EvdOverflow { evd: u64 },
    /// An SRQ's posted receives dropped below its armed limit.
    SrqLimit { shard: usize, srqn: u32 },
    /// A work request accepted by the poster could not be applied by the shard (e.g. the QP
    /// left RTS in the meantime); its completion carries the error too.
    PostFailed { qpn: u32, error: QpError },
    /// A receive posted to an SRQ was refused by the shard (e.g. the SRQ is full).
    SrqPostFailed {
        srqn: u32,
        wr_id: u64,
        error: QpError,
    },
    /// Replaying a CM transition on the QP's shard failed (the QP is then unusable).
    QpTransitionFailed { qpn: u32 },
    /// A neighbour-layer event (a peer that does not answer ARP, an address conflict).
    Net(NetEvent),
    /// A receive-buffer watermark of the EP on QP `qpn` was exceeded (seed 002,
    /// `dat_ep_set_watermark`): `soft` asks for an asynchronous event, `hard` for the
    /// connection to be broken (the DAT layer acts on it).
    EpWatermark { qpn: u32, soft: bool, hard: bool },
}

/// One event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A work completion (cookie = `wc.wr_id`, status, opcode, transferred length).
    Dto(WorkCompletion),
    /// A connection event of QP `qpn`.
    Connection { qpn: u32, event: ConnEvent },
    /// A connection request.
    Request(ConnRequest),
    /// An asynchronous event.
    Async(AsyncEvent),
}

static NEXT_SINK_ID: AtomicU64 = AtomicU64::new(1);

/// A named event queue: the ring behind one EVD.
pub struct EventSink {
    id: u64,
    pub queue: EventQueue<Event>,
}

impl EventSink {
    /// A sink holding at most `capacity` events, with a process-unique id.
    pub fn new(capacity: usize) -> Arc<EventSink> {
        Arc::new(EventSink {
            id: NEXT_SINK_ID.fetch_add(1, Ordering::Relaxed),
            queue: EventQueue::new(capacity),
        })
    }

    /// The sink's id (reported in overflow events).
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl core::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("EventSink")
            .field("id", &self.id)
            .field("len", &self.queue.len())
            .finish()
    }
}

/// Where the events of one QP go (DAT: the EP's request, receive and connection EVDs; `None`
/// is DAT_HANDLE_NULL, "not interested").
#[derive(Clone, Debug, Default)]
pub struct QpRoute {
    pub request: Option<Arc<EventSink>>,
    pub recv: Option<Arc<EventSink>>,
    pub conn: Option<Arc<EventSink>>,
    /// Completions counted as the shard generates them (for `dat_ep_get_status` idleness).
    pub counters: Option<Arc<DtoCounters>>,
    /// DAT completion suppression: the QP posts a completion for every send WR (`sig_all`),
    /// and the successful completion of a WR posted with `signaled == false`
    /// (DAT_COMPLETION_SUPPRESS_FLAG / UNSIGNALLED) is counted, freeing its queue slot, but
    /// delivers no event. Errors are always delivered.
    pub suppress_unsignaled: bool,
}

/// Completions generated for one QP, by direction.
#[derive(Debug, Default)]
pub struct DtoCounters {
    pub requests: AtomicU64,
    pub recvs: AtomicU64,
}
