//! Work queue entries as the transport holds them (IBTA vol. 1 §10.8): a posted send WR with
//! its transport progress, a posted receive, and the work completions they end in, successful
//! or flushed when the QP moves to ERROR (§10.3.1).

use super::types::{Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use crate::wire::psn::Psn;

/// A send WQE and its transport progress.
#[derive(Clone, Debug)]
pub(super) struct SendWqe {
    pub wr_id: u64,
    pub op: SendOp,
    pub sgl: crate::transport::types::SgList,
    pub signaled: bool,
    pub fence: bool,
    pub solicited: bool,
    /// Message length in bytes.
    pub len: u32,
    /// Path MTU payload bytes used to segment it.
    pub mtu: u32,
    /// PSNs the message consumes.
    pub npsn: u32,
    /// First PSN (valid once `started`).
    pub first_psn: Psn,
    pub started: bool,
    /// READ: response packets received so far.
    pub acked_pkts: u32,
    /// Local protection error found at post time.
    pub bad: Option<WcStatus>,
}

impl SendWqe {
    pub fn new(wr: SendWr, len: u32, pmtu: Mtu, bad: bool) -> SendWqe {
        let mtu = pmtu.bytes();
        let npsn = if is_rd_atomic(&wr.op) && !matches!(wr.op, SendOp::Read { .. }) {
            1
        } else {
            len.div_ceil(mtu).max(1)
        };
        SendWqe {
            wr_id: wr.wr_id,
            op: wr.op,
            sgl: wr.sgl,
            signaled: wr.signaled,
            fence: wr.fence,
            solicited: wr.solicited,
            len,
            mtu,
            npsn,
            first_psn: Psn::new(0),
            started: false,
            acked_pkts: 0,
            bad: bad.then_some(WcStatus::LocProtErr),
        }
    }

    /// The last PSN of the message.
    pub fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npsn - 1)
    }
}

/// A posted receive.
#[derive(Clone, Debug)]
pub(super) struct RecvWqe {
    pub wr: RecvWr,
    pub len: u64,
    pub srq: Option<u32>,
}

/// READ or atomic: needs a responder resource and is answered by data, not an ACK.
pub(super) fn is_rd_atomic(op: &SendOp) -> bool {
    matches!(
        op,
        SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
    )
}

/// The completion of a send WR `wr_id` (`op`) with `status` and `byte_len` on QP `qpn`.
#[inline(always)]
pub(super) fn send_completion(
    wr_id: u64,
    op: &SendOp,
    status: WcStatus,
    byte_len: u32,
    qpn: u32,
) -> WorkCompletion {
    WorkCompletion {
        wr_id,
        status,
        opcode: op.wc_opcode(),
        byte_len,
        imm_data: op.immediate(),
        invalidated_rkey: None,
        qp_num: qpn,
        srq: None,
    }
}

/// The flush completion of a receive WQE.
pub(super) fn flush_status(w: &RecvWqe, qpn: u32) -> WorkCompletion {
    WorkCompletion {
        wr_id: w.wr.wr_id,
        status: WcStatus::WrFlushErr,
        opcode: WcOpcode::Recv,
        byte_len: 0,
        imm_data: None,
        invalidated_rkey: None,
        qp_num: qpn,
        srq: w.srq,
    }
}
