//! Fault injection at the frame I/O layer, for any application: a [`FaultyIo`] wraps a queue
//! pair and loses, duplicates, reorders, delays and corrupts frames in both directions, as
//! seeded chance decides. Turned on by `DPDK_ROCE_FAULTS` (or a profile's `[faults]`
//! section; the variable wins), e.g.
//!
//! ```text
//! DPDK_ROCE_FAULTS="loss=0.05,dup=0.01,reorder=0.05,delay_us=50,corrupt=0.001,seed=7"
//! ```
//!
//! Each probability applies to each frame and direction; `delay_us` holds every frame that
//! long; `seed` makes a run repeatable (default: from the OS). A lost frame is reported to the
//! shard as sent; a corrupted one has one bit flipped (the receiver's checks drop it); a
//! reordered one goes after the next. What it did is counted ([`FaultCounters`]) and logged
//! when the queue pair goes (a `warn` event of target `dpdk_roce::faults`, shown by the
//! default filter: `dpdk-roce faults: ...`). Off, nothing is wrapped.

use crate::config::faults::FaultConfig;
use crate::io::{FrameIo, PinnedFrame};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The `tracing` target of the report of what was injected.
pub const FAULTS_TARGET: &str = "dpdk_roce::faults";

/// What the injector did, by direction (`[received, sent]`).
#[derive(Debug, Default)]
pub struct FaultCounters {
    pub lost: [AtomicU64; 2],
    pub duplicated: [AtomicU64; 2],
    pub reordered: [AtomicU64; 2],
    pub delayed: [AtomicU64; 2],
    pub corrupted: [AtomicU64; 2],
}

impl FaultCounters {
    fn add(c: &[AtomicU64; 2], dir: usize) {
        c[dir].fetch_add(1, Ordering::Relaxed);
    }

    /// One line: `rx lost=.. dup=.. reordered=.. delayed=.. corrupted=..; tx ...`.
    pub fn summary(&self) -> String {
        let one = |d: usize| {
            let g = |c: &[AtomicU64; 2]| c[d].load(Ordering::Relaxed);
            format!(
                "lost={} dup={} reordered={} delayed={} corrupted={}",
                g(&self.lost),
                g(&self.duplicated),
                g(&self.reordered),
                g(&self.delayed),
                g(&self.corrupted)
            )
        };
        format!("rx {}; tx {}", one(RX), one(TX))
    }
}

const RX: usize = 0;
const TX: usize = 1;

/// What happens to one frame.
#[derive(Clone, Copy, Debug, Default)]
struct Fate {
    lost: bool,
    corrupt_bit: Option<usize>,
    dup: bool,
    reorder: bool,
}

/// One direction's chance and held frames.
struct Lane {
    /// Frames held for `delay_us`, with when they are due.
    delayed: VecDeque<(Instant, Vec<u8>)>,
    /// A frame held back to go after the next one.
    held: Option<Vec<u8>>,
}

impl Lane {
    fn new() -> Lane {
        Lane {
            delayed: VecDeque::new(),
            held: None,
        }
    }
}

/// The setting, its seeded chances and the counters of what they decided.
struct Dice {
    config: FaultConfig,
    rng: ChaCha8Rng,
    counters: Arc<FaultCounters>,
}

/// A queue pair with faults (see the module doc).
pub struct FaultyIo<I> {
    inner: I,
    dice: Dice,
    lanes: [Lane; 2],
}

