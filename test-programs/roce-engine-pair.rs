//! roce-engine-pair: the engine runtime over two real DPDK ports of one process (net_af_packet
//! on the two ends of a veth pair): two engines (two "hosts") with N shards each in `core`
//! progress, the shard threads pinned on the given cores, then the verified workload of
//! `sim::verify` (QPs over every shard, SEND / WRITE-imm / READ / fetch-add, data
//! checked, disconnect). Used by `tests/dpdk_engine.rs`.
//!
//! `--queues Q` gives each port Q queue pairs (net_af_packet `qpairs=Q`); with at least one per
//! shard, shard i receives and transmits on queue pair i (the kernel's fanout hash spreads RX
//! over the queues, and each shard forwards what belongs to another), otherwise all shards
//! share queue pair 0 through shard 0.
//!
//! `--capture PATH` makes engine A capture every frame it sends and receives
//! (`EngineConfig::capture`: PATH itself with one shard, `<stem>.shard<i>.<ext>` with several).
//!
//! ```text
//! roce-engine-pair IFACE_A IFACE_B [--shards N] [--qps N] [--cores 0,1] [--queues Q]
//!                  [--capture PATH]
//! ```
//! Prints `RESULT ...` lines (per shard, and per port queue: `RESULT engine=a queue=0
//! ipackets=.. opackets=..`); exit 0 when everything verified.

use dpdk_roce::config::Progress;
use dpdk_roce::dpdk::{DpdkFrameIo, Eal, EalArgs, Port, PortConfig};
use dpdk_roce::engine::runtime::{Engine, EngineConfig, EventSink};
use dpdk_roce::host::{Host, HostConfig};
use dpdk_roce::mem::vec_memory::VecMemory;
use dpdk_roce::net::NetConfig;
use dpdk_roce::wire::ethernet::EthernetAddress;
use roce_sim::verify;
use std::net::Ipv4Addr;
use std::process::ExitCode;

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = <Args as clap::Parser>::parse();
    // A prefix of our own, and its runtime directory removed whatever happens.
    let prefix = format!("roce-engine-pair-{}", std::process::id());
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

/// The command line (see the module doc).
#[derive(clap::Parser, Debug)]
#[command(
    name = "roce-engine-pair",
    about = "two engines over two real DPDK ports"
)]
struct Args {
    /// Engine A's interface.
    iface_a: String,
    /// Engine B's interface.
    iface_b: String,
    /// Shards (poll threads) per engine.
    #[arg(long, default_value_t = 2)]
    shards: usize,
    /// Connections.
    #[arg(long, default_value_t = 64)]
    qps: usize,
    /// Cores of the poll threads, comma-separated.
    #[arg(long, default_value = "0,1", value_delimiter = ',')]
    cores: Vec<usize>,
    /// Queue pairs per port (net_af_packet qpairs), 1..=16.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    queues: u16,
    /// Engine A captures every frame it sends and receives to this pcap file.
    #[arg(long)]
    capture: Option<std::path::PathBuf>,
}

