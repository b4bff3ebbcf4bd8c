//! The DPDK Environment Abstraction Layer: initialised once per process, never cleaned up.
//!
//! `rte_eal_init` may run only once in a process and EAL cannot be initialised again after
//! `rte_eal_cleanup`, so [`Eal::init`] hands out a `&'static Eal` and nothing ever calls cleanup:
//! the OS reclaims everything at exit (with `--huge-unlink` or `--in-memory` no hugepage files
//! remain; a multi-process profile's are removed at exit by `ProfilePort`). Processes that need separate EALs (the two ends of a test) are separate processes.

use std::ffi::{c_char, c_int, CString};
use std::sync::Mutex;

use super::error::DpdkError;

/// The initialised EAL of this process. Obtained from [`Eal::init`]; proves initialisation to the
/// constructors of ports and pools.
#[derive(Debug)]
pub struct Eal {
    args: Vec<String>,
    tsc_hz: u64,
}

enum State {
    Uninit,
    Ready(&'static Eal),
    Failed(String),
}

static STATE: Mutex<State> = Mutex::new(State::Uninit);

impl Eal {
    /// Initialises the EAL with `args` (without a program name: `argv[0]` is added), or returns
    /// the handle of the earlier initialisation when `args` are the same. Different arguments
    /// after a successful initialisation, or any call after a failed one, are errors.
    pub fn init(args: &[String]) -> Result<&'static Eal, DpdkError> {
        let mut state = STATE.lock().unwrap_or_else(|e| e.into_inner());
        match &*state {
            State::Ready(eal) if eal.args == args => return Ok(eal),
            State::Ready(eal) => {
                return Err(DpdkError::EalArgsMismatch {
                    existing: eal.args.clone(),
                    requested: args.to_vec(),
                })
            }
            State::Failed(e) => return Err(DpdkError::EalFailedBefore(e.clone())),
            State::Uninit => {}
        }

        let mut owned = Vec::with_capacity(args.len() + 1);
        owned.push(CString::new("dpdk-roce").expect("no NUL"));
        for a in args {
            owned.push(
                CString::new(a.as_str())
                    .map_err(|_| DpdkError::InvalidArgument(format!("EAL argument {a:?}")))?,
            );
        }
        // EAL keeps pointers into argv (getopt permutes it, some options are stored as given):
        // the strings and the array are leaked for the life of the process, once.
        let mut argv: Vec<*mut c_char> = owned.into_iter().map(CString::into_raw).collect();
        argv.push(std::ptr::null_mut());
        let argv: &'static mut [*mut c_char] = Vec::leak(argv);
        let argc = (argv.len() - 1) as c_int;

