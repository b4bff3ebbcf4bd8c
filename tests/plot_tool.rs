//! `roce-tool plot`: the percentile distribution of .hgrm files (as roce-lat writes them) drawn
//! to SVG and PNG; the SVG parses as XML and holds one line per file and the legend, the PNG
//! decodes to the plot's size with more than a background; bad input is refused with the file
//! named. Every text of every plot (title, axis labels and descriptions, legend), measured with
//! the font the plot is drawn with, lies inside the picture; `--log-latency` puts latency on a
//! logarithmic axis.

use roce_perf::latency::{LatencySeries, Scale};
use std::path::{Path, PathBuf};
use std::process::Command;

const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("dpdk-roce-plot-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// An .hgrm file of `n` samples around `base_ns`, with a tail.
fn hgrm(dir: &Path, name: &str, base_ns: u64) -> PathBuf {
    let mut s = LatencySeries::new(8, Scale::Full);
    for i in 0..20_000u64 {
        s.record(base_ns + (i % 100) * 10 + if i % 997 == 0 { 50_000 } else { 0 });
    }
    let p = dir.join(name);
    std::fs::write(&p, s.hgrm()).unwrap();
    p
}

fn plot(args: &[&Path]) -> std::process::Output {
    Command::new(TOOL).arg("plot").args(args).output().unwrap()
}

#[test]
fn hgrm_files_plot_to_svg_and_png() {
    let d = dir("ok");
    let a = hgrm(&d, "write-8B.hgrm", 1_000);
    let b = hgrm(&d, "read-8B.hgrm", 2_000);
    let svg = d.join("lat.svg");
    let out = plot(&[&a, &b, Path::new("-o"), &svg]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG is well-formed XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    let lines = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "polyline" || n.tag_name().name() == "path")
        .count();
    assert!(lines >= 2, "{lines} lines");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    for want in ["write-8B", "read-8B", "99%", "percentile"] {
        assert!(
            texts.iter().any(|t| t.contains(want)),
            "{want} not in {texts:?}"
        );
    }

    let png = d.join("lat.png");
    let out = plot(&[&a, &b, Path::new("-o"), &png]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::fs::File::open(&png).unwrap());
    let mut reader = decoder.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1024, 640));
    let distinct: std::collections::BTreeSet<&[u8]> = buf[..info.buffer_size()]
        .chunks(info.line_size / info.width as usize)
        .collect();
    assert!(distinct.len() > 3, "{} colours", distinct.len());
    if let Ok(keep) = std::env::var("PLOT_KEEP") {
        let _ = std::fs::copy(&png, keep);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn bad_input_is_refused_with_the_file_named() {
    let d = dir("bad");
    let junk = d.join("junk.hgrm");
    std::fs::write(&junk, "hello\n").unwrap();
    let out = plot(&[&junk, Path::new("-o"), &d.join("x.svg")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("junk.hgrm"));
    let good = hgrm(&d, "ok.hgrm", 1_000);
    let out = plot(&[&good, Path::new("-o"), &d.join("x.gif")]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(".svg or .png"));
    let _ = std::fs::remove_dir_all(&d);
}

/// A text of an SVG: its content, anchor point, anchor and font size (px), and whether it is
/// turned on its side.
struct SvgText {
    text: String,
    x: f64,
    y: f64,
    anchor: String,
    size: f64,
    rotated: bool,
    /// Where the line lies from `y` (across the text), in font sizes: plotters' `dy` of
    /// 0.76em hangs it below, -0.5ex sets it above, 0.5ex centres it.
    line: (f64, f64),
}

/// The texts of an SVG plotters wrote, and the picture's width and height.
fn svg_texts(svg: &str) -> (Vec<SvgText>, f64, f64) {
    let doc = roxmltree::Document::parse(svg).expect("the SVG is well-formed XML");
    let root = doc.root_element();
    let num = |n: roxmltree::Node, a: &str| -> f64 {
        n.attribute(a)
            .unwrap_or_else(|| panic!("{a} of {n:?}"))
            .parse()
            .unwrap()
    };
    let (w, h) = (num(root, "width"), num(root, "height"));
    let texts = doc
        .descendants()
        .filter(|n| n.tag_name().name() == "text")
        .map(|n| SvgText {
            text: n.text().unwrap_or("").trim().to_owned(),
            x: num(n, "x"),
            y: num(n, "y"),
            anchor: n.attribute("text-anchor").unwrap_or("start").to_owned(),
            size: num(n, "font-size"),
            rotated: n.attribute("transform").is_some(),
            line: match n.attribute("dy") {
                Some("0.76em") => (0.0, 1.0),
                Some("-0.5ex") => (-1.0, 0.0),
                Some("0.5ex") => (-0.5, 0.5),
                _ => (-1.0, 0.25),
            },
        })
        .filter(|t| !t.text.is_empty())
        .collect();
    (texts, w, h)
}

/// Asserts every text of `svg` lies inside it: its width measured with the plot's font
/// (DejaVu Sans, as plotters measures it) at its font size and placed by its anchor, its
/// line's height placed by its `dy`; a rotated text likewise, along and across its direction.
#[track_caller]
fn assert_texts_inside(svg: &str, what: &str) {
    use plotters::style::{FontDesc, FontFamily, FontStyle};
    let font = std::fs::read(roce_perf::plot::DEFAULT_FONT).expect("fonts-dejavu-core");
    let _ = plotters::style::register_font(
        "sans-serif",
        FontStyle::Normal,
        Box::leak(font.into_boxed_slice()),
    );
    let (texts, w, h) = svg_texts(svg);
    assert!(texts.len() > 10, "{what}: {} texts", texts.len());
    for t in &texts {
        let (width, _) = FontDesc::new(FontFamily::SansSerif, t.size, FontStyle::Normal)
            .box_size(&t.text)
            .unwrap_or_else(|e| panic!("measuring {:?}: {e:?}", t.text));
        let width = f64::from(width);
        let (before, after) = match t.anchor.as_str() {
            "middle" => (width / 2.0, width / 2.0),
            "end" => (width, 0.0),
            _ => (0.0, width),
        };
        // A rotated text runs along y; its line's height along x.
        let (along, across, len_along, len_across) = if t.rotated {
            (t.y, t.x, h, w)
        } else {
            (t.x, t.y, w, h)
        };
        assert!(
            along - before >= 0.0 && along + after <= len_along,
            "{what}: {:?} ({:.0} px wide at {:.0}, anchor {}) leaves the picture's {len_along} px",
            t.text,
            width,
            along,
            t.anchor
        );
        assert!(
            across + t.line.0 * t.size >= 0.0 && across + t.line.1 * t.size <= len_across,
            "{what}: {:?} at {across} leaves the picture's {len_across} px",
            t.text
        );
    }
}

/// The latency axis' labels of a percentile plot: (value, y) from the bottom up.
fn latency_ticks(svg: &str) -> Vec<(f64, f64)> {
    let (texts, _, _) = svg_texts(svg);
    let mut ticks: Vec<(f64, f64)> = texts
        .iter()
        .filter(|t| t.anchor == "end" && !t.rotated)
        .filter_map(|t| Some((t.text.parse().ok()?, t.y)))
        .collect();
    ticks.sort_by(|a, b| b.1.total_cmp(&a.1));
    ticks
}

/// A long title, the last percentile label (99.9999 %) and the largest latency label all stay
/// inside the picture, on a linear and on a logarithmic latency axis. On the logarithmic axis
/// the labels' distances follow the logarithms of their values (and there is no 0); on the
/// linear one the values themselves.
#[test]
fn labels_stay_inside_and_log_latency_is_logarithmic() {
    let d = dir("log");
    let a = hgrm(&d, "write-8B.hgrm", 1_000);
    let b = hgrm(&d, "read-8B.hgrm", 20_000);
    let title =
        "RDMA_Write and RDMA_Read Latency Test, 8 B, net_memif, 20 000 iterations of each, \
                 the tail of 997 every thousandth";
    for (log, name) in [(false, "linear.svg"), (true, "log.svg")] {
        let svg = d.join(name);
        let mut args: Vec<&Path> = vec![&a, &b, Path::new("-o"), &svg];
        args.extend([Path::new("--title"), Path::new(title)]);
        if log {
            args.push(Path::new("--log-latency"));
        }
        let out = plot(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains("99.9999%"),
            "{name}: the axis reaches 99.9999 %"
        );
        assert!(
            text.contains("RDMA_Write and RDMA_Read"),
            "{name}: the title"
        );
        assert_texts_inside(&text, name);
        let ticks = latency_ticks(&text);
        assert!(ticks.len() >= 2, "{name}: {} latency labels", ticks.len());
        let (first, last) = (ticks[0], ticks[ticks.len() - 1]);
        for &(v, y) in &ticks[1..ticks.len() - 1] {
            let expected = if log {
                first.1 + (last.1 - first.1) * (v / first.0).ln() / (last.0 / first.0).ln()
            } else {
                first.1 + (last.1 - first.1) * (v - first.0) / (last.0 - first.0)
            };
            assert!(
                (y - expected).abs() <= 2.0,
                "{name}: {v} at {y}, not {expected}: {ticks:?}"
            );
        }
        assert_eq!(ticks.iter().any(|t| t.0 == 0.0), !log, "{name}: {ticks:?}");
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// roce-bw's sweep plot (`--plot`) of every size `-a` runs, 2 B to 8 MiB: the bandwidth panel
/// in the table's unit, and every label inside the picture.
#[test]
fn a_sweep_to_8_mib_keeps_its_labels_inside() {
    use roce_perf::plot::{sweep, SweepPoint};
    let d = dir("sweep");
    let rows: Vec<SweepPoint> = (1..=23)
        .map(|s| SweepPoint {
            bytes: 1 << s,
            bw: 11_000.0 * (1u64 << s) as f64 / ((1u64 << s) as f64 + 4096.0),
            mpps: 9.5 / (1.0 + (1u64 << s) as f64 / 4096.0),
        })
        .collect();
    let svg = d.join("bw.svg");
    sweep(
        &svg,
        "RDMA_Write BW Test, 1 QP(s), 128 outstanding",
        "MB/sec",
        &rows,
    )
    .unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("bandwidth (MB/sec)"), "the table's unit");
    assert_eq!(
        text.matches("<circle").count(),
        2 * 23,
        "a point per size in each panel"
    );
    assert_texts_inside(&text, "bw.svg");
    let _ = std::fs::remove_dir_all(&d);
}
