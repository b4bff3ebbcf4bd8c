//! The engine runtime over real DPDK ports: two net_af_packet ports on the two ends of a veth
//! pair (created here), one engine each with two shards in `core` progress, threads pinned on
//! cores 0 and 1, 64 QPs spread over both shards (shard 0 receives and forwards by QPN, shard 1
//! transmits through shard 0: these PMDs have one queue pair), every operation's data checked
//! (`roce-engine-pair`). DPDK's EAL is once per process, so the test runs it as its own process.
//! Needs root (veth) and DPDK (scripts/setup.sh); fails loudly otherwise.

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::{decode_all_valid, os_args, run_two_port_bin, tshark_clean};

fn bin() -> std::path::PathBuf {
    test_program("roce-engine-pair")
}

/// The result line of `qps` connections of the verified workload (`roce_sim::verify::SPEC`:
/// each operation of the mixed workload twice; 3 of its 7 operations consume a receive).
fn verified(qps: usize) -> String {
    let count = roce_sim::verify::SPEC.count;
    format!(
        "RESULT connections={qps} completions_a={} completions_b={}",
        count * qps,
        count * 3 / 7 * qps
    )
}

#[test]
fn two_shards_in_core_mode_over_two_af_packet_ports_64_qps_verified() {
    let text = run_two_port_bin(
        &bin(),
        "e",
        &os_args(&["--shards", "2", "--qps", "64", "--cores", "0,1"]),
    );
    assert!(text.contains(&verified(64)), "{text}");
    for engine in ["a", "b"] {
        for shard in 0..2 {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("RESULT engine={engine} shard={shard} ")))
                .unwrap_or_else(|| panic!("no stats of {engine}/{shard}\n{text}"));
            assert!(line.contains("pinned=true"), "{line}");
            assert!(line.contains("overflows=0"), "{line}");
            if shard == 1 {
                assert!(
                    !line.contains("from_inbox=0 "),
                    "shard 1 got frames: {line}"
                );
                assert!(!line.contains("relayed=0 "), "shard 1 sent frames: {line}");
            }
        }
    }
    assert!(text.contains("RESULT done"), "{text}");
}

/// A field `key=N` of a `RESULT` line.
fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

/// One RX/TX queue pair per shard: each port has `qpairs=2`, shard i polls queue pair i. The
/// kernel's PACKET_FANOUT hash, not the QPN, picks the RX queue, so each shard forwards what
/// belongs to the other; each transmits on its own queue (no relay through shard 0).
#[test]
fn two_shards_each_on_its_own_queue_pair_64_qps_verified() {
    let text = run_two_port_bin(
        &bin(),
        "q",
        &os_args(&[
            "--shards", "2", "--queues", "2", "--qps", "64", "--cores", "0,1",
        ]),
    );
    assert!(text.contains("queues=2"), "{text}");
    assert!(text.contains(&verified(64)), "{text}");
    let line = |prefix: String| {
        text.lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no line {prefix}\n{text}"))
            .to_string()
    };
    let mut forwarded = 0;
    for engine in ["a", "b"] {
        for shard in 0..2 {
            let l = line(format!("RESULT engine={engine} shard={shard} "));
            assert!(l.contains("pinned=true"), "{l}");
            assert_eq!(field(&l, "overflows"), 0, "{l}");
            // Every shard sends on its own queue: nothing relayed through shard 0.
            assert_eq!(field(&l, "relayed"), 0, "{l}");
            assert!(field(&l, "tx") > 0, "{l}");
            forwarded += field(&l, "forwarded");
        }
        for queue in 0..2 {
            // The port's own per-queue counters: both queues carried frames both ways.
            let l = line(format!("RESULT engine={engine} queue={queue} "));
            assert!(field(&l, "opackets") > 0, "{l}");
            assert!(field(&l, "ipackets") > 0, "{l}");
        }
    }
    assert!(forwarded > 0, "no frame crossed shards:\n{text}");
    assert!(text.contains("RESULT done"), "{text}");
}

/// The engine's capture (`EngineConfig::capture`, from `engine.capture` / DPDK_ROCE_CAPTURE):
/// two shards on their own queue pairs write one file each (`<stem>.shard<i>.pcap`); both
/// pass tshark and every RoCEv2 frame in them has a valid ICRC; together they hold the whole
/// verified workload (CM and the data of 16 QPs).
#[test]
fn engine_capture_writes_one_clean_pcap_per_shard() {
    let dir = std::env::temp_dir().join(format!("dpdk-roce-engine-cap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("a.pcap");
    let mut args = os_args(&[
        "--shards",
        "2",
        "--queues",
        "2",
        "--qps",
        "16",
        "--cores",
        "0,1",
        "--capture",
    ]);
    args.push(base.as_os_str());
    let text = run_two_port_bin(&bin(), "c", &args);
    assert!(text.contains("RESULT connections=16"), "{text}");
    assert!(!base.exists(), "several shards: no unsuffixed file");
    let mut rocev2 = 0;
    for shard in 0..2 {
        let pcap = dir.join(format!("a.shard{shard}.pcap"));
        assert!(pcap.exists(), "{} missing", pcap.display());
        tshark_clean(&pcap);
        let n = decode_all_valid(&pcap);
        assert!(n > 0, "shard {shard} captured no RoCEv2 frame");
        rocev2 += n;
    }
    // Engine A's frames: what its shards sent plus what they received (each frame once).
    let sent_and_received: u64 = (0..2)
        .map(|s| {
            let l = text
                .lines()
                .find(|l| l.starts_with(&format!("RESULT engine=a shard={s} ")))
                .unwrap();
            field(l, "tx") + field(l, "rx")
        })
        .sum();
    assert!(
        rocev2 > 16 * 6 && rocev2 <= sent_and_received,
        "rocev2 {rocev2}, frames {sent_and_received}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
