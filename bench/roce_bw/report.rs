//! The report: perftest's table, one row per size (the two sides' tallies combined), the raw
//! blast beside it, and the JSON file.

use super::{Args, Ctl, Op, Params};
use dpdk_roce::perf::plot::SweepPoint;
use serde::Serialize;
use std::time::Duration;

/// What one side measured in the test of one size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Tally {
    /// Messages of its stream, all completed.
    pub sent: u64,
    pub elapsed: Duration,
    /// Its time on the CPU over the test.
    pub cpu_ns: u64,
    /// Its best message rate over a stretch of the run (messages per second).
    pub peak_rate: f64,
}

/// One row of the report.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    bytes: usize,
    iterations: u64,
    bw_peak: f64,
    bw_average: f64,
    msg_rate_mpps: f64,
    unit: &'static str,
    cpu_client_percent: f64,
    cpu_server_percent: f64,
    /// The raw blast of the same size (with `--raw`): frames per second and the payload
    /// rate in the table's unit, and the RDMA figures as fractions of them.
    raw_mpps: Option<f64>,
    raw_bw: Option<f64>,
    rdma_frames_to_raw: Option<f64>,
    bw_to_raw: Option<f64>,
}

/// The row of a test of `size` bytes: this (client) side's tally and the messages it
/// received and checked (`-b`), the server's `Done`, and the raw blast's (frames, payload
/// bytes, nanoseconds) when there was one.
#[allow(clippy::too_many_arguments)]
pub(crate) fn row(
    args: &Args,
    p: &Params,
    size: usize,
    pmtu: usize,
    mine: &Tally,
    received: u64,
    server_done: Ctl,
    raw: Option<(u64, u64, u64)>,
) -> Result<Row, String> {
    let Ctl::Done {
        sent: s_sent,
        ns: s_ns,
        received: s_received,
        cpu_ns: s_cpu,
    } = server_done
    else {
        return Err(format!("expected DONE, got {server_done:?}"));
    };
    let sent = mine.sent;
    // Every SEND (and, verified, every WRITE) arrived and was checked.
    let counted = matches!(p.op, Op::Send) || (p.op == Op::Write && p.verify);
    if counted && s_received != sent {
        return Err(format!(
            "the server received and checked {s_received} messages of {sent}"
        ));
    }
    // The server's `Done` comes after its every message completed, so after their receives.
    if counted && p.bidirectional && received != s_sent {
        return Err(format!(
            "the client received and checked {received} messages of {s_sent}"
        ));
    }
    let mut rate = sent as f64 / mine.elapsed.as_secs_f64();
    let mut peak_rate = mine.peak_rate.max(rate);
    if p.bidirectional && s_ns > 0 {
        let srate = s_sent as f64 / (s_ns as f64 / 1e9);
        rate += srate;
        peak_rate += srate;
    }
    let unit = unit(args);
    let scale = |msgs_per_s: f64| -> f64 {
        let bytes = msgs_per_s * size as f64;
        if args.report_gbits {
            bytes * 8.0 / 1e9
        } else {
            bytes / 1e6
        }
    };
    let directions = if p.bidirectional { 2.0 } else { 1.0 };
    let frames_per_msg = size.div_ceil(pmtu).max(1) as f64;
    let (raw_mpps, raw_bw, f_ratio, bw_ratio) = match raw {
        Some((frames, bytes, ns)) if ns > 0 => {
            let pps = frames as f64 / (ns as f64 / 1e9);
            let bw = if args.report_gbits {
                bytes as f64 * 8.0 / ns as f64
            } else {
                bytes as f64 * 1e3 / ns as f64
            };
            (
                Some(pps / 1e6),
                Some(bw),
                Some(rate * frames_per_msg / directions / pps),
                Some(scale(rate) / directions / bw),
            )
        }
        _ => (None, None, None, None),
    };
    let percent = |cpu: u64, ns: u64| (100.0 * cpu as f64 / ns.max(1) as f64).min(100.0);
    Ok(Row {
        bytes: size,
        iterations: sent / u64::from(p.qps).max(1),
        bw_peak: scale(peak_rate),
        bw_average: scale(rate),
        msg_rate_mpps: rate / 1e6,
        unit,
        cpu_client_percent: percent(mine.cpu_ns, mine.elapsed.as_nanos() as u64),
        cpu_server_percent: percent(s_cpu, s_ns),
        raw_mpps,
        raw_bw,
        rdma_frames_to_raw: f_ratio,
        bw_to_raw: bw_ratio,
    })
}

