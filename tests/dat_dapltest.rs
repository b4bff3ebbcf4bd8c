//! Debian's `dapltest` (dapl2-utils) on dpdk-roce, two processes over net_af_packet on a veth
//! pair, again over net_tap, and over net_memif (the server's link comes up with each client;
//! libdat2 loads the provider from a per-side dat.conf): the server `-T S` with clients for the
//! transaction tests (SR, SR+RW, SR+RR, data validated with `-V`), the performance test and the
//! functional suites, stopped by `-T Q`; the limit test `-T L` runs alone.
//!
//! Each helper takes the [`Setup`], so the same test over another link is one more line. Over
//! net_tap every client process creates a new tap, which the harness joins to the server's
//! while the client starts ([`run_one`]); the lone limit test's tap needs no join.
//!
//! What counts as an error in dapltest's output ([`error_lines`]) comes from its sources
//! (dapl 2.1.10 test/dapltest): assertions print `<expr> failed in file <f>, line <n>` and
//! `Error = <code>, <name>`; API failures print `<module>: dat_<call> ... fails: <code>`; the
//! functional suites print `Result: FAIL`; a crash shows as the signal in the exit status.

mod dat_programs_common;

use dat_programs_common::*;
use std::time::Duration;

/// Watchdog of one dapltest run.
const LIMIT: Duration = Duration::from_secs(120);
/// How long a dapltest server may take to listen: it publishes nothing, the clients connect
/// to its IA address once its listener logs [`dpdk_common::LISTENING`].
const SERVER_START: Duration = Duration::from_secs(30);

/// The lines of a dapltest output that report an error, except those in `expected` (the
/// limit test's last probe fails by design).
fn error_lines<'a>(out: &'a str, expected: &[&str]) -> Vec<&'a str> {
    out.lines()
        .filter(|l| {
            l.contains("FAIL")
                || l.contains(" failed")
                || l.contains("fails:")
                || l.contains("ERR")
                || l.to_lowercase().contains("error")
                || l.contains("Segmentation")
                || l.contains("Aborted")
                || l.contains("panicked")
                // The provider's complaint about its log filter.
                || l.contains(" dpdk_roce::log: ")
                // output_text's last line, the exit status: only a clean exit is fine.
                || (l.starts_with("[exit status") && *l != "[exit status: 0]")
                || l.starts_with("[signal")
        })
        .filter(|l| !expected.iter().any(|e| l.contains(e)))
        .collect()
}

/// Whether `line` is net_tap's start-up notice that the kernel has no `multiq` qdisc (logged
/// by DPDK 22.11 drivers/net/tap at ERR level; the PMD then runs without rte_flow support,
/// which dpdk-roce does not use; dpdk-config/tap-*.toml call it harmless). Only over net_tap.
fn is_net_tap_multiq_notice(link: Link, line: &str) -> bool {
    link == Link::Tap
        && line.starts_with("eth_dev_tap_create(): ")
        && line.ends_with(": failed to create multiq qdisc.")
}

/// No error line in `out` but those `expected` and, over net_tap, its multiq notice.
fn assert_no_error(link: Link, what: &str, out: &str, expected: &[&str]) {
    let bad: Vec<&str> = error_lines(out, expected)
        .into_iter()
        .filter(|l| !is_net_tap_multiq_notice(link, l))
        .collect();
    assert!(bad.is_empty(), "{what}: error lines {bad:?}:\n{out}");
}

#[test]
fn only_net_tap_excuses_its_multiq_notice() {
    let notice = "eth_dev_tap_create(): dtdltt2687b: failed to create multiq qdisc.";
    assert_eq!(error_lines(notice, &[]), [notice]);
    assert!(is_net_tap_multiq_notice(Link::Tap, notice));
    assert!(!is_net_tap_multiq_notice(Link::AfPacket, notice));
    for other in [
        "eth_dev_tap_create(): dtdltt2687b: failed to create tap.",
        "rc == DAT_SUCCESS failed in file test/dapl_fft_queryinfo.c, line 233",
    ] {
        assert!(!is_net_tap_multiq_notice(Link::Tap, other), "{other}");
    }
}

