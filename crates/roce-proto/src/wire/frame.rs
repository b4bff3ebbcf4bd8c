//! A complete RoCEv2 frame (IBTA vol. 1 annex A17.4): Ethernet II | IPv4 | UDP to port 4791 |
//! BTH | extension headers | payload | pad (BTH PadCnt) | ICRC. IP total length and UDP length
//! include the ICRC. Ethernet padding after the IP packet is tolerated and ignored.

use super::bth::BthRepr;
use super::ethernet::{self, EtherType, EthernetRepr};
use super::icrc::{icrc_with_ihl, IcrcHasher, ICRC_LEN};
use super::ipv4::{self, Ipv4Repr, IPPROTO_UDP};
use super::opcode::{OpFlags, Opcode, OpcodeInfo};
use super::roce::{RoceHeaders, RocePacket};
use super::udp::{self, UdpRepr, ROCEV2_PORT};
use super::{bth, WireError};
use std::net::{IpAddr, Ipv4Addr};

const ETH_LEN: usize = ethernet::HEADER_LEN;
const IP_LEN: usize = ipv4::HEADER_LEN;
const UDP_LEN: usize = udp::HEADER_LEN;

/// Every way a frame can fail to be a valid RoCEv2 frame, or fail to be emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The frame ends inside the named header.
    #[error("frame truncated in {what}")]
    Truncated { what: &'static str },
    /// EtherType is not IPv4.
    #[error("not IPv4 (EtherType {0:#06x})")]
    NotIpv4(u16),
    /// EtherType is not IPv6 (a RoCEv2/IPv6 frame was expected, `frame6`).
    #[error("not IPv6 (EtherType {0:#06x})")]
    NotIpv6(u16),
    /// The IP header's version is not the one its EtherType names.
    #[error("IP version {0} does not match the EtherType")]
    BadIpVersion(u8),
    /// IHL below 5 (value in bytes).
    #[error("bad IPv4 header length {0}")]
    BadIpHeaderLen(usize),
    /// Total length below the header length or beyond the frame.
    #[error("bad IPv4 total length {0}")]
    BadIpTotalLen(u16),
    /// IPv6 payload length beyond the frame, or shorter than the UDP header.
    #[error("bad IPv6 payload length {0}")]
    BadIpv6PayloadLen(u16),
    #[error("bad IPv4 header checksum")]
    BadIpChecksum,
    /// MF set or a fragment offset: RoCEv2 is never fragmented.
    #[error("IPv4 fragment")]
    IpFragment,
    #[error("IP protocol {0}, not UDP")]
    NotUdp(u8),
    /// An IPv6 extension header follows the fixed header: RoCEv2 carries none, so the packet
    /// is dropped (`ipv6::is_extension_header`).
    #[error("IPv6 extension header {0} (RoCEv2 carries none)")]
    Ipv6ExtensionHeader(u8),
    /// UDP length field not equal to the IP payload length.
    #[error("bad UDP length {0}")]
    BadUdpLength(u16),
    /// A non-zero UDP checksum that is wrong (over IPv6 too: `udp` module documentation).
    #[error("bad UDP checksum")]
    BadUdpChecksum,
    /// UDP destination port not 4791.
    #[error("UDP destination port {0} is not RoCEv2")]
    NotRoce(u16),
    #[error("BTH transport version {0}, not 0")]
    BadTver(u8),
    #[error("unknown BTH opcode {0:#04x}")]
    UnknownOpcode(u8),
    /// A payload (or pad) on an opcode that carries none.
    #[error("opcode {opcode:#04x} carries no payload but has {len} bytes")]
    UnexpectedPayload { opcode: u8, len: usize },
    /// PadCnt larger than the bytes between the headers and the ICRC.
    #[error("PadCnt {pad} exceeds the {available} bytes after the headers")]
    BadPadCnt { pad: u8, available: usize },
    /// ICRC mismatch: `expected` is computed, `found` is on the wire.
    #[error("bad ICRC: computed {expected:#010x}, found {found:#010x}")]
    BadIcrc { expected: u32, found: u32 },
    /// Emit: the output buffer is too small.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall { need: usize, have: usize },
    /// Emit: the IP packet would exceed 65535 bytes.
    #[error("frame too long: IP total length {0}")]
    TooLong(usize),
    /// Emit: a header-level error (headers not matching the opcode, ...).
    #[error(transparent)]
    Header(#[from] WireError),
}

/// What a received Ethernet frame is, for demultiplexing. No checksums are verified.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameKind {
    Arp,
    /// IPv4/UDP or IPv6/UDP (no extension header) to port 4791.
    RoceV2,
    OtherIpv4,
    Other,
}

