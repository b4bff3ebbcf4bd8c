//! Invariant CRC of RoCEv2 (IBTA vol. 1 annex A17.3.3; docs/REFERENCE-rocev2.md "ICRC").
//!
//! CRC-32 (zlib's) over 8 bytes of 0xFF standing in for the IB LRH, then the IPv4 header, UDP
//! header, BTH, extension headers, payload and pad, with the variant fields set to all ones:
//! IPv4 TOS, TTL and header checksum, UDP checksum, BTH byte 4 (FECN/BECN/reserved). The result
//! is stored little-endian after the pad. Nothing is copied except the masked headers, which go
//! through a small stack array.
//!
//! Over IPv6 (annex A17.4.1 and Linux's `rxe_icrc.c`, `rxe_icrc_hdr`) the IPv6 header takes the
//! IPv4 header's place, with its traffic class, flow label and hop limit set to all ones (the
//! version nibble, payload length, next header and addresses are kept); the UDP checksum and
//! BTH byte 4 are masked as over IPv4 ([`icrc6_parts`], [`IcrcHasher::update_headers_v6`]).

use super::bth::BTH_LEN;
use super::{check_len, ipv4, ipv6, udp, Result, WireError};

/// ICRC length on the wire.
pub const ICRC_LEN: usize = 4;

/// Longest masked prefix: IPv4 header with options (60) + UDP (8) + BTH (12).
const MAX_MASKED: usize = 60 + udp::HEADER_LEN + BTH_LEN;

/// Bytes after the BTH that `update_headers` hashes together with the masked headers.
const INLINE_REST: usize = 160;

/// IPv4 (no options), UDP and BTH headers: the masked prefix of a packet without IP options.
const PLAIN_HEAD: usize = ipv4::HEADER_LEN + udp::HEADER_LEN + BTH_LEN;

/// Packets without IP options up to this long are hashed from one fixed stack copy.
const SHORT_COPY: usize = 128;

/// The ICRC's variant bytes of a packet without IP options (all below `PLAIN_HEAD`): IPv4 TOS,
/// TTL, header checksum, UDP checksum, BTH byte 4.
const PLAIN_SPOTS: [usize; 7] = [
    ipv4::field::TOS,
    ipv4::field::TTL,
    ipv4::field::CHECKSUM,
    ipv4::field::CHECKSUM + 1,
    ipv4::HEADER_LEN + udp::field::CHECKSUM,
    ipv4::HEADER_LEN + udp::field::CHECKSUM + 1,
    ipv4::HEADER_LEN + udp::HEADER_LEN + super::bth::field::FECN_BECN,
];

/// CRC-32 state after the 8 bytes of 0xFF that stand for the masked LRH (RoCEv2, IBTA
/// Annex A17.3.3): `crc32fast::hash(&[0xff; 8])`.
const CRC_OF_EIGHT_FF: u32 = 0x2144_df1c;

/// A CRC-32 hasher that has consumed the 8 bytes of 0xFF. crc32fast detects the CPU's
/// features in every constructor; this detects them once and clones the state.
fn seeded_crc() -> crc32fast::Hasher {
    static SEEDED: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    SEEDED
        .get_or_init(|| crc32fast::Hasher::new_with_initial_len(CRC_OF_EIGHT_FF, 8))
        .clone()
}

/// Incremental ICRC: feed the IPv4/UDP/BTH headers once with [`IcrcHasher::update_headers`],
/// then any number of further slices (extension headers, payload segments, pad).
#[derive(Clone, Debug)]
pub struct IcrcHasher {
    crc: crc32fast::Hasher,
}

impl Default for IcrcHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl IcrcHasher {
    /// A hasher that has consumed the 8 bytes of 0xFF.
    pub fn new() -> Self {
        IcrcHasher { crc: seeded_crc() }
    }

    /// Feeds `bytes`, which must start with an IP header, the UDP header and the BTH, with the
    /// variant fields masked; bytes after the BTH are fed as they are. The version nibble
    /// chooses the family: 6 is [`update_headers_v6`](Self::update_headers_v6), anything else
    /// an IPv4 header (IHL taken from byte 0). Fails if the IHL is below 5 or `bytes` is
    /// shorter than the three headers.
    #[inline]
    pub fn update_headers(&mut self, bytes: &[u8]) -> Result<()> {
        check_len("IPv4 header", bytes, ipv4::HEADER_LEN)?;
        if bytes[0] >> 4 == 6 {
            return self.update_headers_v6(bytes);
        }
        let ihl = usize::from(bytes[0] & 0x0f) * 4;
        self.update_masked(bytes, ihl)
    }

