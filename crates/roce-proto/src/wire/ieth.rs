//! Invalidate Extended Transport Header (IBTA vol. 1 §9.3.9): the R_Key to invalidate, 4 bytes.

use super::{check_len, check_room, get_u32, set_u32, Result};

/// IETH length in bytes.
pub const IETH_LEN: usize = 4;

/// A view of an IETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("IETH", buffer.as_ref(), IETH_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn rkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_rkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), 0, v);
    }
}

/// The R_Key to invalidate (`RoceHeaders::ieth` holds the bare `u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IethRepr {
    pub rkey: u32,
}

impl IethRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("IETH", packet.buffer.as_ref(), IETH_LEN)?;
        Ok(IethRepr {
            rkey: packet.rkey(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        IETH_LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), IETH_LEN)?;
        packet.set_rkey(self.rkey);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b = [0x12, 0x34, 0x56, 0x78];
        let r = IethRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.rkey, 0x1234_5678);
        let mut out = [0u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..3]).is_err());
    }
}
