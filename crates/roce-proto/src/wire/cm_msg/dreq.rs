//! Disconnect request, DREQ (IBTA vol. 1 §12.6.10): the two communication IDs, the receiver's
//! QPN and 220 bytes of private data.

use super::{read_array, read_u24, read_u32, write_u24, write_u32};
use crate::wire::mad::MAD_DATA_LEN;
use crate::wire::{check_len, check_room, Result};

/// Private data bytes of a DREQ.
pub const DREQ_PRIVATE_LEN: usize = 220;

/// DREQ field offsets in the attribute data (§12.6.10).
pub mod field {
    use core::ops::Range;
    pub const LOCAL_COMM_ID: Range<usize> = 0..4;
    pub const REMOTE_COMM_ID: Range<usize> = 4..8;
    /// Remote QPN/EECN.
    pub const REMOTE_QPN: Range<usize> = 8..11;
    pub const RESERVED_11: usize = 11;
    pub const PRIVATE_DATA: Range<usize> = 12..232;
}

const _: () = {
    use field::*;
    assert!(PRIVATE_DATA.end - PRIVATE_DATA.start == DREQ_PRIVATE_LEN);
    assert!(PRIVATE_DATA.end == MAD_DATA_LEN);
};

/// A view of a DREQ's attribute data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("CM DREQ", buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(Packet { buffer })
    }
    pub fn into_inner(self) -> T {
        self.buffer
    }
    pub fn local_comm_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::LOCAL_COMM_ID)
    }
    pub fn remote_comm_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REMOTE_COMM_ID)
    }
    pub fn remote_qpn(&self) -> u32 {
        read_u24(self.buffer.as_ref(), field::REMOTE_QPN)
    }
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Zeroes the reserved byte after the QPN.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED_11] = 0;
    }
    pub fn set_local_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, v);
    }
    pub fn set_remote_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, v);
    }
    pub fn set_remote_qpn(&mut self, v: u32) {
        write_u24(self.buffer.as_mut(), field::REMOTE_QPN, v);
    }
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// Disconnect request (§12.6.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DreqRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    /// 24 bits: the receiver's QPN.
    pub remote_qpn: u32,
    pub private_data: [u8; DREQ_PRIVATE_LEN],
}

impl DreqRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("CM DREQ", packet.buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(DreqRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            remote_qpn: packet.remote_qpn(),
            private_data: read_array(packet.buffer.as_ref(), field::PRIVATE_DATA),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        MAD_DATA_LEN
    }

    /// Writes all 232 bytes; the QPN is truncated to 24 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), MAD_DATA_LEN)?;
        packet.clear_reserved();
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_remote_qpn(self.remote_qpn);
        packet
            .private_data_mut()
            .copy_from_slice(&self.private_data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets() {
        let mut b = [0u8; MAD_DATA_LEN];
        b[..12].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0x12, 0x34, 0x56, 0]);
        b[12] = 0x86;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.local_comm_id(), p.remote_comm_id()), (1, 2));
        assert_eq!(p.remote_qpn(), 0x12_3456);
        assert_eq!(p.private_data()[0], 0x86);
        let r = DreqRepr::parse(&p).unwrap();
        let mut out = [0xffu8; MAD_DATA_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..MAD_DATA_LEN - 1]).is_err());
        assert!(DreqRepr::parse(&Packet::new_unchecked(&b[..8])).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..8])).is_err());
    }
}
