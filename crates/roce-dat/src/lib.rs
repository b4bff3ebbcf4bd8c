//! dpdk-roce: a userspace RoCEv2 RDMA provider on DPDK poll-mode cores, exposed through uDAPL.
//! This crate (`roce-dat`, library `dpdk_roce`, built also as the `libdpdk_roce.so` that libdat2
//! loads) is the DAT 2.0 model and its C ABI (`dat`, `dat::ffi`). The layers under it are
//! re-exported at their usual paths (docs/DESIGN.md "Layers"):
//! - from `roce-proto`, sans-IO: `wire` (packet formats), `net` (IPv4/IPv6 neighbours and
//!   routes), `transport` (RC queue pairs), `cm` (the IB connection manager over QP1), `mem`
//!   (protection zones, memory regions, checked access), `srq` (shared receive queue pools),
//!   `host` (a port's hosts), `io` (the frame I/O traits), `decode`, `capture`, `time`,
//!   `random`;
//! - from `roce-engine`: `dpdk` (safe owners over the system DPDK), `engine` (poll-mode shards
//!   and event queues), `config` (DPDK profiles), `log`.

// `unsafe` only in the C ABI layer (dat::ffi).
#![deny(unsafe_code)]

pub mod dat;

// The protocol crate's modules at their old paths: `dpdk_roce::wire::...` and `crate::wire::...`
// name the same items as `roce_proto::wire::...`.
pub use roce_proto::{
    capture, cc, cm, decode, host, io, mem, net, random, sgl, srq, time, transport, wire,
};

// The engine crate's modules at their old paths.
pub use roce_engine::{config, dpdk, engine, log};
