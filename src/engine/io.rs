//! Where a shard's frames come from and go to: a DPDK RX/TX queue pair, or an in-memory channel
//! (tests and the simulator's threaded mode).

use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

/// One queue pair of a port, as a shard sees it.
pub trait FrameIo {
    /// Receives up to one burst, calling `f` on each frame (valid only during the call).
    /// Returns the number of frames received.
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize;
    /// Queues `frame` for sending. False when the device's queue is full: the frame is dropped
    /// and counted (RC retransmission recovers it).
    fn tx(&mut self, frame: &[u8]) -> bool;
    /// Hands queued frames to the device.
    fn flush(&mut self);
}

/// Counters of an I/O queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub tx_dropped: u64,
}

/// One end of an in-memory Ethernet cable between two shards (possibly in two threads).
pub struct ChannelIo {
    rx: Arc<ArrayQueue<Vec<u8>>>,
    tx: Arc<ArrayQueue<Vec<u8>>>,
    burst: usize,
    pub stats: IoStats,
}

impl ChannelIo {
    /// A cable with room for `capacity` frames in flight each way.
    pub fn pair(capacity: usize) -> (ChannelIo, ChannelIo) {
        let ab = Arc::new(ArrayQueue::new(capacity.max(1)));
        let ba = Arc::new(ArrayQueue::new(capacity.max(1)));
        (
            ChannelIo {
                rx: ba.clone(),
                tx: ab.clone(),
                burst: 32,
                stats: IoStats::default(),
            },
            ChannelIo {
                rx: ab,
                tx: ba,
                burst: 32,
                stats: IoStats::default(),
            },
        )
    }
}

impl FrameIo for ChannelIo {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < self.burst {
            let Some(frame) = self.rx.pop() else { break };
            f(&frame);
            n += 1;
        }
        self.stats.rx_frames += n as u64;
        n
    }

    fn tx(&mut self, frame: &[u8]) -> bool {
        if self.tx.push(frame.to_vec()).is_ok() {
            self.stats.tx_frames += 1;
            true
        } else {
            self.stats.tx_dropped += 1;
            false
        }
    }

    fn flush(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_the_cable_in_order_and_overflow_is_counted() {
        let (mut a, mut b) = ChannelIo::pair(2);
        assert!(a.tx(&[1]));
        assert!(a.tx(&[2, 2]));
        assert!(!a.tx(&[3]), "full");
        assert_eq!(a.stats.tx_dropped, 1);
        let mut got = Vec::new();
        assert_eq!(b.rx_burst(&mut |f| got.push(f.to_vec())), 2);
        assert_eq!(got, vec![vec![1], vec![2, 2]]);
        assert_eq!(a.rx_burst(&mut |_| panic!("nothing sent to A")), 0);
    }
}
