//! dat_query_counters of the IB extension (dat_ib_extensions.h 2.0.3,
//! DAT_IB_QUERY_COUNTERS_OP) on an EP or an IA: the [`counters`](super::counters) since the
//! object was made or last reset, and the reset itself.

use super::counters::{EpCounters, IaCounters};
use super::ep::Ep;
use super::error::DatError;
use super::ia::Ia;
use std::sync::atomic::Ordering;

impl Ep {
    /// The EP's counters since it was created or last reset; `reset` starts them again.
    pub fn counters(&self, reset: bool) -> EpCounters {
        let mut c = self.inner.lock();
        let d = &c.counters;
        let now = EpCounters {
            recv: d.recv_plain.load(Ordering::Relaxed),
            recv_data: d.recv_plain_bytes.load(Ordering::Relaxed),
            recv_imm: d.recv_imm.load(Ordering::Relaxed),
            recv_imm_data: d.recv_imm_bytes.load(Ordering::Relaxed),
            recv_rdma_imm: d.recv_rdma_imm.load(Ordering::Relaxed),
            recv_rdma_imm_data: d.recv_rdma_imm_bytes.load(Ordering::Relaxed),
            ..c.posts
        };
        let out = now.since(&c.counters_base);
        if reset {
            c.counters_base = now;
        }
        out
    }
}

impl Ia {
    /// The connection-management and object counters since the IA was opened or last reset;
    /// `reset` starts them again (for this IA only).
    pub fn counters(&self, reset: bool) -> Result<IaCounters, DatError> {
        let mut now = IaCounters::from(self.inner.engine.with_host(0, |h| h.cm().stats())?);
        self.inner.objects.fill(&mut now);
        let mut base = self.inner.lock_counters_base();
        let out = now.since(&base);
        if reset {
            *base = now;
        }
        Ok(out)
    }
}
