//! DAT return codes as a Rust error (DAT 2.0 `dat_error.h`): every variant maps onto exactly
//! one `DAT_RETURN` value, type and subtype ([`DatError::code`], built from the `dat-sys`
//! constants), so the C ABI only calls `code()`.

use super::ep_state::EpState;
use dat_sys as sys;

/// Handle types (DAT_INVALID_HANDLE subtypes, dat_error.h): which kind of handle argument
/// was wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandleKind {
    /// An interface adapter (DAT_INVALID_HANDLE_IA).
    Ia,
    /// An endpoint (DAT_INVALID_HANDLE_EP), e.g. the `dup` EP of another IA in
    /// dat_ep_dup_connect.
    Ep,
    /// A local memory region (DAT_INVALID_HANDLE_LMR), e.g. an LMR no longer registered.
    Lmr,
    /// A remote memory region, a memory window (DAT_INVALID_HANDLE_RMR).
    Rmr,
    /// A protection zone (DAT_INVALID_HANDLE_PZ), e.g. a PZ of another IA.
    Pz,
    /// A public service point (DAT_INVALID_HANDLE_PSP).
    Psp,
    /// A reserved service point (DAT_INVALID_HANDLE_RSP).
    Rsp,
    /// A connection request (DAT_INVALID_HANDLE_CR).
    Cr,
    /// A consumer notification object (DAT_INVALID_HANDLE_CNO), e.g. a CNO of another IA.
    Cno,
    /// The EVD a service point queues connection requests on (DAT_INVALID_HANDLE_EVD_CR).
    EvdCr,
    /// An EP's request completion EVD (DAT_INVALID_HANDLE_EVD_REQUEST).
    EvdRequest,
    /// An EP's receive completion EVD (DAT_INVALID_HANDLE_EVD_RECV).
    EvdRecv,
    /// An EP's connection EVD (DAT_INVALID_HANDLE_EVD_CONN).
    EvdConn,
    /// The IA's asynchronous event EVD (DAT_INVALID_HANDLE_EVD_ASYNC).
    EvdAsync,
    /// A shared receive queue (DAT_INVALID_HANDLE_SRQ).
    Srq,
    /// The n-th handle argument (DAT_INVALID_HANDLE1..10) when no type fits.
    Arg(u8),
}

impl HandleKind {
    fn subtype(self) -> u32 {
        match self {
            HandleKind::Ia => sys::DAT_INVALID_HANDLE_IA,
            HandleKind::Ep => sys::DAT_INVALID_HANDLE_EP,
            HandleKind::Lmr => sys::DAT_INVALID_HANDLE_LMR,
            HandleKind::Rmr => sys::DAT_INVALID_HANDLE_RMR,
            HandleKind::Pz => sys::DAT_INVALID_HANDLE_PZ,
            HandleKind::Psp => sys::DAT_INVALID_HANDLE_PSP,
            HandleKind::Rsp => sys::DAT_INVALID_HANDLE_RSP,
            HandleKind::Cr => sys::DAT_INVALID_HANDLE_CR,
            HandleKind::Cno => sys::DAT_INVALID_HANDLE_CNO,
            HandleKind::EvdCr => sys::DAT_INVALID_HANDLE_EVD_CR,
            HandleKind::EvdRequest => sys::DAT_INVALID_HANDLE_EVD_REQUEST,
            HandleKind::EvdRecv => sys::DAT_INVALID_HANDLE_EVD_RECV,
            HandleKind::EvdConn => sys::DAT_INVALID_HANDLE_EVD_CONN,
            HandleKind::EvdAsync => sys::DAT_INVALID_HANDLE_EVD_ASYNC,
            HandleKind::Srq => sys::DAT_INVALID_HANDLE_SRQ,
            HandleKind::Arg(n) => sys::DAT_INVALID_HANDLE1 + u32::from(n.clamp(1, 10)) - 1,
        }
    }
}

