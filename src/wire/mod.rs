//! Wire formats: zero-copy views over bytes and `Repr` structs, one header per file, in the
//! manner of smoltcp's `wire` module. Nothing here allocates, performs I/O or panics on input.

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod cm_msg;
pub mod deth;
pub mod mad;
pub mod opcode;
pub mod psn;
pub mod reth;
pub mod roce;