/// Classifies a frame by EtherType, IP protocol and UDP destination port only.
pub fn classify(frame: &[u8]) -> FrameKind {
    let Ok(eth) = ethernet::Packet::new_checked(frame) else {
        return FrameKind::Other;
    };
    match eth.ethertype() {
        EtherType::ARP => FrameKind::Arp,
        EtherType::IPV4 | EtherType::IPV6 if udp_dst_port(frame) == Some(ROCEV2_PORT) => {
            FrameKind::RoceV2
        }
        EtherType::IPV4 => FrameKind::OtherIpv4,
        _ => FrameKind::Other,
    }
}

/// The UDP destination port of an Ethernet/IPv4/UDP frame or an Ethernet/IPv6/UDP frame (UDP
/// right behind the fixed header, as RoCEv2 sends it), or `None` when the frame is neither or
/// ends before the port. No length or checksum is verified.
pub fn udp_dst_port(frame: &[u8]) -> Option<u16> {
    let eth = ethernet::Packet::new_checked(frame).ok()?;
    let ip_len = match eth.ethertype() {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(eth.payload()).ok()?;
            if ip.version() != 4 || ip.header_len() < IP_LEN || ip.protocol() != IPPROTO_UDP {
                return None;
            }
            ip.header_len()
        }
        EtherType::IPV6 => {
            let ip = super::ipv6::Packet::new_checked(eth.payload()).ok()?;
            if ip.version() != 6 || ip.next_header() != IPPROTO_UDP {
                return None;
            }
            super::ipv6::HEADER_LEN
        }
        _ => return None,
    };
    let at = ETH_LEN + ip_len + udp::field::DST_PORT;
    let b = frame.get(at..at + 2)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

/// True when the non-zero checksum of the UDP datagram `l4` is correct for the addresses of the
/// IPv4 header `ip_h` (RFC 768). Out of line: RoCEv2 sends a zero checksum.
#[cold]
#[inline(never)]
fn udp_checksum_ok(ip_h: &[u8; IP_LEN], l4: &[u8]) -> bool {
    let ip = Ipv4Repr::from_header(ip_h);
    udp::Packet::new_unchecked(l4).verify_checksum(ip.src_addr, ip.dst_addr)
}

/// Pad bytes that bring `payload_len` to a multiple of 4.
pub const fn pad_for(payload_len: usize) -> u8 {
    ((4 - (payload_len % 4)) % 4) as u8
}

/// A whole RoCEv2 frame. `pad` and `icrc` are what `parse` found; `emit` recomputes both (and
/// `headers.bth.pad_count`) from the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceFrame<'a> {
    pub eth: EthernetRepr,
    pub ipv4: Ipv4Repr,
    pub udp: UdpRepr,
    pub headers: RoceHeaders,
    /// Payload without pad and ICRC.
    pub payload: &'a [u8],
    /// Number of pad bytes (BTH PadCnt).
    pub pad: u8,
    /// The ICRC value (little-endian on the wire).
    pub icrc: u32,
    /// Reserved bits 5:0 of BTH byte 4 as found (masked in the ICRC; some hardware sets them,
    /// e.g. HiSilicon hns sends 0x10). Emitted as is so a re-emit reproduces the frame; 0 from
    /// `new`.
    pub bth_resv: u8,
}

