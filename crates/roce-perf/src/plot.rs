//! Plots of benchmark results with `plotters`, to SVG or PNG by the output's extension: the
//! percentile distribution of `.hgrm` files (HdrHistogram's plotter: latency against a
//! logarithmic `1/(1-percentile)` axis labelled 90 %, 99 %, 99.9 %, ..., several files
//! overlaid; the latency axis linear or, with [`LatencyAxis::Log`], logarithmic) and a
//! bandwidth / message-rate sweep against message size (bandwidth in the table's unit: MB/sec
//! is MiB/s, Gb/sec 10^9 bits/s).
//!
//! Every label stays inside the picture: the margins leave room for half of the widest label
//! centred on the axis' last tick, and a long title is set smaller to fit the width.
//!
//! Text needs a TrueType font: DejaVu Sans from Debian's fonts-dejavu-core (scripts/setup.sh),
//! or the file `DPDK_ROCE_PLOT_FONT` names.

use super::hgrm::HgrmPoint;
use plotters::coord::ranged1d::{Ranged, ValueFormatter};
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

/// One row of a sweep: message size, average bandwidth (in the unit `sweep` is given),
/// message rate (Mpps).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SweepPoint {
    pub bytes: u64,
    pub bw: f64,
    pub mpps: f64,
}

/// The latency axis of a percentile plot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LatencyAxis {
    /// From zero, linear (HdrHistogram's plotter).
    #[default]
    Linear,
    /// Logarithmic, from just below the smallest value: a tail orders of magnitude above the
    /// median stays readable.
    Log,
}

/// The picture's margin around the chart, and the room on the right for half of the last
/// x-axis label (centred on its tick), in pixels.
const MARGIN: u32 = 16;
const RIGHT_MARGIN: u32 = 48;
/// The title's largest font size and the width a character takes at most, as a fraction of
/// the font size (DejaVu Sans' widest common glyphs).
const TITLE_SIZE: f64 = 24.0;
/// The axes' labels' font size.
const LABEL_SIZE: u32 = 14;
const CHAR_WIDTH: f64 = 0.65;

/// The title's font size: `TITLE_SIZE`, or less so that `title` fits the picture's width.
fn title_size(title: &str) -> f64 {
    let room = f64::from(SIZE.0 - 2 * MARGIN);
    let chars = title.chars().count().max(1) as f64;
    TITLE_SIZE.min(room / (chars * CHAR_WIDTH)).floor()
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

/// Draws the distributions into `out` (.svg or .png), the latency axis as `axis` says.
pub fn percentiles(
    out: &Path,
    title: &str,
    series: &[Distribution],
    axis: LatencyAxis,
) -> Result<(), String> {
    if series.is_empty() {
        return Err("nothing to plot".into());
    }
    font()?;
    match extension(out)? {
        Ext::Svg => percentiles_on(
            SVGBackend::new(out, SIZE).into_drawing_area(),
            title,
            series,
            axis,
        ),
        Ext::Png => percentiles_on(
            BitMapBackend::new(out, SIZE).into_drawing_area(),
            title,
            series,
            axis,
        ),
    }
}

/// Draws the sweep into `out` (.svg or .png): bandwidth in `unit` (the table's: `MB/sec`,
/// MiB/s, or `Gb/sec`) above, message rate below.
pub fn sweep(out: &Path, title: &str, unit: &str, rows: &[SweepPoint]) -> Result<(), String> {
    if rows.is_empty() {
        return Err("nothing to plot".into());
    }
    font()?;
    match extension(out)? {
        Ext::Svg => sweep_on(
            SVGBackend::new(out, SIZE).into_drawing_area(),
            title,
            unit,
            rows,
        ),
        Ext::Png => sweep_on(
            BitMapBackend::new(out, SIZE).into_drawing_area(),
            title,
            unit,
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
    axis: LatencyAxis,
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let top_x = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| x_of(p.percentile)))
        .fold(10.0_f64, f64::max);
    let top_x = 10f64.powf(top_x.log10().ceil()).min(MAX_X);
    let values = || series.iter().flat_map(|s| s.points.iter().map(|p| p.value));
    let top_y = values().fold(0.0_f64, f64::max) * 1.1;
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", title_size(title)))
        .margin(MARGIN)
        .margin_right(RIGHT_MARGIN)
        .x_label_area_size(40)
        .y_label_area_size(72);
    let x = (1.0..top_x).log_scale();
    match axis {
        LatencyAxis::Linear => {
            let chart = builder
                .build_cartesian_2d(x, 0.0..top_y.max(1e-3))
                .map_err(err)?;
            draw_distributions(chart, series, "latency (µs)")
        }
        LatencyAxis::Log => {
            let low = values()
                .filter(|v| *v > 0.0)
                .fold(f64::INFINITY, f64::min)
                .min(top_y)
                .max(1e-3);
            let chart = builder
                .build_cartesian_2d(x, (low / 1.1..top_y.max(low * 1.1)).log_scale())
                .map_err(err)?;
            draw_distributions(chart, series, "latency (µs, log scale)")
        }
    }?;
    root.present().map_err(err)
}

/// The mesh, one line per distribution and the legend, on either latency axis.
fn draw_distributions<'a, DB, Y>(
    mut chart: ChartContext<'a, DB, Cartesian2d<LogCoord<f64>, Y>>,
    series: &[Distribution],
    y_desc: &str,
) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .label_style(("sans-serif", LABEL_SIZE))
        .axis_desc_style(("sans-serif", LABEL_SIZE + 2))
        .x_desc("percentile")
        .y_desc(y_desc)
        .x_label_formatter(&|x| percentile_label(*x))
        .y_label_formatter(&|y| latency_label(*y))
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
        .map_err(err)
}

/// A latency tick's label: as many decimals as the value needs, at most three.
fn latency_label(us: f64) -> String {
    let s = format!("{us:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

fn sweep_on<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    unit: &str,
    rows: &[SweepPoint],
) -> Result<(), String> {
    root.fill(&WHITE).map_err(err)?;
    let root = root
        .titled(title, ("sans-serif", title_size(title)))
        .map_err(err)?;
    let bandwidth = format!("bandwidth ({unit})");
    let (upper, lower) = root.split_vertically(SIZE.1 / 2 - 20);
    let min_b = rows.iter().map(|r| r.bytes).min().unwrap_or(1).max(1) as f64;
    let max_b = (rows.iter().map(|r| r.bytes).max().unwrap_or(2) as f64).max(min_b * 2.0);
    for (area, what, value) in [
        (
            &upper,
            bandwidth.as_str(),
            (|r: &SweepPoint| r.bw) as fn(&SweepPoint) -> f64,
        ),
        (&lower, "message rate (Mpps)", |r: &SweepPoint| r.mpps),
    ] {
        let top = rows.iter().map(value).fold(0.0_f64, f64::max) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .margin(12)
            .margin_right(RIGHT_MARGIN)
            .x_label_area_size(36)
            .y_label_area_size(72)
            .build_cartesian_2d((min_b..max_b).log_scale(), 0.0..top.max(1e-3))
            .map_err(err)?;
        chart
            .configure_mesh()
            .label_style(("sans-serif", LABEL_SIZE))
            .axis_desc_style(("sans-serif", LABEL_SIZE + 2))
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
