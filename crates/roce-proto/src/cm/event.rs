//! What the CM hands back: MADs to send, consumer events, errors (IBTA vol. 1 §12.9 state
//! machine outputs).

use crate::transport::types::{Mtu, QpError};
use crate::wire::cm_msg::RejReason;
use crate::wire::mad::MAD_LEN;
use std::net::IpAddr;
use thiserror::Error;

/// A connection, named by its local communication ID (§12.6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CmId(pub u32);

/// QP number of the general services interface that carries CM MADs (§13.5).
pub const CM_QPN: u32 = 1;

/// A MAD to send: the endpoint wraps it in a UD SEND-only to QP1 of `dst`, P_Key 0xFFFF, DETH
/// Q_Key `wire::deth::GSI_QKEY` (0x80010000), source QP 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmTransmit {
    pub dst: IpAddr,
    pub mad: [u8; MAD_LEN],
}

/// Something the consumer must know.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmEvent {
    /// A REQ for a listened port; answer with `Cm::accept` or `Cm::reject`.
    ConnectRequest {
        id: CmId,
        port: u16,
        src_ip: IpAddr,
        src_port: u16,
        dst_ip: IpAddr,
        remote_qpn: u32,
        remote_ca_guid: u64,
        /// The REQ's responder resources / initiator depth.
        responder_resources: u8,
        initiator_depth: u8,
        pmtu: Mtu,
        /// The consumer part of the REQ private data (56 bytes, after the IP CM header).
        private_data: Vec<u8>,
    },
    /// Both QPs are in RTS (active: REP received and RTU sent; passive: RTU received).
    /// `private_data` is the REP's (196 bytes) on the active side, empty on the passive side.
    Established { id: CmId, private_data: Vec<u8> },
    /// The peer sent REJ (to our REQ, or to our REP).
    Rejected {
        id: CmId,
        reason: RejReason,
        private_data: Vec<u8>,
    },
    /// Our REQ (active) or REP (passive) went unanswered through every retry; a REJ with reason
    /// Timeout was sent.
    Unreachable { id: CmId },
    /// Our REQ got no REP before the consumer's connect timeout (`ConnectParams::timeout`),
    /// or (passive) a request was left unanswered past `CmConfig::mra_service_timeout`; a REJ
    /// with reason Timeout was sent.
    TimedOut { id: CmId },
    /// The connection is down: DREQ received, DREP received, or our DREQ went unanswered.
    Disconnected { id: CmId },
    /// A QP transition asked of `QpControl` failed while connecting; a REJ was sent.
    ConnectError { id: CmId, error: QpError },
}

/// Why a consumer call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum CmError {
    #[error("no such connection")]
    UnknownId,
    #[error("the connection is not in a state that allows this call")]
    InvalidState,
    #[error("private data too long ({len} bytes, at most {max})")]
    PrivateDataTooLong { len: usize, max: usize },
    #[error("port {0} already has a listener")]
    PortInUse(u16),
    #[error("no local address of {0}'s family on this port")]
    NoLocalAddress(IpAddr),
    #[error("QP transition failed: {0}")]
    Qp(#[from] QpError),
}

/// Counters of dropped or repeated input.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CmStats {
    /// MADs that did not decode (short, not CM class 7 version 2 `Send`, unknown attribute,
    /// bad IP CM header).
    pub malformed: u64,
    /// Well-formed MADs that match no connection in a state expecting them.
    pub unmatched: u64,
    /// Duplicates answered from saved state (REQ, REP, DREQ).
    pub duplicates: u64,
    /// Retransmissions on timeout.
    pub retransmits: u64,
    /// REQs refused for a P_Key outside the port's partition table.
    pub foreign_pkey: u64,
    /// REQs refused because the unanswered requests were at their limit
    /// (`CmConfig::max_requests*`), and requests given up unanswered.
    pub requests_refused: u64,
    pub requests_expired: u64,
    /// CM messages sent (retransmissions not included) and received (decoded), by kind.
    pub sent: MadCounts,
    pub received: MadCounts,
    /// Connections established as the active (REP received) and the passive side (RTU
    /// received).
    pub established_active: u64,
    pub established_passive: u64,
}

/// CM messages by kind (IBTA vol. 1 §12.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MadCounts {
    pub req: u64,
    pub mra: u64,
    pub rej: u64,
    pub rep: u64,
    pub rtu: u64,
    pub dreq: u64,
    pub drep: u64,
}

impl MadCounts {
    /// Counts one message of `msg`'s kind.
    pub fn count(&mut self, msg: &crate::wire::cm_msg::CmMessage) {
        use crate::wire::cm_msg::CmMessage as M;
        let n = match msg {
            M::Req(_) => &mut self.req,
            M::Mra(_) => &mut self.mra,
            M::Rej(_) => &mut self.rej,
            M::Rep(_) => &mut self.rep,
            M::Rtu(_) => &mut self.rtu,
            M::Dreq(_) => &mut self.dreq,
            M::Drep(_) => &mut self.drep,
        };
        *n += 1;
    }
}
