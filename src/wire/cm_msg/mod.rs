//! Communication manager messages (IBTA vol. 1 §12.6): REQ, MRA, REJ, REP, RTU, DREQ, DREP,
//! each as a `Repr` read from / written to the 232 attribute-data bytes of a CM MAD
//! (`super::mad`). Offsets below are relative to the start of the attribute data (MAD byte 24)
//! and follow §12.6.5 (REQ), §12.6.6 (MRA), §12.6.7 (REJ), §12.6.8 (REP), §12.6.9 (RTU),
//! §12.6.10 (DREQ), §12.6.11 (DREP); checked against Wireshark's dissector on the rxe capture in
//! `tests/vectors`. Every field, including the reserved-adjacent bit fields, is kept so that a
//! parsed message re-emits to the same bytes. Parsing never fails on field values: only a short
//! buffer, a MAD header that is not CM/`Send`, or an unknown attribute ID is an error.

use super::mad::{self, MadHeader, MAD_DATA_LEN, MAD_HEADER_LEN, MAD_LEN};
use super::psn::Psn;
use thiserror::Error;

/// CM attribute IDs (§12.6.1, Table 100).
pub mod attr {
    pub const REQ: u16 = 0x0010;
    pub const MRA: u16 = 0x0011;
    pub const REJ: u16 = 0x0012;
    pub const REP: u16 = 0x0013;
    pub const RTU: u16 = 0x0014;
    pub const DREQ: u16 = 0x0015;
    pub const DREP: u16 = 0x0016;
}

/// Private data sizes per message (§12.6.5-§12.6.11).
pub const REQ_PRIVATE_LEN: usize = 92;
pub const MRA_PRIVATE_LEN: usize = 222;
pub const REJ_PRIVATE_LEN: usize = 148;
pub const REJ_ARI_LEN: usize = 72;
pub const REP_PRIVATE_LEN: usize = 196;
pub const RTU_PRIVATE_LEN: usize = 224;
pub const DREQ_PRIVATE_LEN: usize = 220;
pub const DREP_PRIVATE_LEN: usize = 224;

/// Why a CM MAD could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum CmCodecError {
    #[error("MAD too short ({0} bytes, need 256)")]
    Truncated(usize),
    #[error("MAD base version {0}, expected 1")]
    BaseVersion(u8),
    #[error("management class {0:#04x} is not CM (0x07)")]
    Class(u8),
    #[error("CM class version {0}, expected 2")]
    ClassVersion(u8),
    #[error("MAD method {0:#04x} is not Send (0x03)")]
    Method(u8),
    #[error("unknown CM attribute ID {0:#06x}")]
    UnknownAttribute(u16),
}

/// Which message a REJ rejects or an MRA acknowledges (§12.6.6, §12.6.7: 2-bit field).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MsgRef {
    Req,
    Rep,
    /// "Other" / LAP.
    Other,
    /// Value 3, reserved.
    Reserved,
}

impl MsgRef {
    const fn from_bits(b: u8) -> MsgRef {
        match b & 3 {
            0 => MsgRef::Req,
            1 => MsgRef::Rep,
            2 => MsgRef::Other,
            _ => MsgRef::Reserved,
        }
    }
    const fn bits(self) -> u8 {
        match self {
            MsgRef::Req => 0,
            MsgRef::Rep => 1,
            MsgRef::Other => 2,
            MsgRef::Reserved => 3,
        }
    }
}

/// REJ reason codes (§12.6.7.2, Table 112). Numbers as in Linux `enum ib_cm_rej_reason`
/// (`include/rdma/ib_cm.h`), which follows the IBTA table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RejReason {
    NoQp,
    NoEec,
    NoResources,
    Timeout,
    Unsupported,
    InvalidCommId,
    InvalidCommInstance,
    InvalidServiceId,
    InvalidTransportType,
    StaleConn,
    RdcNotExist,
    InvalidGid,
    InvalidLid,
    InvalidSl,
    InvalidTrafficClass,
    InvalidHopLimit,
    InvalidPacketRate,
    PortCmRedirect,
    PortRedirect,
    InvalidMtu,
    InsufficientRespResources,
    ConsumerDefined,
    InvalidRnrRetry,
    DuplicateLocalCommId,
    InvalidClassVersion,
    InvalidFlowLabel,
    /// Any other value (alternate-path reasons, vendor codes, reserved).
    Other(u16),
}

