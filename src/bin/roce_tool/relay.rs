//! `roce-tool relay`: an impairing Ethernet relay between two interfaces, for testing the
//! provider over a bad network with an impairment that is not its own code (this kernel has no
//! netem). Two providers on two veth pairs, the relay on the inner ends:
//!
//! ```text
//! provider A [Xa] <-veth-> [Xb] relay [Ya] <-veth-> [Yb] provider B
//! roce-tool relay --a Xb --b Ya --loss 0.05 --reorder 0.05 --dup 0.01 --corrupt 0.001 --seed 7
//! ```
//!
//! Every frame either way (ARP and CM too) is, by a seeded draw: dropped (`--loss`); sent
//! twice (`--dup`); held back and sent after the next frame of its direction, or after
//! `--hold-us` if none comes (`--reorder`); or sent with one random bit flipped (`--corrupt`).
//! The relay reads both interfaces with DPDK's net_af_packet in promiscuous mode and forwards
//! the mbufs it received. It runs until `--seconds` pass, or, with `--until-stdin-closes`,
//! until its standard input reaches end of file; then prints what it did, one line per
//! direction: `relay a->b: forwarded=.. lost=.. duplicated=.. reordered=.. corrupted=..`.

use clap::Args;
use dpdk_roce::dpdk::{Eal, EalArgs, Mbuf, Mempool, Port, PortConfig, RxQueue, TxQueue};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::io::Read;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Args, Debug)]
pub struct RelayArgs {
    /// The first interface.
    #[arg(long)]
    a: String,
    /// The second interface.
    #[arg(long)]
    b: String,
    /// Chance of dropping a frame.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Chance of sending a frame twice.
    #[arg(long, default_value_t = 0.0)]
    dup: f64,
    /// Chance of holding a frame back behind the next one.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Chance of flipping one bit of a frame.
    #[arg(long, default_value_t = 0.0)]
    corrupt: f64,
    /// Longest a held frame waits for a frame to pass it, in microseconds.
    #[arg(long, default_value_t = 200)]
    hold_us: u64,
    /// Seed of the draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Stop after this many seconds.
    #[arg(long)]
    seconds: Option<u64>,
    /// Stop when standard input reaches end of file.
    #[arg(long)]
    until_stdin_closes: bool,
    /// The EAL lcore to run on.
    #[arg(long, default_value_t = 0)]
    lcore: u16,
    /// Sleep this long after a poll of both ports found nothing (0: spin).
    #[arg(long, default_value_t = 20)]
    idle_pause_us: u64,
}

/// What the relay did to the frames of one direction.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    forwarded: u64,
    lost: u64,
    duplicated: u64,
    reordered: u64,
    corrupted: u64,
}

/// One direction: frames from `rx` go out of `tx`.
struct Lane {
    name: &'static str,
    rx: RxQueue,
    tx: TxQueue,
    pool: Mempool,
    held: VecDeque<(Mbuf, Instant)>,
    counts: Counts,
}

const BURST: usize = 32;

pub fn run(args: &RelayArgs) -> ExitCode {
    match relay(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-tool relay: {e}");
            ExitCode::FAILURE
        }
    }
}

fn check(args: &RelayArgs) -> Result<(), String> {
    for (name, p) in [
        ("--loss", args.loss),
        ("--dup", args.dup),
        ("--reorder", args.reorder),
        ("--corrupt", args.corrupt),
    ] {
        if !(0.0..=1.0).contains(&p) {
            return Err(format!("{name} must be a chance in 0..=1, not {p}"));
        }
    }
    if args.a == args.b {
        return Err("--a and --b must be two interfaces".into());
    }
    Ok(())
}

