//! A shard: one `Host` on one port queue pair, and the poll loop of docs/DESIGN.md "Layers":
//! rx_burst -> parse -> QP/CM -> completions; timers; poll_transmit -> tx_burst. A pinned core
//! runs `poll` in a loop; in inline mode the thread waiting for a completion calls it.

use super::clock::Clock;
use super::raw_l2::{turn_around, RawChannel, RawMode};
use crate::capture::{CaptureError, PcapCapture};
use crate::host::{Host, PinnedTx, TxOut};
use crate::io::{Built, FrameIo, PinnedFrame};
use crate::mem::access::Memory;
use crate::time::Instant;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

/// Counters of the loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    pub polls: u64,
    pub busy_polls: u64,
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub tx_dropped: u64,
    /// Frames the port dropped as another VLAN's (`net::vlan`).
    pub rx_other_vlan: u64,
    /// Turns whose due timers waited for the receive ring to drain (see [`Shard::poll`]).
    pub timers_deferred: u64,
    /// Inline consumer turns that left their lone ACKs for the next frame sent
    /// ([`Shard::poll_holding_acks`]).
    pub acks_held: u64,
}

/// Where a shard's busy time went, stage by stage, in nanoseconds of the shard clock (the TSC
/// once EAL runs). Collected only after [`Shard::time_stages`] (two clock reads per stage and
/// frame); `roce-lat --stages` prints it. Each RX burst that brought frames counts once; its
/// time minus the stack's handling is the PMD's receive cost (`rte_eth_rx_burst`, the mbufs'
/// release).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// RX bursts that brought at least one frame.
    pub rx_bursts: u64,
    /// Their time outside the stack: the PMD's receive and the mbufs' release.
    pub rx_io_ns: u64,
    /// Frames handed to the host.
    pub rx_frames: u64,
    /// Time in `Host::handle_frame` (parse, ICRC, QP/CM, payload placement).
    pub handle_ns: u64,
    /// Frames the host built.
    pub tx_frames: u64,
    /// Time building them (`Host::poll_transmit_*`: headers, payload read, ICRC).
    pub build_ns: u64,
    /// Time handing them to the I/O (`FrameIo::tx`: mbuf allocation and copy, or attach).
    pub tx_io_ns: u64,
    /// TX bursts (`FrameIo::flush`).
    pub flushes: u64,
    /// Their time (`rte_eth_tx_burst`).
    pub flush_ns: u64,
    /// Turns of the loop, and those that found nothing to do (a side waiting for its peer).
    pub turns: u64,
    pub idle_turns: u64,
    /// Transmits that stopped with frames left for a full device queue (a side waiting for
    /// its peer to drain the link).
    pub tx_full: u64,
}

impl StageTimes {
    /// An RX burst that brought `frames` in `burst_ns`, `handle_ns` of it in the stack.
    pub fn received(&mut self, frames: u64, burst_ns: u64, handle_ns: u64) {
        self.rx_bursts += 1;
        self.rx_frames += frames;
        self.handle_ns += handle_ns;
        self.rx_io_ns += burst_ns.saturating_sub(handle_ns);
    }

    /// A frame built in `ns`.
    pub fn built(&mut self, ns: u64) {
        self.build_ns += ns;
    }

    /// A frame handed to the I/O in `ns` (every built frame is).
    pub fn copied(&mut self, ns: u64) {
        self.tx_frames += 1;
        self.tx_io_ns += ns;
    }

    /// A TX burst of `ns`.
    pub fn flushed(&mut self, ns: u64) {
        self.flushes += 1;
        self.flush_ns += ns;
    }
}

/// Idle turns of [`Shard::poll`] between two clock reads (for the timers).
pub const CLOCK_EVERY_IDLE: u64 = 16;

/// A receive burst this long may have left frames in the ring (every port queue and channel
/// hands at most this many per burst).
const FULL_BURST: usize = 32;

/// Full receive bursts in a row after which due timers fire anyway: a stream that keeps the
/// ring full still has its timers run.
const MAX_TIMER_DEFERRALS: u32 = 4;

/// A host bound to a frame I/O queue.
pub struct Shard<M: Memory, Io: FrameIo> {
    pub host: Host<M>,
    pub io: Io,
    clock: Clock,
    txbuf: Vec<u8>,
    pinned: PinnedTx,
    /// Bytes of a pinned frame gathered for the capture.
    capture_buf: Vec<u8>,
    capture: Option<PcapCapture<BufWriter<File>>>,
    /// Added to the shard clock for capture timestamps: wall-clock time in the file.
    capture_epoch_ns: u64,
    stats: ShardStats,
    /// Stage times, when collected (`time_stages`).
    stages: Option<StageTimes>,
    /// Frames of one EtherType kept out of the host (`set_raw_channel`).
    raw: Option<RawChannel>,
    /// Full bursts in a row that deferred due timers.
    timer_deferrals: u32,
    /// A turn left lone ACKs unsent ([`poll_holding_acks`](Self::poll_holding_acks)): the
    /// next turn sends them first.
    acks_left: bool,
}

impl<M: Memory, Io: FrameIo> Shard<M, Io> {
    /// Binds `host` to `io`.
    pub fn new(host: Host<M>, io: Io) -> Self {
        Shard {
            host,
            io,
            clock: Clock::new(),
            txbuf: Vec::with_capacity(9216),
            pinned: PinnedTx::new(),
            capture_buf: Vec::new(),
            capture: None,
            capture_epoch_ns: 0,
            stats: ShardStats::default(),
            stages: None,
            raw: None,
            timer_deferrals: 0,
            acks_left: false,
        }
    }

    /// The shard's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Loop counters.
    pub fn stats(&self) -> ShardStats {
        ShardStats {
            rx_other_vlan: self.io.rx_other_vlan(),
            ..self.stats
        }
    }

    /// Starts (from zero) or stops collecting [`StageTimes`].
    pub fn time_stages(&mut self, on: bool) {
        self.stages = on.then(StageTimes::default);
    }