    /// Feeds `bytes`, which must start with an IPv6 fixed header (no extension header: RoCEv2
    /// carries none), the UDP header and the BTH, with the variant fields masked (traffic
    /// class, flow label, hop limit, UDP checksum, BTH byte 4); bytes after the BTH are fed as
    /// they are. Fails if the version is not 6 or `bytes` is shorter than the three headers.
    pub fn update_headers_v6(&mut self, bytes: &[u8]) -> Result<()> {
        let Some((head, rest)) = bytes.split_first_chunk::<V6_HEAD>() else {
            return Err(WireError::Truncated {
                what: "IPv6/UDP/BTH headers",
                need: V6_HEAD,
                have: bytes.len(),
            });
        };
        if head[0] >> 4 != 6 {
            return Err(WireError::BadValue("IPv6 version"));
        }
        let mut m = *head;
        mask_v6(&mut m);
        self.crc.update(&m);
        self.crc.update(rest);
        Ok(())
    }

    /// [`update_headers`](Self::update_headers) with the IPv4 header length in bytes (IHL x 4)
    /// already read from byte 0 of `bytes` by the caller.
    #[inline(always)]
    fn update_masked(&mut self, bytes: &[u8], ihl: usize) -> Result<()> {
        if ihl < ipv4::HEADER_LEN {
            return Err(WireError::BadValue("IPv4 header length"));
        }
        check_len(
            "IPv4/UDP/BTH headers",
            bytes,
            ihl + udp::HEADER_LEN + BTH_LEN,
        )?;
        // Short frames (ACKs, small requests) are hashed in one call over one stack copy:
        // crc32fast's per-call cost dominates at these lengths. Without IP options (the usual
        // case) the masked spots sit at fixed offsets and the copy is a small fixed array,
        // sized to the frame so that little of it is zeroed first.
        if ihl == ipv4::HEADER_LEN && bytes.len() <= SHORT_COPY / 2 {
            hash_short::<{ SHORT_COPY / 2 }, { SHORT_COPY / 4 }>(&mut self.crc, bytes);
        } else if ihl == ipv4::HEADER_LEN && bytes.len() <= SHORT_COPY {
            hash_short::<SHORT_COPY, { SHORT_COPY / 2 }>(&mut self.crc, bytes);
        } else {
            self.update_long(bytes, ihl);
        }
        Ok(())
    }

    /// The rest of [`update_masked`](Self::update_masked): IP options or more than
    /// `SHORT_COPY` bytes. `ihl >= 20` and `bytes` holds the IPv4, UDP and BTH headers.
    #[inline(never)]
    fn update_long(&mut self, bytes: &[u8], ihl: usize) {
        let n = ihl + udp::HEADER_LEN + BTH_LEN;
        let (head, rest) = bytes.split_at(n.min(bytes.len()));
        let mut buf = [0u8; MAX_MASKED + INLINE_REST];
        let whole = rest.len() <= INLINE_REST;
        let m = &mut buf[..if whole { n + rest.len() } else { n }];
        m[..n].copy_from_slice(head);
        if whole {
            m[n..].copy_from_slice(rest);
        }
        m[ipv4::field::TOS] = 0xff;
        m[ipv4::field::TTL] = 0xff;
        m[ipv4::field::CHECKSUM..ipv4::field::CHECKSUM + 2].fill(0xff);
        let u = ihl + udp::field::CHECKSUM;
        m[u..u + 2].fill(0xff);
        m[ihl + udp::HEADER_LEN + super::bth::field::FECN_BECN] = 0xff;
        self.crc.update(m);
        if !whole {
            self.crc.update(rest);
        }
    }

    /// Feeds bytes unmasked.
    pub fn update(&mut self, data: &[u8]) {
        self.crc.update(data);
    }

    /// The ICRC value (write it with `to_le_bytes`).
    pub fn finalize(self) -> u32 {
        self.crc.finalize()
    }
}

