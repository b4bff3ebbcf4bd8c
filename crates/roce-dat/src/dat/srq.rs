//! Shared receive queues (dat_srq_create / dat_srq_post_recv / dat_srq_resize /
//! dat_srq_set_lw / dat_srq_query / dat_srq_free): one pool of receive buffers for many EPs. An
//! SRQ lives on one shard; its EPs are placed there.
//!
//! The low watermark (DAT 2.0 `dat_srq_set_lw`) is the engine pool's SRQ limit (IBTA vol. 1
//! §10.2.9.3): each setting arms it once; when fewer buffers than the watermark are posted (at
//! once, or later when an EP takes one) one asynchronous event goes to the IA's async EVD
//! ([`AsyncEvent::SrqLimit`](crate::engine::runtime::AsyncEvent::SrqLimit), naming this SRQ's
//! shard and number: [`Srq::id`]); the C layer reports it as an SRQ asynchronous event with
//! reason `DAT_SRQ_LOW_WATERMARK_EVENT`.

use super::context::ConsumerContext;
use super::error::{DatError, Refused};
use super::ia::IaInner;
use super::pz::{Pz, PzInner};
use super::triplet::LmrTriplet;
use crate::transport::types::{RecvWr, Sge, MAX_SGE};
use std::sync::Arc;

pub(crate) struct SrqInner {
    pub ia: Arc<IaInner>,
    pub pz: Arc<PzInner>,
    pub shard: usize,
    pub srqn: u32,
    pub max_recv_iov: u32,
    /// The last low watermark set (creation attribute or dat_srq_set_lw): what dat_srq_query
    /// reports as the attribute, armed or already fired.
    pub low_watermark: std::sync::atomic::AtomicU32,
    pub context: ConsumerContext,
    /// The EPs created on this SRQ (ended ones drop out when counted).
    pub users: std::sync::Mutex<Vec<std::sync::Weak<super::ep::EpInner>>>,
}

/// What [`Srq::query`] reports (DAT_SRQ_PARAM's counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SrqCounts {
    /// The current maximum of posted receives (dat_srq_resize changes it).
    pub max_recv_dtos: u32,
    /// Receives posted and not yet taken by an EP (`available_dto_count`).
    pub available: u32,
    /// The armed low watermark, if any (it disarms when its event fires).
    pub armed_low_watermark: Option<u32>,
    /// Receives EPs took from the SRQ and have not completed (`outstanding_dto_count`): the
    /// sum of their dat_ep_recv_query `nbufs_allocated`.
    pub outstanding: u32,
}

impl Drop for SrqInner {
    fn drop(&mut self) {
        self.ia.objects.srq.freed();
        let _ = self.ia.engine.destroy_srq(self.shard, self.srqn);
    }
}

/// A shared receive queue.
pub struct Srq {
    pub(crate) inner: Arc<SrqInner>,
}

