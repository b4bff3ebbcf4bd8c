//! Latency samples of one message size and their reports.

use super::perftest::RULE;
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;

/// Which half of a round trip a report is in (perftest: write/send report half the round trip,
/// read reports the full one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Scale {
    /// Samples are full round trips; the report divides them by two.
    HalfRoundTrip,
    /// Samples are reported as measured.
    Full,
}

/// Latency samples of one size, in nanoseconds.
pub struct LatencySeries {
    pub bytes: usize,
    pub scale: Scale,
    samples_ns: Vec<u64>,
    hist: Histogram<u64>,
}

/// One row of perftest's latency table, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencyRow {
    pub bytes: usize,
    pub iterations: usize,
    pub t_min: f64,
    pub t_max: f64,
    /// Median (perftest's "typical").
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_stdev: f64,
    pub p99: f64,
    pub p999: f64,
}

impl LatencySeries {
    /// An empty series.
    pub fn new(bytes: usize, scale: Scale) -> Self {
        LatencySeries {
            bytes,
            scale,
            samples_ns: Vec::new(),
            // 1 ns .. 100 s with 3 significant digits.
            hist: Histogram::new_with_bounds(1, 100_000_000_000, 3)
                .unwrap_or_else(|_| Histogram::new(3).expect("3 significant digits is valid")),
        }
    }

    /// Records one measured sample (a full round trip for `HalfRoundTrip`).
    pub fn record(&mut self, measured_ns: u64) {
        let v = match self.scale {
            Scale::HalfRoundTrip => measured_ns / 2,
            Scale::Full => measured_ns,
        }
        .max(1);
        self.samples_ns.push(v);
        let _ = self.hist.record(v.min(self.hist.high()));
    }

    /// Samples recorded.
    pub fn len(&self) -> usize {
        self.samples_ns.len()
    }

    /// True without samples.
    pub fn is_empty(&self) -> bool {
        self.samples_ns.is_empty()
    }

    /// The table row; exact order statistics from the raw samples (not histogram buckets).
    pub fn row(&self) -> LatencyRow {
        let n = self.samples_ns.len();
        if n == 0 {
            return LatencyRow {
                bytes: self.bytes,
                iterations: 0,
                t_min: 0.0,
                t_max: 0.0,
                t_typical: 0.0,
                t_avg: 0.0,
                t_stdev: 0.0,
                p99: 0.0,
                p999: 0.0,
            };
        }
        let mut s = self.samples_ns.clone();
        s.sort_unstable();
        let us = |ns: u64| ns as f64 / 1000.0;
        let pct = |p: f64| {
            let idx = ((p * n as f64).ceil() as usize).clamp(1, n) - 1;
            us(s[idx])
        };
        let avg = s.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        let var = s.iter().map(|&v| (v as f64 - avg).powi(2)).sum::<f64>() / n as f64;
        LatencyRow {
            bytes: self.bytes,
            iterations: n,
            t_min: us(s[0]),
            t_max: us(s[n - 1]),
            t_typical: pct(0.5),
            t_avg: avg / 1000.0,
            t_stdev: var.sqrt() / 1000.0,
            p99: pct(0.99),
            p999: pct(0.999),
        }
    }