/// DAT_INVALID_STATE subtypes of objects other than EPs (dat_error.h); an EP's own state is
/// [`DatError::EpState`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateKind {
    /// DAT_INVALID_STATE_CNO_IN_USE: the CNO still has EVDs attached (dat_cno_free).
    CnoInUse,
    /// DAT_INVALID_STATE_EVD_ENABLED: the call needs a disabled EVD.
    EvdEnabled,
    /// DAT_INVALID_STATE_EVD_DISABLED: the call needs an enabled EVD.
    EvdDisabled,
    /// DAT_INVALID_STATE_EVD_WAITABLE: the call needs an unwaitable EVD.
    EvdWaitable,
    /// DAT_INVALID_STATE_EVD_UNWAITABLE: dat_evd_wait on an EVD set unwaitable
    /// (dat_evd_set_unwaitable).
    EvdUnwaitable,
    /// DAT_INVALID_STATE_EVD_IN_USE: the EVD still feeds an EP or a service point.
    EvdInUse,
    /// DAT_INVALID_STATE_EVD_ASYNC: the IA's asynchronous EVD, freed only with the IA.
    EvdAsync,
    /// DAT_INVALID_STATE_EVD_WAITER: another thread already waits on the EVD.
    EvdWaiter,
    /// DAT_INVALID_STATE_IA_IN_USE: a graceful dat_ia_close with objects still open.
    IaInUse,
    /// DAT_INVALID_STATE_LMR_IN_USE: dat_lmr_free of an LMR with RMRs bound to it.
    LmrInUse,
    /// DAT_INVALID_STATE_PZ_IN_USE: dat_pz_free of a PZ with LMRs, RMRs, EPs or SRQs in it.
    PzInUse,
    /// DAT_INVALID_STATE_SRQ_IN_USE: dat_srq_free of an SRQ that EPs still use.
    SrqInUse,
    /// DAT_INVALID_STATE_EP_PZ: the EP's protection zone does not allow the call.
    EpPz,
    /// DAT_INVALID_STATE_EP_RECV_WATERMARK: the EP's receive watermark does not allow the
    /// call (dat_ep_set_watermark(3DAT)).
    EpRecvWatermark,
}

impl StateKind {
    fn subtype(self) -> u32 {
        match self {
            StateKind::CnoInUse => sys::DAT_INVALID_STATE_CNO_IN_USE,
            StateKind::EvdEnabled => sys::DAT_INVALID_STATE_EVD_ENABLED,
            StateKind::EvdDisabled => sys::DAT_INVALID_STATE_EVD_DISABLED,
            StateKind::EvdWaitable => sys::DAT_INVALID_STATE_EVD_WAITABLE,
            StateKind::EvdUnwaitable => sys::DAT_INVALID_STATE_EVD_UNWAITABLE,
            StateKind::EvdInUse => sys::DAT_INVALID_STATE_EVD_IN_USE,
            StateKind::EvdAsync => sys::DAT_INVALID_STATE_EVD_ASYNC,
            StateKind::EvdWaiter => sys::DAT_INVALID_STATE_EVD_WAITER,
            StateKind::IaInUse => sys::DAT_INVALID_STATE_IA_IN_USE,
            StateKind::LmrInUse => sys::DAT_INVALID_STATE_LMR_IN_USE,
            StateKind::PzInUse => sys::DAT_INVALID_STATE_PZ_IN_USE,
            StateKind::SrqInUse => sys::DAT_INVALID_STATE_SRQ_IN_USE,
            StateKind::EpPz => sys::DAT_INVALID_STATE_EP_PZ,
            StateKind::EpRecvWatermark => sys::DAT_INVALID_STATE_EP_RECV_WATERMARK,
        }
    }
}

/// DAT_PROTECTION_VIOLATION / DAT_PRIVILEGES_VIOLATION subtypes (dat_error.h): the kind of
/// access the memory did not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// A local read of an LMR segment, e.g. the source of a send or an RDMA write
    /// (DAT_PROTECTION_READ / DAT_PRIVILEGES_READ).
    Read,
    /// A local write into an LMR segment, e.g. a receive buffer or the sink of an RDMA read
    /// (DAT_PROTECTION_WRITE / DAT_PRIVILEGES_WRITE).
    Write,
    /// A remote RDMA read of the memory (DAT_PROTECTION_RDMA_READ / DAT_PRIVILEGES_RDMA_READ).
    RdmaRead,
    /// A remote RDMA write into the memory (DAT_PROTECTION_RDMA_WRITE /
    /// DAT_PRIVILEGES_RDMA_WRITE).
    RdmaWrite,
}

