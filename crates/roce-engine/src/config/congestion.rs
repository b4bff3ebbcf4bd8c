//! `[congestion]`: congestion control (`cc`) and the ECN codepoint of the port's packets.
//!
//! ```toml
//! [congestion]
//! mode = "dcqcn"            # "off" (default), "dcqcn" or "delay"
//! # ecn = "ect0"            # "off", "ect0" or "ect1"; default ect0 with dcqcn, off otherwise
//! # cnp_interval_us = 50    # at most one CNP per QP per interval; 0: never send CNPs
//! # cnp_dscp = 48           # the DSCP of the CNPs sent (never ECN-capable)
//! # burst_bytes = 8192      # bytes a paced QP may send back to back
//! # DCQCN's reaction point (defaults: the DCQCN paper's g, K, F; mlx5's timer, byte counter,
//! # cut period and steps):
//! # line_rate_mbps = 10000, min_rate_mbps = 10, g_inverse = 256, alpha_period_us = 55,
//! # cut_period_us = 4, increase_period_us = 300, byte_reset = 32767, threshold = 5,
//! # ai_mbps = 5, hai_mbps = 50
//! # The delay mode: target_us = 20, fs_range_us = 150, initial_window = 16, ai_packets = 1,
//! # beta_percent = 80, max_decrease_percent = 50
//! ```
//!
//! Fabrics that run DCQCN (RoCEv2 with ECN-marking switches and NICs that send CNPs, the
//! ConnectX default) want `mode = "dcqcn"`, which makes the packets ECT(0). The default stays
//! `off`: a plain veth, a memif or an unmanaged switch marks nothing, and pacing there only
//! costs. The notification point (CNPs for CE-marked packets) is on in every mode.

use super::{range, ConfigError};
use crate::cc::{CcConfig, CcMode};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The checked `[congestion]` section.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Congestion {
    pub cc: CcConfig,
    /// The ECN codepoint of the port's RoCEv2 packets: 0 (not ECT), 1 (ECT(1)), 2 (ECT(0)).
    pub ecn: u8,
}

/// The file's form: every key optional.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCongestion {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ecn: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cnp_interval_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cnp_dscp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    burst_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    line_rate_mbps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_rate_mbps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    g_inverse: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alpha_period_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cut_period_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    increase_period_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    byte_reset: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threshold: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ai_mbps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hai_mbps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    target_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fs_range_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    initial_window: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ai_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    beta_percent: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_decrease_percent: Option<u32>,
}

const MBIT: u64 = 1_000_000;

fn us(v: u32) -> Duration {
    Duration::from_micros(v.into())
}