#[test]
fn error_lines_catch_dapltest_failures_and_nothing_else() {
    let good = "Result: PASS\nDescription: Verify IA Querying fails with DAT_INVALID_HANDLE when\n\
                LimitTest: IAs opened: 1000\nDT_cs_Client: ========== End of Work -- Client Exiting\n[exit status: 0]\n";
    assert!(error_lines(good, &[]).is_empty());
    for bad in [
        "Result: FAIL",
        "rc == DAT_SUCCESS failed in file test/dapl_fft_queryinfo.c, line 233",
        "Error = -2146893824, DAT_MODEL_NOT_SUPPORTED ",
        "LimitTest: dat_psp_create #1 fails: DAT_INVALID_PARAMETER DAT_INVALID_ARG2",
        "2026-11-26T03:40:00.000000Z ERROR dpdk_roce::dat::ffi::ia: IA dr: open: port: no DPDK port",
        "2026-11-26T03:40:00.000000Z  WARN dpdk_roce::log: log filter \"x=loud\": invalid filter directive; logging warnings",
        "[signal: 11 (SIGSEGV) (core dumped)]",
        "[exit status: 1]",
    ] {
        assert_eq!(error_lines(bad, &[]), [bad], "{bad}");
    }
    let probe = "LimitTest: dat_ep_post_recv fails: DAT_INSUFFICIENT_RESOURCES ";
    assert!(error_lines(
        probe,
        &["dat_ep_post_recv fails: DAT_INSUFFICIENT_RESOURCES"]
    )
    .is_empty());
}

/// Starts `dapltest -T S` on side a, runs `clients` against it, stops it with `-T Q` and checks
/// that it exited by itself, cleanly. Returns the server's output.
fn with_server(s: &Setup, what: &str, clients: impl FnOnce(&Setup)) -> String {
    let server = dpdk_common::retry_fanout(|_| {
        let srv = Running::start(
            s,
            'a',
            "dapltest",
            &["-T", "S", "-D", "dr"],
            Progress::Inline,
        );
        if let Err(why) = srv.wait_for_stderr(dpdk_common::LISTENING, SERVER_START) {
            let out = srv.kill();
            assert!(
                out.contains(dpdk_common::FANOUT_COLLISION),
                "{what}: server not listening ({why}):\n{out}"
            );
            return None;
        }
        Some(srv)
    });
    clients(s);
    let quit = client(s, &["-T", "Q", "-s", s.server_address(), "-D", "dr"]);
    assert_no_error(s.link(), &format!("{what}: -T Q"), &quit, &[]);
    assert!(
        quit.contains("End of Work -- Client Exiting"),
        "{what}: -T Q:\n{quit}"
    );
    let out = server.finish(Duration::from_secs(30));
    assert_no_error(s.link(), &format!("{what}: server"), &out, &[]);
    assert!(
        out.contains("Service Point Ready - dr") && out.contains("DT_cs_Server (dr):  Exiting."),
        "{what}: the server did not stop on -T Q:\n{out}"
    );
    out
}

/// A dapltest client on side b.
fn client(s: &Setup, args: &[&str]) -> String {
    run_one_retrying(s, 'b', "dapltest", args, Progress::Inline, LIMIT)
}

/// Prints the figures dapltest reports (bench/README.md records them).
fn print_figures(what: &str, out: &str) {
    for l in out.lines().filter(|l| {
        l.starts_with("raw:")
            || l.contains("MB/Sec")
            || l.contains("WQE/Sec")
            || l.contains("Bandwidth")
            || l.contains("Arithmetic mean")
    }) {
        println!("{what}: {}", l.trim());
    }
}

