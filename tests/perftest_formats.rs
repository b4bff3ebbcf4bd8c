//! Our perftest tables against perftest's own format strings: the NUL-terminated strings of
//! Debian's `/usr/bin/ib_write_bw` and `/usr/bin/ib_write_lat` (package perftest, installed by
//! scripts/setup.sh; only read here, never run), the headers compared as they are, the row
//! formats run through python3's printf-style `%` (which takes and ignores the `l` length
//! modifier) with the numbers we format, and the test-info title put together from its pieces.

use roce_perf::latency::{table_header, table_line, LatencyRow};
use roce_perf::perftest::{
    bw_header, bw_row, bw_title, cpu_util_column, lat_title, BwUnit, CPU_UTIL_HEADER, RULE,
};
use std::process::Command;

/// The NUL-terminated strings of a perftest binary (printable ones, tabs and newlines kept).
fn strings_of(path: &str) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| {
        panic!("{path}: {e} (scripts/setup.sh installs Debian's perftest package)")
    });
    bytes
        .split(|&b| b == 0)
        .filter(|s| {
            !s.is_empty()
                && s.iter()
                    .all(|&b| b == b'\t' || b == b'\n' || (0x20..0x7f).contains(&b))
        })
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The one string of `strings` that `pick` selects.
#[track_caller]
fn the_one<'a>(strings: &'a [String], what: &str, pick: impl Fn(&str) -> bool) -> &'a str {
    let found: Vec<&String> = strings.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {found:?}");
    found[0]
}

/// Conversions in a printf format.
fn conversions(fmt: &str) -> usize {
    fmt.matches('%').count() - 2 * fmt.matches("%%").count()
}

/// A JSON number for python: integers stay integers (`%lu`), floats keep every bit.
enum Arg {
    Int(u64),
    Float(f64),
}

/// `fmt % args` through python3's printf, as the C library prints it.
fn printf(fmt: &str, args: &[Arg]) -> String {
    let list: Vec<String> = args
        .iter()
        .map(|a| match a {
            Arg::Int(i) => i.to_string(),
            Arg::Float(f) => format!("float.fromhex('{}')", hex_float(*f)),
        })
        .collect();
    let script = format!(
        "import sys\nsys.stdout.write(sys.argv[1] % tuple([{}]))",
        list.join(", ")
    );
    let out = Command::new("python3")
        .args(["-c", &script, fmt])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `f` as C99's hexadecimal float (exact).
fn hex_float(f: f64) -> String {
    let bits = f.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let mantissa = bits & ((1 << 52) - 1);
    if exp == 0 {
        return format!("0x0.{mantissa:013x}p-1022");
    }
    format!("0x1.{mantissa:013x}p{}", exp - 1023)
}

/// Deterministic spread of figures: small, large, exact ties of the rounding, zero.
fn figures() -> Vec<f64> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut v = vec![0.0, 0.125, 0.375, 2.5, 0.005, 99_999.995, 1e7 + 0.5];
    for i in 0..40 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let scale = 10f64.powi((i % 12) - 4);
        v.push((x % 1_000_000) as f64 / 1000.0 * scale);
    }
    v
}

#[test]
fn the_bandwidth_header_and_rows_are_perftests() {
    let s = strings_of("/usr/bin/ib_write_bw");
    for unit in [BwUnit::MibPerSec, BwUnit::GbitPerSec] {
        let label = format!("BW average[{}]", unit.label());
        let theirs = the_one(&s, "the BW header", |x| {
            x.starts_with(" #bytes     #iterations") && x.contains(&label) && !x.contains("Port1")
        });
        assert_eq!(bw_header(unit), theirs);
    }
    let row_fmt = the_one(&s, "the BW row format", |x| {
        x.starts_with(" %-7lu    %-10lu") && conversions(x) == 5
    });
    let f = figures();
    for (i, w) in f.windows(3).enumerate() {
        let (bytes, iters) = (1u64 << (i % 24), (i as u64 * 7919) % 100_000 + 1);
        let ours = bw_row(bytes, iters, w[0], w[1], w[2]);
        let args = [
            Arg::Int(bytes),
            Arg::Int(iters),
            Arg::Float(w[0]),
            Arg::Float(w[1]),
            Arg::Float(w[2]),
        ];
        assert_eq!(ours, printf(row_fmt, &args), "{args:?}", args = w);
    }
    // --cpu_util: perftest's extra column (header `RESULT_EXT_CPU_UTIL`, row
    // `REPORT_EXT_CPU_UTIL`), each printed before its newline.
    let cpu_header = the_one(&s, "the CPU header", |x| x.contains("CPU_Util[%%]"));
    assert_eq!(format!("{CPU_UTIL_HEADER}\n"), printf(cpu_header, &[]));
    let cpu_row = the_one(&s, "the CPU column", |x| x.starts_with("\t    %-3.2f"));
    for pct in [0.0, 7.5, 42.125, 100.0] {
        assert_eq!(
            format!("{}\n", cpu_util_column(pct)),
            printf(cpu_row, &[Arg::Float(pct)])
        );
    }
}

