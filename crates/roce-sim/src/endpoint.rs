//! A simulated port: the engine's [`Host`](crate::host::Host) over `VecMemory`.

pub use crate::host::{HostError as EndpointError, HostStats as EndpointStats, QpOptions};

/// A simulated port.
pub type Endpoint = crate::host::Host<crate::mem::vec_memory::VecMemory>;