impl<I: FrameIo> FaultyIo<I> {
    /// `inner` with the faults of `config`; `stream` varies the seed per queue pair.
    pub fn new(inner: I, config: FaultConfig, stream: u64) -> FaultyIo<I> {
        let seed = config
            .seed
            .or_else(|| crate::random::os_u64().ok())
            .unwrap_or(1)
            .wrapping_add(stream.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        FaultyIo {
            inner,
            dice: Dice {
                config,
                rng: ChaCha8Rng::seed_from_u64(seed),
                counters: Arc::new(FaultCounters::default()),
            },
            lanes: [Lane::new(), Lane::new()],
        }
    }

    /// The queue pair the faults apply to.
    pub fn inner(&self) -> &I {
        &self.inner
    }

    /// The counters (shared: they outlive the queue pair).
    pub fn counters(&self) -> Arc<FaultCounters> {
        self.dice.counters.clone()
    }

    fn fate(rng: &mut ChaCha8Rng, c: &FaultConfig, len: usize) -> Fate {
        let mut hit = |p: f64| p > 0.0 && rng.gen_bool(p);
        let lost = hit(c.loss);
        let corrupt = hit(c.corrupt);
        let dup = hit(c.dup);
        let reorder = hit(c.reorder);
        Fate {
            lost,
            corrupt_bit: (corrupt && len > 0).then(|| rng.gen_range(0..len * 8)),
            dup,
            reorder,
        }
    }

    /// Applies the fate of one frame going `dir`: the frames to pass on now, in order.
    fn apply(
        dice: &mut Dice,
        lane: &mut Lane,
        dir: usize,
        frame: &[u8],
        now: Option<Instant>,
        out: &mut Vec<Vec<u8>>,
    ) {
        let fate = Self::fate(&mut dice.rng, &dice.config, frame.len());
        let (config, counters) = (&dice.config, &dice.counters);
        if fate.lost {
            FaultCounters::add(&counters.lost, dir);
            return;
        }
        let mut f = frame.to_vec();
        if let Some(bit) = fate.corrupt_bit {
            f[bit / 8] ^= 1 << (bit % 8);
            FaultCounters::add(&counters.corrupted, dir);
        }
        let copies = if fate.dup {
            FaultCounters::add(&counters.duplicated, dir);
            2
        } else {
            1
        };
        for _ in 0..copies {
            let f = f.clone();
            if let Some(now) = now {
                FaultCounters::add(&counters.delayed, dir);
                lane.delayed
                    .push_back((now + Duration::from_micros(config.delay_us.into()), f));
            } else {
                out.push(f);
            }
        }
        if fate.reorder && lane.held.is_none() {
            // This one waits for the next frame (or the next turn).
            if let Some(f) = out.pop() {
                FaultCounters::add(&counters.reordered, dir);
                lane.held = Some(f);
                return;
            }
        }
        if let Some(h) = lane.held.take() {
            out.push(h);
        }
    }

    /// Frames of `lane` due by now (delayed ones), and a held one whose turn came.
    fn due(lane: &mut Lane, now: Instant, out: &mut Vec<Vec<u8>>) {
        while lane.delayed.front().is_some_and(|(t, _)| *t <= now) {
            if let Some((_, f)) = lane.delayed.pop_front() {
                out.push(f);
            }
        }
    }

    fn now(&self) -> Option<Instant> {
        (self.dice.config.delay_us > 0).then(Instant::now)
    }
}

impl<I: FrameIo> FrameIo for FaultyIo<I> {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        let now = self.now();
        let FaultyIo { inner, dice, lanes } = self;
        let lane = &mut lanes[RX];
        let mut out = Vec::new();
        if let Some(now) = now {
            Self::due(lane, now, &mut out);
        }
        let got = inner.rx_burst(&mut |frame| {
            Self::apply(dice, lane, RX, frame, now, &mut out);
        });
        if got == 0 && lane.delayed.is_empty() {
            // Nothing behind a held frame: its turn comes now.
            if let Some(h) = lane.held.take() {
                out.push(h);
            }
        }
        for frame in &out {
            f(frame);
        }
        out.len()
    }

    fn tx(&mut self, frame: &[u8]) -> bool {
        let now = self.now();
        let mut out = Vec::new();
        let lane = &mut self.lanes[TX];
        Self::apply(&mut self.dice, lane, TX, frame, now, &mut out);
        for f in out {
            // A frame the device refuses is lost like the others (RC recovers it).
            let _ = self.inner.tx(&f);
        }
        true
    }

    fn flush(&mut self) {
        let mut out = Vec::new();
        if let Some(now) = self.now() {
            Self::due(&mut self.lanes[TX], now, &mut out);
        }
        if out.is_empty() && self.lanes[TX].delayed.is_empty() {
            if let Some(h) = self.lanes[TX].held.take() {
                out.push(h);
            }
        }
        for f in out {
            let _ = self.inner.tx(&f);
        }
        self.inner.flush();
    }

    fn ready(&mut self) -> bool {
        self.inner.ready()
    }

    fn tx_pending(&self) -> bool {
        self.inner.tx_pending()
            || !self.lanes[TX].delayed.is_empty()
            || self.lanes[TX].held.is_some()
    }

    /// None: payloads are gathered, so the faults apply to whole frames.
    fn zero_copy_min(&self) -> Option<usize> {
        None
    }

    fn rx_other_vlan(&self) -> u64 {
        self.inner.rx_other_vlan()
    }

    fn tx_pinned(&mut self, frame: PinnedFrame<'_>) -> bool {
        crate::io::tx_gathered(self, frame)
    }
}