/// Transaction tests: 100 iterations of SEND/RECV 256 B both ways, then with an RDMA WRITE and
/// an RDMA READ of 4 KiB by the server, every buffer validated (`-V`).
fn transaction(s: &Setup) {
    with_server(s, "transaction", |s| {
        let base = [
            "-T",
            "T",
            "-s",
            s.server_address(),
            "-D",
            "dr",
            "-i",
            "100",
            "-t",
            "1",
            "-w",
            "1",
            "-V",
        ];
        for (name, ops) in [
            ("SR", &["client", "SR", "256", "server", "SR", "256"][..]),
            (
                "SR+RW",
                &[
                    "client", "SR", "256", "server", "RW", "4096", "server", "SR", "256",
                ],
            ),
            (
                "SR+RR",
                &[
                    "client", "SR", "256", "server", "RR", "4096", "server", "SR", "256",
                ],
            ),
        ] {
            let args: Vec<&str> = base.iter().chain(ops).copied().collect();
            let out = client(s, &args);
            let what = format!("dapltest -T T {name}");
            assert_no_error(s.link(), &what, &out, &[]);
            for line in [
                "----- Stats ---- : 1 threads, 1 EPs",
                "Total Send",
                "End of Work -- Client Exiting",
            ] {
                assert!(out.contains(line), "{what}: no {line:?}:\n{out}");
            }
            let moved = |kind: &str| {
                out.lines()
                    .find(|l| l.starts_with(kind))
                    .and_then(|l| l.split(':').nth(1))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or_else(|| panic!("{what}: no {kind:?} line:\n{out}"))
            };
            assert!(
                moved("Total Send") > 0.0 && moved("Total Recv") > 0.0,
                "{what}:\n{out}"
            );
            match name {
                "SR+RW" => assert!(moved("Total RDMA Write") > 0.0, "{what}:\n{out}"),
                "SR+RR" => assert!(moved("Total RDMA Read") > 0.0, "{what}:\n{out}"),
                _ => {}
            }
            print_figures(&what, &out);
        }
    });
}

/// The performance test: 1000 RDMA WRITEs of 4 KiB, one in flight.
fn performance(s: &Setup) {
    let server = with_server(s, "performance", |s| {
        let out = client(
            s,
            &[
                "-T",
                "P",
                "-s",
                s.server_address(),
                "-D",
                "dr",
                "-i",
                "1000",
                "RW",
                "4096",
                "1",
            ],
        );
        let what = "dapltest -T P RW 4096 1";
        assert_no_error(s.link(), what, &out, &[]);
        assert!(
            out.contains("raw: RW, 1000, 4096, 1, 1000,"),
            "{what}:\n{out}"
        );
        assert!(
            out.contains("End of Work -- Client Exiting"),
            "{what}:\n{out}"
        );
        print_figures(what, &out);
    });
    assert!(
        server.contains("Server: Finished performance test."),
        "{server}"
    );
}

/// The limit test, one process: 1000 of every object (dapltest's maximum), several IAs of the
/// same name open at once among them, and the receive queue's limit found by a refused post.
fn limit(s: &Setup) {
    let out = run_one_retrying(
        s,
        'a',
        "dapltest",
        &["-T", "L", "-D", "dr"],
        Progress::Inline,
        LIMIT,
    );
    let what = "dapltest -T L";
    // The receive-post probe ends with the refused post, by design.
    assert_no_error(
        s.link(),
        what,
        &out,
        &["dat_ep_post_recv fails: DAT_INSUFFICIENT_RESOURCES"],
    );
    for line in [
        "LimitTest: IAs opened: 1000",
        "LimitTest: PZs created: 1000",
        "LimitTest: CNOs created: 1000",
        "LimitTest: EVDs created: 1000",
        "LimitTest: EPs created: 1000",
        "LimitTest: RSPs created: 1000",
        "LimitTest: PSPs created: 1000",
        "LimitTest: LMRs created: 1000",
        "LimitTest: recv buffers posted per EP: 256",
        "LimitTest: LMR of 0x40000000 bytes OK - stopping now.",
    ] {
        assert!(out.contains(line), "{what}: no {line:?}:\n{out}");
    }
}

