//! DPDK ports on real virtual devices, each run in its own process (`dpdk-port-check`), since
//! EAL initialises once per process.
//!
//! Needs root (creates veth pairs and tap devices) and the DPDK packages; without them the tests
//! fail with a message saying so, they never skip.

mod test_programs;
use test_programs::test_program;

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn bin() -> std::path::PathBuf {
    test_program("dpdk-port-check")
}

fn ip(args: &[&str]) -> Output {
    Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` (install iproute2): {e}"))
}

fn must(args: &[&str]) {
    let out = ip(args);
    assert!(
        out.status.success(),
        "`ip {}` failed: {} (these tests need root to create veth/tap devices)",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

fn disable_ipv6(iface: &str) {
    // Best effort against noise only: the tests filter frames anyway.
    let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{iface}/disable_ipv6"), "1");
}

/// Deletes the named links when dropped, also when the test panics.
struct LinkGuard(Vec<String>);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        for l in &self.0 {
            let _ = ip(&["link", "del", l]);
        }
    }
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

#[test]
fn af_packet_veth_pair_carries_frames_intact() {
    let pid = std::process::id();
    let (a, b) = (format!("dr{pid}a"), format!("dr{pid}b"));
    must(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
    let _guard = LinkGuard(vec![a.clone()]); // deleting one end deletes the pair
    for i in [&a, &b] {
        disable_ipv6(i);
        must(&["link", "set", i, "mtu", "9000", "up"]);
    }

    let out = Command::new(bin())
        .args(["af-packet", &a, &b, "--count", "40", "--mem", "no-huge"])
        .output()
        .expect("run dpdk-port-check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(out.status.success(), "dpdk-port-check failed\n{report}");

    let result = stdout
        .lines()
        .find(|l| l.starts_with("RESULT "))
        .unwrap_or_else(|| panic!("no RESULT line\n{report}"));
    for (k, v) in [
        ("sent", "40"),
        ("received", "40"),
        ("intact", "40"),
        ("extbuf_attached", "4"),
        ("extbuf_released", "4"),
        ("tx_pool_in_use", "0"),
        ("p0_opackets", "40"),
        ("p1_ierrors", "0"),
    ] {
        assert_eq!(field(result, k), Some(v), "{k} in {result}\n{report}");
    }
    // The port counts every frame it received: ours, and the kernel's own on the fresh veth
    // (`stray`, a handful at most: an IPv6 or ARP frame sent before the test's settings took).
    let count = |k: &str| -> u64 {
        field(result, k)
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} in {result}"))
    };
    assert!(count("stray") <= 8, "{result}\n{report}");
    assert_eq!(
        count("p1_ipackets"),
        40 + count("stray"),
        "{result}\n{report}"
    );
    let eal = stdout
        .lines()
        .find(|l| l.starts_with("EAL "))
        .unwrap_or_else(|| panic!("no EAL line\n{report}"));
    assert_eq!(field(eal, "reinit_ok"), Some("true"), "{eal}");
    assert_eq!(field(eal, "ports"), Some("2"), "{eal}");
    let ready = stdout
        .lines()
        .find(|l| l.starts_with("READY "))
        .unwrap_or_else(|| panic!("no READY line\n{report}"));
    assert_eq!(field(ready, "driver"), Some("net_af_packet"), "{ready}");
    assert_eq!(field(ready, "link1_up"), Some("true"), "{ready}");
    assert_eq!(field(ready, "promisc1"), Some("true"), "{ready}");
    // The MACs DPDK reports are the kernel's MACs of the two veth ends.
    let kernel_mac = |i: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{i}/address"))
            .expect("veth address")
            .trim()
            .to_owned()
    };
    assert_eq!(field(ready, "mac0"), Some(kernel_mac(&a).as_str()));
    assert_eq!(field(ready, "mac1"), Some(kernel_mac(&b).as_str()));
}

#[test]
fn tap_port_answers_arp_and_receives_kernel_udp() {
    let pid = std::process::id();
    let iface = format!("dt{pid}");
    // A /30 of the benchmarking range 198.18.0.0/15, distinct per process.
    let net = [198, 18, ((pid >> 6) & 0xff) as u8, ((pid & 63) * 4) as u8];
    let kernel_ip = format!("{}.{}.{}.{}", net[0], net[1], net[2], net[3] + 1);
    let dpdk_ip = format!("{}.{}.{}.{}", net[0], net[1], net[2], net[3] + 2);
    let _guard = LinkGuard(vec![iface.clone()]);

    let mut child = Command::new(bin())
        .args(["tap", &iface, "--ip", &dpdk_ip, "--timeout-ms", "8000"])
        .args(["--mem", "no-huge"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn dpdk-port-check");
    let (tx, rx) = mpsc::channel::<String>();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let wait_for = |prefix: &str, lines: &mut Vec<String>| -> Option<String> {
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match rx.recv_timeout(left) {
                Ok(l) => {
                    lines.push(l.clone());
                    if l.starts_with(prefix) || l.starts_with("ERROR") {
                        return Some(l);
                    }
                }
                Err(_) => return None,
            }
        }
        None
    };

    let ready = wait_for("READY", &mut lines);
    let ready = match ready {
        Some(r) if r.starts_with("READY") => r,
        other => {
            let _ = child.kill();
            let out = child.wait_with_output().expect("wait");
            panic!(
                "dpdk-port-check never became ready ({other:?})\nstdout: {lines:?}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    assert_eq!(field(&ready, "driver"), Some("net_tap"), "{ready}");

    disable_ipv6(&iface);
    must(&["addr", "add", &format!("{kernel_ip}/30"), "dev", &iface]);
    must(&["link", "set", &iface, "up"]);

    // The kernel resolves dpdk_ip by ARP on the tap (DPDK answers), then sends the datagram.
    let sock = UdpSocket::bind((kernel_ip.as_str(), 0)).expect("bind on the tap's address");
    let payload = format!("dpdk-roce-{pid}");
    let mut result = None;
    let sender_deadline = Instant::now() + Duration::from_secs(8);
    while result.is_none() && Instant::now() < sender_deadline {
        let _ = sock.send_to(payload.as_bytes(), (dpdk_ip.as_str(), 9));
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(200)) {
            lines.push(l.clone());
            if l.starts_with("RESULT") || l.starts_with("ERROR") {
                result = Some(l);
            }
        }
    }
    let status = child.wait().expect("wait for dpdk-port-check");
    while let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
        lines.push(l);
    }
    let result = result.unwrap_or_else(|| panic!("no RESULT line; stdout: {lines:?}"));
    assert!(status.success(), "dpdk-port-check failed: {lines:?}");
    assert_eq!(
        field(&result, "udp_payload"),
        Some(payload.as_str()),
        "{lines:?}"
    );
    let arp: u32 = field(&result, "arp_requests")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(
        arp >= 1,
        "DPDK never saw the kernel's ARP request: {lines:?}"
    );
}

/// EAL makes its runtime directory (/var/run/dpdk/<file prefix>) early in `rte_eal_init` and
/// does not remove it when a later step fails. A process whose EAL init fails (here: hugepage
/// memory asked for in a directory that is no hugetlbfs mount, so "Cannot get hugepage
/// information") must still leave nothing there: a directory left behind by one failed run made
/// the next run's checks fail.
#[test]
fn a_process_whose_eal_init_fails_leaves_no_runtime_directory() {
    const LAT: &str = env!("CARGO_BIN_EXE_roce-lat");
    let pid = std::process::id();
    let prefix = format!("ealfail-{pid}");
    let runtime = std::path::PathBuf::from(format!("/var/run/dpdk/{prefix}"));
    let _ = std::fs::remove_dir_all(&runtime);
    let dir = std::env::temp_dir().join(format!("dpdk-roce-ealfail-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = dir.join("ealfail.toml");
    std::fs::write(
        &profile,
        format!(
            "name = \"ealfail\"\n\
             [eal]\nlcores = [0]\nhugepages = true\nfile_prefix = \"{prefix}\"\n\
             extra_args = [\"--huge-dir={}\"]\n\
             [port]\npmd = \"af_packet\"\niface = \"ef{pid}\"\n\
             [roce]\naddress = \"10.77.9.1/24\"\n\
             [engine]\npoll_cores = [0]\nprogress = \"inline\"\n",
            dir.display()
        ),
    )
    .unwrap();
    let out = Command::new(LAT)
        .args(["--profile", profile.to_str().unwrap(), "--server"])
        .output()
        .expect("run roce-lat");
    let report = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!out.status.success(), "EAL init should fail\n{report}");
    assert!(
        report.contains("Cannot get hugepage information"),
        "EAL should fail on the hugepage directory, after making its runtime directory\n{report}"
    );
    let left = runtime.exists();
    let _ = std::fs::remove_dir_all(&runtime);
    assert!(
        !left,
        "EAL runtime dir left behind: {}\n{report}",
        runtime.display()
    );
}
