//! The provider's DPDK telemetry commands, read from a running process through its socket: a
//! `roce-soak --server --hold` over net_af_packet serves a client's verified traffic on two
//! connections, then keeps its IA and EPs open; the test reads its counters with Debian's
//! `dpdk-telemetry.py -f <file prefix>` (the commands on its standard input, one JSON answer a
//! line) and with `roce-tool stats`, stops it (end of its standard input: a normal exit) and
//! checks that its EAL runtime directory, which held the socket while it ran, is gone. A
//! `roce-hold-qps` process with 1000 QPs has its QPNs read page by page. Needs root (veth
//! pair), DPDK and the dpdk-dev package's `dpdk-telemetry.py` (scripts/setup.sh).

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::soak::{run_soak_client, SoakServer};
use dpdk_common::{
    assert_no_runtime_dirs, output_text, profile_copy, remove_runtime_dirs_of, retry_fanout, Dir,
    Veth, FANOUT_COLLISION,
};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SOAK: &str = env!("CARGO_BIN_EXE_roce-soak");
const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");
const TELEMETRY_PY: &str = "/usr/bin/dpdk-telemetry.py";
/// Connections of the client (`roce-soak -q`).
const CONNECTIONS: u64 = 2;
/// The profiles' names start with this (`<tag>-af_packet-a`), their file prefixes too.
const TAG: &str = "tlm";

/// `commands` answered by `dpdk-telemetry.py -f prefix` (fed on its standard input): each
/// answer's value under its command's name.
fn telemetry_py(prefix: &str, commands: &[&str]) -> Vec<Value> {
    let mut child = Command::new(TELEMETRY_PY)
        .args(["-f", prefix])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{TELEMETRY_PY} (the dpdk-dev package): {e}"));
    let mut input = commands.join("\n");
    input.push('\n');
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{TELEMETRY_PY}:\n{text}");
    let answers: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(answers.len(), commands.len(), "{text}");
    commands
        .iter()
        .zip(answers)
        .map(|(c, a)| {
            let name = c.split(',').next().unwrap();
            a.get(name)
                .cloned()
                .unwrap_or_else(|| panic!("no {name} in {a}"))
        })
        .collect()
}

/// The one device of an answer (the process has one port: `net_af_packet0`).
fn device<'a>(answer: &'a Value, what: &str) -> &'a Value {
    let devices = answer
        .as_object()
        .unwrap_or_else(|| panic!("{what}: {answer}"));
    assert_eq!(devices.len(), 1, "{what}: {answer}");
    devices
        .get("net_af_packet0")
        .unwrap_or_else(|| panic!("{what}: {answer}"))
}

/// The number at `path` (keys separated by `.`).
fn num(v: &Value, path: &str) -> u64 {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("{path} in {v}"))
}

/// `key: N` of roce-tool's output.
fn printed(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("{key}: ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} in\n{text}"))
}

