//! How long a peer's RDMA READ waits when the target application is away from DAT, with inline
//! progress: two IAs of one process on two ports joined to each other (`--pmd`: net_af_packet on
//! the two ends of a veth pair, net_tap on two taps that scripts/tap-mirred.sh joins, or
//! net_memif client and server on one socket), each with one shard in `inline` progress. IA B, the target, gets `--away-us` (its engine's
//! `away_after_us`, 0: no helper); once connected, the program makes no call on B at all (its
//! application is "away"), and IA A reads 64 bytes of B's memory `--reads` times, one at a time,
//! `--gap-us` apart. Prints the READs' round trips (p50, p99, max), then, with both
//! applications away for `--idle-s` seconds, the CPU time of each engine's `roce-progress`
//! thread and of the whole process, then the target helper's sleep counters
//! (`away_idle_sleeps`, `away_irq_sleeps`, `away_irq_wakes`; docs/DESIGN.md "Progress").
//!
//! ```text
//! bash scripts/veth.sh up prgv
//! cargo run --release --example away_read -- prgva prgvb [--away-us 50] [--reads 2000]
//! cargo run --release --example away_read -- --pmd tap awta awtb &
//!     TAP_WAIT=30 bash scripts/tap-mirred.sh attach awta awtb
//! cargo run --release --example away_read -- --pmd memif /tmp/aw.sock -
//! ```

use dpdk_roce::config::Progress;
use dpdk_roce::dat::{
    ConnectionEventKind, DatEvent, Ep, Evd, EvdFlags, Ia, IaConfig, Lmr, Psp, Pz,
};
use dpdk_roce::dpdk::{DpdkFrameIo, Eal, EalArgs, Port, PortConfig};
use dpdk_roce::engine::runtime::EngineConfig;
use dpdk_roce::mem::access::Access;
use dpdk_roce::transport::types::WcStatus;
use dpdk_roce::wire::ethernet::EthernetAddress;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const T: Option<Duration> = Some(Duration::from_secs(10));
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

#[derive(clap::Parser, Debug)]
#[command(name = "away_read", about = "READ round trips to an away application")]
struct Args {
    /// IA A's interface (the reader); with `--pmd memif`, the socket path.
    iface_a: String,
    /// IA B's interface (the target); unused with `--pmd memif`.
    iface_b: String,
    /// The ports' PMD: af_packet, tap or memif.
    #[arg(long, default_value = "af_packet")]
    pmd: String,
    /// The target engine's `away_after_us` (0: no helper).
    #[arg(long, default_value_t = 50)]
    away_us: u32,
    /// READs to time.
    #[arg(long, default_value_t = 2000)]
    reads: usize,
    /// Pause of the reader between two READs, microseconds.
    #[arg(long, default_value_t = 200)]
    gap_us: u64,
    /// Seconds both applications stay away while the helpers' CPU time is measured.
    #[arg(long, default_value_t = 5)]
    idle_s: u64,
}

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = <Args as clap::Parser>::parse();
    let prefix = format!("away-read-{}", std::process::id());
    let r = run(&args, &prefix);
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("ERROR {e}");
            ExitCode::FAILURE
        }
    }
}

/// Nanoseconds on CPU of each thread of this process named `roce-progress`
/// (/proc/self/task/*/schedstat).
fn helper_cpu_ns() -> Vec<u64> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "roce-progress" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        if let Some(ns) = stat.split_whitespace().next().and_then(|v| v.parse().ok()) {
            out.push(ns);
        }
    }
    out
}

/// Nanoseconds on CPU of the whole process, all threads (/proc/self/task/*/schedstat).
fn process_cpu_ns() -> u64 {
    std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            stat.split_whitespace().next()?.parse::<u64>().ok()
        })
        .sum()
}

