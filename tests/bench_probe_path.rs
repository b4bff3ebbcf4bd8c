//! bench/probe-path.py (bench/congestion.sh --split): from the probe's frames captured at the
//! four veth ends, where each round trip beside the stream went. Fed a trace written here (the
//! tshark fields congestion.sh extracts: time, source address, BTH PSN), it must pair each
//! client SEND with the echo the server sent after it, count a frame sent again at its first
//! copy, leave out frames outside the stream's run, and refuse captures with no round trip.

mod dpdk_common;
use dpdk_common::Dir;
use std::path::{Path, PathBuf};
use std::process::Command;

const CLIENT: &str = "10.77.0.2";
const SERVER: &str = "10.77.0.1";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/probe-path.py")
}

/// Writes each capture (`(time in s, source, PSN)` lines) into `dir` and runs the script over
/// the stream's run `from_ns..to_ns` (Unix ns).
fn run(
    dir: &Path,
    from_ns: u64,
    to_ns: u64,
    ends: [&[(f64, &str, u32)]; 4],
) -> std::process::Output {
    let names = ["client_in", "client_out", "server_in", "server_out"];
    let mut cmd = Command::new("python3");
    cmd.arg(script())
        .arg(from_ns.to_string())
        .arg(to_ns.to_string());
    for (name, frames) in names.iter().zip(ends) {
        let text: String = frames
            .iter()
            .map(|(t, src, psn)| format!("{t:.9}\t{src}\t{psn}\n"))
            .collect();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        cmd.arg(path);
    }
    cmd.output().expect("python3 runs")
}

/// `(p50, p99, max)` of the line named `part`.
fn figures(stdout: &str, part: &str) -> (f64, f64, f64) {
    let line = stdout
        .lines()
        .find(|l| l.trim_start().starts_with(part))
        .unwrap_or_else(|| panic!("no {part} line:\n{stdout}"));
    let after = |key: &str| -> f64 {
        line.split(key)
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {line:?}"))
    };
    (after(" p50 "), after(" p99 "), after(" max "))
}

#[test]
fn each_send_is_paired_with_the_echo_after_it_within_the_stream() {
    let dir = Dir::new("probe-path-pairs");
    // Round trip 1: SEND 7 leaves the client at 10.000000, reaches the server 100 us later;
    // the echo (PSN 501) leaves 20 us after that and is back 1 us later.
    // Round trip 2: SEND 8, 300 us forward, echo 502 after 40 us, 2 us back; SEND 8 is sent
    // again 500 us after its first copy (counted at the first).
    // Before the stream (9.0 s): SEND 6 and its echo 500, left out.
    let client_out = [
        (9.0, CLIENT, 6),
        (10.000000, CLIENT, 7),
        (10.001000, CLIENT, 8),
        (10.001500, CLIENT, 8),
    ];
    let server_in = [
        (9.000050, CLIENT, 6),
        (10.000100, CLIENT, 7),
        (10.001300, CLIENT, 8),
        (10.001600, CLIENT, 8),
    ];
    let server_out = [
        (9.000060, SERVER, 500),
        (10.000120, SERVER, 501),
        (10.001340, SERVER, 502),
    ];
    let client_in = [
        (9.000061, SERVER, 500),
        (10.000121, SERVER, 501),
        (10.001342, SERVER, 502),
    ];
    let out = run(
        &dir.0,
        9_500_000_000,
        11_000_000_000,
        [&client_in, &client_out, &server_in, &server_out],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("(2 round trips captured)"), "{stdout}");
    let close = |got: (f64, f64, f64), want: (f64, f64, f64), part: &str| {
        let d = (got.0 - want.0).abs() + (got.1 - want.1).abs() + (got.2 - want.2).abs();
        assert!(d < 0.3, "{part}: {got:?}, expected {want:?}\n{stdout}");
    };
    close(
        figures(&stdout, "forward"),
        (100.0, 300.0, 300.0),
        "forward",
    );
    close(figures(&stdout, "server"), (20.0, 40.0, 40.0), "server");
    close(figures(&stdout, "reverse"), (1.0, 2.0, 2.0), "reverse");
    close(
        figures(&stdout, "wire to wire"),
        (121.0, 342.0, 342.0),
        "wire to wire",
    );
}

#[test]
fn captures_without_a_round_trip_in_the_stream_are_refused() {
    let dir = Dir::new("probe-path-none");
    // One SEND that never reached the server's interface, and an echo with no SEND before it.
    let out = run(
        &dir.0,
        9_500_000_000,
        11_000_000_000,
        [
            &[(10.0002, SERVER, 501)],
            &[(10.0, CLIENT, 7)],
            &[],
            &[(10.0001, SERVER, 501)],
        ],
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no round trip captured"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
