//! Immediate Data extended header (IBTA vol. 1 §9.3.8): 4 bytes, big-endian.

use super::{check_len, check_room, get_u32, set_u32, Result};

/// ImmDt length in bytes.
pub const IMMDT_LEN: usize = 4;

/// A view of an ImmDt header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("ImmDt", buffer.as_ref(), IMMDT_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn imm(&self) -> u32 {
        get_u32(self.buffer.as_ref(), 0)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_imm(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), 0, v);
    }
}

/// Immediate data (`RoceHeaders::imm_dt` holds the bare `u32`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ImmDtRepr {
    pub imm: u32,
}

impl ImmDtRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("ImmDt", packet.buffer.as_ref(), IMMDT_LEN)?;
        Ok(ImmDtRepr { imm: packet.imm() })
    }
    pub const fn buffer_len(&self) -> usize {
        IMMDT_LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), IMMDT_LEN)?;
        packet.set_imm(self.imm);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let b = [0x12, 0x34, 0x56, 0x78];
        let r = ImmDtRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(r.imm, 0x1234_5678);
        let mut out = [0u8; 4];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..3]).is_err());
    }
}