impl<I> Drop for FaultyIo<I> {
    fn drop(&mut self) {
        tracing::warn!(
            target: FAULTS_TARGET,
            "dpdk-roce faults: {}",
            self.dice.counters.summary()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::channel_io::ChannelIo;

    #[test]
    fn parses_every_key_and_refuses_nonsense() {
        let c =
            FaultConfig::parse("loss=0.05, dup=0.01,reorder=0.05,delay_us=50,corrupt=0.001,seed=7")
                .unwrap();
        assert_eq!(
            c,
            FaultConfig {
                loss: 0.05,
                dup: 0.01,
                reorder: 0.05,
                corrupt: 0.001,
                delay_us: 50,
                seed: Some(7)
            }
        );
        assert!(c.active());
        assert!(!FaultConfig::parse("").unwrap().active());
        for bad in [
            "loss=2",
            "loss=-0.1",
            "drop=0.1",
            "loss",
            "delay_us=x",
            "seed=-1",
        ] {
            assert!(FaultConfig::parse(bad).is_err(), "{bad}");
        }
    }

    /// Through an in-memory cable: each fault happens about as often as asked, every frame
    /// that is not lost arrives (twice when duplicated), and corrupted ones differ in one bit.
    #[test]
    fn faults_happen_as_often_as_asked_and_nothing_else_changes() {
        let (a, mut b) = ChannelIo::pair(1 << 16);
        let config =
            FaultConfig::parse("loss=0.1,dup=0.05,reorder=0.1,corrupt=0.02,seed=3").unwrap();
        let mut io = FaultyIo::new(a, config, 0);
        let n = 20_000u32;
        for k in 0..n {
            io.tx(&k.to_be_bytes());
        }
        io.flush();
        let mut got = Vec::new();
        while b.rx_burst(&mut |f| got.push(f.to_vec())) > 0 {}
        let c = io.counters();
        let lost = c.lost[TX].load(Ordering::Relaxed);
        let dup = c.duplicated[TX].load(Ordering::Relaxed);
        let corrupted = c.corrupted[TX].load(Ordering::Relaxed);
        let reordered = c.reordered[TX].load(Ordering::Relaxed);
        let near = |x: u64, p: f64| (x as f64 - p * n as f64).abs() < 0.25 * p * n as f64;
        assert!(
            near(lost, 0.1) && near(dup, 0.05 * 0.9) && near(corrupted, 0.02 * 0.9),
            "{}",
            c.summary()
        );
        assert!(reordered > 0, "{}", c.summary());
        assert_eq!(got.len() as u64, u64::from(n) - lost + dup);
        let intact = got.iter().filter(|f| f.len() == 4).count();
        assert_eq!(intact, got.len(), "lengths never change");
        let mut seen: Vec<u32> = got
            .iter()
            .map(|f| u32::from_be_bytes([f[0], f[1], f[2], f[3]]))
            .filter(|&v| v < n)
            .collect();
        let in_order = seen.windows(2).all(|w| w[0] <= w[1]);
        assert!(!in_order, "some frames were reordered");
        seen.sort_unstable();
        seen.dedup();
        assert!(seen.len() as u64 >= u64::from(n) - lost - corrupted);
    }

    /// The report of what was injected is a warning of `dpdk_roce::faults` (shown by the
    /// default filter), sent when the queue pair goes.
    #[test]
    fn the_report_is_a_warning_logged_when_the_queue_pair_goes() {
        roce_proto::log_capture::captured(|capture| {
            let (a, _b) = ChannelIo::pair(64);
            let config = FaultConfig::parse("loss=1,seed=1").unwrap();
            let mut io = FaultyIo::new(a, config, 0);
            io.tx(b"gone");
            io.flush();
            assert!(capture.take_target(FAULTS_TARGET).is_empty());
            drop(io);
            let report = capture.take_target(FAULTS_TARGET);
            assert_eq!(report.len(), 1, "{report:?}");
            assert_eq!(report[0].level, tracing::Level::WARN);
            let m = &report[0].message;
            assert!(m.starts_with("dpdk-roce faults: rx lost=0 "), "{m}");
            assert!(m.contains("; tx lost=1 "), "{m}");
        });
    }

    #[test]
    fn delayed_frames_arrive_after_the_delay() {
        let (mut a, b) = ChannelIo::pair(64);
        let config = FaultConfig::parse("delay_us=20000").unwrap();
        let mut io = FaultyIo::new(b, config, 0);
        a.tx(b"late");
        a.flush();
        let t0 = Instant::now();
        let mut got = Vec::new();
        while got.is_empty() {
            io.rx_burst(&mut |f| got.push(f.to_vec()));
            assert!(t0.elapsed() < Duration::from_secs(5), "never arrived");
        }
        assert!(t0.elapsed() >= Duration::from_millis(20));
        assert_eq!(got, [b"late".to_vec()]);
    }
}
