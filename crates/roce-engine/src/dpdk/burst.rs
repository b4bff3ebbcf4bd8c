//! RX and TX queue handles with burst I/O into caller-provided fixed arrays (no allocation).

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::Arc;

use super::mbuf::Mbuf;
use super::port::PortInner;

/// Not `Sync`: a DPDK queue must be polled by one thread at a time.
type NotSync = PhantomData<Cell<()>>;

/// The receive side of one queue of a port. Taken once from [`super::Port`]; keeps the port
/// open while it lives. `Send`, not `Sync`: one poller per queue.
#[derive(Debug)]
pub struct RxQueue {
    pub(crate) port: Arc<PortInner>,
    pub(crate) queue: u16,
    pub(crate) _not_sync: NotSync,
}

/// The transmit side of one queue of a port. Taken once from [`super::Port`].
#[derive(Debug)]
pub struct TxQueue {
    pub(crate) port: Arc<PortInner>,
    pub(crate) queue: u16,
    pub(crate) _not_sync: NotSync,
}

impl Drop for RxQueue {
    fn drop(&mut self) {
        self.port.release(0, self.queue);
    }
}

impl Drop for TxQueue {
    fn drop(&mut self) {
        self.port.release(1, self.queue);
    }
}

impl RxQueue {
    /// Port id.
    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// Queue index.
    pub fn queue_id(&self) -> u16 {
        self.queue
    }

    /// Receives up to `out.len()` packets into `out[..n]` and returns `n`. Mbufs still in `out`
    /// from an earlier burst are freed first, so a fixed `[None; N]` array can be reused.
    pub fn rx_burst(&mut self, out: &mut [Option<Mbuf>]) -> usize {
        let len = out.len();
        self.rx_burst_after(out, len)
    }

    /// Like [`rx_burst`](Self::rx_burst) for a caller that empties `out` after each burst: only
    /// `out[..dirty]` may still hold mbufs (they are freed first), the rest must be `None`, so
    /// an idle poll does not walk the whole array. An mbuf left beyond `dirty` against that
    /// rule is leaked (overwritten, never freed), never used twice.
    pub fn rx_burst_after(&mut self, out: &mut [Option<Mbuf>], dirty: usize) -> usize {
        let dirty = dirty.min(out.len());
        Mbuf::free_bulk(&mut out[..dirty]);
        debug_assert!(
            out.iter().all(Option::is_none),
            "rx slots beyond `dirty` in use"
        );
        let nb = u16::try_from(out.len()).unwrap_or(u16::MAX);
        // SAFETY: the port is started and this handle is the only user of (port, queue); `out`
        // holds `nb` entries the PMD may overwrite with mbufs that become exclusively ours: the
        // first `dirty` were just set to None, the rest are None by the caller's contract (one
        // left holding an mbuf is only leaked: the pointer is overwritten without a free, and
        // nothing else refers to it).
        let n = unsafe {
            dpdk_sys::shim_rte_eth_rx_burst(
                self.port.id,
                self.queue,
                out.as_mut_ptr().cast::<*mut dpdk_sys::rte_mbuf>(),
                nb,
            )
        };
        usize::from(n)
    }
}

impl TxQueue {
    /// Port id.
    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// Queue index.
    pub fn queue_id(&self) -> u16 {
        self.queue
    }

    /// Hands the leading run of `Some` mbufs in `pkts` to the PMD and returns how many it took
    /// (`n`). Those slots (`pkts[..n]`) become `None`; the mbufs it did not take stay in place,
    /// to be retried or dropped (which frees them).
    pub fn tx_burst(&mut self, pkts: &mut [Option<Mbuf>]) -> usize {
        let run = pkts.iter().position(Option::is_none).unwrap_or(pkts.len());
        let nb = u16::try_from(run).unwrap_or(u16::MAX);
        // SAFETY: the first `nb` slots are non-null mbufs we own (same layout as
        // `*mut rte_mbuf`); the PMD takes ownership of the first `n` it returns and leaves the
        // array itself untouched; this handle is the only user of (port, queue).
        let n = unsafe {
            dpdk_sys::shim_rte_eth_tx_burst(
                self.port.id,
                self.queue,
                pkts.as_mut_ptr().cast::<*mut dpdk_sys::rte_mbuf>(),
                nb,
            )
        };
        let n = usize::from(n);
        for slot in &mut pkts[..n] {
            if let Some(m) = slot.take() {
                // Owned by the PMD now.
                m.into_raw();
            }
        }
        n
    }

    /// Sends one packet; gives it back when the queue is full.
    pub fn send(&mut self, m: Mbuf) -> Result<(), Mbuf> {
        let mut one = [Some(m)];
        if self.tx_burst(&mut one) == 1 {
            Ok(())
        } else {
            Err(one[0].take().expect("unsent mbuf stays in its slot"))
        }
    }
}