    /// The stage times collected since [`time_stages`](Self::time_stages)`(true)`.
    pub fn stage_times(&self) -> Option<StageTimes> {
        self.stages
    }

    /// Takes the frames `channel` claims out of the receive path from now on (`None`: every
    /// frame goes to the host again, whatever the channel kept is dropped).
    pub fn set_raw_channel(&mut self, channel: Option<RawChannel>) {
        self.raw = channel;
    }

    /// The raw channel, if one is set.
    pub fn raw_channel(&self) -> Option<&RawChannel> {
        self.raw.as_ref()
    }

    /// Moves the oldest frame the raw channel (in [`RawMode::Queue`]) kept into `out`; false
    /// when there is none (or no channel).
    pub fn pop_raw(&mut self, out: &mut Vec<u8>) -> bool {
        self.raw.as_mut().is_some_and(|r| r.pop_into(out))
    }

    /// Sends `frame` as it is, at once (queued and flushed), outside the RoCE stack; the
    /// capture records it. False when the device's TX queue was full (the frame is dropped:
    /// raw frames have no retransmission).
    pub fn send_raw(&mut self, frame: &[u8]) -> bool {
        if self.capture.is_some() {
            let stamp = self.capture_stamp(self.clock.now());
            if let Some(c) = self.capture.as_mut() {
                let _ = c.write(stamp, frame);
            }
        }
        let sent = self.io.tx(frame);
        self.io.flush();
        if let Some(r) = self.raw.as_mut() {
            r.count_sent(sent);
        }
        self.flush_capture();
        sent
    }

    /// Echo mode: sends back every frame the raw channel kept, then flushes.
    fn echo_raw(&mut self, now: Instant) {
        let mac = self.host.config().net.mac.0;
        let stamp = self.capture_stamp(now);
        let Some(r) = self.raw.as_mut().filter(|r| r.mode() == RawMode::Echo) else {
            return;
        };
        if r.is_empty() {
            return;
        }
        let (io, capture) = (&mut self.io, &mut self.capture);
        while let Some(sent) = r.pop_with(|f| {
            turn_around(f, mac);
            if let Some(c) = capture.as_mut() {
                let _ = c.write(stamp, f);
            }
            io.tx(f)
        }) {
            r.count_sent(sent);
        }
        io.flush();
        self.flush_capture();
    }

    /// The capture timestamp of shard time `now`: wall-clock time.
    fn capture_stamp(&self, now: Instant) -> Instant {
        Instant::from_nanos(now.as_nanos().saturating_add(self.capture_epoch_ns))
    }

    /// Writes every frame this shard sends and receives to a pcap file, like ibdump, stamped
    /// with wall-clock time.
    pub fn capture_to(&mut self, path: &Path) -> Result<(), CaptureError> {
        self.capture = Some(PcapCapture::create(path)?);
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        self.capture_epoch_ns = wall.saturating_sub(self.clock.now().as_nanos());
        Ok(())
    }

    /// Pushes what the capture wrote this turn to its file, so the file is complete up to the
    /// last turn however the process ends (an exit without closing the IA, a kill; SIGKILL
    /// during this flush may cut its last record, `PcapCapture`). A failed write ends the
    /// capture, never the port.
    fn flush_capture(&mut self) {
        if let Some(c) = self.capture.as_mut() {
            if let Err(e) = c.flush() {
                tracing::warn!(target: "dpdk_roce::engine::shard", "capture stopped: {e}");
                self.capture = None;
            }
        }
    }

    /// Flushes and closes the capture; returns the frames written.
    pub fn finish_capture(&mut self) -> Result<u64, CaptureError> {
        match self.capture.take() {
            Some(c) => {
                let n = c.frames();
                c.finish()?;
                Ok(n)
            }
            None => Ok(0),
        }
    }

    /// One iteration of the loop, ending with everything the host has on the wire (a poll
    /// core's turn, the away helper's). Returns true if it did any work.
    pub fn poll(&mut self) -> bool {
        self.counted_turn(false)
    }

    /// One iteration of an inline consumer's loop (its poll, dequeue or wait): like
    /// [`poll`](Self::poll), but when all this turn would send is ACKs that nothing else
    /// carries, they wait for the next frame this shard sends: the consumer's next post
    /// ([`send_now`](Self::send_now)) takes them along in its burst, or else the next turn
    /// sends them first. A ping-pong's ACK so rides with the answer and costs no
    /// transmit call of its own, and a lone request's ACK still leaves within one turn; no
    /// timer holds it. An engine calls this only while its away helper runs, which turns the
    /// loop when the consumer does not come back.
    pub fn poll_holding_acks(&mut self) -> bool {
        self.counted_turn(true)
    }

    fn counted_turn(&mut self, hold_acks: bool) -> bool {
        let busy = self.turn(hold_acks);
        if let Some(st) = self.stages.as_mut() {
            st.turns += 1;
            st.idle_turns += u64::from(!busy);
        }
        busy
    }