impl RejReason {
    pub const fn from_code(c: u16) -> RejReason {
        use RejReason::*;
        match c {
            1 => NoQp,
            2 => NoEec,
            3 => NoResources,
            4 => Timeout,
            5 => Unsupported,
            6 => InvalidCommId,
            7 => InvalidCommInstance,
            8 => InvalidServiceId,
            9 => InvalidTransportType,
            10 => StaleConn,
            11 => RdcNotExist,
            12 => InvalidGid,
            13 => InvalidLid,
            14 => InvalidSl,
            15 => InvalidTrafficClass,
            16 => InvalidHopLimit,
            17 => InvalidPacketRate,
            24 => PortCmRedirect,
            25 => PortRedirect,
            26 => InvalidMtu,
            27 => InsufficientRespResources,
            28 => ConsumerDefined,
            29 => InvalidRnrRetry,
            30 => DuplicateLocalCommId,
            31 => InvalidClassVersion,
            32 => InvalidFlowLabel,
            x => Other(x),
        }
    }
    pub const fn code(self) -> u16 {
        use RejReason::*;
        match self {
            NoQp => 1,
            NoEec => 2,
            NoResources => 3,
            Timeout => 4,
            Unsupported => 5,
            InvalidCommId => 6,
            InvalidCommInstance => 7,
            InvalidServiceId => 8,
            InvalidTransportType => 9,
            StaleConn => 10,
            RdcNotExist => 11,
            InvalidGid => 12,
            InvalidLid => 13,
            InvalidSl => 14,
            InvalidTrafficClass => 15,
            InvalidHopLimit => 16,
            InvalidPacketRate => 17,
            PortCmRedirect => 24,
            PortRedirect => 25,
            InvalidMtu => 26,
            InsufficientRespResources => 27,
            ConsumerDefined => 28,
            InvalidRnrRetry => 29,
            DuplicateLocalCommId => 30,
            InvalidClassVersion => 31,
            InvalidFlowLabel => 32,
            Other(x) => x,
        }
    }
}

/// Big-endian reads at fixed offsets of the 232-byte attribute data. Callers only pass
/// offsets inside it, and the data length is checked once before any read.
struct Rd<'a>(&'a [u8]);

impl Rd<'_> {
    fn u8(&self, o: usize) -> u8 {
        self.0[o]
    }
    fn u16(&self, o: usize) -> u16 {
        u16::from_be_bytes([self.0[o], self.0[o + 1]])
    }
    fn u24(&self, o: usize) -> u32 {
        u32::from_be_bytes([0, self.0[o], self.0[o + 1], self.0[o + 2]])
    }
    fn u32(&self, o: usize) -> u32 {
        u32::from_be_bytes([self.0[o], self.0[o + 1], self.0[o + 2], self.0[o + 3]])
    }
    fn u64(&self, o: usize) -> u64 {
        (u64::from(self.u32(o)) << 32) | u64::from(self.u32(o + 4))
    }
    fn arr<const N: usize>(&self, o: usize) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&self.0[o..o + N]);
        a
    }
}

struct Wr<'a>(&'a mut [u8]);

impl Wr<'_> {
    fn u8(&mut self, o: usize, v: u8) {
        self.0[o] = v;
    }
    fn u16(&mut self, o: usize, v: u16) {
        self.0[o..o + 2].copy_from_slice(&v.to_be_bytes());
    }
    fn u24(&mut self, o: usize, v: u32) {
        self.0[o..o + 3].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    fn u32(&mut self, o: usize, v: u32) {
        self.0[o..o + 4].copy_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, o: usize, v: u64) {
        self.0[o..o + 8].copy_from_slice(&v.to_be_bytes());
    }
    fn bytes(&mut self, o: usize, v: &[u8]) {
        self.0[o..o + v.len()].copy_from_slice(v);
    }
}

/// One path description inside a REQ (§12.6.5: primary at offset 52, alternate at 96; 44 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PathInfo {
    pub local_lid: u16,
    pub remote_lid: u16,
    /// Local port GID; on RoCEv2 with IPv4 the IPv4-mapped address `::ffff:a.b.c.d`.
    pub local_gid: [u8; 16],
    pub remote_gid: [u8; 16],
    /// 20 bits.
    pub flow_label: u32,
    /// 6 bits.
    pub packet_rate: u8,
    pub traffic_class: u8,
    pub hop_limit: u8,
    /// 4 bits.
    pub sl: u8,
    pub subnet_local: bool,
    /// 5 bits: 4.096 us * 2^t.
    pub local_ack_timeout: u8,
}

