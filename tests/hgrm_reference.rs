//! The `.hgrm` files roce-lat writes, line for line against the HdrHistogram reference: the
//! PyPI `hdrhistogram` package (installed by scripts/setup.sh into target/python), fed the same
//! recorded values through tests/hgrm_reference.py.

use roce_perf::latency::{LatencySeries, Scale};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The reference's `.hgrm` of `values` (ns).
fn reference_hgrm(values: &[u64]) -> String {
    let site = repo().join("target/python");
    assert!(
        site.join("hdrh/histogram.py").is_file(),
        "the PyPI hdrhistogram package is missing from {}: run scripts/setup.sh",
        site.display()
    );
    let mut child = Command::new("python3")
        .arg(repo().join("tests/hgrm_reference.py"))
        .env("PYTHONPATH", &site)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run python3");
    let input: String = values.iter().map(|v| format!("{v}\n")).collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "hgrm_reference.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Ours, for the same values recorded as measured.
fn our_hgrm(values: &[u64]) -> String {
    let mut s = LatencySeries::new(64, Scale::Full);
    for &v in values {
        s.record(v);
    }
    s.hgrm()
}

/// Asserts the two texts equal line for line, but for the PyPI port's two footer departures
/// from the library, checked for what they mean: its StdDeviation is left in the recorded
/// unit (ns; the library divides it by the unit ratio as it does the mean), and it prints the
/// total count as `TotalCount = %12.3f` (the library: `Total count    = %12d`).
fn assert_same(ours: &str, reference: &str) {
    let (o, r): (Vec<&str>, Vec<&str>) = (ours.lines().collect(), reference.lines().collect());
    assert_eq!(
        o.len(),
        r.len(),
        "line counts differ\nours:\n{ours}\nreference:\n{reference}"
    );
    for (n, (a, b)) in o.iter().zip(&r).enumerate() {
        if b.starts_with("#[Mean") {
            let (mean, stdev) = b.split_once(", StdDeviation   = ").unwrap();
            let stdev: f64 = stdev.trim_end_matches(']').trim().parse().unwrap();
            let expected = format!("{mean}, StdDeviation   = {:>12.3}]", stdev / 1000.0);
            assert_eq!(*a, expected, "line {}", n + 1);
        } else if b.starts_with("#[Max") {
            let (max, count) = b.split_once(", TotalCount     = ").unwrap();
            let count: f64 = count.trim_end_matches(']').trim().parse().unwrap();
            let expected = format!("{max}, Total count    = {:>12}]", count as u64);
            assert_eq!(*a, expected, "line {}", n + 1);
        } else {
            assert_eq!(
                a,
                b,
                "line {}\nours:\n{ours}\nreference:\n{reference}",
                n + 1
            );
        }
    }
}

/// A deterministic heavy-tailed latency sample: most values near 1.5 µs, a tail to ~10 ms.
fn latencies(n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            // Pareto with a 1.2 µs floor: 1200 / u^(1/2.5), capped at 10 ms.
            ((1200.0 / u.powf(0.4)) as u64).min(10_000_000)
        })
        .collect()
}

#[test]
fn a_heavy_tailed_run_of_a_hundred_thousand_round_trips_equals_the_reference() {
    let values = latencies(100_000, 7);
    let ours = our_hgrm(&values);
    assert!(ours.lines().count() > 60, "{ours}");
    assert_same(&ours, &reference_hgrm(&values));
}

#[test]
fn small_and_degenerate_samples_equal_the_reference() {
    let cases: [&[u64]; 5] = [
        &[1000, 1000, 2000, 5000],
        &[1500],
        &[2000; 37],
        &[1, 2, 3, 100_000_000_000],
        &[
            999, 1000, 1001, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097,
        ],
    ];
    for values in cases {
        assert_same(&our_hgrm(values), &reference_hgrm(values));
    }
    let few = latencies(10, 3);
    assert_same(&our_hgrm(&few), &reference_hgrm(&few));
}
