//! roce-soak over real DPDK ports on impaired links: two processes over net_af_packet move
//! 10^5 work requests (RDMA WRITE, WRITE with immediate, READ, SEND, fetch-and-add,
//! compare-and-swap; 1 B to 64 KiB; four connections) and check that every one completed
//! exactly once, in order, with the bytes and atomic results planned; once with the provider's
//! fault injection (`DPDK_ROCE_FAULTS`) on both sides, once through `roce-tool relay` between
//! two veth pairs, an impairment that is not the provider's code. Needs root (veth pairs) and
//! DPDK (scripts/setup.sh); fails loudly otherwise.

mod dpdk_common;

use dpdk_common::{
    assert_no_runtime_dirs, output_text, profile_copy, repo, retry_fanout, retry_fanout_collision,
    Dir, Veth, FANOUT_COLLISION,
};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const SOAK: &str = env!("CARGO_BIN_EXE_roce-soak");
const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");
/// Messages of each soak: the short version of `roce-soak` (bench/README runs the long ones);
/// every fault kind still happens hundreds of times.
const MESSAGES: u64 = 40_000;

/// The two af_packet profiles, side A (the server, 10.77.0.1) on `iface_a`, side B on `iface_b`,
/// with the CM's response timeout at 67 ms (exponent 14; 15 retries) instead of 4.3 s: set-up
/// and tear-down MADs are lost too, and the server stays after the disconnection for two of
/// its timeouts to answer a DREQ sent again (8.6 s of each run at the default).
fn profiles(dir: &Path, iface_a: &str, iface_b: &str, prefix: &str) -> (PathBuf, PathBuf) {
    let a = profile_copy(dir, "af_packet-a", &[("rocev0a", iface_a)], prefix);
    let b = profile_copy(dir, "af_packet-b", &[("rocev0b", iface_b)], prefix);
    for p in [&a, &b] {
        dpdk_common::add_roce_keys(p, "cm_response_timeout = 14\ncm_max_retries = 15");
    }
    (a, b)
}

/// Runs the soak between the two profiles with `env`; returns the whole output after
/// checking that both sides succeeded and every work request was verified.
fn soak(server: &Path, client: &Path, env: &[(&str, &str)]) -> String {
    let out = retry_fanout_collision(|| {
        Command::new("bash")
            .arg(repo().join("scripts/run-pair.sh"))
            .arg(SOAK)
            .arg(server)
            .arg(client)
            .args(["--server-ip", "10.77.0.1", "-n", &MESSAGES.to_string()])
            .args(["-q", "4", "-t", "16", "--seed", "11"])
            .envs(env.iter().copied())
            .env("RUN_PAIR_TIMEOUT", "600")
            .output()
            .unwrap()
    });
    let text = output_text(&out);
    assert!(out.status.success(), "roce-soak failed:\n{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("SOAK "))
        .unwrap_or_else(|| panic!("no SOAK line:\n{text}"));
    let field = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} in {line}"))
    };
    assert!(field("messages") >= MESSAGES, "{line}");
    // About 6 KB per message on average (sizes spread over powers of two up to 64 KiB).
    assert!(field("bytes") > MESSAGES * 1000, "{line}");
    let verified: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("server done: "))
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("the server's count:\n{text}"));
    // A third of the steps consume a receive (SEND, WRITE with immediate).
    assert!(
        verified > MESSAGES / 6,
        "{verified} receives verified:\n{text}"
    );
    println!("{line}");
    if let Some(recovery) = text.lines().find(|l| l.starts_with("RECOVERY ")) {
        println!("{recovery}");
    }
    text
}

/// `key=N` of a line.
fn count(line: &str, key: &str) -> u64 {
    line.split([' ', ';'])
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} in {line:?}"))
}

#[test]
fn soak_of_every_operation_verified_under_injected_faults_on_both_sides_over_af_packet() {
    let veth = Veth::up("sf");
    let dir = Dir::new("soak-faults");
    let (a, b) = profiles(&dir.0, &veth.end('a'), &veth.end('b'), "sk-f");
    let faults = "loss=0.01,dup=0.01,reorder=0.02,corrupt=0.001,seed=9";
    let text = soak(&a, &b, &[("DPDK_ROCE_FAULTS", faults)]);
    // Both processes injected every kind of fault, both ways.
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("dpdk-roce faults:"))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    for l in lines {
        for half in l.split(';') {
            for k in ["lost", "dup", "reordered", "corrupted"] {
                assert!(count(half, k) > 0, "{k} in {l}");
            }
        }
    }
    assert_no_runtime_dirs("sk-f");
}

/// `roce-tool relay` on two interfaces, stopped (and its counters read) when dropped.
struct Relay {
    child: Option<Child>,
}

impl Relay {
    fn start(a: &str, b: &str, impair: &[&str]) -> Relay {
        retry_fanout(|_| {
            let mut child = Command::new(TOOL)
                .args([
                    "relay",
                    "--a",
                    a,
                    "--b",
                    b,
                    "--until-stdin-closes",
                    "--lcore",
                    "1",
                ])
                .args(impair)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start roce-tool relay");
            let mut first = String::new();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            out.read_line(&mut first).unwrap();
            if first.starts_with("READY") {
                child.stdout = Some(out.into_inner());
                return Some(Relay { child: Some(child) });
            }
            let _ = child.kill();
            let status = child.wait().unwrap();
            let mut err = String::new();
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            if !err.contains(FANOUT_COLLISION) {
                panic!("the relay did not start ({status}): {first}{err}");
            }
            None
        })
    }

    /// Stops the relay; its per-direction counter lines.
    fn stop(mut self) -> Vec<String> {
        let mut child = self.child.take().unwrap();
        drop(child.stdin.take());
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "relay: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        text.lines()
            .filter(|l| l.starts_with("relay "))
            .map(str::to_owned)
            .collect()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn soak_of_every_operation_verified_through_an_impairing_relay_between_two_veth_pairs() {
    // provider A [xa] <-> [xb] relay [ya] <-> [yb] provider B
    let x = Veth::up("sx");
    let y = Veth::up("sy");
    let dir = Dir::new("soak-relay");
    let (a, b) = profiles(&dir.0, &x.end('a'), &y.end('b'), "sk-r");
    let relay = Relay::start(
        &x.end('b'),
        &y.end('a'),
        &[
            "--loss",
            "0.05",
            "--reorder",
            "0.05",
            "--dup",
            "0.01",
            "--corrupt",
            "0.002",
            "--seed",
            "7",
        ],
    );
    let text = soak(&a, &b, &[]);
    assert!(
        !text.contains("dpdk-roce faults:"),
        "the provider's own injection is off here:\n{text}"
    );
    let lines = relay.stop();
    assert_eq!(lines.len(), 2, "{lines:?}");
    for l in &lines {
        for k in ["forwarded", "lost", "duplicated", "reordered", "corrupted"] {
            assert!(count(l, k) > 0, "{k} in {l}");
        }
        println!("{l}");
    }
    assert_no_runtime_dirs("sk-r");
}

#[test]
fn the_relay_refuses_a_chance_outside_zero_to_one_and_one_interface_twice() {
    for args in [
        &["--a", "x0", "--b", "x1", "--loss", "1.5"][..],
        &["--a", "x0", "--b", "x1", "--corrupt", "-0.1"][..],
        &["--a", "x0", "--b", "x0"][..],
    ] {
        let out = Command::new(TOOL).arg("relay").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(
            err.contains("roce-tool relay:") || err.contains("error:"),
            "{args:?}: {err}"
        );
        assert!(!err.contains("EAL"), "refused before DPDK starts: {err}");
    }
}
