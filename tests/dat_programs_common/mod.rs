//! The harness of the tests that run the real DAT programs (dapl2-utils) as two processes on
//! dpdk-roce: the provider library, the link between the two sides (a veth pair for
//! net_af_packet, or two net_tap taps joined by tc mirred), per-side profiles and dat.conf files,
//! the server/client runner with its watchdog and its retry of the net_af_packet fanout
//! collision.

#![allow(dead_code)]

#[path = "../dpdk_common/mod.rs"]
pub mod dpdk_common;

use dpdk_common::{output_text, Proc, Router, Veth, FANOUT_COLLISION};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The provider library cargo built next to the test binaries.
pub fn provider_lib() -> PathBuf {
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
pub const IDLE_PAUSE_US: u32 = 20;

/// The link between the two processes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Link {
    /// net_af_packet on the two ends of a veth pair made for the test
    /// (dpdk-config/af_packet-{a,b}.toml, 10.77.0.0/24).
    AfPacket,
    /// net_tap: each process creates its own kernel tap when its EAL starts and it vanishes
    /// when the process exits; scripts/tap-mirred.sh joins the two taps with tc mirred
    /// redirects (dpdk-config/tap-{a,b}.toml, 10.77.2.0/24).
    Tap,
    /// net_memif: side a is the server of a memif socket in the test's temp dir, side b its
    /// client (dpdk-config/memif-{server,client}.toml, 10.77.3.0/24). The server's link is
    /// down until the client attaches.
    Memif,
    /// net_af_packet on two veth pairs joined by a Linux router in a namespace
    /// (scripts/router.sh): side a 10.77.74.1/24, side b 10.77.75.1/24, each profile naming the
    /// router (.254) as its gateway.
    Routed,
}

impl Link {
    /// The profile file a side's profile is derived from.
    fn template(self, side: char) -> String {
        match self {
            Link::AfPacket | Link::Routed => format!("af_packet-{side}"),
            Link::Tap => format!("tap-{side}"),
            Link::Memif if side == 'a' => "memif-server".into(),
            Link::Memif => "memif-client".into(),
        }
    }

    /// The line of the template profile that names the side's end of the link.
    fn template_end(self, side: char) -> String {
        match self {
            Link::AfPacket | Link::Routed => format!("iface = \"rocev0{side}\""),
            Link::Tap => format!("iface = \"rocetap0{side}\""),
            Link::Memif => "socket = \"/run/dpdk-roce/memif0.sock\"".into(),
        }
    }
}

/// What joins side a and side b: a veth pair (removed on drop), or the names of the two taps
/// the processes create (net_tap removes them itself when its process exits).
enum Ends {
    Veth(Veth),
    Tap {
        prefix: String,
    },
    /// The memif socket (in the test's temp dir, removed with it).
    Memif {
        socket: String,
    },
    /// Side a on veth pair `x`, side b on `y`, the router between them (dropped first).
    Routed {
        router: Router,
        x: Veth,
        y: Veth,
    },
}

impl Ends {
    fn up(link: Link, tag: &str, dir: &std::path::Path) -> Ends {
        match link {
            Link::Memif => Ends::Memif {
                socket: dir.join("memif.sock").display().to_string(),
            },
            Link::AfPacket => Ends::Veth(Veth::up(tag)),
            Link::Routed => {
                let (x, y) = (Veth::up(&format!("{tag}x")), Veth::up(&format!("{tag}y")));
                let router = Router::up(
                    tag,
                    &x.end('b'),
                    "10.77.74.254/24",
                    &y.end('a'),
                    "10.77.75.254/24",
                );
                Ends::Routed { router, x, y }
            }
            Link::Tap => {
                // `dt<tag><pid mod 10^5><side>`: at most 15 characters (IFNAMSIZ - 1) for tags
                // of up to 7 characters, like the veth names.
                let prefix = format!("dt{tag}{}", std::process::id() % 100_000);
                assert!(prefix.len() < 15, "tap name too long: {prefix}a");
                Ends::Tap { prefix }
            }
        }
    }

    fn end(&self, side: char) -> String {
        match self {
            Ends::Veth(v) => v.end(side),
            Ends::Tap { prefix } => format!("{prefix}{side}"),
            Ends::Memif { socket } => socket.clone(),
            Ends::Routed { x, .. } if side == 'a' => x.end('a'),
            Ends::Routed { y, .. } => y.end('b'),
        }
    }