#[test]
fn a_running_process_answers_its_counters_through_the_dpdk_telemetry_socket() {
    let veth = Veth::up(TAG);
    let dir = Dir::new(TAG);
    let (end_a, end_b) = (veth.end('a'), veth.end('b'));
    let a = profile_copy(&dir.0, "af_packet-a", &[("rocev0a", end_a.as_str())], TAG);
    let b = profile_copy(&dir.0, "af_packet-b", &[("rocev0b", end_b.as_str())], TAG);

    let mut server = SoakServer::start(&a, &format!("{TAG}-af_packet-a"));
    let prefix = server.prefix();
    let runtime = PathBuf::from("/var/run/dpdk").join(&prefix);
    assert!(
        runtime.join("dpdk_telemetry.v2").exists(),
        "no telemetry socket in {} while the server runs",
        runtime.display()
    );
    let connections = CONNECTIONS.to_string();
    let client = run_soak_client(
        &b,
        &[
            "-n",
            "3000",
            "-q",
            &connections,
            "-t",
            "8",
            "--max-size",
            "8192",
        ],
    );
    assert!(client.contains("SOAK messages="), "{client}");
    if !server.wait_line("HOLDING") {
        let err = server.stderr();
        panic!("the server did not finish its test:\n{}{err}", server.seen);
    }

    // (1) Debian's dpdk-telemetry.py.
    let answers = telemetry_py(&prefix, &["/roce/cm", "/roce/port", "/roce/qps"]);
    let cm = device(&answers[0], "/roce/cm");
    assert_eq!(num(cm, "established_passive"), CONNECTIONS, "{cm}");
    assert_eq!(num(cm, "established_active"), 0, "{cm}");
    // Received counts include a peer's retransmissions (a slow machine); sent ones do not.
    assert!(num(cm, "received.req") >= CONNECTIONS, "{cm}");
    assert_eq!(num(cm, "sent.rep"), CONNECTIONS, "{cm}");
    assert!(num(cm, "received.rtu") >= CONNECTIONS, "{cm}");
    assert!(num(cm, "received.dreq") >= CONNECTIONS, "{cm}");
    let port = device(&answers[1], "/roce/port");
    assert_eq!(
        port.get("ip").and_then(Value::as_str),
        Some("10.77.0.1"),
        "{port}"
    );
    assert!(num(port, "rx_packets") > 1000, "{port}");
    assert!(num(port, "tx_packets") > 1000, "{port}");
    assert!(
        num(port, "rx_bytes") > num(port, "rx_packets") * 60,
        "{port}"
    );
    assert!(num(port, "shard0.rx_frames") > 1000, "{port}");
    assert_eq!(num(port, "rx_errors"), 0, "{port}");
    let page = device(&answers[2], "/roce/qps");
    assert_eq!(num(page, "total"), CONNECTIONS, "{page}");
    assert!(page.get("next").is_none(), "one page: {page}");
    let qpns = qpns_of(page);
    assert_eq!(qpns.len() as u64, CONNECTIONS, "{qpns:?}");
    let per_qp: Vec<String> = qpns.iter().map(|n| format!("/roce/qp,{n}")).collect();
    let per_qp: Vec<&str> = per_qp.iter().map(String::as_str).collect();
    let mut received = 0;
    for (qpn, answer) in qpns.iter().zip(telemetry_py(&prefix, &per_qp)) {
        let qp = device(&answer, "/roce/qp").clone();
        assert_eq!(num(&qp, "qpn"), *qpn, "{qp}");
        // Disconnected by the client at the end of its test; the EP is still open.
        assert_eq!(
            qp.get("state").and_then(Value::as_str),
            Some("ERROR"),
            "{qp}"
        );
        assert_eq!(
            qp.get("peer").and_then(Value::as_str),
            Some("10.77.0.2"),
            "{qp}"
        );
        assert!(num(&qp, "packets_received") > 0, "{qp}");
        assert!(num(&qp, "packets_sent") > 0, "{qp}");
        assert!(num(&qp, "acks_sent") > 0, "{qp}");
        assert_eq!(num(&qp, "naks_sent.remote_access"), 0, "{qp}");
        for k in ["retransmits", "timeouts", "duplicates", "naks_received.rnr"] {
            num(&qp, k);
        }
        // Congestion control: off in this profile, nothing marked on a plain veth pair.
        assert_eq!(
            qp.pointer("/congestion/mode").and_then(Value::as_str),
            Some("off"),
            "{qp}"
        );
        for k in ["ce_marks", "cnps_sent", "cnps_received", "rate_kbps"] {
            assert_eq!(num(&qp, &format!("congestion.{k}")), 0, "{qp}");
        }
        // Where it stands: nothing pending on a connection that ended.
        assert_eq!(num(&qp, "sequence.send_wqes"), 0, "{qp}");
        assert_eq!(num(&qp, "sequence.ack_timer_armed"), 0, "{qp}");
        assert!(num(&qp, "sequence.expected_psn") < 1 << 24, "{qp}");
        received += num(&qp, "bytes_received");
    }
    // WRITEs and SENDs of up to 8 KiB, 3000 work requests in all.
    assert!(received > 100_000, "{received} bytes received");
    // A QPN that is not there, and a parameter that is no number: null.
    let missing = telemetry_py(&prefix, &["/roce/qp,1", "/roce/qp,x"]);
    assert!(missing.iter().all(Value::is_null), "{missing:?}");

    // (2) roce-tool stats.
    let out = Command::new(TOOL)
        .args(["stats", "--file-prefix", &prefix, "/roce/net"])
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.starts_with("/roce/net:\n  net_af_packet0:\n"),
        "{text}"
    );
    assert!(printed(&text, "rx_frames") > 1000, "{text}");
    assert!(printed(&text, "rx_roce") > 1000, "{text}");
    assert!(
        printed(&text, "rx_roce") <= printed(&text, "rx_frames"),
        "{text}"
    );
    // The client asked for the server's MAC address before its first REQ.
    assert!(printed(&text, "rx_arp_requests") >= 1, "{text}");
    assert!(printed(&text, "tx_arp_replies") >= 1, "{text}");
    for reason in [
        "runt",
        "not_our_mac",
        "bad_icrc",
        "roce_header",
        "rx_unknown_qp",
    ] {
        printed(&text, reason);
    }
    // The port's congestion counters, summed over its QPs (`/roce/net`'s `congestion`).
    assert!(
        text.contains("    congestion:\n      mode: off\n"),
        "{text}"
    );
    for k in [
        "limited_qps",
        "ce_marks",
        "cnps_sent",
        "cnps_received",
        "rate_cuts",
    ] {
        assert_eq!(printed(&text, k), 0, "{text}");
    }
    // Without a command: the overview, QPs included.
    let out = Command::new(TOOL)
        .args(["stats", "-f", &prefix])
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    for section in ["/roce/port:", "/roce/net:", "/roce/cm:"] {
        assert!(text.contains(section), "{section}:\n{text}");
    }
    for qpn in &qpns {
        assert!(text.contains(&format!("/roce/qp,{qpn}:")), "{qpn}:\n{text}");
    }
    // --watch: the second sample has the rate of each counter that changed, and only those.
    let (first, second) = watch_two_samples(&prefix, "/roce/port");
    assert!(
        !first.contains("/s)"),
        "the first sample has totals only:\n{first}"
    );
    let mut rated = 0;
    for l in second.lines() {
        let Some((k, v)) = l.trim().split_once(": ") else {
            continue;
        };
        let (total, rate) = match v.split_once(" (") {
            Some((t, r)) => (
                t,
                Some(r.strip_suffix("/s)").unwrap_or_else(|| panic!("{l}"))),
            ),
            None => (v, None),
        };
        let Ok(now) = total.parse::<u64>() else {
            continue;
        };
        let before = printed(&first, k);
        match rate {
            Some(r) => {
                rated += 1;
                assert_ne!(now, before, "{k}: rated but unchanged: {l}");
                assert_eq!(r.starts_with('+'), now > before, "{k} was {before}: {l}");
            }
            None => assert_eq!(now, before, "{k} changed without a rate: {l}"),
        }
    }
    // The shard's polls (the away helper's, the telemetry thread's) move on.
    assert!(rated > 0, "no counter changed:\n{first}\n{second}");

    // Without a prefix: this process, or (other tests' processes running) a list naming it.
    let out = Command::new(TOOL)
        .args(["stats", "/roce/cm"])
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(
        (out.status.success() && text.contains("/roce/cm:"))
            || (out.status.code() == Some(2) && text.contains(&prefix)),
        "{text}"
    );
    // A prefix nobody has.
    let out = Command::new(TOOL)
        .args(["stats", "-f", "no-such-prefix-42", "/roce/cm"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));

    // A normal end: the runtime directory (and the socket in it) goes with the process.
    drop(server.child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = server.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = server.stderr();
    assert!(status.success(), "server: {status}\n{}{err}", server.seen);
    assert!(!runtime.exists(), "{} left behind", runtime.display());
    assert_no_runtime_dirs(&format!("{TAG}-"));
}

