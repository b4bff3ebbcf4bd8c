//! A shard's view of the port: its own RX/TX queue pair when it has one, plus the bounded rings
//! that join the shards of one port (docs/DESIGN.md "The engine").
//!
//! - **Inbox** (one per shard, many producers): frames another shard received for this shard's
//!   QPs, ARP replies to learn from, and shard 0's CM decisions about this shard's QPs (QP
//!   transitions, connection events), all in one FIFO so a QP is in RTS before the frames and
//!   the `Established` event that follow the transition.
//! - **Relay** (to shard 0): frames of shards that have no TX queue of their own; shard 0 sends
//!   them on its queue. DPDK TX queues are not thread-safe, so with one TX queue the transmit
//!   side is serialized through shard 0 instead of a lock.
//!
//! Frame buffers come from a preallocated pool shared by the port's shards: forwarding never
//! allocates. A frame that finds the pool empty or a ring full is dropped and counted, like a
//! NIC whose RX ring overflows; RC retransmission recovers it. Control messages are never
//! dropped: they wait in a per-destination backlog (and frames to that shard are dropped while
//! it is non-empty, so they cannot overtake).

use super::event::Event;
use super::steer::{classify, roce_dest_qpn, Steer};
use crate::io::{tx_built_copy, Built, FrameBuf, FrameIo};
use crate::transport::types::{QpAttr, QpState};
use crossbeam_queue::ArrayQueue;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::Arc;

/// Frames handled per burst from the inbox or the relay.
const BURST: usize = 32;

/// Frames to the port's own MAC held for delivery (loopback) at most; more are dropped and
/// counted, like a full ring.
const LOOPED_MAX: usize = 4096;

/// A message between shards of one port.
pub enum CrossShard {
    /// A received frame (buffer from the pool).
    Frame(Vec<u8>),
    /// Shard 0's CM moved a QP of the destination shard: replay the transition.
    Modify {
        qpn: u32,
        state: QpState,
        attr: QpAttr,
        peer: IpAddr,
    },
    /// An event for one of the destination shard's QPs (after the transitions it depends on).
    Event(Event),
    /// To shard 0: the hard receive watermark of QP `qpn` fired on its shard (seed 002), or a
    /// DTO of it completed in error: break its connection.
    Break { qpn: u32 },
}

/// Counters of the cross-shard paths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardIoStats {
    /// Frames received on this shard's queue that belong to another shard (handed to its
    /// inbox).
    pub forwarded: u64,
    /// Copies of ARP replies received here and handed to every other shard's inbox.
    pub arp_copies: u64,
    /// Frames received from other shards.
    pub from_inbox: u64,
    /// Frames relayed to shard 0's TX queue / sent there for other shards.
    pub relayed_out: u64,
    pub relayed_sent: u64,
    /// Frames dropped: pool empty, ring full, oversized, or behind a control backlog.
    pub dropped: u64,
    /// CM (QP1) frames this shard received for itself (shard 0: tells the runtime that the CM
    /// may have moved QPs of other shards).
    pub cm_frames: u64,
    /// Frames sent to the port's own MAC and delivered here instead of the wire (loopback).
    pub looped: u64,
}

/// The rings of one port, shared by its shards.
pub struct PortRings {
    pub inboxes: Vec<Arc<ArrayQueue<CrossShard>>>,
    pub relay: Arc<ArrayQueue<Vec<u8>>>,
    pub pool: Arc<ArrayQueue<Vec<u8>>>,
    pub max_frame: usize,
}

impl PortRings {
    /// Rings for `shards` shards, `ring` entries each, `buffers` preallocated frame buffers of
    /// `max_frame` bytes.
    pub fn new(shards: usize, ring: usize, buffers: usize, max_frame: usize) -> PortRings {
        let pool = Arc::new(ArrayQueue::new(buffers.max(1)));
        for _ in 0..buffers.max(1) {
            let _ = pool.push(Vec::with_capacity(max_frame));
        }
        PortRings {
            inboxes: (0..shards)
                .map(|_| Arc::new(ArrayQueue::new(ring.max(1))))
                .collect(),
            relay: Arc::new(ArrayQueue::new(ring.max(1))),
            pool,
            max_frame,
        }
    }
}

/// The `FrameIo` of one shard.
pub struct ShardIo<Io> {
    index: usize,
    shards: usize,
    port: Option<Io>,
    inboxes: Vec<Arc<ArrayQueue<CrossShard>>>,
    relay: Arc<ArrayQueue<Vec<u8>>>,
    pool: Arc<ArrayQueue<Vec<u8>>>,
    max_frame: usize,
    /// Control messages waiting for room in each destination's inbox.
    backlog: Vec<VecDeque<CrossShard>>,
    /// A control message taken from the inbox, for the runtime to apply before more frames.
    stash: Option<CrossShard>,
    /// The port's own MAC: frames sent to it are looped back (received here, steered to
    /// their shard) instead of leaving on the wire, which would not return them.
    own_mac: Option<[u8; 6]>,
    /// Looped-back frames waiting for the next receive burst (pool buffers).
    looped: VecDeque<Vec<u8>>,
    pub stats: ShardIoStats,
}

