//! Disconnect reply, DREP (IBTA vol. 1 §12.6.11): the answer to a DREQ, laid out as an RTU
//! (`super::rtu`): the two communication IDs and 224 bytes of private data.

use super::{read_array, read_u32, write_u32};
use crate::wire::mad::MAD_DATA_LEN;
use crate::wire::{check_len, check_room, Result};

/// Private data bytes of a DREP.
pub const DREP_PRIVATE_LEN: usize = 224;

/// DREP field offsets in the attribute data (§12.6.11).
pub mod field {
    use core::ops::Range;
    pub const LOCAL_COMM_ID: Range<usize> = 0..4;
    pub const REMOTE_COMM_ID: Range<usize> = 4..8;
    pub const PRIVATE_DATA: Range<usize> = 8..232;
}

const _: () = {
    use field::*;
    assert!(PRIVATE_DATA.end - PRIVATE_DATA.start == DREP_PRIVATE_LEN);
    assert!(PRIVATE_DATA.end == MAD_DATA_LEN);
};

/// A view of a DREP's attribute data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("CM DREP", buffer.as_ref(), MAD_DATA_LEN)?;
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
    pub fn private_data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PRIVATE_DATA]
    }
}

/// Disconnect reply (§12.6.11): same layout as RTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub private_data: [u8; DREP_PRIVATE_LEN],
}

impl DrepRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        check_len("CM DREP", packet.buffer.as_ref(), MAD_DATA_LEN)?;
        Ok(DrepRepr {
            local_comm_id: packet.local_comm_id(),
            remote_comm_id: packet.remote_comm_id(),
            private_data: read_array(packet.buffer.as_ref(), field::PRIVATE_DATA),
        })
    }

    pub const fn buffer_len(&self) -> usize {
        MAD_DATA_LEN
    }

    /// Writes all 232 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        check_room(packet.buffer.as_ref(), MAD_DATA_LEN)?;
        packet.set_local_comm_id(self.local_comm_id);
        packet.set_remote_comm_id(self.remote_comm_id);
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
        b[..8].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        b[8] = 0x86;
        b[231] = 0x87;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.local_comm_id(), p.remote_comm_id()), (1, 2));
        assert_eq!((p.private_data()[0], p.private_data()[223]), (0x86, 0x87));
        let r = DrepRepr::parse(&p).unwrap();
        let mut out = [0xffu8; MAD_DATA_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(Packet::new_checked(&b[..MAD_DATA_LEN - 1]).is_err());
        assert!(DrepRepr::parse(&Packet::new_unchecked(&b[..8])).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..8])).is_err());
    }
}
