//! The port queue of an IA, whatever drives it (a DPDK queue pair, an in-memory cable), behind
//! one type so the DAT objects are not generic over the I/O.

use crate::io::FrameIo;

/// A boxed queue pair.
pub type PortIo = Box<dyn FrameIo + Send>;
