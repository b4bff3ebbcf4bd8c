//! scripts/bench-compare.sh: the raw floor and the RDMA WRITE ping-pong run in alternation; the
//! script prints every run, each variant's medians and the WRITE/raw ratio, refuses bad
//! arguments, and leaves the machine as it found it. No timing is asserted (bench/README.md has
//! the figures). Runs over net_memif (no interface needed) and over net_af_packet on a veth pair
//! of its own with the sockperf baseline; needs root for hugepages, veths and namespaces.

mod scripts_common;
use scripts_common::*;

const LAT: &str = env!("CARGO_BIN_EXE_roce-lat");

fn hugepages() -> String {
    std::fs::read_to_string("/proc/sys/vm/nr_hugepages")
        .expect("nr_hugepages")
        .trim()
        .to_string()
}

/// The number after `key` in `line`.
fn value(line: &str, key: &str) -> f64 {
    line.split(key)
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.trim_end_matches('x').parse().ok())
        .unwrap_or_else(|| panic!("no number after {key:?} in {line:?}"))
}

/// One bench-compare run at a time: each reserves hugepages when there are none and gives them
/// back when it ends, which would pull them from under another run still going (outside
/// scripts/test.sh, which holds them for the whole suite).
static ONE_RUN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `  VARIANT median p50 X  median p99 Y ...` -> (X, Y).
fn median(stdout: &str, v: &str) -> (f64, f64) {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(v) && l.contains("median p50"))
        .unwrap_or_else(|| panic!("no median line for {v}:\n{stdout}"));
    (value(line, "median p50"), value(line, "median p99"))
}

#[test]
fn memif_rounds_print_medians_and_the_ratio() {
    require_root();
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let before = hugepages();
    // The memif server's socket file (dpdk-config/memif-server.toml) outlives the server.
    let sock = std::path::Path::new("/run/dpdk-roce/memif0.sock");
    let sock_before = sock.exists();
    let env = [
        ("ROCE_LAT", LAT),
        ("ROUNDS", "2"),
        ("ITERS", "200"),
        ("WARMUP", "50"),
    ];
    let stdout = run_ok("bench-compare.sh", &["memif"], &env);
    for r in [
        "round 1 raw",
        "round 1 write",
        "round 2 raw",
        "round 2 write",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(r)),
            "no {r:?} line:\n{stdout}"
        );
    }
    let (raw50, raw99) = median(&stdout, "raw");
    let (w50, w99) = median(&stdout, "write");
    assert!(raw50 > 0.0 && raw50 <= raw99, "{stdout}");
    assert!(w50 > 0.0 && w50 <= w99, "{stdout}");
    let ratio_line = stdout
        .lines()
        .find(|l| l.contains("ratio write/raw"))
        .unwrap_or_else(|| panic!("no ratio line:\n{stdout}"));
    let ratio = value(ratio_line, "median p50s:");
    assert!(
        (ratio - w50 / raw50).abs() < 0.01,
        "ratio {ratio} is not {w50}/{raw50}"
    );
    // `--with-raw` rounds: WRITE and raw echo in one run, and the median of their ratios.
    for r in ["round 1 write+raw", "round 2 write+raw"] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(r))
            .unwrap_or_else(|| panic!("no {r:?} line:\n{stdout}"));
        assert!(value(line, "ratio") > 0.0, "{line}");
    }
    let (i50, i99) = median(&stdout, "write+raw");
    let (ir50, ir99) = median(&stdout, "raw+write");
    assert!(
        i50 > 0.0 && i50 <= i99 && ir50 > 0.0 && ir50 <= ir99,
        "{stdout}"
    );
    let one_run = stdout
        .lines()
        .find(|l| l.contains("in one run"))
        .unwrap_or_else(|| panic!("no one-run ratio line:\n{stdout}"));
    assert!(value(one_run, "median") > 0.0, "{one_run}");
    assert_eq!(hugepages(), before, "hugepages left as they were");
    assert_eq!(
        sock.exists(),
        sock_before,
        "the memif socket file {} is left as it was",
        sock.display()
    );
}