    fn turn(&mut self, hold_acks: bool) -> bool {
        self.stats.polls += 1;
        // ACKs the last turn left go first, before this turn's receive burst: a lone
        // request's requester waits for them.
        let left = if self.acks_left {
            let now = self.clock.now();
            self.transmit(now)
        } else {
            0
        };
        // The clock is read only when a frame arrives, output waits, or every
        // `CLOCK_EVERY_IDLE` idle turns for the timers: a waiting consumer's spin stays short,
        // and a timer fires at most that many (sub-microsecond) turns late.
        let mut read_now: Option<Instant> = None;
        let clock = &self.clock;
        let epoch = self.capture_epoch_ns;
        let host = &mut self.host;
        let capture = &mut self.capture;
        let raw = &mut self.raw;
        let timed = self.stages.is_some();
        let burst_start = if timed { Some(clock.now()) } else { None };
        let mut handle_ns = 0u64;
        let rx = self.io.rx_burst(&mut |frame| {
            let now = *read_now.get_or_insert_with(|| clock.now());
            if let Some(c) = capture.as_mut() {
                let stamp = Instant::from_nanos(now.as_nanos().saturating_add(epoch));
                let _ = c.write(stamp, frame);
            }
            if let Some(r) = raw.as_mut().filter(|r| r.claims(frame)) {
                r.push(frame);
                return;
            }
            if timed {
                let start = clock.now();
                host.handle_frame(now, frame);
                handle_ns += clock.now().saturating_nanos_since(start);
            } else {
                host.handle_frame(now, frame);
            }
        });
        self.stats.rx_frames += rx as u64;
        if let (Some(st), Some(start), true) = (self.stages.as_mut(), burst_start, rx > 0) {
            let burst = self.clock.now().saturating_nanos_since(start);
            st.received(rx as u64, burst, handle_ns);
        }
        let now = match read_now {
            Some(now) => {
                if self.raw.is_some() {
                    self.echo_raw(now);
                }
                now
            }
            None if self.host.has_output()
                || self.io.tx_pending()
                || self.stats.polls.is_multiple_of(CLOCK_EVERY_IDLE) =>
            {
                self.clock.now()
            }
            None => {
                if left > 0 {
                    self.stats.busy_polls += 1;
                    self.flush_capture();
                }
                return left > 0;
            }
        };
        // Frames before timers: after this process was descheduled, the ACKs that arrived
        // meanwhile wait in the ring, and a timer handled before them would send again what
        // they acknowledge. A full burst may have left some: the timers wait for a short one.
        if self.host.poll_timeout().is_some_and(|t| t <= now) {
            if rx >= FULL_BURST && self.timer_deferrals < MAX_TIMER_DEFERRALS {
                self.timer_deferrals += 1;
                self.stats.timers_deferred += 1;
            } else {
                self.timer_deferrals = 0;
                self.host.handle_timeout(now);
            }
        }
        // (ACKs an earlier turn left went at this turn's start: none waits two turns.)
        let tx = if hold_acks && self.host.output_is_lone_acks() {
            self.acks_left = self.host.has_output();
            self.stats.acks_held += u64::from(self.acks_left);
            0
        } else {
            self.transmit(now)
        };
        let busy = rx > 0 || tx + left > 0;
        if busy {
            self.stats.busy_polls += 1;
            self.flush_capture();
        }
        busy
    }

    /// Sends what the host has to send now, without receiving first: for a consumer that has
    /// just posted work and wants it on the wire before its next [`poll`](Self::poll) (the
    /// doorbell of a hardware queue pair). Returns the frames sent.
    pub fn send_now(&mut self) -> u64 {
        if !self.host.has_output() {
            return 0;
        }
        let now = self.clock.now();
        let tx = self.transmit(now);
        self.flush_capture();
        tx
    }

    /// The transmit half of a turn: every frame the host has, then one flush.
    fn transmit(&mut self, now: Instant) -> u64 {
        self.acks_left = false;
        let stamp = self.capture_stamp(now);
        let mut tx = 0u64;
        // Zero-copy transmit when the I/O attaches payloads and the memory can pin them.
        let zero_copy = self
            .io
            .zero_copy_min()
            .filter(|_| self.host.mem.pin_table().is_some());
        // `has_output` false means a transmit poll would find nothing: the last frame of a
        // turn costs no empty poll after it. A device with no room gets no more frames this
        // turn: they stay unbuilt in their queue pairs (nothing is dropped for lack of room).
        let mut full = false;
        let mut unflushed = false;
        let mut flush_next = false;
        while self.host.has_output() {
            if !self.io.ready() {
                full = true;
                break;
            }
            // The frame the consumer's next completion hangs on (`Host::take_awaited`) leaves
            // before the rest of this turn's frames are built, unless all that follows is the
            // ACKs it carries along (a ping-pong's answer and its ACK stay one burst).
            if std::mem::take(&mut flush_next) && !self.host.output_is_lone_acks() {
                self.flush_timed();
                unflushed = false;
            }
            let sent = match zero_copy {
                None => match self.build_in_place(now, stamp) {
                    Built::Nothing => break,
                    Built::Queued => true,
                    Built::Dropped => false,
                },
                Some(min) => match self.build_pinned(now, stamp, min) {
                    None => break,
                    Some(sent) => sent,
                },
            };
            if sent {
                tx += 1;
                unflushed = true;
                flush_next = self.host.take_awaited();
            } else {
                self.stats.tx_dropped += 1;
            }
        }
        if let Some(st) = self.stages.as_mut() {
            st.tx_full += u64::from(full);
        }
        if unflushed || self.io.tx_pending() {
            self.flush_timed();
        }
        self.stats.tx_frames += tx;
        tx
    }

    /// The host's next frame, built straight into the device's transmit buffer
    /// (`FrameIo::tx_build`) and queued. Stage timing splits the host's build from the rest
    /// (the buffer's allocation, a copy where the device makes one).
    fn build_in_place(&mut self, now: Instant, stamp: Instant) -> Built {
        let Shard {
            host,
            io,
            capture,
            txbuf,
            stages,
            clock,
            ..
        } = self;
        let timed = stages.is_some();
        let start = timed.then(|| clock.now());
        let mut build_ns = 0;
        let built = io.tx_build(txbuf, &mut |buf| {
            let t0 = timed.then(|| clock.now());
            let built = host.poll_transmit_into(now, buf);
            if let Some(t0) = t0 {
                build_ns = clock.now().saturating_nanos_since(t0);
            }
            if built {
                if let Some(c) = capture.as_mut() {
                    let _ = c.write(stamp, buf.bytes());
                }
            }
            built
        });
        if let (Some(start), Some(st), false) = (start, stages.as_mut(), built == Built::Nothing) {
            st.built(build_ns);
            st.copied(
                clock
                    .now()
                    .saturating_nanos_since(start)
                    .saturating_sub(build_ns),
            );
        }
        built
    }

