//! The counters of the IB extension's `dat_query_counters` / `dat_print_counters`
//! (dat_ib_extensions.h 2.0.3, DAT_IB_QUERY_COUNTERS_OP): per EP its posts and receives, per
//! IA its connection management. Each counts since the EP or IA was made or last reset
//! (the query's `reset`); the C layer maps the fields onto the `DCNT_*` indices.

use crate::cm::CmStats;
use crate::transport::types::SendOp;
use std::sync::atomic::{AtomicU64, Ordering};

/// Declares a counter struct with `since`, the field-wise difference to an earlier reading.
macro_rules! counters {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $field:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $($(#[$fm])* pub $field: u64,)*
        }

        impl $name {
            /// What was counted after `base` (an earlier reading of the same counters).
            pub fn since(&self, base: &$name) -> $name {
                $name { $($field: self.$field.saturating_sub(base.$field),)* }
            }
        }
    };
}

counters!(
    /// An EP's posts (work requests accepted, with their bytes), receives (completed
    /// successfully, with their bytes) and connections (DAT_EP_COUNTERS).
    EpCounters {
        /// Connections requested (dat_ep_connect) or accepted on this EP.
        connect,
        /// dat_ep_disconnect calls that started a disconnect.
        disconnect,
        /// Sends posted: plain, with immediate data or with invalidate (DCNT_EP_POST_SEND).
        post_send,
        /// Bytes of the sends posted (DCNT_EP_POST_SEND_DATA).
        post_send_data,
        /// Receives posted (DCNT_EP_POST_RECV).
        post_recv,
        /// Bytes of buffer the posted receives offer (DCNT_EP_POST_RECV_DATA).
        post_recv_data,
        /// RDMA writes posted (DCNT_EP_POST_WRITE).
        post_write,
        /// Bytes of the RDMA writes posted (DCNT_EP_POST_WRITE_DATA).
        post_write_data,
        /// RDMA writes with immediate data posted (DCNT_EP_POST_WRITE_IMM).
        post_write_imm,
        /// Bytes of the RDMA writes with immediate data posted (DCNT_EP_POST_WRITE_IMM_DATA).
        post_write_imm_data,
        /// RDMA reads posted (DCNT_EP_POST_READ).
        post_read,
        /// Bytes asked for by the RDMA reads posted (DCNT_EP_POST_READ_DATA).
        post_read_data,
        /// Atomic compare-and-swaps posted (DCNT_EP_POST_CMP_SWAP).
        post_cmp_swap,
        /// Atomic fetch-and-adds posted (DCNT_EP_POST_FETCH_ADD).
        post_fetch_add,
        /// Receives of a SEND without immediate data (DCNT_EP_RECV).
        recv,
        /// Bytes of those receives (DCNT_EP_RECV_DATA).
        recv_data,
        /// Receives of a SEND with immediate data (DCNT_EP_RECV_IMM).
        recv_imm,
        /// Bytes of those receives (DCNT_EP_RECV_IMM_DATA).
        recv_imm_data,
        /// Receives consumed by an RDMA WRITE with immediate data (DCNT_EP_RECV_RDMA_IMM).
        recv_rdma_imm,
        /// Bytes those RDMA writes carried (DCNT_EP_RECV_RDMA_IMM_DATA).
        recv_rdma_imm_data,
    }
);

impl EpCounters {
    /// Counts one accepted request of `op` moving `bytes`.
    pub(crate) fn posted(&mut self, op: &SendOp, bytes: u64) {
        let (n, data) = match op {
            SendOp::Send | SendOp::SendWithImm { .. } | SendOp::SendWithInv { .. } => {
                (&mut self.post_send, Some(&mut self.post_send_data))
            }
            SendOp::Write { .. } => (&mut self.post_write, Some(&mut self.post_write_data)),
            SendOp::WriteWithImm { .. } => (
                &mut self.post_write_imm,
                Some(&mut self.post_write_imm_data),
            ),
            SendOp::Read { .. } => (&mut self.post_read, Some(&mut self.post_read_data)),
            SendOp::CompareSwap { .. } => (&mut self.post_cmp_swap, None),
            SendOp::FetchAdd { .. } => (&mut self.post_fetch_add, None),
        };
        *n += 1;
        if let Some(d) = data {
            *d += bytes;
        }
    }
}

