//! roce-proto: the RoCEv2 protocol of dpdk-roce with no I/O, no threads of its own and no clock
//! (docs/DESIGN.md "Layers"). Time comes in as arguments, frames in and out through the
//! [`io::FrameIo`] and [`io::FrameBuf`] traits; the engine (DPDK, shards, configuration) and the
//! provider build on it.
//!
//! `wire` (packet formats), `net` (IPv4/IPv6, ARP and ND neighbours, routes), `transport` (RC
//! queue pairs: requester, responder, completer), `cc` (congestion control: pacer, DCQCN, the
//! delay mode, CNPs), `cm` (the IB connection manager over QP1),
//! `mem` (protection zones, memory regions and checked access), `srq` (shared receive queue
//! pools), `host` (one port's hosts: the layers above joined, frames in, frames out), `decode`
//! (frames as text), `capture` (pcap files).

// `unsafe` only in the registered-memory accessors (mem::alloc, mem::table).
#![deny(unsafe_code)]

pub mod capture;
pub mod cc;
pub mod cm;
pub mod decode;
pub mod host;
pub mod io;
#[cfg(any(test, feature = "test-support"))]
pub mod log_capture;
pub mod mem;
pub mod net;
pub mod random;
pub mod srq;
pub mod time;
pub mod transport;
pub mod wire;
