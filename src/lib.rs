//! dpdk-roce: a userspace RoCEv2 RDMA provider on DPDK poll-mode cores, exposed through uDAPL.
//!
//! Layers (see `DESIGN.md` in the shared folder): `wire` (packet formats), `transport` (RC queue
//! pairs, sans-IO), `cm` (IB connection manager over QP1), `sim` (an in-memory pair of endpoints
//! over a simulated wire, for tests and demos).

pub mod cm;
pub mod decode;
pub mod dpdk;
pub mod sim;
pub mod time;
pub mod transport;
pub mod wire;