/// Runs one functional suite (`cases`: none = all) and checks that every case ran and passed.
fn functional_suite(s: &Setup, suite: &str, cases: &[usize], expected: &[&str]) -> String {
    let names: Vec<String> = cases.iter().map(|c| format!("case{c}")).collect();
    let mut args = vec!["-T", "F", "-s", s.server_address(), "-D", "dr", "-f", suite];
    args.extend(names.iter().map(String::as_str));
    let out = client(s, &args);
    let what = format!("dapltest -T F -f {suite}");
    assert_no_error(s.link(), &what, &out, expected);
    let ran = out.lines().filter(|l| l.contains("case: ")).count();
    let passed = out.lines().filter(|l| l.trim() == "Result: PASS").count();
    assert!(ran > 0, "{what}: no case ran:\n{out}");
    assert_eq!(
        passed + expected.len(),
        ran,
        "{what}: not every case passed:\n{out}"
    );
    out
}

/// The functional suites: hardware connection, endpoint, protection zone, memory registration
/// and connection management (every case of each).
fn functional(s: &Setup) {
    with_server(s, "functional", |s| {
        for (suite, cases) in [
            ("hwconn", 4),
            ("endpoint", 3),
            ("pz", 3),
            ("mem", 5),
            ("connmgt", 2),
        ] {
            let out = functional_suite(s, suite, &[], &[]);
            let ran = out.lines().filter(|l| l.contains("case: ")).count();
            assert_eq!(ran, cases, "-f {suite}:\n{out}");
        }
    });
}

/// The queryinfo suite but its cases 13 and 15, which crash inside libdat2 for any provider
/// (docs/REFERENCE-dat.md). Cases 3, 16 and 17 create their PSP with DAT_PSP_PROVIDER_FLAG
/// (provider-created EPs). Case 5 (dat_cr_query) is left by dapltest to the connection tests:
/// `Result: UNSUPP`.
fn queryinfo(s: &Setup) {
    with_server(s, "queryinfo", |s| {
        let skipped = [13, 15];
        let cases: Vec<usize> = (0..=17).filter(|c| !skipped.contains(c)).collect();
        let out = functional_suite(s, "queryinfo", &cases, &["Result: UNSUPP"]);
        let ran = out.lines().filter(|l| l.contains("case: ")).count();
        assert_eq!(ran, cases.len(), "{out}");
    });
}

#[test]
fn dapltest_transactions_sr_rw_rr_validated_over_af_packet() {
    let _one = one_at_a_time();
    transaction(&Setup::new("dlt"));
    assert_no_dpdk_runtime_dir("dlt");
}

/// The transaction tests, every buffer validated, between two subnets through a Linux router
/// in a namespace (each profile's `[roce] gateway`).
#[test]
fn dapltest_transactions_validated_through_a_linux_router() {
    let _one = one_at_a_time();
    transaction(&Setup::with_link("drt", Link::Routed));
    assert_no_dpdk_runtime_dir("drt");
}

/// The transaction tests with frames lost, duplicated, reordered and corrupted in both
/// directions on both ports (`[faults]` in both profiles): every buffer still validated, and
/// the injector reports what it did.
#[test]
fn dapltest_transactions_validated_under_injected_faults_over_af_packet() {
    let _one = one_at_a_time();
    let s = Setup::new("dlx")
        .with_faults("loss = 0.005\ndup = 0.01\nreorder = 0.02\ncorrupt = 0.002\nseed = 5");
    let out = with_server(&s, "transaction under faults", |s| {
        let args = [
            "-T",
            "T",
            "-s",
            s.server_address(),
            "-D",
            "dr",
            "-i",
            "100",
            "-t",
            "1",
            "-w",
            "1",
            "-V",
            "client",
            "SR",
            "256",
            "server",
            "RW",
            "4096",
            "server",
            "RR",
            "4096",
            "server",
            "SR",
            "256",
        ];
        let out = client(s, &args);
        assert_no_error(s.link(), "dapltest -T T under faults", &out, &[]);
        assert!(out.contains("End of Work -- Client Exiting"), "{out}");
        let line = out
            .lines()
            .find(|l| l.contains("dpdk-roce faults:"))
            .unwrap_or_else(|| panic!("no fault report:\n{out}"));
        let done: u64 = line
            .split([' ', ';'])
            .filter_map(|kv| kv.split_once('=').and_then(|(_, v)| v.parse::<u64>().ok()))
            .sum();
        assert!(done > 0, "the injector did nothing: {line}");
        println!("{line}");
        print_figures("dapltest -T T under faults", &out);
        if let Some(t) = out.lines().find(|l| l.starts_with("Total Time")) {
            println!("dapltest -T T under faults: {}", t.trim());
        }
    });
    assert!(
        out.contains("dpdk-roce faults:"),
        "the server's report:\n{out}"
    );
    assert_no_dpdk_runtime_dir("dlx");
}

