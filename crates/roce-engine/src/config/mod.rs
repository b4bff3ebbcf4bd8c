//! Process profiles: how one dpdk-roce process sets up DPDK (EAL arguments, the port and its
//! queues), which IP addresses its RoCE port has, and how its engine polls.
//!
//! A profile is a TOML file (the shipped ones are in `dpdk-config/`, documented key by key):
//!
//! ```toml
//! name = "af_packet-a"
//! [eal]
//! lcores = [0]
//! hugepages = true
//! [port]
//! pmd = "af_packet"
//! iface = "rocev0a"
//! mtu = 1500
//! [roce]
//! address = "10.77.0.1/24"                       # or "fd00:77::1/64", or a list of both
//! # gateway = "10.77.0.254"                        # optional: the default route
//! # routes = ["10.9.0.0/16 via 10.77.0.253"]       # optional: static routes
//! [engine]
//! poll_cores = [0]
//! progress = "inline"
//! ```
//!
//! [`Profile::load`] / [`Profile::from_str`] parse and validate; [`Profile::eal_args`] gives the
//! EAL command line; [`Profile::apply_env`] applies the `DPDK_ROCE_*` environment overrides.

mod cidr;
pub mod congestion;
mod error;
pub mod faults;
mod port_addresses;

pub use cidr::{IpCidr, Ipv4Cidr, Ipv6Cidr};
pub use error::ConfigError;
pub use port_addresses::PortAddresses;

use crate::transport::types::Mtu;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Environment variable: path of a pcap capture of every frame the port sends and receives
/// (overrides `engine.capture`; an empty value turns the capture off).
pub const ENV_CAPTURE: &str = "DPDK_ROCE_CAPTURE";
/// Environment variable: `core` or `inline` (overrides `engine.progress`).
pub const ENV_PROGRESS: &str = "DPDK_ROCE_PROGRESS";
/// Environment variable: microseconds, 0 for none (overrides `engine.away_after_us`).
pub const ENV_AWAY_AFTER_US: &str = "DPDK_ROCE_AWAY_AFTER_US";
/// `engine.away_after_us` when a profile does not say: the inline progress helper drives a
/// shard no consumer thread drove for this long (docs/DESIGN.md "Progress").
pub const DEFAULT_AWAY_AFTER_US: u32 = 50;
/// Largest `engine.away_after_us` accepted.
pub const MAX_AWAY_AFTER_US: u32 = 100_000;
/// Environment variable: `1` or `0` (also `true`/`false`, `on`/`off`; overrides
/// `eal.telemetry`).
pub const ENV_TELEMETRY: &str = "DPDK_ROCE_TELEMETRY";
/// Environment variable: `1` or `0` (also `true`/`false`, `on`/`off`; overrides
/// `eal.multi_process`).
pub const ENV_MULTI_PROCESS: &str = "DPDK_ROCE_MULTI_PROCESS";

/// The MTU range a profile accepts (the IP MTU, as DPDK's `rte_eth_dev_set_mtu` and Linux mean it).
pub const MTU_RANGE: std::ops::RangeInclusive<u16> = 256..=9000;

/// Bytes of a RoCEv2 packet inside the IP MTU besides the IB payload: IPv4 20 + UDP 8 + BTH 12 +
/// the largest extension headers that come with a payload (RETH 16 + ImmDt 4, RDMA WRITE only with
/// immediate) + ICRC 4. The Ethernet header (14) and FCS (4) are outside the MTU.
pub const ROCE_OVERHEAD: u16 = 20 + 8 + 12 + 16 + 4 + 4;

/// Largest MTU of the virtual-device PMDs in DPDK 22.11: net_af_packet, net_memif (maximum RX frame
/// 1518) and net_tap (1522) all refuse an MTU above 1500 (measured with testpmd on this machine).
pub const VDEV_MAX_MTU: u16 = 1500;

/// Highest lcore / core id accepted (DPDK's RTE_MAX_LCORE in the Debian build is 128).
pub const MAX_LCORE: u32 = 127;
/// Most RX or TX queues accepted.
pub const MAX_QUEUES: u16 = 16;

const DEFAULT_NAME: &str = "dpdk-roce";
const DEFAULT_NO_HUGE_MB: u32 = 512;
const LOG_LEVELS: [&str; 8] = [
    "emergency",
    "alert",
    "critical",
    "error",
    "warning",
    "notice",
    "info",
    "debug",
];

/// One process's DPDK set-up. Fields are public; after changing any, call [`Profile::validate`].
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// Names the profile in logs and, with the pid, the default EAL file prefix.
    pub name: String,
    pub eal: Eal,
    pub port: Port,
    pub roce: Roce,
    pub engine: Engine,
    /// `[congestion]`: congestion control and the packets' ECN codepoint (`congestion.rs`).
    pub congestion: congestion::Congestion,
    /// `[faults]`: fault injection on the port's frames (`engine::faults`; the environment's
    /// `DPDK_ROCE_FAULTS` wins). Absent: none.
    pub faults: Option<faults::FaultConfig>,
}

