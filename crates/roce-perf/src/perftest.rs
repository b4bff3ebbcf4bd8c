//! perftest's report formats, character for character where a user puts our output beside
//! `ib_write_bw`'s or `ib_write_lat`'s: the rule, the test-info title, the bandwidth table and
//! its units (the latency table is in [`super::latency`]). tests/perftest_formats.rs checks
//! them against the format strings in Debian's perftest binaries.
//!
//! Units as perftest's: `MB/sec` is MiB/s (2^20 bytes per second; perftest's help says "Note:
//! MiB=2^20 byte, while Gb=10^9 bits"), `Gb/sec` is 10^9 bits per second, `MsgRate[Mpps]` is
//! 10^6 messages per second.

use serde::Serialize;

/// perftest's separator line (`RESULT_LINE`).
pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// Bytes in perftest's "MB".
pub const MIB: f64 = 1_048_576.0;

/// The unit of a bandwidth figure: perftest's default `MB/sec` (MiB/s) or `--report_gbits`'s
/// `Gb/sec` (10^9 bits/s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum BwUnit {
    #[serde(rename = "MB/sec")]
    MibPerSec,
    #[serde(rename = "Gb/sec")]
    GbitPerSec,
}

impl BwUnit {
    /// `--report_gbits` or not.
    pub fn new(report_gbits: bool) -> BwUnit {
        if report_gbits {
            BwUnit::GbitPerSec
        } else {
            BwUnit::MibPerSec
        }
    }

    /// The label perftest prints in brackets.
    pub fn label(self) -> &'static str {
        match self {
            BwUnit::MibPerSec => "MB/sec",
            BwUnit::GbitPerSec => "Gb/sec",
        }
    }

    /// `bytes_per_sec` in this unit.
    pub fn of(self, bytes_per_sec: f64) -> f64 {
        match self {
            BwUnit::MibPerSec => bytes_per_sec / MIB,
            BwUnit::GbitPerSec => bytes_per_sec * 8.0 / 1e9,
        }
    }
}

/// perftest's test-info title line (`ctx_print_test_info`): twenty spaces, the test's name as
/// perftest's `testsStr` spells it (`Send`, `RDMA_Write`, `RDMA_Read`, `Atomic`), then `words`
/// (the atomic's type, `Bidirectional`, `Post List`, `BW` or `Latency`) and `Test`.
pub fn title(test: &str, words: &[&str]) -> String {
    let mut t = format!("                    {test} ");
    for w in words {
        t.push_str(w);
        t.push(' ');
    }
    t.push_str("Test");
    t
}

/// The title of a bandwidth test: `RDMA_Write BW Test`, `Send Bidirectional BW Test`,
/// `Atomic FETCH_AND_ADD Post List BW Test`, ...
pub fn bw_title(test: &str, atomic: Option<&str>, bidirectional: bool, post_list: u16) -> String {
    let mut words = Vec::new();
    words.extend(atomic);
    if bidirectional {
        words.push("Bidirectional");
    }
    if post_list > 1 {
        words.push("Post List");
    }
    words.push("BW");
    title(test, &words)
}

/// The title of a latency test: `RDMA_Write Latency Test`.
pub fn lat_title(test: &str) -> String {
    title(test, &["Latency"])
}

/// perftest's bandwidth table header (`RESULT_FMT` / `RESULT_FMT_G`).
pub fn bw_header(unit: BwUnit) -> String {
    let u = unit.label();
    format!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]")
}

/// The header's CPU column with `--cpu_util` (`RESULT_EXT_CPU_UTIL`).
pub const CPU_UTIL_HEADER: &str = "    CPU_Util[%]";

/// One row of the bandwidth table (`REPORT_FMT`: `" %-7lu    %-10lu       %-7.2lf
/// %-7.2lf\t\t   %-7.6lf"`), figures in the header's unit.
pub fn bw_row(bytes: u64, iterations: u64, bw_peak: f64, bw_average: f64, mpps: f64) -> String {
    format!(" {bytes:<7}    {iterations:<10}       {bw_peak:<7.2}            {bw_average:<7.2}\t\t   {mpps:<7.6}")
}

/// The row's CPU column with `--cpu_util` (`REPORT_EXT_CPU_UTIL`), a percentage.
pub fn cpu_util_column(percent: f64) -> String {
    format!("\t    {percent:<3.2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_are_mib_and_gigabits() {
        let m = BwUnit::new(false);
        assert_eq!(m.label(), "MB/sec");
        assert_eq!(m.of(1_048_576.0), 1.0);
        assert_eq!(m.of(1e6), 1e6 / 1_048_576.0);
        let g = BwUnit::new(true);
        assert_eq!(g.label(), "Gb/sec");
        assert_eq!(g.of(125_000_000.0), 1.0);
        // perftest's help: Factor = 10^9 / (2^20 * 8) = 119.2 MiB per Gb.
        assert!((m.of(1e9 / 8.0) / g.of(1e9 / 8.0) - 119.209).abs() < 1e-3);
    }

    #[test]
    fn titles_spell_the_tests_as_perftest() {
        assert_eq!(
            bw_title("RDMA_Write", None, false, 1),
            "                    RDMA_Write BW Test"
        );
        assert_eq!(
            bw_title("Send", None, true, 4),
            "                    Send Bidirectional Post List BW Test"
        );
        assert_eq!(
            bw_title("Atomic", Some("FETCH_AND_ADD"), false, 1),
            "                    Atomic FETCH_AND_ADD BW Test"
        );
        assert_eq!(
            lat_title("RDMA_Read"),
            "                    RDMA_Read Latency Test"
        );
    }

    #[test]
    fn a_row_keeps_its_columns_when_figures_overflow_their_width() {
        let r = bw_row(8_388_608, 1000, 123_456.789, 12.5, 0.0015);
        assert_eq!(
            r,
            " 8388608    1000             123456.79            12.50  \t\t   0.001500"
        );
        assert_eq!(cpu_util_column(7.0), "\t    7.00");
    }
}
