//! The receive interrupt of an RX queue, for a thread that sleeps until a frame arrives (the
//! engine's away helper, docs/DESIGN.md "Progress"): the queue's event descriptor is added to
//! its port's epoll instance (`rte_eth_dev_rx_intr_ctl_q`), armed and disarmed with
//! `rte_eth_dev_rx_intr_enable` / `_disable`, waited on with `rte_epoll_wait` (which also
//! clears the descriptor the way the PMD asks).
//!
//! Only a port configured with `PortConfig::rx_interrupts` whose PMD installs the queues'
//! descriptors has them: net_tap (the descriptor is the tap's own file descriptor, readable
//! while a frame waits; the PMD has no enable switch, so arming is a no-op). net_memif and
//! net_af_packet have none in DPDK 22.11: `RxQueue::interrupt` returns `None` there.

use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::Duration;

use super::burst::RxQueue;
use super::port::PortInner;
use crate::io::RxInterrupt;

/// The interrupt of one RX queue, registered with its port's epoll instance while it lives.
pub struct QueueInterrupt {
    port: Arc<PortInner>,
    queue: u16,
    armed: bool,
}

impl RxQueue {
    /// The queue's receive interrupt, or `None` when the port has none (configured without,
    /// or a PMD that installs no descriptor for the queue).
    pub fn interrupt(&self) -> Option<QueueInterrupt> {
        let epfd = self.port.rx_epoll.as_ref()?.as_raw_fd();
        // SAFETY: valid started port and queue; epfd is the port's epoll instance, open while
        // the port lives (this handle keeps it); no user data pointer.
        let ret = unsafe {
            dpdk_sys::rte_eth_dev_rx_intr_ctl_q(
                self.port.id,
                self.queue,
                epfd,
                dpdk_sys::RTE_INTR_EVENT_ADD as i32,
                std::ptr::null_mut(),
            )
        };
        if ret < 0 {
            tracing::debug!(
                target: "dpdk_roce::dpdk::rx_interrupt",
                port = self.port.id,
                queue = self.queue,
                ret,
                "no RX interrupt for the queue"
            );
            return None;
        }
        Some(QueueInterrupt {
            port: Arc::clone(&self.port),
            queue: self.queue,
            armed: false,
        })
    }
}

impl QueueInterrupt {
    fn epfd(&self) -> i32 {
        // Only built when the port has the instance.
        self.port.rx_epoll.as_ref().map_or(-1, |fd| fd.as_raw_fd())
    }
}

impl RxInterrupt for QueueInterrupt {
    fn arm(&mut self) -> bool {
        // SAFETY: valid started port and queue.
        let ret = unsafe { dpdk_sys::rte_eth_dev_rx_intr_enable(self.port.id, self.queue) };
        // -ENOTSUP: the PMD has no switch, its descriptor signals whenever a frame waits
        // (net_tap).
        self.armed = ret == 0 || ret == -libc::ENOTSUP;
        self.armed
    }

    fn disarm(&mut self) {
        if std::mem::take(&mut self.armed) {
            // SAFETY: valid started port and queue.
            unsafe { dpdk_sys::rte_eth_dev_rx_intr_disable(self.port.id, self.queue) };
        }
    }

    fn wait(&mut self, timeout: Duration) -> bool {
        let ms = i32::try_from(timeout.as_micros().div_ceil(1000)).unwrap_or(i32::MAX);
        let mut events = [dpdk_sys::rte_epoll_event::default(); 8];
        // SAFETY: epfd is the port's epoll instance (open while this handle lives); every
        // descriptor in it was added by `rte_eth_dev_rx_intr_ctl_q`, whose event records DPDK
        // keeps in the port's interrupt handle; `events` has room for the count passed.
        let n = unsafe {
            dpdk_sys::rte_epoll_wait(
                self.epfd(),
                events.as_mut_ptr(),
                events.len() as i32,
                ms.max(1),
            )
        };
        n > 0
    }
}

impl Drop for QueueInterrupt {
    fn drop(&mut self) {
        self.disarm();
        // SAFETY: valid port and queue, added to epfd by `RxQueue::interrupt`; the port is
        // still open (this handle holds it).
        let ret = unsafe {
            dpdk_sys::rte_eth_dev_rx_intr_ctl_q(
                self.port.id,
                self.queue,
                self.epfd(),
                dpdk_sys::RTE_INTR_EVENT_DEL as i32,
                std::ptr::null_mut(),
            )
        };
        if ret < 0 {
            tracing::debug!(
                target: "dpdk_roce::dpdk::rx_interrupt",
                port = self.port.id,
                queue = self.queue,
                ret,
                "rx interrupt del"
            );
        }
    }
}
