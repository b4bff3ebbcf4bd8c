//! The poll-mode engine: shards that own a `Host` and a port queue, driven by pinned cores or
//! inline by waiting consumers, with event queues towards consumers (docs/DESIGN.md "Progress").

pub mod channel_io;
pub mod clock;
pub mod deregister;
pub mod event_queue;
pub mod faults;
pub mod raw_l2;
pub mod runtime;
pub mod shard;
