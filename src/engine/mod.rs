//! The poll-mode engine: shards that own QPs and a port queue, driven by pinned cores or inline
//! by waiting consumers, with lock-free submission and event rings (DESIGN.md "Progress").

pub mod event_queue;
pub mod host;
