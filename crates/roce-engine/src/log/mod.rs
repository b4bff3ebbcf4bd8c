//! Logging: the crate's `tracing` events go to stderr through `tracing-subscriber`, filtered
//! by an `EnvFilter` directive (`info`, `dpdk_roce::cm=debug,warn`, ...). A program of the
//! project reads `RUST_LOG`; the provider inside a C program reads `DPDK_ROCE_LOG` (a C
//! program's environment may use `RUST_LOG` for something else). Without either, warnings and
//! errors only. Nothing on the data path logs unless its level is enabled: per-packet events
//! are `debug`/`trace`.
//!
//! Every message of the library goes through `tracing`: a directive that does not parse is
//! reported as a warning of target `dpdk_roce::log` once the default filter is installed.
//!
//! Targets: `dpdk_roce::cm` (connections made, refused, timed out, ended; `dpdk_roce::cm::listen`:
//! a listener ready for connection requests), `dpdk_roce::net`
//! (ARP), `dpdk_roce::transport` (a QP entering the error state), `dpdk_roce::faults` (what
//! fault injection did, at `warn` when its queue pair goes), `dpdk_roce::dat::call` (every
//! failing DAT call with the source location of the provider entry, at `debug`; also turned on
//! by `DPDK_ROCE_DAT_TRACE`). What a peer's frames cause (the `cm`, `net` and `transport`
//! events) is rate-limited per kind of message: a burst of 10, then 10 a second; the next
//! message logged carries `suppressed = N`, the number held back (`host::log_limit`).

use tracing_subscriber::EnvFilter;

/// The provider's filter variable.
pub const PROVIDER_LOG_ENV: &str = "DPDK_ROCE_LOG";
/// Shorthand for `dpdk_roce::dat::call=debug` (the provider's failing DAT calls).
pub const DAT_TRACE_ENV: &str = "DPDK_ROCE_DAT_TRACE";
/// The target of the failing-DAT-call events.
pub const DAT_CALL_TARGET: &str = "dpdk_roce::dat::call";
/// The target of the event a listener logs once it takes connection requests (at `info`):
/// what a script or test waits for before it starts a server's clients.
pub const LISTEN_TARGET: &str = "dpdk_roce::cm::listen";
/// What is logged when no variable says otherwise.
const DEFAULT: &str = "warn";

/// The directive of a program: `RUST_LOG`, then `DPDK_ROCE_LOG`.
fn program_directive() -> String {
    std::env::var("RUST_LOG")
        .or_else(|_| std::env::var(PROVIDER_LOG_ENV))
        .unwrap_or_else(|_| DEFAULT.to_owned())
}

/// The directive of the provider: `DPDK_ROCE_LOG`, plus the DAT call trace when asked for.
fn provider_directive() -> String {
    let mut d = std::env::var(PROVIDER_LOG_ENV).unwrap_or_else(|_| DEFAULT.to_owned());
    if std::env::var_os(DAT_TRACE_ENV).is_some() {
        d.push_str(&format!(",{DAT_CALL_TARGET}=debug"));
    }
    d
}

/// Installs the stderr subscriber with `directive`, or with the default one if `directive`
/// does not parse; the bad directive is then reported through `tracing` (at `warn`, target
/// `dpdk_roce::log`), once a subscriber exists to take the report.
fn install(directive: &str) {
    let (filter, refused) = match EnvFilter::try_new(directive) {
        Ok(f) => (f, None),
        Err(e) => (EnvFilter::new(DEFAULT), Some(e)),
    };
    // A subscriber the program installed first stays (try_init fails harmlessly).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    if let Some(e) = refused {
        tracing::warn!(target: "dpdk_roce::log", "log filter {directive:?}: {e}; logging warnings");
    }
}

/// Installs the stderr subscriber of one of the project's programs.
pub fn init_program() {
    install(&program_directive());
}

/// Installs the provider's stderr subscriber (once per process; a C program has none).
pub fn init_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| install(&provider_directive()));
}