    /// HdrHistogram's classic percentile distribution (`.hgrm`), values in microseconds, five
    /// ticks per half distance: line for line what the HdrHistogram library's
    /// `outputPercentileDistribution(out, 5, 1000.0)` prints for the same recorded values
    /// (its `PercentileIterator`; tests/hgrm_reference.rs checks it against the PyPI
    /// implementation).
    pub fn hgrm(&self) -> String {
        const TICKS_PER_HALF_DISTANCE: u32 = 5;
        const UNIT: f64 = 1000.0;
        let h = &self.hist;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:>12} {:>14} {:>10} {:>14}\n",
            "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
        );
        for row in percentile_rows(h, TICKS_PER_HALF_DISTANCE) {
            let (value, q) = (row.value as f64 / UNIT, row.percentile / 100.0);
            if row.percentile < 100.0 {
                let _ = writeln!(
                    out,
                    "{value:>12.3} {q:>2.12} {:>10} {:>14.2}",
                    row.total_count,
                    1.0 / (1.0 - q)
                );
            } else {
                let _ = writeln!(out, "{value:>12.3} {q:>2.12} {:>10}", row.total_count);
            }
        }
        let (mean, stdev) = mean_and_stdev(h);
        let _ = writeln!(
            out,
            "#[Mean    = {:>12.3}, StdDeviation   = {:>12.3}]",
            mean / UNIT,
            stdev / UNIT
        );
        let _ = writeln!(
            out,
            "#[Max     = {:>12.3}, Total count    = {:>12}]",
            h.max() as f64 / UNIT,
            h.len()
        );
        let _ = writeln!(
            out,
            "#[Buckets = {:>12}, SubBuckets     = {:>12}]",
            h.buckets(),
            sub_bucket_count(h.sigfig())
        );
        out
    }
}

/// One row of the percentile distribution: the bucket's highest equivalent value, the
/// percentile level (0..=100) iterated to, and the count of values up to that bucket.
struct PercentileRow {
    value: u64,
    percentile: f64,
    total_count: u64,
}

/// HdrHistogram's `PercentileIterator`: levels from 0 towards 100 in steps that halve with
/// every halving of the distance to 100 (`ticks` per half distance); a bucket reports every
/// level its running count reaches, the last recorded bucket only its first, then one more row
/// at exactly 100.
fn percentile_rows(h: &Histogram<u64>, ticks: u32) -> Vec<PercentileRow> {
    let total = h.len();
    let mut rows = Vec::new();
    if total == 0 {
        return rows;
    }
    let mut level = 0.0f64;
    let next_level = |level: f64| {
        // As the library computes it: log2 as ln/ln 2, truncated (its `(long)` casts).
        let halvings = ((100.0 / (100.0 - level)).ln() / 2f64.ln()) as i64;
        let reporting_ticks = i64::from(ticks).saturating_mul(1i64 << (halvings + 1).clamp(0, 62));
        level + 100.0 / reporting_ticks as f64
    };
    let mut seen = 0u64;
    let mut last_value = 0;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        last_value = v.value_iterated_to();
        let reached = |level: f64| (100.0 * seen as f64) / total as f64 >= level;
        while reached(level) {
            rows.push(PercentileRow {
                value: last_value,
                percentile: level,
                total_count: seen,
            });
            level = next_level(level);
            if seen == total {
                break;
            }
        }
    }
    rows.push(PercentileRow {
        value: last_value,
        percentile: 100.0,
        total_count: total,
    });
    rows
}

/// The mean and standard deviation as HdrHistogram computes them: each bucket's values at its
/// median equivalent value.
fn mean_and_stdev(h: &Histogram<u64>) -> (f64, f64) {
    let n = h.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let sum: u128 = h
        .iter_recorded()
        .map(|v| {
            u128::from(h.median_equivalent(v.value_iterated_to())) * u128::from(v.count_at_value())
        })
        .sum();
    let mean = sum as f64 / n as f64;
    let squares: f64 = h
        .iter_recorded()
        .map(|v| {
            let d = h.median_equivalent(v.value_iterated_to()) as f64 - mean;
            d * d * v.count_at_value() as f64
        })
        .sum();
    (mean, (squares / n as f64).sqrt())
}

/// HdrHistogram's sub-bucket count for a precision: 2 * 10^digits rounded up to a power of two.
fn sub_bucket_count(digits: u8) -> u64 {
    (2 * 10u64.pow(u32::from(digits))).next_power_of_two()
}

/// perftest's latency table header (`RESULT_FMT_LAT`), after its rule.
pub fn table_header() -> String {
    format!(
        "{RULE}\n #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] "
    )
}