/// What a port acts on of a received RoCEv2 frame, over IPv4 or IPv6: its IP addresses and the
/// transport packet. [`parse_on_port`](Self::parse_on_port) checks exactly as
/// [`RoceFrame::parse_on_port`] (IPv4) or [`RoceFrame6::parse_on_port`](super::frame6::RoceFrame6::parse_on_port)
/// (IPv6) does (same errors) but reads no Ethernet or UDP fields: the receive path's form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceivedPacket<'a> {
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    /// The IP header's ECN field (RFC 3168): 3 is congestion experienced.
    pub ecn: u8,
    /// Headers and payload (without pad and ICRC).
    pub packet: RocePacket<'a>,
}

impl<'a> ReceivedPacket<'a> {
    /// Parses and validates a complete frame of either family, by its EtherType (IPv6's, else
    /// IPv4's checks and errors). The payload borrows from `frame`.
    #[inline(always)]
    pub fn parse_on_port(frame: &'a [u8], port: u16) -> Result<Self, FrameError> {
        if frame.get(12..ETH_LEN) == Some(&EtherType::IPV6.0.to_be_bytes()[..]) {
            return Self::parse_v6_on_port(frame, port);
        }
        Self::parse_v4_on_port(frame, port)
    }

    /// [`parse_on_port`](Self::parse_on_port) of an IPv4 frame (`FrameError::NotIpv4`
    /// otherwise): the receive path's fast path, the addresses read from the header as they
    /// are.
    #[inline(always)]
    pub fn parse_v4_on_port(frame: &'a [u8], port: u16) -> Result<Self, FrameError> {
        let c = Checked::of(frame, port)?;
        let ip = c.ip_h;
        Ok(ReceivedPacket {
            src_ip: IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15])),
            dst_ip: IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19])),
            ecn: ip[ipv4::field::TOS] & 0b11,
            packet: RocePacket {
                headers: c.transport.headers()?,
                payload: c.transport.payload,
            },
        })
    }

    /// [`parse_on_port`](Self::parse_on_port) of an IPv6 frame (`FrameError::NotIpv6`
    /// otherwise), with the checks of `RoceFrame6::parse_on_port`.
    #[inline(never)]
    pub fn parse_v6_on_port(frame: &'a [u8], port: u16) -> Result<Self, FrameError> {
        super::frame6::received(frame, port)
    }
}

/// A frame that passed every check of [`RoceFrame::parse_on_port`] (see [`FrameError`]), with
/// the fixed-size header arrays its reprs are read from.
struct Checked<'a> {
    eth_h: &'a [u8; ETH_LEN],
    ip_h: &'a [u8; IP_LEN],
    udp_h: &'a [u8; UDP_LEN],
    transport: Transport<'a>,
}