pub(crate) fn unit(args: &Args) -> &'static str {
    if args.report_gbits {
        "Gb/sec"
    } else {
        "MB/sec"
    }
}

/// With `--json FILE`: the test and its rows.
pub(crate) fn write_json(
    args: &Args,
    p: &Params,
    pmtu: Option<usize>,
    rows: &[Row],
) -> Result<(), String> {
    let Some(path) = &args.json else {
        return Ok(());
    };
    let s = serde_json::to_string_pretty(&serde_json::json!({
        "test": p.op.label(),
        "api": format!("{:?}", args.api).to_lowercase(),
        "qps": p.qps,
        "tx_depth": p.tx_depth,
        "post_list": p.post_list,
        "cq_mod": p.cq_mod,
        "bidirectional": p.bidirectional,
        "verified": p.verify,
        "pmtu": pmtu,
        "rows": rows,
    }))
    .map_err(|e| e.to_string())?;
    std::fs::write(path, s).map_err(|e| format!("{}: {e}", path.display()))
}

/// With `--plot FILE` (.svg or .png): bandwidth and message rate against message size.
pub(crate) fn write_plot(args: &Args, p: &Params, rows: &[Row]) -> Result<(), String> {
    let Some(path) = &args.plot else {
        return Ok(());
    };
    let points: Vec<SweepPoint> = rows
        .iter()
        .map(|r| SweepPoint {
            bytes: r.bytes as u64,
            gbits: r.msg_rate_mpps * 1e6 * r.bytes as f64 * 8.0 / 1e9,
            mpps: r.msg_rate_mpps,
        })
        .collect();
    let title = format!(
        "{} {}, {} QP(s), {} outstanding",
        p.op.label().replace('_', " "),
        if p.bidirectional {
            "both ways"
        } else {
            "one way"
        },
        p.qps,
        p.tx_depth
    );
    dpdk_roce::perf::plot::sweep(path, &title, &points)?;
    eprintln!("plot: {}", path.display());
    Ok(())
}

/// perftest's header; `pmtu`: the path MTU when this side knows it (not through DAT).
pub(crate) fn print_header(p: &Params, unit: &str, pmtu: Option<usize>) {
    println!("{}", "-".repeat(95));
    println!(
        "                    {} {}BW Test",
        p.op.label().replace('_', " "),
        if p.bidirectional {
            "Bidirectional "
        } else {
            ""
        }
    );
    println!(
        " Number of qps   : {}\t\tTransport type : RoCEv2 (dpdk-roce)",
        p.qps
    );
    println!(
        " TX depth        : {}\t\tPost List      : {}\t\tCQ Moderation : {}",
        p.tx_depth, p.post_list, p.cq_mod
    );
    let mtu = pmtu.map_or("the provider's".to_string(), |m| format!("{m}[B]"));
    println!(" Mtu             : {mtu}\t\tVerify         : {}", p.verify);
    println!("{}", "-".repeat(95));
    println!(
        " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]   CPU client/server[%]"
    );
}

pub(crate) fn print_row(r: &Row) {
    println!(
        " {:<10} {:<14} {:<17.2} {:<20.2} {:<15.6} {:.1}/{:.1}",
        r.bytes,
        r.iterations,
        r.bw_peak,
        r.bw_average,
        r.msg_rate_mpps,
        r.cpu_client_percent,
        r.cpu_server_percent
    );
    if let (Some(pps), Some(bw), Some(fr), Some(br)) =
        (r.raw_mpps, r.raw_bw, r.rdma_frames_to_raw, r.bw_to_raw)
    {
        println!(
            "   raw L2 {:<6} {:.6} Mpps {:.2} {}; RDMA/raw: frames {:.2}x, BW {:.2}x",
            r.bytes, pps, bw, r.unit, fr, br
        );
    }
}
