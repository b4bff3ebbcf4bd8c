//! roce-hold-qps: a process with many QPs, for tests that read a running process's counters
//! from outside (`tests/telemetry.rs`: `/roce/qps` over more QPs than one answer holds).
//!
//! ```text
//! roce-hold-qps --profile dpdk-config/af_packet-a.toml --eps 1000
//! ```
//! Opens an IA on the profile, creates `--eps` unconnected EPs (a QP each) in one PZ, prints
//! `QPNS <qpn>,<qpn>,...` (decimal, in creation order), then `HOLDING`, and keeps them until its
//! standard input reaches end of file; then closes the IA and exits 0.

use clap::Parser;
use dpdk_roce::config::Profile;
use dpdk_roce::dat::{Ep, Ia, Pz};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser, Debug)]
#[command(
    name = "roce-hold-qps",
    about = "holds an IA with many QPs open until standard input closes"
)]
struct Args {
    /// dpdk-config profile of this process.
    #[arg(long)]
    profile: PathBuf,
    /// EPs (QPs) to create.
    #[arg(long, default_value_t = 1000,
          value_parser = clap::value_parser!(u32).range(1..=16_384))]
    eps: u32,
}

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-hold-qps: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), String> {
    let profile = Profile::load_with_env(&args.profile).map_err(|e| e.to_string())?;
    let ia = Ia::open(&profile).map_err(|e| format!("opening the IA: {e}"))?;
    let held = hold(&ia, args.eps);
    let closed = ia
        .close()
        .map_err(|refused| format!("closing the IA: {}", refused.error));
    held.and(closed)
}

/// Creates `n` EPs, reports their QPNs and holds them until standard input closes.
fn hold(ia: &Ia, n: u32) -> Result<(), String> {
    let pz = Pz::create(ia).map_err(|e| format!("PZ: {e}"))?;
    let eps = (0..n)
        .map(|i| {
            Ep::create(ia, &pz, None, None, None, None, None).map_err(|e| format!("EP {i}: {e}"))
        })
        .collect::<Result<Vec<Ep>, String>>()?;
    let qpns: Vec<String> = eps.iter().map(|e| e.qpn().to_string()).collect();
    let mut out = std::io::stdout().lock();
    writeln!(out, "QPNS {}", qpns.join(","))
        .and_then(|()| writeln!(out, "HOLDING until standard input closes"))
        .and_then(|()| out.flush())
        .map_err(|e| format!("standard output: {e}"))?;
    drop(out);
    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
    Ok(())
}
