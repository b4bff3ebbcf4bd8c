//! roce-dpdk-pair: the verified workloads of the in-memory harness, over two real DPDK ports
//! of one process: net_af_packet on the two ends of a veth pair, the server and client ends of
//! one net_memif connection, or two net_tap ports joined by tc mirred. Used by the integration
//! tests (`tests/dpdk_pair.rs`).
//!
//! ```text
//! roce-dpdk-pair af-packet IFACE_A IFACE_B | memif SOCKET | tap TAP_A TAP_B  [--pcap F] [--qps N]
//! ```
//! Connects through the CM (after ARP), runs SEND / SEND-imm / WRITE / WRITE-imm / READ /
//! atomics from 0 B to 1 MiB with every byte and completion checked, then N connections at once
//! (default 64) each moving data, then disconnects them all and reconnects. Prints `RESULT`
//! lines; exit 0 when everything verified.

#[path = "roce_dpdk_pair/pair_wire.rs"]
mod pair_wire;

use dpdk_roce::cm::CmEvent;
use dpdk_roce::dpdk::{DpdkFrameIo, Eal, EalArgs, Port, PortConfig};
use dpdk_roce::wire::ethernet::EthernetAddress;
use pair_wire::DpdkPairWire;
use roce_sim::endpoint::QpOptions;
use roce_sim::pair::{ConnSpec, Pair};
use roce_sim::workload::{run_workload, WorkloadKind, WorkloadSpec};
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = <Cli as clap::Parser>::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("ERROR {e}");
            // The EAL runtime directory of this process (see `run`), also after a failure.
            let _ = std::fs::remove_dir_all(runtime_dir());
            ExitCode::FAILURE
        }
    }
}

/// This process's EAL file prefix.
fn runtime_prefix() -> String {
    format!("roce-dpdk-pair-{}", std::process::id())
}

/// The EAL runtime directory of [`runtime_prefix`].
fn runtime_dir() -> String {
    format!("/var/run/dpdk/{}", runtime_prefix())
}

/// The command line (see the module doc).
#[derive(clap::Parser, Debug)]
#[command(
    name = "roce-dpdk-pair",
    about = "two RoCE hosts over two DPDK ports of one process"
)]
struct Cli {
    #[command(subcommand)]
    link: Link,
    /// Write every frame to this pcap file.
    #[arg(long, global = true)]
    pcap: Option<std::path::PathBuf>,
    /// Connections.
    #[arg(long, global = true, default_value_t = 64)]
    qps: usize,
}

#[derive(clap::Subcommand, Debug)]
enum Link {
    /// net_af_packet on the two ends of a veth pair.
    AfPacket { iface_a: String, iface_b: String },
    /// Server and client of one net_memif connection over SOCKET.
    Memif { socket: String },
    /// Two net_tap ports (the caller joins them: scripts/tap-mirred.sh attach).
    Tap { tap_a: String, tap_b: String },
}

