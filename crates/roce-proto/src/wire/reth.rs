//! RDMA Extended Transport Header (IBTA vol. 1 §9.3.3): VA 8, R_Key 4, DMA length 4.

use super::{check_len, check_room, get_u32, get_u64, set_u32, set_u64, Result};

/// RETH length in bytes.
pub const RETH_LEN: usize = 16;

/// Offsets of the RETH fields.
pub mod field {
    pub const VA: usize = 0;
    pub const RKEY: usize = 8;
    pub const DMA_LEN: usize = 12;
}

/// A view of a RETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("RETH", buffer.as_ref(), RETH_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    /// Remote virtual address.
    pub fn va(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::VA)
    }
    pub fn rkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::RKEY)
    }
    /// Length of the whole RDMA operation in bytes.
    pub fn dma_len(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::DMA_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_va(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::VA, v);
    }
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RKEY, v);
    }
    pub fn set_dma_len(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::DMA_LEN, v);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl RethRepr {
    /// Reads every field from exactly the 16 header bytes, as [`parse`](Self::parse) does.
    #[inline(always)]
    pub fn from_bytes(b: &[u8; RETH_LEN]) -> Self {
        let (va, rest) = b.split_at(field::RKEY);
        let (rkey, dma_len) = rest.split_at(field::DMA_LEN - field::RKEY);
        RethRepr {
            va: u64::from_be_bytes(va.try_into().unwrap_or_default()),
            rkey: u32::from_be_bytes(rkey.try_into().unwrap_or_default()),
            dma_len: u32::from_be_bytes(dma_len.try_into().unwrap_or_default()),
        }
    }
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("RETH", packet.buffer.as_ref(), RETH_LEN)?;
        Ok(RethRepr {
            va: packet.va(),
            rkey: packet.rkey(),
            dma_len: packet.dma_len(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        RETH_LEN
    }
    /// Writes all 16 bytes, as [`emit`](Self::emit) does.
    #[inline]
    pub fn write_to(&self, b: &mut [u8; RETH_LEN]) {
        let (va, rest) = b.split_at_mut(field::RKEY);
        let (rkey, dma_len) = rest.split_at_mut(field::DMA_LEN - field::RKEY);
        va.copy_from_slice(&self.va.to_be_bytes());
        rkey.copy_from_slice(&self.rkey.to_be_bytes());
        dma_len.copy_from_slice(&self.dma_len.to_be_bytes());
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), RETH_LEN)?;
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_dma_len(self.dma_len);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b: [u8; 16] = [
            0x00, 0x00, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0x10, 0,
        ];
        let r = RethRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.va, 0x7f12_3456_789a);
        assert_eq!(r.rkey, 0xdead_beef);
        assert_eq!(r.dma_len, 4096);
        let mut out = [0u8; 16];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..15]).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..15])).is_err());
        assert_eq!(RethRepr::from_bytes(&b), r);
        let mut fixed = [0xa5u8; RETH_LEN];
        r.write_to(&mut fixed);
        assert_eq!(fixed, b);
    }
}
