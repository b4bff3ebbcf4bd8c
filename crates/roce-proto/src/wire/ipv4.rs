//! IPv4 header (RFC 791), header checksum (RFC 1071). Options are tolerated on parse (IHL > 5)
//! and never emitted. RoCEv2 sends DF set and no fragments.

use super::{check_len, check_room, get_u16, set_u16, Result, WireError};
use std::net::Ipv4Addr;

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// IP protocol number of UDP.
pub const IPPROTO_UDP: u8 = 17;

/// Offsets of the header fields.
pub mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// RFC 1071 one's-complement sum of `data` (odd length padded with a zero byte), not inverted.
/// Sums big-endian 32-bit words into a 64-bit accumulator and folds at the end (RFC 1071
/// §2(B): the sum is independent of the word size).
pub fn ones_complement_sum(data: &[u8], acc: u32) -> u16 {
    let mut sum = u64::from(acc);
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    match *words.remainder() {
        [a] => sum += u64::from(a) << 8,
        [a, b] => sum += u64::from(u16::from_be_bytes([a, b])),
        [a, b, c] => sum += u64::from(u16::from_be_bytes([a, b])) + (u64::from(c) << 8),
        _ => {}
    }
    fold(sum)
}

/// Folds a 64-bit one's-complement accumulator to 16 bits (end-around carries).
fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// True when the header checksum of an IPv4 header without options is correct: its five
/// 32-bit words sum to all ones (RFC 1071). The words are read in native (little-endian) byte
/// order: a byte-swapped one's-complement sum is the byte swap of the sum (RFC 1071 §2(B)), and
/// all ones is its own byte swap. Five words sum below 2^35, so three folds bring any sum to
/// 16 bits (a fold of a value below 2^16 leaves it as it is).
#[inline(always)]
pub fn header_checksum_ok(h: &[u8; HEADER_LEN]) -> bool {
    let w = |i: usize| u64::from(u32::from_le_bytes([h[i], h[i + 1], h[i + 2], h[i + 3]]));
    let mut sum = w(0) + w(4) + w(8) + w(12) + w(16);
    for _ in 0..3 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

/// A view of an IPv4 packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Fails if the buffer is shorter than 20 bytes or than the header length IHL announces.
    /// Version, IHL >= 5 and the total length are checked by [`Ipv4Repr::parse`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        let d = buffer.as_ref();
        check_len("IPv4 header", d, HEADER_LEN)?;
        let p = Packet { buffer };
        check_len("IPv4 options", p.buffer.as_ref(), p.header_len())?;
        Ok(p)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL x 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] >> 2
    }
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::TOS] & 0x03
    }
    pub fn total_len(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LENGTH)
    }
    pub fn ident(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::IDENT)
    }
    pub fn dont_frag(&self) -> bool {
        self.buffer.as_ref()[field::FLG_OFF] & 0x40 != 0
    }
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[field::FLG_OFF] & 0x20 != 0
    }
    /// Fragment offset in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff
    }
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn src_addr(&self) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }
    pub fn dst_addr(&self) -> Ipv4Addr {
        let d = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(d[0], d[1], d[2], d[3])
    }

    /// True when the header checksum is correct (header length must be in the buffer, as
    /// `new_checked` guarantees).
    pub fn verify_checksum(&self) -> bool {
        let d = self.buffer.as_ref();
        match d.get(..self.header_len()) {
            Some(h) if h.len() >= HEADER_LEN => ones_complement_sum(h, 0) == 0xffff,
            _ => false,
        }
    }

    /// The bytes after the header up to the total length (clamped to the buffer).
    pub fn payload(&self) -> &[u8] {
        let d = self.buffer.as_ref();
        let end = usize::from(self.total_len()).min(d.len());
        d.get(self.header_len()..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_version_and_header_len(&mut self, version: u8, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = (version << 4) | ((header_len / 4) as u8 & 0x0f);
    }
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::TOS] = (dscp << 2) | (ecn & 0x03);
    }
    pub fn set_total_len(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::LENGTH, v);
    }
    pub fn set_ident(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::IDENT, v);
    }
    /// Sets DF, clears MF and the fragment offset.
    pub fn set_unfragmented(&mut self, dont_frag: bool) {
        set_u16(
            self.buffer.as_mut(),
            field::FLG_OFF,
            if dont_frag { 0x4000 } else { 0 },
        );
    }
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&a.octets());
    }
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&a.octets());
    }

    /// Computes and stores the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self
            .header_len()
            .clamp(HEADER_LEN, self.buffer.as_ref().len());
        let sum = ones_complement_sum(&self.buffer.as_ref()[..hl], 0);
        self.set_checksum(!sum);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let hl = self.header_len();
        let end = usize::from(self.total_len()).min(self.buffer.as_ref().len());
        self.buffer.as_mut().get_mut(hl..end).unwrap_or(&mut [])
    }
}

