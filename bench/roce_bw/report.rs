//! The report: perftest's test-info block and table (`ib_write_bw`'s, character for character:
//! [`roce_perf::perftest`]), one row per size (the two sides' tallies combined), the raw
//! blast's line under it, the JSON file and the plot. Bandwidth is in perftest's units: MB/sec
//! is MiB/s (2^20 bytes), Gb/sec 10^9 bits/s.

use super::{Args, Ctl, Op, Params};
use roce_perf::perftest::{self, BwUnit, RULE};
use roce_perf::plot::SweepPoint;
use serde::Serialize;
use std::time::Duration;

/// What one side measured in the test of one size.
#[derive(Clone, Debug)]
pub(crate) struct Tally {
    /// Messages of its stream, all completed.
    pub sent: u64,
    pub elapsed: Duration,
    /// Its time on the CPU over the test.
    pub cpu_ns: u64,
    /// Its best message rate over a stretch of the run (messages per second).
    pub peak_rate: f64,
    /// Messages each QP completed.
    pub per_qp: Vec<u64>,
}

impl Tally {
    /// Jain's fairness index of the QPs' messages: (sum x)^2 / (n sum x^2), 1 when equal.
    pub fn jain(&self) -> f64 {
        let n = self.per_qp.len() as f64;
        let sum: f64 = self.per_qp.iter().map(|&x| x as f64).sum();
        let sq: f64 = self.per_qp.iter().map(|&x| (x as f64) * (x as f64)).sum();
        if sq == 0.0 {
            return 1.0;
        }
        sum * sum / (n * sq)
    }

    /// `fairness: messages per QP: a,b,...  Jain's index: J` (several QPs, a `-D` run: each
    /// QP sends what it can in the time).
    pub fn fairness_line(&self) -> String {
        let per: Vec<String> = self.per_qp.iter().map(u64::to_string).collect();
        format!(
            "fairness: messages per QP: {}  Jain's index: {:.3}",
            per.join(","),
            self.jain()
        )
    }
}

/// One row of the report.
#[derive(Debug, Serialize)]
pub(crate) struct Row {
    bytes: usize,
    iterations: u64,
    /// Bandwidth in `unit`: MB/sec is MiB/s (2^20 bytes per second), Gb/sec 10^9 bits/s.
    bw_peak: f64,
    bw_average: f64,
    msg_rate_mpps: f64,
    unit: BwUnit,
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
    let scale = |msgs_per_s: f64| unit.of(msgs_per_s * size as f64);
    let directions = if p.bidirectional { 2.0 } else { 1.0 };
    let frames_per_msg = size.div_ceil(pmtu).max(1) as f64;
    let (raw_mpps, raw_bw, f_ratio, bw_ratio) = match raw {
        Some((frames, bytes, ns)) if ns > 0 => {
            let secs = ns as f64 / 1e9;
            let pps = frames as f64 / secs;
            let bw = unit.of(bytes as f64 / secs);
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

/// The table's unit: MB/sec (MiB/s), or Gb/sec with `--report_gbits`.
pub(crate) fn unit(args: &Args) -> BwUnit {
    BwUnit::new(args.report_gbits)
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

/// With `--plot FILE` (.svg or .png): bandwidth (in the table's unit) and message rate
/// against message size.
pub(crate) fn write_plot(args: &Args, p: &Params, rows: &[Row]) -> Result<(), String> {
    let Some(path) = &args.plot else {
        return Ok(());
    };
    let points: Vec<SweepPoint> = rows
        .iter()
        .map(|r| SweepPoint {
            bytes: r.bytes as u64,
            bw: r.bw_average,
            mpps: r.msg_rate_mpps,
        })
        .collect();
    let title = format!(
        "{}, {} QP(s), {} outstanding",
        title(p).trim_start(),
        p.qps,
        p.tx_depth
    );
    roce_perf::plot::sweep(path, &title, unit(args).label(), &points)?;
    eprintln!("plot: {}", path.display());
    Ok(())
}

/// perftest's title of the test: `RDMA_Write BW Test`, `Atomic FETCH_AND_ADD BW Test`, ...
fn title(p: &Params) -> String {
    let atomic = (p.op == Op::Atomic).then_some("FETCH_AND_ADD");
    perftest::bw_title(p.op.label(), atomic, p.bidirectional, p.post_list)
}

/// perftest's test-info block and table header, line for line where perftest has the field
/// (`ctx_print_test_info`); `device`: the profile or the IA; `pmtu`: the path MTU when this
/// side knows it (not through DAT).
pub(crate) fn header(p: &Params, args: &Args, device: &str, pmtu: Option<usize>) -> String {
    let on = |b: bool| if b { "ON" } else { "OFF" };
    let mut lines = vec![
        RULE.to_owned(),
        title(p),
        format!(" Dual-port       : OFF\t\tDevice         : {device}"),
        format!(
            " Number of qps   : {}\t\tTransport type : RoCEv2 (dpdk-roce)",
            p.qps
        ),
        " Connection type : RC\t\tUsing SRQ      : OFF".to_owned(),
        format!(" TX depth        : {}", p.tx_depth),
    ];
    if p.post_list > 1 {
        lines.push(format!(" Post List       : {}", p.post_list));
    }
    lines.push(format!(" CQ Moderation   : {}", p.cq_mod));
    lines.push(match pmtu {
        Some(m) => format!(" Mtu             : {m}[B]"),
        None => " Mtu             : the provider's".to_owned(),
    });
    lines.push(" Link type       : Ethernet".to_owned());
    lines.push(format!(" Verify          : {}", on(p.verify)));
    lines.push(RULE.to_owned());
    let mut h = perftest::bw_header(unit(args));
    if args.cpu_util {
        h.push_str(perftest::CPU_UTIL_HEADER);
    }
    lines.push(h);
    lines.join("\n")
}

/// A row of the table (perftest's columns, with `--cpu_util` this side's CPU use), and under
/// it the raw blast's line when there was one.
pub(crate) fn row_text(r: &Row, cpu_util: bool) -> String {
    let mut t = perftest::bw_row(
        r.bytes as u64,
        r.iterations,
        r.bw_peak,
        r.bw_average,
        r.msg_rate_mpps,
    );
    if cpu_util {
        t.push_str(&perftest::cpu_util_column(r.cpu_client_percent));
    }
    if let (Some(pps), Some(bw), Some(fr), Some(br)) =
        (r.raw_mpps, r.raw_bw, r.rdma_frames_to_raw, r.bw_to_raw)
    {
        t.push_str(&format!(
            "\n   raw L2 {:<6} {:.6} Mpps {:.2} {}; RDMA/raw: frames {:.2}x, BW {:.2}x",
            r.bytes,
            pps,
            bw,
            r.unit.label(),
            fr,
            br
        ));
    }
    t
}
