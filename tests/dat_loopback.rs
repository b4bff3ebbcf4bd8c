//! Loopback through a real DPDK port, through libdat2: one `roce-dat-consumer` process opens
//! its IA on net_af_packet (one end of a veth pair made here; nothing answers at the other
//! end) and connects two of its EPs through the IA's own address. The port delivers frames to
//! its own MAC to itself; the connection, the data both ways, the connected-state rules of the
//! seed pages and the disconnect are cases of the consumer (`loopback.*`), each checked here.

mod dat_programs_common;
mod test_programs;
use test_programs::test_program;

use dat_programs_common::*;
use std::process::Command;

fn consumer() -> std::path::PathBuf {
    test_program("roce-dat-consumer")
}

const CASES: &[&str] = &[
    "loopback.connect_to_own_address",
    "loopback.accept",
    "loopback.established.first",
    "loopback.established.second",
    "loopback.active_ep_state",
    "loopback.passive_ep_state",
    "loopback.send_recv.completions",
    "loopback.send_recv.data",
    "loopback.rdma_write",
    "loopback.rdma_write.data",
    "loopback.rdma_read",
    "loopback.rdma_read.data",
    "loopback.modify_connected",
    "loopback.recv_query",
    "loopback.recv_query.values",
    "loopback.set_watermark",
    "loopback.get_status",
    "loopback.get_status.idle",
    "loopback.disconnect",
    "loopback.disconnected.first",
    "loopback.disconnected.second",
];

#[test]
fn two_eps_of_one_process_connect_over_loopback_through_libdat2() {
    let s = Setup::new("lo");
    let out = Command::new(consumer())
        .env("DAT_OVERRIDE", s.conf('b'))
        .env("DPDK_ROCE_PROGRESS", "inline")
        .args(["loopback", "--own", "10.77.0.2", "--qual", "7300"])
        .output()
        .expect("run roce-dat-consumer");
    let text = dpdk_common::output_text(&out);
    println!("{text}");
    assert!(out.status.success(), "consumer failed:\n{text}");
    for case in CASES {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("CASE {case} ")))
            .unwrap_or_else(|| panic!("no case {case}:\n{text}"));
        assert!(line.ends_with(" PASS"), "{line}\n{text}");
    }
    assert!(text.contains("RESULT 0 failed"), "{text}");
    assert_no_dpdk_runtime_dir("lo");
}