    /// The host's next frame where the device sends payloads from registered memory: pinned
    /// when its payload is at least `min` bytes, else built whole in the shard's buffer and
    /// copied. `None` when the host had none; else whether it was queued.
    fn build_pinned(&mut self, now: Instant, stamp: Instant, min: usize) -> Option<bool> {
        let build_start = self.stages.map(|_| self.clock.now());
        let out = self
            .host
            .poll_transmit_pinned(now, &mut self.txbuf, &mut self.pinned, min)?;
        let io_start = build_start.map(|start| {
            let t = self.clock.now();
            if let Some(st) = self.stages.as_mut() {
                st.built(t.saturating_nanos_since(start));
            }
            t
        });
        let sent = match out {
            TxOut::Whole => {
                if let Some(c) = self.capture.as_mut() {
                    let _ = c.write(stamp, &self.txbuf);
                }
                self.io.tx(&self.txbuf)
            }
            TxOut::Pinned => {
                let table = self.host.mem.pin_table()?;
                let trailer = self.pinned.trailer_bytes();
                let frame = PinnedFrame {
                    headers: &self.txbuf,
                    segments: &mut self.pinned.segments,
                    trailer: &trailer.0[..trailer.1],
                    table,
                };
                if let Some(c) = self.capture.as_mut() {
                    frame.gather_into(&mut self.capture_buf);
                    let _ = c.write(stamp, &self.capture_buf);
                }
                self.io.tx_pinned(frame)
            }
        };
        if let (Some(start), Some(st)) = (io_start, self.stages.as_mut()) {
            st.copied(self.clock.now().saturating_nanos_since(start));
        }
        Some(sent)
    }