/// Byte offsets inside a path description.
mod path_field {
    pub const LOCAL_LID: usize = 0;
    pub const REMOTE_LID: usize = 2;
    pub const LOCAL_GID: usize = 4;
    pub const REMOTE_GID: usize = 20;
    pub const FLOW_LABEL_RATE: usize = 36;
    pub const TRAFFIC_CLASS: usize = 40;
    pub const HOP_LIMIT: usize = 41;
    pub const SL_SUBNET_LOCAL: usize = 42;
    pub const ACK_TIMEOUT: usize = 43;
}

impl PathInfo {
    fn parse(r: &Rd, base: usize) -> PathInfo {
        use path_field::*;
        let fl = r.u32(base + FLOW_LABEL_RATE);
        let sl = r.u8(base + SL_SUBNET_LOCAL);
        PathInfo {
            local_lid: r.u16(base + LOCAL_LID),
            remote_lid: r.u16(base + REMOTE_LID),
            local_gid: r.arr(base + LOCAL_GID),
            remote_gid: r.arr(base + REMOTE_GID),
            flow_label: fl >> 12,
            packet_rate: (fl & 0x3f) as u8,
            traffic_class: r.u8(base + TRAFFIC_CLASS),
            hop_limit: r.u8(base + HOP_LIMIT),
            sl: sl >> 4,
            subnet_local: sl & 0x08 != 0,
            local_ack_timeout: r.u8(base + ACK_TIMEOUT) >> 3,
        }
    }
    fn emit(&self, w: &mut Wr, base: usize) {
        use path_field::*;
        w.u16(base + LOCAL_LID, self.local_lid);
        w.u16(base + REMOTE_LID, self.remote_lid);
        w.bytes(base + LOCAL_GID, &self.local_gid);
        w.bytes(base + REMOTE_GID, &self.remote_gid);
        w.u32(
            base + FLOW_LABEL_RATE,
            ((self.flow_label & 0xf_ffff) << 12) | u32::from(self.packet_rate & 0x3f),
        );
        w.u8(base + TRAFFIC_CLASS, self.traffic_class);
        w.u8(base + HOP_LIMIT, self.hop_limit);
        w.u8(
            base + SL_SUBNET_LOCAL,
            ((self.sl & 0xf) << 4) | (u8::from(self.subnet_local) << 3),
        );
        w.u8(base + ACK_TIMEOUT, (self.local_ack_timeout & 0x1f) << 3);
    }
}

/// REQ field offsets (§12.6.5).
mod req_field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const SERVICE_ID: usize = 8;
    pub const LOCAL_CA_GUID: usize = 16;
    pub const LOCAL_QKEY: usize = 28;
    /// Local QPN (24) | responder resources (8).
    pub const LOCAL_QPN: usize = 32;
    pub const RESPONDER_RESOURCES: usize = 35;
    /// Local EECN (24) | initiator depth (8).
    pub const LOCAL_EECN: usize = 36;
    pub const INITIATOR_DEPTH: usize = 39;
    /// Remote EECN (24) | remote CM response timeout[7:3], transport type[2:1], e2e FC[0].
    pub const REMOTE_EECN: usize = 40;
    pub const TIMEOUT_TYPE_FC: usize = 43;
    /// Starting PSN (24) | local CM response timeout[7:3], retry count[2:0].
    pub const STARTING_PSN: usize = 44;
    pub const LOCAL_TIMEOUT_RETRY: usize = 47;
    pub const PKEY: usize = 48;
    /// Path MTU[7:4], RDC exists[3], RNR retry count[2:0].
    pub const MTU_RDC_RNR: usize = 50;
    /// Max CM retries[7:4], SRQ[3], extended transport type[2:0].
    pub const CM_RETRIES_SRQ: usize = 51;
    pub const PRIMARY_PATH: usize = 52;
    pub const ALTERNATE_PATH: usize = 96;
    pub const PRIVATE_DATA: usize = 140;
}

/// Connection request (§12.6.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqRepr {
    pub local_comm_id: u32,
    pub service_id: u64,
    pub local_ca_guid: u64,
    pub local_qkey: u32,
    /// 24 bits.
    pub local_qpn: u32,
    pub responder_resources: u8,
    /// 24 bits.
    pub local_eecn: u32,
    pub initiator_depth: u8,
    /// 24 bits.
    pub remote_eecn: u32,
    /// 5 bits: how long the passive side may take to answer (4.096 us * 2^t).
    pub remote_cm_response_timeout: u8,
    /// 2 bits: 0 = RC, 1 = UC, 2 = RD.
    pub transport_type: u8,
    pub end_to_end_flow_control: bool,
    /// The PSN carried in the REQ. Linux `ib_cm` (and the capture) use it as the *active* side's
    /// receive PSN, i.e. the PSN the passive side sends first; see `crate::cm`.
    pub starting_psn: Psn,
    /// 5 bits: how long the active side may take to answer.
    pub local_cm_response_timeout: u8,
    /// 3 bits.
    pub retry_count: u8,
    pub pkey: u16,
    /// 4 bits, IB MTU code (1 = 256 .. 5 = 4096).
    pub path_mtu: u8,
    pub rdc_exists: bool,
    /// 3 bits.
    pub rnr_retry_count: u8,
    /// 4 bits.
    pub max_cm_retries: u8,
    pub srq: bool,
    /// 3 bits.
    pub extended_transport_type: u8,
    pub primary_path: PathInfo,
    pub alternate_path: PathInfo,
    pub private_data: [u8; REQ_PRIVATE_LEN],
}

