//! The RC transport, sans-IO: queue pairs split into requester, responder and completer in the
//! manner of Linux rxe, driven by `handle_packet` / `handle_timeout` and drained by
//! `poll_transmit` / `poll_completion` / `poll_timeout` (IBTA vol. 1 ch. 9-11).

mod completer;
mod fast_write;
mod fast_write_request;

mod limits;
pub mod qp;
mod req_state;
mod requester;
mod resp_state;
mod responder;
pub(crate) mod rto;
mod scatter;
pub mod snapshot;
pub mod srq;
pub mod timers;
pub mod transmit;
pub mod types;
pub mod window;
mod wqe;

#[cfg(test)]
mod tests;

pub use fast_write_request::WriteOnlyRequest;
pub use limits::{ACK_REQ_EVERY, MAX_MSG_SIZE, MAX_OUTSTANDING_PSNS, MAX_QUEUED_RESPONSES};
pub use qp::{Qp, QpStats};
pub use srq::{RecvSource, Srq};
pub use timers::{ack_timeout_duration, rnr_timer_duration};