impl<'a> Checked<'a> {
    /// Every check, in the order `FrameError` lists them.
    #[inline(always)]
    fn of(frame: &'a [u8], port: u16) -> Result<Self, FrameError> {
        // Each check reads only the fields it needs; the reprs are read by the caller, after
        // the ICRC, from the fixed-size header arrays returned (nothing held across the hash).
        // Ethernet (IEEE 802.3 clause 3.2.6).
        let Some((eth_h, l3)) = frame.split_first_chunk::<ETH_LEN>() else {
            return Err(truncated("Ethernet"));
        };
        let ethertype = u16::from_be_bytes([eth_h[12], eth_h[13]]);
        if ethertype != EtherType::IPV4.0 {
            return Err(FrameError::NotIpv4(ethertype));
        }

        // IPv4 (RFC 791 §3.1, checksum RFC 1071).
        let Some(ip_h) = l3.first_chunk::<IP_LEN>() else {
            return Err(truncated("IPv4 header"));
        };
        let version = ip_h[ipv4::field::VER_IHL] >> 4;
        if version != 4 {
            return Err(FrameError::BadIpVersion(version));
        }
        let hl = usize::from(ip_h[ipv4::field::VER_IHL] & 0x0f) * 4;
        if hl < IP_LEN {
            return Err(FrameError::BadIpHeaderLen(hl));
        }
        if l3.len() < hl {
            return Err(truncated("IPv4 options"));
        }
        let total_field = u16::from_be_bytes([ip_h[2], ip_h[3]]);
        let total = usize::from(total_field);
        if total < hl || total > l3.len() {
            return Err(FrameError::BadIpTotalLen(total_field));
        }
        let (ip_head, l4) = l3[..total].split_at(hl);
        let checksum_ok = if hl == IP_LEN {
            ipv4::header_checksum_ok(ip_h)
        } else {
            ipv4::ones_complement_sum(ip_head, 0) == 0xffff
        };
        if !checksum_ok {
            return Err(FrameError::BadIpChecksum);
        }
        // MF or a fragment offset.
        if u16::from_be_bytes([ip_h[6], ip_h[7]]) & 0x3fff != 0 {
            return Err(FrameError::IpFragment);
        }
        let protocol = ip_h[ipv4::field::PROTOCOL];
        if protocol != IPPROTO_UDP {
            return Err(FrameError::NotUdp(protocol));
        }

        // UDP (RFC 768; RoCEv2 annex A17.4.2).
        let Some((udp_h, ib)) = l4.split_first_chunk::<UDP_LEN>() else {
            return Err(truncated("UDP header"));
        };
        let udp_len = u16::from_be_bytes([udp_h[4], udp_h[5]]);
        if usize::from(udp_len) != l4.len() {
            return Err(FrameError::BadUdpLength(udp_len));
        }
        let dst_port = u16::from_be_bytes([udp_h[2], udp_h[3]]);
        if dst_port != port {
            return Err(FrameError::NotRoce(dst_port));
        }
        // Zero: not computed, as RoCEv2 sends.
        if u16::from_be_bytes([udp_h[6], udp_h[7]]) != 0 && !udp_checksum_ok(ip_h, l4) {
            return Err(FrameError::BadUdpChecksum);
        }

        // `ib` holds a BTH and an ICRC when the ICRC is computed, so `total >= ICRC_LEN`.
        let transport = Transport::check(ib, || icrc_with_ihl(&l3[..total - ICRC_LEN], hl))?;
        Ok(Checked {
            eth_h,
            ip_h,
            udp_h,
            transport,
        })
    }
}

/// The InfiniBand part of a RoCEv2 frame (the UDP payload) that passed its checks, over either
/// IP family: BTH, extension headers, payload, pad and ICRC.
pub(super) struct Transport<'a> {
    pub(super) bth_h: &'a [u8; bth::BTH_LEN],
    pub(super) info: &'static OpcodeInfo,
    /// BTH through the pad.
    pub(super) body: &'a [u8],
    pub(super) payload: &'a [u8],
    pub(super) pad: u8,
    pub(super) icrc: u32,
}

impl<'a> Transport<'a> {
    /// The checks of the UDP payload `ib` in the order `FrameError` lists them; `expected_icrc`
    /// computes the ICRC over the IP packet without its last 4 bytes and is called only after
    /// the lengths are known to hold a BTH and an ICRC.
    #[inline(always)]
    pub(super) fn check(
        ib: &'a [u8],
        expected_icrc: impl FnOnce() -> Result<u32, WireError>,
    ) -> Result<Self, FrameError> {
        // BTH (IBTA vol. 1 §9.2) and the extension headers its opcode names.
        if ib.len() < bth::BTH_LEN + ICRC_LEN {
            return Err(truncated("BTH"));
        }
        let body_len = ib.len() - ICRC_LEN;
        let (body, t) = ib.split_at(body_len);
        let Some(bth_h) = body.first_chunk::<{ bth::BTH_LEN }>() else {
            return Err(truncated("BTH"));
        };
        let flags = bth_h[bth::field::FLAGS];
        let tver = flags & bth::field::TVER_MASK;
        if tver != 0 {
            return Err(FrameError::BadTver(tver));
        }
        let opcode = bth_h[bth::field::OPCODE];
        let Some(info) = Opcode(opcode).info() else {
            return Err(FrameError::UnknownOpcode(opcode));
        };
        if info.header_len > body_len {
            return Err(truncated("RoCE extension headers"));
        }

        // Payload, pad, ICRC.
        let data = body.get(info.header_len..).unwrap_or_default();
        let pad = (flags >> bth::field::PAD_SHIFT) & 0x03;
        if usize::from(pad) > data.len() {
            return Err(FrameError::BadPadCnt {
                pad,
                available: data.len(),
            });
        }
        if !info.flags.contains(OpFlags::PAYLOAD) && !data.is_empty() {
            return Err(FrameError::UnexpectedPayload {
                opcode,
                len: data.len(),
            });
        }
        let payload = &data[..data.len() - usize::from(pad)];
        let found = match *t {
            [a, b, c, d] => u32::from_le_bytes([a, b, c, d]),
            _ => return Err(truncated("ICRC")),
        };
        let expected = expected_icrc()?;
        if expected != found {
            return Err(FrameError::BadIcrc { expected, found });
        }
        Ok(Transport {
            bth_h,
            info,
            body,
            payload,
            pad,
            icrc: found,
        })
    }

