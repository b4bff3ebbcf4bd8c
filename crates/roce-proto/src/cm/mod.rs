//! Connection management: the IB communication manager (IBTA vol. 1 ch. 12) over RoCEv2 UD
//! MADs on QP1, with rdma_cm's IP service IDs (annex A11) so a Linux rdma_cm peer can connect.
//! See `endpoint` for the state machine and the PSN conventions.

mod conn;
pub mod endpoint;
pub mod event;
pub mod ip_cm;
mod local_ips;
pub mod params;
pub mod qp_control;
pub mod timeout;

pub use endpoint::Cm;
pub use event::{CmError, CmEvent, CmId, CmStats, CmTransmit, MadCounts, CM_QPN};
pub use local_ips::LocalIps;
pub use params::{
    peer_ack_timeout, AcceptParams, CmConfig, ConnectParams, PEER_ACK_TIMEOUT,
    PEER_ACK_TIMEOUT_FOR_INFINITE, PEER_CM_TIMEOUT_MAX,
};
pub use qp_control::QpControl;
