//! The DAT-shaped Rust API over real DPDK ports: two IAs on net_af_packet ports at the two
//! ends of a veth pair (created here), two shards each in `core` progress with pinned threads;
//! PSP, CR accept, SEND, RDMA WRITE with immediate, RDMA READ, fetch-add on EPs of both shards,
//! data checked, disconnect (`roce-dat-pair`, its own process: EAL is once per process).
//! Needs root (veth) and DPDK (scripts/setup.sh); fails loudly otherwise.

use std::path::PathBuf;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_roce-dat-pair");

struct Veth(String);

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/veth.sh"))
            .args(["down", &self.0])
            .output();
    }
}

#[test]
fn dat_api_over_two_af_packet_ports_two_pinned_shards_every_operation_verified() {
    let prefix = format!("drd{}", std::process::id() % 100_000);
    let out = Command::new("bash")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/veth.sh"))
        .args(["up", &prefix])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cannot create the veth pair (root needed): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _veth = Veth(prefix.clone());
    // DPDK 22.11's net_af_packet derives its PACKET_FANOUT group id from the pid and the
    // interface index; a collision with a concurrent process fails the probe with EINVAL (not
    // ours): that one start-up failure is retried with a new pid.
    let run = || {
        Command::new(BIN)
            .arg(format!("{prefix}a"))
            .arg(format!("{prefix}b"))
            .output()
            .unwrap()
    };
    let mut out = run();
    for _ in 0..2 {
        if out.status.success()
            || !String::from_utf8_lossy(&out.stderr).contains("could not set PACKET_FANOUT")
        {
            break;
        }
        out = run();
    }
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "roce-dat-pair failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for k in 0..4 {
        assert!(text.contains(&format!("RESULT ep={k} shard=")), "{text}");
    }
    assert!(text.contains("RESULT done"), "{text}");
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
}
