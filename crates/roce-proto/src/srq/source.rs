//! Adapters between the engine's receive queues and the transport's responder.
//!
//! The responder takes `Option<&mut dyn RecvSource>` ([`RecvSource`] lives in
//! `crate::transport::srq`, re-exported here); the transport's own `Srq` implements it there,
//! a bare [`SharedSrq`] and a QP's [`SrqPort`] (a binding to a `SharedSrq` with per-EP
//! accounting) implement it here.

use std::sync::Arc;

use super::account::{EpRecvAccount, EpRecvHandle, WatermarkEvents};
use super::pool::SharedSrq;
pub use crate::transport::srq::RecvSource;
use crate::transport::types::RecvWr;

/// A shared SRQ without per-EP accounting.
impl RecvSource for &SharedSrq {
    fn srqn(&self) -> u32 {
        SharedSrq::srqn(self)
    }
    fn take_recv(&mut self, _qpn: u32) -> Option<RecvWr> {
        self.take()
    }
}

/// One EP's binding to a [`SharedSrq`], owned by the EP's poll-mode core: takes WQEs from the
/// shared pool and records each as allocated to this EP (seed 004: "for EP that uses SRQ, a
/// buffer is allocated to the EP when EP removes it from SRQ"). Watermark events it fires
/// accumulate until [`take_events`](Self::take_events).
#[derive(Debug)]
pub struct SrqPort {
    srq: Arc<SharedSrq>,
    account: EpRecvAccount,
    events: WatermarkEvents,
    taken: u64,
}

impl SrqPort {
    /// Binds an EP to `srq`; the returned handle serves the consumer's `dat_ep_recv_query` and
    /// `dat_ep_set_watermark`.
    pub fn new(srq: Arc<SharedSrq>) -> (SrqPort, EpRecvHandle) {
        let (account, handle) = EpRecvAccount::new(0);
        (
            SrqPort {
                srq,
                account,
                events: WatermarkEvents::default(),
                taken: 0,
            },
            handle,
        )
    }

    /// Another consumer handle on this EP's accounting.
    pub fn handle(&self) -> EpRecvHandle {
        self.account.handle()
    }

    /// The shared pool.
    pub fn srq(&self) -> &Arc<SharedSrq> {
        &self.srq
    }

    /// The EP's accounting (complete buffers here when their completions are generated).
    pub fn account(&mut self) -> &mut EpRecvAccount {
        &mut self.account
    }

    /// A receive completion of a WQE taken through this port was generated (in order).
    pub fn completed(&mut self) -> Option<u32> {
        self.account.complete_oldest()
    }

    /// The connection is established (arms the hard watermark, seed 002).
    pub fn connected(&mut self) {
        let e = self.account.connected();
        self.events = self.events.or(e);
    }

    /// Watermark events fired since the last call.
    pub fn take_events(&mut self) -> WatermarkEvents {
        core::mem::take(&mut self.events)
    }

    /// WQEs taken through this port so far.
    pub fn taken(&self) -> u64 {
        self.taken
    }
}

impl RecvSource for SrqPort {
    fn srqn(&self) -> u32 {
        self.srq.srqn()
    }
    fn take_recv(&mut self, _qpn: u32) -> Option<RecvWr> {
        let wr = self.srq.take()?;
        self.taken += 1;
        let (_, e) = self.account.allocate_next();
        self.events = self.events.or(e);
        Some(wr)
    }
}
