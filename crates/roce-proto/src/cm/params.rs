//! What the consumer passes to `Cm::connect` / `Cm::accept`, and the CM's own settings
//! (IBTA vol. 1 §12.7 field meanings; defaults are what Linux rdma_cm over rxe sends).

use crate::mem::access::Access;
use crate::transport::types::Mtu;
use crate::wire::psn::Psn;
use std::net::IpAddr;

/// Settings of one `Cm` instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CmConfig {
    /// Exponent of our CM response timeout, sent as both REQ timeouts (§12.7.16): 20.
    pub cm_response_timeout: u8,
    /// Max CM retries sent in REQ (§12.7.27): 15.
    pub max_cm_retries: u8,
    /// Target ACK delay sent in REP (§12.7.32): 15.
    pub target_ack_delay: u8,
    /// Service timeout sent in an MRA while the consumer has not answered a REQ: 24 (69 s).
    /// A request still unanswered after it is rejected (Timeout) and forgotten.
    pub mra_service_timeout: u8,
    /// Hop limit in the REQ path (RoCEv2 routes: 64).
    pub hop_limit: u8,
    /// Connection requests not yet answered by the consumer (accept or reject), at most, per
    /// listener and in all: a REQ beyond either is rejected (No resources) and leaves no state,
    /// so a flood of REQs cannot grow the table without bound: 16 384 and 32 768.
    pub max_requests_per_listener: usize,
    pub max_requests: usize,
    /// Exponent of the time-wait period (4.096 us * 2^t) a finished connection is kept to answer
    /// duplicates: 22 (17 s, a few of the peer's 4.3 s retransmissions). Later duplicates of a
    /// DREQ still get a DREP (answered statelessly, as Linux does).
    pub time_wait: u8,
}

impl Default for CmConfig {
    fn default() -> Self {
        CmConfig {
            cm_response_timeout: 20,
            max_cm_retries: 15,
            target_ack_delay: 15,
            mra_service_timeout: 24,
            hop_limit: 64,
            time_wait: 22,
            max_requests_per_listener: 16_384,
            max_requests: 32_768,
        }
    }
}

impl CmConfig {
    /// How long a side that answered a DREQ stays to answer it again: a DREP lost on the way
    /// makes the peer send its DREQ again after this side's CM response timeout (which the
    /// REQ/REP exchange gave it, IBTA vol. 1 §12.6.11), and only a port still running answers
    /// it; the peer would otherwise wait out its DREQ retries. Two timeouts: one resend and
    /// its way.
    pub fn dreq_resend_wait(&self) -> core::time::Duration {
        super::timeout::cm_timeout(self.cm_response_timeout) * 2
    }
}

/// The local ACK timeout exponents (IBTA vol. 1 §12.7.34) the passive side takes from a REQ:
/// 8 (1 ms) ..= 22 (17 s). A peer's 0, "wait forever", is taken as
/// [`PEER_ACK_TIMEOUT_FOR_INFINITE`]: a peer never makes this side's requests wait without end.
pub const PEER_ACK_TIMEOUT: core::ops::RangeInclusive<u8> = 8..=22;
/// What a peer's local ACK timeout of 0 becomes: 19 (2.1 s, what Linux sends).
pub const PEER_ACK_TIMEOUT_FOR_INFINITE: u8 = 19;
/// The largest CM response timeout or MRA service timeout exponent taken from a peer (they
/// time this side's retransmissions and waits): 24 (69 s, the service timeout this CM's own
/// MRAs ask for).
pub const PEER_CM_TIMEOUT_MAX: u8 = 24;

/// A peer's local ACK timeout exponent as this side uses it ([`PEER_ACK_TIMEOUT`]).
pub fn peer_ack_timeout(t: u8) -> u8 {
    if t == 0 {
        PEER_ACK_TIMEOUT_FOR_INFINITE
    } else {
        t.clamp(*PEER_ACK_TIMEOUT.start(), *PEER_ACK_TIMEOUT.end())
    }
}

