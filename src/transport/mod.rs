//! The RC transport, sans-IO: queue pairs split into requester, responder and completer in the
//! manner of Linux rxe, driven by `handle_packet` / `handle_timeout` and drained by
//! `poll_transmit` / `poll_completion` / `poll_timeout`.

pub mod memory;
pub mod transmit;
pub mod types;