    /// The profile line naming the side's end.
    fn line(&self, side: char) -> String {
        match self {
            Ends::Memif { socket } => format!("socket = \"{socket}\""),
            _ => format!("iface = \"{}\"", self.end(side)),
        }
    }
}

/// A temp dir with profiles a/b on the link's two ends and one dat.conf per side.
pub struct Setup {
    dir: PathBuf,
    tag: String,
    link: Link,
    ends: Ends,
    server_address: String,
}

impl Setup {
    /// Over net_af_packet on a new veth pair.
    pub fn new(tag: &str) -> Setup {
        Setup::with_link(tag, Link::AfPacket)
    }

    /// Over `link`. `tag` (at most 7 characters) names the interfaces, the temp dir and the
    /// profiles (`dat<tag>-a` / `dat<tag>-b`): each test uses its own.
    pub fn with_link(tag: &str, link: Link) -> Setup {
        let dir = std::env::temp_dir().join(format!("dpdk-roce-dat-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let ends = Ends::up(link, tag, &dir);
        let repo = dpdk_common::repo();
        let mut server_address = String::new();
        for side in ['a', 'b'] {
            let template = link.template(side);
            let text =
                std::fs::read_to_string(repo.join(format!("dpdk-config/{template}.toml"))).unwrap();
            let end = link.template_end(side);
            let name = format!("name = \"{template}\"");
            assert!(
                text.contains(&end) && text.contains(&name),
                "{template}.toml changed"
            );
            let text = match link {
                Link::Routed => {
                    let (ours, net) = if side == 'a' {
                        ("10.77.0.1", 74)
                    } else {
                        ("10.77.0.2", 75)
                    };
                    text.replace(
                        &format!("address = \"{ours}/24\""),
                        &format!("address = \"10.77.{net}.1/24\"\ngateway = \"10.77.{net}.254\""),
                    )
                }
                _ => text,
            };
            let text = text
                .replace(&end, &ends.line(side))
                .replace(&name, &format!("name = \"dat{tag}-{side}\""))
                // Core progress shares each of the 2 vCPUs between a poll thread and the
                // program's own spinning thread: an idle poll thread sleeps so that the
                // program's thread gets the core between packets.
                .replace(
                    "idle_pause_us = 0",
                    &format!("idle_pause_us = {IDLE_PAUSE_US}"),
                );
            if side == 'a' {
                server_address = roce_address(&text);
            }
            let profile = dir.join(format!("{side}.toml"));
            std::fs::write(&profile, text).unwrap();
            let conf = format!(
                "dr u2.0 nonthreadsafe default {} dapl.2.0 \"{}\" \"\"\n",
                provider_lib().display(),
                profile.display()
            );
            std::fs::write(dir.join(format!("{side}.conf")), conf).unwrap();
        }
        Setup {
            dir,
            tag: tag.to_owned(),
            link,
            ends,
            server_address,
        }
    }

    /// Appends a `[faults]` section (`engine::faults`) of `keys` (TOML lines) to both sides'
    /// profiles: every frame of both ports goes through the fault injector.
    pub fn with_faults(self, keys: &str) -> Setup {
        for side in ['a', 'b'] {
            let profile = self.dir.join(format!("{side}.toml"));
            let mut text = std::fs::read_to_string(&profile).unwrap();
            text.push_str(&format!("\n[faults]\n{keys}\n"));
            std::fs::write(&profile, text).unwrap();
        }
        self
    }

    /// Adds `keys` (TOML lines) to both sides' `[roce]` sections (e.g. the CM timers).
    pub fn with_roce_keys(self, keys: &str) -> Setup {
        for side in ['a', 'b'] {
            dpdk_common::add_roce_keys(&self.dir.join(format!("{side}.toml")), keys);
        }
        self
    }

    /// The EAL runtime directory a process of side `side` with id `pid` has while it runs
    /// (its profile's file prefix `dat<tag>-<side>-<pid>`; a killed process leaves it).
    pub fn runtime_dir(&self, side: char, pid: u32) -> PathBuf {
        PathBuf::from(format!("/var/run/dpdk/dat{}-{side}-{pid}", self.tag))
    }

    pub fn conf(&self, side: char) -> PathBuf {
        self.dir.join(format!("{side}.conf"))
    }

    pub fn link(&self) -> Link {
        self.link
    }

    /// The server's (side a's) IA address, as its profile has it (what dtestsrq's client
    /// takes with `-h`).
    pub fn server_address(&self) -> &str {
        &self.server_address
    }

    /// The interface of side `a` or `b` (a veth end, or the tap its process creates).
    pub fn end(&self, side: char) -> String {
        self.ends.end(side)
    }

    /// net_tap: neither process left its tap behind (net_tap removes a tap when its process
    /// exits, also a process that ran alone and never had its tap joined).
    pub fn assert_no_tap_left(&self) {
        assert_eq!(
            self.link,
            Link::Tap,
            "only net_tap's processes create their interfaces"
        );
        for side in ['a', 'b'] {
            let tap = self.end(side);
            let shown = Command::new("ip")
                .args(["link", "show", &tap])
                .output()
                .expect("run ip link show");
            assert!(
                !shown.status.success(),
                "tap {tap} left behind:\n{}",
                output_text(&shown)
            );
        }
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The address of `[roce] address = "a.b.c.d/len"` in a profile's text.
fn roce_address(profile: &str) -> String {
    let line = profile
        .lines()
        .find(|l| l.trim_start().starts_with("address = "))
        .expect("profile has a [roce] address");
    let quoted = line.split('"').nth(1).expect("quoted address");
    quoted.split('/').next().unwrap().to_string()
}

/// scripts/tap-mirred.sh joining the two taps of a net_tap pair: `attach` runs in the
/// background while the processes start (each tap exists only once its process's EAL
/// started); dropping the guard stops a still-waiting attach and always runs `down`, also
/// when the test fails or panics.
pub struct TapMirred {
    a: String,
    b: String,
    attach: Option<Child>,
}

/// How long `attach` waits for both taps (TAP_WAIT): the server's, and the client's that
/// appears only after the runner's start-up pause.
pub const TAP_WAIT_S: u32 = 30;

impl TapMirred {
    pub fn start(a: &str, b: &str) -> TapMirred {
        TapMirred::start_waiting(a, b, TAP_WAIT_S)
    }

    /// `attach` waiting up to `wait_s` seconds for the taps.
    pub fn start_waiting(a: &str, b: &str, wait_s: u32) -> TapMirred {
        let attach = Command::new("bash")
            .arg(dpdk_common::repo().join("scripts/tap-mirred.sh"))
            .args(["attach", a, b])
            .env("TAP_WAIT", wait_s.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run scripts/tap-mirred.sh");
        TapMirred {
            a: a.into(),
            b: b.into(),
            attach: Some(attach),
        }
    }

    /// Waits for `attach`: Ok once both taps are joined, Err with its output when the taps
    /// never appeared (or tc failed).
    pub fn wait(&mut self) -> Result<(), String> {
        let attach = self.attach.take().expect("attach waited once");
        Self::result(attach)
    }

    /// [`TapMirred::wait`] if `attach` already ended, else None (it keeps waiting).
    pub fn try_wait(&mut self) -> Option<Result<(), String>> {
        let attach = self.attach.as_mut().expect("attach waited once");
        match attach.try_wait().expect("poll tap-mirred.sh attach") {
            None => None,
            Some(_) => Some(Self::result(self.attach.take().expect("attach present"))),
        }
    }

    fn result(attach: Child) -> Result<(), String> {
        let out = attach
            .wait_with_output()
            .expect("wait for tap-mirred.sh attach");
        let text = output_text(&out);
        if out.status.success() {
            Ok(())
        } else {
            Err(text)
        }
    }
}

impl Drop for TapMirred {
    fn drop(&mut self) {
        if let Some(mut attach) = self.attach.take() {
            let _ = attach.kill();
            let _ = attach.wait();
        }
        let _ = Command::new("bash")
            .arg(dpdk_common::repo().join("scripts/tap-mirred.sh"))
            .args(["down", &self.a, &self.b])
            .output();
    }
}

/// How the provider makes progress in the test programs (DPDK_ROCE_PROGRESS).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The thread waiting in a DAT call drives the port.
    Inline,
    /// A poll thread per process (pinned as the profile says): needed when a program spins on
    /// memory without DAT calls (dtest -W, the dtestx atomic target).
    Core,
}

impl Progress {
    pub fn env(self) -> &'static str {
        match self {
            Progress::Inline => "inline",
            Progress::Core => "core",
        }
    }
}

/// Runs `program` as server (side a) and client (side b) with `args`; returns both outputs.
/// The client's `-h` is `host`: the TCP host where dtest/dtestx/dtestcm servers publish their
/// IA address, or (dtestsrq) the server's IA address itself ([`Setup::server_address`]).
/// Over net_tap the taps are joined while the processes start, and unjoined when they ended
/// (also when this panics); the run fails loudly when the taps never appear.
pub fn run_pair(
    s: &Setup,
    program: &str,
    args: &[&str],
    host: &str,
    progress: Progress,
    attempt: usize,
) -> (String, String) {
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
    // net_tap: the taps appear with their processes (the client's only once it started);
    // attach waits for both in the background while the processes start.
    let mut mirred = (s.link() == Link::Tap).then(|| TapMirred::start(&s.end('a'), &s.end('b')));
    let mut server = Proc::spawn(cmd('a', false).env("DPDK_ROCE_LOG", dpdk_common::LISTEN_LOG));
    // The server is ready once it publishes its address on TCP 15828 (dtest, dtestx, dtestcm:
    // after their PSP listens), or (dtestsrq) once its listener is up.
    let ready = server.wait_server_ready(host == LOCALHOST, SERVER_READY_LIMIT);
    if let Err(why) = ready {
        // Not started (the fanout collision, which the caller retries): its output says why.
        let server = server.kill();
        assert!(
            server.contains(FANOUT_COLLISION),
            "{program} server not ready: {why}:\n{server}"
        );
        return (server, String::new());
    }
    // net_af_packet's fanout group id is (pid ^ ifindex) & 0xffff: the two ends of one veth
    // pair have neighbouring ifindexes, so a client whose pid is the server's plus one can
    // collide every time. A retry first spends a few pids to break that pattern.
    for _ in 0..attempt {
        let _ = Command::new("true").status();
    }
    let mut client = Proc::spawn(&mut cmd('b', true));
    if let Some(Err(attach)) = mirred.as_mut().map(TapMirred::wait) {
        let (client, server) = (client.kill(), server.kill());
        panic!(
            "the taps {} / {} were never joined:\n{attach}\n== server ==\n{server}\n== client ==\n{client}",
            s.end('a'),
            s.end('b')
        );
    }
    // Neither side may hang the suite: each is killed after its limit.
    let connected = client.exits_within(PAIR_LIMIT);
    let client = client.finish(Duration::ZERO);
    let stopped =
        !connected || !client.ends_with("[exit status: 0]\n") || client.contains(FANOUT_COLLISION);
    // A client that never connected leaves the server waiting for it: stop it.
    let server = server.finish(if stopped { Duration::ZERO } else { PAIR_LIMIT });
    drop(mirred);
    (server, client)
}

/// How long a server may take to be ready for its client.
const SERVER_READY_LIMIT: Duration = Duration::from_secs(30);
/// How long each side of a pair may run.
const PAIR_LIMIT: Duration = Duration::from_secs(120);

/// Runs the pair, again when net_af_packet's PACKET_FANOUT id collided (tests/dpdk_common).
pub fn run_pair_retrying(
    s: &Setup,
    program: &str,
    args: &[&str],
    host: &str,
    progress: Progress,
) -> (String, String) {
    dpdk_common::retry_fanout(|attempt| {
        let (srv, cli) = run_pair(s, program, args, host, progress, attempt);
        (!srv.contains(FANOUT_COLLISION) && !cli.contains(FANOUT_COLLISION)).then_some((srv, cli))
    })
}

pub fn assert_passed(what: &str, out: &str, pass: &str) {
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
pub const LOCALHOST: &str = "127.0.0.1";

/// dtest servers listen on kernel TCP 15828: one pair at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// One pair at a time in this process, and none beside another process's dtest server
/// ([`dpdk_common::lock_dtest_port`]).
pub fn one_at_a_time() -> (
    std::sync::MutexGuard<'static, ()>,
    dpdk_common::DtestPortLock,
) {
    let serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    (serial, dpdk_common::lock_dtest_port())
}

/// No EAL runtime directory of either process is left under /var/run/dpdk (their file
/// prefixes are `<profile name>-<pid>`, the profile names `dat<tag>-a` / `dat<tag>-b`).
pub fn assert_no_dpdk_runtime_dir(tag: &str) {
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

/// A DAT program started on side `side` with that side's dat.conf ([`Running::start`]), its
/// output collected by [`Proc::finish`]. For programs that take the IA name themselves
/// (`dapltest -D dr`), unlike [`run_pair`], which adds `-P dr` and `-h`.
pub use dpdk_common::Proc as Running;

impl Running {
    pub fn start(
        s: &Setup,
        side: char,
        program: &str,
        args: &[&str],
        progress: Progress,
    ) -> Running {
        Proc::spawn(
            Command::new(program)
                .env("DAT_OVERRIDE", s.conf(side))
                .env("DPDK_ROCE_PROGRESS", progress.env())
                .env("DPDK_ROCE_LOG", dpdk_common::LISTEN_LOG)
                .args(args),
        )
    }
}

/// Runs one program on side `side` to its end (at most `limit`) and returns its output.
///
/// Over net_tap a process on side b is the client of a long-lived side-a server
/// ([`Running::start`]): its first IA open creates a new tap b, which exists until it exits,
/// so the two taps are joined anew for each client ([`TapMirred`] attached while it starts)
/// and unjoined when it ended, also when this panics. A process on side a runs alone: its tap
/// needs no join (it vanishes with the process). A client that ends before its tap could be
/// joined (a functional suite that never talks to the server) returns its output, which the
/// test judges; one still running with its taps never joined fails loudly.
pub fn run_one(
    s: &Setup,
    side: char,
    program: &str,
    args: &[&str],
    progress: Progress,
    limit: Duration,
) -> String {
    if s.link() != Link::Tap || side != 'b' {
        return Running::start(s, side, program, args, progress).finish(limit);
    }
    // Declared first, dropped last: `down` runs once the client is gone (Running's drop
    // kills one still running when this panics).
    let mut mirred = TapMirred::start(&s.end('a'), &s.end('b'));
    let mut client = Running::start(s, side, program, args, progress);
    // Until `attach` ended or the client exited, whichever comes first.
    let attached = loop {
        if let Some(attached) = mirred.try_wait() {
            break attached;
        }
        if !client.is_running() {
            return client.finish(Duration::ZERO);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Err(attach) = attached {
        // A tap that vanished under `attach` belongs to a client that is exiting.
        if client.exits_within(CLIENT_EXIT_GRACE) {
            return client.finish(Duration::ZERO);
        }
        let out = client.finish(Duration::ZERO);
        panic!(
            "the taps {} / {} were never joined for {program}, which kept running:\n{attach}\n\
             == {program} ==\n{out}",
            s.end('a'),
            s.end('b')
        );
    }
    client.finish(limit)
}

/// How long [`run_one`] waits for a client whose taps could not be joined to exit by itself.
const CLIENT_EXIT_GRACE: Duration = Duration::from_secs(5);

/// Runs one program on side `side` to its end ([`run_one`]), again with fresh processes
/// when net_af_packet's PACKET_FANOUT id collided (see [`run_pair`]).
pub fn run_one_retrying(
    s: &Setup,
    side: char,
    program: &str,
    args: &[&str],
    progress: Progress,
    limit: Duration,
) -> String {
    // A busy memif server (below) is retried the same way: a new process a moment later.
    dpdk_common::retry_fanout(|_| {
        let out = run_one(s, side, program, args, progress, limit);
        (!out.contains(FANOUT_COLLISION) && !out.contains(MEMIF_SERVER_BUSY)).then_some(out)
    })
}

/// What net_memif logs when a client process starts while the server still holds the
/// connection of the client before it (that one's exit not yet noticed on the server's
/// side): the port does not start, and a new process a moment later connects.
pub const MEMIF_SERVER_BUSY: &str = "memif_connect_client(): Failed to connect socket";
