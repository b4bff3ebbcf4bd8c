//! DAT return codes as a Rust error (DAT 2.0 `dat_error.h` names; the C ABI maps each variant
//! to its `DAT_RETURN` value).

use super::ep::EpState;

/// Why a DAT call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatError {
    /// DAT_INVALID_HANDLE: the object belongs to another IA or is not usable here.
    #[error("DAT_INVALID_HANDLE: {0}")]
    InvalidHandle(&'static str),
    /// DAT_INVALID_PARAMETER.
    #[error("DAT_INVALID_PARAMETER: {0}")]
    InvalidParameter(&'static str),
    /// DAT_INVALID_STATE: the object is in a state that does not allow the call (for EPs the
    /// state is named), or is still referenced.
    #[error("DAT_INVALID_STATE: {0}")]
    InvalidState(String),
    /// DAT_INVALID_STATE for an EP: the call is not allowed in `state`.
    #[error("DAT_INVALID_STATE: the endpoint is {state:?}")]
    EpState { state: EpState },
    /// DAT_INSUFFICIENT_RESOURCES (a full queue or ring, no memory, no QPN).
    #[error("DAT_INSUFFICIENT_RESOURCES: {0}")]
    InsufficientResources(String),
    /// DAT_QUEUE_EMPTY (dat_evd_dequeue on an empty EVD).
    #[error("DAT_QUEUE_EMPTY")]
    QueueEmpty,
    /// DAT_TIMEOUT_EXPIRED (dat_evd_wait).
    #[error("DAT_TIMEOUT_EXPIRED")]
    TimeoutExpired,
    /// DAT_CONN_QUAL_IN_USE (dat_psp_create).
    #[error("DAT_CONN_QUAL_IN_USE: {0}")]
    ConnQualInUse(u16),
    /// DAT_INTERNAL_ERROR: the engine stopped or refused in an unexpected way.
    #[error("DAT_INTERNAL_ERROR: {0}")]
    Internal(String),
}

impl From<crate::engine::runtime::EngineError> for DatError {
    fn from(e: crate::engine::runtime::EngineError) -> Self {
        use crate::engine::host::HostError;
        use crate::engine::runtime::EngineError as E;
        match e {
            E::RingFull(_) => DatError::InsufficientResources(e.to_string()),
            E::Host(HostError::NoQpn) => DatError::InsufficientResources(e.to_string()),
            E::Host(HostError::Cm(crate::cm::CmError::PortInUse(p))) => DatError::ConnQualInUse(p),
            E::Host(HostError::Cm(crate::cm::CmError::PrivateDataTooLong { .. })) => {
                DatError::InvalidParameter("private data too long")
            }
            E::Host(HostError::Cm(crate::cm::CmError::InvalidState))
            | E::Host(HostError::Cm(crate::cm::CmError::UnknownId)) => {
                DatError::InvalidState(e.to_string())
            }
            E::Host(HostError::Qp(crate::transport::types::QpError::InvalidState)) => {
                DatError::InvalidState(e.to_string())
            }
            _ => DatError::Internal(e.to_string()),
        }
    }
}

/// An object whose free/close was refused, handed back with the reason (the handle stays
/// valid, as in DAT).
pub struct Refused<T> {
    pub object: T,
    pub error: DatError,
}

impl<T> core::fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Refused({})", self.error)
    }
}
