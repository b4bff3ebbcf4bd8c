//! Helpers of the tests that run DPDK processes over net_af_packet: a veth pair named after the
//! test process (removed on drop, also when an assertion fails), and the one retried start-up
//! failure.
//!
//! # The PACKET_FANOUT collision
//!
//! DPDK 22.11's net_af_packet (`drivers/net/af_packet/rte_eth_af_packet.c`,
//! `rte_pmd_init_internals`) joins every queue's socket to the PACKET_FANOUT group
//! `(getpid() ^ ifindex) & 0xffff`. Fanout group ids are per network namespace, so two
//! concurrent processes whose pid and interface index happen to give the same id collide: the
//! kernel refuses the second socket with EINVAL (`fanout_add`: same id, other device) and the
//! port fails to probe ("could not set PACKET_FANOUT"). No devarg chooses the id in 22.11 and a
//! process cannot change its pid, so the failure cannot be retried inside the process (nor at
//! port-open level); the retry is one level up, with a new process (a new pid).

#![allow(dead_code)]

pub mod soak;

use std::path::PathBuf;
use std::process::{Command, Output};

/// What net_af_packet logs when its fanout group id collides with another process's.
pub const FANOUT_COLLISION: &str = "could not set PACKET_FANOUT";

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The provider library `cargo test` built beside the test binaries, for a dat.conf of a
/// test's own (`cargo build` copies it to target/<profile>/ only then; deps/ is current).
pub fn provider_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe
        .parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>")
        .join("deps/libdpdk_roce.so");
    assert!(lib.is_file(), "provider library missing: {}", lib.display());
    lib
}

/// A directory of a test's files, `dpdk-roce-<tag>-<pid>` under the temporary directory,
/// created now and removed on drop (also when an assertion fails).
pub struct Dir(pub PathBuf);

impl Dir {
    pub fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("dpdk-roce-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A veth pair `<prefix>a` / `<prefix>b` (scripts/veth.sh), deleted on drop.
pub struct Veth {
    pub prefix: String,
}

impl Veth {
    /// Creates the pair named `dr<tag><pid>`; fails the test loudly when it cannot (root).
    pub fn up(tag: &str) -> Veth {
        let prefix = format!("dr{tag}{}", std::process::id() % 100_000);
        let out = Command::new("bash")
            .arg(repo().join("scripts/veth.sh"))
            .args(["up", &prefix])
            .output()
            .expect("run scripts/veth.sh");
        assert!(
            out.status.success(),
            "cannot create the veth pair (root needed): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Veth { prefix }
    }

    /// The interface of side `a` or `b`.
    pub fn end(&self, side: char) -> String {
        format!("{}{side}", self.prefix)
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/veth.sh"))
            .args(["down", &self.prefix])
            .output();
    }
}

/// Adds `keys` (TOML lines) at the top of the `[roce]` section of the profile at `profile`.
pub fn add_roce_keys(profile: &std::path::Path, keys: &str) {
    let text = std::fs::read_to_string(profile).unwrap();
    assert!(
        text.contains("\n[roce]\n"),
        "{} has no [roce]",
        profile.display()
    );
    let text = text.replacen("\n[roce]\n", &format!("\n[roce]\n{keys}\n"), 1);
    std::fs::write(profile, text).unwrap();
}

/// Whether a failed run is the fanout collision (DPDK logs go to stderr, ours to stdout).
pub fn is_fanout_collision(out: &Output) -> bool {
    !out.status.success()
        && (String::from_utf8_lossy(&out.stderr).contains(FANOUT_COLLISION)
            || String::from_utf8_lossy(&out.stdout).contains(FANOUT_COLLISION))
}

/// Runs `attempt` (which starts fresh DPDK processes; its argument counts the attempts from 0)
/// until it returns `Some`, which it does unless its processes hit the fanout collision; six
/// attempts at most, then the test fails. The one retry of the suite's DPDK tests.
///
/// net_af_packet derives its fanout group id from the process id and the interface index, so
/// two tests that start processes on fresh veth pairs at the same time can collide, and collide
/// again if both retry in step: each retry first waits a random 50-800 ms. A client can also
/// collide with its own server (pid + 1 on the neighbouring ifindex): each retry spends a few
/// pids too.
pub fn retry_fanout<T>(mut attempt: impl FnMut(usize) -> Option<T>) -> T {
    for n in 0..6 {
        if let Some(t) = attempt(n) {
            return t;
        }
        fanout_retry_wait();
        for _ in 0..=n {
            let _ = Command::new("true").status();
        }
    }
    panic!("net_af_packet PACKET_FANOUT collision six times");
}

/// [`retry_fanout`] of a run whose output is the fanout collision when it failed with it and
/// nothing else. Returns the first other output.
pub fn retry_fanout_collision(mut run: impl FnMut() -> Output) -> Output {
    retry_fanout(|_| {
        let out = run();
        (!is_fanout_collision(&out)).then_some(out)
    })
}

/// Waits a random 50-800 ms before a retry after a PACKET_FANOUT group collision, so that two
/// tests that collided do not retry in step and collide again.
pub fn fanout_retry_wait() {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let wait = std::time::Duration::from_millis(50 + random % 750);
    eprintln!(
        "net_af_packet PACKET_FANOUT group collision with another process: retrying in {wait:?}"
    );
    std::thread::sleep(wait);
}

/// stdout and stderr of a run, for assertion messages.
pub fn output_text(out: &Output) -> String {
    // The exit status too: a process killed by a signal loses its buffered stdout, and the
    // status is then the only trace of what happened.
    format!(
        "{}{}[{}]\n",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        out.status
    )
}

/// Removes the EAL runtime directories of process `pid` (`/var/run/dpdk/<name>-<pid>`, the
/// profiles' default file prefix) and its hugepage files: a test that killed a DPDK process it started cleans up what
/// EAL could not, so a later test's `assert_no_runtime_dirs` does not find it.
pub fn remove_runtime_dirs_of(pid: u32) {
    let suffix = format!("-{pid}");
    if let Ok(dir) = std::fs::read_dir("/var/run/dpdk") {
        for e in dir.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(&suffix) {
                let _ = std::fs::remove_dir_all(e.path());
                for f in dpdk_roce::dpdk::hugepage_files(&name) {
                    let _ = std::fs::remove_file(f);
                }
            }
        }
    }
}

/// EAL leaves no runtime directory (`/var/run/dpdk/<file-prefix>`) behind.
pub fn assert_no_runtime_dirs(profile_prefix: &str) {
    let left: Vec<String> = std::fs::read_dir("/var/run/dpdk")
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(profile_prefix))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "DPDK runtime dirs left behind: {left:?}");
}

