//! Benchmark reports in the formats benchmark users expect: perftest's tables (`ib_write_bw`
//! and `ib_write_lat` columns, [`perftest`]), HdrHistogram's classic `.hgrm` percentile
//! distribution (readable by the standard plotter), JSON, plots, and the progress of a run.

#![forbid(unsafe_code)]

pub mod hgrm;
pub mod latency;
pub mod perftest;
pub mod plot;
pub mod progress;
