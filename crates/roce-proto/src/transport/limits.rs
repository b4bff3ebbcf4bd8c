//! The transport's fixed limits, shared by the requester, the responder, the completer and
//! the send window: the largest message, the PSNs in flight, how often a requester asks for an
//! ACK (IBTA vol. 1 §9.7.4.1.4) and how many responses a responder queues. `transport`
//! re-exports them (`transport::MAX_MSG_SIZE`, ...).

/// Largest message this transport sends or accepts (bytes); keeps a READ's PSN span far
/// below the 2^23 window at the smallest MTU.
pub const MAX_MSG_SIZE: u32 = 1 << 30;

/// Request an ACK at least every this many packets, of one message or several unsignaled ones.
pub const ACK_REQ_EVERY: u32 = 16;

/// Most PSNs in flight (sent and not acknowledged) before the requester waits. Far below the
/// 2^23 half-ring so the responder always classifies PSNs correctly.
pub const MAX_OUTSTANDING_PSNS: u32 = 2048;

/// Most responses (ACK/NAK, READ response streams, atomic ACKs) queued at once; beyond it new
/// READ/atomic requests are dropped unexecuted and the requester retries.
pub const MAX_QUEUED_RESPONSES: usize = 64;