        // SAFETY: argc/argv describe argc valid NUL-terminated strings plus a terminating NULL,
        // all leaked so they outlive EAL; the mutex guarantees one call at a time.
        let ret = unsafe { dpdk_sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if ret < 0 {
            let err = DpdkError::last(format!("rte_eal_init({})", args.join(" ")));
            *state = State::Failed(err.to_string());
            return Err(err);
        }
        // SAFETY: EAL is initialised; rte_get_tsc_hz only reads the calibrated frequency.
        let tsc_hz = unsafe { dpdk_sys::rte_get_tsc_hz() };
        let eal: &'static Eal = Box::leak(Box::new(Eal {
            args: args.to_vec(),
            tsc_hz,
        }));
        *state = State::Ready(eal);
        Ok(eal)
    }

    /// The handle, if `init` succeeded earlier in this process.
    pub fn get() -> Option<&'static Eal> {
        match &*STATE.lock().unwrap_or_else(|e| e.into_inner()) {
            State::Ready(eal) => Some(eal),
            _ => None,
        }
    }

    /// The arguments EAL was initialised with.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The TSC frequency EAL calibrated, in Hz.
    pub fn tsc_hz(&self) -> u64 {
        self.tsc_hz
    }

    /// Whether EAL runs on hugepages (false with `--no-huge`).
    pub fn has_hugepages(&self) -> bool {
        // SAFETY: reads EAL's internal configuration, initialised by `init`.
        unsafe { dpdk_sys::rte_eal_has_hugepages() != 0 }
    }

    /// Lets a secondary process capture this process's ports (`rte_pdump_init`): Debian's
    /// `dpdk-dumpcap --file-prefix=<prefix>` or `dpdk-pdump`. EAL must run with a shared
    /// configuration and hugepage files (`eal.multi_process`). Once per process; later calls
    /// return the first one's result.
    pub fn enable_pdump(&self) -> Result<(), DpdkError> {
        static PDUMP: std::sync::OnceLock<Result<(), DpdkError>> = std::sync::OnceLock::new();
        PDUMP
            .get_or_init(|| {
                // SAFETY: EAL is initialised (`self` proves it); rte_pdump_init registers the
                // multi-process action that serves capture requests and reserves its memzone.
                let ret = unsafe { dpdk_sys::rte_pdump_init() };
                super::error::check(|| "rte_pdump_init".to_string(), ret).map(drop)
            })
            .clone()
    }

    /// The number of ethdev ports available (probed vdevs and devices).
    pub fn port_count(&self) -> u16 {
        // SAFETY: EAL is initialised; the call only reads the ethdev port table.
        unsafe { dpdk_sys::rte_eth_dev_count_avail() }
    }

    /// Hot-plugs a device at run time, e.g. `"net_tap1,iface=t1"` or
    /// `"net_af_packet1,iface=veth1"` (the same string as a `--vdev` argument). Afterwards the
    /// port can be opened by the device name (the part before the first comma).
    pub fn probe_device(&self, devargs: &str) -> Result<(), DpdkError> {
        let c = CString::new(devargs)
            .map_err(|_| DpdkError::InvalidArgument(format!("devargs {devargs:?}")))?;
        // SAFETY: c is a valid NUL-terminated string for the duration of the call; EAL copies it.
        let ret = unsafe { dpdk_sys::rte_dev_probe(c.as_ptr()) };
        super::error::check(|| format!("rte_dev_probe({devargs})"), ret).map(drop)
    }
}