    /// The BTH and the extension headers its opcode names. They cannot fail: `body` holds the
    /// `info.header_len` bytes (checked), and the opcode table's lengths match its flags
    /// (`roce` tests), so no error of the checks is overtaken by one here.
    #[inline(always)]
    pub(super) fn headers(&self) -> Result<RoceHeaders, FrameError> {
        Ok(RoceHeaders::parse_extensions(
            BthRepr::from_bytes(self.bth_h),
            self.info,
            self.body,
        )?)
    }
}

pub(super) fn truncated(what: &'static str) -> FrameError {
    FrameError::Truncated { what }
}

/// Length of a RoCEv2 frame whose IP header is `ip_len` bytes (20 or 40), with these RoCE
/// headers and a payload of `payload_len` bytes: Ethernet, IP, UDP, RoCE headers, payload, pad,
/// ICRC (no Ethernet padding, no FCS). Both families' `frame_len`.
pub(super) fn frame_len_over(ip_len: usize, headers: &RoceHeaders, payload_len: usize) -> usize {
    ETH_LEN
        + ip_len
        + UDP_LEN
        + headers.header_len()
        + payload_len
        + usize::from(pad_for(payload_len))
        + ICRC_LEN
}

/// The rest of a frame whose `hdr_len` header bytes (Ethernet through the RoCE headers) are
/// in `frame`, exactly the frame's length: the payload, the zero pad and the ICRC over the IP
/// packet (the ICRC reads the IP version). Both families' `emit`; returns the length.
pub(super) fn emit_after_headers(
    frame: &mut [u8],
    hdr_len: usize,
    payload: &[u8],
) -> Result<usize, FrameError> {
    let len = frame.len();
    let body_end = len - ICRC_LEN;
    let pay_end = hdr_len + payload.len();
    frame[hdr_len..pay_end].copy_from_slice(payload);
    frame[pay_end..body_end].fill(0);
    let icrc = super::icrc::icrc_parts(&frame[ETH_LEN..body_end], &[])?;
    frame[body_end..].copy_from_slice(&icrc.to_le_bytes());
    Ok(len)
}

/// The ICRC of a frame whose headers `emit_headers` wrote into `headers` (Ethernet through the
/// RoCE headers), then `payload` and its zero pad: both families' `compute_icrc`.
pub(super) fn icrc_after_headers(headers: &[u8], payload: &[u8]) -> Result<u32, FrameError> {
    let mut h = IcrcHasher::new();
    h.update_headers(headers.get(ETH_LEN..).unwrap_or_default())?;
    h.update(payload);
    h.update(&[0u8; 3][..usize::from(pad_for(payload.len()))]);
    Ok(h.finalize())
}

/// Room for the headers of a frame of either family with the longest RoCE headers, for
/// `compute_icrc`'s stack copy.
pub(super) const MAX_HEADERS: usize = ETH_LEN + super::ipv6::HEADER_LEN + UDP_LEN + 64;

