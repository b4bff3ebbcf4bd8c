//! The real DAT test programs (Debian dapl2-utils) through libdat2 on dpdk-roce: two processes
//! over net_af_packet on a veth pair created here. Each side gets its own `dat.conf`
//! (DAT_OVERRIDE) naming the same IA `dr` with its own profile: the dtest client takes the IA
//! name the server publishes over TCP 15828, so the name must mean "this host's port" on both.
//! Inline progress (each process drives its port while it waits in a DAT call).

mod dpdk_common;

use dpdk_common::{output_text, Veth, FANOUT_COLLISION};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The provider library cargo built next to the test binaries.
fn provider_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    // `cargo test` builds the cdylib next to the rlib the tests link, in deps/ (only `cargo
    // build` copies it up to target/<profile>/, so that copy can be stale or missing).
    let lib = dir.join("deps/libdpdk_roce.so");
    assert!(lib.is_file(), "provider library missing: {}", lib.display());
    lib
}

/// `engine.idle_pause_us` of the test profiles (only core progress uses it).
const IDLE_PAUSE_US: u32 = 20;

/// A temp dir with profiles a/b on the veth ends and one dat.conf per side.
struct Setup {
    dir: PathBuf,
    _veth: Veth,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        let veth = Veth::up(tag);
        let dir = std::env::temp_dir().join(format!("dpdk-roce-dat-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let repo = dpdk_common::repo();
        for side in ['a', 'b'] {
            let text =
                std::fs::read_to_string(repo.join(format!("dpdk-config/af_packet-{side}.toml")))
                    .unwrap();
            let text = text
                .replace(
                    &format!("iface = \"rocev0{side}\""),
                    &format!("iface = \"{}\"", veth.end(side)),
                )
                .replace(
                    &format!("name = \"af_packet-{side}\""),
                    &format!("name = \"dat{tag}-{side}\""),
                )
                // Core progress shares each of the 2 vCPUs between a poll thread and the
                // program's own spinning thread: an idle poll thread sleeps so that the
                // program's thread gets the core between packets.
                .replace(
                    "idle_pause_us = 0",
                    &format!("idle_pause_us = {IDLE_PAUSE_US}"),
                );
            let profile = dir.join(format!("{side}.toml"));
            std::fs::write(&profile, text).unwrap();
            let conf = format!(
                "dr u2.0 nonthreadsafe default {} dapl.2.0 \"{}\" \"\"\n",
                provider_lib().display(),
                profile.display()
            );
            std::fs::write(dir.join(format!("{side}.conf")), conf).unwrap();
        }
        Setup { dir, _veth: veth }
    }

    fn conf(&self, side: char) -> PathBuf {
        self.dir.join(format!("{side}.conf"))
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How the provider makes progress in the test programs (DPDK_ROCE_PROGRESS).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// The thread waiting in a DAT call drives the port.
    Inline,
    /// A poll thread per process (pinned as the profile says): needed when a program spins on
    /// memory without DAT calls (dtest -W, the dtestx atomic target).
    Core,
}

impl Progress {
    fn env(self) -> &'static str {
        match self {
            Progress::Inline => "inline",
            Progress::Core => "core",
        }
    }
}

/// Runs `program` as server (side a) and client (side b) with `args`; returns both outputs.
/// The client's `-h` is `host`: the TCP host where dtest/dtestx/dtestcm servers publish their
/// IA address, or (dtestsrq) the server's IA address itself.
fn run_pair(
    s: &Setup,
    program: &str,
    args: &[&str],
    host: &str,
    progress: Progress,
    attempt: usize,
) -> (Output, Output) {
    let cmd = |side: char, client: bool| {
        let mut c = Command::new(program);
        c.env("DAT_OVERRIDE", s.conf(side))
            .env("DPDK_ROCE_PROGRESS", progress.env())
            .args(["-P", "dr"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if client {
            c.args(["-h", host]);
        }
        c
    };
    let server = cmd('a', false).spawn().expect("start server");
    // The server publishes its address on TCP 15828 once its IA is open.
    std::thread::sleep(Duration::from_secs(3));
    // net_af_packet's fanout group id is (pid ^ ifindex) & 0xffff: the two ends of one veth
    // pair have neighbouring ifindexes, so a client whose pid is the server's plus one can
    // collide every time. A retry first spends a few pids to break that pattern.
    for _ in 0..attempt {
        let _ = Command::new("true").status();
    }
    let client = cmd('b', true).spawn().expect("start client");
    let (srv_pid, cli_pid) = (server.id(), client.id());
    // A watchdog: neither side may hang the suite.
    let watchdog = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        for pid in [srv_pid, cli_pid] {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    });
    let client = client.wait_with_output().unwrap();
    if !client.status.success() || output_text(&client).contains(FANOUT_COLLISION) {
        // The client never connected: stop the server waiting for it.
        let _ = Command::new("kill").arg(srv_pid.to_string()).status();
    }
    let server = server.wait_with_output().unwrap();
    drop(watchdog);
    (server, client)
}

/// Runs the pair, again when net_af_packet's PACKET_FANOUT id collided (tests/dpdk_common).
fn run_pair_retrying(
    s: &Setup,
    program: &str,
    args: &[&str],
    host: &str,
    progress: Progress,
) -> (String, String) {
    for attempt in 0..3 {
        let (srv, cli) = run_pair(s, program, args, host, progress, attempt);
        let (srv, cli) = (output_text(&srv), output_text(&cli));
        if !srv.contains(FANOUT_COLLISION) && !cli.contains(FANOUT_COLLISION) {
            return (srv, cli);
        }
        let line = |t: &str| {
            t.lines()
                .find(|l| l.contains(FANOUT_COLLISION))
                .unwrap_or_default()
                .to_string()
        };
        eprintln!(
            "net_af_packet PACKET_FANOUT collision ({}{}): retrying with new processes",
            line(&srv),
            line(&cli)
        );
    }
    panic!("PACKET_FANOUT collision three times");
}

fn assert_passed(what: &str, out: &str, pass: &str) {
    assert!(out.contains(pass), "{what}: no {pass:?} line:\n{out}");
    let bad: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("ERR") || l.to_lowercase().contains("error"))
        .collect();
    assert!(bad.is_empty(), "{what}: error lines {bad:?}:\n{out}");
    for l in out
        .lines()
        .filter(|l| l.contains("latency") || l.contains("MB/s") || l.contains("MB/sec"))
    {
        println!("{what}: {l}");
    }
}

/// Where the servers publish their IA address (kernel TCP 15828).
const LOCALHOST: &str = "127.0.0.1";

/// dtest servers listen on kernel TCP 15828: one pair at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs dtest with `-b 4096` and `extra`; both sides must pass. Returns the client output.
fn dtest(tag: &str, extra: &[&str], progress: Progress) -> String {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new(tag);
    let mut args = vec!["-b", "4096"];
    args.extend_from_slice(extra);
    let (srv, cli) = run_pair_retrying(&s, "dtest", &args, LOCALHOST, progress);
    assert_passed("dtest server", &srv, "PASSED");
    assert_passed("dtest client", &cli, "PASSED");
    assert_no_dpdk_runtime_dir(tag);
    cli
}

/// No EAL runtime directory of either process is left under /var/run/dpdk (their file
/// prefixes are `<profile name>-<pid>`, the profile names `dat<tag>-a` / `dat<tag>-b`).
fn assert_no_dpdk_runtime_dir(tag: &str) {
    let Ok(dir) = std::fs::read_dir("/var/run/dpdk") else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        assert!(
            !name.starts_with(&format!("dat{tag}-")),
            "EAL runtime dir left behind: /var/run/dpdk/{name}"
        );
    }
}