/// Whether this machine has free hugepages mounted for EAL: `HugePages_Free > 0` in
/// /proc/meminfo and a hugetlbfs mount in /proc/mounts.
pub fn hugepages_available() -> bool {
    let free = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("HugePages_Free:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .unwrap_or(0);
    let mounted = std::fs::read_to_string("/proc/mounts")
        .map(|m| {
            m.lines()
                .any(|l| l.split_whitespace().nth(2) == Some("hugetlbfs"))
        })
        .unwrap_or(false);
    free > 0 && mounted
}

/// A builder for the usual EAL command line of this project.
///
/// Always `-l <cores>` and `--no-pci` (the VM's own NIC must not be probed). Memory:
/// * hugepages (default): `--in-memory` (no shared config, no hugepage files left behind, so
///   concurrent processes never clash over a `--file-prefix`), or with [`EalArgs::file_prefix`]
///   `--file-prefix=<p> --huge-unlink`;
/// * [`EalArgs::no_huge`]: `--no-huge -m <MiB> --no-shconf` (EAL refuses `--in-memory` with
///   `--no-huge`, whose legacy memory mode it implies).
#[derive(Clone, Debug)]
pub struct EalArgs {
    cores: String,
    vdevs: Vec<String>,
    no_huge_mb: Option<u32>,
    in_memory: bool,
    file_prefix: Option<String>,
    log_level: Option<String>,
    extra: Vec<String>,
}

impl EalArgs {
    /// Arguments for the lcores `cores` (an `-l` list such as `"0"` or `"0-1"`).
    pub fn new(cores: &str) -> Self {
        EalArgs {
            cores: cores.to_owned(),
            vdevs: Vec::new(),
            no_huge_mb: None,
            in_memory: true,
            file_prefix: None,
            log_level: None,
            extra: Vec::new(),
        }
    }

    /// Adds a virtual device, e.g. `"net_af_packet0,iface=veth0"` or `"net_tap0,iface=dtap0"`.
    pub fn vdev(mut self, devargs: &str) -> Self {
        self.vdevs.push(devargs.to_owned());
        self
    }

    /// Runs without hugepages on `mb` MiB of ordinary memory (`--no-huge -m mb`).
    pub fn no_huge(mut self, mb: u32) -> Self {
        self.no_huge_mb = Some(mb);
        self
    }

    /// Hugepages when [`hugepages_available`], else `--no-huge -m mb`.
    pub fn hugepages_or_no_huge(self, mb: u32) -> Self {
        if hugepages_available() {
            self
        } else {
            self.no_huge(mb)
        }
    }

    /// Uses a shared-config file prefix (`--file-prefix p --huge-unlink`) instead of
    /// `--in-memory`; needed only for DPDK multi-process setups.
    pub fn file_prefix(mut self, prefix: &str) -> Self {
        self.in_memory = false;
        self.file_prefix = Some(prefix.to_owned());
        self
    }

    /// `--log-level`, e.g. `"lib.eal:debug"`, `"warning"` or `"7"`.
    pub fn log_level(mut self, level: &str) -> Self {
        self.log_level = Some(level.to_owned());
        self
    }

    /// Any further raw EAL argument.
    pub fn arg(mut self, a: &str) -> Self {
        self.extra.push(a.to_owned());
        self
    }

    /// The argument list for [`Eal::init`].
    pub fn to_args(&self) -> Vec<String> {
        let mut v = vec!["-l".to_owned(), self.cores.clone(), "--no-pci".to_owned()];
        if let Some(mb) = self.no_huge_mb {
            // --no-huge implies legacy memory, which EAL refuses together with --in-memory;
            // --no-shconf keeps it from creating a shared config file instead.
            v.extend(["--no-huge".to_owned(), "-m".to_owned(), mb.to_string()]);
            match &self.file_prefix {
                Some(p) => v.push(format!("--file-prefix={p}")),
                None => v.push("--no-shconf".to_owned()),
            }
        } else if self.in_memory {
            v.push("--in-memory".to_owned());
        } else {
            let prefix = self
                .file_prefix
                .clone()
                .unwrap_or_else(|| format!("dpdk-roce-{}", std::process::id()));
            v.push(format!("--file-prefix={prefix}"));
            v.push("--huge-unlink".to_owned());
        }
        if let Some(l) = &self.log_level {
            v.push(format!("--log-level={l}"));
        }
        for d in &self.vdevs {
            v.push(format!("--vdev={d}"));
        }
        v.extend(self.extra.iter().cloned());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_huge_args_use_no_shconf_without_pci() {
        let a = EalArgs::new("0-1")
            .vdev("net_tap0,iface=t0")
            .no_huge(256)
            .to_args();
        assert_eq!(
            a,
            [
                "-l",
                "0-1",
                "--no-pci",
                "--no-huge",
                "-m",
                "256",
                "--no-shconf",
                "--vdev=net_tap0,iface=t0"
            ]
        );
    }

    #[test]
    fn hugepage_args_default_to_in_memory() {
        let a = EalArgs::new("0").to_args();
        assert_eq!(a, ["-l", "0", "--no-pci", "--in-memory"]);
    }

    #[test]
    fn file_prefix_replaces_in_memory_and_unlinks() {
        let a = EalArgs::new("0").file_prefix("p1").to_args();
        assert!(a.contains(&"--file-prefix=p1".to_owned()));
        assert!(a.contains(&"--huge-unlink".to_owned()));
        assert!(!a.contains(&"--in-memory".to_owned()));
    }
}