impl<'a> RoceFrame<'a> {
    /// A frame ready to emit: `pad` and `headers.bth.pad_count` set from the payload length and
    /// `icrc` computed, so `RoceFrame::parse` of its emitted bytes returns it unchanged.
    pub fn new(
        eth: EthernetRepr,
        ipv4: Ipv4Repr,
        udp: UdpRepr,
        headers: RoceHeaders,
        payload: &'a [u8],
    ) -> Result<Self, FrameError> {
        let mut f = Self::unsealed(eth, ipv4, udp, headers, payload);
        f.icrc = f.compute_icrc()?;
        Ok(f)
    }

    /// Builds the frame of these reprs straight into `out` (resized to the frame's length),
    /// computing the ICRC once, over the emitted bytes: the transmit path's shortcut for
    /// `RoceFrame::new(..)?.emit(..)`, which would emit the headers and hash them twice.
    pub fn build_into(
        eth: EthernetRepr,
        ipv4: Ipv4Repr,
        udp: UdpRepr,
        headers: RoceHeaders,
        payload: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<usize, FrameError> {
        // `emit` computes the ICRC from the buffer; the field is not read.
        let f = RoceFrame::unsealed(eth, ipv4, udp, headers, payload);
        out.resize(f.buffer_len(), 0);
        f.emit(out)
    }

    /// The frame with `pad` and `headers.bth.pad_count` set from the payload length and no
    /// ICRC yet.
    fn unsealed(
        eth: EthernetRepr,
        ipv4: Ipv4Repr,
        udp: UdpRepr,
        mut headers: RoceHeaders,
        payload: &'a [u8],
    ) -> Self {
        let pad = pad_for(payload.len());
        headers.bth.pad_count = pad;
        RoceFrame {
            eth,
            ipv4,
            udp,
            headers,
            payload,
            pad,
            icrc: 0,
            bth_resv: 0,
        }
    }

    /// Parses and validates a complete frame (see [`FrameError`] for every check). The
    /// payload borrows from `frame`.
    pub fn parse(frame: &'a [u8]) -> Result<Self, FrameError> {
        Self::parse_on_port(frame, ROCEV2_PORT)
    }

    /// [`parse`](Self::parse) for RoCEv2 carried to another UDP destination port (captures of
    /// setups that moved it); anything else is checked the same way.
    pub fn parse_on_port(frame: &'a [u8], port: u16) -> Result<Self, FrameError> {
        let c = Checked::of(frame, port)?;
        let t = &c.transport;
        let headers = t.headers()?;
        Ok(RoceFrame {
            eth: EthernetRepr::from_bytes(c.eth_h),
            ipv4: Ipv4Repr::from_header(c.ip_h),
            udp: UdpRepr::from_bytes(c.udp_h),
            headers,
            payload: t.payload,
            pad: t.pad,
            icrc: t.icrc,
            bth_resv: t.bth_h[bth::field::FECN_BECN] & 0x3f,
        })
    }

    /// Length of a frame with these headers and a payload of `payload_len` bytes (no Ethernet
    /// padding, no FCS).
    pub fn frame_len(headers: &RoceHeaders, payload_len: usize) -> usize {
        frame_len_over(IP_LEN, headers, payload_len)
    }

    /// Length `emit` writes.
    pub fn buffer_len(&self) -> usize {
        Self::frame_len(&self.headers, self.payload.len())
    }

    /// Headers and payload as the transport sees them.
    pub fn packet(&self) -> RocePacket<'a> {
        RocePacket {
            headers: self.headers,
            payload: self.payload,
        }
    }