impl Srq {
    /// Creates an SRQ of `max_recv_dtos` receives (1..=`max_recv_per_srq`) of at most
    /// `max_recv_iov` segments (1..=the IA's) in `pz`.
    pub fn create(pz: &Pz, max_recv_dtos: u32, max_recv_iov: u32) -> Result<Srq, DatError> {
        if !(1..=super::limits::MAX_DTO_PER_EP).contains(&max_recv_dtos)
            || max_recv_iov == 0
            || max_recv_iov as usize > MAX_SGE
        {
            return Err(DatError::InvalidParameter("SRQ attributes"));
        }
        let ia = pz.inner.ia.clone();
        let shard = ia.next_shard();
        let srqn =
            ia.engine
                .create_srq_routed(shard, max_recv_dtos, Some(ia.async_sink.clone()))?;
        ia.objects.srq.created();
        Ok(Srq {
            inner: Arc::new(SrqInner {
                ia,
                pz: pz.inner.clone(),
                shard,
                srqn,
                max_recv_iov,
                low_watermark: Default::default(),
                context: ConsumerContext::default(),
                users: Default::default(),
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

    /// Segments a receive may have (the creation attribute).
    pub fn max_recv_iov(&self) -> u32 {
        self.inner.max_recv_iov
    }

    /// The last low watermark set, armed or already fired (dat_srq_query's attribute).
    pub fn low_watermark(&self) -> u32 {
        self.inner
            .low_watermark
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// This SRQ's (shard, SRQ number): what its low-watermark events name.
    pub fn id(&self) -> (usize, u32) {
        (self.inner.shard, self.inner.srqn)
    }

    /// dat_srq_resize: the SRQ now holds at most `max_recv_dtos` posted receives. Refused with
    /// DAT_INVALID_PARAMETER for 0 and DAT_INVALID_STATE when more receives than that are
    /// posted now (DAT 2.0: an SRQ cannot shrink below its outstanding posted DTOs). Posts made
    /// before this call by the same thread are counted (they travel the same ordered ring).
    pub fn resize(&self, max_recv_dtos: u32) -> Result<(), DatError> {
        if max_recv_dtos == 0 {
            return Err(DatError::InvalidArg {
                arg: 2,
                what: "SRQ size 0",
            });
        }
        if max_recv_dtos > super::limits::MAX_DTO_PER_EP {
            // Above the IA's max_recv_per_srq.
            return Err(DatError::InsufficientResources(format!(
                "SRQ size {max_recv_dtos} above max_recv_per_srq"
            )));
        }
        let srqn = self.inner.srqn;
        let r = self.inner.ia.engine.with_host(self.inner.shard, move |h| {
            h.srq(srqn).map(|s| s.resize(max_recv_dtos))
        })?;
        match r {
            None => Err(DatError::Internal(format!("SRQ {srqn} is gone"))),
            Some(Ok(())) => Ok(()),
            Some(Err(posted)) => Err(DatError::InvalidState(format!(
                "{posted} receives posted, more than {max_recv_dtos}"
            ))),
        }
    }

    /// dat_srq_set_lw: arms the low watermark at `low_watermark` posted receives (0,
    /// DAT_SRQ_LW_DEFAULT, disarms). One asynchronous event per setting, as soon as fewer
    /// receives are posted (also during this call). Returns whether it fired during the call.
    pub fn set_low_watermark(&self, low_watermark: u32) -> Result<bool, DatError> {
        self.inner
            .low_watermark
            .store(low_watermark, std::sync::atomic::Ordering::Relaxed);
        let srqn = self.inner.srqn;
        let r = self.inner.ia.engine.with_host(self.inner.shard, move |h| {
            h.arm_srq_limit(srqn, low_watermark)
        })?;
        Ok(r.map_err(crate::engine::runtime::EngineError::from)?)
    }

    /// dat_srq_query's counts, after the posts this thread made before the call.
    pub fn query(&self) -> Result<SrqCounts, DatError> {
        let srqn = self.inner.srqn;
        let r = self.inner.ia.engine.with_host(self.inner.shard, move |h| {
            h.srq(srqn).map(|s| SrqCounts {
                max_recv_dtos: s.depth() as u32,
                available: s.len() as u32,
                armed_low_watermark: s.armed_limit(),
                outstanding: 0,
            })
        })?;
        let mut counts = r.ok_or_else(|| DatError::Internal(format!("SRQ {srqn} is gone")))?;
        // The list is copied first: no EP lock is taken under the list's.
        let users: Vec<_> = {
            let mut u = self.inner.users.lock().unwrap_or_else(|p| p.into_inner());
            u.retain(|w| w.strong_count() > 0);
            u.clone()
        };
        for ep in users.iter().filter_map(|w| w.upgrade()) {
            let q = super::ep::Ep { inner: ep }.recv_query()?;
            counts.outstanding = counts.outstanding.saturating_add(q.nbufs_allocated);
        }
        Ok(counts)
    }

    /// Whether [`Srq::free`] would free the SRQ: DAT_INVALID_STATE (SRQ_IN_USE) while EPs use
    /// it (dat_srq_free(3DAT)).
    pub fn can_free(&self) -> Result<(), DatError> {
        let users = Arc::strong_count(&self.inner) - 1;
        if users > 0 {
            return Err(DatError::InvalidStateOf {
                kind: super::error::StateKind::SrqInUse,
                what: format!("SRQ used by {users} EPs"),
            });
        }
        Ok(())
    }

    /// Frees the SRQ; refused as [`Srq::can_free`] says.
    pub fn free(self) -> Result<(), Refused<Srq>> {
        match self.can_free() {
            Ok(()) => Ok(()),
            Err(error) => Err(Refused {
                object: self,
                error,
            }),
        }
    }
}
