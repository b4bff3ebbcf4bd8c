//! scripts/run-pair.sh with a stand-in benchmark (a bash stub): the server starts first, the
//! client only once the server is ready, both outputs are collected, the exit status reflects
//! failures, and nothing the script started is left running, whatever happened.

mod scripts_common;
use scripts_common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const STUB: &str = r#"#!/usr/bin/env bash
# Stand-in benchmark: --profile FILE --server|--client [args...]
set -u
[[ $1 == --profile ]] || { echo "stub: bad arguments: $*" >&2; exit 64; }
profile=$2 role=$3
shift 3
dir=$(dirname "$0")
wait_client() { until [[ -e $dir/client-done ]]; do sleep 0.05; done; }
# A child that only dies when its process group is killed.
spawn_child() { bash -c 'while :; do sleep 0.1; done' "$dir/grandchild" & }
case $role in
--server)
  echo "server profile=$profile args=$*"
  case ${STUB_SERVER:-ok} in
    ok) echo READY; wait_client; echo "server done"; exit 0 ;;
    file) touch "$DPDK_ROCE_READY_FILE"; wait_client; echo "server done"; exit 0 ;;
    die) echo "server cannot start" >&2; exit 5 ;;
    hang) spawn_child; while :; do sleep 0.1; done ;;
    linger) spawn_child; echo READY; while :; do sleep 0.1; done ;;
    dpdk) mkdir -p "$RUN_PAIR_DPDK_RUNTIME_DIR/stub-$$"; echo READY; while :; do sleep 0.1; done ;;
    fail) echo READY; wait_client; exit 9 ;;
  esac ;;
--client)
  out=${RUN_PAIR_OUT:-$(echo "$TMPDIR"/run-pair.*)}
  [[ -e $out/server.ready ]] || grep -q READY "$out/server.out" || { echo "client before ready"; exit 65; }
  echo "client profile=$profile args=$*"
  touch "$dir/client-done"
  case ${STUB_CLIENT:-ok} in
    ok) exit 0 ;;
    fail) exit 7 ;;
    hang) spawn_child; while :; do sleep 0.1; done ;;
  esac ;;
esac
echo "stub: unknown role $role" >&2
exit 64
"#;

static CASE: AtomicUsize = AtomicUsize::new(0);

/// A scratch directory with the stub and two profile files; removed on drop.
struct Case {
    dir: PathBuf,
}

