//! The verified workloads of the in-memory harness over two real DPDK ports of one process
//! (`roce-dpdk-pair`), over net_af_packet (veth pair), net_memif and net_tap (tc mirred): ARP,
//! CM, SEND / WRITE / WRITE-imm / READ / atomics from 0 B to 1 MiB with every byte and
//! completion checked, many connections at once, disconnect of all and reconnect. The capture
//! of the af_packet run must decode with valid ICRCs.
//! Needs root (veth, taps) and DPDK (scripts/setup.sh); fails loudly otherwise.

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::{retry_fanout_collision, Veth};
use std::path::PathBuf;
use std::process::Command;

fn pair() -> std::path::PathBuf {
    test_program("roce-dpdk-pair")
}
const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");

#[test]
fn every_operation_64_qps_and_reconnect_over_two_af_packet_ports() {
    let veth = Veth::up("p");
    let pcap = std::env::temp_dir().join(format!("dpdk-roce-pair-{}.pcap", std::process::id()));
    let out = retry_fanout_collision(|| {
        Command::new(pair())
            .arg("af-packet")
            .arg(veth.end('a'))
            .arg(veth.end('b'))
            .arg("--pcap")
            .arg(&pcap)
            .output()
            .unwrap()
    });
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "roce-dpdk-pair failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let workloads = text
        .lines()
        .filter(|l| l.starts_with("RESULT workload="))
        .count();
    assert_eq!(workloads, 6 * 7, "every kind at every size\n{text}");
    for line in [
        "RESULT round=0 connections=64 verified",
        "RESULT round=0 disconnected=64",
        "RESULT round=1 connections=64 verified",
        "RESULT round=1 disconnected=64",
    ] {
        assert!(text.contains(line), "missing {line:?}\n{text}");
    }
    assert!(
        text.contains("RESULT workload=read size=1048576 ops=2 bytes=2097152"),
        "{text}"
    );
    let out = Command::new(TOOL)
        .arg("decode")
        .arg(&pcap)
        .output()
        .unwrap();
    let decoded = String::from_utf8_lossy(&out.stdout);
    let summary = decoded.lines().last().unwrap_or_default().to_string();
    let _ = std::fs::remove_file(&pcap);
    assert!(out.status.success(), "bad frames in the capture: {summary}");
    assert!(
        decoded.contains("CM DREQ") && decoded.contains("CM DREP"),
        "{summary}"
    );
    assert!(decoded.contains("ATOMIC"), "{summary}");
}

/// Every workload line, both rounds of `qps` connections, the 1 MiB READ.
fn check_results(text: &str, qps: usize) {
    let workloads = text
        .lines()
        .filter(|l| l.starts_with("RESULT workload="))
        .count();
    assert_eq!(workloads, 6 * 7, "every kind at every size\n{text}");
    for round in 0..2 {
        for line in [
            format!("RESULT round={round} connections={qps} verified"),
            format!("RESULT round={round} disconnected={qps}"),
        ] {
            assert!(text.contains(&line), "missing {line:?}\n{text}");
        }
    }
    assert!(
        text.contains("RESULT workload=read size=1048576 ops=2 bytes=2097152"),
        "{text}"
    );
    assert!(text.contains("RESULT done"), "{text}");
}

#[test]
fn every_operation_and_many_qps_over_net_memif() {
    let sock = std::env::temp_dir().join(format!("dpdk-roce-memif-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let out = Command::new(pair())
        .arg("memif")
        .arg(&sock)
        .args(["--qps", "64"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&sock);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "roce-dpdk-pair memif failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    check_results(&text, 64);
}

#[test]
fn every_operation_and_many_qps_over_net_tap_joined_by_tc_mirred() {
    let n = std::process::id() % 100_000;
    let (ta, tb) = (format!("drt{n}a"), format!("drt{n}b"));
    // The taps appear when the DPDK process starts; the script waits for them, then joins them.
    let mut attach = Command::new("bash")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/tap-mirred.sh"))
        .args(["attach", &ta, &tb])
        .env("TAP_WAIT", "30")
        .spawn()
        .unwrap();
    let out = Command::new(pair())
        .args(["tap", &ta, &tb, "--qps", "32"])
        .output()
        .unwrap();
    let attached = attach.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(attached.success(), "tap-mirred attach failed");
    assert!(
        out.status.success(),
        "roce-dpdk-pair tap failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    check_results(&text, 32);
}
