//! Datagram Extended Transport Header (IBTA vol. 1 §9.3.4): Q_Key 4, reserved 1, source QP 3.

/// DETH length in bytes.
pub const DETH_LEN: usize = 8;

/// Q_Key of the general services interface (QP1), used by CM MADs.
pub const GSI_QKEY: u32 = 0x8001_0000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DethRepr {
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}
