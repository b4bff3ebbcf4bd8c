//! Per-connection CM state (IBTA vol. 1 §12.9.6, Figure 150 "Communication state machine"),
//! reduced to what RC connection setup and teardown need (no LAP/APR, no SIDR).

use crate::time::Instant;
use crate::transport::types::QpAttr;
use crate::wire::cm_msg::ReqRepr;
use crate::wire::mad::MAD_LEN;
use std::net::IpAddr;

/// Connection states (§12.9.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// Active: REQ sent, waiting for REP.
    ReqSent,
    /// Active: the passive side MRAed our REQ; waiting longer for REP.
    MraReqRcvd,
    /// Passive: REQ delivered to the consumer, no answer yet.
    ReqRcvd,
    /// Passive: as `ReqRcvd`, and an MRA was sent for a duplicate REQ.
    MraReqSent,
    /// Passive: REP sent, waiting for RTU.
    RepSent,
    /// Passive: the active side MRAed our REP.
    MraRepRcvd,
    Established,
    /// DREQ sent, waiting for DREP.
    DreqSent,
    /// Finished; kept until the timer fires to answer duplicates from `last`.
    TimeWait,
}

/// One connection.
#[derive(Clone, Debug)]
pub(crate) struct Conn {
    pub state: State,
    pub active: bool,
    pub remote_ip: IpAddr,
    /// The peer's comm ID; 0 until known (active side before REP).
    pub remote_comm_id: u32,
    pub tid: u64,
    pub local_qpn: u32,
    /// Negotiated QP attributes, completed as messages arrive.
    pub attr: QpAttr,
    /// Our initiator depth / responder resources as offered (active side, capped on REP).
    pub offered_initiator_depth: u8,
    pub offered_responder_resources: u8,
    /// Exponent of how long the peer may take to answer us.
    pub peer_timeout: u8,
    pub max_retries: u8,
    pub retries: u8,
    pub timer: Option<Instant>,
    /// Active side: when the consumer's connect timeout expires (`ConnectParams::timeout`);
    /// passive side: when an unanswered request is given up (`CmConfig::mra_service_timeout`).
    pub deadline: Option<Instant>,
    /// Passive side: the listener's port (for the per-listener count of requests).
    pub listener: u16,
    /// The message retransmitted on timeout or resent on a duplicate.
    pub last: Option<[u8; MAD_LEN]>,
    /// The REQ (passive side), for `accept`.
    pub req: Option<ReqRepr>,
}

impl Conn {
    /// A request (passive) the consumer has not answered yet.
    pub fn unanswered(&self) -> bool {
        matches!(self.state, State::ReqRcvd | State::MraReqSent)
    }

    /// The consumer's connect deadline while it still applies (active side, no REP yet).
    pub fn connect_deadline(&self) -> Option<Instant> {
        match self.state {
            State::ReqSent | State::MraReqRcvd | State::ReqRcvd | State::MraReqSent => {
                self.deadline
            }
            _ => None,
        }
    }

    /// True when `t` is this connection's timer or connect deadline now.
    pub fn has_deadline(&self, t: Instant) -> bool {
        self.timer == Some(t) || self.connect_deadline() == Some(t)
    }

    /// Attribute ID of `last`, if any.
    pub fn last_attr(&self) -> Option<u16> {
        self.last.map(|m| u16::from_be_bytes([m[16], m[17]]))
    }
}
