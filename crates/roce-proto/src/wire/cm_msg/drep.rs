//! Disconnect reply, DREP (IBTA vol. 1 §12.6.11): the answer to a DREQ, laid out as an RTU
//! (§12.6.9): the two communication IDs and 224 bytes of private data. Its view is RTU's
//! ([`super::rtu::Packet`]).

use super::rtu::{Packet, RTU_PRIVATE_LEN};
use crate::wire::Result;

/// Private data bytes of a DREP (an RTU's).
pub const DREP_PRIVATE_LEN: usize = RTU_PRIVATE_LEN;

/// Disconnect reply (§12.6.11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DrepRepr {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub private_data: [u8; DREP_PRIVATE_LEN],
}

impl DrepRepr {
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        let r = super::rtu::RtuRepr::parse(packet)?;
        Ok(DrepRepr {
            local_comm_id: r.local_comm_id,
            remote_comm_id: r.remote_comm_id,
            private_data: r.private_data,
        })
    }

    pub const fn buffer_len(&self) -> usize {
        crate::wire::mad::MAD_DATA_LEN
    }

    /// Writes all 232 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) -> Result<()> {
        super::rtu::RtuRepr {
            local_comm_id: self.local_comm_id,
            remote_comm_id: self.remote_comm_id,
            private_data: self.private_data,
        }
        .emit(packet)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::mad::MAD_DATA_LEN;

    #[test]
    fn round_trips_through_the_rtu_layout() {
        let mut b = [0u8; MAD_DATA_LEN];
        b[..8].copy_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        b[8] = 0x86;
        b[231] = 0x87;
        let r = DrepRepr::parse(&Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!((r.local_comm_id, r.remote_comm_id), (1, 2));
        let mut out = [0xffu8; MAD_DATA_LEN];
        r.emit(&mut Packet::new_unchecked(&mut out[..])).unwrap();
        assert_eq!(out, b);
        assert!(DrepRepr::parse(&Packet::new_unchecked(&b[..8])).is_err());
        assert!(r.emit(&mut Packet::new_unchecked(&mut out[..8])).is_err());
    }
}
