//! The captures `roce-tool simulate --pcap` writes are standard RoCEv2: tshark decodes every
//! frame as InfiniBand over UDP 4791 without a malformed frame or an error-level expert note,
//! with IPv4 checksums checked, and every frame carries a valid ICRC (`roce-tool decode`).
//! Needs tshark (scripts/setup.sh installs it); fails loudly without it.

use std::path::PathBuf;
use std::process::Command;

const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");

/// Payload heuristics that misfire on arbitrary SEND payloads (docs/REFERENCE-rocev2.md).
const HEURISTICS_OFF: [&str; 4] = [
    "rpcrdma_infiniband",
    "iser_infiniband",
    "nvme_rdma",
    "smb_direct_infiniband",
];

struct TempPcap(PathBuf);

impl TempPcap {
    fn new(name: &str) -> Self {
        TempPcap(std::env::temp_dir().join(format!("dpdk-roce-{}-{name}.pcap", std::process::id())))
    }
}

impl Drop for TempPcap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn tshark(args: &[&str]) -> String {
    let out = Command::new("tshark")
        .args(args)
        .output()
        .expect("tshark must be installed (bash scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "tshark {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tshark output is UTF-8")
}

fn simulate_and_check(name: &str, sim_args: &[&str]) {
    let pcap = TempPcap::new(name);
    let path = pcap.0.to_str().unwrap();
    let out = Command::new(TOOL)
        .arg("simulate")
        .args(sim_args)
        .args(["--pcap", path])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "simulate {sim_args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("verified"), "{stdout}");
    let written: usize = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("capture: "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("simulate reports the frames it captured");
    assert!(written > 10, "{stdout}");

    let mut base = vec!["-r", path, "-o", "ip.check_checksum:TRUE"];
    for h in HEURISTICS_OFF {
        base.extend(["--disable-heuristic", h]);
    }

    // Every frame is InfiniBand over UDP.
    let mut a = base.clone();
    a.extend(["-T", "fields", "-e", "frame.protocols"]);
    let protos = tshark(&a);
    let lines: Vec<&str> = protos.lines().collect();
    assert_eq!(lines.len(), written, "tshark sees every frame");
    for l in &lines {
        assert!(
            l.starts_with("eth:ethertype:ip:udp:infiniband"),
            "not RoCEv2: {l}"
        );
    }

    // No malformed frame, no error-level expert info, no bad IP checksum.
    let mut a = base.clone();
    a.extend([
        "-Y",
        "_ws.malformed || _ws.expert.severity >= 8388608 || ip.checksum.status == 0",
    ]);
    let bad = tshark(&a);
    assert!(bad.trim().is_empty(), "tshark flags frames:\n{bad}");

    // And every ICRC is valid.
    let out = Command::new(TOOL).args(["decode", path]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "decode found bad frames:\n{text}");
    let summary = text.lines().last().unwrap();
    assert!(
        summary.contains(&format!("rocev2: {written}, valid: {written}")),
        "{summary}"
    );
}

#[test]
fn mixed_workload_under_loss_decodes_cleanly_in_tshark() {
    simulate_and_check(
        "mixed",
        &[
            "--workload",
            "mixed",
            "--count",
            "60",
            "--size",
            "3000",
            "--loss",
            "0.05",
        ],
    );
}

#[test]
fn atomics_and_immediates_decode_cleanly_in_tshark() {
    simulate_and_check("atomic", &["--workload", "atomic", "--count", "20"]);
    simulate_and_check(
        "write-imm",
        &[
            "--workload",
            "write-imm",
            "--count",
            "10",
            "--size",
            "5000",
            "--mtu",
            "256",
        ],
    );
}

#[test]
fn zero_byte_and_psn_wrap_decode_cleanly_in_tshark() {
    simulate_and_check(
        "zero",
        &["--workload", "mixed", "--count", "14", "--size", "0"],
    );
    simulate_and_check(
        "wrap",
        &[
            "--workload",
            "send",
            "--count",
            "20",
            "--size",
            "4096",
            "--start-psn",
            "0xfffff8",
        ],
    );
}

#[test]
fn simulate_rejects_bad_arguments() {
    for args in [
        &["--mtu", "1000"][..],
        &["--loss", "1.5"],
        &["--workload", "nonsense"],
        &["--depth", "0"],
    ] {
        let out = Command::new(TOOL)
            .arg("simulate")
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(!out.stderr.is_empty(), "{args:?}: no error message");
    }
}

/// The check above can fail: a damaged capture (bad IP checksum, truncated MAD) is flagged.
#[test]
fn the_tshark_check_flags_damaged_frames() {
    use dpdk_roce::capture::PcapCapture;
    use dpdk_roce::time::Instant;
    use pcap_file::pcap::PcapReader;

    let good = TempPcap::new("good-src");
    let out = Command::new(TOOL)
        .args([
            "simulate",
            "--count",
            "4",
            "--pcap",
            good.0.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let bytes = std::fs::read(&good.0).unwrap();
    let mut r = PcapReader::new(&bytes[..]).unwrap();
    let first = r.next_packet().unwrap().unwrap().data.into_owned();

    let damaged = TempPcap::new("damaged");
    let mut cap = PcapCapture::create(&damaged.0).unwrap();
    cap.write(Instant::ZERO, &first).unwrap();
    let mut bad_sum = first.clone();
    bad_sum[14 + 10] ^= 0xff;
    cap.write(Instant::ZERO, &bad_sum).unwrap();
    cap.write(Instant::ZERO, &first[..60]).unwrap();
    cap.finish().unwrap();

    let path = damaged.0.to_str().unwrap();
    let flagged = tshark(&[
        "-r",
        path,
        "-o",
        "ip.check_checksum:TRUE",
        "-Y",
        "_ws.malformed || _ws.expert.severity >= 8388608 || ip.checksum.status == 0",
        "-T",
        "fields",
        "-e",
        "frame.number",
    ]);
    assert_eq!(flagged.split_whitespace().collect::<Vec<_>>(), ["2", "3"]);
    let out = Command::new(TOOL).args(["decode", path]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "decode marks the damaged frames"
    );
}