/// Why a DAT call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatError {
    /// DAT_INVALID_HANDLE: the object belongs to another IA or is not usable here.
    #[error("DAT_INVALID_HANDLE: {0}")]
    InvalidHandle(&'static str),
    /// DAT_INVALID_HANDLE with its handle-type subtype.
    #[error("DAT_INVALID_HANDLE ({kind:?}): {what}")]
    InvalidHandleOf {
        /// The kind of handle (the subtype).
        kind: HandleKind,
        /// What was wrong with it, for the message.
        what: &'static str,
    },
    /// DAT_INVALID_PARAMETER (no argument named).
    #[error("DAT_INVALID_PARAMETER: {0}")]
    InvalidParameter(&'static str),
    /// DAT_INVALID_PARAMETER | DAT_INVALID_ARG`arg` (1-based argument of the C call).
    #[error("DAT_INVALID_PARAMETER (argument {arg}): {what}")]
    InvalidArg {
        /// The 1-based argument number of the C call (1..=10; DAT_INVALID_ARG1..10).
        arg: u8,
        /// What was wrong with it, for the message.
        what: &'static str,
    },
    /// DAT_INVALID_STATE: the object is in a state that does not allow the call, or is still
    /// referenced.
    #[error("DAT_INVALID_STATE: {0}")]
    InvalidState(String),
    /// DAT_INVALID_STATE with a non-EP-state subtype.
    #[error("DAT_INVALID_STATE ({kind:?}): {what}")]
    InvalidStateOf {
        /// The object state that refused the call (the subtype).
        kind: StateKind,
        /// What refused it, for the message.
        what: String,
    },
    /// DAT_INVALID_STATE for an EP: the call is not allowed in `state` (subtype
    /// `DAT_INVALID_STATE_EP_<state>`).
    #[error("DAT_INVALID_STATE: the endpoint is {state:?}")]
    EpState {
        /// The EP's state when the call was made.
        state: EpState,
    },
    /// DAT_INSUFFICIENT_RESOURCES (a full queue or ring, no memory, no QPN, an IA limit).
    #[error("DAT_INSUFFICIENT_RESOURCES: {0}")]
    InsufficientResources(String),
    /// DAT_QUEUE_EMPTY (dat_evd_dequeue on an empty EVD): the bare code, dtest `-p` compares it.
    #[error("DAT_QUEUE_EMPTY")]
    QueueEmpty,
    /// DAT_QUEUE_FULL (dat_evd_post_se on a full EVD, resize below the queued count).
    #[error("DAT_QUEUE_FULL")]
    QueueFull,
    /// DAT_TIMEOUT_EXPIRED (dat_evd_wait, dat_cno_wait).
    #[error("DAT_TIMEOUT_EXPIRED")]
    TimeoutExpired,
    /// DAT_CONN_QUAL_IN_USE (dat_psp_create).
    #[error("DAT_CONN_QUAL_IN_USE: {0}")]
    ConnQualInUse(u16),
    /// DAT_CONN_QUAL_UNAVAILABLE (dat_psp_create_any found no free qualifier).
    #[error("DAT_CONN_QUAL_UNAVAILABLE")]
    ConnQualUnavailable,
    /// DAT_MODEL_NOT_SUPPORTED: the provider does not support the requested model.
    #[error("DAT_MODEL_NOT_SUPPORTED: {0}")]
    ModelNotSupported(&'static str),
    /// DAT_PROTECTION_VIOLATION: memory of another protection zone.
    #[error("DAT_PROTECTION_VIOLATION ({0:?})")]
    ProtectionViolation(AccessKind),
    /// DAT_PRIVILEGES_VIOLATION: the memory does not grant the access.
    #[error("DAT_PRIVILEGES_VIOLATION ({0:?})")]
    PrivilegesViolation(AccessKind),
    /// DAT_LENGTH_ERROR: a segment or message longer than allowed.
    #[error("DAT_LENGTH_ERROR: {0}")]
    LengthError(&'static str),
    /// DAT_INVALID_ADDRESS (an address the provider cannot use).
    #[error("DAT_INVALID_ADDRESS: {0}")]
    InvalidAddress(&'static str),
    /// DAT_ABORT (a wait interrupted by dat_evd_disable / free).
    #[error("DAT_ABORT")]
    Abort,
    /// DAT_INTERNAL_ERROR: the engine stopped or refused in an unexpected way.
    #[error("DAT_INTERNAL_ERROR: {0}")]
    Internal(String),
}

/// DAT_ERROR(type, subtype) of dat_error.h.
const fn err(ty: u32, sub: u32) -> u32 {
    sys::DAT_CLASS_ERROR | ty | sub
}

impl EpState {
    /// The DAT_INVALID_STATE_EP_* subtype of this state.
    fn subtype(self) -> u32 {
        match self {
            EpState::Unconnected => sys::DAT_INVALID_STATE_EP_UNCONNECTED,
            EpState::Reserved => sys::DAT_INVALID_STATE_EP_RESERVED,
            EpState::PassiveConnectionPending => sys::DAT_INVALID_STATE_EP_PASSCONNPENDING,
            EpState::ActiveConnectionPending => sys::DAT_INVALID_STATE_EP_ACTCONNPENDING,
            EpState::TentativeConnectionPending => sys::DAT_INVALID_STATE_EP_TENTCONNPENDING,
            EpState::CompletionPending => sys::DAT_INVALID_STATE_EP_COMPLPENDING,
            EpState::Connected => sys::DAT_INVALID_STATE_EP_CONNECTED,
            EpState::DisconnectPending => sys::DAT_INVALID_STATE_EP_DISCPENDING,
            EpState::Disconnected => sys::DAT_INVALID_STATE_EP_DISCONNECTED,
        }
    }
}

impl AccessKind {
    fn protection(self) -> u32 {
        match self {
            AccessKind::Read => sys::DAT_PROTECTION_READ,
            AccessKind::Write => sys::DAT_PROTECTION_WRITE,
            AccessKind::RdmaRead => sys::DAT_PROTECTION_RDMA_READ,
            AccessKind::RdmaWrite => sys::DAT_PROTECTION_RDMA_WRITE,
        }
    }
    fn privileges(self) -> u32 {
        match self {
            AccessKind::Read => sys::DAT_PRIVILEGES_READ,
            AccessKind::Write => sys::DAT_PRIVILEGES_WRITE,
            AccessKind::RdmaRead => sys::DAT_PRIVILEGES_RDMA_READ,
            AccessKind::RdmaWrite => sys::DAT_PRIVILEGES_RDMA_WRITE,
        }
    }
}

impl DatError {
    /// The `DAT_RETURN` of this error: class, type and subtype (dat_error.h).
    pub fn code(&self) -> u32 {
        match self {
            DatError::InvalidHandle(_) => err(sys::DAT_INVALID_HANDLE, 0),
            DatError::InvalidHandleOf { kind, .. } => err(sys::DAT_INVALID_HANDLE, kind.subtype()),
            DatError::InvalidParameter(_) => err(sys::DAT_INVALID_PARAMETER, 0),
            DatError::InvalidArg { arg, .. } => err(
                sys::DAT_INVALID_PARAMETER,
                sys::DAT_INVALID_ARG1 + u32::from((*arg).clamp(1, 10)) - 1,
            ),
            DatError::InvalidState(_) => err(sys::DAT_INVALID_STATE, 0),
            DatError::InvalidStateOf { kind, .. } => err(sys::DAT_INVALID_STATE, kind.subtype()),
            DatError::EpState { state } => err(sys::DAT_INVALID_STATE, state.subtype()),
            DatError::InsufficientResources(_) => err(sys::DAT_INSUFFICIENT_RESOURCES, 0),
            // dtest `-p` compares dat_evd_dequeue's result with the bare DAT_QUEUE_EMPTY.
            DatError::QueueEmpty => sys::DAT_QUEUE_EMPTY,
            DatError::QueueFull => err(sys::DAT_QUEUE_FULL, 0),
            DatError::TimeoutExpired => err(sys::DAT_TIMEOUT_EXPIRED, 0),
            DatError::ConnQualInUse(_) => err(sys::DAT_CONN_QUAL_IN_USE, 0),
            DatError::ConnQualUnavailable => err(sys::DAT_CONN_QUAL_UNAVAILABLE, 0),
            DatError::ModelNotSupported(_) => err(sys::DAT_MODEL_NOT_SUPPORTED, 0),
            DatError::ProtectionViolation(a) => err(sys::DAT_PROTECTION_VIOLATION, a.protection()),
            DatError::PrivilegesViolation(a) => err(sys::DAT_PRIVILEGES_VIOLATION, a.privileges()),
            DatError::LengthError(_) => err(sys::DAT_LENGTH_ERROR, 0),
            DatError::InvalidAddress(_) => err(sys::DAT_INVALID_ADDRESS, 0),
            DatError::Abort => err(sys::DAT_ABORT, 0),
            DatError::Internal(_) => err(sys::DAT_INTERNAL_ERROR, 0),
        }
    }

    /// The DAT type of this error (`DAT_GET_TYPE`: the code without class and subtype).
    pub fn dat_type(&self) -> u32 {
        self.code() & 0x3fff_0000
    }

    /// The DAT subtype (`DAT_GET_SUBTYPE`).
    pub fn subtype(&self) -> u32 {
        self.code() & sys::DAT_SUBTYPE_MASK
    }
}

impl From<crate::engine::runtime::EngineError> for DatError {
    fn from(e: crate::engine::runtime::EngineError) -> Self {
        use crate::engine::runtime::EngineError as E;
        use crate::host::HostError;
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
    /// The object, as usable as before the call.
    pub object: T,
    /// Why it was not freed (DAT_INVALID_STATE while other objects still use it).
    pub error: DatError,
}

impl<T> core::fmt::Debug for Refused<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Refused({})", self.error)
    }
}
