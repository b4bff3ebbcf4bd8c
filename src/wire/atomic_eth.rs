//! Atomic Extended Transport Header (IBTA vol. 1 §9.3.6): VA 8, R_Key 4, swap/add 8, compare 8.

/// AtomicETH length in bytes.
pub const ATOMIC_ETH_LEN: usize = 28;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub rkey: u32,
    /// Swap value (compare-and-swap) or addend (fetch-and-add).
    pub swap_add: u64,
    /// Compare value (compare-and-swap only).
    pub compare: u64,
}
