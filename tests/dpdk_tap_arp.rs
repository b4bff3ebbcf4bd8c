//! ARP over a real DPDK net_tap port: the kernel side of the tap, given an address in the same
//! subnet, `arping`s the provider's address and gets answers from dpdk-roce's neighbour layer.
//! Needs root, DPDK and arping (scripts/setup.sh installs them); fails loudly otherwise.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LAT: &str = env!("CARGO_BIN_EXE_roce-lat");

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_kernel_arpings_the_provider_address_over_net_tap() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let tap = format!("drt{}", std::process::id() % 100_000);
    let dir = std::env::temp_dir().join(format!("dpdk-roce-tap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(repo.join("dpdk-config/tap-a.toml"))
        .unwrap()
        .replace("rocetap0a", &tap)
        .replace("name = \"tap-a\"", &format!("name = \"{tap}\""));
    let profile = dir.join("tap.toml");
    std::fs::write(&profile, text).unwrap();

    // The server side of roce-lat: opens the tap port, runs the neighbour layer, waits for a
    // connection request (none comes); we only need its ARP answers.
    let mut child = KillOnDrop(
        Command::new(LAT)
            .arg("--profile")
            .arg(&profile)
            .args(["--server", "--timeout-ms", "30000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let ready = lines.next().and_then(Result::ok).unwrap_or_default();
    assert!(
        ready.starts_with("READY"),
        "server did not start: {ready:?}"
    );

    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip(&["addr", "add", "10.77.2.2/24", "dev", &tap]);
    ip(&["link", "set", &tap, "up"]);

    let t0 = Instant::now();
    let out = loop {
        let out = Command::new("arping")
            .args(["-c", "3", "-w", "3", "-I", &tap, "10.77.2.1"])
            .output()
            .expect("arping must be installed (scripts/setup.sh installs it)");
        if out.status.success() || t0.elapsed() > Duration::from_secs(10) {
            break out;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "no ARP answer:\n{text}");
    let answers = text
        .lines()
        .filter(|l| l.contains("bytes from") && l.contains("(10.77.2.1)"))
        .count();
    assert!(answers >= 1, "{text}");
    // The server is killed (it would wait for a connection): remove its EAL runtime dir.
    let runtime = PathBuf::from(format!("/var/run/dpdk/{tap}-{}", child.0.id()));
    drop(child);
    let _ = std::fs::remove_dir_all(&runtime);
    let _ = std::fs::remove_dir_all(&dir);
}
