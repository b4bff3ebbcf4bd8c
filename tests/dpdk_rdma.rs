//! RDMA over real DPDK ports: two processes (`roce-lat --verify`) on the two ends of a veth pair
//! through net_af_packet connect through the IB CM (after ARP), then run RDMA WRITE, SEND and
//! RDMA READ from 2 B to 8 MiB with every byte of every message checked; the client's capture
//! of the whole exchange must pass tshark and `roce-tool decode`.
//! Needs root (veth pair) and DPDK: scripts/setup.sh installs DPDK; it fails loudly otherwise.

mod dpdk_common;

use dpdk_common::{
    assert_no_runtime_dirs, output_text, provider_lib, repo, retry_fanout_collision, Veth,
};
use std::path::{Path, PathBuf};
use std::process::Command;

const LAT: &str = env!("CARGO_BIN_EXE_roce-lat");
const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");

/// A shipped af_packet profile moved onto this test's interfaces, without hugepages.
fn profile(dir: &Path, side: char, veth: &Veth, capture: Option<&Path>) -> PathBuf {
    let text = std::fs::read_to_string(repo().join(format!("dpdk-config/af_packet-{side}.toml")))
        .unwrap()
        .replace(&format!("rocev0{side}"), &format!("{}{side}", veth.prefix))
        .replace("hugepages = true", "hugepages = false\nmemory_mb = 512")
        .replace(
            &format!("name = \"af_packet-{side}\""),
            &format!("name = \"{}{side}\"", veth.prefix),
        );
    let mut text = text;
    if let Some(c) = capture {
        text = text.replace(
            "[engine]",
            &format!("[engine]\ncapture = \"{}\"", c.display()),
        );
    }
    let p = dir.join(format!("af_packet-{side}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// A veth pair for one test (`tag`), a fresh directory `dpdk-roce-<name>-<pid>` and the two
/// af_packet profiles in it.
fn veth_and_profiles(tag: &str, name: &str) -> (Veth, PathBuf, PathBuf, PathBuf) {
    let veth = Veth::up(tag);
    let dir = std::env::temp_dir().join(format!("dpdk-roce-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let a = profile(&dir, 'a', &veth, None);
    let b = profile(&dir, 'b', &veth, None);
    (veth, dir, a, b)
}

/// Runs the server/client pair (scripts/run-pair.sh) over the af_packet profiles.
fn run_pair(a: &Path, b: &Path, extra: &[&str]) -> String {
    run_pair_at(a, b, "10.77.0.1", extra)
}

/// Runs the server/client pair with the server at `server_ip`; a fanout collision is retried.
fn run_pair_at(a: &Path, b: &Path, server_ip: &str, extra: &[&str]) -> String {
    let out = retry_fanout_collision(|| {
        Command::new("bash")
            .arg(repo().join("scripts/run-pair.sh"))
            .arg(LAT)
            .arg(a)
            .arg(b)
            .args(["--server-ip", server_ip, "--timeout-ms", "20000"])
            .args(extra)
            .env("RUN_PAIR_TIMEOUT", "240")
            .output()
            .unwrap()
    });
    let text = output_text(&out);
    assert!(out.status.success(), "roce-lat pair failed:\n{text}");
    text
}

/// The `--stages` line of `who` for `size` bytes.
fn stages_line(text: &str, who: &str, size: usize) -> String {
    let head = format!("stages {who} {size} B: ");
    text.lines()
        .find(|l| l.starts_with(&head))
        .unwrap_or_else(|| panic!("no `{head}` line\n{text}"))
        .to_string()
}

/// The count in parentheses after stage `stage` of a `--stages` line ("build 120 ns/frame (3
/// frames)" -> 3).
fn stage_count(line: &str, stage: &str) -> u64 {
    line.split(&format!("{stage} "))
        .nth(1)
        .and_then(|s| s.split('(').nth(1))
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {stage} count in {line}"))
}

fn table_sizes(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let size = w.next()?.parse().ok()?;
            let iters: usize = w.next()?.parse().ok()?;
            (iters > 0 && l.split_whitespace().count() == 9).then_some(size)
        })
        .collect()
}

/// The first `name: N` counter in a run's output (the client's end-of-run summary).
fn counter(text: &str, name: &str) -> u64 {
    text.split(&format!("{name}: "))
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name} counter\n{text}"))
}

#[test]
fn write_send_read_from_2_bytes_to_8_mib_with_data_verified_over_af_packet() {
    let veth = Veth::up("r");
    let dir = std::env::temp_dir().join(format!("dpdk-roce-rdma-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("client.pcap");
    let a = profile(&dir, 'a', &veth, None);
    let b = profile(&dir, 'b', &veth, Some(&pcap));
    // `--sweep` (perftest's -a): every power of two from 2 B to 8 MiB, whatever --size says.
    let all: Vec<usize> = (1..=23).map(|s| 1usize << s).collect();
    for op in ["write", "send", "read"] {
        let text = run_pair(
            &a,
            &b,
            &[
                "--op",
                op,
                "--sweep",
                "--size",
                "64",
                "--iters",
                "3",
                "--warmup",
                "1",
                "--verify",
                "--stages",
                "--hgrm-dir",
            ]
            .iter()
            .copied()
            .chain([dir.join("hgrm").to_str().unwrap()])
            .collect::<Vec<_>>(),
        );
        assert_eq!(
            table_sizes(&text),
            all,
            "{op}: one table row per size\n{text}"
        );
        assert!(text.contains("server done"), "{text}");
        // `--stages`: the client timed its loop for every size; its frames were built by the
        // stack (an 8 MiB message is many).
        for size in &all {
            let line = stages_line(&text, "client", *size);
            assert!(stage_count(&line, "build") >= 3, "{op} {size} B: {line}");
        }
        if op != "read" {
            let line = stages_line(&text, "server", 2);
            assert!(stage_count(&line, "handle") >= 3, "{op} server: {line}");
            // The ACK rides the answer: each of the 3 timed round trips cost the server one
            // transmit burst, its ACK of the client's message and its own message in it.
            assert_eq!(
                (stage_count(&line, "flush"), stage_count(&line, "build")),
                (3, 6),
                "{op} server: one burst per answer, the ACK in it: {line}"
            );
        }
        // The checked region table and the zero-copy transmit path are in the benchmark: the
        // client's large payloads left as external buffers.
        assert!(text.contains("heap MR, zero-copy TX >= "), "{text}");
        let zero_copy = counter(&text, "tx_zero_copy");
        if op != "read" {
            assert!(zero_copy > 0, "{op}: no zero-copy frame\n{text}");
        }
        // Header prediction took the server's single-packet WRITEs on the client (every byte
        // verified above): RDMA WRITE Only frames in sequence.
        let predicted = counter(&text, "rx_predicted");
        // And on send: nearly all of the client's WRITE Only frames below the zero-copy
        // threshold (2 to 512 B, 4 posts each: 36) were written by the send side's fast path
        // (one may wait behind a response that must leave first).
        let tx_predicted = counter(&text, "tx_predicted");
        if op == "write" {
            assert!(
                predicted >= 10 * 4,
                "{op}: {predicted} frames predicted\n{text}"
            );
            assert!(
                tx_predicted >= 8 * 4,
                "{op}: {tx_predicted} frames sent predicted\n{text}"
            );
        } else {
            assert_eq!(predicted, 0, "{op}: no WRITE Only arrives\n{text}");
            assert_eq!(tx_predicted, 0, "{op}: no WRITE Only leaves\n{text}");
        }
    }
    // The capture of the last run (READ): standard RoCEv2 with valid ICRCs, CM and ARP included.
    let out = Command::new(TOOL)
        .arg("decode")
        .arg(&pcap)
        .output()
        .unwrap();
    let decoded = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "decode found bad frames:\n{decoded}");
    assert!(
        decoded.contains("CM REQ") && decoded.contains("CM RTU"),
        "CM exchange captured"
    );
    assert!(
        decoded.contains("RDMA READ response"),
        "READ responses captured"
    );
    let summary = decoded.lines().last().unwrap();
    let rocev2: u64 = summary
        .split("rocev2: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap();
    assert!(rocev2 > 1000, "{summary}");
    assert!(summary.contains(&format!("valid: {rocev2}")), "{summary}");
    let tshark = Command::new("tshark")
        .arg("-r")
        .arg(&pcap)
        .args(["-o", "ip.check_checksum:TRUE", "-Y"])
        .arg("_ws.malformed || _ws.expert.severity >= 8388608 || ip.checksum.status == 0")
        .output()
        .expect("tshark (scripts/setup.sh installs it)");
    assert!(tshark.status.success());
    let flagged = String::from_utf8_lossy(&tshark.stdout);
    assert!(flagged.trim().is_empty(), "tshark flags frames:\n{flagged}");
    let _ = std::fs::remove_dir_all(&dir);
    assert_no_runtime_dirs(&veth.prefix);
}

#[test]
fn raw_echo_floor_runs_over_the_same_ports() {
    let (_veth, dir, a, b) = veth_and_profiles("w", "raw");
    let hg = dir.join("hgrm");
    let text = run_pair(
        &a,
        &b,
        &[
            "--raw",
            "--size",
            "8",
            "--iters",
            "200",
            "--warmup",
            "20",
            "--json",
            "--stages",
            "--hgrm-dir",
            hg.to_str().unwrap(),
        ],
    );
    assert_eq!(table_sizes(&text), vec![8], "{text}");
    // `--stages` over the measured iterations: at least one frame out and one back each (the
    // kernel may add a stray frame of its own; a lost frame is sent again).
    let line = stages_line(&text, "client", 8);
    assert!(stage_count(&line, "rx_io") >= 200, "{line}");
    assert!(stage_count(&line, "build") >= 200, "{line}");
    let hgrm = std::fs::read_to_string(hg.join("raw_l2_echo-8B.hgrm")).unwrap();
    assert!(hgrm.contains("Total count    =          200"), "{hgrm}");
    let json = text
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("--json line");
    let v: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(v["rows"][0]["iterations"], 200);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--with-raw`: one run measures RDMA WRITE and, before each of its iterations, a raw L2
/// echo through the same shard (a raw channel beside the stack); every WRITE is verified, both
/// tables, both hdrhistograms and a ratio line come out per size, and the server echoed every
/// raw frame (none dropped on the client's side).
#[test]
fn raw_echo_interleaved_with_rdma_write_in_one_run() {
    let (veth, dir, a, b) = veth_and_profiles("i", "rawi");
    let hg = dir.join("hgrm");
    let text = run_pair(
        &a,
        &b,
        &[
            "--with-raw",
            "--verify",
            "--sweep",
            "--iters",
            "100",
            "--warmup",
            "10",
            "--json",
            "--hgrm-dir",
            hg.to_str().unwrap(),
        ],
    );
    // With a raw echo the sweep ends at 1 KiB, the largest frame within a 1500-byte MTU.
    let sizes = [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
    let mut both = sizes.to_vec();
    both.extend(sizes);
    assert_eq!(
        table_sizes(&text),
        both,
        "an RDMA table, then a raw one:\n{text}"
    );
    for size in sizes {
        for test in ["rdma_write", "raw_l2_echo"] {
            let h = std::fs::read_to_string(hg.join(format!("{test}-{size}B.hgrm"))).unwrap();
            assert!(
                h.contains("Total count    =          100"),
                "{test} {size}: {h}"
            );
        }
        let ratio = text
            .lines()
            .find(|l| l.starts_with(&format!("ratio RDMA_Write/Raw_L2_Echo {size} B: p50 ")))
            .unwrap_or_else(|| panic!("no ratio line for {size} B:\n{text}"));
        let x: f64 = ratio
            .split_whitespace()
            .nth(5)
            .unwrap()
            .trim_end_matches('x')
            .parse()
            .unwrap();
        assert!(x.is_finite() && x > 0.0, "{ratio}");
    }
    let json: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(json.len(), 2, "{text}");
    assert_eq!(
        (json[0]["raw"].as_bool(), json[1]["raw"].as_bool()),
        (Some(false), Some(true))
    );
    let stats = text
        .lines()
        .find(|l| l.starts_with("raw channel: "))
        .expect("the client's raw channel counters");
    let received: u64 = stats
        .split("received: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .expect(stats);
    assert!(received >= 6 * 110, "{stats}");
    assert!(stats.contains("dropped: 0,"), "{stats}");
    let _ = std::fs::remove_dir_all(&dir);
    assert_no_runtime_dirs(&veth.prefix);
}

/// The shipped net_memif profile of `role` on this test's own socket, without hugepages,
/// named `<name>-<role>`.
fn memif_profile(dir: &Path, name: &str, role: &str) -> PathBuf {
    let text = std::fs::read_to_string(repo().join(format!("dpdk-config/memif-{role}.toml")))
        .unwrap()
        .replace(
            "/run/dpdk-roce/memif0.sock",
            dir.join("memif.sock").to_str().unwrap(),
        )
        .replace("hugepages = true", "hugepages = false\nmemory_mb = 512")
        .replace(
            &format!("name = \"memif-{role}\""),
            &format!("name = \"{name}-{role}\""),
        );
    let p = dir.join(format!("memif-{role}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// A net_memif pair ends in order (dpdk-config/README.md, "Ending a net_memif pair"): in a
/// `--raw` run the server echoes the client's end frame, in an RDMA run it answers the DREQ,
/// and then it stops polling until the client has gone (the memif link goes down) instead of
/// polling while the client's exit unmaps the shared rings. Each run ends with the server's
/// `server done`, the client's table, and neither side giving up on the other.
#[test]
fn memif_pairs_end_in_order_raw_write_and_write_with_raw() {
    let dir = std::env::temp_dir().join(format!("dpdk-roce-memif-end-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = memif_profile(&dir, "memif-end", "server");
    let client = memif_profile(&dir, "memif-end", "client");
    for mode in [
        &["--raw"][..],
        &["--op", "write"],
        &["--op", "write", "--with-raw"],
    ] {
        let mut args = vec!["--size", "8", "--iters", "300", "--warmup", "30"];
        args.extend_from_slice(mode);
        let text = run_pair_at(&server, &client, "10.77.3.1", &args);
        assert!(text.contains("server done"), "{mode:?}:\n{text}");
        assert_eq!(table_sizes(&text).first(), Some(&8), "{mode:?}:\n{text}");
        for gave_up in ["still there", "did not echo the end frame"] {
            assert!(!text.contains(gave_up), "{mode:?}: {gave_up}:\n{text}");
        }
    }
    assert_no_runtime_dirs("memif-end-");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The lone completion (`--op write-completion`: post one WRITE, wait for its completion, the
/// server passive) through the Rust API, and the client through the DAT C API (`--api dat`:
/// libdat2 loading the provider through a dat.conf of the test's own) for the WRITE
/// ping-pong, READ and the lone completion, and through the DAT-shaped Rust API
/// (`--api dat-rust`) for READ and the lone completion, against the same Rust server over
/// net_memif.
#[test]
fn lone_write_completion_and_the_dat_api_client_over_memif() {
    let dir = std::env::temp_dir().join(format!("dpdk-roce-lat-dat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = memif_profile(&dir, "memif-latdat", "server");
    let client = memif_profile(&dir, "memif-latdat", "client");
    let text = run_pair_at(
        &server,
        &client,
        "10.77.3.1",
        &[
            "--op",
            "write-completion",
            "--size",
            "64",
            "--iters",
            "300",
            "--warmup",
            "30",
        ],
    );
    assert!(
        text.contains("RDMA_Write_Completion Latency Test"),
        "{text}"
    );
    assert!(text.contains("full round trip"), "{text}");
    assert_eq!(table_sizes(&text), [64], "{text}");
    let conf = dir.join("dat.conf");
    std::fs::write(
        &conf,
        format!(
            "latdat u2.0 nonthreadsafe default {} dapl.2.0 \"{}\" \"\"\n",
            provider_lib().display(),
            client.display()
        ),
    )
    .unwrap();
    // The pair with the client's API arguments: 64 B, 300 iterations after 30 of warm-up.
    let lat_pair = |api: &[&str], op: &str, more: &[&str]| {
        let out = Command::new("bash")
            .arg(repo().join("scripts/run-pair.sh"))
            .arg(LAT)
            .arg(&server)
            .arg(&client)
            .args(["--server-ip", "10.77.3.1", "--timeout-ms", "20000"])
            .args(api)
            .args([
                "--op", op, "--size", "64", "--iters", "300", "--warmup", "30",
            ])
            .args(more)
            .env("DAT_OVERRIDE", &conf)
            .env("RUN_PAIR_TIMEOUT", "240")
            .output()
            .unwrap();
        (out.status.success(), output_text(&out))
    };
    for op in ["write", "read", "write-completion"] {
        let (ok, text) = lat_pair(&["--api", "dat", "--ia", "latdat"], op, &["--stages"]);
        assert!(ok, "--api dat --op {op}:\n{text}");
        assert!(text.contains("IA latdat through libdat2"), "{op}:\n{text}");
        assert!(text.contains("server done"), "{op}:\n{text}");
        assert_eq!(table_sizes(&text), [64], "{op}:\n{text}");
        // `--stages` through DAT: the client's calls timed, a completing dequeue where a
        // completion is awaited (the ping-pong's WRITEs are suppressed).
        let stages = text
            .lines()
            .find(|l| l.starts_with("stages client 64 B (DAT): post "))
            .unwrap_or_else(|| panic!("{op}: no DAT stages line:\n{text}"));
        let ns = |what: &str| -> u64 {
            stages
                .split(what)
                .nth(1)
                .and_then(|r| r.split(" ns").next())
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("{what} in {stages}"))
        };
        assert!(ns("post ") > 0, "{stages}");
        assert_eq!(
            op != "write",
            stages.contains("completing dequeue"),
            "{stages}"
        );
        if op != "write" {
            assert!(ns("completing dequeue ") > 0, "{stages}");
        }
    }
    // The client through the DAT-shaped Rust API (`--api dat-rust`): READ and the lone
    // completion; the ping-pong is refused with a message, before any port is opened.
    for op in ["read", "write-completion"] {
        let (ok, text) = lat_pair(&["--api", "dat-rust"], op, &[]);
        assert!(ok, "--api dat-rust --op {op}:\n{text}");
        assert!(text.contains("through the Rust DAT API"), "{op}:\n{text}");
        assert!(text.contains("server done"), "{op}:\n{text}");
        assert_eq!(table_sizes(&text), [64], "{op}:\n{text}");
    }
    let out = Command::new(LAT)
        .arg("--profile")
        .arg(&client)
        .args(["--client", "--server-ip", "10.77.3.1", "--api", "dat-rust"])
        .args(["--op", "write"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--api dat-rust measures read"),
        "{}",
        output_text(&out)
    );
    assert_no_runtime_dirs("memif-latdat-");
    let _ = std::fs::remove_dir_all(&dir);
}
