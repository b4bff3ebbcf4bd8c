//! A complete RoCEv2 frame over IPv6 (IBTA vol. 1 annex A17.4): Ethernet II | IPv6 (no
//! extension headers) | UDP to port 4791 | BTH | extension headers | payload | pad | ICRC. The
//! IPv6 payload length and the UDP length include the ICRC. Ethernet padding after the IPv6
//! packet is tolerated and ignored.
//!
//! The IPv6 form of [`RoceFrame`](super::frame::RoceFrame): the same transport checks (shared,
//! `frame::Transport`), lengths, tail (payload, pad, ICRC) and ICRC computation (shared helpers
//! of `frame`, the ICRC choosing the family by the IP version), the IPv6 checks in front of
//! them, the ICRC over IPv6 ([`icrc6_parts`]), and the UDP checksum rule of RoCEv2 over IPv6
//! (zero accepted, a non-zero one verified: `udp` module documentation). A received frame of
//! either family is a [`ReceivedPacket`].

use super::bth;
use super::ethernet::{self, EtherType, EthernetRepr};
use super::frame::{
    emit_after_headers, frame_len_over, icrc_after_headers, pad_for, FrameError, ReceivedPacket,
    Transport, MAX_HEADERS,
};
use super::icrc::{icrc6_parts, ICRC_LEN};
use super::ipv4::IPPROTO_UDP;
use super::ipv6::{self, Ipv6Repr};
use super::roce::{RoceHeaders, RocePacket};
use super::udp::{self, UdpRepr, ROCEV2_PORT};
use std::net::{IpAddr, Ipv6Addr};

const ETH_LEN: usize = ethernet::HEADER_LEN;
const IP_LEN: usize = ipv6::HEADER_LEN;
const UDP_LEN: usize = udp::HEADER_LEN;

/// A whole RoCEv2 frame over IPv6. `pad` and `icrc` are what `parse` found; `emit` recomputes
/// both (and `headers.bth.pad_count`) from the payload. The UDP checksum is emitted as the repr
/// carries it (0 from [`UdpRepr::rocev2`], as RoCEv2 senders send).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoceFrame6<'a> {
    pub eth: EthernetRepr,
    pub ipv6: Ipv6Repr,
    pub udp: UdpRepr,
    pub headers: RoceHeaders,
    /// Payload without pad and ICRC.
    pub payload: &'a [u8],
    /// Number of pad bytes (BTH PadCnt).
    pub pad: u8,
    /// The ICRC value (little-endian on the wire).
    pub icrc: u32,
    /// Reserved bits 5:0 of BTH byte 4 as found (masked in the ICRC), emitted as they are.
    pub bth_resv: u8,
}

/// [`ReceivedPacket::parse_v6_on_port`]: the checks of [`RoceFrame6::parse_on_port`], the
/// addresses and the transport packet.
pub(super) fn received(frame: &[u8], port: u16) -> Result<ReceivedPacket<'_>, FrameError> {
    let c = Checked6::of(frame, port)?;
    Ok(ReceivedPacket {
        src_ip: IpAddr::V6(addr(&c.ip_h[ipv6::field::SRC_ADDR])),
        dst_ip: IpAddr::V6(addr(&c.ip_h[ipv6::field::DST_ADDR])),
        // The traffic class spans bytes 0 and 1; its ECN bits are bits 5:4 of byte 1.
        ecn: (c.ip_h[1] >> 4) & 0b11,
        packet: RocePacket {
            headers: c.transport.headers()?,
            payload: c.transport.payload,
        },
    })
}

fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

/// A frame that passed every check of [`RoceFrame6::parse_on_port`].
struct Checked6<'a> {
    eth_h: &'a [u8; ETH_LEN],
    ip_h: &'a [u8; IP_LEN],
    udp_h: &'a [u8; UDP_LEN],
    transport: Transport<'a>,
}