/// Runs a two-port test binary (`bin <veth end a> <veth end b> args...`) on a fresh veth pair
/// named after `tag` (retrying the fanout collision), asserts it succeeded and that its EAL
/// left no runtime directory (the binary prints `prefix=<file prefix>`); returns its stdout.
pub fn run_two_port_bin(bin: &std::path::Path, tag: &str, args: &[&std::ffi::OsStr]) -> String {
    let veth = Veth::up(tag);
    let out = retry_fanout_collision(|| {
        Command::new(bin)
            .arg(veth.end('a'))
            .arg(veth.end('b'))
            .args(args)
            .output()
            .expect("start the test binary")
    });
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{} failed:\n{}",
        bin.display(),
        output_text(&out)
    );
    let eal_prefix = text
        .lines()
        .find_map(|l| l.split("prefix=").nth(1))
        .expect("prefix printed");
    assert!(
        !PathBuf::from("/var/run/dpdk")
            .join(eal_prefix.trim())
            .exists(),
        "EAL runtime dir left behind"
    );
    text
}

/// `OsStr` views of string arguments, for [`run_two_port_bin`].
pub fn os_args<'a>(args: &[&'a str]) -> Vec<&'a std::ffi::OsStr> {
    args.iter().map(|a| std::ffi::OsStr::new(*a)).collect()
}

/// A copy in `dir` of the shipped profile `dpdk-config/<name>.toml` without hugepages (512 MiB
/// of ordinary memory), named `<prefix>-<name>`, with each `(from, to)` of `edits` replaced
/// (e.g. the interface or socket of this test).
pub fn profile_copy(
    dir: &std::path::Path,
    name: &str,
    edits: &[(&str, &str)],
    prefix: &str,
) -> PathBuf {
    let mut text = std::fs::read_to_string(repo().join(format!("dpdk-config/{name}.toml")))
        .unwrap()
        .replace("hugepages = true", "hugepages = false\nmemory_mb = 512")
        .replace(
            &format!("name = \"{name}\""),
            &format!("name = \"{prefix}-{name}\""),
        );
    for (from, to) in edits {
        text = text.replace(from, to);
    }
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs `scripts/<name>` with `args`; its output (the test fails if the script does).
pub fn script(name: &str, args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo().join("scripts").join(name))
        .args(args)
        .output()
        .unwrap();
    let text = output_text(&out);
    assert!(out.status.success(), "{name} {args:?}:\n{text}");
    text
}

