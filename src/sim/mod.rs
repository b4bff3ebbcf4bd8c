//! The in-memory pair harness: two endpoints over a simulated wire with a virtual clock, for
//! tests and the `roce-tool simulate` demo. No I/O but an optional pcap capture.

pub mod endpoint;
pub mod frame_fuzz;
pub mod link;
pub mod pair;
pub mod verify;
pub mod workload;