/// `round N VARIANT: p50 X us, p99 Y us` -> (X, Y).
fn round(stdout: &str, r: u32, v: &str) -> (f64, f64) {
    let head = format!("round {r} {v}:");
    let line = stdout
        .lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no {head:?} line:\n{stdout}"));
    (value(line, "p50"), value(line, "p99"))
}

#[test]
fn af_packet_rounds_count_the_rounds_below_sockperf() {
    require_root();
    let _one = ONE_RUN.lock().unwrap_or_else(|e| e.into_inner());
    let before = hugepages();
    // A veth pair of this test's own, made and removed by the script.
    let prefix = format!("bc{}", pid_tag());
    let (end_a, end_b) = (format!("{prefix}a"), format!("{prefix}b"));
    assert!(!link_exists(&end_a) && !link_exists(&end_b));
    let _down = Guard(|| {
        let _ = cmd("ip", &["link", "del", "dev", &end_a]);
    });
    let env = [
        ("ROCE_LAT", LAT),
        ("ROUNDS", "2"),
        ("ITERS", "300"),
        ("WARMUP", "50"),
        ("SOCKPERF", "1"),
        ("SOCKPERF_TIME", "1"),
        ("VETH_PREFIX", prefix.as_str()),
    ];
    let stdout = run_ok("bench-compare.sh", &["af_packet"], &env);
    // Every round ran the three variants; recount the rounds the script says were below.
    let (mut below50, mut below99) = (0, 0);
    for r in 1..=2 {
        let (raw50, raw99) = round(&stdout, r, "raw");
        let (w50, w99) = round(&stdout, r, "write");
        let (s50, s99) = round(&stdout, r, "sockperf");
        assert!(raw50 > 0.0 && raw50 <= raw99, "{stdout}");
        assert!(w50 > 0.0 && w50 <= w99, "{stdout}");
        assert!(s50 > 0.0 && s50 <= s99, "{stdout}");
        below50 += u32::from(w50 < s50);
        below99 += u32::from(w99 < s99);
    }
    let count = stdout
        .lines()
        .find(|l| l.contains("below sockperf in the same round"))
        .unwrap_or_else(|| panic!("no sockperf count line:\n{stdout}"));
    assert!(
        count.contains(&format!(
            "p50 in {below50} of 2 rounds, p99 in {below99} of 2"
        )),
        "{count} (recounted: p50 {below50}, p99 {below99})"
    );
    let (s50, s99) = median(&stdout, "sockperf");
    assert!(s50 > 0.0 && s50 <= s99, "{stdout}");
    assert!(
        !link_exists(&end_a) && !link_exists(&end_b),
        "veth pair removed"
    );
    let netns = String::from_utf8_lossy(&cmd("ip", &["netns", "list"]).stdout).to_string();
    assert!(!netns.contains("skp"), "sockperf namespaces left: {netns}");
    assert_eq!(hugepages(), before, "hugepages left as they were");
}

#[test]
fn bad_arguments_are_refused() {
    require_root();
    let out = run("bench-compare.sh", &["bogus"], &[("ROCE_LAT", LAT)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("usage"),
        "{}",
        text(&out)
    );
    let out = run(
        "bench-compare.sh",
        &["memif"],
        &[("ROCE_LAT", LAT), ("SOCKPERF", "1")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = run(
        "bench-compare.sh",
        &["memif"],
        &[("ROCE_LAT", LAT), ("ROUNDS", "two")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = run(
        "bench-compare.sh",
        &["af_packet"],
        &[("ROCE_LAT", LAT), ("VETH_PREFIX", "far-too-long-prefix")],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("VETH_PREFIX"),
        "{}",
        text(&out)
    );
}
