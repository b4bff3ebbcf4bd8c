//! Atomic ACK Extended Transport Header (IBTA vol. 1 §9.3.7): original remote data, 8 bytes.

use super::{check_len, check_room, get_u64, set_u64, Result};

/// AtomicAckETH length in bytes.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;

/// A view of an AtomicAckETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("AtomicAckETH", buffer.as_ref(), ATOMIC_ACK_ETH_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn orig_data(&self) -> u64 {
        get_u64(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_orig_data(&mut self, v: u64) {
        set_u64(self.buffer.as_mut(), 0, v);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct AtomicAckEthRepr {
    pub orig_data: u64,
}

impl AtomicAckEthRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("AtomicAckETH", packet.buffer.as_ref(), ATOMIC_ACK_ETH_LEN)?;
        Ok(AtomicAckEthRepr {
            orig_data: packet.orig_data(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        ATOMIC_ACK_ETH_LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), ATOMIC_ACK_ETH_LEN)?;
        packet.set_orig_data(self.orig_data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b = [1, 2, 3, 4, 5, 6, 7, 8];
        let r = AtomicAckEthRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.orig_data, 0x0102_0304_0506_0708);
        let mut out = [0u8; 8];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..7]).is_err());
    }
}
