//! scripts/sockperf-baseline.sh: it prints sockperf's percentiles in one summary line, and it
//! leaves nothing behind — namespaces, veth ends and the busy-poll sysctls are undone after a
//! run and after a run that fails. No timing is asserted (bench/README.md has the figures).
//! Needs root and sockperf (scripts/setup.sh).

mod scripts_common;
use scripts_common::*;

fn sysctl(name: &str) -> String {
    let out = cmd("sysctl", &["-n", name]);
    assert!(out.status.success(), "sysctl {name}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The namespaces and veth ends the run announced.
fn announced(stdout: &str) -> (Vec<String>, Vec<String>) {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sockperf-baseline: namespaces "))
        .unwrap_or_else(|| panic!("no namespaces line:\n{stdout}"));
    let (ns, veth) = line.split_once(", veth ").expect("veth part");
    let (veth, sg) = veth
        .split_once(", scatter-gather ")
        .expect("scatter-gather part");
    // Scatter-gather as scripts/veth.sh sets it for the DPDK pair (off by default).
    assert_eq!(sg, "off", "{line}");
    let ns = ns.split_whitespace().map(String::from).collect();
    let veth = veth.split('/').map(String::from).collect();
    (ns, veth)
}

fn assert_nothing_left(stdout: &str) {
    let (ns, veth) = announced(stdout);
    assert_eq!(ns.len(), 2, "{stdout}");
    let list = String::from_utf8_lossy(&cmd("ip", &["netns", "list"]).stdout).to_string();
    for n in &ns {
        assert!(
            !list.split_whitespace().any(|w| w == n),
            "namespace {n} left: {list}"
        );
    }
    for v in &veth {
        assert!(!link_exists(v), "interface {v} left");
    }
}

#[test]
fn baseline_prints_percentiles_and_leaves_nothing_behind() {
    require_root();
    let before = (sysctl("net.core.busy_read"), sysctl("net.core.busy_poll"));
    let out = run("sockperf-baseline.sh", &[], &[("SOCKPERF_TIME", "1")]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("warning"),
        "{}",
        text(&out)
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("sockperf-baseline: size 14 B, half RTT"))
        .unwrap_or_else(|| panic!("no summary line:\n{stdout}"));
    let value = |key: &str| -> f64 {
        summary
            .split(&format!("{key} "))
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {summary}"))
    };
    let (p50, p99) = (value("p50"), value("p99"));
    assert!(p50 > 0.0 && p50 <= p99, "{summary}");
    assert!(stdout.contains("percentile 50.000"), "{stdout}");
    assert_nothing_left(&stdout);
    assert_eq!(
        (sysctl("net.core.busy_read"), sysctl("net.core.busy_poll")),
        before,
        "busy-poll sysctls restored"
    );

    // A run that fails half-way (sockperf refuses 8-byte messages) undoes everything too.
    let out = run("sockperf-baseline.sh", &[], &[("SOCKPERF_SIZE", "8")]);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!out.status.success(), "{}", text(&out));
    assert_nothing_left(&stdout);
    assert_eq!(
        (sysctl("net.core.busy_read"), sysctl("net.core.busy_poll")),
        before,
        "busy-poll sysctls restored after a failure"
    );
}