/// Active side: what `Cm::connect` puts in the REQ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectParams {
    pub dst_ip: IpAddr,
    /// Destination port: service ID `0x0000000001060000 | port`.
    pub port: u16,
    /// Source port in the IP CM header (rdma_cm's local port; informative).
    pub src_port: u16,
    /// The consumer's QP, in RESET; the CM moves it to INIT, RTR, RTS when the REP arrives.
    pub local_qpn: u32,
    /// The REQ's starting PSN. Linux `ib_cm` (and the capture in `tests/vectors`) use it as the
    /// PSN this (active) side expects to *receive* first: it becomes this QP's `rq_psn` and the
    /// passive QP's `sq_psn`. This side's send PSN comes from the REP.
    pub starting_psn: Psn,
    /// RDMA reads/atomics this side accepts as responder.
    pub responder_resources: u8,
    /// RDMA reads/atomics this side issues as requester.
    pub initiator_depth: u8,
    pub pmtu: Mtu,
    /// Transport retries of both QPs (3 bits).
    pub retry_cnt: u8,
    /// RNR retries the passive QP uses (3 bits, 7 = infinite).
    pub rnr_retry: u8,
    /// Local ACK timeout exponent (5 bits).
    pub local_ack_timeout: u8,
    /// RNR timer this QP advertises.
    pub min_rnr_timer: u8,
    pub srq: bool,
    /// Remote access rights granted on this QP.
    pub access: Access,
    /// Consumer private data, at most 56 bytes (after the 36-byte IP CM header).
    pub private_data: Vec<u8>,
    /// How long the consumer waits for the connection (dat_ep_connect(3DAT) `timeout`): when it
    /// expires before the REP, a REJ (Timeout) is sent and the consumer gets `TimedOut`.
    /// `None`: the CM's own retries decide (`Unreachable`).
    pub timeout: Option<std::time::Duration>,
}

impl ConnectParams {
    /// Linux-like defaults: MTU 1024, retry and RNR retry 7, local ACK timeout 19, 1 read/atomic
    /// each way, no private data.
    pub fn new(dst_ip: impl Into<IpAddr>, port: u16, local_qpn: u32, starting_psn: Psn) -> Self {
        ConnectParams {
            dst_ip: dst_ip.into(),
            port,
            src_port: 0,
            local_qpn,
            starting_psn,
            responder_resources: 1,
            initiator_depth: 1,
            pmtu: Mtu::Mtu1024,
            retry_cnt: 7,
            rnr_retry: 7,
            local_ack_timeout: 19,
            min_rnr_timer: 12,
            srq: false,
            access: Access::empty(),
            private_data: Vec::new(),
            timeout: None,
        }
    }
}

/// Passive side: what `Cm::accept` puts in the REP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcceptParams {
    /// The consumer's QP, in RESET; moved to INIT and RTR before the REP is sent, RTS on RTU.
    pub local_qpn: u32,
    /// The REP's starting PSN: the PSN this (passive) side expects to receive first (its
    /// `rq_psn`; the active QP's `sq_psn`). This side's send PSN comes from the REQ.
    pub starting_psn: Psn,
    /// Capped at the REQ's initiator depth.
    pub responder_resources: u8,
    /// Capped at the REQ's responder resources.
    pub initiator_depth: u8,
    /// Path MTU cap; the REQ's MTU is used when larger or when `None`.
    pub pmtu: Option<Mtu>,
    /// RNR retries the active QP uses (3 bits).
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub srq: bool,
    pub access: Access,
    /// At most 196 bytes.
    pub private_data: Vec<u8>,
}

impl AcceptParams {
    pub fn new(local_qpn: u32, starting_psn: Psn) -> Self {
        AcceptParams {
            local_qpn,
            starting_psn,
            responder_resources: 1,
            initiator_depth: 1,
            pmtu: None,
            rnr_retry: 7,
            min_rnr_timer: 12,
            srq: false,
            access: Access::empty(),
            private_data: Vec::new(),
        }
    }
}