impl<Io: FrameIo> ShardIo<Io> {
    /// Shard `index` of a port, with its own queue pair (`port`) or none (it then receives
    /// only through its inbox and transmits through shard 0).
    pub fn new(index: usize, port: Option<Io>, rings: &PortRings) -> Self {
        let shards = rings.inboxes.len();
        ShardIo {
            index,
            shards,
            port,
            inboxes: rings.inboxes.clone(),
            relay: rings.relay.clone(),
            pool: rings.pool.clone(),
            max_frame: rings.max_frame,
            backlog: (0..shards).map(|_| VecDeque::new()).collect(),
            stash: None,
            own_mac: None,
            looped: VecDeque::new(),
            stats: ShardIoStats::default(),
        }
    }

    /// Loops frames to `mac` (the port's own) back to the receive side.
    pub fn set_own_mac(&mut self, mac: [u8; 6]) {
        self.own_mac = Some(mac);
    }

    /// True for a frame to the port's own MAC.
    fn to_own_mac(&self, frame: &[u8]) -> bool {
        is_to(self.own_mac, frame)
    }

    /// Holds `frame` for the next receive burst; false (dropped, counted) when too many wait
    /// or no buffer is free.
    fn loop_back(&mut self, frame: &[u8]) -> bool {
        let looped = &mut self.looped;
        let ok = looped.len() < LOOPED_MAX
            && forward_copy(&self.pool, self.max_frame, frame, |b| {
                looped.push_back(b);
                Ok(())
            });
        if ok {
            self.stats.looped += 1;
        } else {
            self.stats.dropped += 1;
        }
        ok
    }

    /// The port queue pair, if this shard has one.
    pub fn port(&self) -> Option<&Io> {
        self.port.as_ref()
    }

    /// The control message that stopped the last burst, if any.
    pub fn take_stash(&mut self) -> Option<CrossShard> {
        self.stash.take()
    }

    /// True when a control message waits to be applied.
    pub fn has_stash(&self) -> bool {
        self.stash.is_some()
    }

    /// Sends a control message to shard `to` (kept in order, never dropped).
    pub fn send_control(&mut self, to: usize, msg: CrossShard) {
        let Some(inbox) = self.inboxes.get(to) else {
            return;
        };
        if self.backlog[to].is_empty() {
            if let Err(msg) = inbox.push(msg) {
                self.backlog[to].push_back(msg);
            }
        } else {
            self.backlog[to].push_back(msg);
        }
    }

    fn flush_backlog(&mut self) {
        for (to, q) in self.backlog.iter_mut().enumerate() {
            while let Some(msg) = q.pop_front() {
                if let Err(msg) = self.inboxes[to].push(msg) {
                    q.push_front(msg);
                    break;
                }
            }
        }
    }
}

/// Hands a received frame to this shard (`f`) or to the shard it belongs to (a copy in that
/// shard's inbox); an ARP reply to every shard.
#[allow(clippy::too_many_arguments)]
fn steer(
    frame: &[u8],
    index: usize,
    shards: usize,
    max_frame: usize,
    inboxes: &[Arc<ArrayQueue<CrossShard>>],
    backlog: &[VecDeque<CrossShard>],
    pool: &ArrayQueue<Vec<u8>>,
    stats: &mut ShardIoStats,
    f: &mut dyn FnMut(&[u8]),
) {
    let to_inbox = |s: usize, inbox: &ArrayQueue<CrossShard>| {
        backlog[s].is_empty()
            && forward_copy(pool, max_frame, frame, |b| {
                inbox.push(CrossShard::Frame(b)).map_err(|m| match m {
                    CrossShard::Frame(b) => b,
                    _ => Vec::new(),
                })
            })
    };
    match classify(frame, shards) {
        Steer::Shard(s) if s == index => {
            if shards > 1 && roce_dest_qpn(frame) == Some(crate::cm::CM_QPN) {
                stats.cm_frames += 1;
            }
            f(frame)
        }
        Steer::Shard(s) => {
            if to_inbox(s, &inboxes[s]) {
                stats.forwarded += 1;
            } else {
                stats.dropped += 1;
            }
        }
        Steer::ArpReply => {
            for (s, inbox) in inboxes.iter().enumerate() {
                if s == index {
                    continue;
                }
                if to_inbox(s, inbox) {
                    stats.arp_copies += 1;
                } else {
                    stats.dropped += 1;
                }
            }
            f(frame);
        }
    }
}

