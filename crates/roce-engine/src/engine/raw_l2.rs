//! A raw Ethernet channel beside the RoCE stack: frames of one EtherType are taken out of a
//! shard's receive path before the host sees them (like a raw-packet QP next to RC QPs) and
//! are either echoed back to their sender or queued for the consumer. The latency benchmark
//! uses it to measure the port's I/O floor in the same run, loop and queues as its RDMA
//! traffic (`roce-lat --with-raw`), so the transport's cost is a ratio measured in one run;
//! the bandwidth benchmark counts a one-way blast with it (`roce-bw --raw`).
//!
//! The queue is a fixed ring of preallocated frame buffers: receiving a frame never allocates;
//! a frame that finds the ring full, or is longer than a slot, is dropped and counted.

/// What the channel does with the frames it claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawMode {
    /// Send each frame back to its source MAC address, from the port's MAC address.
    Echo,
    /// Keep each frame for [`RawChannel::pop_into`].
    Queue,
    /// Count each frame and its bytes, keep nothing (the sink of a one-way blast, like
    /// testpmd's rxonly).
    Count,
}

/// Counters of a [`RawChannel`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawStats {
    /// Frames claimed and kept (queued or about to be echoed), or counted.
    pub received: u64,
    /// Their bytes.
    pub received_bytes: u64,
    /// Frames claimed and dropped: the ring was full or the frame longer than a slot.
    pub dropped: u64,
    /// Frames sent back (echo mode) or by the consumer.
    pub sent: u64,
    /// Frames the device's TX queue refused.
    pub tx_dropped: u64,
}

/// Frames of one EtherType, kept apart from the RoCE stack.
#[derive(Debug)]
pub struct RawChannel {
    ethertype: u16,
    mode: RawMode,
    slots: Vec<Vec<u8>>,
    /// Index of the oldest kept frame.
    head: usize,
    /// Kept frames.
    len: usize,
    slot_bytes: usize,
    stats: RawStats,
}

/// Ethernet header length: destination, source, EtherType.
const ETHERNET_HEADER: usize = 14;

impl RawChannel {
    /// A channel for frames of `ethertype` holding up to `depth` frames of at most
    /// `slot_bytes` bytes each (all allocated now).
    pub fn new(ethertype: u16, mode: RawMode, depth: usize, slot_bytes: usize) -> RawChannel {
        RawChannel {
            ethertype,
            mode,
            slots: (0..depth.max(1))
                .map(|_| Vec::with_capacity(slot_bytes))
                .collect(),
            head: 0,
            len: 0,
            slot_bytes,
            stats: RawStats::default(),
        }
    }

    /// The channel's mode.
    pub fn mode(&self) -> RawMode {
        self.mode
    }

    /// Counters.
    pub fn stats(&self) -> RawStats {
        self.stats
    }

    /// Frames kept and not yet taken.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no frame is kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when `frame` is an Ethernet frame of this channel's EtherType.
    #[inline]
    pub fn claims(&self, frame: &[u8]) -> bool {
        frame.len() >= ETHERNET_HEADER && frame[12..14] == self.ethertype.to_be_bytes()
    }

    /// Counts a frame sent back or by the consumer (`sent`), or refused by the device.
    pub(crate) fn count_sent(&mut self, sent: bool) {
        if sent {
            self.stats.sent += 1;
        } else {
            self.stats.tx_dropped += 1;
        }
    }

    /// Keeps a copy of `frame` (one this channel claims); false (and counted) when the ring
    /// is full or the frame does not fit a slot.
    pub fn push(&mut self, frame: &[u8]) -> bool {
        if self.mode == RawMode::Count {
            self.stats.received += 1;
            self.stats.received_bytes += frame.len() as u64;
            return true;
        }
        if self.len == self.slots.len() || frame.len() > self.slot_bytes {
            self.stats.dropped += 1;
            return false;
        }
        let i = (self.head + self.len) % self.slots.len();
        let slot = &mut self.slots[i];
        slot.clear();
        slot.extend_from_slice(frame);
        self.len += 1;
        self.stats.received += 1;
        self.stats.received_bytes += frame.len() as u64;
        true
    }

    /// The oldest kept frame, removed, handed to `f`.
    pub fn pop_with<R>(&mut self, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        if self.len == 0 {
            return None;
        }
        let i = self.head;
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        Some(f(&mut self.slots[i]))
    }