/// The QPNs of one device's `/roce/qps` page.
fn qpns_of(page: &Value) -> Vec<u64> {
    page.get("qpns")
        .and_then(Value::as_array)
        .unwrap_or_else(|| panic!("qpns in {page}"))
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect()
}

/// The first two samples `roce-tool stats --watch 1 -f prefix command` prints (waits for the
/// third to begin, at most a minute, then stops it).
fn watch_two_samples(prefix: &str, command: &str) -> (String, String) {
    let mut child = Command::new(TOOL)
        .args(["stats", "--watch", "1", "-f", prefix, command])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut samples: Vec<String> = Vec::new();
    while samples.len() < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(l) = rx.recv_timeout(left) else {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "roce-tool stats --watch: {samples:?}\n{}",
                output_text(&out)
            );
        };
        if l.starts_with("== ") {
            samples.push(String::new());
        } else if let Some(s) = samples.last_mut() {
            s.push_str(&l);
            s.push('\n');
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    (samples.remove(0), samples.remove(0))
}

fn hold_qps() -> std::path::PathBuf {
    test_program("roce-hold-qps")
}
/// QPs of the process of the paging test: more than DPDK's 512 array entries, four pages.
const MANY_QPS: usize = 1000;
/// QPNs per `/roce/qps` page at most (`dpdk_roce::dat::telemetry::QPS_PAGE`).
const PAGE: usize = 256;

