//! The values the RC transport exchanges with its users: QP states and attributes, work
//! requests, work completions (IBTA vol. 1 §10.3, §11.4; Linux `ib_verbs.h` naming).

use crate::wire::psn::Psn;

/// Largest scatter/gather list accepted per work request.
pub const MAX_SGE: usize = 16;

/// Scatter/gather entries kept inline in a work request (no heap allocation per post).
pub const INLINE_SGE: usize = 4;

/// The scatter/gather list of a work request: up to [`INLINE_SGE`] entries inline, so posting
/// and completing a WR allocates nothing (longer lists, up to [`MAX_SGE`], spill to the heap).
/// Build one with [`sgl!`](crate::sgl) or `From<Vec<Sge>>` / `From<&[Sge]>`.
pub type SgList = smallvec::SmallVec<[Sge; INLINE_SGE]>;

/// An [`SgList`] from entries, like `vec!`.
#[macro_export]
macro_rules! sgl {
    ($e:expr; $n:expr) => { $crate::transport::types::SgList::from_elem($e, $n) };
    ($($e:expr),* $(,)?) => { $crate::transport::types::SgList::from_iter([$($e),*]) };
}

/// QP states (IBTA vol. 1 §10.3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QpState {
    Reset,
    Init,
    /// Ready to receive.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drain.
    Sqd,
    /// Send queue error.
    Sqe,
    Error,
}

/// Path MTU (IBTA vol. 1 §9.6.2; CM REQ path MTU field 1..=5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl Mtu {
    /// Payload bytes per packet.
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }
    /// From the IB encoding 1..=5.
    pub const fn from_code(code: u8) -> Option<Mtu> {
        match code {
            1 => Some(Mtu::Mtu256),
            2 => Some(Mtu::Mtu512),
            3 => Some(Mtu::Mtu1024),
            4 => Some(Mtu::Mtu2048),
            5 => Some(Mtu::Mtu4096),
            _ => None,
        }
    }
    /// The largest MTU whose payload fits `bytes`.
    pub const fn from_bytes_floor(bytes: u32) -> Option<Mtu> {
        if bytes >= 4096 {
            Some(Mtu::Mtu4096)
        } else if bytes >= 2048 {
            Some(Mtu::Mtu2048)
        } else if bytes >= 1024 {
            Some(Mtu::Mtu1024)
        } else if bytes >= 512 {
            Some(Mtu::Mtu512)
        } else if bytes >= 256 {
            Some(Mtu::Mtu256)
        } else {
            None
        }
    }
}

/// Creation-time parameters of a QP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// This QP's number (24 bits, never 0 or 1).
    pub qpn: u32,
    /// Protection domain.
    pub pd: u32,
    /// Send queue depth (outstanding send work requests).
    pub sq_depth: u32,
    /// Receive queue depth; ignored when `srq` is set.
    pub rq_depth: u32,
    /// Largest SGL per send / receive WR (<= MAX_SGE).
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    /// Receives come from a shared receive queue instead of the QP's own queue.
    pub srq: Option<u32>,
    /// Post a completion for every send WR regardless of `signaled` (IBV sq_sig_all).
    pub sig_all: bool,
}

/// Attributes set by `Qp::modify` (IBTA vol. 1 §11.2.5; the values CM negotiates).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpAttr {
    pub pmtu: Mtu,
    /// First PSN this QP sends.
    pub sq_psn: Psn,
    /// First PSN this QP expects to receive.
    pub rq_psn: Psn,
    /// Transport retries on ACK timeout / sequence NAK (3 bits).
    pub retry_cnt: u8,
    /// RNR retries (3 bits, 7 = infinite).
    pub rnr_retry: u8,
    /// Local ACK timeout exponent: 4.096 us * 2^timeout, 0 = infinite (5 bits).
    pub timeout: u8,
    /// RNR timer code this QP's responder advertises in RNR NAKs (5 bits).
    pub min_rnr_timer: u8,
    /// Outstanding RDMA reads/atomics this QP may have as requester (initiator depth).
    pub max_rd_atomic: u8,
    /// Outstanding RDMA reads/atomics this QP accepts as responder (responder resources).
    pub max_dest_rd_atomic: u8,
    /// Peer QP number.
    pub dest_qpn: u32,
    pub pkey: u16,
    /// Remote access rights the responder grants on this QP.
    pub access: crate::mem::access::Access,
}

