//! Registered-memory access as the transport sees it. The responder and requester never touch
//! memory directly: every access names a key, a protection domain, an address range and the
//! rights it needs, and the `Memory` implementation checks all of them (IBTA vol. 1 §10.6).
//! `VecMemory` backs it with plain vectors for tests and the in-memory harness; the engine uses
//! `mem::MrTable` (regions on the heap, in consumer memory or in DPDK hugepages).

use bitflags::bitflags;
use thiserror::Error;

bitflags! {
    /// Access rights of a memory region (IBTA vol. 1 §10.6.3.1).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct Access: u32 {
        const LOCAL_READ = 1 << 0;
        const LOCAL_WRITE = 1 << 1;
        const REMOTE_READ = 1 << 2;
        const REMOTE_WRITE = 1 << 3;
        const REMOTE_ATOMIC = 1 << 4;
    }
}

/// Which key namespace an access uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyKind {
    /// L_Key, from a local scatter/gather entry.
    Local,
    /// R_Key, from a remote request (RETH, AtomicETH, IETH).
    Remote,
}

/// Why a memory access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Error)]
pub enum MemError {
    #[error("no region with this key (or the key was invalidated / freed)")]
    InvalidKey,
    #[error("the region belongs to another protection domain")]
    PdMismatch,
    #[error("the access is outside the region's bounds")]
    OutOfBounds,
    #[error("the region does not grant the access rights needed")]
    AccessDenied,
    #[error("atomic target is not 8-byte aligned")]
    Misaligned,
}

/// An atomic operation on a remote 64-bit word (IBTA vol. 1 §9.4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    CompareSwap { compare: u64, swap: u64 },
    FetchAdd { add: u64 },
}

/// One checked access: key, PD, start address and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRef {
    pub kind: KeyKind,
    pub pd: u32,
    pub key: u32,
    pub addr: u64,
    pub len: u32,
}

/// Registered memory. Every method checks key, PD, bounds and rights before it touches a byte;
/// nothing outside a registered region is ever read or written.
pub trait Memory {
    /// Checks that `r` may be accessed with `access` without touching it.
    fn check(&self, r: &MemRef, access: Access) -> Result<(), MemError>;
    /// Copies `out.len()` bytes starting at `r.addr` into `out` (`r.len` must equal `out.len()`).
    fn read(&self, r: &MemRef, access: Access, out: &mut [u8]) -> Result<(), MemError>;
    /// Copies `data` to `r.addr` (`r.len` must equal `data.len()`).
    fn write(&mut self, r: &MemRef, access: Access, data: &[u8]) -> Result<(), MemError>;
    /// Executes an atomic on the 8 bytes at `r.addr` (host byte order of the 64-bit value as
    /// the IB spec defines it: the operands are numbers) and returns the original value.
    fn atomic(&mut self, r: &MemRef, op: AtomicOp) -> Result<u64, MemError>;
    /// Invalidates a remote key (SEND with invalidate, IBTA vol. 1 §9.4.1.1.1).
    fn invalidate(&mut self, pd: u32, rkey: u32) -> Result<(), MemError>;
    /// Whether requests arriving on QP `qpn` may use `rkey`: false only for the R_Key of a
    /// type 2 memory window associated with another QP (IBTA vol. 1 §10.6.7; DAT
    /// `dat_rmr_create_for_ep`), whose accesses fail like any R_Key violation. An unknown key
    /// answers true: the access check itself refuses it. Default: every key on every QP.
    fn rkey_usable_on(&self, _rkey: u32, _qpn: u32) -> bool {
        true
    }
    /// A remote write arriving on QP `qpn`: [`rkey_usable_on`](Self::rkey_usable_on) and then
    /// [`write`](Self::write) with `REMOTE_WRITE` (an unusable R_Key is `AccessDenied`).
    /// Implementations may do both under one lookup of the region.
    fn remote_write_on(&mut self, r: &MemRef, qpn: u32, data: &[u8]) -> Result<(), MemError> {
        if !self.rkey_usable_on(r.key, qpn) {
            return Err(MemError::AccessDenied);
        }
        self.write(r, Access::REMOTE_WRITE, data)
    }
    /// The shared region table behind this memory when its ranges can be pinned and handed to
    /// a NIC as external buffers (zero-copy transmit); `None` (the default) means payloads are
    /// copied out with [`read`](Self::read).
    fn pin_table(&self) -> Option<&std::sync::Arc<super::MrTable>> {
        None
    }
}
