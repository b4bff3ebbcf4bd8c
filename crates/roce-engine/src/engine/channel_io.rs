//! An in-memory Ethernet cable between two shards (tests and the simulator's threaded mode).

use crate::io::{FrameIo, IoStats};
use crossbeam_queue::ArrayQueue;
use std::sync::Arc;

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