/// `[eal]`: the EAL command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Eal {
    /// `-l`: the lcores; the first is the main lcore.
    pub lcores: Vec<u32>,
    /// Hugepage memory (`--huge-unlink`) or anonymous memory (`--no-huge -m N`).
    pub hugepages: bool,
    /// `-m N`: always given without hugepages (512 when absent), only when set with them.
    pub memory_mb: Option<u32>,
    /// `--file-prefix`; when absent, `<name>-<pid>` so several processes coexist.
    pub file_prefix: Option<String>,
    /// Appended after the generated arguments.
    pub extra_args: Vec<String>,
    /// `--log-level`: a level, or `pattern:level`.
    pub log_level: String,
    /// DPDK telemetry (the `/roce/...` commands on `<runtime dir>/dpdk_telemetry.v2`); false
    /// gives EAL `--no-telemetry`. While it is on, the EAL runtime directory stays until the
    /// process exits (`crate::dpdk::ProfilePort`).
    pub telemetry: bool,
    /// DPDK multi-process: EAL keeps its shared configuration and hugepage files (no
    /// `--no-shconf`, no `--huge-unlink`) so a secondary process can attach, and the port answers
    /// packet-capture requests (`rte_pdump_init`): Debian's `dpdk-dumpcap --file-prefix=<prefix>`
    /// captures it while it runs. Needs hugepages. Off by default: the files stay behind when the
    /// process is killed (a normal exit removes them, `crate::dpdk::ProfilePort`).
    pub multi_process: bool,
}

/// `[port]`: the one Ethernet port of the process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Port {
    pub driver: PortDriver,
    /// `key=value` device arguments appended to the `--vdev` / `-a` argument.
    pub vdev_extra: Vec<String>,
    pub rx_queues: u16,
    pub tx_queues: u16,
    pub rx_descriptors: u16,
    pub tx_descriptors: u16,
    /// Mbufs in the port's pool.
    pub mbuf_pool_size: u32,
    /// IP MTU of the port (bytes after the Ethernet header).
    pub mtu: u16,
}

/// The PMD and its device arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortDriver {
    /// `net_af_packet` on an existing kernel interface (a veth end).
    AfPacket { iface: String },
    /// `net_tap`: the PMD creates the tap interface `iface` when DPDK starts.
    Tap { iface: String },
    /// `net_memif`: shared memory with another process, connected over a unix socket.
    Memif {
        socket: PathBuf,
        role: MemifRole,
        id: u32,
        /// Abstract socket namespace (memif's own default) instead of a file at `socket`.
        socket_abstract: bool,
    },
    /// A real NIC bound to a DPDK-capable driver.
    Pci { address: String },
}

/// Which side of a memif connection creates the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemifRole {
    Server,
    Client,
}

/// `[roce]`: the RoCE port's network identity, and its static routes (`gateway`, the
/// default route, and `routes`, `"10.9.0.0/16 via 10.77.20.254"` each; `net::routes`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roce {
    /// `roce.address`: one address per family, at least one (`port_addresses.rs`).
    pub address: PortAddresses,
    pub gateway: Option<std::net::Ipv4Addr>,
    pub routes: Vec<crate::net::IpRoute>,
    /// DSCP of the port's RoCEv2 packets (`roce.dscp`, 0..=63; 0 by default). An EP's DAT QoS
    /// may choose another.
    pub dscp: u8,
    /// The port's 802.1Q identity (`roce.vlan`, `roce.pcp`): `None` sends untagged frames.
    pub vlan: Option<crate::net::Vlan>,
    /// The connection manager's timers (`roce.cm_response_timeout`, 8..=24, 4.096 us * 2^N,
    /// default 20 (4.3 s), and `roce.cm_max_retries`, 0..=15, default 15: what Linux rdma_cm
    /// sends). A REQ carries both, so they also time the peer's REP and DREQ retries to us.
    /// Lower values find a dead peer during connection set-up or tear-down sooner.
    pub cm: crate::cm::CmConfig,
}

impl Roce {
    /// The routes as the port's neighbour layer holds them (the gateway as the default route).
    pub fn route_table(&self) -> crate::net::RouteTable {
        self.checked_routes()
            .expect("the profile's routes were checked when it was read")
    }

    /// The route table, or the first route the port would refuse, named by its key.
    fn checked_routes(&self) -> Result<crate::net::RouteTable, ConfigError> {
        use crate::net::{IpRoute, NetConfig, RouteTable};
        let mut table = RouteTable::default();
        let gateway = self
            .gateway
            .map(|g| ("roce.gateway".to_string(), IpRoute::default_via(g)));
        let routes = self
            .routes
            .iter()
            .enumerate()
            .map(|(i, r)| (format!("roce.routes[{i}]"), *r));
        let mut routes = gateway.into_iter().chain(routes).peekable();
        let Some(v4) = self.address.v4 else {
            return match routes.peek() {
                // Routes and gateways are IPv4: their next hops are on the IPv4 subnet.
                Some((field, r)) => Err(ConfigError::BadRoute {
                    field: field.clone(),
                    value: r.to_string(),
                    reason: "IPv4 routes need an IPv4 roce.address".into(),
                }),
                None => Ok(table),
            };
        };
        // The port's own rules (next hop on the subnet, no route into it), with any MAC.
        let mut port = NetConfig::new(
            crate::wire::ethernet::EthernetAddress([2, 0, 0, 0, 0, 1]),
            v4.addr(),
            v4.prefix_len(),
        );
        for (field, r) in routes {
            let bad = |reason: String| ConfigError::BadRoute {
                field: field.clone(),
                value: r.to_string(),
                reason,
            };
            table.add(r).map_err(|e| bad(e.to_string()))?;
            port.routes = table;
            port.validate().map_err(|e| bad(e.to_string()))?;
        }
        Ok(table)
    }
}