impl ReqRepr {
    fn parse(d: &[u8]) -> ReqRepr {
        use req_field::*;
        let r = Rd(d);
        let tt = r.u8(TIMEOUT_TYPE_FC);
        let lt = r.u8(LOCAL_TIMEOUT_RETRY);
        let mtu = r.u8(MTU_RDC_RNR);
        let cr = r.u8(CM_RETRIES_SRQ);
        ReqRepr {
            local_comm_id: r.u32(LOCAL_COMM_ID),
            service_id: r.u64(SERVICE_ID),
            local_ca_guid: r.u64(LOCAL_CA_GUID),
            local_qkey: r.u32(LOCAL_QKEY),
            local_qpn: r.u24(LOCAL_QPN),
            responder_resources: r.u8(RESPONDER_RESOURCES),
            local_eecn: r.u24(LOCAL_EECN),
            initiator_depth: r.u8(INITIATOR_DEPTH),
            remote_eecn: r.u24(REMOTE_EECN),
            remote_cm_response_timeout: tt >> 3,
            transport_type: (tt >> 1) & 3,
            end_to_end_flow_control: tt & 1 != 0,
            starting_psn: Psn::new(r.u24(STARTING_PSN)),
            local_cm_response_timeout: lt >> 3,
            retry_count: lt & 7,
            pkey: r.u16(PKEY),
            path_mtu: mtu >> 4,
            rdc_exists: mtu & 0x08 != 0,
            rnr_retry_count: mtu & 7,
            max_cm_retries: cr >> 4,
            srq: cr & 0x08 != 0,
            extended_transport_type: cr & 7,
            primary_path: PathInfo::parse(&r, PRIMARY_PATH),
            alternate_path: PathInfo::parse(&r, ALTERNATE_PATH),
            private_data: r.arr(PRIVATE_DATA),
        }
    }
    fn emit(&self, d: &mut [u8]) {
        use req_field::*;
        let mut w = Wr(d);
        w.u32(LOCAL_COMM_ID, self.local_comm_id);
        w.u64(SERVICE_ID, self.service_id);
        w.u64(LOCAL_CA_GUID, self.local_ca_guid);
        w.u32(LOCAL_QKEY, self.local_qkey);
        w.u24(LOCAL_QPN, self.local_qpn);
        w.u8(RESPONDER_RESOURCES, self.responder_resources);
        w.u24(LOCAL_EECN, self.local_eecn);
        w.u8(INITIATOR_DEPTH, self.initiator_depth);
        w.u24(REMOTE_EECN, self.remote_eecn);
        w.u8(
            TIMEOUT_TYPE_FC,
            ((self.remote_cm_response_timeout & 0x1f) << 3)
                | ((self.transport_type & 3) << 1)
                | u8::from(self.end_to_end_flow_control),
        );
        w.u24(STARTING_PSN, self.starting_psn.value());
        w.u8(
            LOCAL_TIMEOUT_RETRY,
            ((self.local_cm_response_timeout & 0x1f) << 3) | (self.retry_count & 7),
        );
        w.u16(PKEY, self.pkey);
        w.u8(
            MTU_RDC_RNR,
            ((self.path_mtu & 0xf) << 4)
                | (u8::from(self.rdc_exists) << 3)
                | (self.rnr_retry_count & 7),
        );
        w.u8(
            CM_RETRIES_SRQ,
            ((self.max_cm_retries & 0xf) << 4)
                | (u8::from(self.srq) << 3)
                | (self.extended_transport_type & 7),
        );
        self.primary_path.emit(&mut w, PRIMARY_PATH);
        self.alternate_path.emit(&mut w, ALTERNATE_PATH);
        w.bytes(PRIVATE_DATA, &self.private_data);
    }
}