    /// One TX burst of the frames queued, timed for `--stages`.
    fn flush_timed(&mut self) {
        let flush_start = self.stages.map(|_| self.clock.now());
        self.io.flush();
        if let (Some(start), Some(st)) = (flush_start, self.stages.as_mut()) {
            st.flushed(self.clock.now().saturating_nanos_since(start));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::ConnectParams;
    use crate::engine::channel_io::ChannelIo;
    use crate::host::{HostConfig, QpOptions};
    use crate::mem::access::Access;
    use crate::mem::vec_memory::{Region, VecMemory};
    use crate::mem::MrTable;
    use crate::net::NetConfig;
    use crate::transport::types::{SendOp, SendWr, Sge, WcStatus};
    use crate::wire::ethernet::EthernetAddress;
    use crate::wire::opcode::Opcode;
    use crate::wire::psn::Psn;
    use std::net::Ipv4Addr;
    use std::sync::Arc;
    use std::time::Duration;

    /// ARP requests (EtherType 0x0806) that reached the far end of the cable.
    fn arp_requests(wire: &mut ChannelIo) -> usize {
        let mut n = 0;
        wire.rx_burst(&mut |f| n += usize::from(f.len() >= 14 && f[12..14] == [0x08, 0x06]));
        n
    }

    /// The port identity of the tests: 02:00:00:00:00:01, 10.9.0.1/24.
    fn net_at_10_9_0_1() -> NetConfig {
        NetConfig::new(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            Ipv4Addr::new(10, 9, 0, 1),
            24,
        )
    }

    /// A host on `net` with a checked region table.
    fn host_at_10_9_0_1(net: NetConfig) -> Host<Arc<MrTable>> {
        Host::new(
            HostConfig {
                net,
                ca_guid: 1,
                seed: 1,
                qpns: crate::host::QpnPolicy::Sequential,
                cm: Default::default(),
            },
            Arc::new(MrTable::new(16)),
        )
        .unwrap()
    }

    /// An ARP request from 02:00:00:00:00:02 (10.9.0.2) for 10.9.0.1, as on the wire.
    fn arp_request_for_10_9_0_1() -> Vec<u8> {
        let mut f = vec![0xff; 6]; // to broadcast
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2]); // from the asker
        f.extend_from_slice(&[0x08, 0x06]); // ARP
        f.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 1]); // Ethernet/IPv4, request
        f.extend_from_slice(&[2, 0, 0, 0, 0, 2, 10, 9, 0, 2]); // sender
        f.extend_from_slice(&[0, 0, 0, 0, 0, 0, 10, 9, 0, 1]); // target
        f.resize(60, 0);
        f
    }

    /// ARP replies (EtherType 0x0806, operation 2) that reached the far end of the cable.
    fn arp_replies(wire: &mut ChannelIo) -> usize {
        let mut n = 0;
        wire.rx_burst(&mut |f| {
            n += usize::from(f.len() >= 22 && f[12..14] == [0x08, 0x06] && f[20..22] == [0, 2])
        });
        n
    }

    /// Stage timing counts each stage of the loop while it is on, and nothing while it is
    /// off or idle: two ARP requests arrive in one burst, are handled, and their two replies
    /// are built, copied out and sent in one TX burst.
    #[test]
    fn stage_times_follow_the_frames_through_the_loop_only_while_on() {
        let (io, mut wire) = ChannelIo::pair(64);
        let mut shard = Shard::new(host_at_10_9_0_1(net_at_10_9_0_1()), io);
        let request = arp_request_for_10_9_0_1();

        // Off (the default): the loop works, nothing is collected.
        assert!(wire.tx(&request));
        assert!(shard.poll());
        assert_eq!(arp_replies(&mut wire), 1);
        assert_eq!(shard.stage_times(), None);

        // On: starts from zero.
        shard.time_stages(true);
        assert_eq!(shard.stage_times(), Some(StageTimes::default()));
        assert!(wire.tx(&request) && wire.tx(&request));
        assert!(shard.poll());
        assert_eq!(arp_replies(&mut wire), 2);
        let t = shard.stage_times().unwrap();
        assert_eq!(
            (t.rx_bursts, t.rx_frames, t.tx_frames, t.flushes),
            (1, 2, 2, 1),
            "{t:?}"
        );
        assert_eq!((t.turns, t.idle_turns, t.tx_full), (1, 0, 0), "{t:?}");

        // Idle turns (clock reads and timer checks included) add nothing but their count.
        for _ in 0..2 * CLOCK_EVERY_IDLE {
            assert!(!shard.poll());
        }
        let idle = 2 * CLOCK_EVERY_IDLE;
        assert_eq!(
            shard.stage_times(),
            Some(StageTimes {
                turns: 1 + idle,
                idle_turns: idle,
                ..t
            })
        );

        // Off again: dropped.
        shard.time_stages(false);
        assert!(wire.tx(&request));
        assert!(shard.poll());
        assert_eq!(shard.stage_times(), None);
    }

    /// A raw frame of the local experimental EtherType 0x88B5 from 02:00:00:00:00:02,
    /// numbered `n`.
    fn raw_frame(n: u8) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x88, 0xb5, n];
        f.resize(60, 0);
        f
    }

    /// Echo mode: in one burst a raw frame and an ARP request arrive; the raw frame comes
    /// back turned around (to its sender, from the port) and never reaches the host, which
    /// still answers the ARP request. Without the channel the same frame is the host's, which
    /// counts and drops it (not IPv4).
    #[test]
    fn raw_echo_turns_its_frames_around_beside_the_stack() {
        let (io, mut wire) = ChannelIo::pair(64);
        let mut shard = Shard::new(host_at_10_9_0_1(net_at_10_9_0_1()), io);
        shard.set_raw_channel(Some(RawChannel::new(0x88b5, RawMode::Echo, 8, 2048)));
        assert!(wire.tx(&raw_frame(1)) && wire.tx(&arp_request_for_10_9_0_1()));
        assert!(shard.poll());
        let mut back = Vec::new();
        wire.rx_burst(&mut |f| back.push(f.to_vec()));
        let echo: Vec<_> = back.iter().filter(|f| f[12..14] == [0x88, 0xb5]).collect();
        assert_eq!(echo.len(), 1, "{back:?}");
        assert_eq!(&echo[0][0..6], &[2, 0, 0, 0, 0, 2], "to the sender");
        assert_eq!(&echo[0][6..12], &[2, 0, 0, 0, 0, 1], "from the port");
        assert_eq!(echo[0][14], 1);
        assert_eq!(
            back.iter().filter(|f| f[12..14] == [0x08, 0x06]).count(),
            1,
            "ARP reply"
        );
        let st = shard.raw_channel().unwrap().stats();
        assert_eq!((st.received, st.sent, st.dropped), (1, 1, 0));
        let before: u64 = shard.host.net_stats().drops().map(|(_, c)| c).sum();
        assert_eq!(before, 0, "the host never saw the raw frame");

        shard.set_raw_channel(None);
        assert!(wire.tx(&raw_frame(2)));
        shard.poll();
        assert_eq!(arp_replies(&mut wire), 0, "nothing comes back");
        let after: u64 = shard.host.net_stats().drops().map(|(_, c)| c).sum();
        assert_eq!(after, 1, "the host counted and dropped it");
    }

    /// Queue mode: raw frames wait for the consumer in order; `send_raw` sends at once.
    #[test]
    fn raw_queue_keeps_frames_for_the_consumer_and_send_raw_sends_at_once() {
        let (io, mut wire) = ChannelIo::pair(64);
        let mut shard = Shard::new(host_at_10_9_0_1(net_at_10_9_0_1()), io);
        shard.set_raw_channel(Some(RawChannel::new(0x88b5, RawMode::Queue, 8, 2048)));
        let mut out = Vec::new();
        assert!(!shard.pop_raw(&mut out), "nothing yet");
        assert!(wire.tx(&raw_frame(1)) && wire.tx(&raw_frame(2)));
        assert!(shard.poll());
        let mut seen = 0;
        wire.rx_burst(&mut |_| seen += 1);
        assert_eq!(seen, 0, "queue mode sends nothing back");
        assert!(shard.pop_raw(&mut out));
        assert_eq!(out, raw_frame(1));
        assert!(shard.pop_raw(&mut out));
        assert_eq!(out[14], 2);
        assert!(!shard.pop_raw(&mut out));

        assert!(shard.send_raw(&raw_frame(3)));
        let mut got = Vec::new();
        wire.rx_burst(&mut |f| got.push(f.to_vec()));
        assert_eq!(got, vec![raw_frame(3)]);
        assert_eq!(shard.raw_channel().unwrap().stats().sent, 1);
    }

    /// Frames before timers: due timers wait while receive bursts come back full (the answer
    /// that would stop them may be in the ring), at most `MAX_TIMER_DEFERRALS` turns. Here the
    /// timer is a connect deadline of 10 ms (its expiry sends a REJ) and the ring holds frames
    /// of another EtherType.
    #[test]
    fn due_timers_wait_for_a_full_ring_to_drain_up_to_a_bound() {
        let (io, mut wire) = ChannelIo::pair(512);
        let mut shard = Shard::new(host_at_10_9_0_1(net_at_10_9_0_1()), io);
        let roce_frames = |wire: &mut ChannelIo| {
            let mut n = 0;
            wire.rx_burst(&mut |f| {
                n += usize::from(f.len() > 38 && f[12..14] == [8, 0] && f[36..38] == [0x12, 0xb7])
            });
            n
        };
        let junk = |n: usize, wire: &mut ChannelIo| {
            for i in 0..n {
                let mut f = vec![0u8; 60];
                f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
                f[14] = i as u8;
                assert!(wire.tx(&f));
            }
        };
        let connect = |shard: &mut Shard<Arc<MrTable>, ChannelIo>, peer: Ipv4Addr| {
            let now = shard.clock().now();
            let pd = shard.host.mr_table().create_pz().id();
            let qpn = shard
                .host
                .create_qp(
                    now,
                    QpOptions {
                        pd,
                        ..QpOptions::default()
                    },
                )
                .unwrap();
            let mut cp = ConnectParams::new(peer, 1, qpn, Psn::new(0));
            cp.timeout = Some(Duration::from_millis(10));
            shard.host.connect(now, cp).unwrap();
            shard.send_now();
        };
        for (i, peer) in [2u8, 3].into_iter().enumerate() {
            let peer = Ipv4Addr::new(10, 9, 0, peer);
            shard
                .host
                .add_neighbour(peer, EthernetAddress([2, 0, 0, 0, 0, 2 + i as u8]))
                .unwrap();
        }
        connect(&mut shard, Ipv4Addr::new(10, 9, 0, 2));
        assert_eq!(roce_frames(&mut wire), 1, "the REQ");
        // 40 frames wait and the deadline passed (a sleep longer than it).
        junk(40, &mut wire);
        std::thread::sleep(Duration::from_millis(20));
        shard.poll(); // 32 frames: a full burst, the deadline waits
        assert_eq!(roce_frames(&mut wire), 0, "no REJ behind a full burst");
        assert_eq!(shard.stats().timers_deferred, 1);
        shard.poll(); // the last 8: the ring is drained, the deadline's REJ goes
        assert_eq!(roce_frames(&mut wire), 1, "the REJ after the ring drained");
        // A ring that stays full: the deadline fires after MAX_TIMER_DEFERRALS full bursts.
        connect(&mut shard, Ipv4Addr::new(10, 9, 0, 3));
        assert_eq!(roce_frames(&mut wire), 1, "the second REQ");
        junk(32 * (MAX_TIMER_DEFERRALS as usize + 2), &mut wire);
        std::thread::sleep(Duration::from_millis(20));
        for turn in 1..=MAX_TIMER_DEFERRALS {
            shard.poll();
            assert_eq!(roce_frames(&mut wire), 0, "turn {turn}: deferred");
        }
        shard.poll();
        assert_eq!(
            roce_frames(&mut wire),
            1,
            "the REJ with the ring still full"
        );
        assert_eq!(
            shard.stats().timers_deferred,
            1 + u64::from(MAX_TIMER_DEFERRALS)
        );
    }

    /// A new QP of the shard's host connects to `peer` (CM port 1).
    fn connect_new_qp(shard: &mut Shard<Arc<MrTable>, ChannelIo>, peer: Ipv4Addr) {
        let now = shard.clock().now();
        let pd = shard.host.mr_table().create_pz().id();
        let qpn = shard
            .host
            .create_qp(
                now,
                QpOptions {
                    pd,
                    ..QpOptions::default()
                },
            )
            .unwrap();
        shard
            .host
            .connect(now, ConnectParams::new(peer, 1, qpn, Psn::new(0)))
            .unwrap();
    }

    /// A router's ICMP host unreachable about the REQ to a peer behind it (`net/icmp.rs`)
    /// fails that connection request at once, not after the CM's retries: connect to
    /// 10.20.0.7 through the gateway 10.9.0.254, the router answers ARP, the REQ leaves for its
    /// MAC, and the router's ICMP quoting it comes back.
    #[test]
    fn an_icmp_unreachable_from_the_router_fails_the_connection_request() {
        use crate::cm::CmEvent;
        use crate::net::{ArpFrame, IpRoute};
        use crate::wire::ipv4::ones_complement_sum;
        let (io, mut wire) = ChannelIo::pair(64);
        let mut net = net_at_10_9_0_1();
        let (our_mac, our_ip) = (net.mac, net.ipv4_addr().unwrap());
        net.routes
            .add(IpRoute::parse("10.20.0.0/16 via 10.9.0.254").unwrap())
            .unwrap();
        let mut shard = Shard::new(host_at_10_9_0_1(net), io);
        let router_mac = EthernetAddress([0x52, 0x54, 0, 0, 0, 0xfe]);
        let router_ip = Ipv4Addr::new(10, 9, 0, 254);
        let peer = Ipv4Addr::new(10, 20, 0, 7);
        connect_new_qp(&mut shard, peer);
        shard.send_now();
        assert_eq!(arp_requests(&mut wire), 1, "who has the router");
        let reply = ArpFrame::reply(router_mac, router_ip, our_mac, our_ip);
        assert!(wire.tx(reply.as_bytes()));
        let mut req = None;
        for _ in 0..1000 {
            shard.poll();
            wire.rx_burst(&mut |f| {
                if f.len() > 42 && f[12..14] == [0x08, 0x00] && f[36..38] == 4791u16.to_be_bytes() {
                    req = Some(f.to_vec());
                }
            });
            if req.is_some() {
                break;
            }
        }
        let req = req.expect("the REQ left");
        assert_eq!(&req[..6], &router_mac.0, "to the router's MAC");
        assert_eq!(&req[30..34], &peer.octets(), "for the peer");
        // ICMP type 3 code 1, quoting the REQ's IPv4 header and UDP header.
        let mut icmp = vec![3, 1, 0, 0, 0, 0, 0, 0];
        icmp.extend_from_slice(&req[14..42]);
        let c = !ones_complement_sum(&icmp, 0);
        icmp[2..4].copy_from_slice(&c.to_be_bytes());
        let mut ip = vec![0x45, 0xc0];
        ip.extend_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
        ip.extend_from_slice(&[0, 0, 0, 0, 64, 1, 0, 0]);
        ip.extend_from_slice(&router_ip.octets());
        ip.extend_from_slice(&our_ip.octets());
        let c = !ones_complement_sum(&ip, 0);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let mut frame = our_mac.0.to_vec();
        frame.extend_from_slice(&router_mac.0);
        frame.extend_from_slice(&[0x08, 0x00]);
        frame.extend_from_slice(&ip);
        frame.extend_from_slice(&icmp);
        assert!(wire.tx(&frame));
        let mut unreachable = false;
        for _ in 0..1000 {
            shard.poll();
            if let Some(ev) = shard.host.poll_event() {
                unreachable = matches!(ev, CmEvent::Unreachable { .. });
                break;
            }
        }
        assert!(unreachable, "the connection request failed as unreachable");
        assert_eq!(shard.host.net().stats().rx_icmp_unreachable, 1);
    }

    /// An idle shard reads the clock only every `CLOCK_EVERY_IDLE` turns, yet its timers
    /// fire: a connection attempt to an unanswered address sends its ARP request at once
    /// (`send_now`, output waiting) and the retries later with nothing else happening.
    #[test]
    fn idle_turns_skip_work_but_timers_still_fire() {
        let (io, mut wire) = ChannelIo::pair(64);
        let mut net = net_at_10_9_0_1();
        net.arp_retry_interval = Duration::from_millis(2);
        net.arp_max_retries = 3;
        let mut shard = Shard::new(host_at_10_9_0_1(net), io);
        // Nothing to do: idle turns.
        for _ in 0..3 * CLOCK_EVERY_IDLE {
            assert!(!shard.poll());
        }
        assert!(!shard.host.has_output());
        let peer = Ipv4Addr::new(10, 9, 0, 2);
        connect_new_qp(&mut shard, peer);
        assert!(shard.host.has_output(), "the connect left a MAD to send");
        // `send_now` puts it on the wire without a receive turn: the MAD waits for the MAC, so
        // what leaves is the ARP request for the peer.
        assert_eq!(shard.send_now(), 1);
        assert_eq!(
            arp_requests(&mut wire),
            1,
            "the first ARP request left at once"
        );
        assert_eq!(shard.send_now(), 0, "nothing more to send until the retry");
        // Only retries remain, on the timer: keep polling until one is seen (or 2 s pass).
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        let mut retries = 0;
        while retries == 0 && std::time::Instant::now() < deadline {
            shard.poll();
            retries += arp_requests(&mut wire);
        }
        assert!(
            retries >= 1,
            "the ARP retry timer never fired on an idle shard"
        );
    }

    type TestShard = Shard<VecMemory, ChannelIo>;

    /// Two shards on one in-memory cable, A (10.9.0.1) and B (10.9.0.2), one RC connection
    /// between QP `qa` of A and QP `qb` of B, each with a 4 KiB region open to RDMA WRITE.
    struct Connected {
        a: TestShard,
        b: TestShard,
        qa: u32,
        qb: u32,
        mem_a: Region,
        mem_b: Region,
    }

    fn connected_shards() -> Connected {
        use crate::cm::{AcceptParams, CmEvent};
        let (io_a, io_b) = ChannelIo::pair(64);
        let shard = |last: u8, io| {
            let net = NetConfig::new(
                EthernetAddress([2, 0, 0, 0, 0, last]),
                Ipv4Addr::new(10, 9, 0, last),
                24,
            );
            let config = HostConfig {
                net,
                ca_guid: last.into(),
                seed: last.into(),
                qpns: crate::host::QpnPolicy::Sequential,
                cm: Default::default(),
            };
            Shard::new(Host::new(config, VecMemory::new()).unwrap(), io)
        };
        let (mut a, mut b) = (shard(1, io_a), shard(2, io_b));
        let now = a.clock().now();
        let qa = a.host.create_qp(now, QpOptions::default()).unwrap();
        let qb = b.host.create_qp(now, QpOptions::default()).unwrap();
        let (mem_a, mem_b) = (
            a.host
                .register(1, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE),
            b.host
                .register(1, 4096, Access::LOCAL_WRITE | Access::REMOTE_WRITE),
        );
        b.host.listen(7471).unwrap();
        let mut params = ConnectParams::new(Ipv4Addr::new(10, 9, 0, 2), 7471, qa, Psn::new(0x1000));
        params.access = Access::REMOTE_WRITE;
        let id_a = a.host.connect(now, params).unwrap();
        let (mut up_a, mut up_b) = (false, false);
        for _ in 0..10_000 {
            a.poll();
            b.poll();
            while let Some(ev) = b.host.poll_event() {
                match ev {
                    CmEvent::ConnectRequest { id, .. } => {
                        let now = b.clock().now();
                        let mut params = AcceptParams::new(qb, Psn::new(0x2000));
                        params.access = Access::REMOTE_WRITE;
                        b.host.accept(now, id, params).unwrap();
                    }
                    CmEvent::Established { .. } => up_b = true,
                    _ => {}
                }
            }
            while let Some(ev) = a.host.poll_event() {
                up_a |= matches!(ev, CmEvent::Established { id, .. } if id == id_a);
            }
            if up_a && up_b {
                // Nothing left in flight (the RTU's answer, ARP): the tests count frames.
                while a.poll() | b.poll() {}
                return Connected {
                    a,
                    b,
                    qa,
                    qb,
                    mem_a,
                    mem_b,
                };
            }
        }
        panic!("no connection: A up {up_a}, B up {up_b}");
    }

    /// A signaled 64 B RDMA WRITE from `from`'s region to `to`'s.
    fn post_write(shard: &mut TestShard, qpn: u32, from: &Region, to: &Region) {
        post_write_signaled(shard, qpn, from, to, true);
    }

    /// A 64 B RDMA WRITE from `from`'s region to `to`'s, `signaled` or not.
    fn post_write_signaled(
        shard: &mut TestShard,
        qpn: u32,
        from: &Region,
        to: &Region,
        signaled: bool,
    ) {
        let wr = SendWr {
            wr_id: 7,
            op: SendOp::Write {
                remote_addr: to.addr,
                rkey: to.rkey,
            },
            sgl: vec![Sge {
                addr: from.addr,
                len: 64,
                lkey: from.lkey,
            }]
            .into(),
            signaled,
            fence: false,
            solicited: false,
        };
        let now = shard.clock().now();
        shard.host.post_send(now, qpn, wr).unwrap();
    }

    /// Frames and transmit bursts of a shard since its stage timing was (re)started.
    fn sent(shard: &TestShard) -> (u64, u64) {
        let t = shard.stage_times().expect("stage timing on");
        (t.tx_frames, t.flushes)
    }

    /// A ping-pong on inline consumer turns: A's WRITE reaches B, whose turn holds the ACK
    /// (no frame, no timer); B's answer leaves with the ACK in one burst; A's turn takes
    /// both, completes its WRITE, and holds its own ACK for its next post.
    #[test]
    fn a_held_ack_leaves_in_the_burst_of_the_next_post() {
        let mut c = connected_shards();
        c.a.time_stages(true);
        c.b.time_stages(true);
        let timer_before = c.b.host.poll_timeout();

        // A -> B: WRITE Only.
        post_write(&mut c.a, c.qa, &c.mem_a, &c.mem_b);
        assert_eq!(c.a.send_now(), 1);
        // B's turn: the WRITE arrives, its ACK waits.
        assert!(c.b.poll_holding_acks());
        assert_eq!(sent(&c.b), (0, 0), "B sent nothing on its turn");
        assert_eq!(c.b.stats().acks_held, 1);
        assert_eq!(
            c.b.host.poll_timeout(),
            timer_before,
            "no timer holds the ACK"
        );
        assert!(!c.a.poll(), "nothing reached A");
        assert!(c.a.host.poll_completion().is_none());

        // B -> A: its WRITE takes the ACK along, one burst, the WRITE first (what A's
        // application waits for), the ACK right behind it.
        post_write(&mut c.b, c.qb, &c.mem_b, &c.mem_a);
        assert_eq!(c.b.send_now(), 2);
        assert_eq!(sent(&c.b), (2, 1), "ACK and WRITE in one burst");
        let mut burst = Vec::new();
        c.a.io.rx_burst(&mut |f| burst.push(f.to_vec()));
        // The BTH's opcode, after Ethernet (14), IPv4 (20) and UDP (8).
        let opcodes: Vec<u8> = burst.iter().map(|f| f[42]).collect();
        assert_eq!(
            opcodes,
            [Opcode::RC_WRITE_ONLY.0, Opcode::RC_ACK.0],
            "WRITE Only, then Acknowledge"
        );

        // A's turn over that burst: its WRITE completes, the ACK of B's waits for A's next
        // post.
        for f in &burst {
            let now = c.a.clock().now();
            c.a.host.handle_frame(now, f);
        }
        assert!(!c.a.poll_holding_acks(), "nothing sent");
        let wc = c.a.host.poll_completion().expect("A's WRITE completed");
        assert_eq!((wc.wr_id, wc.status), (7, WcStatus::Success));
        assert_eq!(sent(&c.a), (1, 1), "A sent only its WRITE");
        assert_eq!(c.a.stats().acks_held, 1);
        post_write(&mut c.a, c.qa, &c.mem_a, &c.mem_b);
        assert_eq!(c.a.send_now(), 2);
        assert_eq!(sent(&c.a), (3, 2));
    }

    /// The frame of the signaled WRITE the consumer waits for leaves in a burst of its own
    /// when more requests follow it in the same turn; at the end of a turn it costs no extra
    /// burst.
    #[test]
    fn the_awaited_write_leaves_before_the_rest_of_the_turn_is_built() {
        let mut c = connected_shards();
        c.a.time_stages(true);
        // S u u: the signaled WRITE's burst, then the other two.
        for signaled in [true, false, false] {
            post_write_signaled(&mut c.a, c.qa, &c.mem_a, &c.mem_b, signaled);
        }
        assert_eq!(c.a.send_now(), 3);
        assert_eq!(sent(&c.a), (3, 2), "two bursts");
        while c.a.poll() | c.b.poll() {}
        assert_eq!(
            c.a.host.poll_completion().map(|wc| wc.status),
            Some(WcStatus::Success)
        );
        // u u S: one burst, the awaited WRITE last.
        for signaled in [false, false, true] {
            post_write_signaled(&mut c.a, c.qa, &c.mem_a, &c.mem_b, signaled);
        }
        assert_eq!(c.a.send_now(), 3);
        assert_eq!(sent(&c.a), (6, 3), "one more burst");
        // S S u: the second signaled WRITE waits behind the first, so one split only.
        while c.a.poll() | c.b.poll() {}
        assert!(c.a.host.poll_completion().is_some());
        for signaled in [true, true, false] {
            post_write_signaled(&mut c.a, c.qa, &c.mem_a, &c.mem_b, signaled);
        }
        assert_eq!(c.a.send_now(), 3);
        assert_eq!(sent(&c.a), (9, 5), "two more bursts");
    }

    /// A lone request's ACK leaves on the responder's next turn when its consumer posts
    /// nothing, and at once on a turn that holds nothing (a poll core's, the away helper's).
    #[test]
    fn a_lone_ack_leaves_within_one_turn() {
        let mut c = connected_shards();
        c.b.time_stages(true);
        post_write(&mut c.a, c.qa, &c.mem_a, &c.mem_b);
        assert_eq!(c.a.send_now(), 1);
        assert!(c.b.poll_holding_acks());
        assert_eq!(sent(&c.b), (0, 0));
        // The next turn, nothing new on the wire: the ACK leaves.
        assert!(c.b.poll_holding_acks());
        assert_eq!(sent(&c.b), (1, 1));
        assert!(c.a.poll());
        let wc = c.a.host.poll_completion().expect("A's WRITE completed");
        assert_eq!(wc.status, WcStatus::Success);

        // A turn that holds nothing sends the ACK with the WRITE's arrival.
        post_write(&mut c.a, c.qa, &c.mem_a, &c.mem_b);
        assert_eq!(c.a.send_now(), 1);
        assert!(c.b.poll());
        assert_eq!(sent(&c.b), (2, 2));
        assert_eq!(c.b.stats().acks_held, 1, "only the first turn held one");
        assert!(c.a.poll());
        assert!(c.a.host.poll_completion().is_some());
    }

    /// Only plain ACKs wait: a NAK (here for a WRITE to a key B never gave) leaves on the
    /// turn that produced it.
    #[test]
    fn a_nak_is_never_held() {
        let mut c = connected_shards();
        c.b.time_stages(true);
        let mut bad = c.mem_b;
        bad.rkey ^= 0x100;
        post_write(&mut c.a, c.qa, &c.mem_a, &bad);
        assert_eq!(c.a.send_now(), 1);
        assert!(c.b.poll_holding_acks());
        assert_eq!(sent(&c.b), (1, 1), "the NAK left at once");
        assert_eq!(c.b.stats().acks_held, 0);
        assert!(c.a.poll());
        let wc = c.a.host.poll_completion().expect("A's WRITE completed");
        assert_eq!(wc.status, WcStatus::RemAccessErr);
    }
}
