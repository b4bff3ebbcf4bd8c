//! Errors of profile loading and validation. Every variant names the offending key (as
//! `section.key`, or the environment variable) so a message points straight at the line to fix.

use std::path::PathBuf;

/// Why a profile could not be loaded, parsed or validated.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read profile {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not TOML, a missing or unknown key, or a value of the wrong type (the message of the
    /// TOML parser names the key and the line).
    #[error("invalid profile: {0}")]
    Toml(#[from] toml::de::Error),
    /// An error in the profile file `path` (see [`ConfigError::root`]).
    #[error("{}: {source}", path.display())]
    InFile {
        path: PathBuf,
        source: Box<ConfigError>,
    },
    #[error("port.pmd: unknown PMD `{value}` (expected af_packet, tap, memif or pci)")]
    UnknownPmd { value: String },
    #[error("{field}: required when port.pmd = \"{pmd}\"")]
    MissingField {
        field: &'static str,
        pmd: &'static str,
    },
    #[error("{field}: not a key of port.pmd = \"{pmd}\"")]
    FieldNotForPmd {
        field: &'static str,
        pmd: &'static str,
    },
    #[error("faults: {0}")]
    BadFaults(String),
    #[error("port.role: unknown memif role `{value}` (expected server or client)")]
    BadMemifRole { value: String },
    #[error("{field}: unknown progress mode `{value}` (expected core or inline)")]
    BadProgress { field: &'static str, value: String },
    #[error("{field}: `{value}` is not a switch (expected 1, 0, true, false, on or off)")]
    BadSwitch { field: &'static str, value: String },
    #[error("{field}: `{value}` is not a whole number")]
    BadNumber { field: &'static str, value: String },
    #[error("eal.multi_process needs eal.hugepages: a secondary process maps the primary's hugepage files")]
    MultiProcessWithoutHugepages,
    #[error(
        "{field}: `{value}` is not an address with prefix such as 10.77.0.1/24 or fd00:77::1/64: {reason}"
    )]
    BadCidr {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    /// A gateway or static route that cannot be parsed, or that `net::NetConfig` refuses
    /// for this port's address (next hop off the subnet, a route into it, overlapping
    /// routes, too many).
    #[error("{field}: `{value}`: {reason}")]
    BadRoute {
        field: String,
        value: String,
        reason: String,
    },
    #[error("{field}: {value} is outside {min}..={max}")]
    OutOfRange {
        field: &'static str,
        value: u64,
        min: u64,
        max: u64,
    },
    #[error("roce.pcp: `{value}` is neither a priority 0..=7 nor \"dscp\"")]
    BadPcp { value: String },
    #[error("{field}: {value} is not a power of two")]
    NotPowerOfTwo { field: &'static str, value: u64 },
    #[error(
        "port.mtu: {mtu} leaves no room for the smallest RoCE path MTU (256 bytes of payload \
         need an MTU of at least {min})"
    )]
    MtuTooSmallForRoce { mtu: u16, min: u16 },
    #[error("port.mtu: {mtu} is above what the {pmd} PMD of DPDK 22.11 accepts ({max})")]
    MtuAbovePmdLimit {
        mtu: u16,
        pmd: &'static str,
        max: u16,
    },
    #[error(
        "port.mbuf_pool_size: {pool} mbufs cannot fill the descriptor rings \
         (rx_queues * rx_descriptors + tx_queues * tx_descriptors = {needed})"
    )]
    PoolTooSmall { pool: u32, needed: u64 },
    #[error("{field}: `{value}` is not a valid name: {reason}")]
    BadName {
        field: &'static str,
        value: String,
        reason: &'static str,
    },
    #[error("{field}: the list is empty")]
    EmptyList { field: &'static str },
    #[error("{field}: core {core} is listed twice")]
    DuplicateCore { field: &'static str, core: u32 },
    #[error("engine.poll_cores: core {core} is not in eal.lcores")]
    PollCoreNotInLcores { core: u32 },
    #[error(
        "eal.log_level: `{value}` is not a level (emergency, alert, critical, error, warning, \
         notice, info, debug or 1..=8), optionally preceded by `pattern:`"
    )]
    BadLogLevel { value: String },
    #[error("port.pci_address: `{value}` is not a PCI address such as 0000:03:00.0")]
    BadPciAddress { value: String },
    #[error("port.socket: `{value}`: {reason}")]
    BadSocketPath { value: String, reason: &'static str },
    #[error("port.vdev_extra: `{value}` is not a single key=value device argument")]
    BadVdevArg { value: String },
    #[error("eal.extra_args: `{arg}` conflicts with {managed_by}, set that key instead")]
    ConflictingExtraArg {
        arg: String,
        managed_by: &'static str,
    },
    #[error("{field}: `{value}` is not one of {choices}")]
    BadChoice {
        field: &'static str,
        value: String,
        choices: &'static str,
    },
    #[error("{field}: {reason}")]
    BadPath {
        field: &'static str,
        reason: &'static str,
    },
}

impl ConfigError {
    /// The error itself, without the file it came from.
    pub fn root(&self) -> &ConfigError {
        match self {
            ConfigError::InFile { source, .. } => source.root(),
            other => other,
        }
    }
}
