//! Bad input through the real DAT path: `roce-dat-consumer` processes link libdat2, which
//! loads this crate's provider from dat.conf (DAT_OVERRIDE) and dispatches every call through
//! the registry to it, over net_af_packet on a veth pair created here (inline progress).
//! Each case is one `CASE <name> expected=... got=... PASS|FAIL` line of the consumer; every
//! case named here must be present and PASS, and the consumer must exit 0.

mod dat_programs_common;
mod test_programs;
use test_programs::test_program;

use dat_programs_common::dpdk_common::{
    decode_all_valid, retry_fanout, tshark_clean, FANOUT_COLLISION,
};
use dat_programs_common::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn consumer() -> std::path::PathBuf {
    test_program("roce-dat-consumer")
}
/// The RoCE addresses of profiles af_packet-a / -b, and one nobody answers.
const SERVER_IP: &str = "10.77.0.1";
const NOBODY_IP: &str = "10.77.0.99";
/// CM timers of the tests whose peer dies during set-up or tear-down: 67 ms response timeout,
/// 3 retries (the defaults, rdma_cm's 4.3 s and 15, give a dead peer a minute).
const FAST_CM: &str = "cm_response_timeout = 14\ncm_max_retries = 3";

/// A consumer process whose output lines arrive on a channel and are kept for messages.
struct Proc {
    child: Child,
    /// Its EAL runtime directory, removed when the test has to kill it.
    runtime_dir: std::path::PathBuf,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    all: Arc<Mutex<Vec<String>>>,
    /// The threads reading its stdout and stderr.
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Proc {
    fn start(s: &Setup, side: char, args: &[&str]) -> Proc {
        Proc::start_with(s, side, args, &[])
    }

    /// `start` with `env` set too.
    fn start_with(s: &Setup, side: char, args: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut child = Command::new(consumer())
            .envs(env.iter().copied())
            .env("DAT_OVERRIDE", s.conf(side))
            .env("DPDK_ROCE_PROGRESS", "inline")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start roce-dat-consumer");
        let (tx, lines) = channel();
        let all = Arc::new(Mutex::new(Vec::new()));
        let out = child.stdout.take().unwrap();
        let err = child.stderr.take().unwrap();
        let mut readers = Vec::new();
        for (stream, tx) in [
            (Box::new(out) as Box<dyn std::io::Read + Send>, Some(tx)),
            (Box::new(err), None),
        ] {
            let all = all.clone();
            readers.push(std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    all.lock().unwrap().push(line.clone());
                    if let Some(tx) = &tx {
                        let _ = tx.send(line);
                    }
                }
            }));
        }
        let stdin = child.stdin.take();
        Proc {
            runtime_dir: s.runtime_dir(side, child.id()),
            child,
            stdin,
            lines,
            all,
            readers,
        }
    }

    /// Waits for a stdout line starting with `what`; false on timeout or exit.
    fn wait_line(&self, what: &str, t: Duration) -> bool {
        let end = Instant::now() + t;
        while let Some(left) = end.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(l) if l.starts_with(what) => return true,
                Ok(_) => {}
                Err(_) => return false,
            }
        }
        false
    }

    fn text(&self) -> String {
        self.all.lock().unwrap().join("\n")
    }

    /// Waits for the exit at most `t` (then kills): (exit success, all output).
    fn finish(mut self, t: Duration) -> (bool, String) {
        let end = Instant::now() + t;
        let status = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break Some(st);
            }
            if Instant::now() > end {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let _ = std::fs::remove_dir_all(&self.runtime_dir);
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        // The pipes reach their end once the program (killed or not) has exited.
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let text = format!("{}\n[status {status:?}]", self.text());
        (status.is_some_and(|s| s.success()), text)
    }

    fn kill9(&mut self) {
        let _ = Command::new("kill")
            .args(["-9", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
    }
}

/// The line of `case` says PASS.
fn assert_case(out: &str, case: &str) {
    let line = out
        .lines()
        .find(|l| l.starts_with(&format!("CASE {case} ")))
        .unwrap_or_else(|| panic!("no line for case {case}:\n{out}"));
    assert!(line.ends_with(" PASS"), "case {case} failed: {line}\n{out}");
}

/// Removes the EAL runtime dir a SIGKILLed process of profile `dat<tag>-<side>` left.
fn remove_runtime_dir(tag: &str, side: char, pid: u32) {
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/dat{tag}-{side}-{pid}"));
}

const LOCAL_CASES: &[&str] = &[
    "null_ep_post_send",
    "unissued_ia_pz_create",
    "freed_pz_free",
    "ep_get_status_all_outputs_null",
    "ep_get_status_state_only",
    "ep_get_status_state_only.state",
    "ep_get_status_null_state",
    "ep_get_status_null_state.idle",
    "ep_recv_query_both_outputs_null",
    "ep_recv_query_span_only",
    "ep_recv_query_span_only.span",
    "forged_ep_post_recv",
    "forged_ep_free",
    "pz_as_ep_post_send",
    "evd_as_pz_free",
    "lmr_as_ep_free",
    "freed_ep_post_recv",
    "freed_ep_free",
    "freed_ep_connect",
    "freed_lmr_free",
    "freed_psp_free",
    "freed_ep_get_handle_type",
    "null_pz_out",
    "null_evd_out",
    "null_ep_out",
    "null_psp_out",
    "null_handle_type_out",
    "null_event_evd_wait",
    "null_iov_post_recv",
    "post_recv_too_many_iovs",
    "post_recv_negative_count",
    "post_recv_lmr_of_other_pz",
    "post_recv_unconnected_allowed",
    "post_recv_beyond_depth",
    "post_send_unconnected",
    "post_rdma_write_unconnected",
    "post_rdma_read_unconnected",
    "connect_timeout_nobody_answers",
    "connect_timeout_ep_state",
    "connect_nobody_answers_unreachable",
    "connect_nobody_answers_ep_state",
    "ia_open_dto_evd_as_async_evd",
    "ia_open_sharing_the_async_evd",
    "ia_open_sharing_the_async_evd.handle",
    "ia_close_of_the_sharing_ia",
    "shared_async_evd_stays_with_its_ia",
    "closed_ia_pz_create",
];

/// The cells of the local run's bad-input matrix (`matrix.<call>.<what>`): the EP handle of
/// every EP call bad in each way, each handle argument of dat_ep_create bad in turn, the
/// handle of the PZ, LMR, RMR, EVD, PSP, RSP and CR calls bad in each way, and the counts
/// out of range.
fn matrix_cases() -> Vec<String> {
    let mut v = Vec::new();
    for kind in ["null", "forged", "freed", "pz", "evd", "lmr"] {
        for call in [
            "ep_get_status",
            "ep_recv_query",
            "ep_set_watermark",
            "ep_modify",
            "ep_post_send",
            "ep_post_recv",
            "ep_post_rdma_write",
            "ep_post_rdma_read",
            "ep_disconnect",
            "ep_free",
        ] {
            v.push(format!("matrix.{call}.{kind}_ep"));
        }
    }
    for kind in ["forged", "freed", "lmr"] {
        for arg in ["ia", "pz", "recv_evd", "request_evd", "connect_evd"] {
            v.push(format!("matrix.ep_create.{kind}_{arg}"));
        }
    }
    for call in [
        "ep_post_send",
        "ep_post_recv",
        "ep_set_watermark_soft",
        "ep_set_watermark_hard",
    ] {
        v.push(format!("matrix.{call}.negative_count"));
    }
    v.push("matrix.ep_modify.null_param".into());
    for call in ["ep_post_rdma_write", "ep_post_rdma_read"] {
        for what in [
            "null_iov",
            "null_remote",
            "negative_count",
            "too_many_iovs",
            "unknown_flags",
        ] {
            v.push(format!("matrix.{call}.{what}"));
        }
    }
    for kind in ["null", "forged", "freed", "ep"] {
        for call in [
            "pz_free",
            "lmr_free",
            "rmr_create",
            "rmr_free",
            "evd_free",
            "evd_dequeue",
            "evd_wait",
            "evd_enable",
            "evd_disable",
            "psp_create",
            "psp_free",
            "rsp_create_evd",
            "rsp_free",
        ] {
            v.push(format!("matrix.{call}.{kind}"));
        }
        if kind != "ep" {
            v.push(format!("matrix.rsp_create_ep.{kind}"));
        }
        if kind != "freed" {
            v.push(format!("matrix.cr_accept.{kind}"));
            v.push(format!("matrix.cr_reject.{kind}"));
        }
    }
    v.push("matrix.psp_create.qualifier_still_free".into());
    for case in [
        "ep_post_send.null_iov",
        "ep_post_send.too_many_iovs",
        "ep_post_send.unknown_flags",
        "ep_post_recv.unknown_flags",
    ] {
        v.push(format!("matrix.{case}"));
    }
    v
}

/// Handles, NULL pointers, sizes, depths and states on one process, and connects to an
/// address nobody answers: with dat_ep_connect's `timeout` (TIMED_OUT), and without (ARP
/// fails: UNREACHABLE).
#[test]
fn local_bad_input_gets_dat_errors() {
    let s = Setup::new("bl");
    let out = retry_fanout(|_| {
        // The provider's trace of failing DAT calls (`crate::log`).
        let p = Proc::start_with(
            &s,
            'b',
            &["local", "--nobody", NOBODY_IP],
            &[("DPDK_ROCE_DAT_TRACE", "1")],
        );
        let (ok, text) = p.finish(Duration::from_secs(120));
        if text.contains(FANOUT_COLLISION) {
            return None;
        }
        assert!(ok, "consumer failed:\n{text}");
        Some(text)
    });
    println!("{out}");
    for case in LOCAL_CASES {
        assert_case(&out, case);
    }
    for case in matrix_cases() {
        assert_case(&out, &case);
    }
    assert!(out.contains("RESULT 0 failed"), "{out}");
    // Every refused call was logged with the provider entry's source location.
    let traced = out
        .lines()
        .filter(|l| l.contains("dpdk_roce::dat::call") && l.contains("DAT call failed"))
        .collect::<Vec<_>>();
    assert!(
        traced.len() > 50,
        "{} traced failures:\n{out}",
        traced.len()
    );
    assert!(
        traced
            .iter()
            .all(|l| l.contains("crates/roce-dat/src/dat/ffi/")),
        "{traced:?}"
    );
    assert_no_dpdk_runtime_dir("bl");
}

const CLIENT_CASES: &[&str] = &[
    "baseline_traffic",
    "post_send_too_many_iovs",
    "post_send_lmr_of_other_pz",
    "post_send_null_iov",
    "post_send_beyond_request_depth",
    "post_send_beyond_request_depth.completions",
    "still_connected_after_refused_posts",
    "rdma_write_unregistered_rkey.status",
    "rdma_write_unregistered_rkey.event",
    "rdma_write_unregistered_rkey.state",
    "rdma_write_freed_rkey.status",
    "rdma_write_freed_rkey.event",
    "rdma_write_other_pz_rkey.status",
    "rdma_write_other_pz_rkey.event",
    "rdma_write_out_of_bounds.status",
    "rdma_write_out_of_bounds.state",
    "rdma_write_wrapping_address.status",
    "rdma_read_unregistered_rkey.status",
    "rdma_read_out_of_bounds.status",
    "rdma_read_out_of_bounds.event",
    "post_send_segment_longer_than_lmr.status",
    "post_send_segment_longer_than_lmr.event",
    "post_send_unknown_lmr_context.status",
    "post_send_freed_lmr.status",
    "post_send_freed_lmr.state",
    "send_longer_than_peer_receive.status",
    "send_longer_than_peer_receive.event",
    "send_longer_than_peer_receive.state",
    "post_send_disconnected",
    "post_rdma_write_disconnected",
    "connect_no_listener",
    "connect_no_listener.state",
    "traffic_after_bad_input",
];

/// Connections the client makes to the server (the no-listener connect does not reach it).
const CLIENT_CONNECTIONS: u32 = 13;

/// Bad input on connections over the veth pair; the server checks after every connection
/// that no byte outside registered memory changed.
#[test]
fn connected_bad_input_gets_dat_errors_and_events() {
    let s = Setup::new("bc");
    let (srv, cli) = retry_fanout(|_| {
        let conns = CLIENT_CONNECTIONS.to_string();
        // The server's provider logs its connections (`DPDK_ROCE_LOG=info`).
        let server = Proc::start_with(
            &s,
            'a',
            &["server", "--qual", "7100", "--connections", &conns],
            &[("DPDK_ROCE_LOG", "info")],
        );
        if !server.wait_line("READY", Duration::from_secs(60)) {
            let (_, text) = server.finish(Duration::from_secs(5));
            assert!(text.contains(FANOUT_COLLISION), "server not ready:\n{text}");
            return None;
        }
        let client = Proc::start(
            &s,
            'b',
            &["client", "--server", SERVER_IP, "--qual", "7100"],
        );
        let (cli_ok, cli) = client.finish(Duration::from_secs(300));
        if cli.contains(FANOUT_COLLISION) {
            let _ = server.finish(Duration::ZERO);
            return None;
        }
        let (srv_ok, srv) = server.finish(Duration::from_secs(30));
        assert!(cli_ok, "client failed:\n{cli}\nserver:\n{srv}");
        assert!(srv_ok, "server failed:\n{srv}\nclient:\n{cli}");
        Some((srv, cli))
    });
    println!("server:\n{srv}\nclient:\n{cli}");
    for case in CLIENT_CASES {
        assert_case(&cli, case);
    }
    for n in 1..=CLIENT_CONNECTIONS {
        assert_case(&srv, &format!("server_memory_intact_after_connection_{n}"));
    }
    // The too-long send's receive at the server.
    assert!(
        srv.lines()
            .any(|l| l.starts_with("INFO connection") && l.contains("DAT_DTO_ERR_LOCAL_LENGTH")),
        "the server's receive of the too-long send did not complete with LOCAL_LENGTH:\n{srv}"
    );
    assert!(cli.contains("RESULT 0 failed"), "{cli}");
    // Logging: the server's provider logged the connections at info, rate-limited (a burst of
    // 10, then 10 a second; a line after some were held back counts them in `suppressed=`);
    // the client's, with no log variable set, nothing below a warning.
    let established: Vec<&str> = srv
        .lines()
        .filter(|l| l.contains(" INFO ") && l.contains("connection established"))
        .collect();
    let held_back: u32 = established
        .iter()
        .filter_map(|l| {
            l.split("suppressed=")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse::<u32>()
                .ok()
        })
        .sum();
    assert!(
        established.len() as u32 >= CLIENT_CONNECTIONS.min(10)
            && established.len() as u32 + held_back <= CLIENT_CONNECTIONS,
        "{srv}"
    );
    assert!(
        !cli.lines().any(|l| l.contains(" INFO ")
            || l.contains(" DEBUG ")
            || l.contains("DAT call failed")),
        "{cli}"
    );
    assert_no_dpdk_runtime_dir("bc");
}

/// The server process is killed (SIGKILL) in the middle of a stream of sends and RDMA writes
/// with receives posted: the survivor gets DAT_CONNECTION_EVENT_BROKEN, every outstanding DTO
/// completes (flushed, none lost), and it connects to a freshly started server and moves
/// verified data. The killed server's own capture (DPDK_ROCE_CAPTURE) holds what it handled
/// up to the kill, clean: the provider flushes it every turn, so no exit path loses it (the
/// kill may cut the write in flight: at most the last record is partial).
#[test]
fn peer_killed_mid_stream_survivor_flushes_and_reconnects() {
    let s = Setup::new("bk");
    let capture = std::env::temp_dir().join(format!("dpdk-roce-bk-{}.pcap", std::process::id()));
    let cli = retry_fanout(|_| {
        let mut first = Proc::start_with(
            &s,
            'a',
            &["server", "--qual", "7200"],
            &[("DPDK_ROCE_CAPTURE", capture.to_str().unwrap())],
        );
        if !first.wait_line("READY", Duration::from_secs(60)) {
            let (_, text) = first.finish(Duration::from_secs(5));
            assert!(text.contains(FANOUT_COLLISION), "server not ready:\n{text}");
            return None;
        }
        let mut client = Proc::start(
            &s,
            'b',
            &["stream", "--server", SERVER_IP, "--qual", "7200"],
        );
        if !client.wait_line("STREAMING", Duration::from_secs(60)) {
            first.kill9();
            remove_runtime_dir("bk", 'a', first.child.id());
            let (_, text) = client.finish(Duration::from_secs(5));
            assert!(text.contains(FANOUT_COLLISION), "no stream:\n{text}");
            return None;
        }
        let pid = first.child.id();
        first.kill9();
        remove_runtime_dir("bk", 'a', pid);
        // The CM exchange and the stream's first messages at least, every ICRC valid; the
        // kill may have cut the write in flight, so the last record may be partial.
        let cut = dpdk_common::cut_to_whole_records(&capture);
        println!("the killed server's capture: {cut} bytes of a last record cut by the kill");
        tshark_clean(&capture);
        let frames = decode_all_valid(&capture);
        assert!(
            frames >= 8,
            "the killed server's capture holds {frames} RoCEv2 frames"
        );
        assert!(
            client.wait_line("BROKEN", Duration::from_secs(150)),
            "the survivor never saw the broken connection:\n{}",
            client.text()
        );
        // A fresh server process (a new pid: no fanout collision with the dead one's id
        // unless it collides with the client's, retried below).
        let mut second = None;
        for _ in 0..3 {
            let p = Proc::start(&s, 'a', &["server", "--qual", "7200", "--connections", "1"]);
            if p.wait_line("READY", Duration::from_secs(60)) {
                second = Some(p);
                break;
            }
            let (_, text) = p.finish(Duration::from_secs(5));
            assert!(text.contains(FANOUT_COLLISION), "second server:\n{text}");
            let _ = Command::new("true").status();
        }
        let second = second.expect("second server: PACKET_FANOUT collision three times");
        writeln!(client.stdin.as_mut().unwrap(), "go").unwrap();
        let (cli_ok, cli) = client.finish(Duration::from_secs(120));
        let (srv_ok, srv) = second.finish(Duration::from_secs(30));
        assert!(cli_ok, "survivor failed:\n{cli}\nserver:\n{srv}");
        assert!(srv_ok, "second server failed:\n{srv}");
        assert_case(&srv, "server_memory_intact_after_connection_1");
        Some(cli)
    });
    println!("{cli}");
    for case in [
        "peer_killed.connection_event",
        "peer_killed.no_completion_lost",
        "peer_killed.outstanding_flushed",
        "peer_killed.state",
        "reconnect_after_peer_killed",
    ] {
        assert_case(&cli, case);
    }
    assert!(cli.contains("RESULT 0 failed"), "{cli}");
    assert_no_dpdk_runtime_dir("bk");
    let _ = std::fs::remove_file(&capture);
}

/// Two processes did not get going: stops both (`killed` with SIGKILL, its runtime dir of
/// profile `dat<tag>-<side>` removed) and returns `None` for a retry when either hit the
/// PACKET_FANOUT collision; any other reason fails the test with both outputs.
fn collided<T>(killed: &mut Proc, tag: &str, side: char, other: Proc, what: &str) -> Option<T> {
    let pid = killed.child.id();
    killed.kill9();
    remove_runtime_dir(tag, side, pid);
    // The other runs until stopped: its runtime dir goes too (a killed process keeps it).
    let other_pid = other.child.id();
    let (_, text) = other.finish(Duration::from_secs(5));
    remove_runtime_dir(tag, if side == 'a' { 'b' } else { 'a' }, other_pid);
    let all = format!("{text}\n---\n{}", killed.text());
    assert!(all.contains(FANOUT_COLLISION), "{what}:\n{all}");
    None
}

/// Starts a consumer that must print `READY` (its PSP is up); `None` after a fanout collision.
fn started(s: &Setup, side: char, args: &[&str]) -> Option<Proc> {
    let p = Proc::start(s, side, args);
    if p.wait_line("READY", Duration::from_secs(60)) {
        return Some(p);
    }
    let (_, text) = p.finish(Duration::from_secs(5));
    assert!(text.contains(FANOUT_COLLISION), "not ready:\n{text}");
    None
}

/// The streaming client (the active side) is killed: the passive survivor, with only
/// receives posted or answering every message, ends the connection (BROKEN when its sends go
/// unanswered; its own disconnect when it only receives), completes every posted DTO (flushed,
/// none lost) and then serves a new connection with verified data and intact memory.
#[test]
fn dead_active_side_passive_survivor_with_and_without_sends_flushes_and_serves_again() {
    let s = Setup::new("bd").with_roce_keys(FAST_CM);
    for echo in [false, true] {
        let case = if echo {
            "dead_active.echo"
        } else {
            "dead_active.receives_only"
        };
        let (srv, cli) = retry_fanout(|_| {
            let mut args = vec!["sink", "--qual", "7300"];
            if echo {
                args.push("--echo");
            }
            let sink = started(&s, 'a', &args)?;
            let mut streamer = Proc::start(
                &s,
                'b',
                &["stream", "--server", SERVER_IP, "--qual", "7300"],
            );
            if !sink.wait_line("STREAMING", Duration::from_secs(60)) {
                return collided(&mut streamer, "bd", 'b', sink, "no stream");
            }
            let pid = streamer.child.id();
            streamer.kill9();
            remove_runtime_dir("bd", 'b', pid);
            assert!(
                sink.wait_line("SURVIVED", Duration::from_secs(150)),
                "the survivor did not get over the dead peer:\n{}",
                sink.text()
            );
            assert!(
                sink.wait_line("READY", Duration::from_secs(10)),
                "{}",
                sink.text()
            );
            let again = Proc::start(
                &s,
                'b',
                &["verify", "--server", SERVER_IP, "--qual", "7300"],
            );
            let (cli_ok, cli) = again.finish(Duration::from_secs(90));
            if !cli_ok && cli.contains(FANOUT_COLLISION) {
                let _ = sink.finish(Duration::from_secs(1));
                return None;
            }
            let (srv_ok, srv) = sink.finish(Duration::from_secs(30));
            assert!(cli_ok && srv_ok, "survivor:\n{srv}\nnew client:\n{cli}");
            Some((srv, cli))
        });
        println!("{srv}");
        for c in [
            "connection_event",
            "no_completion_lost",
            "outstanding_flushed",
            "state",
        ] {
            assert_case(&srv, &format!("{case}.{c}"));
        }
        assert_case(&srv, "server_memory_intact_after_connection_1");
        assert_case(&cli, "verify.traffic");
    }
    assert_no_dpdk_runtime_dir("bd");
}

/// A peer dies during connection set-up. The active side dies after its REQ: the passive side
/// accepts, its REP goes unanswered, its EP ends without ESTABLISHED and its receive is
/// flushed; it then serves a new client. The passive side dies holding the REQ: the active
/// side's connect ends with TIMED_OUT (its timeout) or UNREACHABLE, and it connects to a new
/// server and moves verified data.
#[test]
fn a_peer_dying_during_connection_set_up_leaves_the_other_side_usable() {
    let s = Setup::new("bs").with_roce_keys(FAST_CM);
    // The requester dies.
    let (srv, cli) = retry_fanout(|_| {
        let hold = started(&s, 'a', &["hold", "--qual", "7310"])?;
        let mut requester = Proc::start(
            &s,
            'b',
            &[
                "verify",
                "--server",
                SERVER_IP,
                "--qual",
                "7310",
                "--timeout-ms",
                "60000",
            ],
        );
        if !hold.wait_line("REQUEST", Duration::from_secs(60)) {
            return collided(&mut requester, "bs", 'b', hold, "no request");
        }
        let pid = requester.child.id();
        requester.kill9();
        remove_runtime_dir("bs", 'b', pid);
        let mut hold = hold;
        writeln!(hold.stdin.as_mut().unwrap(), "go").unwrap();
        assert!(
            hold.wait_line("SURVIVED", Duration::from_secs(150)),
            "the passive side hung on a dead requester:\n{}",
            hold.text()
        );
        assert!(
            hold.wait_line("READY", Duration::from_secs(10)),
            "{}",
            hold.text()
        );
        let again = Proc::start(
            &s,
            'b',
            &["verify", "--server", SERVER_IP, "--qual", "7310"],
        );
        let (cli_ok, cli) = again.finish(Duration::from_secs(90));
        if !cli_ok && cli.contains(FANOUT_COLLISION) {
            let _ = hold.finish(Duration::from_secs(1));
            return None;
        }
        let (srv_ok, srv) = hold.finish(Duration::from_secs(30));
        assert!(cli_ok && srv_ok, "passive:\n{srv}\nnew client:\n{cli}");
        Some((srv, cli))
    });
    println!("{srv}");
    for c in [
        "dead_during_setup.passive_event",
        "dead_during_setup.passive_receive_flushed",
        "dead_during_setup.passive_state",
        "server_memory_intact_after_connection_1",
    ] {
        assert_case(&srv, c);
    }
    assert_case(&cli, "verify.traffic");

    // The listener dies holding the request.
    let cli = retry_fanout(|_| {
        let mut hold = started(&s, 'a', &["hold", "--qual", "7311"])?;
        let requester = Proc::start(
            &s,
            'b',
            &[
                "verify",
                "--server",
                SERVER_IP,
                "--qual",
                "7311",
                "--timeout-ms",
                "5000",
            ],
        );
        if !hold.wait_line("REQUEST", Duration::from_secs(60)) {
            return collided(&mut hold, "bs", 'a', requester, "no request");
        }
        let pid = hold.child.id();
        hold.kill9();
        remove_runtime_dir("bs", 'a', pid);
        assert!(
            requester.wait_line("NO_CONNECTION", Duration::from_secs(60)),
            "the requester hung on a dead listener:\n{}",
            requester.text()
        );
        let server = started(&s, 'a', &["server", "--qual", "7311", "--connections", "1"])?;
        let mut requester = requester;
        writeln!(requester.stdin.as_mut().unwrap(), "go").unwrap();
        let (cli_ok, cli) = requester.finish(Duration::from_secs(90));
        let (srv_ok, srv) = server.finish(Duration::from_secs(30));
        assert!(cli_ok && srv_ok, "requester:\n{cli}\nnew server:\n{srv}");
        Some(cli)
    });
    println!("{cli}");
    for c in [
        "dead_during_setup.active_event",
        "dead_during_setup.active_state",
        "reconnect_after_dead_server",
    ] {
        assert_case(&cli, c);
    }
    assert_no_dpdk_runtime_dir("bs");
}