/// Who drives the shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// A dedicated poll thread pinned on each poll core.
    Core,
    /// The consumer thread that waits on an EVD drives its shard itself.
    Inline,
}

/// `[engine]`: the poll-mode engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Engine {
    /// One shard per entry, pinned on that core; each must be one of `eal.lcores`.
    pub poll_cores: Vec<u32>,
    pub progress: Progress,
    /// Pause of an idle poll loop, in microseconds (0: spin).
    pub idle_pause_us: u32,
    /// pcap file receiving every frame sent and received.
    pub capture: Option<PathBuf>,
    /// Inline progress: a helper thread drives a shard no consumer thread drove for this many
    /// microseconds, so a peer's RDMA READ, WRITE and atomic are answered while the
    /// application is away from DAT (0: no helper; ignored with core progress).
    pub away_after_us: u32,
}

impl PortDriver {
    /// The `port.pmd` spelling.
    pub fn pmd_name(&self) -> &'static str {
        match self {
            PortDriver::AfPacket { .. } => "af_packet",
            PortDriver::Tap { .. } => "tap",
            PortDriver::Memif { .. } => "memif",
            PortDriver::Pci { .. } => "pci",
        }
    }
}

impl MemifRole {
    pub fn as_str(self) -> &'static str {
        match self {
            MemifRole::Server => "server",
            MemifRole::Client => "client",
        }
    }
}

impl Progress {
    pub fn as_str(self) -> &'static str {
        match self {
            Progress::Core => "core",
            Progress::Inline => "inline",
        }
    }

    fn parse(field: &'static str, value: &str) -> Result<Self, ConfigError> {
        match value {
            "core" => Ok(Progress::Core),
            "inline" => Ok(Progress::Inline),
            _ => Err(ConfigError::BadProgress {
                field,
                value: value.to_string(),
            }),
        }
    }
}

impl Port {
    /// The DPDK device name of the port (for `rte_eth_dev_get_port_by_name`).
    pub fn device_name(&self) -> String {
        match &self.driver {
            PortDriver::AfPacket { .. } => "net_af_packet0".into(),
            PortDriver::Tap { .. } => "net_tap0".into(),
            PortDriver::Memif { .. } => "net_memif0".into(),
            PortDriver::Pci { address } => normalize_pci(address),
        }
    }

    /// The device argument: `net_af_packet0,iface=X,qpairs=N`, `0000:03:00.0`, ...
    pub fn device_arg(&self) -> String {
        let mut parts = vec![self.device_name()];
        match &self.driver {
            PortDriver::AfPacket { iface } => {
                parts.push(format!("iface={iface}"));
                parts.push(format!("qpairs={}", self.rx_queues.max(self.tx_queues)));
            }
            PortDriver::Tap { iface } => parts.push(format!("iface={iface}")),
            PortDriver::Memif {
                socket,
                role,
                id,
                socket_abstract,
            } => {
                parts.push(format!("role={}", role.as_str()));
                parts.push(format!("socket={}", socket.display()));
                parts.push(format!("id={id}"));
                if !socket_abstract {
                    parts.push("socket-abstract=no".into());
                }
            }
            PortDriver::Pci { .. } => {}
        }
        parts.extend(self.vdev_extra.iter().cloned());
        parts.join(",")
    }
}

fn normalize_pci(address: &str) -> String {
    if address.matches(':').count() == 1 {
        format!("0000:{}", address.to_ascii_lowercase())
    } else {
        address.to_ascii_lowercase()
    }
}