/// The `roce-tool` program of this build (`target/<profile>/`, beside the test binaries'
/// `deps/`; cargo builds every program of the package before its integration tests).
pub fn roce_tool() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(std::path::Path::parent)
        .expect("target/<profile>")
        .join("roce-tool")
}

/// `roce-tool decode` of `pcap`: every RoCEv2 frame has a valid ICRC; returns how many there are.
pub fn decode_all_valid(pcap: &std::path::Path) -> u64 {
    let out = Command::new(roce_tool())
        .arg("decode")
        .arg(pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "decode found bad frames:\n{text}");
    let summary = text.lines().last().unwrap_or_default();
    let rocev2 = summary
        .split("rocev2: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no summary: {summary}"));
    assert!(
        summary.contains(&format!("rocev2: {rocev2}, valid: {rocev2}, bad icrc: 0")),
        "{summary}"
    );
    rocev2
}

/// Cuts a capture that a killed process left behind to its whole records: SIGKILL can stop the
/// write in flight between two pages (the kernel ends a write for a fatal signal there), so
/// the file may end in part of its last record, never anywhere else. Returns the bytes cut;
/// panics when the file is not a pcap or a record before the last is damaged.
pub fn cut_to_whole_records(pcap: &std::path::Path) -> usize {
    let data = std::fs::read(pcap).unwrap();
    assert!(
        data.len() >= 24 && data[..4] == 0xa1b2_c3d4u32.to_le_bytes(),
        "{} is not a little-endian pcap",
        pcap.display()
    );
    let mut at = 24;
    while data.len() - at >= 16 {
        let word = |k: usize| u32::from_le_bytes(data[at + k..at + k + 4].try_into().unwrap());
        let (caplen, len) = (word(8) as usize, word(12) as usize);
        assert!(
            caplen <= 65535 && caplen <= len,
            "{}: a damaged record header at byte {at}",
            pcap.display()
        );
        if data.len() - at - 16 < caplen {
            break;
        }
        at += 16 + caplen;
    }
    let cut = data.len() - at;
    if cut > 0 {
        std::fs::write(pcap, &data[..at]).unwrap();
    }
    cut
}

/// tshark finds no malformed frame, no error-level expert note and no bad IPv4 checksum.
/// Wireshark's RPC-over-RDMA heuristic is off: it claims SEND payloads of application data
/// (roce-bw's) that merely look like its header, and reports them malformed.
pub fn tshark_clean(pcap: &std::path::Path) {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["--disable-protocol", "rpcordma"])
        .args(["-o", "ip.check_checksum:TRUE"])
        // RoCEv2 over IPv6 sends UDP checksum 0, as rxe does (docs/DESIGN.md "IPv6").
        .args(["-o", "udp.ignore_ipv6_zero_checksum:TRUE", "-Y"])
        .arg("_ws.malformed || _ws.expert.severity >= 8388608 || ip.checksum.status == 0")
        .output()
        .expect("tshark (scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let flagged = String::from_utf8_lossy(&out.stdout);
    assert!(flagged.trim().is_empty(), "tshark flags frames:\n{flagged}");
}

/// A Linux router in a network namespace (scripts/router.sh), deleted on drop.
pub struct Router {
    pub name: String,
}

impl Router {
    /// A router named `rr<tag><pid>` forwarding between interfaces `x` (address `cx`) and `y`
    /// (`cy`), which it moves into its namespace.
    pub fn up(tag: &str, x: &str, cx: &str, y: &str, cy: &str) -> Router {
        let router = Router {
            name: format!("rr{tag}{}", std::process::id() % 100_000),
        };
        Router::script(&["up", &router.name, x, cx, y, cy]);
        router
    }

    /// Runs scripts/router.sh with `args`; its output (the test fails if it does).
    pub fn script(args: &[&str]) -> String {
        script("router.sh", args)
    }

