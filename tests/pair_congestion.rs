//! Congestion control between two hosts over the simulated wire (frames in, frames out, the
//! virtual clock), through a switch-like bottleneck A -> B of 300 Mbit/s that marks ECN-capable
//! frames congestion experienced above 16 KiB of queue (`roce_sim::link::Bottleneck`):
//! ECT(0) data, CE marks, B's CNPs (annex A17.9.3: DSCP 48, not ECN-capable, BECN, to A's QP)
//! and A's DCQCN cuts, seen in the frames and the counters; without DCQCN the queue stands.

use dpdk_roce::cc::{CcConfig, CcMode, DcqcnParams};
use dpdk_roce::decode::summarize;
use roce_sim::link::{Bottleneck, LinkConfig, Side};
use roce_sim::pair::{ConnSpec, Pair};
use roce_sim::workload::{run_workload, WorkloadKind, WorkloadSpec};

struct Run {
    link: roce_sim::link::LinkStats,
    /// Decoded frames A sent and B sent.
    from_a: Vec<String>,
    from_b: Vec<String>,
    a: dpdk_roce::cc::CcStats,
    b: dpdk_roce::cc::CcStats,
    retransmits: u64,
}

fn run(mode: CcMode) -> Run {
    run_capturing(mode, None)
}

/// [`run`], with every frame in a pcap file at `pcap` when given.
fn run_capturing(mode: CcMode, pcap: Option<&std::path::Path>) -> Run {
    let link = LinkConfig {
        bottleneck: Some(Bottleneck {
            rate_bps: 300_000_000,
            queue_bytes: 1 << 20,
            mark_at_bytes: Some(16 * 1024),
        }),
        ..LinkConfig::clean()
    };
    let mut pair = Pair::new(link);
    let cc = CcConfig {
        mode,
        dcqcn: DcqcnParams {
            ai_bps: 1_000_000,
            hai_bps: 10_000_000,
            ..DcqcnParams::default()
        },
        ..CcConfig::default()
    };
    for h in [&mut pair.a, &mut pair.b] {
        h.set_congestion(cc);
        h.set_ecn(2).unwrap();
    }
    let conn = pair.connect(&ConnSpec::default()).unwrap();
    if let Some(p) = pcap {
        pair.capture_to(p).unwrap();
    }
    pair.record(true);
    let w = WorkloadSpec {
        kind: WorkloadKind::Write,
        size: 65536,
        count: 150,
        depth: 8,
        ..WorkloadSpec::default()
    };
    let report = run_workload(&mut pair, conn, &w).expect("verified WRITEs");
    assert_eq!(report.ops, w.count);
    if pcap.is_some() {
        pair.finish_capture().unwrap();
    }
    let mut from_a = Vec::new();
    let mut from_b = Vec::new();
    for (side, frame) in pair.take_recorded() {
        let s = summarize(&frame);
        assert!(s.is_valid(), "{s}");
        match side {
            Side::A => from_a.push(s.to_string()),
            Side::B => from_b.push(s.to_string()),
        }
    }
    let cc_of = |h: &roce_sim::endpoint::Endpoint, qpn| h.qp(qpn).unwrap().congestion().stats;
    Run {
        link: pair.link.stats(),
        from_a,
        from_b,
        a: cc_of(&pair.a, conn.qpn_a),
        b: cc_of(&pair.b, conn.qpn_b),
        retransmits: report.qp.retransmits,
    }
}

/// tshark (Wireshark's RoCEv2 dissector, not ours) reads the same capture: the CNPs with
/// their opcode, DSCP 48 and Not-ECT, the data ECT(0).
fn tshark_sees_cnps_and_ecn(pcap: &std::path::Path, cnps: u64) {
    let out = std::process::Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-T", "fields"])
        .args([
            "-e",
            "infiniband.bth.opcode",
            "-e",
            "ip.dsfield.dscp",
            "-e",
            "ip.dsfield.ecn",
        ])
        .output()
        .expect("tshark must be installed (bash scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
    let cnp_rows: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == "129").collect();
    assert_eq!(cnp_rows.len() as u64, cnps, "{text}");
    assert!(
        cnp_rows.iter().all(|r| r[1] == "48" && r[2] == "0"),
        "{cnp_rows:?}"
    );
    // RDMA WRITE First, Middle, Last (opcodes 6, 7, 8).
    let write = |r: &&Vec<&str>| matches!(r[0], "6" | "7" | "8");
    let writes = |ecn: &str| rows.iter().filter(write).filter(|r| r[2] == ecn).count();
    // The capture is of frames as sent (the bottleneck marks them after).
    assert!(writes("2") > 0 && writes("0") == 0, "ECT(0) WRITEs: {text}");
}

#[test]
fn marked_frames_draw_cnps_and_dcqcn_drains_the_queue() {
    let pcap = std::env::temp_dir().join(format!("pair-congestion-{}.pcap", std::process::id()));
    let on = run_capturing(CcMode::Dcqcn, Some(&pcap));
    tshark_sees_cnps_and_ecn(&pcap, on.b.cnps_sent);
    let _ = std::fs::remove_file(&pcap);
    // A's RoCEv2 frames leave ECT(0); some reach B marked CE.
    assert!(
        on.from_a.iter().all(|f| f.contains("ecn=ECT(0)")),
        "{:?}",
        &on.from_a[..3]
    );
    assert!(on.link.ce_marked > 0);
    assert_eq!(on.link.queue_drops, 0);
    // B: one CNP per QP per 50 us of marks at most, each as ConnectX sends it.
    let cnps: Vec<&String> = on.from_b.iter().filter(|f| f.contains(" CNP ")).collect();
    assert!(!cnps.is_empty());
    assert_eq!(cnps.len() as u64, on.b.cnps_sent);
    assert!(on.b.cnps_sent < on.b.ce_marks, "{:?}", on.b);
    assert!(
        cnps.iter()
            .all(|c| c.contains("dscp=48") && !c.contains("ecn=") && c.contains("PSN=0 BECN")),
        "{}",
        cnps[0]
    );
    // A: every CNP taken, the rate cut, nothing lost or sent twice.
    assert_eq!(on.a.cnps_received, on.b.cnps_sent);
    assert!(on.a.rate_cuts > 0 && on.a.paced_waits > 0, "{:?}", on.a);
    assert_eq!(on.retransmits, 0);

    // The same without DCQCN: the marks and CNPs are the same kind, A ignores them and the
    // queue stands: its frames wait several times longer at the bottleneck.
    let off = run(CcMode::Off);
    assert!(
        off.a.cnps_ignored > 0 && off.a.rate_cuts == 0,
        "{:?}",
        off.a
    );
    let mean = |r: &Run| r.link.queueing_ns / r.link.queued_frames.max(1);
    println!(
        "mean queueing: dcqcn {} us, off {} us; CNPs {} / {}",
        mean(&on) / 1000,
        mean(&off) / 1000,
        on.b.cnps_sent,
        off.b.cnps_sent
    );
    assert!(
        mean(&on) * 3 < mean(&off),
        "{} vs {}",
        mean(&on),
        mean(&off)
    );
}
