//! roce-engine: the protocol of `roce-proto` on DPDK ports. `dpdk` (safe owners over the
//! system DPDK: EAL, ports, mempools, mbufs, telemetry), `engine` (poll-mode shards on pinned
//! cores or driven inline by waiting consumers, event queues, fault injection), `config` (DPDK
//! profiles and their environment overrides), `log` (the stderr subscriber and its filters).
//! docs/DESIGN.md "Layers" and "Progress".

// `unsafe` only in the DPDK bindings (dpdk).
#![deny(unsafe_code)]

pub mod config;
#[allow(unsafe_code)]
pub mod dpdk;
pub mod engine;
pub mod log;

// The protocol's modules, so `crate::wire::...` names `roce_proto::wire::...` here too.
use roce_proto::{capture, cc, cm, host, io, mem, net, random, time, transport, wire};
