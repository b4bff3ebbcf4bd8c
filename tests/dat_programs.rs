//! The real DAT test programs (Debian dapl2-utils) through libdat2 on dpdk-roce: two processes
//! over net_af_packet on a veth pair created here. Each side gets its own `dat.conf`
//! (DAT_OVERRIDE) naming the same IA `dr` with its own profile: the dtest client takes the IA
//! name the server publishes over TCP 15828, so the name must mean "this host's port" on both.
//! Inline progress (each process drives its port while it waits in a DAT call).

mod dat_programs_common;

use dat_programs_common::*;

/// Runs dtest with `-b 4096` and `extra`; both sides must pass. Returns the client output.
fn dtest(tag: &str, extra: &[&str], progress: Progress) -> String {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new(tag);
    let mut args = vec!["-b", "4096"];
    args.extend_from_slice(extra);
    let (srv, cli) = run_pair_retrying(&s, "dtest", &args, LOCALHOST, progress);
    assert_passed("dtest server", &srv, "PASSED");
    assert_passed("dtest client", &cli, "PASSED");
    assert_no_dpdk_runtime_dir(tag);
    cli
}

/// Its RDMA read and message ping-pong phases ran (DAT_IB_RDMA_READ = TRUE).
fn assert_all_phases(cli: &str) {
    assert!(cli.contains("RDMA READ DATA"), "{cli}");
    assert!(cli.contains("Message PingPong"), "{cli}");
}

#[test]
fn dtest_default_passes_over_af_packet() {
    assert_all_phases(&dtest("dd", &[], Progress::Inline));
}

#[test]
fn dtest_polling_mode_passes() {
    assert_all_phases(&dtest("dp", &["-p"], Progress::Inline));
}

/// `-c`: completions are collected through a CNO attached to both DTO EVDs.
#[test]
fn dtest_cno_mode_passes() {
    let cli = dtest("dc", &["-c"], Progress::Inline);
    assert_all_phases(&cli);
}

/// `-W`: the RDMA write ping-pong spins on memory without DAT calls, so each provider's own
/// poll thread makes progress (core mode).
#[test]
fn dtest_rdma_write_ping_pong_passes_with_core_progress() {
    let cli = dtest("dw", &["-W"], Progress::Core);
    assert!(
        cli.contains("RDMA write ping-pong") || cli.contains("PingPong"),
        "{cli}"
    );
}

/// `-W -D`: the same ping-pong with every received buffer's data checked.
#[test]
fn dtest_rdma_write_ping_pong_with_data_check_passes() {
    dtest("dv", &["-W", "-D"], Progress::Core);
}

/// dtestx: RDMA write with immediate, compare-and-swap and fetch-and-add (IB extensions via
/// `handle_extendedop`). The atomics' target makes no DAT call while the peer works on its
/// memory: core progress.
#[test]
fn dtestx_extensions_pass() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new("dx");
    let (srv, cli) = run_pair_retrying(&s, "dtestx", &[], LOCALHOST, Progress::Core);
    for (what, out) in [("dtestx server", &srv), ("dtestx client", &cli)] {
        assert_passed(what, out, "PASSED");
    }
    for op in ["CMP_SWAP", "FETCH_ADD", "IMMED"] {
        assert!(
            cli.lines().any(|l| l.contains(op) && l.contains("PASSED"))
                || srv.lines().any(|l| l.contains(op) && l.contains("PASSED")),
            "no {op} PASSED line:\n{srv}\n{cli}"
        );
    }
    assert_no_dpdk_runtime_dir("dx");
}

/// dtestcm -c 100: 100 connections set up and torn down, all connected on both sides.
#[test]
fn dtestcm_100_connections_pass() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new("dm");
    let (srv, cli) = run_pair_retrying(&s, "dtestcm", &["-c", "100"], LOCALHOST, Progress::Inline);
    assert_passed("dtestcm server", &srv, "Connection Test Complete");
    assert_passed("dtestcm client", &cli, "Connection Test Complete");
    assert_no_dpdk_runtime_dir("dm");
}

/// dtestsrq: receives through a shared receive queue; after the client's disconnect both
/// sides wait for DAT_ASYNC_ERROR_EP_BROKEN on the IA's async EVD (the SRQ EP's "last WQE
/// reached"), and the server's last sends must complete successfully, not flushed. The
/// client takes the server's IA address itself (10.77.0.1, side a of the veth pair).
#[test]
fn dtestsrq_passes() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let s = Setup::new("dq");
    let (srv, cli) = run_pair_retrying(&s, "dtestsrq", &[], "10.77.0.1", Progress::Inline);
    assert_passed("dtestsrq server", &srv, "RC SRQ Test Complete");
    assert_passed("dtestsrq client", &cli, "RC SRQ Test Complete");
    assert_no_dpdk_runtime_dir("dq");
}