impl Profile {
    /// Reads, parses and validates the profile at `path`. Without a `name` key, the profile is
    /// named after the file (`af_packet-a.toml` -> `af_packet-a`). Environment overrides are not
    /// applied (see [`Profile::apply_env`]).
    pub fn load(path: impl AsRef<Path>) -> Result<Profile, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or(DEFAULT_NAME);
        Profile::parse_named(&text, stem).map_err(|e| ConfigError::InFile {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    /// [`Profile::load`], then [`Profile::apply_env`].
    pub fn load_with_env(path: impl AsRef<Path>) -> Result<Profile, ConfigError> {
        let mut profile = Profile::load(path)?;
        profile.apply_env()?;
        Ok(profile)
    }

    /// Parses and validates profile text; without a `name` key the profile is `dpdk-roce`.
    #[allow(clippy::should_implement_trait)]
    pub fn from_str(text: &str) -> Result<Profile, ConfigError> {
        Profile::parse_named(text, DEFAULT_NAME)
    }

    fn parse_named(text: &str, default_name: &str) -> Result<Profile, ConfigError> {
        let raw: RawProfile = toml::from_str(text)?;
        let profile = Profile::from_raw(raw, default_name)?;
        profile.validate()?;
        Ok(profile)
    }

    /// The profile as TOML that [`Profile::from_str`] reads back to an equal profile.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.to_raw()).expect("a profile always serialises")
    }

    /// Applies `DPDK_ROCE_CAPTURE`, `DPDK_ROCE_PROGRESS`, `DPDK_ROCE_TELEMETRY` and
    /// `DPDK_ROCE_MULTI_PROCESS` from the environment.
    pub fn apply_env(&mut self) -> Result<(), ConfigError> {
        self.apply_overrides(|var| std::env::var_os(var))
    }

    /// Applies the overrides that `lookup` returns for [`ENV_CAPTURE`], [`ENV_PROGRESS`],
    /// [`ENV_AWAY_AFTER_US`], [`ENV_TELEMETRY`] and [`ENV_MULTI_PROCESS`], then validates
    /// again.
    pub fn apply_overrides(
        &mut self,
        lookup: impl Fn(&str) -> Option<OsString>,
    ) -> Result<(), ConfigError> {
        if let Some(capture) = lookup(ENV_CAPTURE) {
            self.engine.capture = if capture.is_empty() {
                None
            } else {
                Some(PathBuf::from(capture))
            };
        }
        if let Some(progress) = lookup(ENV_PROGRESS) {
            let value = progress.to_string_lossy();
            self.engine.progress = Progress::parse(ENV_PROGRESS, &value)?;
        }
        if let Some(value) = lookup(ENV_AWAY_AFTER_US) {
            let value = value.to_string_lossy();
            self.engine.away_after_us =
                value.trim().parse().map_err(|_| ConfigError::BadNumber {
                    field: ENV_AWAY_AFTER_US,
                    value: value.to_string(),
                })?;
        }
        if let Some(value) = lookup(ENV_TELEMETRY) {
            self.eal.telemetry = switch(ENV_TELEMETRY, &value)?;
        }
        if let Some(value) = lookup(ENV_MULTI_PROCESS) {
            self.eal.multi_process = switch(ENV_MULTI_PROCESS, &value)?;
        }
        self.validate()
    }

    /// The RoCE path MTU: the largest IB MTU (256..=4096) whose packets fit the port's MTU.
    pub fn roce_pmtu(&self) -> Mtu {
        roce_pmtu_for(self.port.mtu).expect("validated profiles have room for 256-byte packets")
    }

    /// The EAL file prefix: `eal.file_prefix`, or `<name>-<pid>`.
    pub fn file_prefix(&self) -> String {
        self.eal
            .file_prefix
            .clone()
            .unwrap_or_else(|| format!("{}-{}", self.name, std::process::id()))
    }

    /// The EAL arguments, without the program name that `rte_eal_init`'s `argv[0]` needs.
    pub fn eal_args(&self) -> Vec<String> {
        let lcores: Vec<String> = self.eal.lcores.iter().map(u32::to_string).collect();
        let mut args = vec!["-l".to_string(), lcores.join(",")];
        if !matches!(self.port.driver, PortDriver::Pci { .. }) {
            args.push("--no-pci".into());
        }
        args.push(format!("--file-prefix={}", self.file_prefix()));
        // Without multi-process, one process per EAL instance: no shared runtime files and no
        // hugepage files, so a killed process leaves neither.
        if !self.eal.multi_process {
            args.push("--no-shconf".into());
        }
        if self.eal.hugepages {
            if !self.eal.multi_process {
                args.push("--huge-unlink".into());
            }
            if let Some(mb) = self.eal.memory_mb {
                args.extend(["-m".to_string(), mb.to_string()]);
            }
        } else {
            let mb = self.eal.memory_mb.unwrap_or(DEFAULT_NO_HUGE_MB);
            args.extend(["--no-huge".to_string(), "-m".to_string(), mb.to_string()]);
        }
        match self.port.driver {
            PortDriver::Pci { .. } => args.extend(["-a".to_string(), self.port.device_arg()]),
            _ => args.push(format!("--vdev={}", self.port.device_arg())),
        }
        args.push(format!("--log-level={}", self.eal.log_level));
        if !self.eal.telemetry {
            args.push("--no-telemetry".into());
        }
        args.extend(self.eal.extra_args.iter().cloned());
        args
    }

    /// Checks every field; the error names the first bad key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_name("name", &self.name)?;
        self.validate_eal()?;
        self.validate_port()?;
        self.validate_engine()
    }

    fn validate_eal(&self) -> Result<(), ConfigError> {
        let eal = &self.eal;
        check_cores("eal.lcores", &eal.lcores)?;
        if let Some(mb) = eal.memory_mb {
            range("eal.memory_mb", mb.into(), 64, 1 << 20)?;
        }
        if let Some(prefix) = &eal.file_prefix {
            check_name("eal.file_prefix", prefix)?;
        }
        check_log_level(&eal.log_level)?;
        if eal.multi_process && !eal.hugepages {
            return Err(ConfigError::MultiProcessWithoutHugepages);
        }
        for arg in &eal.extra_args {
            let key = arg.split('=').next().unwrap_or(arg);
            let managed_by = match key {
                "-l" | "--lcores" | "-c" => Some("eal.lcores"),
                "--file-prefix" => Some("eal.file_prefix"),
                "--no-huge" | "--huge-unlink" => Some("eal.hugepages"),
                "-m" | "--socket-mem" => Some("eal.memory_mb"),
                "--log-level" => Some("eal.log_level"),
                "--telemetry" | "--no-telemetry" => Some("eal.telemetry"),
                "--proc-type" => Some("eal.multi_process"),
                // They would take away the shared config a secondary process attaches to.
                "--no-shconf" | "--in-memory" if eal.multi_process => Some("eal.multi_process"),
                "--no-pci" | "-a" | "--allow" | "-b" | "--block" => Some("port.pmd"),
                _ => None,
            };
            if let Some(managed_by) = managed_by {
                return Err(ConfigError::ConflictingExtraArg {
                    arg: arg.clone(),
                    managed_by,
                });
            }
        }
        Ok(())
    }

