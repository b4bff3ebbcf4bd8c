//! Atomic ACK Extended Transport Header (IBTA vol. 1 §9.3.7): original remote data, 8 bytes.

/// AtomicAckETH length in bytes.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicAckEthRepr {
    pub orig_data: u64,
}
