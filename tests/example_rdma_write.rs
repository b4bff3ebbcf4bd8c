//! `examples/rdma_write.rs` runs as its doc comment says, on a profile like the shipped
//! `af_packet-a.toml` (on a veth end made here, without hugepages): it writes and verifies
//! 4096 bytes, exits 0 and leaves no DPDK runtime directory. Needs root (veth pair) and DPDK.
//!
//! Cargo gives tests no path to examples, and `cargo test --all-targets` builds them only as
//! test harnesses (whose `main` is libtest's): the program is the one
//! `cargo build --examples` puts in target/<profile>/examples/, beside the test binary's
//! deps/ directory. scripts/test.sh builds it before the tests run.

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::{
    assert_no_runtime_dirs, output_text, profile_copy, retry_fanout_collision, Veth,
};
use std::process::Command;

#[test]
fn the_rdma_write_example_writes_and_verifies_4096_bytes_over_af_packet() {
    let bin = test_program("rdma_write");
    let veth = Veth::up("ex");
    let prefix = format!("exrw{}", std::process::id());
    let dir = std::env::temp_dir().join(format!("dpdk-roce-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let profile = profile_copy(&dir, "af_packet-a", &[("rocev0a", &veth.end('a'))], &prefix);

    let out = retry_fanout_collision(|| {
        Command::new(&bin)
            .arg(&profile)
            .output()
            .expect("start the example")
    });
    let text = output_text(&out);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "rdma_write failed:\n{text}");
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == "verified 4096 bytes"),
        "no `verified 4096 bytes`:\n{text}"
    );
    assert_no_runtime_dirs(&prefix);
}