/// Hashes `src` (`HALF..=N` bytes of an IPv4 packet without options, at least `PLAIN_HEAD`)
/// with the variant bytes masked, from a copy in an `N`-byte stack array. Two fixed-size
/// copies that overlap in the middle (the first and the last `HALF` bytes) cover every such
/// length without a call to `memcpy`.
#[inline(always)]
fn hash_short<const N: usize, const HALF: usize>(crc: &mut crc32fast::Hasher, src: &[u8]) {
    let mut buf = [0u8; N];
    let masked = copy_ends::<HALF>(&mut buf, src);
    for i in PLAIN_SPOTS {
        if let Some(b) = masked.get_mut(i) {
            *b = 0xff;
        }
    }
    crc.update(masked);
}

/// The ICRC of `ip_to_pad` (IPv4 header through the pad) whose IPv4 header is `ihl` bytes long
/// (IHL x 4, read from byte 0 by the caller): `icrc_parts(ip_to_pad, &[])` without reading the
/// IHL again. Fails as [`IcrcHasher::update_headers`] does.
#[inline(always)]
pub(crate) fn icrc_with_ihl(ip_to_pad: &[u8], ihl: usize) -> Result<u32> {
    let mut h = IcrcHasher::new();
    h.update_masked(ip_to_pad, ihl)?;
    Ok(h.finalize())
}

/// Copies `src`, `N..=dst.len()` bytes long, to the start of `dst` as its first `N` and its last
/// `N` bytes (all of it when `src` is at most `2 * N` long); returns `dst[..src.len()]`.
#[inline(always)]
fn copy_ends<'d, const N: usize>(dst: &'d mut [u8], src: &[u8]) -> &'d mut [u8] {
    let dst = dst.get_mut(..src.len()).unwrap_or_default();
    if let (Some(d), Some(s)) = (dst.first_chunk_mut::<N>(), src.first_chunk::<N>()) {
        *d = *s;
    }
    if let (Some(d), Some(s)) = (dst.last_chunk_mut::<N>(), src.last_chunk::<N>()) {
        *d = *s;
    }
    dst
}

/// ICRC of a packet being built in `ip_to_pad` (the IP header through the pad, as
/// [`icrc_parts`] takes it), hashed in place with one call: the variant fields are set to all
/// ones, hashed, and put back as they were. Same result as `icrc_parts(ip_to_pad, &[])`, without
/// its stack copy. The version nibble chooses the family, as in
/// [`IcrcHasher::update_headers`].
pub fn icrc_in_place(ip_to_pad: &mut [u8]) -> Result<u32> {
    check_len("IPv4 header", ip_to_pad, ipv4::HEADER_LEN)?;
    if ip_to_pad[0] >> 4 == 6 {
        return icrc6_in_place(ip_to_pad);
    }
    let ihl = usize::from(ip_to_pad[0] & 0x0f) * 4;
    if ihl < ipv4::HEADER_LEN {
        return Err(WireError::BadValue("IPv4 header length"));
    }
    check_len(
        "IPv4/UDP/BTH headers",
        ip_to_pad,
        ihl + udp::HEADER_LEN + BTH_LEN,
    )?;
    // Without IP options the spots are at fixed offsets: keep the whole prefix and put it back.
    if ihl == ipv4::HEADER_LEN {
        if let Some(head) = ip_to_pad.first_chunk_mut::<PLAIN_HEAD>() {
            let saved = *head;
            for i in PLAIN_SPOTS {
                head[i] = 0xff;
            }
            let mut crc = seeded_crc();
            crc.update(ip_to_pad);
            if let Some(head) = ip_to_pad.first_chunk_mut::<PLAIN_HEAD>() {
                *head = saved;
            }
            return Ok(crc.finalize());
        }
    }
    let u = ihl + udp::field::CHECKSUM;
    let b = ihl + udp::HEADER_LEN + super::bth::field::FECN_BECN;
    let spots = [
        ipv4::field::TOS,
        ipv4::field::TTL,
        ipv4::field::CHECKSUM,
        ipv4::field::CHECKSUM + 1,
        u,
        u + 1,
        b,
    ];
    let saved = spots.map(|i| core::mem::replace(&mut ip_to_pad[i], 0xff));
    let mut crc = seeded_crc();
    crc.update(ip_to_pad);
    for (i, v) in spots.into_iter().zip(saved) {
        ip_to_pad[i] = v;
    }
    Ok(crc.finalize())
}