/// One row of perftest's latency table (`REPORT_FMT_LAT`: `" %-7lu %lu          %-7.2f
/// %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f"`).
pub fn table_line(r: &LatencyRow) -> String {
    format!(
        " {:<7} {}          {:<7.2}        {:<7.2}      {:<7.2}  \t       {:<7.2}     \t{:<7.2}\t\t{:<7.2} \t\t{:<7.2}",
        r.bytes, r.iterations, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p999
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_statistics_are_exact_and_halved_for_round_trips() {
        let mut s = LatencySeries::new(8, Scale::HalfRoundTrip);
        for v in 1..=1000u64 {
            s.record(v * 2000); // round trips of 2..2000 us -> halves of 1..1000 us
        }
        let r = s.row();
        assert_eq!(r.iterations, 1000);
        assert_eq!(r.t_min, 1.0);
        assert_eq!(r.t_max, 1000.0);
        assert_eq!(r.t_typical, 500.0);
        assert_eq!(r.p99, 990.0);
        assert_eq!(r.p999, 999.0);
        assert!((r.t_avg - 500.5).abs() < 1e-9);
        assert!((r.t_stdev - 288.67).abs() < 0.01, "{}", r.t_stdev);
    }

    #[test]
    fn full_scale_keeps_values() {
        let mut s = LatencySeries::new(4096, Scale::Full);
        s.record(3000);
        assert_eq!(s.row().t_min, 3.0);
    }

    #[test]
    fn hgrm_has_the_classic_layout() {
        let mut s = LatencySeries::new(8, Scale::Full);
        for v in [1000u64, 1000, 2000, 5000] {
            s.record(v);
        }
        let text = s.hgrm();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].contains("Value") && lines[0].contains("1/(1-Percentile)"));
        assert!(lines[1].is_empty());
        assert!(
            lines[2].trim_start().starts_with("1.000 0.000000000000"),
            "{}",
            lines[2]
        );
        let last_value_line = lines.iter().rev().find(|l| !l.starts_with('#')).unwrap();
        assert!(
            last_value_line.contains("1.000000000000"),
            "{last_value_line}"
        );
        // Values are bucketed to 3 significant digits, as HdrHistogram reports them.
        assert!(
            text.contains("#[Max     =        5.003, Total count    =            4]"),
            "{text}"
        );
        assert!(text.contains("#[Mean    =        2.25"), "{text}");
        assert!(text.contains("SubBuckets     =         2048]"), "{text}");
    }

    /// The TotalCount column is a running total: it never falls, it reaches the value count
    /// on the last row, and the row at a value counts every value up to it (here: the two of
    /// 1 µs, then three with the 2 µs one, then all four).
    #[test]
    fn hgrm_total_count_is_the_running_total() {
        let mut s = LatencySeries::new(8, Scale::Full);
        for v in [1000u64, 1000, 2000, 5000] {
            s.record(v);
        }
        let text = s.hgrm();
        let rows: Vec<(f64, u64)> = text
            .lines()
            .skip(2)
            .take_while(|l| !l.starts_with('#'))
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w[0].parse().unwrap(), w[2].parse().unwrap())
            })
            .collect();
        assert!(rows.windows(2).all(|p| p[0].1 <= p[1].1), "{text}");
        assert_eq!(rows.last().unwrap().1, 4, "{text}");
        let at = |us: f64| rows.iter().find(|r| (r.0 - us).abs() < 0.01).unwrap().1;
        assert_eq!((at(1.0), at(2.0), at(5.003)), (2, 3, 4), "{text}");
    }

    #[test]
    fn table_line_has_nine_columns() {
        let mut s = LatencySeries::new(2, Scale::Full);
        s.record(1500);
        let line = table_line(&s.row());
        assert_eq!(line.split_whitespace().count(), 9);
        assert!(table_header().contains("t_typical[usec]"));
    }
}