    /// Writes Ethernet, IPv4 (total length, checksum), UDP (length) and the RoCE headers (PadCnt
    /// from the payload length) for `self.payload.len()` bytes of payload; returns their length.
    /// The payload, pad and ICRC are not written: for scatter-gather transmit, follow with the
    /// payload segments, `pad_for(len)` zero bytes and the ICRC from
    /// [`compute_icrc`](Self::compute_icrc) (or an [`IcrcHasher`] over the segments).
    pub fn emit_headers(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        self.headers.check()?;
        let total_len = self.buffer_len();
        let ip_total = total_len - ETH_LEN;
        if ip_total > usize::from(u16::MAX) {
            return Err(FrameError::TooLong(ip_total));
        }
        let hdr_len = ETH_LEN + IP_LEN + UDP_LEN + self.headers.header_len();
        if buf.len() < hdr_len {
            return Err(FrameError::BufferTooSmall {
                need: hdr_len,
                have: buf.len(),
            });
        }
        let buf = &mut buf[..hdr_len];
        let (eth_b, rest) = buf.split_at_mut(ETH_LEN);
        self.eth.emit(&mut ethernet::Packet::new_unchecked(eth_b))?;
        let (ip_b, rest) = rest.split_at_mut(IP_LEN);
        self.ipv4
            .emit(&mut ipv4::Packet::new_unchecked(ip_b), ip_total - IP_LEN)?;
        let (udp_b, ib) = rest.split_at_mut(UDP_LEN);
        self.udp.emit(
            &mut udp::Packet::new_unchecked(udp_b),
            ip_total - IP_LEN - UDP_LEN,
        )?;
        let mut headers = self.headers;
        headers.bth.pad_count = pad_for(self.payload.len());
        headers.emit(ib)?;
        ib[bth::field::FECN_BECN] |= self.bth_resv & 0x3f;
        Ok(hdr_len)
    }

    /// Writes the complete frame (headers, payload, zero pad, ICRC); returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(FrameError::BufferTooSmall {
                need: len,
                have: buf.len(),
            });
        }
        let hdr_len = self.emit_headers(buf)?;
        emit_after_headers(&mut buf[..len], hdr_len, self.payload)
    }

    /// The ICRC `emit` will write, computed from the reprs and the payload without a frame
    /// buffer (headers go through a stack array).
    pub fn compute_icrc(&self) -> Result<u32, FrameError> {
        let mut scratch = [0u8; MAX_HEADERS];
        let n = self.emit_headers(&mut scratch)?;
        icrc_after_headers(&scratch[..n], self.payload)
    }
}

