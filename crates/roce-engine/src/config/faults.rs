//! What the fault injector does to frames ([`FaultConfig`]): a profile's `[faults]` section or
//! `DPDK_ROCE_FAULTS`. The injector itself is `engine::faults::FaultyIo`.

/// The environment variable that turns fault injection on.
pub const FAULTS_ENV: &str = "DPDK_ROCE_FAULTS";

/// What to do to frames. All zero: nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultConfig {
    /// Chance that a frame is lost.
    pub loss: f64,
    /// Chance that a frame is delivered twice.
    pub dup: f64,
    /// Chance that a frame is held back and goes after the next one.
    pub reorder: f64,
    /// Chance that one bit of a frame is flipped.
    pub corrupt: f64,
    /// How long every frame is held, in microseconds.
    pub delay_us: u32,
    /// Seed of the chances (`None`: from the OS).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
}

impl FaultConfig {
    /// Parses `key=value,...` (`loss`, `dup`, `reorder`, `corrupt` in 0..=1, `delay_us`,
    /// `seed`).
    pub fn parse(s: &str) -> Result<FaultConfig, String> {
        let mut c = FaultConfig::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| format!("{FAULTS_ENV}: `{item}` is not key=value"))?;
            let chance = |v: &str| -> Result<f64, String> {
                v.parse::<f64>()
                    .map_err(|_| format!("{FAULTS_ENV}: {k}={v}: a chance in 0..=1"))
            };
            match k.trim() {
                "loss" => c.loss = chance(v)?,
                "dup" => c.dup = chance(v)?,
                "reorder" => c.reorder = chance(v)?,
                "corrupt" => c.corrupt = chance(v)?,
                "delay_us" => {
                    c.delay_us = v
                        .parse()
                        .map_err(|_| format!("{FAULTS_ENV}: delay_us={v}: microseconds"))?
                }
                "seed" => {
                    c.seed = Some(
                        v.parse()
                            .map_err(|_| format!("{FAULTS_ENV}: seed={v}: a number"))?,
                    )
                }
                other => return Err(format!("{FAULTS_ENV}: unknown key `{other}`")),
            }
        }
        c.check().map_err(|e| format!("{FAULTS_ENV}: {e}"))?;
        Ok(c)
    }

    /// The setting in force: `DPDK_ROCE_FAULTS` when set, else `profile`'s.
    pub fn from_env_or(profile: Option<FaultConfig>) -> Result<Option<FaultConfig>, String> {
        let c = match std::env::var(FAULTS_ENV) {
            Ok(s) => Some(FaultConfig::parse(&s)?),
            Err(_) => profile,
        };
        Ok(c.filter(FaultConfig::active))
    }

    /// Every chance in 0..=1 (a profile's `[faults]` section is checked so).
    pub fn check(&self) -> Result<(), String> {
        for (k, p) in [
            ("loss", self.loss),
            ("dup", self.dup),
            ("reorder", self.reorder),
            ("corrupt", self.corrupt),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{k} = {p}: a chance in 0..=1"));
            }
        }
        Ok(())
    }

    /// True when it does anything.
    pub fn active(&self) -> bool {
        self.loss > 0.0
            || self.dup > 0.0
            || self.reorder > 0.0
            || self.corrupt > 0.0
            || self.delay_us > 0
    }
}
