//! A held `roce-soak` server (`--server --hold`) over net_af_packet, for tests that look at a
//! running process from outside (telemetry, dpdk-dumpcap), and its client.

use super::{output_text, retry_fanout, FANOUT_COLLISION};
use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

const SOAK: &str = env!("CARGO_BIN_EXE_roce-soak");

/// The held server. When the test fails before it stops it, it is killed on drop, and what a
/// killed process leaves (its EAL runtime directory; a multi-process EAL's hugepage files) is
/// removed.
pub struct SoakServer {
    pub child: Child,
    lines: std::io::Lines<BufReader<ChildStdout>>,
    /// Its stdout so far.
    pub seen: String,
    /// Its profile's name: the EAL file prefix is `<name>-<pid>`.
    name: String,
}

impl SoakServer {
    /// Starts `roce-soak --server --hold` on `profile` (named `name`; a new process after a
    /// PACKET_FANOUT collision) and waits for `READY`.
    pub fn start(profile: &Path, name: &str) -> SoakServer {
        retry_fanout(|_| {
            let mut child = Command::new(SOAK)
                .arg("--profile")
                .arg(profile)
                .args(["--server", "--hold", "--timeout-ms", "60000"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start roce-soak --server");
            let lines = BufReader::new(child.stdout.take().unwrap()).lines();
            let mut s = SoakServer {
                child,
                lines,
                seen: String::new(),
                name: name.to_string(),
            };
            if s.wait_line("READY") {
                return Some(s);
            }
            let err = s.stderr();
            assert!(
                err.contains(FANOUT_COLLISION),
                "the server did not start:\n{}{err}",
                s.seen
            );
            None
        })
    }

    /// Its EAL file prefix.
    pub fn prefix(&self) -> String {
        format!("{}-{}", self.name, self.child.id())
    }

    /// Reads stdout lines until one starts with `word`; false when stdout ends first.
    pub fn wait_line(&mut self, word: &str) -> bool {
        for l in self.lines.by_ref() {
            let Ok(l) = l else { return false };
            self.seen.push_str(&l);
            self.seen.push('\n');
            if l.starts_with(word) {
                return true;
            }
        }
        false
    }

    /// Its stderr after it ended (or was killed now).
    pub fn stderr(&mut self) -> String {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        err
    }
}

impl Drop for SoakServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let prefix = self.prefix();
            let _ = self.child.kill();
            let _ = self.child.wait();
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
            for f in dpdk_roce::dpdk::hugepage_files(&prefix) {
                let _ = std::fs::remove_file(f);
            }
        }
    }
}

/// Runs `roce-soak --client --server-ip 10.77.0.1 ARGS` on `profile` to its end (again after
/// a PACKET_FANOUT collision); its output.
pub fn run_soak_client(profile: &Path, args: &[&str]) -> String {
    retry_fanout(|_| {
        let out = Command::new(SOAK)
            .arg("--profile")
            .arg(profile)
            .args(["--client", "--server-ip", "10.77.0.1"])
            .args(args)
            .output()
            .expect("start roce-soak --client");
        let text = output_text(&out);
        if out.status.success() {
            return Some(text);
        }
        assert!(
            text.contains(FANOUT_COLLISION),
            "the client failed:\n{text}"
        );
        None
    })
}
