//! The DAT-shaped Rust API over real DPDK ports: two IAs on net_af_packet ports at the two
//! ends of a veth pair (created here), two shards each in `core` progress with pinned threads;
//! PSP, CR accept, SEND, RDMA WRITE with immediate, RDMA READ, fetch-add on EPs of both shards,
//! data checked, disconnect (`roce-dat-pair`, its own process: EAL is once per process).
//! Needs root (veth) and DPDK (scripts/setup.sh); fails loudly otherwise.

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::{os_args, run_two_port_bin};

fn bin() -> std::path::PathBuf {
    test_program("roce-dat-pair")
}

#[test]
fn dat_api_over_two_af_packet_ports_two_pinned_shards_every_operation_verified() {
    let text = run_two_port_bin(&bin(), "d", &os_args(&[]));
    for k in 0..4 {
        assert!(text.contains(&format!("RESULT ep={k} shard=")), "{text}");
    }
    assert!(text.contains("RESULT done"), "{text}");
}