    /// IPv4 datagrams the router forwarded so far (its `ForwDatagrams`).
    pub fn forwarded(&self) -> u64 {
        let text = Router::script(&["status", &self.name]);
        let mut ip = text.lines().filter(|l| l.starts_with("Ip:"));
        let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
        let k = names
            .split_whitespace()
            .position(|w| w == "ForwDatagrams")
            .unwrap();
        values.split_whitespace().nth(k).unwrap().parse().unwrap()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(repo().join("scripts/router.sh"))
            .args(["down", &self.name])
            .output();
    }
}

/// What a server's provider logs once its listener takes connection requests
/// (`dpdk_roce::log::LISTEN_TARGET` at `info`, enabled by [`LISTEN_LOG`]).
pub const LISTENING: &str = "dpdk_roce::cm::listen: listening";
/// The kernel TCP port where dtest, dtestx and dtestcm servers publish their IA address (fixed
/// in the programs: one such server per network namespace at a time).
pub const DTEST_PORT: u16 = 15828;
/// A hold on kernel TCP [`DTEST_PORT`] across processes: scripts/test.sh runs interop_rxe
/// beside the other test binaries, and a dtest, dtestx or dtestcm server of either would find
/// the port taken. An exclusive lock on a file of the run directory, let go when dropped.
pub struct DtestPortLock(#[allow(dead_code)] std::fs::File);

/// Waits for [`DtestPortLock`].
pub fn lock_dtest_port() -> DtestPortLock {
    let dir = std::path::Path::new("/run/dpdk-roce");
    std::fs::create_dir_all(dir).expect("create /run/dpdk-roce (root needed)");
    let path = dir.join(format!("tcp-{DTEST_PORT}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    DtestPortLock(file)
}

/// dtestx (dapl2-utils) orders its fetch-and-add phase with sleeps: each side writes its
/// target's first value (server 0x10, client 0x100), sleeps a second and adds to the other's.
/// A side that reaches the phase over a second after the other (a process starved of CPU)
/// writes its first value over the other's first add, and its final value lacks that add
/// (server 0x20 for 0x30, client 0x200 for 0x300): the program's race, not the provider's.
/// True when `out`, either side's output, failed exactly so.
pub fn dtestx_fetch_add_raced(out: &str) -> bool {
    let last = |label: &str| {
        out.lines()
            .rfind(|l| l.contains(label))
            .and_then(|l| l.split('=').nth(1))
            .and_then(|v| v.split(',').next())
            .and_then(|v| u64::from_str_radix(v.trim().trim_start_matches("0x"), 16).ok())
    };
    out.contains("ERROR: Server FETCH_ADD")
        && (last("Client final result (on Server)") == Some(0x20)
            || last("Server final result (on Client)") == Some(0x200))
}

/// The provider's log filter (`DPDK_ROCE_LOG`) of a server a test waits for: warnings, and the
/// listener's ready line.
pub const LISTEN_LOG: &str = "warn,dpdk_roce::cm::listen=info";

/// A program a test started (a DPDK process): stdout and stderr read while it runs, so a
/// chatty one never blocks and a test can wait for a line of its stderr
/// ([`Proc::wait_for_stderr`]) instead of sleeping; killed when dropped still running, and
/// what its killed EAL could not remove (runtime directory, hugepage files) removed.
pub struct Proc {
    child: std::process::Child,
    out: std::sync::Arc<Stream>,
    err: std::sync::Arc<Stream>,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// A pipe's bytes so far, and whether it reached its end; signalled on every read.
#[derive(Default)]
struct Stream {
    state: std::sync::Mutex<(Vec<u8>, bool)>,
    grew: std::sync::Condvar,
}

impl Stream {
    /// A thread appending what `pipe` gives to a new stream until its end.
    fn read(
        mut pipe: impl std::io::Read + Send + 'static,
    ) -> (std::sync::Arc<Stream>, std::thread::JoinHandle<()>) {
        let stream = std::sync::Arc::new(Stream::default());
        let sink = stream.clone();
        let reader = std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                let n = pipe.read(&mut chunk).unwrap_or(0);
                let mut s = sink.state.lock().unwrap();
                s.0.extend_from_slice(&chunk[..n]);
                s.1 = n == 0;
                sink.grew.notify_all();
                if n == 0 {
                    return;
                }
            }
        });
        (stream, reader)
    }

    /// Waits until the stream holds `needle`: `Err` with why when it ended first or `limit`
    /// passed.
    fn wait_for(&self, needle: &str, limit: std::time::Duration) -> Result<(), String> {
        let deadline = std::time::Instant::now() + limit;
        let mut s = self.state.lock().unwrap();
        loop {
            if String::from_utf8_lossy(&s.0).contains(needle) {
                return Ok(());
            }
            if s.1 {
                return Err(format!("it ended before printing {needle:?}"));
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return Err(format!("no {needle:?} within {limit:?}"));
            }
            s = self.grew.wait_timeout(s, deadline - now).unwrap().0;
        }
    }

    fn take(&self) -> Vec<u8> {
        std::mem::take(&mut self.state.lock().unwrap().0)
    }
}

impl Proc {
    /// Starts `cmd` with piped stdout and stderr.
    pub fn spawn(cmd: &mut Command) -> Proc {
        use std::process::Stdio;
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("start {:?}: {e}", cmd.get_program()));
        let (out, out_reader) = Stream::read(child.stdout.take().expect("piped stdout"));
        let (err, err_reader) = Stream::read(child.stderr.take().expect("piped stderr"));
        Proc {
            child,
            out,
            err,
            readers: vec![out_reader, err_reader],
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the program is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Whether the program exits by itself within `limit` (it keeps running otherwise).
    pub fn exits_within(&mut self, limit: std::time::Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while self.is_running() {
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        true
    }

    /// Waits until the program's stderr holds `needle`: `Err` with why when it closed its
    /// stderr (exited) first or `limit` passed.
    pub fn wait_for_stderr(&self, needle: &str, limit: std::time::Duration) -> Result<(), String> {
        self.err.wait_for(needle, limit)
    }

    /// [`Proc::wait_for_stderr`] for its stdout.
    pub fn wait_for_stdout(&self, needle: &str, limit: std::time::Duration) -> Result<(), String> {
        self.out.wait_for(needle, limit)
    }

    /// Waits until a DAT server is ready for its client: a dtest server (`publishes`) once it
    /// publishes its address on TCP [`DTEST_PORT`] (after its PSP listens), any other once its
    /// listener logs [`LISTENING`] (started with [`LISTEN_LOG`]). `Err` with why otherwise.
    pub fn wait_server_ready(
        &mut self,
        publishes: bool,
        limit: std::time::Duration,
    ) -> Result<(), String> {
        if publishes {
            self.wait_for_tcp_listen(DTEST_PORT, limit)
        } else {
            self.wait_for_stderr(LISTENING, limit)
        }
    }

    /// Waits until the program's kernel TCP port `port` listens (a dtest server publishing its
    /// address); `Err` with why when it exited first or `limit` passed.
    pub fn wait_for_tcp_listen(
        &mut self,
        port: u16,
        limit: std::time::Duration,
    ) -> Result<(), String> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            if tcp_listening(self.child.id(), port) {
                return Ok(());
            }
            if !self.is_running() {
                return Err("it exited".into());
            }
            if std::time::Instant::now() >= deadline {
                return Err(format!("TCP {port} not listening within {limit:?}"));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Waits for the program to exit, killing it after `limit` (no test hangs the suite);
    /// returns its output with the exit status ([`output_text`]) and, when it was killed,
    /// `[killed after <limit>]`.
    pub fn finish(mut self, limit: std::time::Duration) -> String {
        let killed = !self.exits_within(limit);
        if killed {
            let _ = self.child.kill();
        }
        let status = self.child.wait().expect("wait for the program");
        if killed {
            remove_runtime_dirs_of(self.pid());
        }
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let (stdout, stderr) = (self.out.take(), self.err.take());
        let mut text = output_text(&Output {
            status,
            stdout,
            stderr,
        });
        if killed {
            text.push_str(&format!("[killed after {limit:?}]\n"));
        }
        text
    }

    /// Kills the program now (its runtime files removed) and returns its output.
    pub fn kill(self) -> String {
        self.finish(std::time::Duration::ZERO)
    }
}

/// Whether kernel TCP port `port` listens in the network namespace of process `pid`
/// (/proc/PID/net/tcp and tcp6: a test's own namespace too; a probe connection would be taken
/// by dtest's server for its client).
pub fn tcp_listening(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X} ");
    ["tcp", "tcp6"].iter().any(|table| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{table}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() > 3 && format!("{} ", f[1]).ends_with(&want) && f[3] == "0A"
            })
    })
}

impl Drop for Proc {
    /// A test that fails while the program runs (a server waiting for clients) kills it, and
    /// removes the EAL runtime directory and hugepage files the killed process could not.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
            remove_runtime_dirs_of(self.child.id());
        }
    }
}