/// ICRC over `ip_udp_bth_and_ext` (IP header through the extension headers, or further; IPv4
/// or IPv6 by the version nibble) and then each of `payload_parts` in order (payload segments
/// and pad).
pub fn icrc_parts(ip_udp_bth_and_ext: &[u8], payload_parts: &[&[u8]]) -> Result<u32> {
    let mut h = IcrcHasher::new();
    h.update_headers(ip_udp_bth_and_ext)?;
    for p in payload_parts {
        h.update(p);
    }
    Ok(h.finalize())
}

/// ICRC of a complete Ethernet/IPv4 RoCEv2 frame: over the IP packet as its total length gives
/// it, minus the trailing 4 ICRC bytes. Returns `(computed, stored)`. An IPv6 packet (version
/// 6) is [`icrc6_frame`]'s.
pub fn icrc_frame(frame: &[u8]) -> Result<(u32, u32)> {
    const ETH: usize = super::ethernet::HEADER_LEN;
    check_len("IPv4 header", frame, ETH + ipv4::HEADER_LEN)?;
    if frame[ETH] >> 4 == 6 {
        return icrc6_frame(frame);
    }
    let total = usize::from(u16::from_be_bytes([frame[ETH + 2], frame[ETH + 3]]));
    check_len("IPv4 packet", frame, ETH + total)?;
    let ip = &frame[ETH..ETH + total];
    let body_len = total
        .checked_sub(ICRC_LEN)
        .ok_or(WireError::BadValue("IPv4 total length"))?;
    let (body, tail) = ip.split_at(body_len);
    let computed = icrc_parts(body, &[])?;
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    Ok((computed, stored))
}

/// IPv6 (no extension headers), UDP and BTH headers: the masked prefix of a RoCEv2/IPv6 packet.
pub const V6_HEAD: usize = ipv6::HEADER_LEN + udp::HEADER_LEN + BTH_LEN;

/// Sets the ICRC's variant fields of an IPv6/UDP/BTH prefix to all ones: the traffic class and
/// flow label (the low nibble of byte 0 and bytes 1 to 3: the version nibble is kept), the hop
/// limit, the UDP checksum and BTH byte 4.
fn mask_v6(m: &mut [u8; V6_HEAD]) {
    m[0] |= 0x0f;
    m[1..4].fill(0xff);
    m[ipv6::field::HOP_LIMIT] = 0xff;
    let u = ipv6::HEADER_LEN + udp::field::CHECKSUM;
    m[u..u + 2].fill(0xff);
    m[ipv6::HEADER_LEN + udp::HEADER_LEN + super::bth::field::FECN_BECN] = 0xff;
}

/// [`icrc_in_place`] over IPv6: the masked prefix (IPv6, UDP and BTH headers at fixed offsets,
/// RoCEv2 carries no extension header) is saved, masked as [`mask_v6`] does, hashed with the
/// rest in one call, and put back.
fn icrc6_in_place(ip_to_pad: &mut [u8]) -> Result<u32> {
    let have = ip_to_pad.len();
    let Some(head) = ip_to_pad.first_chunk_mut::<V6_HEAD>() else {
        return Err(WireError::Truncated {
            what: "IPv6/UDP/BTH headers",
            need: V6_HEAD,
            have,
        });
    };
    let saved = *head;
    mask_v6(head);
    let mut crc = seeded_crc();
    crc.update(ip_to_pad);
    if let Some(head) = ip_to_pad.first_chunk_mut::<V6_HEAD>() {
        *head = saved;
    }
    Ok(crc.finalize())
}

/// ICRC over `ip6_udp_bth_and_ext` (IPv6 header through the extension headers, or further) and
/// then each of `payload_parts` in order (payload segments and pad): [`icrc_parts`] over IPv6.
pub fn icrc6_parts(ip6_udp_bth_and_ext: &[u8], payload_parts: &[&[u8]]) -> Result<u32> {
    let mut h = IcrcHasher::new();
    h.update_headers_v6(ip6_udp_bth_and_ext)?;
    for p in payload_parts {
        h.update(p);
    }
    Ok(h.finalize())
}