impl Case {
    fn new() -> Case {
        let n = CASE.fetch_add(1, Ordering::SeqCst);
        let dir =
            std::env::temp_dir().join(format!("dpdk-roce-runpair-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("bench"), STUB).unwrap();
        let out = Command::new("chmod")
            .arg("+x")
            .arg(dir.join("bench"))
            .output()
            .unwrap();
        assert!(out.status.success());
        std::fs::write(dir.join("server.toml"), "# server profile\n").unwrap();
        std::fs::write(dir.join("client.toml"), "# client profile\n").unwrap();
        Case { dir }
    }

    fn command(&self, env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new("bash");
        cmd.arg(script("run-pair.sh"))
            .arg(self.dir.join("bench"))
            .arg(self.dir.join("server.toml"))
            .arg(self.dir.join("client.toml"))
            .args(["--size", "64", "two words"])
            .env("RUN_PAIR_OUT", self.dir.join("out"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, env: &[(&str, &str)]) -> Output {
        let out = self.command(env).output().unwrap();
        self.assert_nothing_left();
        out
    }

    /// No process whose command line mentions this case's directory survives.
    fn assert_nothing_left(&self) {
        let token = self.dir.to_string_lossy().into_owned();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let alive = processes_mentioning(&token);
            if alive.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "left running: {alive:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn file_exists(&self, name: &str) -> bool {
        self.dir.join(name).exists()
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        // If an assertion failed before the check, still kill what mentions the directory.
        for (pid, _) in processes_mentioning(&self.dir.to_string_lossy()) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .output();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Live (non-zombie) processes whose command line contains `token`.
fn processes_mentioning(token: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(token) {
            continue;
        }
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if matches!(state, Some('Z') | None) {
            continue;
        }
        found.push((pid, cmdline));
    }
    found
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}
fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn success_collects_both_outputs() {
    let case = Case::new();
    let out = case.run(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let s = stdout(&out);
    let server = path(&case.dir.join("server.toml"));
    let client = path(&case.dir.join("client.toml"));
    let i_server = s.find("== server ==").expect("server heading");
    let i_client = s.find("== client ==").expect("client heading");
    assert!(i_server < i_client, "{s}");
    assert!(
        s.contains(&format!("server profile={server} args=--size 64 two words")),
        "{s}"
    );
    assert!(
        s.contains(&format!("client profile={client} args=--size 64 two words")),
        "{s}"
    );
    assert!(s[i_server..i_client].contains("server done"), "{s}");
    assert!(stderr(&out).contains("both succeeded"), "{}", text(&out));
    // Outputs are kept in RUN_PAIR_OUT.
    let kept = std::fs::read_to_string(case.dir.join("out/server.out")).unwrap();
    assert!(kept.contains("server done"));
}

/// Without `RUN_PAIR_OUT` the outputs go to a new directory under `TMPDIR`: removed after a
/// run that succeeded (both outputs were printed), kept and named after one that failed.
#[test]
fn its_own_output_directory_goes_after_a_success_and_stays_after_a_failure() {
    let case = Case::new();
    let tmp = case.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let left = || -> Vec<PathBuf> {
        std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    };
    let run = |env: &[(&str, &str)]| {
        let _ = std::fs::remove_file(case.dir.join("client-done"));
        let mut cmd = case.command(env);
        cmd.env_remove("RUN_PAIR_OUT").env("TMPDIR", &tmp);
        let out = cmd.output().unwrap();
        case.assert_nothing_left();
        out
    };
    let ok = run(&[]);
    assert!(ok.status.success(), "{}", text(&ok));
    assert!(text(&ok).contains("server done"), "{}", text(&ok));
    assert_eq!(left(), Vec::<PathBuf>::new());
    assert!(!stderr(&ok).contains("outputs in"), "{}", stderr(&ok));
    let bad = run(&[("STUB_CLIENT", "fail")]);
    assert_eq!(bad.status.code(), Some(7), "{}", text(&bad));
    let kept = left();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(
        stderr(&bad).contains(&format!("run-pair: outputs in {}", kept[0].display())),
        "{}",
        stderr(&bad)
    );
    assert!(kept[0].join("client.out").exists());
}

#[test]
fn ready_file_also_counts() {
    let case = Case::new();
    let out = case.run(&[("STUB_SERVER", "file")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(case.file_exists("out/server.ready"));
    assert!(case.file_exists("client-done"));
}

#[test]
fn client_failure_is_the_exit_status() {
    let case = Case::new();
    let out = case.run(&[("STUB_CLIENT", "fail")]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    assert!(stderr(&out).contains("client failed"), "{}", text(&out));
}

#[test]
fn server_failure_is_the_exit_status() {
    let case = Case::new();
    let out = case.run(&[("STUB_SERVER", "fail")]);
    assert_eq!(out.status.code(), Some(9), "{}", text(&out));
    assert!(stderr(&out).contains("server failed"), "{}", text(&out));
}

#[test]
fn server_dying_before_ready_never_starts_the_client() {
    let case = Case::new();
    let out = case.run(&[("STUB_SERVER", "die")]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        stderr(&out).contains("before it was ready"),
        "{}",
        text(&out)
    );
    assert!(
        stdout(&out).contains("server cannot start"),
        "server stderr not shown: {}",
        text(&out)
    );
    assert!(!case.file_exists("client-done"), "the client ran");
}

#[test]
fn server_never_ready_times_out_and_is_killed() {
    let case = Case::new();
    let started = Instant::now();
    let out = case.run(&[("STUB_SERVER", "hang"), ("RUN_PAIR_READY_TIMEOUT", "1")]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        stderr(&out).contains("not ready within 1s"),
        "{}",
        text(&out)
    );
    assert!(!case.file_exists("client-done"));
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[test]
fn lingering_server_is_stopped_after_the_grace_period() {
    let case = Case::new();
    let out = case.run(&[("STUB_SERVER", "linger"), ("RUN_PAIR_SERVER_GRACE", "1")]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out));
    assert!(
        stderr(&out).contains("did not exit within 1s"),
        "{}",
        text(&out)
    );
}

#[test]
fn stop_server_mode_ends_a_server_that_runs_until_stopped() {
    let case = Case::new();
    let out = case.run(&[("STUB_SERVER", "linger"), ("RUN_PAIR_STOP_SERVER", "1")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
}

#[test]
fn hanging_client_times_out() {
    let case = Case::new();
    let out = case.run(&[("STUB_CLIENT", "hang"), ("RUN_PAIR_TIMEOUT", "1")]);
    assert_eq!(out.status.code(), Some(124), "{}", text(&out));
    assert!(
        stderr(&out).contains("client did not finish"),
        "{}",
        text(&out)
    );
}

#[test]
fn sigterm_to_run_pair_kills_everything() {
    let case = Case::new();
    let child = case
        .command(&[("STUB_SERVER", "linger"), ("STUB_CLIENT", "hang")])
        .spawn()
        .unwrap();
    // Wait until the client runs (both processes and their children are up).
    let deadline = Instant::now() + Duration::from_secs(30);
    while !case.file_exists("client-done") {
        assert!(Instant::now() < deadline, "the client never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = path(&case.dir);
    assert!(
        processes_mentioning(&token).len() >= 4,
        "{:?}",
        processes_mentioning(&token)
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .output()
        .unwrap();
    assert!(kill.status.success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(143), "{}", text(&out));
    case.assert_nothing_left();
}

#[test]
fn usage_errors() {
    let case = Case::new();
    let out = Command::new("bash")
        .arg(script("run-pair.sh"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = Command::new("bash")
        .arg(script("run-pair.sh"))
        .arg(case.dir.join("bench"))
        .arg(case.dir.join("missing.toml"))
        .arg(case.dir.join("client.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(stderr(&out).contains("missing.toml"));
    let out = Command::new("bash")
        .arg(script("run-pair.sh"))
        .arg(case.dir.join("server.toml")) // not executable
        .arg(case.dir.join("server.toml"))
        .arg(case.dir.join("client.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        !case.file_exists("out"),
        "nothing may start on a usage error"
    );
}

/// A server the script has to stop cannot remove its EAL runtime directory (a killed DPDK
/// process leaves `/var/run/dpdk/<name>-<pid>`): the script removes the one of that pid, and
/// no other.
#[test]
fn a_stopped_servers_eal_runtime_dir_is_removed_and_no_other() {
    let case = Case::new();
    let runtime = case.dir.join("runtime");
    std::fs::create_dir_all(runtime.join("other-1")).unwrap();
    let out = case.run(&[
        ("STUB_SERVER", "dpdk"),
        ("STUB_CLIENT", "fail"),
        ("RUN_PAIR_SERVER_GRACE", "1"),
        ("RUN_PAIR_DPDK_RUNTIME_DIR", &path(&runtime)),
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    let left: Vec<String> = std::fs::read_dir(&runtime)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["other-1"], "{}", text(&out));
}