counters!(
    /// An IA's connection management (DAT_IA_COUNTERS' `DCNT_IA_CM_*`): CM messages sent and
    /// received by kind, connections established by side, and the CM's error counts. The CM
    /// is the port's, shared by every IA open on it.
    IaCounters {
        /// REQs (connection requests) sent, retransmissions not included
        /// (DCNT_IA_CM_REQ_TX).
        req_tx,
        /// REQs received and decoded (DCNT_IA_CM_REQ_RX).
        req_rx,
        /// REPs (replies accepting a request) sent (DCNT_IA_CM_REP_TX).
        rep_tx,
        /// REPs received (DCNT_IA_CM_REP_RX).
        rep_rx,
        /// RTUs (ready to use, the active side's last message) sent (DCNT_IA_CM_RTU_TX).
        rtu_tx,
        /// RTUs received (DCNT_IA_CM_RTU_RX).
        rtu_rx,
        /// REJs (rejections) sent (DCNT_IA_CM_USER_REJ_TX).
        rej_tx,
        /// REJs received (DCNT_IA_CM_USER_REJ_RX).
        rej_rx,
        /// DREQs (disconnect requests) sent (DCNT_IA_CM_DREQ_TX).
        dreq_tx,
        /// DREQs received (DCNT_IA_CM_DREQ_RX).
        dreq_rx,
        /// DREPs (disconnect replies) sent (DCNT_IA_CM_DREP_TX).
        drep_tx,
        /// DREPs received (DCNT_IA_CM_DREP_RX).
        drep_rx,
        /// MRAs (message receipt acknowledgements: "answer coming, wait longer") sent
        /// (DCNT_IA_CM_MRA_TX).
        mra_tx,
        /// MRAs received (DCNT_IA_CM_MRA_RX).
        mra_rx,
        /// Connections established as the active side, on a REP (DCNT_IA_CM_ACTIVE_EST).
        active_est,
        /// Connections established as the passive side, on an RTU (DCNT_IA_CM_PASSIVE_EST).
        passive_est,
        /// Duplicate REQs, REPs and DREQs answered from saved state (counted in DCNT_IA_CM_ERR).
        duplicates,
        /// Messages sent again after a timeout (counted in DCNT_IA_CM_ERR).
        retries,
        /// Messages that did not decode or matched no connection expecting them
        /// (DCNT_IA_CM_ERR_UNEXPECTED).
        unexpected,
        /// Protection zones created on this IA (DCNT_IA_PZ_CREATE).
        pz_create,
        /// Protection zones destroyed (DCNT_IA_PZ_FREE).
        pz_free,
        /// LMRs created on this IA (DCNT_IA_LMR_CREATE).
        lmr_create,
        /// LMRs destroyed (DCNT_IA_LMR_FREE).
        lmr_free,
        /// RMRs created on this IA (DCNT_IA_RMR_CREATE).
        rmr_create,
        /// RMRs destroyed (DCNT_IA_RMR_FREE).
        rmr_free,
        /// PSPs created on this IA (DCNT_IA_PSP_CREATE).
        psp_create,
        /// PSPs destroyed (DCNT_IA_PSP_FREE).
        psp_free,
        /// RSPs created on this IA (DCNT_IA_RSP_CREATE).
        rsp_create,
        /// RSPs destroyed (DCNT_IA_RSP_FREE).
        rsp_free,
        /// EVDs (the IA's async EVD included) created on this IA (DCNT_IA_EVD_CREATE).
        evd_create,
        /// EVDs (the IA's async EVD included) destroyed (DCNT_IA_EVD_FREE).
        evd_free,
        /// EPs (the provider's for DAT_PSP_PROVIDER_FLAG included) created on this IA (DCNT_IA_EP_CREATE).
        ep_create,
        /// EPs (the provider's for DAT_PSP_PROVIDER_FLAG included) destroyed (DCNT_IA_EP_FREE).
        ep_free,
        /// SRQs created on this IA (DCNT_IA_SRQ_CREATE).
        srq_create,
        /// SRQs destroyed (DCNT_IA_SRQ_FREE).
        srq_free,
        /// Connection requests that reached a service point of this IA, a handed-off one
        /// again on its new PSP (DCNT_IA_SP_CR).
        cr,
        /// Requests accepted (DCNT_IA_SP_CR_ACCEPTED).
        cr_accepted,
        /// Requests the consumer rejected (DCNT_IA_SP_CR_REJECTED).
        cr_rejected,
    }
);

