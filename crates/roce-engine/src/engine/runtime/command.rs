//! What consumer threads submit to a shard through its bounded lock-free ring. Data-path
//! commands (posts) carry no reply: a post the shard cannot apply completes with an error
//! status instead (never silently). Control-path commands answer on a one-shot channel.

use super::event::{EventSink, QpRoute};
use super::worker::RuntimeStats;
use crate::cm::{AcceptParams, CmId, ConnectParams};
use crate::host::{Host, HostError, QpOptions};
use crate::transport::types::{RecvWr, SendWr};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

/// The answer channel of a control command.
pub type Reply<T> = SyncSender<T>;

/// Why the engine refused or could not complete a call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EngineError {
    /// The shard's submission ring is full (DAT_INSUFFICIENT_RESOURCES): retry later.
    #[error("submission ring of shard {0} is full")]
    RingFull(usize),
    /// The shard is gone (engine stopped).
    #[error("the engine is stopped")]
    Stopped,
    #[error("host: {0}")]
    Host(#[from] HostError),
    #[error("no such shard {0}")]
    NoShard(usize),
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// The capture file could not be created.
    #[error("capture: {0}")]
    Capture(String),
    /// A bounded wait for a shard's answer ran out (`Engine::with_host_within`).
    #[error("shard {0} did not answer in time")]
    TimedOut(usize),
}

/// A closure run on a shard's `Host` (control path: registration in tests, counters, ...).
pub type HostFn<M> = Box<dyn FnOnce(&mut Host<M>) + Send>;

/// One submission.
pub enum Command<M: crate::mem::access::Memory> {
    PostSend {
        qpn: u32,
        wr: SendWr,
    },
    PostRecv {
        qpn: u32,
        wr: RecvWr,
    },
    PostSrqRecv {
        srqn: u32,
        wr: RecvWr,
    },
    /// Creates a QP in this shard's QPN space, routed to `route`.
    CreateQp {
        opts: QpOptions,
        route: QpRoute,
        reply: Reply<Result<u32, EngineError>>,
    },
    /// Changes where a QP's events go (dat_ep_modify of the EVDs).
    SetRoute {
        qpn: u32,
        route: QpRoute,
        reply: Reply<Result<(), EngineError>>,
    },
    /// Destroys a QP (and, on shard 0, the CM's stand-in of a QP of another shard).
    DestroyQp {
        qpn: u32,
        reply: Reply<Result<(), EngineError>>,
    },
    CreateSrq {
        depth: u32,
        /// Where the SRQ's asynchronous events go (`None`: the engine's async sink).
        async_events: Option<Arc<EventSink>>,
        reply: Reply<u32>,
    },
    DestroySrq {
        srqn: u32,
        reply: Reply<Result<(), EngineError>>,
    },
    /// Shard 0 only (the CM).
    Connect {
        params: ConnectParams,
        reply: Reply<Result<CmId, EngineError>>,
    },
    Accept {
        id: CmId,
        params: AcceptParams,
        reply: Reply<Result<(), EngineError>>,
    },
    Reject {
        id: CmId,
        private_data: Vec<u8>,
        reply: Reply<Result<(), EngineError>>,
    },
    Disconnect {
        qpn: u32,
        reply: Reply<Result<(), EngineError>>,
    },
    /// Shard 0: breaks the connection of `qpn` (DREQ, QP to ERROR) and reports it as
    /// DAT_CONNECTION_EVENT_BROKEN on its connection EVD (hard receive watermark, seed 002).
    BreakConnection {
        qpn: u32,
        reply: Reply<Result<(), EngineError>>,
    },
    Listen {
        port: u16,
        sink: Arc<EventSink>,
        reply: Reply<Result<(), EngineError>>,
    },
    Unlisten {
        port: u16,
        reply: Reply<Result<(), EngineError>>,
    },
    /// The shard's counters.
    Stats {
        reply: Reply<RuntimeStats>,
    },
    /// Runs a closure on the shard's host.
    WithHost(HostFn<M>),
}