/// ICRC of a complete Ethernet/IPv6 RoCEv2 frame: over the IPv6 packet as its payload length
/// gives it, minus the trailing 4 ICRC bytes. Returns `(computed, stored)`.
pub fn icrc6_frame(frame: &[u8]) -> Result<(u32, u32)> {
    const ETH: usize = super::ethernet::HEADER_LEN;
    check_len("IPv6 header", frame, ETH + ipv6::HEADER_LEN)?;
    let at = ETH + ipv6::field::PAYLOAD_LEN;
    let payload = usize::from(u16::from_be_bytes([frame[at], frame[at + 1]]));
    let total = ipv6::HEADER_LEN + payload;
    check_len("IPv6 packet", frame, ETH + total)?;
    let ip = &frame[ETH..ETH + total];
    let body_len = total
        .checked_sub(ICRC_LEN)
        .filter(|&n| n >= ipv6::HEADER_LEN)
        .ok_or(WireError::BadValue("IPv6 payload length"))?;
    let (body, tail) = ip.split_at(body_len);
    let computed = icrc6_parts(body, &[])?;
    let stored = u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]);
    Ok((computed, stored))
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::wire::frame::fixtures::FRAME16;

    /// The masked CRC input the reference spells out for that frame.
    const REFERENCE_INPUT: [u8; 52] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x45, 0xff, 0x00, 0x30, 0x00, 0x00, 0x40,
        0x00, 0xff, 0x11, 0xff, 0xff, 0xc0, 0xa8, 0x46, 0x06, 0xc0, 0xa8, 0x46, 0x04, 0x00, 0x48,
        0x12, 0xb7, 0x00, 0x1c, 0xff, 0xff, 0x11, 0x40, 0xff, 0xff, 0xff, 0x00, 0x00, 0x45, 0x00,
        0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x01,
    ];

    #[test]
    fn eight_ff_state_is_the_crc_of_eight_ff() {
        assert_eq!(crc32fast::hash(&[0xff; 8]), CRC_OF_EIGHT_FF);
    }

    #[test]
    fn reference_worked_vector() {
        assert_eq!(crc32fast::hash(&REFERENCE_INPUT), 0x16c2_9c25);
        let (computed, stored) = icrc_frame(&FRAME16).unwrap();
        assert_eq!(computed, 0x16c2_9c25);
        assert_eq!(stored, 0x16c2_9c25);
        assert_eq!(computed.to_le_bytes(), [0x25, 0x9c, 0xc2, 0x16]);
    }

    #[test]
    fn parts_and_incremental_agree() {
        let ip = &FRAME16[14..58];
        // Split after the headers at every point: the same CRC.
        let whole = icrc_parts(ip, &[]).unwrap();
        for cut in 40..=ip.len() {
            let (a, b) = ip.split_at(cut);
            assert_eq!(icrc_parts(a, &[b]).unwrap(), whole);
            let mid = cut + (ip.len() - cut) / 2;
            let mut h = IcrcHasher::new();
            h.update_headers(a).unwrap();
            h.update(&ip[cut..mid]);
            h.update(&ip[mid..]);
            assert_eq!(h.finalize(), whole);
        }
    }

    /// Rests longer and shorter than the inline copy hash the same as a plain CRC over the
    /// masked bytes.
    #[test]
    fn long_and_short_rests_agree_with_the_masked_crc() {
        let head = &FRAME16[14..14 + 40];
        for rest_len in [
            0,
            1,
            SHORT_COPY - PLAIN_HEAD - 1,
            SHORT_COPY - PLAIN_HEAD,
            SHORT_COPY - PLAIN_HEAD + 1,
            INLINE_REST - 1,
            INLINE_REST,
            INLINE_REST + 1,
            1500,
        ] {
            let mut ip = head.to_vec();
            ip.extend((0..rest_len).map(|i| (i * 7) as u8));
            let want = reference_icrc(&ip, [1, 8, 10, 11, 26, 27, 32]);
            assert_eq!(icrc_parts(&ip, &[]).unwrap(), want, "rest {rest_len}");
            let (a, b) = ip.split_at(40);
            assert_eq!(icrc_parts(a, &[b]).unwrap(), want, "rest {rest_len} split");
        }
    }

    /// The short path's two overlapping fixed copies reproduce every length it takes
    /// (`PLAIN_HEAD..=SHORT_COPY`, in a 64- or a 128-byte array), and its hash equals the general
    /// path's.
    #[test]
    fn short_copy_covers_every_length() {
        let src: Vec<u8> = (0..SHORT_COPY).map(|i| (i * 13 + 1) as u8).collect();
        for n in PLAIN_HEAD..=SHORT_COPY {
            let mut small = [0u8; SHORT_COPY / 2];
            let mut large = [0u8; SHORT_COPY];
            let copied = if n <= SHORT_COPY / 2 {
                copy_ends::<{ SHORT_COPY / 4 }>(&mut small, &src[..n])
            } else {
                copy_ends::<{ SHORT_COPY / 2 }>(&mut large, &src[..n])
            };
            assert_eq!(copied, &src[..n], "{n}");
            let mut ip = FRAME16[14..54].to_vec();
            ip.extend_from_slice(&src[..n - PLAIN_HEAD]);
            let want = reference_icrc(&ip, [1, 8, 10, 11, 26, 27, 32]);
            assert_eq!(icrc_parts(&ip, &[]), Ok(want), "{n}");
            assert_eq!(icrc_with_ihl(&ip, 20), Ok(want), "{n}");
        }
    }

    /// The ICRC by its definition: CRC-32 over eight 0xFF bytes and `ip` with the variant bytes
    /// at `spots` (offsets in `ip`) set to 0xFF.
    fn reference_icrc(ip: &[u8], spots: [usize; 7]) -> u32 {
        let mut masked = vec![0xffu8; 8];
        masked.extend_from_slice(ip);
        for i in spots {
            masked[8 + i] = 0xff;
        }
        crc32fast::hash(&masked)
    }

    /// The in-place hash equals the copying one and leaves the bytes as they were.
    #[test]
    fn in_place_agrees_and_restores() {
        let mut ip = FRAME16[14..58].to_vec();
        for rest_len in [0, 3, INLINE_REST + 9] {
            ip.truncate(44);
            ip.extend((0..rest_len).map(|i| (i * 5) as u8));
            let before = ip.clone();
            assert_eq!(
                icrc_in_place(&mut ip),
                icrc_parts(&before, &[]),
                "{rest_len}"
            );
            assert_eq!(ip, before);
        }
        assert_eq!(icrc_in_place(&mut ip[..39]).ok(), None);
        let mut ihl4 = FRAME16[14..58].to_vec();
        ihl4[0] = 0x44;
        assert_eq!(icrc_in_place(&mut ihl4).ok(), None);
    }

    /// With IP options (IHL 6) the masked spots move by 4 bytes; every path agrees with a plain
    /// CRC over the masked bytes.
    #[test]
    fn ip_options_move_the_masked_spots() {
        let mut ip = FRAME16[14..14 + 20].to_vec();
        ip[0] = 0x46;
        ip.extend_from_slice(&[1, 1, 1, 0]);
        ip.extend_from_slice(&FRAME16[14 + 20..58]);
        for rest_len in [0, 5, 200] {
            ip.truncate(48);
            ip.extend((0..rest_len).map(|i| (i * 3) as u8));
            let want = reference_icrc(&ip, [1, 8, 10, 11, 30, 31, 36]);
            assert_eq!(icrc_parts(&ip, &[]), Ok(want), "{rest_len}");
            let before = ip.clone();
            assert_eq!(icrc_in_place(&mut ip), Ok(want), "{rest_len}");
            assert_eq!(ip, before);
        }
    }

    #[test]
    fn masked_fields_do_not_matter_others_do() {
        let ip = &FRAME16[14..58];
        let whole = icrc_parts(ip, &[]).unwrap();
        for i in 0..ip.len() {
            let mut b = [0u8; 44];
            b.copy_from_slice(ip);
            b[i] ^= 0x01;
            let masked = matches!(i, 1 | 8 | 10 | 11 | 26 | 27 | 32);
            // (Byte 0 flips the IHL to 4: an error, not a CRC.)
            assert_eq!(icrc_parts(&b, &[]).ok() == Some(whole), masked, "byte {i}");
        }
    }

    #[test]
    fn short_input_is_an_error() {
        let ip = &FRAME16[14..58];
        for n in 0..40 {
            assert!(icrc_parts(&ip[..n], &[]).is_err(), "{n}");
        }
        for n in 0..FRAME16.len() {
            assert!(icrc_frame(&FRAME16[..n]).is_err(), "{n}");
        }
    }

    /// The ICRC over IPv6 by its definition (annex A17.4.1, rxe_icrc.c's `rxe_icrc_hdr`):
    /// CRC-32 over eight 0xFF bytes and the IPv6 packet with the traffic class and flow label
    /// (the low nibble of byte 0, bytes 1 to 3), the hop limit (7), the UDP checksum (46, 47)
    /// and BTH byte 4 (52) set to ones.
    fn reference_icrc6(ip: &[u8]) -> u32 {
        let mut masked = vec![0xffu8; 8];
        masked.extend_from_slice(ip);
        masked[8] |= 0x0f;
        for i in [1, 2, 3, 7, 46, 47, 52] {
            masked[8 + i] = 0xff;
        }
        crc32fast::hash(&masked)
    }

    #[test]
    fn ipv6_icrc_is_scapys_and_the_definitions() {
        use crate::wire::frame6::fixtures::{ACK6, SEND6};
        for (frame, want) in [(&SEND6[..], 0x6691_1da3u32), (&ACK6[..], 0x26d8_d81a)] {
            let ip = &frame[14..frame.len() - 4];
            assert_eq!(reference_icrc6(ip), want);
            assert_eq!(icrc6_parts(ip, &[]), Ok(want));
            assert_eq!(icrc6_frame(frame), Ok((want, want)));
            for cut in V6_HEAD..=ip.len() {
                let (a, b) = ip.split_at(cut);
                assert_eq!(icrc6_parts(a, &[b]), Ok(want), "split at {cut}");
            }
        }
    }

    #[test]
    fn ipv6_masked_fields_do_not_matter_others_do() {
        use crate::wire::frame6::fixtures::SEND6;
        let ip = &SEND6[14..SEND6.len() - 4];
        let whole = icrc6_parts(ip, &[]).unwrap();
        for i in 0..ip.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = ip.to_vec();
                b[i] ^= bit;
                let masked = matches!(i, 1..=3 | 7 | 46 | 47 | 52) || (i == 0 && bit == 0x01);
                // (The high bit of byte 0 is the version: an error, not a CRC.)
                assert_eq!(
                    icrc6_parts(&b, &[]).ok() == Some(whole),
                    masked,
                    "byte {i} bit {bit:#x}"
                );
            }
        }
    }

    #[test]
    fn ipv6_short_input_is_an_error() {
        use crate::wire::frame6::fixtures::SEND6;
        let ip = &SEND6[14..];
        for n in 0..V6_HEAD {
            assert!(icrc6_parts(&ip[..n], &[]).is_err(), "{n}");
        }
        for n in 0..SEND6.len() {
            assert!(icrc6_frame(&SEND6[..n]).is_err(), "{n}");
        }
        let mut v4 = SEND6;
        v4[14] = 0x46;
        assert_eq!(
            icrc6_parts(&v4[14..], &[]),
            Err(WireError::BadValue("IPv6 version"))
        );
    }

    /// The family-neutral helpers the transmit path calls (`update_headers`, `icrc_in_place`,
    /// `icrc_parts`, `icrc_frame`) read the version nibble: an IPv6 packet gets the IPv6 ICRC,
    /// scapy's, and `icrc_in_place` leaves the packet as it found it.
    #[test]
    fn the_version_nibble_chooses_the_family() {
        use crate::wire::frame6::fixtures::{ACK6, SEND6};
        for (frame, want) in [(&SEND6[..], 0x6691_1da3u32), (&ACK6[..], 0x26d8_d81a)] {
            let ip = &frame[14..frame.len() - 4];
            assert_eq!(icrc_parts(ip, &[]), Ok(want));
            assert_eq!(icrc_frame(frame), Ok((want, want)));
            let mut h = IcrcHasher::new();
            h.update_headers(ip).unwrap();
            assert_eq!(h.finalize(), want);
            let mut copy = ip.to_vec();
            assert_eq!(icrc_in_place(&mut copy), Ok(want));
            assert_eq!(copy, ip, "put back");
            assert!(icrc_in_place(&mut copy[..V6_HEAD - 1]).is_err());
        }
        // And IPv4 stays IPv4's.
        assert_eq!(icrc_frame(&FRAME16), Ok((0x16c2_9c25, 0x16c2_9c25)));
    }
}
