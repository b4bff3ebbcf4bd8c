//! The MAD common header (IBTA vol. 1 §13.4.2, "MAD format"), as used by the communication
//! manager (§12.6, management class 0x07, class version 2). A CM MAD is always 256 bytes:
//! this 24-byte header followed by 232 bytes of attribute data.

use thiserror::Error;

/// Total size of a MAD (IBTA vol. 1 §13.4.2).
pub const MAD_LEN: usize = 256;
/// Size of the common MAD header.
pub const MAD_HEADER_LEN: usize = 24;
/// Attribute data bytes after the header.
pub const MAD_DATA_LEN: usize = MAD_LEN - MAD_HEADER_LEN;

/// Base version of every MAD (§13.4.2).
pub const BASE_VERSION: u8 = 1;
/// Management class of the communication manager (§12.6 / Table 99 of §13.4.4).
pub const MGMT_CLASS_CM: u8 = 0x07;
/// CM class version (§12.6.1).
pub const CM_CLASS_VERSION: u8 = 2;
/// The only method CM messages use: `Send` (§12.6.1).
pub const METHOD_SEND: u8 = 0x03;

/// Why a MAD header could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum MadError {
    #[error("buffer too short for a MAD ({0} bytes)")]
    Truncated(usize),
}

/// Byte offsets of the common header fields.
mod field {
    use core::ops::Range;
    pub const BASE_VERSION: usize = 0;
    pub const MGMT_CLASS: usize = 1;
    pub const CLASS_VERSION: usize = 2;
    pub const METHOD: usize = 3;
    pub const STATUS: Range<usize> = 4..6;
    pub const CLASS_SPECIFIC: Range<usize> = 6..8;
    pub const TID: Range<usize> = 8..16;
    pub const ATTR_ID: Range<usize> = 16..18;
    pub const RESERVED: Range<usize> = 18..20;
    pub const ATTR_MOD: Range<usize> = 20..24;
}

/// A read-only or read/write view over a MAD (header plus data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap a buffer, checking that it holds a whole 256-byte MAD.
    pub fn new_checked(buffer: T) -> Result<Self, MadError> {
        let len = buffer.as_ref().len();
        if len < MAD_LEN {
            return Err(MadError::Truncated(len));
        }
        Ok(Packet { buffer })
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn base_version(&self) -> u8 {
        self.buffer.as_ref()[field::BASE_VERSION]
    }
    pub fn mgmt_class(&self) -> u8 {
        self.buffer.as_ref()[field::MGMT_CLASS]
    }
    pub fn class_version(&self) -> u8 {
        self.buffer.as_ref()[field::CLASS_VERSION]
    }
    pub fn method(&self) -> u8 {
        self.buffer.as_ref()[field::METHOD]
    }
    pub fn status(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::STATUS])
    }
    pub fn class_specific(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::CLASS_SPECIFIC])
    }
    pub fn transaction_id(&self) -> u64 {
        let b = &self.buffer.as_ref()[field::TID];
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        u64::from_be_bytes(a)
    }
    pub fn attribute_id(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::ATTR_ID])
    }
    pub fn reserved(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::RESERVED])
    }
    pub fn attribute_modifier(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::ATTR_MOD])
    }
    /// The 232 bytes of attribute data.
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[MAD_HEADER_LEN..MAD_LEN]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_base_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::BASE_VERSION] = v;
    }
    pub fn set_mgmt_class(&mut self, v: u8) {
        self.buffer.as_mut()[field::MGMT_CLASS] = v;
    }
    pub fn set_class_version(&mut self, v: u8) {
        self.buffer.as_mut()[field::CLASS_VERSION] = v;
    }
    pub fn set_method(&mut self, v: u8) {
        self.buffer.as_mut()[field::METHOD] = v;
    }
    pub fn set_status(&mut self, v: u16) {
        self.buffer.as_mut()[field::STATUS].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_class_specific(&mut self, v: u16) {
        self.buffer.as_mut()[field::CLASS_SPECIFIC].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_transaction_id(&mut self, v: u64) {
        self.buffer.as_mut()[field::TID].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_attribute_id(&mut self, v: u16) {
        self.buffer.as_mut()[field::ATTR_ID].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_reserved(&mut self, v: u16) {
        self.buffer.as_mut()[field::RESERVED].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_attribute_modifier(&mut self, v: u32) {
        self.buffer.as_mut()[field::ATTR_MOD].copy_from_slice(&v.to_be_bytes());
    }
    /// The 232 bytes of attribute data, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[MAD_HEADER_LEN..MAD_LEN]
    }
}

/// The common MAD header as values (§13.4.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MadHeader {
    pub base_version: u8,
    pub mgmt_class: u8,
    pub class_version: u8,
    pub method: u8,
    pub status: u16,
    pub class_specific: u16,
    pub transaction_id: u64,
    pub attribute_id: u16,
    pub reserved: u16,
    pub attribute_modifier: u32,
}

impl MadHeader {
    /// A CM `Send` header for `attribute_id` with transaction ID `tid`.
    pub const fn cm(attribute_id: u16, tid: u64) -> Self {
        MadHeader {
            base_version: BASE_VERSION,
            mgmt_class: MGMT_CLASS_CM,
            class_version: CM_CLASS_VERSION,
            method: METHOD_SEND,
            status: 0,
            class_specific: 0,
            transaction_id: tid,
            attribute_id,
            reserved: 0,
            attribute_modifier: 0,
        }
    }

    /// Read every header field; no value is checked here.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> MadHeader {
        MadHeader {
            base_version: p.base_version(),
            mgmt_class: p.mgmt_class(),
            class_version: p.class_version(),
            method: p.method(),
            status: p.status(),
            class_specific: p.class_specific(),
            transaction_id: p.transaction_id(),
            attribute_id: p.attribute_id(),
            reserved: p.reserved(),
            attribute_modifier: p.attribute_modifier(),
        }
    }

    /// Write every header field.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut Packet<T>) {
        p.set_base_version(self.base_version);
        p.set_mgmt_class(self.mgmt_class);
        p.set_class_version(self.class_version);
        p.set_method(self.method);
        p.set_status(self.status);
        p.set_class_specific(self.class_specific);
        p.set_transaction_id(self.transaction_id);
        p.set_attribute_id(self.attribute_id);
        p.set_reserved(self.reserved);
        p.set_attribute_modifier(self.attribute_modifier);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let h = MadHeader::cm(0x0013, 0x0000_0002_b908_66ac);
        let mut buf = [0u8; MAD_LEN];
        h.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..4], &[1, 7, 2, 3]);
        assert_eq!(&buf[8..16], &[0, 0, 0, 2, 0xb9, 0x08, 0x66, 0xac]);
        assert_eq!(&buf[16..18], &[0x00, 0x13]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(MadHeader::parse(&p), h);
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Packet::new_checked(&[0u8; 255][..]).unwrap_err(),
            MadError::Truncated(255)
        );
    }
}