fn run(args: &Args, prefix: &str) -> Result<(), String> {
    let (ia, ib) = (&args.iface_a, &args.iface_b);
    let shards = args.shards.max(1);
    let qps = args.qps;
    let queues = args.queues;
    let cores = args.cores.clone();
    let eal_args = EalArgs::new(
        &cores
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
    )
    .no_huge(512)
    .file_prefix(prefix)
    .arg("--no-shconf")
    .log_level("warning")
    .vdev(&format!("net_af_packet0,iface={ia},qpairs={queues}"))
    .vdev(&format!("net_af_packet1,iface={ib},qpairs={queues}"));
    let eal = Eal::init(&eal_args.to_args()).map_err(|e| format!("EAL: {e}"))?;
    let cfg = PortConfig {
        rx_queues: queues,
        tx_queues: queues,
        ..PortConfig::default()
    };
    let pa = Port::open(eal, "net_af_packet0", &cfg).map_err(|e| e.to_string())?;
    let pb = Port::open(eal, "net_af_packet1", &cfg).map_err(|e| e.to_string())?;
    let (ip_a, ip_b) = (Ipv4Addr::new(10, 78, 0, 1), Ipv4Addr::new(10, 78, 0, 2));
    let hosts = |port: &Port, ip, seed: u64| -> Result<Vec<Host<VecMemory>>, String> {
        let mac = EthernetAddress(port.mac().map_err(|e| e.to_string())?);
        (0..shards)
            .map(|i| {
                Host::new(
                    HostConfig {
                        net: NetConfig::new(mac, ip, 24),
                        ca_guid: 0x0200_00ff_fe00_0000 | seed,
                        seed: seed * 31 + i as u64,
                        qpns: dpdk_roce::host::QpnPolicy::Random,
                        cm: Default::default(),
                    },
                    VecMemory::new(),
                )
                .map_err(|e| e.to_string())
            })
            .collect()
    };
    // Both engines share the cores: shard i of each on cores[i % len]. Idle threads pause
    // briefly so four pollers on two vCPUs all make progress.
    let config = EngineConfig {
        progress: Progress::Core,
        poll_cores: (0..shards).map(|i| cores[i % cores.len()]).collect(),
        idle_pause_us: 20,
        idle_polls_before_pause: 256,
        ..EngineConfig::default()
    };
    // One queue pair per shard when there are enough, else queue pair 0 shared.
    let ios = |port: &Port| -> Result<Vec<DpdkFrameIo>, String> {
        let n = if usize::from(queues) >= shards {
            shards
        } else {
            1
        };
        (0..n)
            .map(|q| DpdkFrameIo::on_queue(eal, port, q as u16, 4095).map_err(|e| e.to_string()))
            .collect()
    };
    let (io_a, io_b) = (ios(&pa)?, ios(&pb)?);
    let a = Engine::new(
        EngineConfig {
            capture: args.capture.clone(),
            ..config.clone()
        },
        hosts(&pa, ip_a, 0xa)?,
        io_a,
        EventSink::new(1024),
    )
    .map_err(|e| e.to_string())?;
    let b = Engine::new(config, hosts(&pb, ip_b, 0xb)?, io_b, EventSink::new(1024))
        .map_err(|e| e.to_string())?;
    println!("READY shards={shards} qps={qps} queues={queues} cores={cores:?} prefix={prefix}");
    let side = |e| verify::Side {
        engine: e,
        events: EventSink::new(16384),
        requests: EventSink::new(1024),
    };
    let (sa, sb) = (side(&a), side(&b));
    let r = verify::run(&sa, &sb, ip_b, 7471, qps)?;
    println!(
        "RESULT connections={} completions_a={} completions_b={} bytes_verified={}",
        r.connections, r.completions_a, r.completions_b, r.bytes_verified
    );
    for (name, e) in [("a", &a), ("b", &b)] {
        for s in 0..shards {
            let st = e.stats(s).map_err(|e| e.to_string())?;
            println!(
                "RESULT engine={name} shard={s} pinned={} rx={} tx={} forwarded={} arp_copies={} \
                 from_inbox={} relayed={} dropped={} transitions={} overflows={}",
                st.pinned,
                st.shard.rx_frames,
                st.shard.tx_frames,
                st.io.forwarded,
                st.io.arp_copies,
                st.io.from_inbox,
                st.io.relayed_out,
                st.io.dropped,
                st.worker.transitions_applied,
                st.worker.evd_overflows
            );
        }
        let port = if name == "a" { &pa } else { &pb };
        for q in 0..queues {
            let qs = port
                .queue_stats(q)
                .map_err(|e| e.to_string())?
                .unwrap_or_default();
            println!(
                "RESULT engine={name} queue={q} ipackets={} opackets={}",
                qs.ipackets, qs.opackets
            );
        }
        let async_events: Vec<_> = std::iter::from_fn(|| e.async_sink().queue.pop()).collect();
        if !async_events.is_empty() {
            return Err(format!("engine {name}: async events {async_events:?}"));
        }
    }
    drop((sa, sb));
    drop(a);
    drop(b);
    println!("RESULT done");
    Ok(())
}
