//! Shared receive queues (dat_srq_create / dat_srq_post_recv / dat_srq_free): one pool of
//! receive buffers for many EPs. An SRQ lives on one shard; its EPs are placed there.

use super::context::ConsumerContext;
use super::error::{DatError, Refused};
use super::ia::IaInner;
use super::lmr::LmrTriplet;
use super::pz::{Pz, PzInner};
use crate::transport::types::{RecvWr, Sge, MAX_SGE};
use std::sync::Arc;

pub(crate) struct SrqInner {
    pub ia: Arc<IaInner>,
    pub pz: Arc<PzInner>,
    pub shard: usize,
    pub srqn: u32,
    pub max_recv_iov: u32,
    pub context: ConsumerContext,
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        let _ = self.ia.engine.destroy_srq(self.shard, self.srqn);
    }
}

/// A shared receive queue.
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
}

impl Srq {
    /// Creates an SRQ of `max_recv_dtos` receives of at most `max_recv_iov` segments in `pz`.
    pub fn create(pz: &Pz, max_recv_dtos: u32, max_recv_iov: u32) -> Result<Srq, DatError> {
        if max_recv_dtos == 0 || max_recv_iov as usize > MAX_SGE {
            return Err(DatError::InvalidParameter("SRQ attributes"));
        }
        let ia = pz.inner.ia.clone();
        let shard = ia.next_shard();
        let srqn =
            ia.engine
                .create_srq_routed(shard, max_recv_dtos, Some(ia.async_sink.clone()))?;
        Ok(Srq {
            inner: Arc::new(SrqInner {
                ia,
                pz: pz.inner.clone(),
                shard,
                srqn,
                max_recv_iov,
                context: ConsumerContext::default(),
            }),
        })
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.inner.context
    }

    /// dat_srq_post_recv: the completion goes to the receive EVD of the EP that consumes it.
    pub fn post_recv(&self, local: &[LmrTriplet], cookie: u64) -> Result<(), DatError> {
        if local.len() > self.inner.max_recv_iov as usize {
            return Err(DatError::InvalidParameter("more segments than max IOV"));
        }
        let sgl = local
            .iter()
            .map(|t| Sge {
                addr: t.virtual_address,
                len: t.segment_length,
                lkey: t.lmr_context,
            })
            .collect();
        self.inner.ia.engine.post_srq_recv(
            self.inner.shard,
            self.inner.srqn,
            RecvWr { wr_id: cookie, sgl },
        )?;
        Ok(())
    }

    /// Frees the SRQ; refused (DAT_INVALID_STATE) while EPs use it.
    pub fn free(self) -> Result<(), Refused<Srq>> {
        let users = Arc::strong_count(&self.inner) - 1;
        if users > 0 {
            return Err(Refused {
                object: self,
                error: DatError::InvalidState(format!("SRQ used by {users} EPs")),
            });
        }
        Ok(())
    }
}