/// Copies `frame` into a pool buffer and pushes it with `push`; false (frame dropped) when the
/// frame is too large, the pool is empty or the ring is full.
fn forward_copy(
    pool: &ArrayQueue<Vec<u8>>,
    max_frame: usize,
    frame: &[u8],
    push: impl FnOnce(Vec<u8>) -> Result<(), Vec<u8>>,
) -> bool {
    if frame.len() > max_frame {
        return false;
    }
    let Some(mut buf) = pool.pop() else {
        return false;
    };
    buf.clear();
    buf.extend_from_slice(frame);
    match push(buf) {
        Ok(()) => true,
        Err(buf) => {
            let _ = pool.push(buf);
            false
        }
    }
}

/// True for a frame to `mac` (`None`: no MAC, never).
fn is_to(mac: Option<[u8; 6]>, frame: &[u8]) -> bool {
    mac.is_some_and(|m| frame.get(..6).is_some_and(|d| d == m))
}

impl<Io: FrameIo> FrameIo for ShardIo<Io> {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        if self.stash.is_some() {
            // The runtime applies it first (QP transitions before the frames behind them).
            return 0;
        }
        self.flush_backlog();
        let mut n = 0;
        let ShardIo {
            index,
            shards,
            port,
            inboxes,
            relay,
            pool,
            max_frame,
            backlog,
            stash,
            stats,
            looped,
            own_mac: _,
        } = self;
        let (index, shards, max_frame) = (*index, *shards, *max_frame);
        if let Some(port) = port.as_mut() {
            // Frames of shards without a TX queue go out here (shard 0).
            if index == 0 {
                let mut relayed = 0;
                while relayed < BURST {
                    let Some(buf) = super::pop_if_any(relay) else {
                        break;
                    };
                    if port.tx(&buf) {
                        stats.relayed_sent += 1;
                    } else {
                        stats.dropped += 1;
                    }
                    let _ = pool.push(buf);
                    relayed += 1;
                }
                if relayed > 0 {
                    port.flush();
                }
            }
            n += port.rx_burst(&mut |frame| {
                steer(
                    frame, index, shards, max_frame, inboxes, backlog, pool, stats, f,
                )
            });
        }
        // Frames this shard sent to the port's own MAC arrive as if from the wire.
        for _ in 0..BURST.min(looped.len()) {
            let Some(buf) = looped.pop_front() else {
                break;
            };
            steer(
                &buf, index, shards, max_frame, inboxes, backlog, pool, stats, f,
            );
            let _ = pool.push(buf);
            n += 1;
        }
        let mut taken = 0;
        while taken < BURST {
            let Some(msg) = super::pop_if_any(&inboxes[index]) else {
                break;
            };
            taken += 1;
            match msg {
                CrossShard::Frame(buf) => {
                    f(&buf);
                    stats.from_inbox += 1;
                    let _ = pool.push(buf);
                    n += 1;
                }
                other => {
                    *stash = Some(other);
                    break;
                }
            }
        }
        n
    }

    fn tx(&mut self, frame: &[u8]) -> bool {
        if self.to_own_mac(frame) {
            return self.loop_back(frame);
        }
        if let Some(port) = self.port.as_mut() {
            return port.tx(frame);
        }
        let relay = &self.relay;
        if forward_copy(&self.pool, self.max_frame, frame, |b| relay.push(b)) {
            self.stats.relayed_out += 1;
            true
        } else {
            self.stats.dropped += 1;
            false
        }
    }

    /// Straight into the own queue's buffer; a frame to the port's own MAC is copied out of
    /// it and looped back, and a shard without a TX queue relays a copy.
    fn tx_build(
        &mut self,
        scratch: &mut Vec<u8>,
        build: &mut dyn FnMut(&mut dyn FrameBuf) -> bool,
    ) -> Built {
        let Some(port) = self.port.as_mut() else {
            return tx_built_copy(self, scratch, build);
        };
        let own_mac = self.own_mac;
        let mut looped: Option<Vec<u8>> = None;
        let built = port.tx_build(scratch, &mut |buf| {
            if !build(buf) {
                return false;
            }
            if is_to(own_mac, buf.bytes()) {
                looped = Some(buf.bytes().to_vec());
                return false;
            }
            true
        });
        match looped {
            Some(frame) if self.loop_back(&frame) => Built::Queued,
            Some(_) => Built::Dropped,
            None => built,
        }
    }

    fn flush(&mut self) {
        if let Some(port) = self.port.as_mut() {
            port.flush();
        }
    }

    /// The own queue's room; relayed frames always find room (the relay ring drops and counts).
    fn ready(&mut self) -> bool {
        self.port.as_mut().is_none_or(|p| p.ready())
    }

    fn tx_pending(&self) -> bool {
        self.port.as_ref().is_some_and(|p| p.tx_pending())
    }

    /// Zero-copy transmit where this shard owns a TX queue; relayed frames are copied anyway.
    fn zero_copy_min(&self) -> Option<usize> {
        self.port.as_ref().and_then(|p| p.zero_copy_min())
    }

    fn rx_other_vlan(&self) -> u64 {
        self.port.as_ref().map_or(0, |p| p.rx_other_vlan())
    }

    fn tx_pinned(&mut self, frame: crate::io::PinnedFrame<'_>) -> bool {
        if self.to_own_mac(frame.headers) {
            return crate::io::tx_gathered(self, frame);
        }
        match self.port.as_mut() {
            Some(port) => port.tx_pinned(frame),
            None => crate::io::tx_gathered(self, frame),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::channel_io::ChannelIo;

    /// A minimal IPv4/UDP 4791/BTH frame to `dest_qpn` whose byte 60 is `tag`.
    fn roce_frame(dest_qpn: u32, tag: u8) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[34 + 2..34 + 4].copy_from_slice(&4791u16.to_be_bytes());
        f[42 + 5..42 + 8].copy_from_slice(&dest_qpn.to_be_bytes()[1..]);
        f[60] = tag;
        f
    }

    fn arp_reply() -> Vec<u8> {
        let mut f = vec![0u8; 42];
        f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        f[20..22].copy_from_slice(&2u16.to_be_bytes());
        f
    }

    fn burst(io: &mut ShardIo<ChannelIo>) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        io.rx_burst(&mut |f| got.push(f.to_vec()));
        got
    }

    /// Two shards, each on its own queue pair (as net_af_packet with `qpairs=2`, whose RX is
    /// spread by the kernel's fanout hash, not by QPN): a frame that arrives on the wrong
    /// shard's queue is forwarded to its owner; each shard transmits on its own queue and
    /// relays nothing; an ARP reply reaches both.
    #[test]
    fn with_a_queue_pair_per_shard_frames_on_the_wrong_queue_reach_their_owner() {
        let rings = PortRings::new(2, 16, 16, 1518);
        let (q0, mut wire0) = ChannelIo::pair(16);
        let (q1, mut wire1) = ChannelIo::pair(16);
        let mut s0 = ShardIo::new(0, Some(q0), &rings);
        let mut s1 = ShardIo::new(1, Some(q1), &rings);

        // QPN 0x13 belongs to shard 1, 0x12 and QP1 (CM) to shard 0.
        assert!(wire0.tx(&roce_frame(0x13, 1)));
        assert!(wire0.tx(&roce_frame(0x12, 2)));
        assert!(wire1.tx(&roce_frame(0x12, 3)));
        assert!(wire1.tx(&roce_frame(1, 4)));
        assert!(wire1.tx(&roce_frame(0x13, 5)));

        let got0 = burst(&mut s0);
        assert_eq!(got0, vec![roce_frame(0x12, 2)], "shard 0 keeps its own");
        assert_eq!(s0.stats.forwarded, 1);
        let got1 = burst(&mut s1);
        assert_eq!(
            got1,
            vec![roce_frame(0x13, 5), roce_frame(0x13, 1)],
            "its own first, then the one forwarded by shard 0"
        );
        assert_eq!((s1.stats.forwarded, s1.stats.from_inbox), (2, 1));
        let got0 = burst(&mut s0);
        assert_eq!(got0, vec![roce_frame(0x12, 3), roce_frame(1, 4)]);
        assert_eq!(s0.stats.from_inbox, 2);

        // Transmit: each on its own queue, nothing through the relay.
        assert!(s1.tx(&roce_frame(0x99, 6)));
        assert!(s0.tx(&roce_frame(0x98, 7)));
        let mut out1 = Vec::new();
        wire1.rx_burst(&mut |f| out1.push(f.to_vec()));
        let mut out0 = Vec::new();
        wire0.rx_burst(&mut |f| out0.push(f.to_vec()));
        assert_eq!(out1, vec![roce_frame(0x99, 6)]);
        assert_eq!(out0, vec![roce_frame(0x98, 7)]);
        assert_eq!(s1.stats.relayed_out, 0);
        assert!(rings.relay.is_empty());

        // An ARP reply on shard 1's queue: handled there, and a copy for shard 0.
        assert!(wire1.tx(&arp_reply()));
        assert_eq!(burst(&mut s1), vec![arp_reply()]);
        assert_eq!(s1.stats.arp_copies, 1);
        assert_eq!(burst(&mut s0), vec![arp_reply()]);
        assert_eq!(s0.stats.dropped + s1.stats.dropped, 0);
    }
}
