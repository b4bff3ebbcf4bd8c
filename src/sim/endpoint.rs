//! A simulated port: the engine's [`Host`](crate::engine::host::Host) over `VecMemory`.

pub use crate::engine::host::{HostError as EndpointError, HostStats as EndpointStats, QpOptions};

/// A simulated port.
pub type Endpoint = crate::engine::host::Host<crate::transport::vec_memory::VecMemory>;
