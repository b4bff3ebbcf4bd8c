//! Shared receive queues and per-EP receive accounting.
//!
//! - [`SharedSrq`]: the engine-level SRQ (IBTA vol. 1 §10.2.9) many QPs on any poll-mode core
//!   draw receive WQEs from while consumers post concurrently; SRQ limit event.
//! - [`EpRecvAccount`] / [`EpRecvHandle`]: per-EP accounting of buffers taken and not completed,
//!   serving `dat_ep_recv_query` and `dat_ep_set_watermark` (seed man pages 004 and 002).
//! - [`RecvSource`]: what the transport's responder needs from a receive queue, implemented by
//!   the transport's own `Srq` and by [`SrqPort`] (a QP's binding to a `SharedSrq`).

pub mod account;
pub mod pool;
pub mod source;

pub use account::{EpRecvAccount, EpRecvHandle, RecvQuery, WatermarkEvents, WATERMARK_INFINITE};
pub use pool::SharedSrq;
pub use source::{RecvSource, SrqPort};
