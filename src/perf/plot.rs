//! Plots of benchmark results with `plotters`, to SVG or PNG by the output's extension: the
//! percentile distribution of `.hgrm` files (HdrHistogram's plotter: latency against a
//! logarithmic `1/(1-percentile)` axis labelled 90 %, 99 %, 99.9 %, ..., several files
//! overlaid) and a bandwidth / message-rate sweep against message size.
//!
//! Text needs a TrueType font: DejaVu Sans from Debian's fonts-dejavu-core (scripts/setup.sh),
//! or the file `DPDK_ROCE_PLOT_FONT` names.

use super::hgrm::HgrmPoint;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The font file used when `DPDK_ROCE_PLOT_FONT` is not set.
pub const DEFAULT_FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
const SIZE: (u32, u32) = (1024, 640);
/// The percentile axis ends at 99.9999 % (1/(1-p) = 10^6) at most.
const MAX_X: f64 = 1e6;

/// One overlaid distribution: its name (the legend) and rows.
pub struct Distribution {
    pub name: String,
    pub points: Vec<HgrmPoint>,
}

/// One row of a sweep: message size, average bandwidth (Gb/s), message rate (Mpps).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepPoint {
    pub bytes: u64,
    pub gbits: f64,
    pub mpps: f64,
}

/// Registers the TrueType font plotters draws text with (once per process).
fn font() -> Result<(), String> {
    static FONT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FONT.get_or_init(|| {
        let path = std::env::var("DPDK_ROCE_PLOT_FONT").unwrap_or_else(|_| DEFAULT_FONT.into());
        let bytes = std::fs::read(&path).map_err(|e| {
            format!("font {path}: {e} (install fonts-dejavu-core or set DPDK_ROCE_PLOT_FONT)")
        })?;
        plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            Box::leak(bytes.into_boxed_slice()),
        )
        .map_err(|_| format!("font {path}: not a TrueType font"))
    })
    .clone()
}

fn err(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

/// Draws the distributions into `out` (.svg or .png).
pub fn percentiles(out: &Path, title: &str, series: &[Distribution]) -> Result<(), String> {
    if series.is_empty() {
        return Err("nothing to plot".into());
    }
    font()?;
    match extension(out)? {
        Ext::Svg => percentiles_on(
            SVGBackend::new(out, SIZE).into_drawing_area(),
            title,
            series,
        ),
        Ext::Png => percentiles_on(
            BitMapBackend::new(out, SIZE).into_drawing_area(),
            title,
            series,
        ),
    }
}

/// Draws the sweep into `out` (.svg or .png): bandwidth above, message rate below.
pub fn sweep(out: &Path, title: &str, rows: &[SweepPoint]) -> Result<(), String> {
    if rows.is_empty() {
        return Err("nothing to plot".into());
    }
    font()?;
    match extension(out)? {
        Ext::Svg => sweep_on(SVGBackend::new(out, SIZE).into_drawing_area(), title, rows),
        Ext::Png => sweep_on(
            BitMapBackend::new(out, SIZE).into_drawing_area(),
            title,
            rows,
        ),
    }
}

enum Ext {
    Svg,
    Png,
}

fn extension(out: &Path) -> Result<Ext, String> {
    match out.extension().and_then(|e| e.to_str()) {
        Some("svg") => Ok(Ext::Svg),
        Some("png") => Ok(Ext::Png),
        _ => Err(format!(
            "{}: the output must end in .svg or .png",
            out.display()
        )),
    }
}

/// 1/(1-p), capped (p = 1 is the maximum: drawn at the axis' end).
fn x_of(p: f64) -> f64 {
    if p >= 1.0 {
        MAX_X
    } else {
        (1.0 / (1.0 - p)).clamp(1.0, MAX_X)
    }
}

/// The percentile a 1/(1-p) value stands for, as the HdrHistogram plotter labels it.
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    let digits = (x.log10().round() as usize).saturating_sub(2);
    format!("{p:.digits$}%")
}

fn percentiles_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    series: &[Distribution],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let top_x = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| x_of(p.percentile)))
        .fold(10.0_f64, f64::max);
    let top_x = 10f64.powf(top_x.log10().ceil()).min(MAX_X);
    let top_y = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.value))
        .fold(0.0_f64, f64::max)
        * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d((1.0..top_x).log_scale(), 0.0..top_y.max(1e-3))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (µs)")
        .x_label_formatter(&|x| percentile_label(*x))
        .draw()
        .map_err(err)?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = s
            .points
            .iter()
            .map(|p| (x_of(p.percentile), p.value))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(err)?
            .label(&s.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}

fn sweep_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    rows: &[SweepPoint],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(title, ("sans-serif", 24)).map_err(err)?;
    let (upper, lower) = root.split_vertically(SIZE.1 / 2 - 20);
    let min_b = rows.iter().map(|r| r.bytes).min().unwrap_or(1).max(1) as f64;
    let max_b = (rows.iter().map(|r| r.bytes).max().unwrap_or(2) as f64).max(min_b * 2.0);
    for (area, what, value) in [
        (
            &upper,
            "bandwidth (Gb/s)",
            (|r: &SweepPoint| r.gbits) as fn(&SweepPoint) -> f64,
        ),
        (&lower, "message rate (Mpps)", |r: &SweepPoint| r.mpps),
    ] {
        let top = rows.iter().map(value).fold(0.0_f64, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(64)
            .build_cartesian_2d((min_b..max_b).log_scale(), 0.0..top.max(1e-3))
            .map_err(err)?;
        chart
            .configure_mesh()
            .x_desc("message size (bytes)")
            .y_desc(what)
            .x_label_formatter(&|x| format!("{}", x.round() as u64))
            .draw()
            .map_err(err)?;
        let points: Vec<(f64, f64)> = rows.iter().map(|r| (r.bytes as f64, value(r))).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), BLUE.stroke_width(2)))
            .map_err(err)?;
        chart
            .draw_series(points.into_iter().map(|p| Circle::new(p, 3, BLUE.filled())))
            .map_err(err)?;
    }
    root.present().map_err(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_percentile_axis_is_labelled_like_hdrhistograms_plotter() {
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(100.0), "99%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(1e5), "99.999%");
        assert_eq!(x_of(0.0), 1.0);
        assert!((x_of(0.99) - 100.0).abs() < 1e-6);
        assert_eq!(x_of(1.0), MAX_X);
    }
}