impl RawCongestion {
    /// Checks every key and fills in the defaults.
    pub(super) fn check(&self) -> Result<Congestion, ConfigError> {
        let mode = match self.mode.as_deref() {
            None | Some("off") => CcMode::Off,
            Some("dcqcn") => CcMode::Dcqcn,
            Some("delay") => CcMode::Delay,
            Some(other) => {
                return Err(ConfigError::BadChoice {
                    field: "congestion.mode",
                    value: other.into(),
                    choices: "off, dcqcn, delay",
                })
            }
        };
        let mut cc = CcConfig {
            mode,
            ..CcConfig::default()
        };
        let ecn = match self.ecn.as_deref() {
            None if cc.mode == CcMode::Dcqcn => 2,
            None | Some("off") => 0,
            Some("ect0") => 2,
            Some("ect1") => 1,
            Some(other) => {
                return Err(ConfigError::BadChoice {
                    field: "congestion.ecn",
                    value: other.into(),
                    choices: "off, ect0, ect1",
                })
            }
        };
        let get = |field: &'static str, v: Option<u32>, min: u64, max: u64| {
            v.map(|v| range(field, v.into(), min, max).map(|()| v))
                .transpose()
        };
        if let Some(v) = get(
            "congestion.cnp_interval_us",
            self.cnp_interval_us,
            0,
            1_000_000,
        )? {
            cc.cnp_interval = (v != 0).then(|| us(v));
        }
        if let Some(v) = self.cnp_dscp {
            range("congestion.cnp_dscp", v.into(), 0, 63)?;
            cc.cnp_dscp = v;
        }
        if let Some(v) = get("congestion.burst_bytes", self.burst_bytes, 0, 1 << 20)? {
            cc.burst_bytes = v;
        }
        let d = &mut cc.dcqcn;
        if let Some(v) = get("congestion.line_rate_mbps", self.line_rate_mbps, 1, 400_000)? {
            d.line_rate_bps = u64::from(v) * MBIT;
        }
        if let Some(v) = get("congestion.min_rate_mbps", self.min_rate_mbps, 1, 400_000)? {
            d.min_rate_bps = u64::from(v) * MBIT;
        }
        if d.min_rate_bps > d.line_rate_bps {
            return Err(ConfigError::OutOfRange {
                field: "congestion.min_rate_mbps",
                value: d.min_rate_bps / MBIT,
                min: 1,
                max: d.line_rate_bps / MBIT,
            });
        }
        if let Some(v) = get("congestion.g_inverse", self.g_inverse, 2, 65_536)? {
            d.g_inverse = v;
        }
        if let Some(v) = get(
            "congestion.alpha_period_us",
            self.alpha_period_us,
            1,
            1_000_000,
        )? {
            d.alpha_period = us(v);
        }
        if let Some(v) = get("congestion.cut_period_us", self.cut_period_us, 0, 1_000_000)? {
            d.cut_period = us(v);
        }
        if let Some(v) = get(
            "congestion.increase_period_us",
            self.increase_period_us,
            1,
            1_000_000,
        )? {
            d.increase_period = us(v);
        }
        if let Some(v) = get("congestion.byte_reset", self.byte_reset, 1, 1 << 30)? {
            d.byte_reset = v;
        }
        if let Some(v) = get("congestion.threshold", self.threshold, 1, 64)? {
            d.threshold = v;
        }
        if let Some(v) = get("congestion.ai_mbps", self.ai_mbps, 1, 100_000)? {
            d.ai_bps = u64::from(v) * MBIT;
        }
        if let Some(v) = get("congestion.hai_mbps", self.hai_mbps, 1, 100_000)? {
            d.hai_bps = u64::from(v) * MBIT;
        }
        let y = &mut cc.delay;
        if let Some(v) = get("congestion.target_us", self.target_us, 1, 1_000_000)? {
            y.target = us(v);
        }
        if let Some(v) = get("congestion.fs_range_us", self.fs_range_us, 0, 1_000_000)? {
            y.fs_range = us(v);
        }
        if let Some(v) = get("congestion.initial_window", self.initial_window, 1, 2048)? {
            y.initial_window = f64::from(v);
        }
        if let Some(v) = get("congestion.ai_packets", self.ai_packets, 1, 64)? {
            y.ai_packets = f64::from(v);
        }
        if let Some(v) = get("congestion.beta_percent", self.beta_percent, 1, 100)? {
            y.beta_percent = v;
        }
        if let Some(v) = get(
            "congestion.max_decrease_percent",
            self.max_decrease_percent,
            1,
            99,
        )? {
            y.max_decrease_percent = v;
        }
        Ok(Congestion { cc, ecn })
    }
}

/// `value` when it is not the default.
fn changed<T: PartialEq>(value: T, default: T) -> Option<T> {
    (value != default).then_some(value)
}