/// REP field offsets (§12.6.8).
mod rep_field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const REMOTE_COMM_ID: usize = 4;
    pub const LOCAL_QKEY: usize = 8;
    pub const LOCAL_QPN: usize = 12;
    pub const LOCAL_EECN: usize = 16;
    pub const STARTING_PSN: usize = 20;
    pub const RESPONDER_RESOURCES: usize = 24;
    pub const INITIATOR_DEPTH: usize = 25;
    /// Target ACK delay[7:3], failover accepted[2:1], end-to-end FC[0].
    pub const ACK_DELAY_FAILOVER_FC: usize = 26;
    /// RNR retry count[7:5], SRQ[4].
    pub const RNR_SRQ: usize = 27;
    pub const LOCAL_CA_GUID: usize = 28;
    pub const PRIVATE_DATA: usize = 36;
}

/// Connection reply (§12.6.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub local_qkey: u32,
    /// 24 bits.
    pub local_qpn: u32,
    /// 24 bits.
    pub local_eecn: u32,
    /// The PSN carried in the REP: the passive side's receive PSN (the active side's first send
    /// PSN), as Linux `ib_cm` and the capture use it.
    pub starting_psn: Psn,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// 5 bits.
    pub target_ack_delay: u8,
    /// 2 bits.
    pub failover_accepted: u8,
    pub end_to_end_flow_control: bool,
    /// 3 bits: RNR retries the active side should use.
    pub rnr_retry_count: u8,
    pub srq: bool,
    pub local_ca_guid: u64,
    pub private_data: [u8; REP_PRIVATE_LEN],
}

impl RepRepr {
    fn parse(d: &[u8]) -> RepRepr {
        use rep_field::*;
        let r = Rd(d);
        let a = r.u8(ACK_DELAY_FAILOVER_FC);
        let n = r.u8(RNR_SRQ);
        RepRepr {
            local_comm_id: r.u32(LOCAL_COMM_ID),
            remote_comm_id: r.u32(REMOTE_COMM_ID),
            local_qkey: r.u32(LOCAL_QKEY),
            local_qpn: r.u24(LOCAL_QPN),
            local_eecn: r.u24(LOCAL_EECN),
            starting_psn: Psn::new(r.u24(STARTING_PSN)),
            responder_resources: r.u8(RESPONDER_RESOURCES),
            initiator_depth: r.u8(INITIATOR_DEPTH),
            target_ack_delay: a >> 3,
            failover_accepted: (a >> 1) & 3,
            end_to_end_flow_control: a & 1 != 0,
            rnr_retry_count: n >> 5,
            srq: n & 0x10 != 0,
            local_ca_guid: r.u64(LOCAL_CA_GUID),
            private_data: r.arr(PRIVATE_DATA),
        }
    }
    fn emit(&self, d: &mut [u8]) {
        use rep_field::*;
        let mut w = Wr(d);
        w.u32(LOCAL_COMM_ID, self.local_comm_id);
        w.u32(REMOTE_COMM_ID, self.remote_comm_id);
        w.u32(LOCAL_QKEY, self.local_qkey);
        w.u24(LOCAL_QPN, self.local_qpn);
        w.u24(LOCAL_EECN, self.local_eecn);
        w.u24(STARTING_PSN, self.starting_psn.value());
        w.u8(RESPONDER_RESOURCES, self.responder_resources);
        w.u8(INITIATOR_DEPTH, self.initiator_depth);
        w.u8(
            ACK_DELAY_FAILOVER_FC,
            ((self.target_ack_delay & 0x1f) << 3)
                | ((self.failover_accepted & 3) << 1)
                | u8::from(self.end_to_end_flow_control),
        );
        w.u8(
            RNR_SRQ,
            ((self.rnr_retry_count & 7) << 5) | (u8::from(self.srq) << 4),
        );
        w.u64(LOCAL_CA_GUID, self.local_ca_guid);
        w.bytes(PRIVATE_DATA, &self.private_data);
    }
}

/// Common offsets: local comm ID at 0, remote comm ID at 4 (every message but REQ).
mod ids_field {
    pub const LOCAL_COMM_ID: usize = 0;
    pub const REMOTE_COMM_ID: usize = 4;
}

/// Ready to use (§12.6.9); also the layout of DREP (§12.6.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtuRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub private_data: [u8; RTU_PRIVATE_LEN],
}

/// Disconnect reply (§12.6.11): same layout as RTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub private_data: [u8; DREP_PRIVATE_LEN],
}

const IDS_PRIVATE: usize = 8;

