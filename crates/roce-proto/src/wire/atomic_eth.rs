//! Atomic Extended Transport Header (IBTA vol. 1 §9.3.6): VA 8, R_Key 4, swap/add 8, compare 8.

use super::{check_len, check_room, get_u32, get_u64, set_u32, set_u64, Result};

/// AtomicETH length in bytes.
pub const ATOMIC_ETH_LEN: usize = 28;

/// Offsets of the AtomicETH fields.
pub mod field {
    pub const VA: usize = 0;
    pub const RKEY: usize = 8;
    pub const SWAP_ADD: usize = 12;
    pub const COMPARE: usize = 20;
}

/// A view of an AtomicETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("AtomicETH", buffer.as_ref(), ATOMIC_ETH_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn va(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::VA)
    }
    pub fn rkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::RKEY)
    }
    pub fn swap_add(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::SWAP_ADD)
    }
    pub fn compare(&self) -> u64 {
        get_u64(self.buffer.as_ref(), field::COMPARE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_va(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::VA, v);
    }
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::RKEY, v);
    }
    pub fn set_swap_add(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::SWAP_ADD, v);
    }
    pub fn set_compare(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), field::COMPARE, v);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub rkey: u32,
    /// Swap value (compare-and-swap) or addend (fetch-and-add).
    pub swap_add: u64,
    /// Compare value (compare-and-swap only).
    pub compare: u64,
}

impl AtomicEthRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("AtomicETH", packet.buffer.as_ref(), ATOMIC_ETH_LEN)?;
        Ok(AtomicEthRepr {
            va: packet.va(),
            rkey: packet.rkey(),
            swap_add: packet.swap_add(),
            compare: packet.compare(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        ATOMIC_ETH_LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), ATOMIC_ETH_LEN)?;
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_swap_add(self.swap_add);
        packet.set_compare(self.compare);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets() {
        let r = AtomicEthRepr {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1112_1314,
            swap_add: 0x2122_2324_2526_2728,
            compare: 0x3132_3334_3536_3738,
        };
        let mut b = [0u8; 28];
        r.emit(&mut Packet::new_unchecked(&mut b[..])).unwrap();
        assert_eq!(b[0], 0x01);
        assert_eq!(b[8], 0x11);
        assert_eq!(b[12], 0x21);
        assert_eq!(b[20], 0x31);
        assert_eq!(b[27], 0x38);
        assert_eq!(
            AtomicEthRepr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Ok(r)
        );
        assert!(Packet::new_checked(&b[..27]).is_err());
    }
}
