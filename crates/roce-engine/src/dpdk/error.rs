//! The error type of the DPDK layer: the failing call, DPDK's errno and `rte_strerror` text.

use std::ffi::CStr;

/// What went wrong in a DPDK call.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum DpdkError {
    /// A DPDK function failed; `errno` is `rte_errno` or the negated return value.
    #[error("{op} failed: {msg} (errno {errno})")]
    Rte {
        /// The DPDK function (and object) that failed.
        op: String,
        /// The positive errno value.
        errno: i32,
        /// `rte_strerror(errno)`.
        msg: String,
    },
    /// `Eal::init` was called again with different arguments.
    #[error("EAL already initialised with {existing:?}; cannot re-initialise with {requested:?}")]
    EalArgsMismatch {
        /// The arguments of the successful first initialisation.
        existing: Vec<String>,
        /// The arguments of this call.
        requested: Vec<String>,
    },
    /// An earlier `Eal::init` of this process failed; DPDK does not allow a retry.
    #[error("EAL initialisation failed earlier in this process: {0}")]
    EalFailedBefore(String),
    /// No ethdev port with that name (is the `--vdev` argument or hotplug missing?).
    #[error("no DPDK port named {0:?}")]
    PortNotFound(String),
    /// A queue handle was already taken from the port.
    #[error("{kind} queue {queue} of port {port} already taken or out of range")]
    QueueUnavailable {
        /// "rx" or "tx".
        kind: &'static str,
        /// Port id.
        port: u16,
        /// Queue index.
        queue: u16,
    },
    /// An argument the DPDK layer rejects before calling DPDK (names with NUL, sizes...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl DpdkError {
    /// An error for `op` from a positive errno value.
    pub fn from_errno(op: impl Into<String>, errno: i32) -> Self {
        let errno = errno.abs();
        DpdkError::Rte {
            op: op.into(),
            errno,
            msg: strerror(errno),
        }
    }

    /// An error for `op` from the calling thread's current `rte_errno`.
    pub fn last(op: impl Into<String>) -> Self {
        // SAFETY: reads the calling thread's rte_errno (a thread-local int); no other state.
        let errno = unsafe { dpdk_sys::shim_rte_errno() };
        Self::from_errno(op, errno)
    }

    /// The errno, when this came from DPDK.
    pub fn errno(&self) -> Option<i32> {
        match self {
            DpdkError::Rte { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

/// `rte_strerror(errno)` as an owned string.
pub fn strerror(errno: i32) -> String {
    // SAFETY: rte_strerror accepts any int and returns a pointer to a NUL-terminated string that
    // is either static or in a per-thread buffer valid until the next call on this thread; it is
    // copied out at once.
    unsafe {
        let p = dpdk_sys::rte_strerror(errno);
        if p.is_null() {
            return format!("errno {errno}");
        }
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// `Ok(ret)` when a DPDK call returned `>= 0`, else the error for `-ret`.
pub(crate) fn check(op: impl FnOnce() -> String, ret: i32) -> Result<i32, DpdkError> {
    if ret < 0 {
        Err(DpdkError::from_errno(op(), -ret))
    } else {
        Ok(ret)
    }
}