    fn validate_port(&self) -> Result<(), ConfigError> {
        let port = &self.port;
        match &port.driver {
            PortDriver::AfPacket { iface } | PortDriver::Tap { iface } => {
                check_iface("port.iface", iface)?
            }
            PortDriver::Memif { socket, .. } => check_socket(socket)?,
            PortDriver::Pci { address } => check_pci(address)?,
        }
        for arg in &port.vdev_extra {
            let ok = matches!(arg.split_once('='), Some((k, v)) if !k.is_empty() && !v.is_empty())
                && !arg.contains(',')
                && !arg.contains(char::is_whitespace);
            if !ok {
                return Err(ConfigError::BadVdevArg { value: arg.clone() });
            }
        }
        let max_q = MAX_QUEUES.into();
        range("port.rx_queues", port.rx_queues.into(), 1, max_q)?;
        range("port.tx_queues", port.tx_queues.into(), 1, max_q)?;
        for (field, n) in [
            ("port.rx_descriptors", port.rx_descriptors),
            ("port.tx_descriptors", port.tx_descriptors),
        ] {
            range(field, n.into(), 64, 16384)?;
            if !n.is_power_of_two() {
                return Err(ConfigError::NotPowerOfTwo {
                    field,
                    value: n.into(),
                });
            }
        }
        range(
            "port.mtu",
            port.mtu.into(),
            (*MTU_RANGE.start()).into(),
            (*MTU_RANGE.end()).into(),
        )?;
        if !matches!(port.driver, PortDriver::Pci { .. }) && port.mtu > VDEV_MAX_MTU {
            return Err(ConfigError::MtuAbovePmdLimit {
                mtu: port.mtu,
                pmd: port.driver.pmd_name(),
                max: VDEV_MAX_MTU,
            });
        }
        if roce_pmtu_for(port.mtu).is_none() {
            return Err(ConfigError::MtuTooSmallForRoce {
                mtu: port.mtu,
                min: 256 + ROCE_OVERHEAD,
            });
        }
        range(
            "port.mbuf_pool_size",
            port.mbuf_pool_size.into(),
            1,
            1 << 24,
        )?;
        let needed = u64::from(port.rx_queues) * u64::from(port.rx_descriptors)
            + u64::from(port.tx_queues) * u64::from(port.tx_descriptors);
        if u64::from(port.mbuf_pool_size) < needed {
            return Err(ConfigError::PoolTooSmall {
                pool: port.mbuf_pool_size,
                needed,
            });
        }
        Ok(())
    }

    fn validate_engine(&self) -> Result<(), ConfigError> {
        let engine = &self.engine;
        check_cores("engine.poll_cores", &engine.poll_cores)?;
        if let Some(core) = engine
            .poll_cores
            .iter()
            .find(|c| !self.eal.lcores.contains(c))
        {
            return Err(ConfigError::PollCoreNotInLcores { core: *core });
        }
        range(
            "engine.idle_pause_us",
            engine.idle_pause_us.into(),
            0,
            1_000_000,
        )?;
        range(
            "engine.away_after_us",
            engine.away_after_us.into(),
            0,
            MAX_AWAY_AFTER_US.into(),
        )?;
        if let Some(capture) = &engine.capture {
            if capture.as_os_str().is_empty() || capture.file_name().is_none() {
                return Err(ConfigError::BadPath {
                    field: "engine.capture",
                    reason: "not a file path",
                });
            }
        }
        Ok(())
    }

