//! `roce-tool`: command-line tools around the dpdk-roce stack. Each subcommand lives in its own
//! file under `src/bin/roce_tool/`.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[path = "roce_tool/dat_conf.rs"]
mod dat_conf;
#[path = "roce_tool/decode.rs"]
mod decode;
#[path = "roce_tool/plot.rs"]
mod plot;
#[path = "roce_tool/relay.rs"]
mod relay;
#[path = "roce_tool/simulate.rs"]
mod simulate;
#[path = "roce_tool/stats.rs"]
mod stats;

#[derive(Parser, Debug)]
#[command(name = "roce-tool", version, about = "dpdk-roce tools")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Print a one-line summary of every frame of a pcap capture and check every RoCEv2 frame
    /// (exit 0: all RoCEv2 frames valid, 1: some are bad, 2: the file cannot be read).
    Decode(decode::DecodeArgs),
    /// Connect two endpoints in memory through the IB CM and run a verified workload over a
    /// simulated wire with loss, duplication, reordering and corruption.
    Simulate(simulate::SimulateArgs),
    /// Forward Ethernet frames between two interfaces with seeded loss, duplication,
    /// reordering and bit flips (an impaired network for tests; the kernel has no netem).
    Relay(relay::RelayArgs),
    /// Plot the percentile distribution of .hgrm latency histograms (several overlaid) to an
    /// SVG or PNG file.
    Plot(plot::PlotArgs),
    /// Print a dat.conf (DAT 2.0 registry) with one entry per profile: IA name
    /// `<prefix><profile name>`, the provider library's and the profile's absolute paths.
    DatConf(dat_conf::DatConfArgs),
    /// Print the counters of a running dpdk-roce process (port, ARP and drops, CM, each QP)
    /// from its DPDK telemetry socket (exit 2 when there is no such process or it went away).
    Stats(stats::StatsArgs),
}

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    match Cli::parse().command {
        Command::Decode(args) => decode::run(&args),
        Command::Simulate(args) => simulate::run(&args),
        Command::Relay(args) => relay::run(&args),
        Command::Plot(args) => plot::run(&args),
        Command::DatConf(args) => dat_conf::run(&args),
        Command::Stats(args) => stats::run(&args),
    }
}