impl RtuRepr {
    fn parse(d: &[u8]) -> RtuRepr {
        let r = Rd(d);
        RtuRepr {
            local_comm_id: r.u32(ids_field::LOCAL_COMM_ID),
            remote_comm_id: r.u32(ids_field::REMOTE_COMM_ID),
            private_data: r.arr(IDS_PRIVATE),
        }
    }
    fn emit(&self, d: &mut [u8]) {
        let mut w = Wr(d);
        w.u32(ids_field::LOCAL_COMM_ID, self.local_comm_id);
        w.u32(ids_field::REMOTE_COMM_ID, self.remote_comm_id);
        w.bytes(IDS_PRIVATE, &self.private_data);
    }
}

impl DrepRepr {
    fn parse(d: &[u8]) -> DrepRepr {
        let r = Rd(d);
        DrepRepr {
            local_comm_id: r.u32(ids_field::LOCAL_COMM_ID),
            remote_comm_id: r.u32(ids_field::REMOTE_COMM_ID),
            private_data: r.arr(IDS_PRIVATE),
        }
    }
    fn emit(&self, d: &mut [u8]) {
        let mut w = Wr(d);
        w.u32(ids_field::LOCAL_COMM_ID, self.local_comm_id);
        w.u32(ids_field::REMOTE_COMM_ID, self.remote_comm_id);
        w.bytes(IDS_PRIVATE, &self.private_data);
    }
}

/// REJ field offsets (§12.6.7).
mod rej_field {
    /// Message rejected[7:6].
    pub const MSG_REJECTED: usize = 8;
    /// Reject info length[7:1].
    pub const ARI_LENGTH: usize = 9;
    pub const REASON: usize = 10;
    pub const ARI: usize = 12;
    pub const PRIVATE_DATA: usize = 84;
}

/// Reject (§12.6.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RejRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub msg_rejected: MsgRef,
    /// 7 bits: valid bytes of `ari`.
    pub reject_info_length: u8,
    pub reason: RejReason,
    /// Additional rejection information.
    pub ari: [u8; REJ_ARI_LEN],
    pub private_data: [u8; REJ_PRIVATE_LEN],
}

impl RejRepr {
    fn parse(d: &[u8]) -> RejRepr {
        use rej_field::*;
        let r = Rd(d);
        RejRepr {
            local_comm_id: r.u32(ids_field::LOCAL_COMM_ID),
            remote_comm_id: r.u32(ids_field::REMOTE_COMM_ID),
            msg_rejected: MsgRef::from_bits(r.u8(MSG_REJECTED) >> 6),
            reject_info_length: r.u8(ARI_LENGTH) >> 1,
            reason: RejReason::from_code(r.u16(REASON)),
            ari: r.arr(ARI),
            private_data: r.arr(PRIVATE_DATA),
        }
    }
    fn emit(&self, d: &mut [u8]) {
        use rej_field::*;
        let mut w = Wr(d);
        w.u32(ids_field::LOCAL_COMM_ID, self.local_comm_id);
        w.u32(ids_field::REMOTE_COMM_ID, self.remote_comm_id);
        w.u8(MSG_REJECTED, self.msg_rejected.bits() << 6);
        w.u8(ARI_LENGTH, (self.reject_info_length & 0x7f) << 1);
        w.u16(REASON, self.reason.code());
        w.bytes(ARI, &self.ari);
        w.bytes(PRIVATE_DATA, &self.private_data);
    }
}

/// MRA field offsets (§12.6.6).
mod mra_field {
    /// Message MRAed[7:6].
    pub const MSG_MRAED: usize = 8;
    /// Service timeout[7:3].
    pub const SERVICE_TIMEOUT: usize = 9;
    pub const PRIVATE_DATA: usize = 10;
}

/// Message receipt acknowledgement (§12.6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MraRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub msg_mraed: MsgRef,
    /// 5 bits: the sender will answer within 4.096 us * 2^t.
    pub service_timeout: u8,
    pub private_data: [u8; MRA_PRIVATE_LEN],
}

impl MraRepr {
    fn parse(d: &[u8]) -> MraRepr {
        use mra_field::*;
        let r = Rd(d);
        MraRepr {
            local_comm_id: r.u32(ids_field::LOCAL_COMM_ID),
            remote_comm_id: r.u32(ids_field::REMOTE_COMM_ID),
            msg_mraed: MsgRef::from_bits(r.u8(MSG_MRAED) >> 6),
            service_timeout: r.u8(SERVICE_TIMEOUT) >> 3,
            private_data: r.arr(PRIVATE_DATA),
        }
    }
    fn emit(&self, d: &mut [u8]) {
        use mra_field::*;
        let mut w = Wr(d);
        w.u32(ids_field::LOCAL_COMM_ID, self.local_comm_id);
        w.u32(ids_field::REMOTE_COMM_ID, self.remote_comm_id);
        w.u8(MSG_MRAED, self.msg_mraed.bits() << 6);
        w.u8(SERVICE_TIMEOUT, (self.service_timeout & 0x1f) << 3);
        w.bytes(PRIVATE_DATA, &self.private_data);
    }
}