fn run(args: &Cli) -> Result<(), String> {
    let (vdevs, names, label) = match &args.link {
        Link::AfPacket {
            iface_a: a,
            iface_b: b,
        } => (
            vec![
                format!("net_af_packet0,iface={a}"),
                format!("net_af_packet1,iface={b}"),
            ],
            ["net_af_packet0", "net_af_packet1"],
            format!("af_packet {a} {b}"),
        ),
        // Server and client of one memif connection, both in this process.
        Link::Memif { socket: sock } => (
            vec![
                format!("net_memif0,role=server,socket={sock},socket-abstract=no,id=0"),
                format!("net_memif1,role=client,socket={sock},socket-abstract=no,id=0"),
            ],
            ["net_memif0", "net_memif1"],
            format!("memif {sock}"),
        ),
        // Two taps; the caller joins them (scripts/tap-mirred.sh attach) once they exist.
        Link::Tap { tap_a: a, tap_b: b } => (
            vec![format!("net_tap0,iface={a}"), format!("net_tap1,iface={b}")],
            ["net_tap0", "net_tap1"],
            format!("tap {a} {b}"),
        ),
    };
    let qps = args.qps;
    // A prefix of our own: several of these processes may run at once (the tests run three).
    let prefix = runtime_prefix();
    let mut eal_args = EalArgs::new("0")
        .no_huge(512)
        .file_prefix(&prefix)
        .arg("--no-shconf")
        .log_level("warning");
    for v in &vdevs {
        eal_args = eal_args.vdev(v);
    }
    let eal = Eal::init(&eal_args.to_args()).map_err(|e| format!("EAL: {e}"))?;
    let cfg = PortConfig::default();
    let pa = Port::open(eal, names[0], &cfg).map_err(|e| e.to_string())?;
    let pb = Port::open(eal, names[1], &cfg).map_err(|e| e.to_string())?;
    let mac_a = EthernetAddress(pa.mac().map_err(|e| e.to_string())?);
    let mac_b = EthernetAddress(pb.mac().map_err(|e| e.to_string())?);
    let wire = DpdkPairWire {
        a: DpdkFrameIo::new(eal, &pa, 4095).map_err(|e| e.to_string())?,
        b: DpdkFrameIo::new(eal, &pb, 4095).map_err(|e| e.to_string())?,
    };
    let ip_a = Ipv4Addr::new(10, 77, 0, 1);
    let ip_b = Ipv4Addr::new(10, 77, 0, 2);
    let mut pair = Pair::over_real_wire(Box::new(wire), (mac_a, ip_a), (mac_b, ip_b))
        .map_err(|e| e.to_string())?;
    if let Some(p) = &args.pcap {
        pair.capture_to(p.as_ref()).map_err(|e| e.to_string())?;
    }
    println!("READY {label} {mac_a} {mac_b}");

    // Every operation and size on one connection.
    let conn = match pair.connect(&ConnSpec::default()) {
        Ok(c) => c,
        Err(e) => {
            println!(
                "net A: {:?}\nnet B: {:?}",
                pair.a.net_stats(),
                pair.b.net_stats()
            );
            println!("host A: {:?}\nhost B: {:?}", pair.a.stats(), pair.b.stats());
            return Err(format!("connect: {e}"));
        }
    };
    let kinds = [
        WorkloadKind::Send,
        WorkloadKind::Write,
        WorkloadKind::WriteImm,
        WorkloadKind::Read,
        WorkloadKind::Atomic,
        WorkloadKind::Mixed,
    ];
    for kind in kinds {
        for size in [0usize, 1, 1023, 1024, 1025, 65536, 1 << 20] {
            let count = if size >= 1 << 20 { 2 } else { 14 };
            let w = WorkloadSpec {
                kind,
                size,
                count,
                depth: 4,
                sges: if size > 4096 { 3 } else { 1 },
                limit: Duration::from_secs(120),
            };
            let r =
                run_workload(&mut pair, conn, &w).map_err(|e| format!("{kind} {size} B: {e}"))?;
            println!(
                "RESULT workload={kind} size={size} ops={} bytes={} retransmits={}",
                r.ops, r.bytes, r.qp.retransmits
            );
        }
    }

    // Many connections at once, each verified; then disconnect all and reconnect.
    for round in 0..2 {
        let mut conns = Vec::new();
        for i in 0..qps {
            let spec = ConnSpec {
                port: 7000 + round,
                qp_a: QpOptions {
                    sq_depth: 64,
                    rq_depth: 64,
                    ..QpOptions::default()
                },
                qp_b: QpOptions {
                    sq_depth: 64,
                    rq_depth: 64,
                    ..QpOptions::default()
                },
                ..ConnSpec::default()
            };
            let c = pair
                .connect(&spec)
                .map_err(|e| format!("connection {i} (round {round}): {e}"))?;
            conns.push(c);
        }
        for (i, c) in conns.iter().enumerate() {
            let w = WorkloadSpec {
                kind: WorkloadKind::Mixed,
                size: 3000,
                count: 7,
                depth: 2,
                sges: 1,
                limit: Duration::from_secs(60),
            };
            run_workload(&mut pair, *c, &w).map_err(|e| format!("connection {i}: {e}"))?;
        }
        println!("RESULT round={round} connections={} verified", conns.len());
        let now = pair.now();
        for c in &conns {
            pair.a.disconnect(now, c.qpn_a).map_err(|e| e.to_string())?;
        }
        let (mut down_a, mut down_b) = (0, 0);
        pair.run_until(Duration::from_secs(30), |p| {
            while let Some(ev) = p.a.poll_event() {
                if matches!(ev, CmEvent::Disconnected { .. }) {
                    down_a += 1;
                }
            }
            while let Some(ev) = p.b.poll_event() {
                if matches!(ev, CmEvent::Disconnected { .. }) {
                    down_b += 1;
                }
            }
            down_a == conns.len() && down_b == conns.len()
        })
        .map_err(|e| format!("disconnect round {round}: {e} ({down_a}/{down_b} disconnected)"))?;
        for c in &conns {
            let _ = pair.a.destroy_qp(c.qpn_a);
            let _ = pair.b.destroy_qp(c.qpn_b);
        }
        // Flushed completions of the torn-down QPs are gone with them.
        while pair.a.poll_completion().is_some() {}
        while pair.b.poll_completion().is_some() {}
        println!("RESULT round={round} disconnected={}", conns.len());
    }
    let frames = pair.finish_capture().map_err(|e| e.to_string())?;
    println!("RESULT done frames_captured={frames}");
    let _ = std::fs::remove_dir_all(runtime_dir());
    // Leave without tearing the ports down: closing the two ends of one memif connection in
    // one process intermittently failed at exit under load (seen once in ten parallel test
    // runs, after every check had passed); the kernel reclaims everything at exit anyway.
    let _ = std::io::Write::flush(&mut std::io::stdout());
    std::process::exit(0)
}