/// High-level representation of an unfragmented IPv4 header. The total length is not kept:
/// `emit` takes the payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src_addr: Ipv4Addr,
    pub dst_addr: Ipv4Addr,
    pub protocol: u8,
    /// Differentiated services code point (6 bits).
    pub dscp: u8,
    /// Explicit congestion notification (2 bits).
    pub ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
    pub ttl: u8,
}

impl Ipv4Repr {
    /// Parses and validates: version 4, IHL >= 5, header length <= total length <= buffer,
    /// correct checksum, not a fragment.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Self> {
        let d = packet.buffer.as_ref();
        check_len("IPv4 header", d, HEADER_LEN)?;
        if packet.version() != 4 {
            return Err(WireError::BadValue("IPv4 version"));
        }
        let hl = packet.header_len();
        if hl < HEADER_LEN {
            return Err(WireError::BadValue("IPv4 header length"));
        }
        check_len("IPv4 options", d, hl)?;
        let total = usize::from(packet.total_len());
        if total < hl {
            return Err(WireError::BadValue("IPv4 total length"));
        }
        check_len("IPv4 packet", d, total)?;
        if !packet.verify_checksum() {
            return Err(WireError::BadValue("IPv4 header checksum"));
        }
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(WireError::BadValue("IPv4 fragment"));
        }
        Ok(Self::fields_of(packet))
    }

    /// The fields of a header without options (or the first 20 bytes of one) that the caller
    /// has already validated as [`parse`](Self::parse) does: no check here.
    #[inline(always)]
    pub(crate) fn from_header(h: &[u8; HEADER_LEN]) -> Self {
        let tos = h[field::TOS];
        Ipv4Repr {
            src_addr: Ipv4Addr::new(h[12], h[13], h[14], h[15]),
            dst_addr: Ipv4Addr::new(h[16], h[17], h[18], h[19]),
            protocol: h[field::PROTOCOL],
            dscp: tos >> 2,
            ecn: tos & 0x03,
            ident: u16::from_be_bytes([h[field::IDENT], h[field::IDENT + 1]]),
            dont_frag: h[field::FLG_OFF] & 0x40 != 0,
            ttl: h[field::TTL],
        }
    }

    /// The fields of a packet the caller has already validated as [`parse`](Self::parse)
    /// does: no check here.
    pub(crate) fn fields_of<T: AsRef<[u8]>>(packet: &Packet<T>) -> Self {
        Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            ttl: packet.ttl(),
        }
    }

    /// Header length emitted (no options).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header with total length `20 + payload_len` and its checksum.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        payload_len: usize,
    ) -> Result<()> {
        check_room(packet.buffer.as_ref(), HEADER_LEN)?;
        let total = u16::try_from(HEADER_LEN + payload_len)
            .map_err(|_| WireError::BadValue("IPv4 total length"))?;
        packet.set_version_and_header_len(4, HEADER_LEN);
        packet.set_dscp_ecn(self.dscp, self.ecn);
        packet.set_total_len(total);
        packet.set_ident(self.ident);
        packet.set_unfragmented(self.dont_frag);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 header of hw-hisilicon-rc-send.pcap frame 16 (an RC ACK).
    const HDR: [u8; 20] = [
        0x45, 0x02, 0x00, 0x30, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x2d, 0x60, 0xc0, 0xa8, 0x46,
        0x06, 0xc0, 0xa8, 0x46, 0x04,
    ];

    fn packet_bytes() -> [u8; 48] {
        let mut b = [0u8; 48];
        b[..20].copy_from_slice(&HDR);
        b
    }

    #[test]
    fn checksum_of_known_header() {
        let mut b = packet_bytes();
        let p = Packet::new_checked(&b[..]).unwrap();
        let cks = p.checksum();
        let repr = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(repr.src_addr, Ipv4Addr::new(192, 168, 70, 6));
        assert_eq!(repr.protocol, IPPROTO_UDP);
        assert!(repr.dont_frag);
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_checksum(0);
        p.fill_checksum();
        assert_eq!(p.checksum(), cks);
        repr.emit(&mut p, 28).unwrap();
        assert_eq!(&b[..20], &HDR);
    }

    #[test]
    fn rejects_bad_headers() {
        let mut b = packet_bytes();
        b[0] = 0x65;
        assert_eq!(
            Ipv4Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(WireError::BadValue("IPv4 version"))
        );
        let mut b = packet_bytes();
        b[11] ^= 1;
        assert_eq!(
            Ipv4Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(WireError::BadValue("IPv4 header checksum"))
        );
        let b = packet_bytes();
        assert!(Packet::new_checked(&b[..47])
            .and_then(|p| Ipv4Repr::parse(&p))
            .is_err());
        for n in 0..20 {
            assert!(Packet::new_checked(&b[..n]).is_err());
        }
    }

    /// The 32-bit-word sum equals the RFC 1071 16-bit-word sum for every length and tail.
    #[test]
    fn word_sum_matches_sixteen_bit_sum() {
        fn reference(data: &[u8], acc: u32) -> u16 {
            let mut acc = u64::from(acc);
            for c in data.chunks(2) {
                acc += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
            }
            while acc > 0xffff {
                acc = (acc & 0xffff) + (acc >> 16);
            }
            acc as u16
        }
        let data: Vec<u8> = (0..70u32).map(|i| (i * 97 + 13) as u8 | 0x80).collect();
        for n in 0..data.len() {
            for acc in [0, 1, 0xffff, 0x1_2345, u32::MAX >> 1] {
                assert_eq!(
                    ones_complement_sum(&data[..n], acc),
                    reference(&data[..n], acc),
                    "{n} {acc}"
                );
            }
        }
        assert_eq!(ones_complement_sum(&[0; 7], 0), 0);
        assert_eq!(ones_complement_sum(&[0xff; 8], 0), 0xffff);
        assert_eq!(ones_complement_sum(&[0xff; 9], 0), 0xff00);
        let mut b = packet_bytes();
        assert!(header_checksum_ok(&HDR));
        for i in 0..20 {
            b[..20].copy_from_slice(&HDR);
            b[i] ^= 0x10;
            let h: [u8; 20] = b[..20].try_into().unwrap();
            assert!(!header_checksum_ok(&h), "byte {i}");
        }
    }

    /// The native-order, fixed-fold header check agrees with the RFC 1071 sum for headers
    /// whose checksum is filled in, off by one bit, all zeros and all ones.
    #[test]
    fn header_check_agrees_with_the_sum() {
        let mut x: u32 = 0x1234_5678;
        for round in 0..20_000 {
            let mut h = [0u8; HEADER_LEN];
            for b in &mut h {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *b = x as u8;
            }
            match round % 4 {
                0 => {
                    let mut p = Packet::new_unchecked(&mut h[..]);
                    p.fill_checksum();
                }
                1 => {
                    let mut p = Packet::new_unchecked(&mut h[..]);
                    p.fill_checksum();
                    h[round % HEADER_LEN] ^= 1 << (round % 8);
                }
                _ => {}
            }
            assert_eq!(
                header_checksum_ok(&h),
                ones_complement_sum(&h, 0) == 0xffff,
                "{h:02x?}"
            );
        }
        assert!(!header_checksum_ok(&[0; HEADER_LEN]));
        assert!(header_checksum_ok(&[0xff; HEADER_LEN]));
    }

    #[test]
    fn options_tolerated() {
        // IHL 6 with one 4-byte option (NOPs), total 24.
        let mut b = [0u8; 24];
        b[..20].copy_from_slice(&HDR);
        b[0] = 0x46;
        b[2..4].copy_from_slice(&24u16.to_be_bytes());
        b[20..24].copy_from_slice(&[1, 1, 1, 0]);
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.fill_checksum();
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert!(Ipv4Repr::parse(&p).is_ok());
        assert_eq!(p.payload(), &[] as &[u8]);
    }
}
