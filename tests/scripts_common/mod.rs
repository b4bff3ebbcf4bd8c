//! Helpers of the script tests: run a script, require root, unique names, cleanup guards.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

/// Fails the test loudly unless it runs as root: the scripts change kernel state.
pub fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .expect("Uid line in /proc/self/status");
    assert_eq!(
        euid, "0",
        "the script tests create interfaces, namespaces and hugepages: run them as root"
    );
}

/// Runs `bash scripts/<name> args...` with extra environment variables.
pub fn run(name: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(script(name)).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {name}: {e}"))
}

pub fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs a script and asserts it succeeded.
pub fn run_ok(name: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let out = run(name, args, env);
    assert!(
        out.status.success(),
        "{name} {args:?} failed: {}",
        text(&out)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command and returns its stdout (failing the test if it cannot start).
pub fn cmd(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

pub fn link_exists(dev: &str) -> bool {
    cmd("ip", &["link", "show", "dev", dev]).status.success()
}

/// Calls `down` (or any command) when dropped, so a failed assertion still cleans up.
pub struct Guard<F: FnMut()>(pub F);

impl<F: FnMut()> Drop for Guard<F> {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// A short tag unique to this test process.
pub fn pid_tag() -> String {
    std::process::id().to_string()
}
