//! `roce-tool plot`: the percentile distribution of .hgrm files (as roce-lat writes them) drawn
//! to SVG and PNG; the SVG parses as XML and holds one line per file and the legend, the PNG
//! decodes to the plot's size with more than a background; bad input is refused with the file
//! named.

use dpdk_roce::perf::latency::{LatencySeries, Scale};
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