#[test]
fn the_latency_header_and_rows_are_perftests() {
    let s = strings_of("/usr/bin/ib_write_lat");
    let header = the_one(&s, "the latency header", |x| {
        x.starts_with(" #bytes #iterations    t_min[usec]")
    });
    assert_eq!(table_header(), format!("{RULE}\n{header}"));
    let rule = the_one(&s, "the rule", |x| {
        x.len() > 80 && x.chars().all(|c| c == '-')
    });
    assert_eq!(RULE, rule);
    let row_fmt = the_one(&s, "the latency row format", |x| {
        x.starts_with(" %-7lu %lu") && conversions(x) == 9
    });
    let f = figures();
    for (i, w) in f.windows(7).enumerate() {
        let r = LatencyRow {
            bytes: 1 << (i % 24),
            iterations: (i * 104_729) % 1_000_000 + 1,
            t_min: w[0],
            t_max: w[1],
            t_typical: w[2],
            t_avg: w[3],
            t_stdev: w[4],
            p99: w[5],
            p999: w[6],
        };
        let mut args = vec![Arg::Int(r.bytes as u64), Arg::Int(r.iterations as u64)];
        args.extend(w.iter().map(|&v| Arg::Float(v)));
        assert_eq!(table_line(&r), printf(row_fmt, &args), "{r:?}");
    }
}

/// The test-info title as perftest's `ctx_print_test_info` puts it together: its indent,
/// `"%s "` of the test's `testsStr` name (and the atomic's type), the words of the test kind,
/// `"Test"`; every piece read from the binary.
#[test]
fn titles_are_put_together_from_perftests_pieces() {
    let s = strings_of("/usr/bin/ib_write_bw");
    let piece = |want: &str| -> String { the_one(&s, want, |x| x == want).to_owned() };
    let indent = the_one(&s, "the title's indent", |x| {
        x.len() >= 8 && x.chars().all(|c| c == ' ')
    });
    let (name, test) = (piece("%s "), piece("Test"));
    let title = |names: &[&str], words: &[&str]| {
        let mut t = indent.to_owned();
        for n in names {
            t.push_str(&name.replace("%s", &piece(n)));
        }
        for w in words {
            t.push_str(&piece(w));
        }
        t + &test
    };
    for (verb, theirs) in [
        ("RDMA_Write", title(&["RDMA_Write"], &["BW "])),
        ("RDMA_Read", title(&["RDMA_Read"], &["BW "])),
        ("Send", title(&["Send"], &["BW "])),
    ] {
        assert_eq!(bw_title(verb, None, false, 1), theirs);
    }
    assert_eq!(
        bw_title("Atomic", Some("FETCH_AND_ADD"), false, 1),
        title(&["Atomic", "FETCH_AND_ADD"], &["BW "])
    );
    assert_eq!(
        bw_title("Send", None, true, 8),
        title(&["Send"], &["Bidirectional ", "Post List ", "BW "])
    );
    let lat = strings_of("/usr/bin/ib_write_lat");
    assert!(lat.iter().any(|x| x == "Latency "), "ib_write_lat's kind");
    assert_eq!(
        lat_title("RDMA_Write"),
        title(&["RDMA_Write"], &["Latency "])
    );
}