impl<'a> Checked6<'a> {
    /// Every check, in wire order: Ethernet, IPv6 (version, payload length, next header UDP),
    /// UDP (length, port, checksum), then the transport's (`Transport::check`).
    fn of(frame: &'a [u8], port: u16) -> Result<Self, FrameError> {
        let Some((eth_h, l3)) = frame.split_first_chunk::<ETH_LEN>() else {
            return Err(FrameError::Truncated { what: "Ethernet" });
        };
        let ethertype = u16::from_be_bytes([eth_h[12], eth_h[13]]);
        if ethertype != EtherType::IPV6.0 {
            return Err(FrameError::NotIpv6(ethertype));
        }

        // IPv6 (RFC 8200 §3).
        let Some((ip_h, after)) = l3.split_first_chunk::<IP_LEN>() else {
            return Err(FrameError::Truncated {
                what: "IPv6 header",
            });
        };
        let version = ip_h[0] >> 4;
        if version != 6 {
            return Err(FrameError::BadIpVersion(version));
        }
        let len_field = u16::from_be_bytes([ip_h[4], ip_h[5]]);
        let Some(l4) = after.get(..usize::from(len_field)) else {
            return Err(FrameError::BadIpv6PayloadLen(len_field));
        };
        let nh = ip_h[ipv6::field::NEXT_HEADER];
        if ipv6::is_extension_header(nh) {
            return Err(FrameError::Ipv6ExtensionHeader(nh));
        }
        if nh != IPPROTO_UDP {
            return Err(FrameError::NotUdp(nh));
        }

        // UDP (RFC 768; the RoCEv2 checksum rule over IPv6 in the `udp` module).
        let Some((udp_h, ib)) = l4.split_first_chunk::<UDP_LEN>() else {
            return Err(FrameError::BadIpv6PayloadLen(len_field));
        };
        let udp_len = u16::from_be_bytes([udp_h[4], udp_h[5]]);
        if udp_len != len_field {
            return Err(FrameError::BadUdpLength(udp_len));
        }
        let dst_port = u16::from_be_bytes([udp_h[2], udp_h[3]]);
        if dst_port != port {
            return Err(FrameError::NotRoce(dst_port));
        }
        let src = addr(&ip_h[ipv6::field::SRC_ADDR]);
        let dst = addr(&ip_h[ipv6::field::DST_ADDR]);
        if !udp::Packet::new_unchecked(l4).rocev2_checksum_ok_v6(src, dst) {
            return Err(FrameError::BadUdpChecksum);
        }

        let body = &l3[..IP_LEN + l4.len()];
        // `ib` holds a BTH and an ICRC when the ICRC is computed.
        let transport = Transport::check(ib, || icrc6_parts(&body[..body.len() - ICRC_LEN], &[]))?;
        Ok(Checked6 {
            eth_h,
            ip_h,
            udp_h,
            transport,
        })
    }
}

impl<'a> RoceFrame6<'a> {
    /// A frame ready to emit: EtherType IPv6, next header UDP, `pad` and
    /// `headers.bth.pad_count` set from the payload length and `icrc` computed, so
    /// `RoceFrame6::parse` of its emitted bytes returns it unchanged.
    pub fn new(
        eth: EthernetRepr,
        ipv6: Ipv6Repr,
        udp: UdpRepr,
        mut headers: RoceHeaders,
        payload: &'a [u8],
    ) -> Result<Self, FrameError> {
        let pad = pad_for(payload.len());
        headers.bth.pad_count = pad;
        let mut f = RoceFrame6 {
            eth: EthernetRepr {
                ethertype: EtherType::IPV6,
                ..eth
            },
            ipv6: Ipv6Repr {
                next_header: IPPROTO_UDP,
                ..ipv6
            },
            udp,
            headers,
            payload,
            pad,
            icrc: 0,
            bth_resv: 0,
        };
        f.icrc = f.compute_icrc()?;
        Ok(f)
    }

    /// Parses and validates a complete frame (see [`FrameError`] for every check). The
    /// payload borrows from `frame`.
    pub fn parse(frame: &'a [u8]) -> Result<Self, FrameError> {
        Self::parse_on_port(frame, ROCEV2_PORT)
    }

