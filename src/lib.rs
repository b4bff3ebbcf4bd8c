//! dpdk-roce: a userspace RoCEv2 RDMA provider on DPDK poll-mode cores, exposed through uDAPL.
//!
//! Layers (see `docs/DESIGN.md`): `wire` (packet formats), `net` (IPv4/ARP
//! neighbour layer, sans-IO), `transport` (RC queue pairs, sans-IO), `cm` (IB connection manager
//! over QP1), `engine` (poll-mode shards and event queues), `sim` (an in-memory pair of
//! endpoints over a simulated wire, for tests and demos), `perf` (benchmark reports),
//! `mem` (protection zones and memory regions), `srq` (shared receive queue pools and per-EP
//! receive accounting), `dpdk` (safe owners over the system DPDK), `config` (DPDK profiles).

pub mod dat;

// The protocol crate's modules at their old paths: `dpdk_roce::wire::...` and `crate::wire::...`
// name the same items as `roce_proto::wire::...`.
pub use roce_proto::{
    capture, cm, decode, host, io, mem, net, random, sgl, srq, time, transport, wire,
};

// The engine crate's modules at their old paths.
pub use roce_engine::{config, dpdk, engine, log};