impl IaCounters {
    /// The CM's errors, DCNT_IA_CM_ERR: messages unexpected, duplicated or sent again.
    pub fn cm_err(&self) -> u64 {
        self.unexpected + self.duplicates + self.retries
    }
}

/// One kind of object of an IA: how many were made and ended. An object ends when it is
/// destroyed: at its `free`, or later when something still held it then (an EP a request
/// names, an LMR an RMR is bound to).
#[derive(Debug, Default)]
pub(crate) struct Made {
    created: AtomicU64,
    freed: AtomicU64,
}

/// A count of an IA's connection requests.
#[derive(Debug, Default)]
pub(crate) struct Count(AtomicU64);

impl Count {
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl Made {
    pub fn created(&self) {
        self.created.fetch_add(1, Ordering::Relaxed);
    }

    pub fn freed(&self) {
        self.freed.fetch_add(1, Ordering::Relaxed);
    }

    fn read(&self) -> (u64, u64) {
        (
            self.created.load(Ordering::Relaxed),
            self.freed.load(Ordering::Relaxed),
        )
    }
}

/// The objects of one IA made and ended, by kind, and its connection requests (the object
/// half of [`IaCounters`]).
#[derive(Debug, Default)]
pub(crate) struct ObjectCounts {
    pub pz: Made,
    pub lmr: Made,
    pub rmr: Made,
    pub psp: Made,
    pub rsp: Made,
    pub evd: Made,
    pub ep: Made,
    pub srq: Made,
    pub cr: Count,
    pub cr_accepted: Count,
    pub cr_rejected: Count,
}

impl ObjectCounts {
    /// `c` with the object counts filled in.
    pub(crate) fn fill(&self, c: &mut IaCounters) {
        (c.pz_create, c.pz_free) = self.pz.read();
        (c.lmr_create, c.lmr_free) = self.lmr.read();
        (c.rmr_create, c.rmr_free) = self.rmr.read();
        (c.psp_create, c.psp_free) = self.psp.read();
        (c.rsp_create, c.rsp_free) = self.rsp.read();
        (c.evd_create, c.evd_free) = self.evd.read();
        (c.ep_create, c.ep_free) = self.ep.read();
        (c.srq_create, c.srq_free) = self.srq.read();
        c.cr = self.cr.get();
        c.cr_accepted = self.cr_accepted.get();
        c.cr_rejected = self.cr_rejected.get();
    }
}

impl From<CmStats> for IaCounters {
    fn from(s: CmStats) -> IaCounters {
        IaCounters {
            req_tx: s.sent.req,
            req_rx: s.received.req,
            rep_tx: s.sent.rep,
            rep_rx: s.received.rep,
            rtu_tx: s.sent.rtu,
            rtu_rx: s.received.rtu,
            rej_tx: s.sent.rej,
            rej_rx: s.received.rej,
            dreq_tx: s.sent.dreq,
            dreq_rx: s.received.dreq,
            drep_tx: s.sent.drep,
            drep_rx: s.received.drep,
            mra_tx: s.sent.mra,
            mra_rx: s.received.mra,
            active_est: s.established_active,
            passive_est: s.established_passive,
            duplicates: s.duplicates,
            retries: s.retransmits,
            unexpected: s.malformed + s.unmatched,
            ..IaCounters::default()
        }
    }
}
