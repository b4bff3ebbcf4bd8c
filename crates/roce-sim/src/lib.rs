//! roce-sim: dpdk-roce's test harnesses. The in-memory pair (two endpoints over a simulated
//! wire with a virtual clock, for tests and the `roce-tool simulate` demo; no I/O but an
//! optional pcap capture), the verified workload (`workload`, over the pair or two engines:
//! `verify`) and the payload every verified benchmark checks (`payload`), the frame fuzzer.

#![forbid(unsafe_code)]

pub mod endpoint;
pub mod frame_fuzz;
pub mod link;
pub mod pair;
pub mod payload;
pub mod verify;
pub mod workload;

// The layers below, so `crate::wire::...` names `roce_proto::wire::...` here too.
use roce_engine::engine;
use roce_proto::{capture, cm, host, io, mem, net, sgl, time, transport, wire};