    fn from_raw(raw: RawProfile, default_name: &str) -> Result<Profile, ConfigError> {
        let RawPort {
            pmd,
            iface,
            socket,
            role,
            id,
            socket_abstract,
            pci_address,
            vdev_extra,
            rx_queues,
            tx_queues,
            rx_descriptors,
            tx_descriptors,
            mbuf_pool_size,
            mtu,
        } = raw.port;
        let pmd_name: &'static str = match pmd.as_str() {
            "af_packet" => "af_packet",
            "tap" => "tap",
            "memif" => "memif",
            "pci" => "pci",
            _ => return Err(ConfigError::UnknownPmd { value: pmd }),
        };
        let missing = |field| ConfigError::MissingField {
            field,
            pmd: pmd_name,
        };
        let foreign = |field| ConfigError::FieldNotForPmd {
            field,
            pmd: pmd_name,
        };
        // Keys that only some PMDs take: reject the others' keys so a typo'd profile fails.
        let present = [
            (
                "port.iface",
                iface.is_some(),
                ["af_packet", "tap"].as_slice(),
            ),
            ("port.socket", socket.is_some(), &["memif"]),
            ("port.role", role.is_some(), &["memif"]),
            ("port.id", id.is_some(), &["memif"]),
            (
                "port.socket_abstract",
                socket_abstract.is_some(),
                &["memif"],
            ),
            ("port.pci_address", pci_address.is_some(), &["pci"]),
        ];
        if let Some((field, _, _)) = present
            .iter()
            .find(|(_, set, pmds)| *set && !pmds.contains(&pmd_name))
        {
            return Err(foreign(field));
        }
        let driver = match pmd_name {
            "af_packet" => PortDriver::AfPacket {
                iface: iface.ok_or_else(|| missing("port.iface"))?,
            },
            "tap" => PortDriver::Tap {
                iface: iface.ok_or_else(|| missing("port.iface"))?,
            },
            "memif" => {
                let role = match role.as_deref() {
                    Some("server") => MemifRole::Server,
                    Some("client") => MemifRole::Client,
                    Some(other) => {
                        return Err(ConfigError::BadMemifRole {
                            value: other.to_string(),
                        })
                    }
                    None => return Err(missing("port.role")),
                };
                PortDriver::Memif {
                    socket: socket.ok_or_else(|| missing("port.socket"))?,
                    role,
                    id: id.unwrap_or(0),
                    socket_abstract: socket_abstract.unwrap_or(false),
                }
            }
            _ => PortDriver::Pci {
                address: pci_address.ok_or_else(|| missing("port.pci_address"))?,
            },
        };
        let address = PortAddresses::parse(&raw.roce.address)?;
        let gateway = match &raw.roce.gateway {
            None => None,
            Some(g) => Some(g.parse().map_err(|_| ConfigError::BadRoute {
                field: "roce.gateway".into(),
                value: g.clone(),
                reason: "not a dotted IPv4 address".into(),
            })?),
        };
        let routes = raw
            .roce
            .routes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                crate::net::IpRoute::parse(s).map_err(|reason| ConfigError::BadRoute {
                    field: format!("roce.routes[{i}]"),
                    value: s.clone(),
                    reason: reason.into(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let dscp = raw.roce.dscp.unwrap_or(0);
        range("roce.dscp", dscp.into(), 0, 63)?;
        let mut cm = crate::cm::CmConfig::default();
        if let Some(t) = raw.roce.cm_response_timeout {
            range("roce.cm_response_timeout", t.into(), 8, 24)?;
            cm.cm_response_timeout = t;
        }
        if let Some(r) = raw.roce.cm_max_retries {
            range("roce.cm_max_retries", r.into(), 0, 15)?;
            cm.max_cm_retries = r;
        }
        let roce = Roce {
            address,
            gateway,
            routes,
            dscp,
            vlan: RawPcp::vlan(raw.roce.vlan, raw.roce.pcp.as_ref())?,
            cm,
        };
        roce.checked_routes()?;
        let progress = Progress::parse("engine.progress", &raw.engine.progress)?;
        if let Some(f) = &raw.faults {
            f.check().map_err(ConfigError::BadFaults)?;
        }
        Ok(Profile {
            name: raw.name.unwrap_or_else(|| default_name.to_string()),
            eal: Eal {
                lcores: raw.eal.lcores,
                hugepages: raw.eal.hugepages,
                memory_mb: raw.eal.memory_mb,
                file_prefix: raw.eal.file_prefix,
                extra_args: raw.eal.extra_args,
                log_level: raw.eal.log_level,
                telemetry: raw.eal.telemetry,
                multi_process: raw.eal.multi_process,
            },
            port: Port {
                driver,
                vdev_extra,
                rx_queues,
                tx_queues,
                rx_descriptors,
                tx_descriptors,
                mbuf_pool_size,
                mtu,
            },
            roce,
            engine: Engine {
                poll_cores: raw.engine.poll_cores,
                progress,
                idle_pause_us: raw.engine.idle_pause_us,
                capture: raw.engine.capture,
                away_after_us: raw.engine.away_after_us,
            },
            congestion: raw.congestion.unwrap_or_default().check()?,
            faults: raw.faults,
        })
    }

    fn to_raw(&self) -> RawProfile {
        let mut port = RawPort {
            pmd: self.port.driver.pmd_name().to_string(),
            iface: None,
            socket: None,
            role: None,
            id: None,
            socket_abstract: None,
            pci_address: None,
            vdev_extra: self.port.vdev_extra.clone(),
            rx_queues: self.port.rx_queues,
            tx_queues: self.port.tx_queues,
            rx_descriptors: self.port.rx_descriptors,
            tx_descriptors: self.port.tx_descriptors,
            mbuf_pool_size: self.port.mbuf_pool_size,
            mtu: self.port.mtu,
        };
        match &self.port.driver {
            PortDriver::AfPacket { iface } | PortDriver::Tap { iface } => {
                port.iface = Some(iface.clone())
            }
            PortDriver::Memif {
                socket,
                role,
                id,
                socket_abstract,
            } => {
                port.socket = Some(socket.clone());
                port.role = Some(role.as_str().to_string());
                port.id = Some(*id);
                port.socket_abstract = Some(*socket_abstract);
            }
            PortDriver::Pci { address } => port.pci_address = Some(address.clone()),
        }
        RawProfile {
            name: Some(self.name.clone()),
            eal: RawEal {
                lcores: self.eal.lcores.clone(),
                hugepages: self.eal.hugepages,
                memory_mb: self.eal.memory_mb,
                file_prefix: self.eal.file_prefix.clone(),
                extra_args: self.eal.extra_args.clone(),
                log_level: self.eal.log_level.clone(),
                telemetry: self.eal.telemetry,
                multi_process: self.eal.multi_process,
            },
            port,
            roce: RawRoce {
                address: self.roce.address.to_raw(),
                gateway: self.roce.gateway.map(|g| g.to_string()),
                routes: self.roce.routes.iter().map(|r| r.to_string()).collect(),
                dscp: (self.roce.dscp != 0).then_some(self.roce.dscp),
                vlan: self.roce.vlan.and_then(|v| v.id()),
                pcp: self.roce.vlan.and_then(|v| match v.pcp() {
                    crate::net::Pcp::Fixed(p) => Some(RawPcp::Fixed(p)),
                    // The default with a VLAN; without one, tags need a PCP key.
                    crate::net::Pcp::FromDscp if v.id().is_some() => None,
                    crate::net::Pcp::FromDscp => Some(RawPcp::Rule("dscp".into())),
                }),
                cm_response_timeout: (self.roce.cm.cm_response_timeout
                    != crate::cm::CmConfig::default().cm_response_timeout)
                    .then_some(self.roce.cm.cm_response_timeout),
                cm_max_retries: (self.roce.cm.max_cm_retries
                    != crate::cm::CmConfig::default().max_cm_retries)
                    .then_some(self.roce.cm.max_cm_retries),
            },
            engine: RawEngine {
                poll_cores: self.engine.poll_cores.clone(),
                progress: self.engine.progress.as_str().to_string(),
                idle_pause_us: self.engine.idle_pause_us,
                capture: self.engine.capture.clone(),
                away_after_us: self.engine.away_after_us,
            },
            congestion: self.congestion.to_raw(),
            faults: self.faults,
        }
    }
}

impl std::str::FromStr for Profile {
    type Err = ConfigError;

    /// Same as [`Profile::from_str`], for `text.parse::<Profile>()`.
    fn from_str(text: &str) -> Result<Profile, ConfigError> {
        Profile::parse_named(text, DEFAULT_NAME)
    }
}

/// The IB path MTU for an IP MTU, if 256-byte packets fit at all.
pub fn roce_pmtu_for(ip_mtu: u16) -> Option<Mtu> {
    ip_mtu
        .checked_sub(ROCE_OVERHEAD)
        .and_then(|room| Mtu::from_bytes_floor(room.into()))
}

fn range(field: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::OutOfRange {
            field,
            value,
            min,
            max,
        })
    }
}