/// Its RDMA read and message ping-pong phases ran (DAT_IB_RDMA_READ = TRUE).
fn assert_all_phases(cli: &str) {
    assert!(cli.contains("RDMA READ DATA"), "{cli}");
    assert!(cli.contains("Message PingPong"), "{cli}");
}

#[test]
fn dtest_default_passes_over_af_packet() {
    assert_all_phases(&dtest("dd", &[], Progress::Inline));
}

#[test]
fn dtest_polling_mode_passes() {
    assert_all_phases(&dtest("dp", &["-p"], Progress::Inline));
}

/// `-c`: completions are collected through a CNO attached to both DTO EVDs.
#[test]
fn dtest_cno_mode_passes() {
    let cli = dtest("dc", &["-c"], Progress::Inline);
    assert_all_phases(&cli);
}

/// `-W`: the RDMA write ping-pong spins on memory without DAT calls, so each provider's own
/// poll thread makes progress (core mode).
#[test]
fn dtest_rdma_write_ping_pong_passes_with_core_progress() {
    let cli = dtest("dw", &["-W"], Progress::Core);
    assert!(
        cli.contains("RDMA write ping-pong") || cli.contains("PingPong"),
        "{cli}"
    );
}

/// `-W -D`: the same ping-pong with every received buffer's data checked.
#[test]
fn dtest_rdma_write_ping_pong_with_data_check_passes() {
    dtest("dv", &["-W", "-D"], Progress::Core);
}

/// dtestx: RDMA write with immediate, compare-and-swap and fetch-and-add (IB extensions via
/// `handle_extendedop`). The atomics' target makes no DAT call while the peer works on its
/// memory: core progress.
#[test]
fn dtestx_extensions_pass() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new("dx");
    let (srv, cli) = run_pair_retrying(&s, "dtestx", &[], LOCALHOST, Progress::Core);
    for (what, out) in [("dtestx server", &srv), ("dtestx client", &cli)] {
        assert_passed(what, out, "PASSED");
    }
    for op in ["CMP_SWAP", "FETCH_ADD", "IMMED"] {
        assert!(
            cli.lines().any(|l| l.contains(op) && l.contains("PASSED"))
                || srv.lines().any(|l| l.contains(op) && l.contains("PASSED")),
            "no {op} PASSED line:\n{srv}\n{cli}"
        );
    }
    assert_no_dpdk_runtime_dir("dx");
}

/// dtestcm -c 100: 100 connections set up and torn down, all connected on both sides.
#[test]
fn dtestcm_100_connections_pass() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new("dm");
    let (srv, cli) = run_pair_retrying(&s, "dtestcm", &["-c", "100"], LOCALHOST, Progress::Inline);
    assert_passed("dtestcm server", &srv, "Connection Test Complete");
    assert_passed("dtestcm client", &cli, "Connection Test Complete");
    assert_no_dpdk_runtime_dir("dm");
}

/// dtestsrq: receives through a shared receive queue; after the client's disconnect both
/// sides wait for DAT_ASYNC_ERROR_EP_BROKEN on the IA's async EVD (the SRQ EP's "last WQE
/// reached"), and the server's last sends must complete successfully, not flushed. The
/// client takes the server's IA address itself (10.77.0.1, side a of the veth pair).
#[test]
fn dtestsrq_passes() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new("dq");
    let (srv, cli) = run_pair_retrying(&s, "dtestsrq", &[], "10.77.0.1", Progress::Inline);
    assert_passed("dtestsrq server", &srv, "RC SRQ Test Complete");
    assert_passed("dtestsrq client", &cli, "RC SRQ Test Complete");
    assert_no_dpdk_runtime_dir("dq");
}
