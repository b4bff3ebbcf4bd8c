//! Message receipt acknowledgement, MRA (IBTA vol. 1 §12.6.6): "your message arrived, the
//! answer will take longer", which message and how long, and 222 bytes of private data.

use super::{read_array, read_u32, write_u32, MsgRef};
use crate::wire::mad::MAD_DATA_LEN;
use crate::wire::{check_len, check_room, Result};

/// Private data bytes of an MRA.
pub const MRA_PRIVATE_LEN: usize = 222;

/// MRA field offsets in the attribute data (§12.6.6).
pub mod field {
    use core::ops::Range;
    pub const LOCAL_COMM_ID: Range<usize> = 0..4;
    pub const REMOTE_COMM_ID: Range<usize> = 4..8;
    /// Message MRAed[7:6], reserved[5:0].
    pub const MSG_MRAED: usize = 8;
    /// Service timeout[7:3], reserved[2:0].
    pub const SERVICE_TIMEOUT: usize = 9;
    pub const PRIVATE_DATA: Range<usize> = 10..232;
}

const _: () = {
    use field::*;
    assert!(PRIVATE_DATA.end - PRIVATE_DATA.start == MRA_PRIVATE_LEN);
    assert!(PRIVATE_DATA.end == MAD_DATA_LEN);
};

/// A view of an MRA's attribute data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("CM MRA", buffer.as_ref(), MAD_DATA_LEN)?;
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
    pub fn msg_mraed(&self) -> MsgRef {
        MsgRef::from_bits(self.buffer.as_ref()[field::MSG_MRAED] >> 6)
    }
    /// 5 bits.
    pub fn service_timeout(&self) -> u8 {
        self.buffer.as_ref()[field::SERVICE_TIMEOUT] >> 3
    }
    pub fn private_data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PRIVATE_DATA]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_local_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::LOCAL_COMM_ID, v);
    }
    pub fn set_remote_comm_id(&mut self, v: u32) {
        write_u32(self.buffer.as_mut(), field::REMOTE_COMM_ID, v);
    }
    /// Writes byte 8 whole (reserved bits zero).
    pub fn set_msg_mraed(&mut self, v: MsgRef) {
        self.buffer.as_mut()[field::MSG_MRAED] = v.bits() << 6;
    }
    /// Writes byte 9 whole: the 5-bit timeout, reserved bits zero.
    pub fn set_service_timeout(&mut self, v: u8) {
        self.buffer.as_mut()[field::SERVICE_TIMEOUT] = (v & 0x1f) << 3;
    }
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// Message receipt acknowledgement (§12.6.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MraRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub msg_mraed: MsgRef,
    /// 5 bits: the sender will answer within 4.096 us * 2^t.
    pub service_timeout: u8,
    pub private_data: [u8; MRA_PRIVATE_LEN],
}

impl MraRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("CM MRA", packet.buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(MraRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            msg_mraed: packet.msg_mraed(),
            service_timeout: packet.service_timeout(),
            private_data: read_array(packet.buffer.as_ref(), field::PRIVATE_DATA),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        MAD_DATA_LEN
    }

    /// Writes all 232 bytes; the service timeout is truncated to 5 bits.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), MAD_DATA_LEN)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
        packet.set_msg_mraed(self.msg_mraed);
        packet.set_service_timeout(self.service_timeout);
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
        b[..10].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0x40, 24 << 3]);
        b[10] = 0x86;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.local_comm_id(), p.remote_comm_id()), (1, 2));
        assert_eq!(p.msg_mraed(), MsgRef::Rep);
        assert_eq!(p.service_timeout(), 24);
        assert_eq!(p.private_data()[0], 0x86);
        let r = MraRepr::parse(&p).unwrap();
        let mut out = [0xffu8; MAD_DATA_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..MAD_DATA_LEN - 1]).is_err());
        assert!(MraRepr::parse(&Packet::new_unchecked(&b[..8])).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..8])).is_err());
    }
}