    /// [`parse`](Self::parse) for RoCEv2 carried to another UDP destination port.
    pub fn parse_on_port(frame: &'a [u8], port: u16) -> Result<Self, FrameError> {
        let c = Checked6::of(frame, port)?;
        let t = &c.transport;
        Ok(RoceFrame6 {
            eth: EthernetRepr::from_bytes(c.eth_h),
            ipv6: Ipv6Repr::from_header(c.ip_h),
            udp: UdpRepr::from_bytes(c.udp_h),
            headers: t.headers()?,
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

    /// Writes Ethernet, IPv6 (payload length), UDP (length) and the RoCE headers (PadCnt from
    /// the payload length) for `self.payload.len()` bytes of payload; returns their length.
    pub fn emit_headers(&self, buf: &mut [u8]) -> Result<usize, FrameError> {
        self.headers.check()?;
        let ip_payload = self.buffer_len() - ETH_LEN - IP_LEN;
        if ip_payload > usize::from(u16::MAX) {
            return Err(FrameError::TooLong(ip_payload + IP_LEN));
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
        let mut eth = self.eth;
        eth.ethertype = EtherType::IPV6;
        eth.emit(&mut ethernet::Packet::new_unchecked(eth_b))?;
        let (ip_b, rest) = rest.split_at_mut(IP_LEN);
        let mut ip = self.ipv6;
        ip.next_header = IPPROTO_UDP;
        ip.emit(&mut ipv6::Packet::new_unchecked(ip_b), ip_payload)?;
        let (udp_b, ib) = rest.split_at_mut(UDP_LEN);
        self.udp
            .emit(&mut udp::Packet::new_unchecked(udp_b), ip_payload - UDP_LEN)?;
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

/// RoCEv2/IPv6 frames built by scapy 2.8 (`scapy.contrib.roce`, an ICRC implementation we did
/// not write: it masks the IPv6 traffic class, flow label and hop limit, the UDP checksum and
/// BTH byte 4, as annex A17.4.1 says), shared by the wire tests.
#[cfg(any(test, feature = "test-support"))]
pub mod fixtures {
    /// 02:..:01 > 02:..:02, fd00:77::1 > fd00:77::2, traffic class 0x6a (DSCP 26, ECN 2), flow
    /// label 0x12345, hop limit 64, UDP 0xc001 > 4791 checksum 0, RC SEND Only to QP 0x11,
    /// PSN 5, AckReq, "hello" and 3 pad bytes, ICRC 0x66911da3 (little-endian on the wire).
    #[rustfmt::skip]
    pub const SEND6: [u8; 86] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd,
        0x66, 0xa1, 0x23, 0x45, 0x00, 0x20, 0x11, 0x40, // version, TC, flow; len 32, UDP, 64
        0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
        0xc0, 0x01, 0x12, 0xb7, 0x00, 0x20, 0x00, 0x00, // UDP, checksum 0
        0x04, 0x30, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x05, // BTH
        b'h', b'e', b'l', b'l', b'o', 0, 0, 0, // payload, pad
        0xa3, 0x1d, 0x91, 0x66, // ICRC 0x66911da3
    ];

    /// SEND6 as scapy builds it with the UDP checksum computed: 0x3566. The ICRC does not
    /// change (the UDP checksum is masked).
    pub fn send6_with_udp_checksum() -> [u8; 86] {
        let mut f = SEND6;
        f[60..62].copy_from_slice(&[0x35, 0x66]);
        f
    }

    /// fd00:77::2 > fd00:77::1, hop limit 255, RC ACK to QP 0x22, PSN 5, AETH syndrome 0x1f
    /// MSN 1, ICRC 0x26d8d81a.
    #[rustfmt::skip]
    pub const ACK6: [u8; 82] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x86, 0xdd,
        0x60, 0x00, 0x00, 0x00, 0x00, 0x1c, 0x11, 0xff,
        0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02,
        0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01,
        0xc0, 0x02, 0x12, 0xb7, 0x00, 0x1c, 0x00, 0x00,
        0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x22, 0x00, 0x00, 0x00, 0x05, // BTH
        0x1f, 0x00, 0x00, 0x01, // AETH
        0x1a, 0xd8, 0xd8, 0x26, // ICRC 0x26d8d81a
    ];
}

#[cfg(test)]
mod tests {
    use super::fixtures::{send6_with_udp_checksum, ACK6, SEND6};
    use super::*;
    use crate::wire::aeth::{AethRepr, Syndrome};
    use crate::wire::bth::BthRepr;
    use crate::wire::ethernet::EthernetAddress;
    use crate::wire::opcode::Opcode;
    use crate::wire::psn::Psn;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// The reprs of SEND6, written by hand from the scapy call that built it.
    fn send6_reprs() -> (EthernetRepr, Ipv6Repr, UdpRepr, RoceHeaders) {
        let eth = EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::IPV6,
        };
        let ip = Ipv6Repr {
            dscp: 26,
            ecn: 2,
            flow_label: 0x12345,
            ..Ipv6Repr::rocev2(a("fd00:77::1"), a("fd00:77::2"), 64)
        };
        let mut bth = BthRepr::new(Opcode::RC_SEND_ONLY, 0x11, Psn::new(5));
        bth.ack_req = true;
        (eth, ip, UdpRepr::rocev2(0xc001), RoceHeaders::new(bth))
    }

    #[test]
    fn scapy_send_parses_and_our_emit_is_byte_for_byte_the_same() {
        let f = RoceFrame6::parse(&SEND6).unwrap();
        let (eth, ip, udp, headers) = send6_reprs();
        assert_eq!((f.eth, f.ipv6, f.udp), (eth, ip, udp));
        assert_eq!(f.headers.bth.opcode, Opcode::RC_SEND_ONLY);
        assert_eq!(f.headers.bth.dest_qp, 0x11);
        assert_eq!(f.payload, b"hello");
        assert_eq!((f.pad, f.icrc), (3, 0x6691_1da3));
        let built = RoceFrame6::new(eth, ip, udp, headers, b"hello").unwrap();
        assert_eq!(built, f);
        assert_eq!(built.compute_icrc(), Ok(0x6691_1da3));
        let mut out = [0u8; 86];
        assert_eq!(built.emit(&mut out), Ok(86));
        assert_eq!(out, SEND6, "our frame is scapy's");
        assert_eq!(icrc6_frame_of(&SEND6), (0x6691_1da3, 0x6691_1da3));
        let r = ReceivedPacket::parse_on_port(&SEND6, ROCEV2_PORT).unwrap();
        assert_eq!(
            (r.src_ip, r.dst_ip),
            (a("fd00:77::1").into(), a("fd00:77::2").into())
        );
        assert_eq!(r.packet, f.packet());
    }

    fn icrc6_frame_of(frame: &[u8]) -> (u32, u32) {
        crate::wire::icrc::icrc6_frame(frame).unwrap()
    }

    #[test]
    fn scapy_ack_parses() {
        let f = RoceFrame6::parse(&ACK6).unwrap();
        assert_eq!(f.headers.bth.opcode, Opcode::RC_ACK);
        assert_eq!(f.headers.bth.dest_qp, 0x22);
        assert_eq!(
            f.headers.aeth,
            Some(AethRepr {
                syndrome: Syndrome::Ack { credits: 31 },
                msn: 1
            })
        );
        assert_eq!(f.ipv6.hop_limit, 255);
        assert_eq!(f.icrc, 0x26d8_d81a);
        let mut out = [0u8; 82];
        assert_eq!(f.emit(&mut out), Ok(82));
        assert_eq!(out, ACK6);
    }

    /// Zero (RoCEv2's "no checksum") and a correct checksum are taken; a wrong non-zero one is
    /// dropped before the ICRC is looked at.
    #[test]
    fn udp_checksum_rule_over_ipv6() {
        let with = send6_with_udp_checksum();
        let f = RoceFrame6::parse(&with).unwrap();
        assert_eq!(f.udp.checksum, 0x3566);
        assert_eq!(f.icrc, 0x6691_1da3, "the ICRC masks the UDP checksum");
        let mut bad = with;
        bad[61] ^= 1;
        assert_eq!(RoceFrame6::parse(&bad), Err(FrameError::BadUdpChecksum));
        // Our own emit of a frame with a filled-in checksum parses too.
        let mut out = SEND6;
        let mut u = udp::Packet::new_unchecked(&mut out[54..]);
        u.fill_checksum_v6(a("fd00:77::1"), a("fd00:77::2"));
        assert_eq!(out, with);
    }

    /// Every check, each on a frame that passes all the others, and the error it gives.
    #[test]
    fn each_check_refuses_its_frame() {
        let edit = |at: usize, v: &[u8]| {
            let mut f = SEND6.to_vec();
            f[at..at + v.len()].copy_from_slice(v);
            f
        };
        let cases: Vec<(&str, Vec<u8>, FrameError)> = vec![
            (
                "IPv4 EtherType",
                edit(12, &[0x08, 0x00]),
                FrameError::NotIpv6(0x0800),
            ),
            ("version 4", edit(14, &[0x46]), FrameError::BadIpVersion(4)),
            (
                "payload beyond the frame",
                edit(18, &[0x00, 0x21]),
                FrameError::BadIpv6PayloadLen(33),
            ),
            (
                "payload shorter than UDP",
                edit(18, &[0x00, 0x07]),
                FrameError::BadIpv6PayloadLen(7),
            ),
            (
                "hop-by-hop options",
                edit(20, &[0]),
                FrameError::Ipv6ExtensionHeader(0),
            ),
            (
                "fragment header",
                edit(20, &[44]),
                FrameError::Ipv6ExtensionHeader(44),
            ),
            ("TCP", edit(20, &[6]), FrameError::NotUdp(6)),
            (
                "UDP length",
                edit(58, &[0x00, 0x1f]),
                FrameError::BadUdpLength(31),
            ),
            (
                "port 4792",
                edit(56, &[0x12, 0xb8]),
                FrameError::NotRoce(4792),
            ),
            (
                "UDP checksum",
                edit(60, &[0x12, 0x34]),
                FrameError::BadUdpChecksum,
            ),
            ("BTH version", edit(63, &[0x31]), FrameError::BadTver(1)),
            (
                "payload",
                edit(77, b"j"),
                FrameError::BadIcrc {
                    expected: 0,
                    found: 0,
                },
            ),
            (
                "source address",
                edit(37, &[0x09]),
                FrameError::BadIcrc {
                    expected: 0,
                    found: 0,
                },
            ),
        ];
        for (what, f, want) in cases {
            let got = RoceFrame6::parse(&f);
            match (got, want) {
                (Err(FrameError::BadIcrc { found, .. }), FrameError::BadIcrc { .. }) => {
                    assert_eq!(found, 0x6691_1da3, "{what}")
                }
                (got, want) => assert_eq!(got, Err(want), "{what}"),
            }
        }
    }

    /// The ICRC's variant fields: a router may rewrite the traffic class, flow label and hop
    /// limit, and the frame still parses; the payload length and next header are covered.
    #[test]
    fn variant_ipv6_fields_do_not_break_the_icrc() {
        let mut f = SEND6;
        f[14] = 0x6f; // traffic class high nibble
        f[15..18].copy_from_slice(&[0xff, 0xff, 0xff]); // rest of TC, flow label
        f[21] = 1; // hop limit
        f[66] = 0xc0; // BTH FECN, BECN
        let g = RoceFrame6::parse(&f).unwrap();
        assert_eq!(
            (g.ipv6.dscp, g.ipv6.ecn, g.ipv6.flow_label),
            (63, 3, 0xf_ffff)
        );
        assert_eq!(g.ipv6.hop_limit, 1);
        assert_eq!(g.icrc, 0x6691_1da3);
    }

    #[test]
    fn no_prefix_of_a_frame_parses_or_panics() {
        for frame in [&SEND6[..], &ACK6[..]] {
            for n in 0..frame.len() {
                assert!(RoceFrame6::parse(&frame[..n]).is_err(), "{n} bytes");
                assert!(ReceivedPacket::parse_on_port(&frame[..n], ROCEV2_PORT).is_err());
            }
            // Ethernet padding after the packet is ignored.
            let mut padded = frame.to_vec();
            padded.extend_from_slice(&[0; 10]);
            assert_eq!(RoceFrame6::parse(&padded), RoceFrame6::parse(frame));
        }
    }

    #[test]
    fn emit_parse_round_trip_with_every_pad() {
        let (eth, ip, udp, headers) = send6_reprs();
        let payload = [0xabu8; 8];
        for n in 0..=8 {
            let f = RoceFrame6::new(eth, ip, udp, headers, &payload[..n]).unwrap();
            let mut buf = [0u8; 128];
            let len = f.emit(&mut buf).unwrap();
            assert_eq!(len, 14 + 40 + 8 + 12 + n + usize::from(pad_for(n)) + 4);
            assert_eq!(len, RoceFrame6::frame_len(&headers, n));
            assert_eq!(RoceFrame6::parse(&buf[..len]), Ok(f), "{n}");
            assert_eq!(
                f.emit(&mut buf[..len - 1]),
                Err(FrameError::BufferTooSmall {
                    need: len,
                    have: len - 1
                })
            );
        }
        let mut h = headers;
        h.bth.opcode = Opcode::RC_WRITE_ONLY;
        assert!(RoceFrame6::new(eth, ip, udp, h, b"x").is_err(), "no RETH");
    }

    /// What we emit is RoCEv2 over IPv6 to Wireshark: IPv6, UDP (a filled-in checksum
    /// verified good; the zero RoCEv2 sends is "not present" with
    /// `udp.ignore_ipv6_zero_checksum` and "illegal" without, RFC 8200's rule), and InfiniBand
    /// with the ICRC where we put it. tshark is required (scripts/setup.sh installs it).
    #[test]
    fn tshark_decodes_our_ipv6_frames() {
        use crate::capture::PcapCapture;
        use crate::time::Instant;
        use std::process::Command;

        let (eth, ip, udp, headers) = send6_reprs();
        let f = RoceFrame6::new(eth, ip, udp, headers, b"hello").unwrap();
        let mut zero = vec![0u8; f.buffer_len()];
        f.emit(&mut zero).unwrap();
        let mut summed = zero.clone();
        udp::Packet::new_unchecked(&mut summed[54..]).fill_checksum_v6(ip.src_addr, ip.dst_addr);
        let path =
            std::env::temp_dir().join(format!("dpdk-roce-wire-roce6-{}.pcap", std::process::id()));
        let mut cap = PcapCapture::create(&path).unwrap();
        for (i, frame) in [&zero, &summed].into_iter().enumerate() {
            cap.write(Instant::from_nanos(i as u64 * 1000), frame)
                .unwrap();
        }
        cap.finish().unwrap();

        let run = |ignore_zero: bool| {
            let mut cmd = Command::new("tshark");
            cmd.arg("-r").arg(&path);
            // Payload dissectors that would guess at "hello" (as tests/tshark_capture.rs).
            for h in [
                "rpcrdma_infiniband",
                "iser_infiniband",
                "nvme_rdma",
                "smb_direct_infiniband",
            ] {
                cmd.args(["--disable-heuristic", h]);
            }
            let out = cmd
                .args(["-o", "udp.check_checksum:TRUE"])
                .arg("-o")
                .arg(format!(
                    "udp.ignore_ipv6_zero_checksum:{}",
                    if ignore_zero { "TRUE" } else { "FALSE" }
                ))
                .args(["-T", "fields", "-E", "separator=,"])
                .args(["-e", "frame.protocols", "-e", "ipv6.src", "-e", "ipv6.dst"])
                .args(["-e", "ipv6.tclass", "-e", "ipv6.flow", "-e", "ipv6.hlim"])
                .args(["-e", "udp.checksum.status", "-e", "infiniband.bth.opcode"])
                .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"])
                .args(["-e", "infiniband.invariant.crc", "-e", "_ws.malformed"])
                .args(["-e", "_ws.expert.message"])
                .output()
                .expect("tshark must be installed (bash scripts/setup.sh installs it)");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        };
        let strict = run(false);
        let lenient = run(true);
        let _ = std::fs::remove_file(&path);
        let ip =
            "eth:ethertype:ipv6:udp:infiniband:data,fd00:77::1,fd00:77::2,0x0000006a,0x012345,64";
        // Wireshark shows the ICRC's wire bytes as a big-endian number.
        let ib = "4,0x000011,5,0xa31d9166";
        // udp.checksum.status: 1 good, 3 not present, 4 illegal. No malformed packet, and no
        // expert message but strict Wireshark's about the zero checksum.
        assert_eq!(
            lenient.lines().collect::<Vec<_>>(),
            vec![format!("{ip},3,{ib},,"), format!("{ip},1,{ib},,")],
            "lenient:\n{lenient}"
        );
        assert_eq!(
            strict.lines().collect::<Vec<_>>(),
            vec![
                format!("{ip},4,{ib},,Illegal checksum value (0)"),
                format!("{ip},1,{ib},,")
            ],
            "strict:\n{strict}"
        );
    }
}