impl Default for QpAttr {
    fn default() -> Self {
        QpAttr {
            pmtu: Mtu::Mtu1024,
            sq_psn: Psn::new(0),
            rq_psn: Psn::new(0),
            retry_cnt: 7,
            rnr_retry: 7,
            timeout: 14,
            min_rnr_timer: 12,
            max_rd_atomic: 16,
            max_dest_rd_atomic: 16,
            dest_qpn: 0,
            pkey: crate::wire::bth::DEFAULT_PKEY,
            access: crate::mem::access::Access::empty(),
        }
    }
}

/// One scatter/gather entry: local memory named by an L_Key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

/// What a send work request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    Send,
    SendWithImm {
        imm: u32,
    },
    SendWithInv {
        rkey: u32,
    },
    Write {
        remote_addr: u64,
        rkey: u32,
    },
    WriteWithImm {
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    },
    Read {
        remote_addr: u64,
        rkey: u32,
    },
    /// The SGL names one 8-byte local buffer receiving the original value.
    CompareSwap {
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    },
    /// The SGL names one 8-byte local buffer receiving the original value.
    FetchAdd {
        remote_addr: u64,
        rkey: u32,
        add: u64,
    },
}

impl SendOp {
    /// The opcode of this request's completion.
    pub fn wc_opcode(&self) -> WcOpcode {
        match self {
            SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => {
                WcOpcode::Send
            }
            SendOp::Write { .. } | SendOp::WriteWithImm { .. } => WcOpcode::RdmaWrite,
            SendOp::Read { .. } => WcOpcode::RdmaRead,
            SendOp::CompareSwap { .. } => WcOpcode::CompSwap,
            SendOp::FetchAdd { .. } => WcOpcode::FetchAdd,
        }
    }

    /// The immediate data the request carries (a SEND or RDMA WRITE with immediate); its
    /// completion reports it too, so a consumer can tell the two kinds of WRITE apart.
    pub fn immediate(&self) -> Option<u32> {
        match *self {
            SendOp::SendWithImm { imm } | SendOp::WriteWithImm { imm, .. } => Some(imm),
            _ => None,
        }
    }
}

/// A send work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendWr {
    pub wr_id: u64,
    pub op: SendOp,
    pub sgl: SgList,
    /// Generate a completion on success (errors always complete).
    pub signaled: bool,
    /// Wait for all earlier READs/atomics to complete before starting (IBTA §10.8.3.3).
    pub fence: bool,
    /// Set the solicited-event bit on the last packet.
    pub solicited: bool,
}

/// A receive work request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
    pub sgl: SgList,
}

/// Completion status (IBTA vol. 1 §11.4.2.1; `ib_wc_status` naming).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcStatus {
    Success,
    /// Local length error: a received message exceeds the posted buffer.
    LocLenErr,
    /// Local QP operation error.
    LocQpOpErr,
    /// Local protection error: an SGE fails the L_Key / PD / bounds / rights checks.
    LocProtErr,
    /// Flushed: the QP went to ERROR before this WR completed.
    WrFlushErr,
    /// Bad response: an unexpected opcode in a response.
    BadRespErr,
    /// Local access error on a received request.
    LocAccessErr,
    /// NAK invalid request.
    RemInvReqErr,
    /// NAK remote access error.
    RemAccessErr,
    /// NAK remote operational error.
    RemOpErr,
    /// Transport retry counter exceeded.
    RetryExcErr,
    /// RNR retry counter exceeded.
    RnrRetryExcErr,
}

/// Which operation a completion is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    Send,
    RdmaWrite,
    RdmaRead,
    CompSwap,
    FetchAdd,
    /// A received SEND (receive WR consumed).
    Recv,
    /// A received RDMA WRITE with immediate (receive WR consumed, no data placed in it).
    RecvRdmaWithImm,
    /// A memory window bind (IBV_WC_BIND_MW; DAT_RMR_BIND_COMPLETION_EVENT).
    BindMw,
}

/// A work completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkCompletion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// Bytes transferred (receives: bytes placed; reads: bytes read).
    pub byte_len: u32,
    /// The immediate data received, or (a send completion) sent ([`SendOp::immediate`]).
    pub imm_data: Option<u32>,
    pub invalidated_rkey: Option<u32>,
    /// This QP.
    pub qp_num: u32,
    /// For receives drawn from an SRQ, the SRQ's number.
    pub srq: Option<u32>,
}

/// Why a post or modify was refused synchronously.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum QpError {
    #[error("the QP is in a state that does not allow this call")]
    InvalidState,
    #[error("the queue is full")]
    QueueFull,
    #[error("too many scatter/gather entries")]
    TooManySge,
    #[error("invalid argument")]
    InvalidArgument,
    #[error("this state transition is not allowed")]
    InvalidTransition,
}
