//! Latency measurement reports in the formats benchmark users expect: perftest's latency table
//! (`ib_write_lat` columns), HdrHistogram's classic `.hgrm` percentile distribution (readable by
//! the standard plotter), and JSON.

pub mod hgrm;
pub mod latency;
pub mod plot;
pub mod progress;