/// DREQ field offsets (§12.6.10).
mod dreq_field {
    /// Remote QPN/EECN (24) | reserved.
    pub const REMOTE_QPN: usize = 8;
    pub const PRIVATE_DATA: usize = 12;
}

/// Disconnect request (§12.6.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DreqRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    /// 24 bits: the receiver's QPN.
    pub remote_qpn: u32,
    pub private_data: [u8; DREQ_PRIVATE_LEN],
}

impl DreqRepr {
    fn parse(d: &[u8]) -> DreqRepr {
        use dreq_field::*;
        let r = Rd(d);
        DreqRepr {
            local_comm_id: r.u32(ids_field::LOCAL_COMM_ID),
            remote_comm_id: r.u32(ids_field::REMOTE_COMM_ID),
            remote_qpn: r.u24(REMOTE_QPN),
            private_data: r.arr(PRIVATE_DATA),
        }
    }
    fn emit(&self, d: &mut [u8]) {
        use dreq_field::*;
        let mut w = Wr(d);
        w.u32(ids_field::LOCAL_COMM_ID, self.local_comm_id);
        w.u32(ids_field::REMOTE_COMM_ID, self.remote_comm_id);
        w.u24(REMOTE_QPN, self.remote_qpn);
        w.bytes(PRIVATE_DATA, &self.private_data);
    }
}

/// Any of the seven CM messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmMessage {
    Req(ReqRepr),
    Mra(MraRepr),
    Rej(RejRepr),
    Rep(RepRepr),
    Rtu(RtuRepr),
    Dreq(DreqRepr),
    Drep(DrepRepr),
}

impl CmMessage {
    /// The MAD attribute ID of this message.
    pub const fn attribute_id(&self) -> u16 {
        match self {
            CmMessage::Req(_) => attr::REQ,
            CmMessage::Mra(_) => attr::MRA,
            CmMessage::Rej(_) => attr::REJ,
            CmMessage::Rep(_) => attr::REP,
            CmMessage::Rtu(_) => attr::RTU,
            CmMessage::Dreq(_) => attr::DREQ,
            CmMessage::Drep(_) => attr::DREP,
        }
    }

    /// Decode a whole CM MAD (header and attribute data). Bytes past 256 are ignored.
    pub fn parse(mad_bytes: &[u8]) -> Result<(MadHeader, CmMessage), CmCodecError> {
        let p = mad::Packet::new_checked(mad_bytes)
            .map_err(|_| CmCodecError::Truncated(mad_bytes.len()))?;
        let h = MadHeader::parse(&p);
        if h.base_version != mad::BASE_VERSION {
            return Err(CmCodecError::BaseVersion(h.base_version));
        }
        if h.mgmt_class != mad::MGMT_CLASS_CM {
            return Err(CmCodecError::Class(h.mgmt_class));
        }
        if h.class_version != mad::CM_CLASS_VERSION {
            return Err(CmCodecError::ClassVersion(h.class_version));
        }
        if h.method != mad::METHOD_SEND {
            return Err(CmCodecError::Method(h.method));
        }
        let d = p.data();
        debug_assert_eq!(d.len(), MAD_DATA_LEN);
        let msg = match h.attribute_id {
            attr::REQ => CmMessage::Req(ReqRepr::parse(d)),
            attr::MRA => CmMessage::Mra(MraRepr::parse(d)),
            attr::REJ => CmMessage::Rej(RejRepr::parse(d)),
            attr::REP => CmMessage::Rep(RepRepr::parse(d)),
            attr::RTU => CmMessage::Rtu(RtuRepr::parse(d)),
            attr::DREQ => CmMessage::Dreq(DreqRepr::parse(d)),
            attr::DREP => CmMessage::Drep(DrepRepr::parse(d)),
            other => return Err(CmCodecError::UnknownAttribute(other)),
        };
        Ok((h, msg))
    }