/// Frames and headers shared by the unit tests of the wire and decode modules.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use crate::wire::ethernet::EthernetAddress;
    use std::net::Ipv4Addr;

    /// hw-hisilicon-rc-send.pcap frame 16 (RC ACK).
    pub const FRAME16: [u8; 62] = [
        0x18, 0x3d, 0x5e, 0xbf, 0x43, 0x71, 0x18, 0x3d, 0x5e, 0xbf, 0x51, 0x92, 0x08, 0x00, 0x45,
        0x02, 0x00, 0x30, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x2d, 0x60, 0xc0, 0xa8, 0x46, 0x06,
        0xc0, 0xa8, 0x46, 0x04, 0x00, 0x48, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00, 0x11, 0x40, 0xff,
        0xff, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x01, 0x25, 0x9c,
        0xc2, 0x16,
    ];

    /// Ethernet 02:..:01 > 02:..:02 and IPv4 10.0.0.1 > 10.0.0.2 (DSCP 26, ECN 2) headers.
    pub fn eth_ip() -> (EthernetRepr, Ipv4Repr) {
        let eth = EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::IPV4,
        };
        let ip = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: IPPROTO_UDP,
            dscp: 26,
            ecn: 2,
            ident: 0x1234,
            dont_frag: true,
            ttl: 64,
        };
        (eth, ip)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{self, FRAME16};
    use super::*;
    use crate::wire::aeth::{AethRepr, Syndrome};
    use crate::wire::bth::BthRepr;
    use crate::wire::opcode::Opcode;
    use crate::wire::psn::Psn;
    use crate::wire::reth::RethRepr;

    fn sample(payload: &[u8]) -> RoceFrame<'_> {
        let (eth, ip) = fixtures::eth_ip();
        let mut bth = BthRepr::new(Opcode::RC_WRITE_ONLY, 0x11, Psn::new(0xfffffe));
        bth.ack_req = true;
        let headers = RoceHeaders::new(bth).with_reth(RethRepr {
            va: 0x5555_0000_1000,
            rkey: 0x1234,
            dma_len: payload.len() as u32,
        });
        RoceFrame::new(eth, ip, UdpRepr::rocev2(0xc000), headers, payload).unwrap()
    }

    #[test]
    fn parse_real_ack() {
        let f = RoceFrame::parse(&FRAME16).unwrap();
        assert_eq!(f.headers.bth.opcode, Opcode::RC_ACK);
        assert_eq!(f.headers.bth.dest_qp, 0x45);
        assert_eq!(
            f.headers.aeth,
            Some(AethRepr {
                syndrome: Syndrome::Ack { credits: 6 },
                msn: 1
            })
        );
        assert_eq!(f.udp.src_port, 0x48);
        assert_eq!(f.icrc, 0x16c2_9c25);
        assert!(f.payload.is_empty());
        let mut out = [0u8; 62];
        assert_eq!(f.emit(&mut out), Ok(62));
        assert_eq!(out, FRAME16);
        assert_eq!(f.compute_icrc(), Ok(0x16c2_9c25));
        assert_eq!(classify(&FRAME16), FrameKind::RoceV2);
    }

    #[test]
    fn emit_parse_with_pad() {
        for n in 0..9 {
            let payload = [0xabu8; 8];
            let f = sample(&payload[..n]);
            let mut buf = [0u8; 128];
            let len = f.emit(&mut buf).unwrap();
            assert_eq!(len, 14 + 20 + 8 + 28 + n + usize::from(pad_for(n)) + 4);
            assert_eq!((len - 14) % 4, 0, "IP packet is a multiple of 4 long");
            let g = RoceFrame::parse(&buf[..len]).unwrap();
            assert_eq!(g, f);
            // Ethernet padding is ignored.
            assert_eq!(RoceFrame::parse(&buf[..len + 10]).unwrap(), f);
            assert_eq!(
                f.emit(&mut buf[..len - 1]),
                Err(FrameError::BufferTooSmall {
                    need: len,
                    have: len - 1
                })
            );
        }
    }

    /// The transmit shortcut writes the same bytes as `new` + `emit`, for every pad length,
    /// over a dirty reused buffer, and refuses what `new` refuses.
    #[test]
    fn build_into_matches_new_then_emit() {
        let mut out = vec![0x5a; 300];
        for n in 0..9 {
            let payload = [0xabu8; 8];
            let f = sample(&payload[..n]);
            let mut want = [0u8; 128];
            let len = f.emit(&mut want).unwrap();
            let got = RoceFrame::build_into(f.eth, f.ipv4, f.udp, f.headers, f.payload, &mut out);
            assert_eq!(got, Ok(len));
            assert_eq!(&out[..], &want[..len]);
            assert_eq!(RoceFrame::parse(&out).unwrap(), f);
        }
        let f = sample(b"abc");
        let mut h = f.headers;
        h.reth = None;
        assert_eq!(
            RoceFrame::build_into(f.eth, f.ipv4, f.udp, h, f.payload, &mut out),
            Err(FrameError::Header(WireError::HeadersMismatch(0x0a)))
        );
    }

    #[test]
    fn emit_rejects_inconsistent_headers() {
        let mut f = sample(b"abc");
        f.headers.reth = None;
        let mut buf = [0u8; 128];
        assert_eq!(
            f.emit(&mut buf),
            Err(FrameError::Header(WireError::HeadersMismatch(0x0a)))
        );
    }

    #[test]
    fn classify_kinds() {
        assert_eq!(classify(&[]), FrameKind::Other);
        let mut b = FRAME16;
        b[36..38].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(classify(&b), FrameKind::OtherIpv4);
        b[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(classify(&b), FrameKind::Arp);
        b[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(
            classify(&b),
            FrameKind::Other,
            "IPv4 bytes behind IPv6's EtherType"
        );
        let send6 = crate::wire::frame6::fixtures::SEND6;
        assert_eq!(udp_dst_port(&send6), Some(ROCEV2_PORT));
        assert_eq!(classify(&send6), FrameKind::RoceV2);
    }
}
