//! The RC transport, sans-IO: queue pairs split into requester, responder and completer in the
//! manner of Linux rxe, driven by `handle_packet` / `handle_timeout` and drained by
//! `poll_transmit` / `poll_completion` / `poll_timeout` (IBTA vol. 1 ch. 9-11).

mod completer;
mod fast_write;
mod fast_write_request;

pub mod qp;
mod requester;
mod responder;
pub(crate) mod rto;
pub mod snapshot;
pub mod srq;
pub mod timers;
pub mod transmit;
pub mod types;
pub mod window;

#[cfg(test)]
mod tests;

pub use fast_write_request::WriteOnlyRequest;
pub use qp::{Qp, QpStats, MAX_MSG_SIZE};
pub use requester::{ACK_REQ_EVERY, MAX_OUTSTANDING_PSNS};
pub use responder::MAX_QUEUED_RESPONSES;
pub use srq::{RecvSource, Srq};
pub use timers::{ack_timeout_duration, rnr_timer_duration};