    /// Write `hdr` (with its attribute ID replaced by this message's) and the message into
    /// `buf`; every byte not covered by a field is zeroed.
    pub fn emit(&self, hdr: &MadHeader, buf: &mut [u8; MAD_LEN]) {
        buf.fill(0);
        let mut h = *hdr;
        h.attribute_id = self.attribute_id();
        let mut p = mad::Packet::new_unchecked(&mut buf[..]);
        h.emit(&mut p);
        let d = &mut buf[MAD_HEADER_LEN..];
        match self {
            CmMessage::Req(m) => m.emit(d),
            CmMessage::Mra(m) => m.emit(d),
            CmMessage::Rej(m) => m.emit(d),
            CmMessage::Rep(m) => m.emit(d),
            CmMessage::Rtu(m) => m.emit(d),
            CmMessage::Dreq(m) => m.emit(d),
            CmMessage::Drep(m) => m.emit(d),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(m: CmMessage) {
        let h = MadHeader::cm(0, 0x1234_5678_9abc_def0);
        let mut buf = [0u8; MAD_LEN];
        m.emit(&h, &mut buf);
        let (h2, m2) = CmMessage::parse(&buf).unwrap();
        assert_eq!(h2.attribute_id, m.attribute_id());
        assert_eq!(h2.transaction_id, h.transaction_id);
        assert_eq!(m2, m);
    }

    #[test]
    fn rej_layout() {
        let m = RejRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            msg_rejected: MsgRef::Rep,
            reject_info_length: 8,
            reason: RejReason::ConsumerDefined,
            ari: [0; REJ_ARI_LEN],
            private_data: [0xab; REJ_PRIVATE_LEN],
        };
        let mut buf = [0u8; MAD_LEN];
        CmMessage::Rej(m).emit(&MadHeader::cm(0, 7), &mut buf);
        let d = &buf[MAD_HEADER_LEN..];
        assert_eq!(d[8], 0x40);
        assert_eq!(d[9], 16);
        assert_eq!(&d[10..12], &[0, 28]);
        assert_eq!(d[83], 0);
        assert_eq!(d[84], 0xab);
        assert_eq!(d[231], 0xab);
        roundtrip(CmMessage::Rej(m));
    }

    #[test]
    fn mra_dreq_layout() {
        let m = MraRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            msg_mraed: MsgRef::Req,
            service_timeout: 24,
            private_data: [1; MRA_PRIVATE_LEN],
        };
        let mut buf = [0u8; MAD_LEN];
        CmMessage::Mra(m).emit(&MadHeader::cm(0, 7), &mut buf);
        assert_eq!(buf[MAD_HEADER_LEN + 9], 24 << 3);
        assert_eq!(buf[MAD_HEADER_LEN + 10], 1);
        roundtrip(CmMessage::Mra(m));
        let q = DreqRepr {
            local_comm_id: 3,
            remote_comm_id: 4,
            remote_qpn: 0x11,
            private_data: [2; DREQ_PRIVATE_LEN],
        };
        CmMessage::Dreq(q).emit(&MadHeader::cm(0, 7), &mut buf);
        assert_eq!(
            &buf[MAD_HEADER_LEN + 8..MAD_HEADER_LEN + 12],
            &[0, 0, 0x11, 0]
        );
        roundtrip(CmMessage::Dreq(q));
    }

    #[test]
    fn header_errors() {
        let mut buf = [0u8; MAD_LEN];
        CmMessage::Drep(DrepRepr {
            local_comm_id: 1,
            remote_comm_id: 2,
            private_data: [0; DREP_PRIVATE_LEN],
        })
        .emit(&MadHeader::cm(0, 1), &mut buf);
        assert!(CmMessage::parse(&buf).is_ok());
        assert_eq!(
            CmMessage::parse(&buf[..100]).unwrap_err(),
            CmCodecError::Truncated(100)
        );
        let mut b = buf;
        b[0] = 2;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::BaseVersion(2)
        );
        let mut b = buf;
        b[1] = 0x81;
        assert_eq!(CmMessage::parse(&b).unwrap_err(), CmCodecError::Class(0x81));
        let mut b = buf;
        b[2] = 1;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::ClassVersion(1)
        );
        let mut b = buf;
        b[3] = 0x81;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::Method(0x81)
        );
        let mut b = buf;
        b[17] = 0x17;
        assert_eq!(
            CmMessage::parse(&b).unwrap_err(),
            CmCodecError::UnknownAttribute(0x17)
        );
    }

    #[test]
    fn rej_reason_codes_roundtrip() {
        for c in 0..64u16 {
            assert_eq!(RejReason::from_code(c).code(), c);
        }
        assert_eq!(RejReason::InvalidServiceId.code(), 8);
        assert_eq!(RejReason::Timeout.code(), 4);
        assert_eq!(RejReason::StaleConn.code(), 10);
    }
}