    /// Copies the oldest kept frame into `out` (replacing its contents) and removes it;
    /// false when none is kept.
    pub fn pop_into(&mut self, out: &mut Vec<u8>) -> bool {
        self.pop_with(|f| {
            out.clear();
            out.extend_from_slice(f);
        })
        .is_some()
    }
}

/// Turns a received `frame` around in place: to its source, from `mac`.
pub fn turn_around(frame: &mut [u8], mac: [u8; 6]) {
    if frame.len() >= ETHERNET_HEADER {
        frame.copy_within(6..12, 0);
        frame[6..12].copy_from_slice(&mac);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL_EXPERIMENTAL: u16 = 0x88b5;

    /// A 60-byte frame of `ethertype` from 02:00:00:00:00:02 to 02:00:00:00:00:01, `tag` after
    /// the header.
    fn frame(ethertype: u16, tag: u8) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
        f.extend_from_slice(&ethertype.to_be_bytes());
        f.push(tag);
        f.resize(60, 0);
        f
    }

    #[test]
    fn claims_only_its_ethertype_and_whole_headers() {
        let ch = RawChannel::new(LOCAL_EXPERIMENTAL, RawMode::Queue, 4, 128);
        assert!(ch.claims(&frame(LOCAL_EXPERIMENTAL, 1)));
        assert!(!ch.claims(&frame(0x0800, 1)), "IPv4 goes to the stack");
        assert!(!ch.claims(&frame(0x0806, 1)), "ARP goes to the stack");
        assert!(!ch.claims(&frame(LOCAL_EXPERIMENTAL, 1)[..13]), "truncated");
        assert!(!ch.claims(&[]));
    }

    /// Frames come out in arrival order; a full ring drops and counts the newcomer and keeps
    /// what it has; an oversized frame is dropped and counted too.
    #[test]
    fn queue_keeps_order_and_counts_what_does_not_fit() {
        let mut ch = RawChannel::new(LOCAL_EXPERIMENTAL, RawMode::Queue, 2, 64);
        assert!(ch.push(&frame(LOCAL_EXPERIMENTAL, 1)));
        assert!(ch.push(&frame(LOCAL_EXPERIMENTAL, 2)));
        assert!(!ch.push(&frame(LOCAL_EXPERIMENTAL, 3)), "ring full");
        assert_eq!(ch.len(), 2);
        let mut out = Vec::new();
        assert!(ch.pop_into(&mut out));
        assert_eq!(out, frame(LOCAL_EXPERIMENTAL, 1));
        assert!(ch.push(&frame(LOCAL_EXPERIMENTAL, 4)), "room again");
        assert!(ch.pop_into(&mut out));
        assert_eq!(out[14], 2);
        assert!(ch.pop_into(&mut out));
        assert_eq!(out[14], 4);
        assert!(!ch.pop_into(&mut out));
        assert!(ch.is_empty());
        assert!(!ch.push(&[0u8; 65]), "longer than a slot");
        assert_eq!(
            ch.stats(),
            RawStats {
                received: 3,
                received_bytes: 180,
                dropped: 2,
                ..RawStats::default()
            }
        );
    }

    #[test]
    fn turn_around_sends_the_frame_back_from_our_mac() {
        let mut f = frame(LOCAL_EXPERIMENTAL, 7);
        turn_around(&mut f, [2, 0, 0, 0, 0, 9]);
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 2], "to the sender");
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0, 9], "from us");
        assert_eq!(&f[12..15], &[0x88, 0xb5, 7], "the rest unchanged");
        let mut short = [1u8; 10];
        turn_around(&mut short, [0; 6]);
        assert_eq!(short, [1u8; 10], "too short to be a frame: left alone");
    }

    #[test]
    fn count_mode_counts_frames_and_bytes_and_keeps_none() {
        let mut ch = RawChannel::new(LOCAL_EXPERIMENTAL, RawMode::Count, 1, 16);
        for tag in 0..5 {
            assert!(
                ch.push(&frame(LOCAL_EXPERIMENTAL, tag)),
                "never full, any length"
            );
        }
        assert!(ch.is_empty());
        let mut out = Vec::new();
        assert!(!ch.pop_into(&mut out));
        let st = ch.stats();
        assert_eq!((st.received, st.received_bytes, st.dropped), (5, 300, 0));
    }
}