/// A `roce-hold-qps` process and the QPNs it reported; killed (and what it leaves removed) on
/// drop if still running.
struct QpHolder {
    child: std::process::Child,
    qpns: Vec<u64>,
    prefix: String,
}

impl QpHolder {
    /// Starts it on `profile` (named `name`) with `eps` EPs, again after a PACKET_FANOUT
    /// collision, and waits for `HOLDING`.
    fn start(profile: &std::path::Path, name: &str, eps: usize) -> QpHolder {
        retry_fanout(|_| {
            let mut child = Command::new(hold_qps())
                .arg("--profile")
                .arg(profile)
                .args(["--eps", &eps.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start roce-hold-qps");
            let mut qpns = None;
            let mut seen = String::new();
            let mut holding = false;
            for l in BufReader::new(child.stdout.take().unwrap()).lines() {
                let Ok(l) = l else { break };
                seen.push_str(&l);
                seen.push('\n');
                if let Some(list) = l.strip_prefix("QPNS ") {
                    qpns = Some(list.split(',').map(|n| n.parse().unwrap()).collect());
                }
                if l.starts_with("HOLDING") {
                    holding = true;
                    break;
                }
            }
            let prefix = format!("{name}-{}", child.id());
            if holding {
                let qpns = qpns.unwrap_or_else(|| panic!("no QPNS line:\n{seen}"));
                return Some(QpHolder {
                    child,
                    qpns,
                    prefix,
                });
            }
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            let text = format!("{seen}{}", output_text(&out));
            assert!(
                text.contains(FANOUT_COLLISION),
                "roce-hold-qps did not start:\n{text}"
            );
            None
        })
    }
}

impl Drop for QpHolder {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            remove_runtime_dirs_of(self.child.id());
        }
    }
}

