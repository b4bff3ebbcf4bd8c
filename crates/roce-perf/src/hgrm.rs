//! Reading HdrHistogram's classic `.hgrm` percentile distribution back (the format
//! [`LatencySeries::hgrm`](super::latency::LatencySeries::hgrm) writes): the rows
//! `Value Percentile TotalCount 1/(1-Percentile)`, headers and `#[...]` footers skipped.

/// One row: the value (µs) reached at a percentile (0..=1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HgrmPoint {
    pub value: f64,
    pub percentile: f64,
}

/// The rows of an `.hgrm` text, in order; an error names the first line that is neither a
/// row, a header nor a footer.
pub fn parse(text: &str) -> Result<Vec<HgrmPoint>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with("Value") {
            continue;
        }
        let mut w = l.split_whitespace();
        let num = |s: Option<&str>| s.and_then(|s| s.parse::<f64>().ok());
        match (num(w.next()), num(w.next()), num(w.next())) {
            (Some(value), Some(percentile), Some(_count))
                if value.is_finite() && (0.0..=1.0).contains(&percentile) =>
            {
                out.push(HgrmPoint { value, percentile })
            }
            _ => return Err(format!("line {}: not an .hgrm row: {line:?}", n + 1)),
        }
    }
    if out.is_empty() {
        return Err("no .hgrm rows".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{LatencySeries, Scale};

    #[test]
    fn what_latency_series_writes_reads_back() {
        let mut s = LatencySeries::new(8, Scale::Full);
        for v in 1..=1000u64 {
            s.record(v * 1000);
        }
        let rows = parse(&s.hgrm()).unwrap();
        assert!(rows.len() > 10);
        assert!(rows.windows(2).all(|w| w[0].percentile <= w[1].percentile));
        assert!((rows.last().unwrap().value - 1000.0).abs() < 5.0);
        assert_eq!(rows.last().unwrap().percentile, 1.0);
        assert!(parse("Value Percentile\nnot a row\n").is_err());
        assert!(parse("").is_err());
    }
}
