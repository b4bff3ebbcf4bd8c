//! dat_ep_set_watermark(3DAT) (seed 002) and dat_ep_recv_query(3DAT) (seed 004), over the
//! receive accounting the EP's shard keeps ([`crate::srq::account`]).
//!
//! - Soft high watermark: one DAT_ASYNC_ERROR-stream event on the IA's async EVD
//!   ([`AsyncEvent::EpWatermark`] with `soft`) the first time the receive buffers at the EP
//!   exceed it, once per arming; the next call re-arms it.
//! - Hard high watermark: exceeding it while connected breaks the connection:
//!   DAT_CONNECTION_EVENT_BROKEN on the EP's connect EVD.
//! - Either fires during the call when the new value is already exceeded.
//! - [`WATERMARK_INFINITE`] (the default) generates nothing. Every EP state accepts the call.
//! - recv_query: `nbufs_allocated` and `bufs_alloc_span` come from one snapshot (one atomic
//!   word for SRQ EPs; for EPs with their own receive queue, buffers are allocated when posted
//!   and complete in order, so the span equals the count); the span is never smaller than the
//!   count. This provider always knows both counts: it never answers DAT_VALUE_UNKNOWN.

use super::ep::Ep;
use super::ep_attr::WATERMARK_INFINITE;
use super::error::DatError;
use crate::engine::runtime::{AsyncEvent, Event};
pub use crate::srq::RecvQuery;
use std::sync::atomic::Ordering;

/// A DAT_COUNT argument: a non-negative count or DAT_WATERMARK_INFINITE.
fn watermark_arg(v: u32, arg: u8) -> Result<u32, DatError> {
    if v == WATERMARK_INFINITE || v <= i32::MAX as u32 {
        Ok(v)
    } else {
        Err(DatError::InvalidArg {
            arg,
            what: "a watermark is a count or DAT_WATERMARK_INFINITE",
        })
    }
}

impl Ep {
    /// dat_ep_set_watermark: sets and arms the soft and hard high watermarks of the receive
    /// buffers at the EP (any state).
    pub fn set_watermark(&self, soft: u32, hard: u32) -> Result<(), DatError> {
        let soft = watermark_arg(soft, 2)?;
        let hard = watermark_arg(hard, 3)?;
        let c = self.inner.lock();
        let Some(handle) = c.recv.clone() else {
            return Err(DatError::Internal("EP without receive accounting".into()));
        };
        let qpn = c.qpn;
        drop(c);
        let fired = handle.set_watermark(soft, hard);
        let engine = &self.inner.ia.engine;
        if fired.soft {
            let ev = Event::Async(AsyncEvent::EpWatermark {
                qpn,
                soft: true,
                hard: fired.hard,
            });
            // The async EVD is full: DAT reports an overflow there, nothing else to do.
            let _ = self.inner.ia.async_sink.queue.push(ev);
        }
        if fired.hard {
            engine.break_connection(qpn)?;
        }
        Ok(())
    }

    /// The armed soft and hard watermarks (`None`: infinite or already fired).
    pub fn armed_watermarks(&self) -> (Option<u32>, Option<u32>) {
        let c = self.inner.lock();
        c.recv
            .as_ref()
            .map_or((None, None), |h| (h.armed_soft(), h.armed_hard()))
    }

    /// dat_ep_recv_query: receive buffers allocated to the EP and not completed, and the span
    /// of buffers the EP needs to complete the messages it is receiving.
    pub fn recv_query(&self) -> Result<RecvQuery, DatError> {
        let c = self.inner.lock();
        if self.inner.srq.is_some() {
            let h = c
                .recv
                .as_ref()
                .ok_or_else(|| DatError::Internal("EP without receive accounting".into()))?;
            let q = h.recv_query();
            debug_assert!(q.bufs_alloc_span >= q.nbufs_allocated);
            return Ok(q);
        }
        // Own receive queue: allocated when posted (counted here, under the EP's lock), one
        // read of the completion counter; in-order completion makes the span the count.
        let done = c.counters.recvs.load(Ordering::Acquire);
        let n = c
            .posted_recvs
            .saturating_sub(done)
            .min(u64::from(u32::MAX - 2)) as u32;
        Ok(RecvQuery {
            nbufs_allocated: n,
            bufs_alloc_span: n,
        })
    }
}