impl Congestion {
    /// The file's form of what differs from the defaults (a profile written back reads the
    /// same).
    pub(super) fn to_raw(self) -> Option<RawCongestion> {
        let def = CcConfig::default();
        let c = &self.cc;
        let (d, dd, y, yd) = (&c.dcqcn, &def.dcqcn, &c.delay, &def.delay);
        let mbit = |a: u64, b| changed(a, b).map(|v| (v / MBIT) as u32);
        let micros = |a: Duration, b| changed(a, b).map(|v| v.as_micros() as u32);
        let default_ecn = if c.mode == CcMode::Dcqcn { 2 } else { 0 };
        let raw = RawCongestion {
            mode: changed(c.mode, def.mode).map(|m| m.name().to_string()),
            ecn: changed(self.ecn, default_ecn).map(|e| {
                match e {
                    2 => "ect0",
                    1 => "ect1",
                    _ => "off",
                }
                .to_string()
            }),
            cnp_interval_us: changed(c.cnp_interval, def.cnp_interval)
                .map(|i| i.map_or(0, |d| d.as_micros() as u32)),
            cnp_dscp: changed(c.cnp_dscp, def.cnp_dscp),
            burst_bytes: changed(c.burst_bytes, def.burst_bytes),
            line_rate_mbps: mbit(d.line_rate_bps, dd.line_rate_bps),
            min_rate_mbps: mbit(d.min_rate_bps, dd.min_rate_bps),
            g_inverse: changed(d.g_inverse, dd.g_inverse),
            alpha_period_us: micros(d.alpha_period, dd.alpha_period),
            cut_period_us: micros(d.cut_period, dd.cut_period),
            increase_period_us: micros(d.increase_period, dd.increase_period),
            byte_reset: changed(d.byte_reset, dd.byte_reset),
            threshold: changed(d.threshold, dd.threshold),
            ai_mbps: mbit(d.ai_bps, dd.ai_bps),
            hai_mbps: mbit(d.hai_bps, dd.hai_bps),
            target_us: micros(y.target, yd.target),
            fs_range_us: micros(y.fs_range, yd.fs_range),
            initial_window: changed(y.initial_window, yd.initial_window).map(|w| w as u32),
            ai_packets: changed(y.ai_packets, yd.ai_packets).map(|a| a as u32),
            beta_percent: changed(y.beta_percent, yd.beta_percent),
            max_decrease_percent: changed(y.max_decrease_percent, yd.max_decrease_percent),
        };
        (raw != RawCongestion::default()).then_some(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Congestion, ConfigError> {
        toml::from_str::<RawCongestion>(text)
            .map_err(ConfigError::Toml)?
            .check()
    }

    #[test]
    fn off_by_default_and_dcqcn_makes_packets_ect0() {
        assert_eq!(parse("").unwrap(), Congestion::default());
        let d = parse("mode = \"dcqcn\"").unwrap();
        assert_eq!((d.cc.mode, d.ecn), (CcMode::Dcqcn, 2));
        let d = parse("mode = \"dcqcn\"\necn = \"off\"").unwrap();
        assert_eq!(d.ecn, 0);
        let d = parse("mode = \"delay\"").unwrap();
        assert_eq!((d.cc.mode, d.ecn), (CcMode::Delay, 0));
    }

    #[test]
    fn every_key_is_read_and_written_back() {
        let text = "mode = \"dcqcn\"\necn = \"ect1\"\ncnp_interval_us = 0\ncnp_dscp = 46\n\
                    burst_bytes = 4096\nline_rate_mbps = 1000\nmin_rate_mbps = 5\ng_inverse = 64\n\
                    alpha_period_us = 100\ncut_period_us = 50\nincrease_period_us = 500\n\
                    byte_reset = 65536\nthreshold = 1\nai_mbps = 1\nhai_mbps = 10\n\
                    target_us = 300\nfs_range_us = 100\ninitial_window = 8\nai_packets = 2\n\
                    beta_percent = 50\nmax_decrease_percent = 30\n";
        let c = parse(text).unwrap();
        assert_eq!(c.cc.cnp_interval, None);
        assert_eq!(c.cc.dcqcn.line_rate_bps, 1_000_000_000);
        assert_eq!(c.cc.delay.target, Duration::from_micros(300));
        let back = c.to_raw().unwrap();
        assert_eq!(back.check().unwrap(), c);
        assert_eq!(Congestion::default().to_raw(), None);
    }

    #[test]
    fn bad_values_name_their_key() {
        for (text, key) in [
            ("mode = \"reno\"", "congestion.mode"),
            ("ecn = \"ce\"", "congestion.ecn"),
            ("cnp_dscp = 64", "congestion.cnp_dscp"),
            ("g_inverse = 1", "congestion.g_inverse"),
            (
                "line_rate_mbps = 100\nmin_rate_mbps = 200",
                "congestion.min_rate_mbps",
            ),
            (
                "max_decrease_percent = 100",
                "congestion.max_decrease_percent",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(key), "{text}: {e}");
        }
    }
}
