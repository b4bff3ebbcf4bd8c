//! roce-bw over real DPDK ports: two processes (scripts/run-pair.sh) over net_af_packet on a veth
//! pair (also through a kernel link that loses frames, scripts/veth-join.sh) and over net_memif,
//! every operation with every byte checked (`--verify`), several and
//! many connections, deep queues, post lists, signal moderation, both directions, `-D`, the
//! raw blast and the JSON report; the client through the DAT C API (libdat2 loading the
//! provider through a dat.conf) against the same server. Needs root (veth pair) and DPDK: scripts/setup.sh installs
//! DPDK; it fails loudly otherwise.

mod dpdk_common;

use dpdk_common::{
    assert_no_runtime_dirs, decode_all_valid, output_text, profile_copy as profile, provider_lib,
    repo, retry_fanout_collision, tshark_clean, Router, Veth,
};
use roce_perf::perftest;
use std::path::{Path, PathBuf};
use std::process::Command;

const BW: &str = env!("CARGO_BIN_EXE_roce-bw");

/// A link to test over: its two profiles, the server's address, and what keeps it up.
struct Link {
    server: PathBuf,
    client: PathBuf,
    server_ip: &'static str,
    _veths: Vec<Veth>,
    dir: PathBuf,
    prefix: String,
}

impl Drop for Link {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn af_packet(tag: &str) -> Link {
    let veth = Veth::up(tag);
    let (a, b) = (veth.end('a'), veth.end('b'));
    af_packet_between(tag, &a, &b, vec![veth])
}

/// Two veth pairs joined inside the kernel by scripts/veth-join.sh, which loses `loss` of the
/// frames each way: provider A [Xa] <-> [Xb] =tc mirred= [Ya] <-> [Yb] provider B. An impairment
/// that is not the provider's code and has no process of its own.
fn lossy_kernel_link(tag: &str, loss: &str) -> Link {
    let (x, y) = (Veth::up(&format!("{tag}x")), Veth::up(&format!("{tag}y")));
    join(&["up", &x.prefix, &y.prefix, loss]);
    let (a, b) = (x.end('a'), y.end('b'));
    af_packet_between(tag, &a, &b, vec![x, y])
}

/// Provider A on 10.77.72.1/24 and provider B on 10.77.73.1/24, two subnets joined by a Linux
/// router in a namespace: A [Xa] <-> [Xb] router [Ya] <-> [Yb] B. Each profile names the
/// router as its gateway (`[roce] gateway`).
fn routed(tag: &str) -> (Link, Router) {
    let (x, y) = (Veth::up(&format!("{tag}x")), Veth::up(&format!("{tag}y")));
    let router = Router::up(
        tag,
        &x.end('b'),
        "10.77.72.254/24",
        &y.end('a'),
        "10.77.73.254/24",
    );
    let prefix = format!("bw{tag}");
    let dir = std::env::temp_dir().join(format!("dpdk-roce-bw-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mk = |side: char, iface: &str, addr: &str, gateway: &str| {
        let routed = format!("address = \"{addr}\"\ngateway = \"{gateway}\"");
        let original = if side == 'a' {
            "10.77.0.1/24"
        } else {
            "10.77.0.2/24"
        };
        profile(
            &dir,
            &format!("af_packet-{side}"),
            &[
                (&format!("rocev0{side}"), iface),
                (&format!("address = \"{original}\""), &routed),
            ],
            &prefix,
        )
    };
    let link = Link {
        server: mk('a', &x.end('a'), "10.77.72.1/24", "10.77.72.254"),
        client: mk('b', &y.end('b'), "10.77.73.1/24", "10.77.73.254"),
        server_ip: "10.77.72.1",
        _veths: vec![x, y],
        dir,
        prefix,
    };
    (link, router)
}

/// The af_packet profiles with the server on interface `a` and the client on `b`; `veths`
/// stay up as long as the link.
fn af_packet_between(tag: &str, a: &str, b: &str, veths: Vec<Veth>) -> Link {
    let prefix = format!("bw{tag}");
    let dir = std::env::temp_dir().join(format!("dpdk-roce-bw-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mk = |side: char, ours: &str| {
        let iface = format!("rocev0{side}");
        profile(
            &dir,
            &format!("af_packet-{side}"),
            &[(&iface, ours)],
            &prefix,
        )
    };
    Link {
        server: mk('a', a),
        client: mk('b', b),
        server_ip: "10.77.0.1",
        _veths: veths,
        dir,
        prefix,
    }
}

/// Runs scripts/veth-join.sh with `args`; its output.
fn join(args: &[&str]) -> String {
    dpdk_common::script("veth-join.sh", args)
}

fn memif(tag: &str) -> Link {
    let prefix = format!("bw{tag}");
    let dir = std::env::temp_dir().join(format!("dpdk-roce-bw-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("memif.sock");
    let sock = sock.to_str().unwrap();
    let mk = |role: &str| {
        profile(
            &dir,
            &format!("memif-{role}"),
            &[("/run/dpdk-roce/memif0.sock", sock)],
            &prefix,
        )
    };
    Link {
        server: mk("server"),
        client: mk("client"),
        server_ip: "10.77.3.1",
        _veths: Vec::new(),
        dir,
        prefix,
    }
}

/// Runs a server/client pair of roce-bw over `link`; returns the whole output.
fn run(link: &Link, args: &[&str]) -> String {
    run_with(link, args, &[])
}

/// `run` with `env` set for both processes.
fn run_with(link: &Link, args: &[&str], env: &[(&str, &Path)]) -> String {
    run_to(link, link.server_ip, args, env)
}

/// `run_with` to the server's address `server_ip` (one of a dual-stack port's).
fn run_to(link: &Link, server_ip: &str, args: &[&str], env: &[(&str, &Path)]) -> String {
    let out = retry_fanout_collision(|| {
        Command::new("bash")
            .envs(env.iter().copied())
            .arg(repo().join("scripts/run-pair.sh"))
            .arg(BW)
            .arg(&link.server)
            .arg(&link.client)
            .args(["--server-ip", server_ip, "--timeout-ms", "20000"])
            .args(args)
            .env("RUN_PAIR_TIMEOUT", "240")
            .output()
            .unwrap()
    });
    let text = output_text(&out);
    assert!(out.status.success(), "roce-bw {args:?} failed:\n{text}");
    assert!(text.contains("server done"), "{args:?}:\n{text}");
    text
}

/// The table's rows: (bytes, iterations, BW peak, BW average, MsgRate), perftest's five
/// columns.
fn rows(text: &str) -> Vec<(usize, u64, f64, f64, f64)> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() != 5 || !l.starts_with(' ') {
                return None;
            }
            Some((
                w[0].parse().ok()?,
                w[1].parse().ok()?,
                w[2].parse().ok()?,
                w[3].parse().ok()?,
                w[4].parse().ok()?,
            ))
        })
        .collect()
}

/// A `--stages` line of a stream: the stages' times per message and the counts.
struct StreamStages {
    build_ns: f64,
    handle_ns: f64,
    messages: u64,
    frames_in: u64,
    frames_out: u64,
}

/// The `--stages` line of `who` (client or server) in roce-bw's output.
#[track_caller]
fn stages(text: &str, who: &str) -> StreamStages {
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("stages {who} ")))
        .unwrap_or_else(|| panic!("no stages line of the {who}:\n{text}"));
    let after = |key: &str| -> &str {
        let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len();
        line[at..]
            .trim_start()
            .split([',', ' ', ';', ')'])
            .next()
            .unwrap()
    };
    StreamStages {
        build_ns: after("build").parse().unwrap(),
        handle_ns: after("handle").parse().unwrap(),
        messages: after("(").parse().unwrap(),
        frames_in: after("frames in").parse().unwrap(),
        frames_out: after("/ out").parse().unwrap(),
    }
}

