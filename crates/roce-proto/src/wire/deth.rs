//! Datagram Extended Transport Header (IBTA vol. 1 §9.3.4): Q_Key 4, reserved 1, source QP 3.

use super::{check_len, check_room, get_u24, get_u32, set_u24, set_u32, Result};

/// DETH length in bytes.
pub const DETH_LEN: usize = 8;

/// Q_Key of the general services interface (QP1), used by CM MADs.
pub const GSI_QKEY: u32 = 0x8001_0000;

/// Offsets of the DETH fields.
pub mod field {
    pub const QKEY: usize = 0;
    pub const RESERVED: usize = 4;
    pub const SRC_QP: usize = 5;
}

/// A view of a DETH.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("DETH", buffer.as_ref(), DETH_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn qkey(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::QKEY)
    }
    pub fn src_qp(&self) -> u32 {
        get_u24(self.buffer.as_ref(), field::SRC_QP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_qkey(&mut self, v: u32) {
        set_u32(self.buffer.as_mut(), field::QKEY, v);
    }
    /// Writes the source QP and zeroes the reserved byte.
    pub fn set_src_qp(&mut self, v: u32) {
        self.buffer.as_mut()[field::RESERVED] = 0;
        set_u24(self.buffer.as_mut(), field::SRC_QP, v);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DethRepr {
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("DETH", packet.buffer.as_ref(), DETH_LEN)?;
        Ok(DethRepr {
            qkey: packet.qkey(),
            src_qp: packet.src_qp(),
        })
    }
    pub const fn buffer_len(&self) -> usize {
        DETH_LEN
    }
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), DETH_LEN)?;
        packet.set_qkey(self.qkey);
        packet.set_src_qp(self.src_qp);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cm_mad_deth() {
        let b = [0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];
        let r = DethRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!(
            r,
            DethRepr {
                qkey: GSI_QKEY,
                src_qp: 1
            }
        );
        let mut out = [0xffu8; 8];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..7]).is_err());
    }
}