fn run(args: &Args, prefix: &str) -> Result<(), String> {
    let (a, b) = (&args.iface_a, &args.iface_b);
    let (vdev_a, vdev_b, name_a, name_b) = match args.pmd.as_str() {
        "af_packet" => (
            format!("net_af_packet0,iface={a}"),
            format!("net_af_packet1,iface={b}"),
            "net_af_packet0",
            "net_af_packet1",
        ),
        "tap" => (
            format!("net_tap0,iface={a}"),
            format!("net_tap1,iface={b}"),
            "net_tap0",
            "net_tap1",
        ),
        "memif" => (
            format!("net_memif0,role=server,socket={a},id=0"),
            format!("net_memif1,role=client,socket={a},id=0"),
            "net_memif0",
            "net_memif1",
        ),
        other => return Err(format!("--pmd {other}: af_packet, tap or memif")),
    };
    let eal_args = EalArgs::new("0,1")
        .no_huge(512)
        .file_prefix(prefix)
        .arg("--no-shconf")
        .log_level("warning")
        .vdev(&vdev_a)
        .vdev(&vdev_b);
    let eal = Eal::init(&eal_args.to_args()).map_err(|e| format!("EAL: {e}"))?;
    let e = |e: dpdk_roce::dat::DatError| e.to_string();
    let open = |name: &str, ip, away_after_us| -> Result<Ia, String> {
        let port = Port::open(eal, name, &PortConfig::default()).map_err(|e| e.to_string())?;
        let mac = EthernetAddress(port.mac().map_err(|e| e.to_string())?);
        let io = DpdkFrameIo::new(eal, &port, 4095).map_err(|e| e.to_string())?;
        Ia::open_with(
            IaConfig {
                mac,
                address: dpdk_roce::config::PortAddresses::v4(ip, 24)
                    .expect("a host address on its prefix"),
                routes: Default::default(),
                congestion: Default::default(),
                mtu: 1500,
                dscp: 0,
                cm: Default::default(),
                shards: 1,
                engine: EngineConfig {
                    progress: Progress::Inline,
                    poll_cores: vec![0],
                    away_after_us,
                    ..EngineConfig::default()
                },
            },
            vec![Box::new(io)],
        )
        .map_err(|e| e.to_string())
    };
    let (ip_a, ip_b) = (Ipv4Addr::new(10, 79, 1, 1), Ipv4Addr::new(10, 79, 1, 2));
    // The reader's own helper is on too (it sees its consumer and stays out of the way).
    let a = open(name_a, ip_a, 50)?;
    let b = open(name_b, ip_b, args.away_us)?;
    let objs = |ia: &Ia| -> Result<(Pz, Evd, Evd, Evd), String> {
        Ok((
            Pz::create(ia).map_err(e)?,
            Evd::create(ia, 256, EvdFlags::DTO).map_err(e)?,
            Evd::create(ia, 64, EvdFlags::CONNECTION).map_err(e)?,
            Evd::create(ia, 64, EvdFlags::CR).map_err(e)?,
        ))
    };
    let (pz_a, dto_a, conn_a, _cr_a) = objs(&a)?;
    let (pz_b, dto_b, conn_b, cr_b) = objs(&b)?;
    let _psp = Psp::create(&b, 45249u16, &cr_b).map_err(e)?;
    let la = Lmr::create(&pz_a, 4096, RW).map_err(e)?;
    let lb = Lmr::create(&pz_b, 4096, RW).map_err(e)?;
    let pattern: Vec<u8> = (0..64u8).map(|i| i ^ 0x5a).collect();
    lb.write(0, &pattern).map_err(e)?;
    let ea = Ep::create(
        &a,
        &pz_a,
        Some(&dto_a),
        Some(&dto_a),
        Some(&conn_a),
        None,
        None,
    )
    .map_err(e)?;
    let eb = Ep::create(
        &b,
        &pz_b,
        Some(&dto_b),
        Some(&dto_b),
        Some(&conn_b),
        None,
        None,
    )
    .map_err(e)?;
    ea.connect(ip_b, 45249u16, b"").map_err(e)?;
    let DatEvent::ConnectionRequest(cr) = cr_b.wait(T, 1).map_err(e)? else {
        return Err("no connection request".into());
    };
    cr.accept(&eb, b"").map_err(e)?;
    for (evd, name) in [(&conn_a, "A"), (&conn_b, "B")] {
        match evd.wait(T, 1).map_err(e)? {
            DatEvent::Connection {
                kind: ConnectionEventKind::Established,
                ..
            } => {}
            other => return Err(format!("{name}: {other:?}")),
        }
    }
    // From here on nothing calls into B.
    let mut rtts = Vec::with_capacity(args.reads);
    for i in 0..args.reads {
        std::thread::sleep(Duration::from_micros(args.gap_us));
        let t0 = Instant::now();
        ea.post_rdma_read(&[la.triplet(0, 64)], &lb.rmr_triplet(0, 64), i as u64)
            .map_err(e)?;
        match dto_a.wait(T, 1) {
            Ok(DatEvent::Dto(d)) if d.status == WcStatus::Success => {}
            other => {
                return Err(format!(
                    "READ {i}: {other:?} (the target's application is away; --away-us {})",
                    args.away_us
                ))
            }
        }
        rtts.push(t0.elapsed());
    }
    if la.read(0, 64).map_err(e)? != pattern {
        return Err("READ data".into());
    }
    rtts.sort();
    let pct = |p: usize| rtts[(rtts.len() * p / 100).min(rtts.len() - 1)].as_secs_f64() * 1e6;
    println!(
        "READ 64 B to an away application, --away-us {}: {} READs, p50 {:.1} us, p99 {:.1} us, max {:.1} us",
        args.away_us,
        rtts.len(),
        pct(50),
        pct(99),
        rtts.last().map_or(0.0, |d| d.as_secs_f64() * 1e6)
    );
    let before = helper_cpu_ns();
    let process_before = process_cpu_ns();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(args.idle_s));
    let after = helper_cpu_ns();
    let process_after = process_cpu_ns();
    let wall = t0.elapsed().as_secs_f64();
    let cpu: Vec<String> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| format!("{:.1} %", (a - b) as f64 / 1e9 / wall * 100.0))
        .collect();
    println!(
        "idle roce-progress threads (both applications away, connection up) over {wall:.1} s: {}; whole process {:.2} %",
        cpu.join(", "),
        (process_after - process_before) as f64 / 1e9 / wall * 100.0
    );
    let w = b.away_stats(0).unwrap_or_default();
    println!(
        "target helper: away_idle_sleeps {} away_irq_sleeps {} away_irq_wakes {}",
        w.away_idle_sleeps, w.away_irq_sleeps, w.away_irq_wakes
    );
    drop((ea, eb));
    Ok(())
}
