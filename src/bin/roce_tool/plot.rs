//! `roce-tool plot FILE.hgrm... -o OUT.svg|png`: the percentile distribution of latency
//! histograms (roce-lat's `--hgrm-dir` files, or any HdrHistogram `.hgrm`), overlaid;
//! `--log-latency` puts latency on a logarithmic axis.

use clap::Args;
use roce_perf::hgrm;
use roce_perf::plot::{percentiles, Distribution, LatencyAxis};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct PlotArgs {
    /// `.hgrm` files, one line each (named after the file).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The picture to write: .svg or .png.
    #[arg(short = 'o', long)]
    output: PathBuf,
    /// The title (default: "Latency by percentile").
    #[arg(long, default_value = "Latency by percentile")]
    title: String,
    /// A logarithmic latency axis (default: linear from zero), for tails far above the median.
    #[arg(long)]
    log_latency: bool,
}

pub fn run(args: &PlotArgs) -> ExitCode {
    let mut series = Vec::new();
    for f in &args.files {
        let read = std::fs::read_to_string(f)
            .map_err(|e| e.to_string())
            .and_then(|t| hgrm::parse(&t));
        match read {
            Ok(points) => series.push(Distribution {
                name: f
                    .file_stem()
                    .map_or_else(|| f.display().to_string(), |s| s.to_string_lossy().into()),
                points,
            }),
            Err(e) => {
                eprintln!("roce-tool plot: {}: {e}", f.display());
                return ExitCode::FAILURE;
            }
        }
    }
    let axis = if args.log_latency {
        LatencyAxis::Log
    } else {
        LatencyAxis::Linear
    };
    match percentiles(&args.output, &args.title, &series, axis) {
        Ok(()) => {
            println!("wrote {}", args.output.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("roce-tool plot: {e}");
            ExitCode::FAILURE
        }
    }
}