/// `/roce/qps` of a process with more QPs than one answer can carry (DPDK 22.11: 512 array
/// entries, 16 KiB): page after page from `next`, every QPN exactly once, ascending, `total`
/// on every page; `roce-tool stats` pages through them and counts the QPs it does not print.
#[test]
fn qpns_of_more_qps_than_one_answer_holds_are_listed_page_by_page() {
    let tag = "tlq";
    let veth = Veth::up(tag);
    let dir = Dir::new(tag);
    let end_a = veth.end('a');
    let a = profile_copy(&dir.0, "af_packet-a", &[("rocev0a", end_a.as_str())], tag);
    let mut holder = QpHolder::start(&a, &format!("{tag}-af_packet-a"), MANY_QPS);
    let prefix = holder.prefix.clone();
    let mut expected = holder.qpns.clone();
    expected.sort_unstable();
    expected.dedup();
    assert_eq!(expected.len(), MANY_QPS, "distinct QPNs");

    // (1) dpdk-telemetry.py, page by page; the first page without a parameter too.
    let first = telemetry_py(&prefix, &["/roce/qps", "/roce/qps,0"]);
    assert_eq!(first[0], first[1], "no parameter: from 0");
    let mut listed: Vec<u64> = Vec::new();
    let mut from = 0;
    let mut pages = 0;
    loop {
        let answer = telemetry_py(&prefix, &[&format!("/roce/qps,{from}")]).remove(0);
        let page = device(&answer, "/roce/qps");
        pages += 1;
        assert_eq!(num(page, "total"), MANY_QPS as u64, "page {pages}: {page}");
        let qpns = qpns_of(page);
        assert!(
            !qpns.is_empty() && qpns.len() <= PAGE,
            "page {pages}: {page}"
        );
        assert!(qpns[0] >= from, "page {pages} from {from}: {page}");
        assert!(qpns.windows(2).all(|w| w[0] < w[1]), "ascending: {page}");
        listed.extend(&qpns);
        match page.get("next") {
            Some(n) => {
                let n = n.as_u64().unwrap_or_else(|| panic!("next: {page}"));
                assert!(n > *qpns.last().unwrap(), "page {pages}: {page}");
                from = n;
            }
            None => break,
        }
        assert!(pages < MANY_QPS, "pages do not end");
    }
    assert_eq!(pages, MANY_QPS.div_ceil(PAGE));
    assert_eq!(listed, expected, "every QPN exactly once, ascending");
    // Beyond the last QPN: an empty page.
    let past = telemetry_py(
        &prefix,
        &[&format!("/roce/qps,{}", expected[MANY_QPS - 1] + 1)],
    );
    let past = device(&past[0], "/roce/qps");
    assert!(
        qpns_of(past).is_empty() && past.get("next").is_none(),
        "{past}"
    );
    assert_eq!(num(past, "total"), MANY_QPS as u64, "{past}");

    // (2) roce-tool stats: the first 64 QPs, and how many more there are.
    let out = Command::new(TOOL)
        .args(["stats", "-f", &prefix])
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{text}");
    let shown: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("/roce/qp,"))
        .collect();
    assert_eq!(shown.len(), 64, "{text}");
    for (l, qpn) in shown.iter().zip(&expected) {
        assert_eq!(*l, format!("/roce/qp,{qpn}:"));
    }
    assert!(
        text.contains(&format!("({} more QPs: ", MANY_QPS - 64)),
        "{text}"
    );

    // A normal end: standard input closed.
    drop(holder.child.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = holder.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "roce-hold-qps did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    let _ = holder.child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(status.success(), "roce-hold-qps: {status}\n{err}");
    assert_no_runtime_dirs(&format!("{tag}-"));
}

/// With telemetry off (`DPDK_ROCE_TELEMETRY=0`: EAL's `--no-telemetry`) the runtime directory
/// goes right after EAL starts: even a killed process leaves nothing.
#[test]
fn with_telemetry_off_not_even_a_killed_process_leaves_its_runtime_directory() {
    let veth = Veth::up("tlo");
    let dir = Dir::new("tlo");
    let end_a = veth.end('a');
    let a = profile_copy(&dir.0, "af_packet-a", &[("rocev0a", end_a.as_str())], "tlo");
    retry_fanout(|_| {
        let mut child = Command::new(SOAK)
            .arg("--profile")
            .arg(&a)
            .arg("--server")
            .env("DPDK_ROCE_TELEMETRY", "0")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start roce-soak --server");
        let mut first = String::new();
        let _ = BufReader::new(child.stdout.take().unwrap()).read_line(&mut first);
        let runtime = PathBuf::from(format!("/var/run/dpdk/tlo-af_packet-a-{}", child.id()));
        let left = runtime.exists();
        let _ = child.kill();
        let status = child.wait().unwrap();
        let mut err = String::new();
        let _ = child.stderr.take().unwrap().read_to_string(&mut err);
        let _ = std::fs::remove_dir_all(&runtime);
        if first.starts_with("READY") {
            assert!(!left, "{} exists with telemetry off", runtime.display());
            assert!(!runtime.exists());
            assert_no_runtime_dirs("tlo-");
            return Some(());
        }
        assert!(
            err.contains(FANOUT_COLLISION),
            "the server did not start ({status}):\n{first}{err}"
        );
        None
    })
}