#[test]
fn dapltest_performance_rdma_write_over_af_packet() {
    let _one = one_at_a_time();
    performance(&Setup::new("dlp"));
    assert_no_dpdk_runtime_dir("dlp");
}

#[test]
fn dapltest_limits_reach_every_maximum_over_af_packet() {
    let _one = one_at_a_time();
    limit(&Setup::new("dll"));
    assert_no_dpdk_runtime_dir("dll");
}

#[test]
fn dapltest_functional_suites_pass_over_af_packet() {
    let _one = one_at_a_time();
    functional(&Setup::new("dlf"));
    assert_no_dpdk_runtime_dir("dlf");
}

#[test]
fn dapltest_queryinfo_passes_over_af_packet() {
    let _one = one_at_a_time();
    queryinfo(&Setup::new("dlq"));
    assert_no_dpdk_runtime_dir("dlq");
}

#[test]
fn dapltest_transactions_sr_rw_rr_validated_over_tap() {
    let _one = one_at_a_time();
    let s = Setup::with_link("dltt", Link::Tap);
    transaction(&s);
    s.assert_no_tap_left();
    assert_no_dpdk_runtime_dir("dltt");
}

#[test]
fn dapltest_performance_rdma_write_over_tap() {
    let _one = one_at_a_time();
    let s = Setup::with_link("dlpt", Link::Tap);
    performance(&s);
    s.assert_no_tap_left();
    assert_no_dpdk_runtime_dir("dlpt");
}

#[test]
fn dapltest_limits_reach_every_maximum_over_tap() {
    let _one = one_at_a_time();
    let s = Setup::with_link("dllt", Link::Tap);
    limit(&s);
    s.assert_no_tap_left();
    assert_no_dpdk_runtime_dir("dllt");
}

#[test]
fn dapltest_functional_suites_pass_over_tap() {
    let _one = one_at_a_time();
    let s = Setup::with_link("dlft", Link::Tap);
    functional(&s);
    s.assert_no_tap_left();
    assert_no_dpdk_runtime_dir("dlft");
}

#[test]
fn dapltest_queryinfo_passes_over_tap() {
    let _one = one_at_a_time();
    let s = Setup::with_link("dlqt", Link::Tap);
    queryinfo(&s);
    s.assert_no_tap_left();
    assert_no_dpdk_runtime_dir("dlqt");
}

#[test]
fn dapltest_transactions_sr_rw_rr_validated_over_memif() {
    let _one = one_at_a_time();
    transaction(&Setup::with_link("dltm", Link::Memif));
    assert_no_dpdk_runtime_dir("dltm");
}

#[test]
fn dapltest_performance_rdma_write_over_memif() {
    let _one = one_at_a_time();
    performance(&Setup::with_link("dlpm", Link::Memif));
    assert_no_dpdk_runtime_dir("dlpm");
}

#[test]
fn dapltest_functional_suites_pass_over_memif() {
    let _one = one_at_a_time();
    functional(&Setup::with_link("dlfm", Link::Memif));
    assert_no_dpdk_runtime_dir("dlfm");
}

#[test]
fn dapltest_queryinfo_passes_over_memif() {
    let _one = one_at_a_time();
    queryinfo(&Setup::with_link("dlqm", Link::Memif));
    assert_no_dpdk_runtime_dir("dlqm");
}