fn relay(args: &RelayArgs) -> Result<(), String> {
    check(args)?;
    let prefix = format!("roce-relay-{}", std::process::id());
    let eal_args = EalArgs::new(&args.lcore.to_string())
        .no_huge(256)
        .file_prefix(&prefix)
        .arg("--no-shconf")
        .log_level("warning")
        .vdev(&format!("net_af_packet0,iface={}", args.a))
        .vdev(&format!("net_af_packet1,iface={}", args.b));
    let eal = Eal::init(&eal_args.to_args());
    // With --no-shconf nothing uses the runtime directory after init.
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    let eal = eal.map_err(|e| format!("EAL: {e}"))?;
    // Each port, its queues, and a pool for the copies of duplicated frames it sends.
    let open = |i: u8| -> Result<(Port, RxQueue, TxQueue, Mempool), String> {
        let name = format!("net_af_packet{i}");
        let port = Port::open(eal, &name, &PortConfig::default()).map_err(|e| e.to_string())?;
        port.set_promiscuous(true).map_err(|e| e.to_string())?;
        let (rx, tx) = port.take_queue_pair(0).map_err(|e| e.to_string())?;
        let pool = Mempool::new(
            eal,
            &format!("relay-dup{i}"),
            2047,
            0,
            Mempool::DEFAULT_DATA_ROOM,
        )
        .map_err(|e| e.to_string())?;
        Ok((port, rx, tx, pool))
    };
    let (_port_a, rx_a, tx_a, pool_a) = open(0)?;
    let (_port_b, rx_b, tx_b, pool_b) = open(1)?;
    let mut lanes = [
        Lane {
            name: "a->b",
            rx: rx_a,
            tx: tx_b,
            pool: pool_b,
            held: VecDeque::new(),
            counts: Counts::default(),
        },
        Lane {
            name: "b->a",
            rx: rx_b,
            tx: tx_a,
            pool: pool_a,
            held: VecDeque::new(),
            counts: Counts::default(),
        },
    ];
    let stop = Arc::new(AtomicBool::new(false));
    if args.until_stdin_closes {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut sink = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            stop.store(true, Ordering::Release);
        });
    }
    println!("READY relay {} <-> {}", args.a, args.b);
    let deadline = args
        .seconds
        .map(|s| Instant::now() + Duration::from_secs(s));
    let hold = Duration::from_micros(args.hold_us);
    let mut rng = ChaCha8Rng::seed_from_u64(args.seed);
    let mut frames: [Option<Mbuf>; BURST] = Default::default();
    let mut polls = 0u32;
    loop {
        let mut busy = false;
        for lane in &mut lanes {
            let n = lane.rx.rx_burst(&mut frames);
            busy |= n > 0;
            for slot in frames.iter_mut().take(n) {
                if let Some(m) = slot.take() {
                    lane.pass(m, args, &mut rng);
                }
            }
            busy |= lane.release_late(hold);
        }
        polls = polls.wrapping_add(1);
        if polls.is_multiple_of(256)
            && (stop.load(Ordering::Acquire) || deadline.is_some_and(|d| Instant::now() > d))
        {
            break;
        }
        if !busy && args.idle_pause_us > 0 {
            std::thread::sleep(Duration::from_micros(args.idle_pause_us));
        }
    }
    for lane in &mut lanes {
        lane.release_late(Duration::ZERO);
        let c = lane.counts;
        println!(
            "relay {}: forwarded={} lost={} duplicated={} reordered={} corrupted={}",
            lane.name, c.forwarded, c.lost, c.duplicated, c.reordered, c.corrupted
        );
    }
    Ok(())
}

impl Lane {
    /// Decides the fate of one received frame.
    fn pass(&mut self, mut m: Mbuf, args: &RelayArgs, rng: &mut ChaCha8Rng) {
        if rng.gen_bool(args.loss) {
            self.counts.lost += 1;
            return;
        }
        if rng.gen_bool(args.corrupt) {
            let len = usize::from(m.data_len());
            if let (Some(data), true) = (m.data_mut(), len > 0) {
                let bit = rng.gen_range(0..len * 8);
                data[bit / 8] ^= 1 << (bit % 8);
                self.counts.corrupted += 1;
            }
        }
        if rng.gen_bool(args.dup) {
            if let Some(mut copy) = self.pool.alloc() {
                if copy.extend_from_slice(&m.to_vec()) {
                    self.send(copy);
                    self.counts.duplicated += 1;
                }
            }
        }
        if rng.gen_bool(args.reorder) {
            self.held.push_back((m, Instant::now()));
            self.counts.reordered += 1;
            return;
        }
        self.send(m);
        // The frames held back go out behind this one.
        while let Some((h, _)) = self.held.pop_front() {
            self.send(h);
        }
    }

    /// Sends the held frames older than `hold`; whether any went.
    fn release_late(&mut self, hold: Duration) -> bool {
        let mut any = false;
        while self.held.front().is_some_and(|(_, t)| t.elapsed() >= hold) {
            if let Some((h, _)) = self.held.pop_front() {
                self.send(h);
                any = true;
            }
        }
        any
    }

    /// Forwards one frame; a full TX ring drops it (counted as lost: the relay is a bad
    /// network, not a buffer).
    fn send(&mut self, m: Mbuf) {
        match self.tx.send(m) {
            Ok(()) => self.counts.forwarded += 1,
            Err(_) => self.counts.lost += 1,
        }
    }
}