fn check_name(field: &'static str, value: &str) -> Result<(), ConfigError> {
    let reason = if value.is_empty() {
        Some("it is empty")
    } else if value.len() > 64 {
        Some("it is longer than 64 characters")
    } else if !value
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        Some("only letters, digits, '.', '_' and '-' are allowed")
    } else if value.starts_with(['-', '.']) {
        Some("it starts with '-' or '.'")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(ConfigError::BadName {
            field,
            value: value.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

fn check_iface(field: &'static str, value: &str) -> Result<(), ConfigError> {
    let reason = if value.is_empty() {
        Some("it is empty")
    } else if value.len() > 15 {
        Some("Linux interface names have at most 15 characters")
    } else if value == "." || value == ".." {
        Some("reserved name")
    } else if value
        .bytes()
        .any(|b| b == b'/' || b == b',' || b == b'=' || b == b':' || !b.is_ascii_graphic())
    {
        Some("'/', ',', '=', ':', spaces and non-ASCII are not allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(ConfigError::BadName {
            field,
            value: value.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

fn check_socket(path: &Path) -> Result<(), ConfigError> {
    let value = path.display().to_string();
    let reason = if !path.is_absolute() {
        Some("the socket path must be absolute")
    } else if path.as_os_str().len() > 107 {
        Some("a unix socket path has at most 107 bytes")
    } else if path.file_name().is_none() {
        Some("the path names no file")
    } else if value.contains([',', '=']) || value.contains(char::is_whitespace) {
        Some("',', '=' and spaces cannot be passed in a device argument")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(ConfigError::BadSocketPath { value, reason }),
        None => Ok(()),
    }
}

fn check_pci(value: &str) -> Result<(), ConfigError> {
    // [DDDD:]BB:DD.F, hexadecimal, device 0..=0x1f, function 0..=7.
    let parse = || -> Option<()> {
        let (rest, function) = value.rsplit_once('.')?;
        let fields: Vec<&str> = rest.split(':').collect();
        let (domain, bus, device) = match fields.as_slice() {
            [d, b, dev] => (Some(*d), *b, *dev),
            [b, dev] => (None, *b, *dev),
            _ => return None,
        };
        let hex = |s: &str, len: usize| {
            (s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(s, 16).ok())
                .flatten()
        };
        if let Some(d) = domain {
            hex(d, 4)?;
        }
        hex(bus, 2)?;
        (hex(device, 2)? <= 0x1f).then_some(())?;
        (hex(function, 1)? <= 7).then_some(())
    };
    parse().ok_or_else(|| ConfigError::BadPciAddress {
        value: value.to_string(),
    })
}

/// An environment switch: `1`/`0`, `true`/`false`, `on`/`off`, `yes`/`no`.
fn switch(field: &'static str, value: &std::ffi::OsStr) -> Result<bool, ConfigError> {
    let value = value.to_string_lossy();
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(ConfigError::BadSwitch {
            field,
            value: value.into_owned(),
        }),
    }
}

fn check_log_level(value: &str) -> Result<(), ConfigError> {
    let level = match value.rsplit_once(':') {
        Some((pattern, level)) if !pattern.is_empty() => level,
        Some(_) => "",
        None => value,
    };
    let ok = LOG_LEVELS.contains(&level)
        || matches!(level.parse::<u8>(), Ok(n) if (1..=8).contains(&n) && !level.starts_with('+'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::BadLogLevel {
            value: value.to_string(),
        })
    }
}

fn check_cores(field: &'static str, cores: &[u32]) -> Result<(), ConfigError> {
    if cores.is_empty() {
        return Err(ConfigError::EmptyList { field });
    }
    let mut seen = HashSet::new();
    for &core in cores {
        range(field, core.into(), 0, MAX_LCORE.into())?;
        if !seen.insert(core) {
            return Err(ConfigError::DuplicateCore { field, core });
        }
    }
    Ok(())
}

// ---- The file format: plain serde structs; `Profile::from_raw` turns them into checked types.

fn default_log_level() -> String {
    "notice".into()
}
fn default_true() -> bool {
    true
}
fn default_one() -> u16 {
    1
}
fn default_descriptors() -> u16 {
    1024
}
fn default_pool() -> u32 {
    8191
}
fn default_mtu() -> u16 {
    1500
}
fn default_away_after_us() -> u32 {
    DEFAULT_AWAY_AFTER_US
}

fn default_progress() -> String {
    "core".into()
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    eal: RawEal,
    port: RawPort,
    roce: RawRoce,
    engine: RawEngine,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    congestion: Option<congestion::RawCongestion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    faults: Option<faults::FaultConfig>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEal {
    lcores: Vec<u32>,
    #[serde(default = "default_true")]
    hugepages: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    memory_mb: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    file_prefix: Option<String>,
    #[serde(default)]
    extra_args: Vec<String>,
    #[serde(default = "default_log_level")]
    log_level: String,
    #[serde(default = "default_true")]
    telemetry: bool,
    #[serde(default)]
    multi_process: bool,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPort {
    pmd: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iface: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    socket: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    role: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    socket_abstract: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pci_address: Option<String>,
    #[serde(default)]
    vdev_extra: Vec<String>,
    #[serde(default = "default_one")]
    rx_queues: u16,
    #[serde(default = "default_one")]
    tx_queues: u16,
    #[serde(default = "default_descriptors")]
    rx_descriptors: u16,
    #[serde(default = "default_descriptors")]
    tx_descriptors: u16,
    #[serde(default = "default_pool")]
    mbuf_pool_size: u32,
    #[serde(default = "default_mtu")]
    mtu: u16,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRoce {
    address: port_addresses::RawAddresses,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    gateway: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    routes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dscp: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vlan: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pcp: Option<RawPcp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cm_response_timeout: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cm_max_retries: Option<u8>,
}

/// `roce.pcp`: a priority 0..=7, or "dscp" (each frame's DSCP >> 3).
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum RawPcp {
    Fixed(u8),
    Rule(String),
}

impl RawPcp {
    /// The port's 802.1Q identity from `roce.vlan` and `roce.pcp`: tagged when either is given
    /// (a PCP alone sends priority-tagged frames); the PCP follows the DSCP by default.
    fn vlan(
        id: Option<u16>,
        pcp: Option<&RawPcp>,
    ) -> Result<Option<crate::net::Vlan>, ConfigError> {
        use crate::net::{Pcp, Vlan, MAX_VLAN_ID};
        if id.is_none() && pcp.is_none() {
            return Ok(None);
        }
        if let Some(v) = id {
            range("roce.vlan", v.into(), 1, MAX_VLAN_ID.into())?;
        }
        let pcp = match pcp {
            None => Pcp::FromDscp,
            Some(RawPcp::Fixed(p)) => {
                range("roce.pcp", (*p).into(), 0, 7)?;
                Pcp::Fixed(*p)
            }
            Some(RawPcp::Rule(r)) if r == "dscp" => Pcp::FromDscp,
            Some(RawPcp::Rule(r)) => {
                return Err(ConfigError::BadPcp { value: r.clone() });
            }
        };
        // Both are in range (checked above): this cannot fail.
        Ok(Vlan::new(id, pcp).ok())
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEngine {
    poll_cores: Vec<u32>,
    #[serde(default = "default_progress")]
    progress: String,
    #[serde(default)]
    idle_pause_us: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    capture: Option<PathBuf>,
    #[serde(default = "default_away_after_us")]
    away_after_us: u32,
}

#[cfg(test)]
mod tests;