/// One row, of `size` bytes and `iters` iterations per connection, moving data.
#[track_caller]
fn assert_one_row(text: &str, size: usize, iters: u64) {
    let r = rows(text);
    assert_eq!(r.len(), 1, "{text}");
    let (bytes, n, peak, avg, rate) = r[0];
    assert_eq!((bytes, n), (size, iters), "{text}");
    assert!(avg > 0.0 && rate > 0.0 && peak >= avg * 0.99, "{text}");
}

fn every_op_verified(link: &Link) {
    for (op, size) in [
        ("write", "4096"),
        ("send", "4096"),
        ("read", "4096"),
        ("atomic", "8"),
    ] {
        let text = run(
            link,
            &[
                "--op", op, "-s", size, "-n", "300", "-q", "4", "-t", "128", "-l", "4", "--cq-mod",
                "16", "--verify",
            ],
        );
        assert_one_row(&text, size.parse().unwrap(), 300);
        assert!(text.contains(" Verify          : ON"), "{op}:\n{text}");
    }
    // Many connections, every message checked; a large READ and WRITE over several packets.
    let text = run(
        link,
        &[
            "--op", "write", "-s", "256", "-n", "40", "-q", "64", "-t", "16", "--verify",
        ],
    );
    assert_one_row(&text, 256, 40);
    assert!(text.contains("64 connections up"), "{text}");
    for op in ["write", "read"] {
        let text = run(
            link,
            &[
                "--op", op, "-s", "65536", "-n", "64", "-q", "2", "-t", "8", "--verify",
            ],
        );
        assert_one_row(&text, 65536, 64);
    }
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

#[test]
fn every_operation_verified_over_af_packet() {
    every_op_verified(&af_packet("w"));
}

/// Each operation once, 200 messages of it over two connections with 16 outstanding, every
/// byte checked (`env` for both processes): the operation and its run's output.
fn every_op_verified_briefly(link: &Link, env: &[(&str, &Path)]) -> Vec<(&'static str, String)> {
    every_op_verified_briefly_sized(link, env, EVERY_OP)
}

/// Each operation and its message size.
const EVERY_OP: [(&str, &str); 4] = [
    ("write", "65536"),
    ("send", "4096"),
    ("read", "65536"),
    ("atomic", "8"),
];

/// [`every_op_verified_briefly`] with the sizes of `ops`.
fn every_op_verified_briefly_sized(
    link: &Link,
    env: &[(&str, &Path)],
    ops: [(&'static str, &'static str); 4],
) -> Vec<(&'static str, String)> {
    ops.into_iter()
        .map(|(op, size)| {
            let text = run_with(
                link,
                &[
                    "--op", op, "-s", size, "-n", "200", "-q", "2", "-t", "16", "--verify",
                ],
                env,
            );
            assert_one_row(&text, size.parse().unwrap(), 200);
            (op, text)
        })
        .collect()
}

/// The provider's fault injection (`DPDK_ROCE_FAULTS`) reaches the benchmark's own shards on
/// both sides, and every operation still moves every byte as planned through it.
#[test]
fn every_operation_verified_under_injected_faults_over_af_packet() {
    let link = af_packet("f");
    with_fast_cm(&link);
    let faults = Path::new("loss=0.05,dup=0.01,reorder=0.02,seed=3");
    // READs of 16 KiB: a lost READ response costs a timeout and re-reads every READ still
    // outstanding (docs/DESIGN.md, Known gaps); 16 outstanding 64 KiB READs under 5 % loss on
    // the suite's loaded two cores ran out of retries (RetryExcErr) in 2 of 3 runs.
    let ops = [
        ("write", "65536"),
        ("send", "4096"),
        ("read", "16384"),
        ("atomic", "8"),
    ];
    let env = [("DPDK_ROCE_FAULTS", faults)];
    for (op, text) in every_op_verified_briefly_sized(&link, &env, ops) {
        assert_eq!(
            text.matches("fault injection on").count(),
            2,
            "{op}: both sides:\n{text}"
        );
        // Each side's queue pair, when it closes: what it lost each way.
        let lost: Vec<u64> = text
            .lines()
            .filter_map(|l| l.split("dpdk-roce faults: rx lost=").nth(1))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        assert_eq!(lost.len(), 2, "{op}:\n{text}");
        assert!(lost.iter().all(|&n| n > 0), "{op}: {lost:?}\n{text}");
    }
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// CM timers for a lossy link (`[roce] cm_response_timeout`, `cm_max_retries`): a lost MAD
/// costs 67 ms, not rdma_cm's 4.3 s.
fn with_fast_cm(link: &Link) {
    for profile in [&link.server, &link.client] {
        dpdk_common::add_roce_keys(profile, "cm_response_timeout = 14\ncm_max_retries = 15");
    }
}

/// Every operation moves every byte as planned through a link that drops 5 % of the frames each
/// way in the kernel (not the provider's own injection), and both directions did lose frames.
#[test]
fn every_operation_verified_through_a_lossy_kernel_link_between_two_veth_pairs() {
    let link = lossy_kernel_link("k", "0.05");
    with_fast_cm(&link);
    let (x, y) = (&link._veths[0].prefix, &link._veths[1].prefix);
    let mut retransmits = 0;
    for (op, text) in every_op_verified_briefly(&link, &[]) {
        assert!(
            !text.contains("fault injection on"),
            "{op}: the provider's own injection is off here:\n{text}"
        );
        retransmits += text
            .lines()
            .filter_map(|l| l.split("retransmits: ").nth(1))
            .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
            .sum::<u64>();
    }
    assert!(
        retransmits > 0,
        "nothing was sent again through a lossy link"
    );
    // `veth-join Xb->Ya: forwarded=N lost=N`, one line per direction.
    let status = join(&["status", x, y]);
    let lines: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("veth-join "))
        .collect();
    assert_eq!(lines.len(), 2, "{status}");
    for l in lines {
        let n = |k: &str| -> u64 {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{k} in {l}"))
        };
        let (forwarded, lost) = (n("forwarded="), n("lost="));
        // 5 % of each direction's frames, give or take the draws' spread.
        assert!(
            lost > 0 && lost * 100 > forwarded * 2 && lost * 100 < forwarded * 10,
            "{l}"
        );
        println!("{l}");
    }
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

#[test]
fn every_operation_verified_over_memif() {
    every_op_verified(&memif("m"));
}

/// `-a` with `--raw`, both directions, the JSON report and the plot: one row per size from 2 B
/// to 8 MiB (perftest's -a, whatever -s says), each with the raw blast's rate under it, the
/// header perftest's, and an SVG of the sweep; `-D` runs for its time.
#[test]
fn sweep_with_raw_bidirectional_json_plot_and_duration_over_memif() {
    let link = memif("j");
    let json = link.dir.join("bw.json");
    let plot = link.dir.join("bw.svg");
    let text = run(
        &link,
        &[
            "--op",
            "send",
            "-a",
            "-s",
            "1024",
            "-n",
            "4",
            "-b",
            "--raw",
            "--report_gbits",
            "--json",
            json.to_str().unwrap(),
            "--plot",
            plot.to_str().unwrap(),
        ],
    );
    // The sweep's plot: an SVG with both panels and a point per size in each.
    let svg = std::fs::read_to_string(&plot).expect("the plot");
    assert!(
        svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"),
        "{svg:.200}"
    );
    for want in [
        "bandwidth (Gb/sec)",
        "message rate (Mpps)",
        "message size (bytes)",
    ] {
        assert!(svg.contains(want), "{want}");
    }
    assert_eq!(
        svg.matches("<circle").count(),
        2 * 23,
        "a point per size in each panel"
    );
    let sizes: Vec<usize> = rows(&text).iter().map(|r| r.0).collect();
    let all: Vec<usize> = (1..=23).map(|s| 1 << s).collect();
    assert_eq!(sizes, all, "{text}");
    assert_eq!(text.matches("raw L2 ").count(), 23, "{text}");
    assert!(
        text.lines()
            .any(|l| l == "                    Send Bidirectional BW Test"),
        "{text}"
    );
    let header = perftest::bw_header(perftest::BwUnit::GbitPerSec);
    assert_eq!(text.lines().filter(|l| *l == header).count(), 1, "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file")).unwrap();
    assert_eq!(v["test"], "Send");
    assert_eq!(v["bidirectional"], true);
    let rows_json = v["rows"].as_array().expect("rows");
    assert_eq!(rows_json.len(), 23);
    for r in rows_json {
        assert_eq!(r["unit"], "Gb/sec", "{r}");
        assert!(r["bw_average"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["raw_mpps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["rdma_frames_to_raw"].as_f64().unwrap() > 0.0, "{r}");
    }
    // -D 1: one second of 64 B WRITEs, every one completed; `--stages` times both loops: the
    // client sent a frame per message, the server received them all.
    let text = run(&link, &["--op", "write", "-s", "64", "-D", "1", "--stages"]);
    let r = rows(&text);
    assert_eq!(r.len(), 1, "{text}");
    assert!(r[0].1 > 1000, "a second of WRITEs: {text}");
    let (client, server) = (stages(&text, "client"), stages(&text, "server"));
    assert_eq!(client.messages, r[0].1, "{text}");
    assert_eq!(server.messages, r[0].1, "{text}");
    assert!(client.frames_out >= client.messages, "{text}");
    assert!(server.frames_in >= server.messages, "{text}");
    assert!(client.build_ns > 0.0 && server.handle_ns > 0.0, "{text}");
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// A dat.conf in the link's directory naming IA `bwdat` on the client's profile.
fn client_dat_conf(link: &Link) -> PathBuf {
    let conf = link.dir.join("dat.conf");
    std::fs::write(
        &conf,
        format!(
            "bwdat u2.0 nonthreadsafe default {} dapl.2.0 \"{}\" \"\"\n",
            provider_lib().display(),
            link.client.display()
        ),
    )
    .unwrap();
    conf
}

/// The client through libdat2 (`--api dat`): the IA's profile is the client profile, named in
/// a dat.conf of the test's own. Every operation with every byte checked over several EPs and
/// both ways at once, the lone-completion case (`-t 1 --cq-mod 1`), and the JSON says which
/// API ran.
fn dat_client_every_op(link: &Link) {
    let conf = client_dat_conf(link);
    let json = link.dir.join("dat.json");
    let env = [("DAT_OVERRIDE", conf.as_path())];
    let verified = [
        "-q", "4", "-t", "64", "-l", "4", "--cq-mod", "16", "--verify",
    ];
    for (op, size, extra) in [
        ("write", "4096", &verified[..]),
        ("send", "4096", &verified),
        ("read", "4096", &verified),
        ("atomic", "8", &verified),
        ("write", "4096", &["-q", "2", "-t", "32", "-b", "--verify"]),
        ("send", "1024", &["-q", "2", "-t", "32", "-b", "--verify"]),
        ("write", "65536", &["-q", "2", "-t", "8", "--verify"]),
        ("write", "4096", &["-t", "1", "--cq-mod", "1"]),
    ] {
        let mut args = vec![
            "--api", "dat", "--ia", "bwdat", "--op", op, "-s", size, "-n", "300",
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--json", json.to_str().unwrap()]);
        let text = run_with(link, &args, &env);
        assert!(
            text.contains("through libdat2 (IA bwdat)"),
            "{op} {extra:?}:\n{text}"
        );
        assert_one_row(&text, size.parse().unwrap(), 300);
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(v["api"], "dat");
        assert_eq!(v["verified"], extra.contains(&"--verify"), "{op} {extra:?}");
        assert_eq!(v["bidirectional"], extra.contains(&"-b"), "{op} {extra:?}");
    }
    // What the DAT client cannot do is refused with a reason.
    let out = Command::new(BW)
        .args(["--client", "--api", "dat", "--ia", "bwdat", "--raw"])
        .args(["--server-ip", "10.77.3.1"])
        .env("DAT_OVERRIDE", &conf)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(output_text(&out).contains("--raw needs --api rust"));
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

#[test]
fn the_dat_api_client_runs_every_op_verified_over_memif() {
    dat_client_every_op(&memif("d"));
}

#[test]
fn the_dat_api_client_runs_every_op_verified_over_af_packet() {
    dat_client_every_op(&af_packet("e"));
}

/// The DAT client connects to the server's IPv6 address: dat_ep_connect with a
/// `sockaddr_in6`, through libdat2 and the C provider, on dual-stack ports.
#[test]
fn the_dat_api_client_runs_every_op_verified_over_ipv6() {
    dat_client_every_op(&dual_stack("e6"));
}

/// An IA opens while its link is down (a net_memif server with no client), and a connection
/// from it fails within its timeout as unreachable (the ARP request is never answered), not
/// at dat_ia_open.
#[test]
fn a_dat_connection_over_a_link_that_stays_down_is_unreachable() {
    let link = memif("u");
    let conf = link.dir.join("down.conf");
    std::fs::write(
        &conf,
        format!(
            "bwdown u2.0 nonthreadsafe default {} dapl.2.0 \"{}\" \"\"\n",
            provider_lib().display(),
            link.server.display()
        ),
    )
    .unwrap();
    let out = Command::new(BW)
        .args([
            "--client", "--api", "dat", "--ia", "bwdown", "-s", "64", "-n", "10",
        ])
        .args(["--server-ip", "10.77.3.2", "--timeout-ms", "30000"])
        .env("DAT_OVERRIDE", &conf)
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(!out.status.success(), "{text}");
    // 16392 = 0x4008, DAT_CONNECTION_EVENT_UNREACHABLE (dat.h).
    assert!(
        text.contains("connecting: Ok(Connection { number: 16392"),
        "{text}"
    );
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

#[test]
fn bad_arguments_are_refused_before_the_port_opens() {
    for (args, why) in [
        (
            &["-q", "0"][..],
            "-q, -t, -l and --cq-mod must be at least 1",
        ),
        (&["-t", "4", "-l", "8"], "-l must not exceed -t"),
        (&["-s", "0"], "-s must be 1..="),
        (&["-s", "16777216"], "-s must be 1..="),
        (&["-D", "0"], "-D must be at least 1 second"),
        (&["-u", "32"], "32 is not in 0..=31"),
        (
            &["--verify", "-q", "4096", "-t", "128", "-s", "65536"],
            "--verify needs",
        ),
    ] {
        let out = Command::new(BW)
            .args(["--profile", "/nonexistent.toml", "--client"])
            .args(["--server-ip", "10.77.0.1"])
            .args(args)
            .output()
            .unwrap();
        let text = output_text(&out);
        assert!(!out.status.success(), "{args:?} accepted:\n{text}");
        assert!(text.contains(why), "{args:?}: expected `{why}`:\n{text}");
    }
}

/// Runs `bin` as a server with `server_args`, then as a client with `client_args` typed the
/// way perftest's are (short flags, the server's address last), over `link`; retried after a
/// fanout collision. Returns the client's output.
fn perftest_style(bin: &str, link: &Link, server_args: &[&str], client_args: &[&str]) -> String {
    with_server(bin, link, server_args, || {
        Command::new(bin)
            .arg("--profile")
            .arg(&link.client)
            .args(client_args)
            .arg(link.server_ip)
            .output()
            .unwrap()
    })
}

/// Starts `bin` as perftest starts its server, with neither `--server` nor an address, with
/// `server_args` over `link`; once it listens runs `client` and waits for both; retried after
/// a fanout collision. Returns the client's output.
fn with_server(
    bin: &str,
    link: &Link,
    server_args: &[&str],
    client: impl Fn() -> std::process::Output,
) -> String {
    dpdk_common::retry_fanout(|_| {
        let server = dpdk_common::Proc::spawn(
            Command::new(bin)
                .arg("--profile")
                .arg(&link.server)
                .args(server_args),
        );
        if let Err(why) = server.wait_for_stdout("READY", std::time::Duration::from_secs(60)) {
            let out = server.kill();
            assert!(
                out.contains(dpdk_common::FANOUT_COLLISION),
                "server not ready ({why}):\n{out}"
            );
            return None;
        }
        let client = client();
        if dpdk_common::is_fanout_collision(&client) {
            // Killed, and what its EAL leaves removed.
            drop(server);
            return None;
        }
        let ctext = output_text(&client);
        let stext = server.finish(std::time::Duration::from_secs(120));
        assert!(client.status.success(), "client:\n{ctext}");
        assert!(stext.ends_with("[exit status: 0]\n"), "server:\n{stext}");
        Some(ctext)
    })
}

/// perftest's command lines: the program without an address is the server; `-s -n -q -t -Q -F
/// --report_gbits -p` and the server's address as the last argument make the client; the long
/// flags stay (the other tests use them, and `--server` through scripts/run-pair.sh).
#[test]
fn perftest_short_flags_and_a_positional_server_over_af_packet() {
    let link = af_packet("pt");
    let text = perftest_style(
        BW,
        &link,
        &["-p", "18600"],
        &[
            "-s",
            "4096",
            "-n",
            "200",
            "-q",
            "2",
            "-t",
            "16",
            "-Q",
            "4",
            "-F",
            "--report_gbits",
            "-p",
            "18600",
        ],
    );
    assert_one_row(&text, 4096, 200);
    assert!(text.contains("Gb/sec"), "{text}");
    assert!(
        text.contains("\n CQ Moderation   : 4\n"),
        "-Q is --cq-mod:\n{text}"
    );
    const LAT: &str = env!("CARGO_BIN_EXE_roce-lat");
    let text = perftest_style(
        LAT,
        &link,
        &["-p", "18601", "-s", "64", "-n", "200"],
        &["-s", "64", "-n", "200", "-F", "-p", "18601"],
    );
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().next() == Some("64")),
        "no row of 64 B:\n{text}"
    );
    // roce-lat prints the table alone; with -H (perftest's --report-histogram) each size's
    // distribution after it.
    const DISTRIBUTION: &str = "# HdrHistogram percentile distribution, 64 B";
    assert!(!text.contains(DISTRIBUTION), "{text}");
    assert!(!text.contains("1/(1-Percentile)"), "{text}");
    let text = perftest_style(
        LAT,
        &link,
        &["-p", "18602", "-s", "64", "-n", "200"],
        &["-s", "64", "-n", "200", "-H", "-p", "18602"],
    );
    let at = text
        .find(DISTRIBUTION)
        .unwrap_or_else(|| panic!("-H:\n{text}"));
    assert!(text[at..].contains("1/(1-Percentile)"), "{text}");
    assert!(text[..at].contains("RDMA_Write Latency Test"), "{text}");
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// `-V` and `--version` print the program's name and version, as clap puts them, and exit 0.
#[test]
fn every_program_prints_its_version() {
    for bin in [
        BW,
        env!("CARGO_BIN_EXE_roce-lat"),
        env!("CARGO_BIN_EXE_roce-soak"),
        env!("CARGO_BIN_EXE_roce-tool"),
    ] {
        let name = Path::new(bin).file_name().unwrap().to_str().unwrap();
        for flag in ["-V", "--version"] {
            let out = Command::new(bin).arg(flag).output().unwrap();
            assert!(out.status.success(), "{name} {flag}: {}", output_text(&out));
            assert_eq!(
                String::from_utf8_lossy(&out.stdout),
                format!("{name} {}\n", env!("CARGO_PKG_VERSION")),
                "{name} {flag}"
            );
        }
    }
}

/// Routed RoCEv2: the two ports are in different subnets, and every operation (Rust API), and
/// the DAT client through libdat2, moves every byte through a Linux router (the profiles'
/// gateways); the router forwarded what they exchanged. The router decrements the TTL and
/// recomputes the IPv4 checksum, which the ICRC leaves out (annex A17.4.1).
///
/// The server never hears the client's ARP (the router answers it), so the client's REQs, one
/// per QP, arrive from an address it has not resolved: each is held until the way back
/// resolves, and none needs a retransmission (holding one per source once cost every run but
/// the first a 4.3 s CM timeout).
#[test]
fn every_operation_verified_through_a_linux_router_between_two_subnets() {
    let (link, router) = routed("r");
    let before = router.forwarded();
    for (op, text) in every_op_verified_briefly(&link, &[]) {
        assert!(text.contains("retransmits"), "{op}:\n{text}");
        assert_eq!(
            text.matches("summary: CM: retransmits: 0 ").count(),
            2,
            "{op}: a CM message was sent again:\n{text}"
        );
    }
    let conf = client_dat_conf(&link);
    let text = run_with(
        &link,
        &[
            "--api", "dat", "--ia", "bwdat", "--op", "write", "-s", "4096", "-n", "300", "-q", "4",
            "-t", "64", "-l", "4", "--cq-mod", "16", "--verify",
        ],
        &[("DAT_OVERRIDE", conf.as_path())],
    );
    assert_one_row(&text, 4096, 300);
    let forwarded = router.forwarded() - before;
    assert!(
        forwarded > 4 * 200,
        "the router forwarded {forwarded} datagrams"
    );
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// Both providers on VLAN 77 with DSCP 26 (`[roce] vlan`, `dscp`: the PCP follows the DSCP,
/// 26 >> 3 = 3), over one veth pair.
struct VlanLink {
    link: Link,
    client_end: String,
}

/// Puts both profiles of `link` (the server's RoCE address `server`, the client's `client`)
/// on VLAN 77 with DSCP 26.
fn put_on_vlan_77(link: &Link, server: &str, client: &str) {
    for (profile, addr) in [(&link.server, server), (&link.client, client)] {
        let text = std::fs::read_to_string(profile).unwrap();
        let line = format!("address = \"{addr}\"");
        assert!(text.contains(&line), "{}", profile.display());
        let tagged = text.replace(&line, &format!("{line}\nvlan = 77\ndscp = 26"));
        std::fs::write(profile, tagged).unwrap();
    }
}

fn on_vlan(tag: &str) -> VlanLink {
    let veth = Veth::up(tag);
    let (a, b) = (veth.end('a'), veth.end('b'));
    let link = af_packet_between(tag, &a, &b, vec![veth]);
    put_on_vlan_77(&link, "10.77.0.1/24", "10.77.0.2/24");
    VlanLink {
        link,
        client_end: b,
    }
}

/// Over net_memif, whose frames are built straight into their mbufs (`FrameIo::tx_build`),
/// both ends on VLAN 77: each frame is tagged in its mbuf, and a frame left untagged or tagged
/// wrong would be dropped as another VLAN's (the counts stay zero) and its run would fail.
#[test]
fn every_operation_verified_on_a_vlan_over_memif() {
    let link = memif("vm");
    put_on_vlan_77(&link, "10.77.3.1/24", "10.77.3.2/24");
    for (op, text) in every_op_verified_briefly(&link, &[]) {
        assert_eq!(
            text.matches("summary: receive drops: none").count(),
            2,
            "{op}: both sides dropped nothing (rx_other_vlan included):\n{text}"
        );
    }
}

/// Frames of `pcap` that tshark's display filter `filter` selects.
fn tshark_count(pcap: &Path, filter: &str) -> u64 {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-Y", filter])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "tshark -Y {filter}: {}",
        output_text(&out)
    );
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// The `rx_other_vlan` count of every summary in a run-pair output (server and client).
fn other_vlan_drops(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| l.split("rx_other_vlan: ").nth(1))
        .filter_map(|n| n.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// Sends, through a packet socket on `iface`, ARP requests for 10.77.0.1 tagged with VLAN 99
/// (another VLAN's host asking), the frames a switch port trunking two VLANs passes on.
fn send_vlan_99_arp_requests(iface: &str, count: u32) {
    let script = r#"
import socket, struct, sys
iface, count = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((iface, 0))
src = bytes.fromhex("020000990009")
arp = struct.pack("!HHBBH6s4s6s4s", 1, 0x0800, 6, 4, 1, src, socket.inet_aton("10.77.0.99"),
                  bytes(6), socket.inet_aton("10.77.0.1"))
frame = b"\xff" * 6 + src + struct.pack("!HHH", 0x8100, 99, 0x0806) + arp
for _ in range(count):
    s.send(frame)
"#;
    let out = Command::new("python3")
        .args(["-c", script, iface, &count.to_string()])
        .output()
        .expect("python3 (scripts/setup.sh installs it)");
    assert!(out.status.success(), "{}", output_text(&out));
}

/// 802.1Q as fabrics configure it: every operation moves every byte on VLAN 77; on the wire
/// (captured by the kernel on the client's end) every RoCEv2 frame is tagged VLAN 77 with
/// priority 3, and tshark and `roce-tool decode` read them cleanly. Frames of other networks
/// reach the providers' ports and are dropped and counted there, never answered: ARP requests
/// for the server's address tagged VLAN 99, and Linux's own untagged ones (`arping` on the
/// client's end gets no answer).
#[test]
fn every_operation_verified_on_a_vlan_and_other_vlans_are_dropped() {
    let v = on_vlan("v");
    let pcap = v.link.dir.join("wire.pcap");
    let mut capture = Command::new("dumpcap")
        .args(["-q", "-P", "-i", &v.client_end, "-w"])
        .arg(&pcap)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("dumpcap (scripts/setup.sh installs tshark)");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Other networks ask for the server's address while the runs go on.
    let asker = {
        let (stop, iface) = (stop.clone(), v.client_end.clone());
        std::thread::spawn(move || {
            let (mut sent, mut answered) = (0, String::new());
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                send_vlan_99_arp_requests(&iface, 10);
                sent += 10;
                let out = Command::new("arping")
                    .args(["-c", "1", "-w", "1", "-I", &iface, "10.77.0.1"])
                    .output()
                    .expect("arping (scripts/setup.sh installs it)");
                if out.status.success() {
                    answered.push_str(&output_text(&out));
                }
            }
            (sent, answered)
        })
    };
    let runs = every_op_verified_briefly(&v.link, &[]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (sent, answered) = asker.join().unwrap();
    let _ = Command::new("kill")
        .args(["-INT", &capture.id().to_string()])
        .status();
    let _ = capture.wait();

    assert!(
        sent > 0 && answered.is_empty(),
        "an untagged ARP request was answered: {answered}"
    );
    let dropped: Vec<(&str, u64)> = runs
        .iter()
        .map(|(op, t)| (*op, other_vlan_drops(t)))
        .collect();
    assert!(
        dropped.iter().any(|(_, n)| *n > 0),
        "no frame of another VLAN was counted ({sent} sent): {dropped:?}"
    );
    let count = |filter: &str| tshark_count(&pcap, filter);
    let roce = count("udp.dstport == 4791");
    let tagged = count("udp.dstport == 4791 && vlan.id == 77 && vlan.priority == 3");
    assert!(roce > 4 * 200, "{roce} RoCEv2 frames captured");
    assert_eq!(tagged, roce, "RoCEv2 frames not on VLAN 77 with priority 3");
    assert_eq!(
        count("arp.opcode == 2 && vlan.id == 77"),
        count("arp.opcode == 2"),
        "ARP replies outside VLAN 77"
    );
    tshark_clean(&pcap);
    assert_eq!(
        decode_all_valid(&pcap),
        roce,
        "roce-tool decode reads through the tags"
    );
    assert_no_runtime_dirs(&format!("{}-", v.link.prefix));
}

/// A connection through a router fails as unreachable, never hangs, over a real port with a
/// real router: to a host missing behind it (the router's ARP gives up and it answers with an
/// ICMP host unreachable, which fails the waiting connection request), and through a gateway
/// that does not exist (ARP for the next hop fails).
#[test]
fn a_peer_missing_behind_the_router_and_a_dead_gateway_fail_the_connection() {
    let (link, _router) = routed("g");
    let dead_gateway = link.dir.join("dead-gateway.toml");
    let text = std::fs::read_to_string(&link.server).unwrap();
    assert!(text.contains("gateway = \"10.77.72.254\""));
    std::fs::write(
        &dead_gateway,
        text.replace("gateway = \"10.77.72.254\"", "gateway = \"10.77.72.253\""),
    )
    .unwrap();
    for (profile, why) in [
        (&link.server, "ICMP destination unreachable received: 1"),
        (&dead_gateway, "ARP resolutions failed: 1"),
    ] {
        let out = retry_fanout_collision(|| {
            Command::new(BW)
                .args(["--client", "--profile"])
                .arg(profile)
                .args(["--server-ip", "10.77.73.99", "-s", "64", "-n", "10"])
                .args(["--timeout-ms", "60000"])
                .output()
                .unwrap()
        });
        let text = output_text(&out);
        assert!(!out.status.success(), "{text}");
        assert!(
            text.contains("connection failed: Unreachable") && text.contains(why),
            "{}: {text}",
            profile.display()
        );
    }
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// The af_packet link over a new veth pair with `address` lines of the server's and the
/// client's profiles replaced by `server` and `client`; the client connects to `server_ip`.
fn af_packet_at(tag: &str, server: &str, client: &str, server_ip: &'static str) -> Link {
    let veth = Veth::up(tag);
    let (a, b) = (veth.end('a'), veth.end('b'));
    let mut link = af_packet_between(tag, &a, &b, vec![veth]);
    for (profile, v4, line) in [
        (&link.server, "10.77.0.1/24", server),
        (&link.client, "10.77.0.2/24", client),
    ] {
        let text = std::fs::read_to_string(profile).unwrap();
        let old = format!("address = \"{v4}\"");
        assert!(text.contains(&old), "{}", profile.display());
        std::fs::write(profile, text.replace(&old, line)).unwrap();
    }
    link.server_ip = server_ip;
    link
}

/// Provider A on 10.77.0.1/24 and fd00:77::1/64, provider B on 10.77.0.2/24 and fd00:77::2/64
/// (`[roce] address` with one address of each family), over a veth pair; the server's IPv6
/// address is the link's.
fn dual_stack(tag: &str) -> Link {
    af_packet_at(
        tag,
        r#"address = ["10.77.0.1/24", "fd00:77::1/64"]"#,
        r#"address = ["10.77.0.2/24", "fd00:77::2/64"]"#,
        "fd00:77::1",
    )
}

/// Ports with only an IPv6 address (`address = "fd00:77::1/64"`): RDMA WRITE and READ of
/// 64 KiB (64 packets each) verified.
#[test]
fn an_ipv6_only_port_pair_moves_verified_data() {
    let link = af_packet_at(
        "6o",
        r#"address = "fd00:77::1/64""#,
        r#"address = "fd00:77::2/64""#,
        "fd00:77::1",
    );
    for op in ["write", "read"] {
        let text = run(
            &link,
            &["--op", op, "-s", "65536", "-n", "64", "-t", "8", "--verify"],
        );
        assert_one_row(&text, 65536, 64);
    }
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// RoCEv2 over IPv6 between two dpdk-roce processes whose ports have both families: every
/// operation verified to the server's IPv6 address (its MAC found by Neighbor Discovery), then
/// one to its IPv4 address over the same ports. On the wire (dumpcap on both ends):
/// every RoCEv2 frame of the IPv6 runs is IPv6 (UDP checksum 0, hop limit 64), the client
/// solicited the server's address and was answered, tshark flags nothing and every ICRC is
/// valid.
#[test]
fn every_operation_verified_over_ipv6_on_a_dual_stack_port() {
    let link = dual_stack("6");
    // Both ends: net_af_packet sends past the kernel's packet taps (PACKET_QDISC_BYPASS), so
    // each end's capture holds only what it received.
    let end = |e: char| format!("{}{e}", link._veths[0].prefix);
    let pcap = link.dir.join("wire.pcapng");
    let mut capture = Command::new("dumpcap")
        .args(["-i", &end('a'), "-i", &end('b'), "-w"])
        .arg(&pcap)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("dumpcap (scripts/setup.sh installs tshark)");
    // Capturing once it says so (the first run's Neighbor Discovery must be on the file).
    let mut err = std::io::BufReader::new(capture.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("Capturing on") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut err, &mut line).unwrap();
        assert!(n > 0, "dumpcap ended before capturing");
    }
    let drain = std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    let runs = every_op_verified_briefly(&link, &[]);
    let v4 = run_to(
        &link,
        "10.77.0.1",
        &["--op", "write", "-s", "4096", "-n", "100", "--verify"],
        &[],
    );
    assert_one_row(&v4, 4096, 100);
    let _ = Command::new("kill")
        .args(["-INT", &capture.id().to_string()])
        .status();
    let _ = capture.wait();
    let _ = drain.join();
    for (op, text) in &runs {
        assert!(text.contains(" Verify          : ON"), "{op}:\n{text}");
    }
    let count = |filter: &str| tshark_count(&pcap, filter);
    let over6 = count("ipv6 && udp.dstport == 4791");
    let over4 = count("ip && udp.dstport == 4791");
    assert!(over6 > 4 * 200, "{over6} RoCEv2/IPv6 frames captured");
    assert!(over4 > 100, "{over4} RoCEv2/IPv4 frames captured");
    assert_eq!(
        count("ipv6 && udp.dstport == 4791 && udp.checksum == 0 && ipv6.hlim == 64"),
        over6,
        "RoCEv2/IPv6 frames with a UDP checksum or another hop limit"
    );
    let icmpv6 = || {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&pcap)
            .args(["-Y", "icmpv6", "-c", "20"])
            .output()
            .unwrap();
        output_text(&out)
    };
    assert!(
        count("icmpv6.type == 135 && icmpv6.nd.ns.target_address == fd00:77::1") > 0,
        "the client never solicited the server's address; ICMPv6 frames:\n{}",
        icmpv6()
    );
    assert!(
        count("icmpv6.type == 136 && icmpv6.nd.na.target_address == fd00:77::1") > 0,
        "the server never advertised its address"
    );
    tshark_clean(&pcap);
    // roce-tool decode reads pcap: the two interfaces' frames in one file.
    let flat = link.dir.join("wire.pcap");
    let out = Command::new("editcap")
        .args(["-F", "pcap"])
        .arg(&pcap)
        .arg(&flat)
        .output()
        .expect("editcap (scripts/setup.sh installs tshark)");
    assert!(out.status.success(), "editcap: {}", output_text(&out));
    assert_eq!(
        decode_all_valid(&flat),
        over6 + over4,
        "roce-tool decode reads IPv6"
    );
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// Strips a terminal's output to the lines it shows: ANSI escape sequences removed, and of each
/// line (its CR LF end taken off) only what follows its last carriage return, what a redraw
/// leaves.
fn screen_lines(raw: &str) -> Vec<String> {
    let mut plain = String::new();
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters, then one final byte in @..~.
            if chars.peek() == Some(&'[') {
                chars.next();
                for f in chars.by_ref() {
                    if ('@'..='~').contains(&f) {
                        break;
                    }
                }
            } else {
                chars.next();
            }
            continue;
        }
        plain.push(c);
    }
    plain
        .split('\n')
        .map(|l| {
            // A terminal ends a line with CR LF.
            let l = l.strip_suffix('\r').unwrap_or(l);
            l.rsplit('\r').next().unwrap_or("").to_owned()
        })
        .collect()
}

/// A sweep on a real terminal (the client under `script`, its stdout and stderr a pty): the
/// progress bar is drawn on it, and every table row of every size, 2 B to 8 MiB, stands whole
/// on a line of its own, the bar cleared around it.
#[test]
fn a_sweep_on_a_terminal_keeps_each_row_on_its_own_line_over_memif() {
    let link = memif("tty");
    let client = format!(
        "stty cols 200 rows 50; exec {BW} --profile {} -a -n 2 -t 4 --timeout-ms 20000 {}",
        link.client.display(),
        link.server_ip
    );
    let raw = with_server(BW, &link, &[], || {
        Command::new("script")
            .args(["-q", "-e", "-c", &client, "/dev/null"])
            .stdin(std::process::Stdio::null())
            .output()
            .expect("script (util-linux)")
    });
    assert!(
        raw.contains("sizes [") && raw.contains('\x1b'),
        "no progress bar drawn on the terminal:\n{raw}"
    );
    let lines = screen_lines(&raw);
    let header = perftest::bw_header(perftest::BwUnit::MibPerSec);
    assert!(lines.contains(&header), "{lines:#?}");
    for size in (1..=23).map(|s| 1usize << s) {
        let row = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(&size.to_string()))
            .unwrap_or_else(|| panic!("no row of {size} B on a line of its own:\n{lines:#?}"));
        let w: Vec<&str> = row.split_whitespace().collect();
        assert!(
            row.starts_with(&format!(" {size:<7}    2 "))
                && w.len() == 5
                && w[2..].iter().all(|v| v.parse::<f64>().is_ok()),
            "the row of {size} B is not whole: {row:?}\n{lines:#?}"
        );
    }
    assert_no_runtime_dirs(&format!("{}-", link.prefix));
}

/// scripts/bottleneck.sh on a join of two veth pairs, taken down before the pairs go.
struct BottleneckGuard(String, String);

impl BottleneckGuard {
    fn up(x: &str, y: &str, rate: &str) -> BottleneckGuard {
        let g = BottleneckGuard(x.into(), y.into());
        g.script(&["up", x, y, rate]);
        g
    }

    fn script(&self, args: &[&str]) -> String {
        dpdk_common::script("bottleneck.sh", args)
    }

    /// `name=N` of `bottleneck.sh status`.
    fn count(&self, name: &str) -> u64 {
        let status = self.script(&["status", &self.0, &self.1]);
        status
            .split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} in {status}"))
    }
}

impl Drop for BottleneckGuard {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/bottleneck.sh"))
            .args(["down", &self.0, &self.1])
            .output();
    }
}

/// `name: N` of the `summary:` lines of one side's output (`== server ==` / `== client ==`).
fn summary_count(text: &str, side: &str, name: &str) -> u64 {
    line_count(text, side, "summary: ", name)
}

/// The count `name` on the first line starting with `prefix` that has it, in `side`'s part.
fn line_count(text: &str, side: &str, prefix: &str, name: &str) -> u64 {
    let part = text
        .split("== ")
        .find(|p| p.starts_with(&format!("{side} ==")))
        .unwrap_or_else(|| panic!("no {side} part in:\n{text}"));
    part.lines()
        .filter(|l| l.starts_with(prefix))
        .find_map(|l| l.split(&format!(" {name}: ")).nth(1))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("{name} on the {side}'s {prefix:?} lines:\n{part}"))
}

/// Four QPs of 64 KiB WRITEs and a latency probe from the client through a real bottleneck
/// (scripts/bottleneck.sh: a tbf of 300 Mbit/s with a 64 KiB queue and the eBPF CE marker, on
/// the kernel link between two veth pairs) for 2 s, with each congestion mode:
/// - off: nothing marked, nothing cut (the comparison, printed);
/// - dcqcn (its increase steps scaled to the link, as bench/congestion.sh runs it): the
///   packets are ECT(0) and get marked, the server answers with CNPs, the client takes them
///   and cuts its rates; at most 3 % of the packets are sent again (its line-rate start
///   weighs in 2 s);
/// - delay: nothing ECN-capable, nothing marked, the round trips alone hold the queue: at
///   most 1 % sent again; the probe's QP, which its window never holds back, is neither cut
///   nor paced on either side (RFC 7661's rule: a ping-pong behind the queue keeps its window).
///
/// The full figures (10 s, 8 QPs, goodput, fairness, the probe's round trips) are
/// bench/congestion.sh's, in bench/README.md.
#[test]
fn congestion_control_through_a_real_marking_bottleneck() {
    let (x, y) = (Veth::up("cx"), Veth::up("cy"));
    let (xp, yp) = (x.prefix.clone(), y.prefix.clone());
    join(&["up", &xp, &yp]);
    // The server on Yb, the client on Xa: the client's data meets the bottleneck on Ya.
    let link = af_packet_between("cc", &y.end('b'), &x.end('a'), vec![x, y]);
    let bottleneck = BottleneckGuard::up(&xp, &yp, "300mbit");
    let plain = [
        std::fs::read_to_string(&link.server).unwrap(),
        std::fs::read_to_string(&link.client).unwrap(),
    ];
    for mode in ["off", "dcqcn", "delay"] {
        for (path, text) in [&link.server, &link.client].into_iter().zip(&plain) {
            let section = format!(
                "[congestion]\nmode = \"{mode}\"\nai_mbps = 1\nhai_mbps = 10\n\
                 line_rate_mbps = 1000\n"
            );
            std::fs::write(path, format!("{text}{section}")).unwrap();
        }
        // Fresh counters.
        bottleneck.script(&["up", &xp, &yp, "300mbit"]);
        let text = run(
            &link,
            &[
                "--op", "write", "-s", "65536", "-D", "2", "-q", "4", "-t", "16", "--probe",
            ],
        );
        let c = |name| summary_count(&text, "client", name);
        let s = |name| summary_count(&text, "server", name);
        let (marked, dropped, ect) = (
            bottleneck.count("marked"),
            bottleneck.count("dropped"),
            bottleneck.count("ect"),
        );
        // The packets the client's completed WRITEs needed: 64 per message.
        let needed: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("fairness: messages per QP: "))
            .and_then(|l| l.split_whitespace().next())
            .map(|l| {
                l.split(',')
                    .filter_map(|n| n.parse::<u64>().ok())
                    .sum::<u64>()
                    * 64
            })
            .unwrap_or_else(|| panic!("no fairness line:\n{text}"));
        let retransmits = c("retransmits");
        println!(
            "{mode}: retransmits {retransmits} of {needed}, bottleneck ect {ect} marked \
             {marked} dropped {dropped}, CNPs sent {} received {}",
            s("cnps_sent"),
            c("cnps_received")
        );
        assert!(
            text.contains("probe: idle p50 "),
            "{mode}: no probe line:\n{text}"
        );
        match mode {
            // The comparison: what the link does to a sender with no brake but its window is
            // in the figures printed above (and bench/README.md); here only that nothing is
            // marked or cut.
            "off" => assert_eq!((ect, marked, c("rate_cuts")), (0, 0, 0), "{mode}"),
            "dcqcn" => {
                assert!(ect > 0 && marked > 0, "{mode}: ect {ect} marked {marked}");
                assert!(s("ce_marks") > 0 && s("cnps_sent") > 0, "{mode}:\n{text}");
                // The CNPs taken: all but those the client's receive ring lost. On this
                // 2-vCPU machine a client descheduled for a few ms loses frames at its
                // net_af_packet socket (2280 of 106350 in a release run: the kernel's RX count
                // of the interface against the PMD's; DPDK 22.11's af_packet PMD does not
                // report those drops as rx_missed), ACKs and CNPs alike.
                let (sent, taken) = (s("cnps_sent"), c("cnps_received") + c("cnps_ignored"));
                assert!(
                    taken <= sent && taken * 5 >= sent * 4,
                    "{mode}: {taken} of {sent}\n{text}"
                );
                assert!(c("rate_cuts") > 0, "{mode}:\n{text}");
                // DCQCN has no slow start: every QP's first round trip leaves at line rate
                // into the 64 KiB queue, and in 2 s under the suite's load that start weighs
                // (606 of 58 368 sent again, 1.04 %, in one fresh-clone run). The 10 s figures
                // are bench/congestion.sh's (bench/README.md "Congestion").
                assert!(
                    retransmits * 100 <= needed * 3,
                    "{mode}: {retransmits} of {needed}"
                );
            }
            _ => {
                assert_eq!((ect, marked, s("cnps_sent")), (0, 0, 0), "{mode}");
                assert!(c("rate_cuts") > 0, "{mode}:\n{text}");
                assert!(
                    retransmits * 100 <= needed,
                    "{mode}: {retransmits} of {needed}"
                );
                for side in ["client", "server"] {
                    let probe = |name| line_count(&text, side, "probe QP: ", name);
                    assert!(probe("packets_sent") > 0, "{side}:\n{text}");
                    assert_eq!(
                        (probe("rate_cuts"), probe("paced_waits")),
                        (0, 0),
                        "{mode}: the {side}'s probe QP:\n{text}"
                    );
                }
            }
        }
    }
    drop(bottleneck);
    join(&["down", &xp, &yp]);
}
