//! RDMA Extended Transport Header (IBTA vol. 1 §9.3.3): VA 8, R_Key 4, DMA length 4.

/// RETH length in bytes.
pub const RETH_LEN: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}
