//! `roce-tool simulate`: two endpoints in memory connect through the IB CM and run a verified
//! workload over a simulated wire with loss, duplication, reordering and corruption; prints what
//! happened and can write every frame to a pcap.

use clap::Args;
use dpdk_roce::transport::types::Mtu;
use dpdk_roce::wire::psn::Psn;
use roce_sim::link::LinkConfig;
use roce_sim::pair::{ConnSpec, Pair};
use roce_sim::workload::{run_workload, WorkloadKind, WorkloadSpec};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct SimulateArgs {
    /// send, write, write-imm, read, atomic or mixed.
    #[arg(long, default_value = "mixed")]
    workload: WorkloadKind,
    /// Message size in bytes.
    #[arg(long, default_value_t = 4096)]
    size: usize,
    /// Number of operations.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Operations in flight at most.
    #[arg(long, default_value_t = 8)]
    depth: usize,
    /// Scatter/gather entries per buffer (1..=16).
    #[arg(long, default_value_t = 1)]
    sges: usize,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(long, default_value_t = 1024, value_parser = parse_mtu)]
    mtu: u32,
    /// Probability each frame is lost (0..1).
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Probability each frame is duplicated (default: the loss rate).
    #[arg(long)]
    dup: Option<f64>,
    /// Probability each frame is delayed past later ones (default: the loss rate).
    #[arg(long)]
    reorder: Option<f64>,
    /// Probability one bit of a frame is flipped (the receiver's ICRC check must catch it).
    #[arg(long, default_value_t = 0.0)]
    corrupt: f64,
    /// One-way wire delay in microseconds.
    #[arg(long, default_value_t = 2)]
    delay_us: u64,
    /// Seed of the impairments.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// First PSN side A sends (e.g. 0xfffff0 to cross the 2^24 wrap).
    #[arg(long, value_parser = parse_u32)]
    start_psn: Option<u32>,
    /// Write every frame put on the wire to this pcap file.
    #[arg(long)]
    pcap: Option<PathBuf>,
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    let v: u32 = s.parse().map_err(|e| format!("{e}"))?;
    match Mtu::from_bytes_floor(v) {
        Some(m) if m.bytes() == v => Ok(v),
        _ => Err("MTU must be 256, 512, 1024, 2048 or 4096".into()),
    }
}

fn parse_u32(s: &str) -> Result<u32, String> {
    let r = match s.strip_prefix("0x") {
        Some(h) => u32::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("{e}"))
}

fn probability(name: &str, p: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!("--{name} must be within 0..=1, got {p}"))
    }
}

pub fn run(a: &SimulateArgs) -> ExitCode {
    match simulate(a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-tool simulate: {e}");
            ExitCode::from(1)
        }
    }
}

fn simulate(a: &SimulateArgs) -> Result<(), String> {
    let link = LinkConfig {
        delay: Duration::from_micros(a.delay_us),
        loss: probability("loss", a.loss)?,
        duplicate: probability("dup", a.dup.unwrap_or(a.loss))?,
        reorder: probability("reorder", a.reorder.unwrap_or(a.loss))?,
        corrupt: probability("corrupt", a.corrupt)?,
        seed: a.seed,
        ..LinkConfig::default()
    };
    if link.loss >= 1.0 {
        return Err("--loss 1 loses every frame: nothing could connect".into());
    }
    let mut pair = Pair::new(link);
    if let Some(p) = &a.pcap {
        pair.capture_to(p)
            .map_err(|e| format!("{}: {e}", p.display()))?;
    }
    let mut spec = ConnSpec {
        pmtu: Mtu::from_bytes_floor(a.mtu).ok_or("bad MTU")?,
        ..ConnSpec::default()
    };
    if let Some(psn) = a.start_psn {
        spec.psn_a = Psn::new(psn);
        spec.psn_b = Psn::new(psn.wrapping_add(0x10));
    }
    let conn = pair.connect(&spec).map_err(|e| e.to_string())?;
    let w = WorkloadSpec {
        kind: a.workload,
        size: a.size,
        count: a.count,
        depth: a.depth,
        sges: a.sges,
        limit: Duration::from_secs(3600),
    };
    let result = run_workload(&mut pair, conn, &w);
    let frames = pair.finish_capture().map_err(|e| e.to_string())?;
    let r = result.map_err(|e| e.to_string())?;

    let l = pair.link.stats();
    let secs = r.virtual_time.as_secs_f64();
    println!(
        "workload {} size {} count {} depth {} sges {} mtu {}: verified (every message delivered once, in order, intact; every WR completed once)",
        w.kind, w.size, w.count, w.depth, w.sges, a.mtu
    );
    println!(
        "  virtual time {:.3} ms, payload {} bytes, {:.1} Mb/s of virtual goodput",
        secs * 1e3,
        r.bytes,
        if secs > 0.0 {
            r.bytes as f64 * 8.0 / secs / 1e6
        } else {
            0.0
        }
    );
    println!(
        "  wire: sent {} delivered {} lost {} duplicated {} reordered {} corrupted {}",
        l.sent, l.delivered, l.lost, l.duplicated, l.reordered, l.corrupted
    );
    let q = r.qp;
    println!(
        "  qps: packets sent {} received {} retransmits {} duplicates {} acks {}/{} seq-naks {}/{} rnr-naks {}/{} timeouts {}",
        q.packets_sent,
        q.packets_received,
        q.retransmits,
        q.duplicates,
        q.acks_sent,
        q.acks_received,
        q.seq_naks_sent,
        q.seq_naks_received,
        q.rnr_naks_sent,
        q.rnr_naks_received,
        q.timeouts
    );
    for (name, ep) in [("A", &pair.a), ("B", &pair.b)] {
        let n = ep.net_stats();
        let dropped: Vec<String> = n
            .drops()
            .filter(|&(_, c)| c > 0)
            .map(|(r, c)| format!("{r:?}={c}"))
            .collect();
        println!(
            "  port {name} {}: rx {} tx {} dropped [{}] unknown-qp {} cm {:?}",
            ep.config().net.primary_address(),
            n.rx_frames,
            ep.stats().tx_frames,
            dropped.join(" "),
            ep.stats().rx_unknown_qp,
            ep.cm().stats()
        );
    }
    println!("  completions: A {} B {}", r.completions_a, r.completions_b);
    if let Some(p) = &a.pcap {
        println!("  capture: {frames} frames written to {}", p.display());
    }
    Ok(())
}
