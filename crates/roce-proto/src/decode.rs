//! One-line, human-readable summaries of Ethernet frames, for the `roce-tool decode` command and
//! the simulator's trace: RoCEv2 frames over IPv4 or IPv6 with every header field that matters
//! for debugging, CM MADs on QP1 with their IDs, ARP and Neighbor Discovery, and a `!!` marker
//! on RoCEv2 frames that fail validation. Nothing here panics, whatever the bytes.
//!
//! ```text
//! 192.168.2.25:49153 > 192.168.2.24 RC RDMA WRITE only QP=0x000011 PSN=12 A RETH(va=0x1000, rkey=0x220, len=18) payload=18
//! 192.168.2.24:49153 > 192.168.2.25 RC Acknowledge QP=0x000017 PSN=12 AETH(ACK credits=31 MSN=1)
//! 192.168.2.25:49153 > 192.168.2.24 RC SEND only QP=0x000011 PSN=13 payload=8 !! BAD ICRC (expected 0x1234abcd, found 0x1234abce)
//! [fd00:77::1]:49153 > fd00:77::2 RC SEND only QP=0x000011 PSN=5 A pad=3 payload=5
//! ND who-has fd00:77::2 tell fd00:77::1 at 02:00:00:00:00:01
//! ```

use crate::cm::ip_cm::port_of_service_id;
use crate::transport::types::Mtu;
use crate::wire::aeth::{AethRepr, NakCode, Syndrome};
use crate::wire::arp::{self, ArpOperation, ArpRepr};
use crate::wire::bth::{self, DEFAULT_PKEY};
use crate::wire::cm_msg::CmMessage;
use crate::wire::ethernet::{self, EtherType};
use crate::wire::frame::{udp_dst_port, FrameError, RoceFrame};
use crate::wire::frame6::RoceFrame6;
use crate::wire::icmpv6::{self, NdiscRepr};
use crate::wire::icrc::ICRC_LEN;
use crate::wire::ipv4::{self, IPPROTO_UDP};
use crate::wire::ipv6::{self, Ipv6Repr, IPPROTO_ICMPV6};
use crate::wire::mad::{self, MadHeader, MAD_LEN};
use crate::wire::opcode::{OpFlags, Opcode};
use crate::wire::roce::RoceHeaders;
use crate::wire::udp::{self, ROCEV2_PORT};
use crate::wire::{rnr_timer_ns, AtomicEthRepr};
use core::fmt::{self, Write};
use std::net::IpAddr;

/// The GSI queue pair that carries CM MADs.
const GSI_QP: u32 = 1;

/// What a frame turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// A RoCEv2 frame that passed every check of [`RoceFrame::parse`] (or
    /// [`RoceFrame6::parse`]).
    Valid,
    /// A RoCEv2 frame whose ICRC does not match.
    BadIcrc,
    /// A RoCEv2 frame whose lengths (IP, UDP, PadCnt, payload) do not add up.
    BadLength,
    /// A RoCEv2 frame with another bad header field (checksum, version, opcode, fragment).
    BadHeader,
    /// Not addressed to a RoCEv2 UDP port (ARP, Neighbor Discovery, other IP, other
    /// EtherTypes, runts).
    NotRoce,
}

/// The summary of one frame: its verdict, the parser's error for a bad RoCEv2 frame, and the
/// text (`Display`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSummary {
    pub verdict: Verdict,
    /// Why [`RoceFrame::parse`] rejected a RoCEv2 frame.
    pub error: Option<FrameError>,
    text: String,
}

impl FrameSummary {
    /// True for frames addressed to a RoCEv2 port, valid or not.
    pub fn is_roce(&self) -> bool {
        self.verdict != Verdict::NotRoce
    }

    /// True for valid RoCEv2 frames.
    pub fn is_valid(&self) -> bool {
        self.verdict == Verdict::Valid
    }

    /// The one-line text.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for FrameSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Summarizes a frame, treating UDP destination port 4791 as RoCEv2.
pub fn summarize(frame: &[u8]) -> FrameSummary {
    summarize_with_ports(frame, &[])
}

/// Summarizes a frame, treating UDP destination port 4791 and every port in `extra_ports` as
/// RoCEv2.
pub fn summarize_with_ports(frame: &[u8], extra_ports: &[u16]) -> FrameSummary {
    // An 802.1Q tag (a capture of the wire, `net::vlan`): the frame behind it, tag first.
    if let Some(tci) = vlan_tci(frame) {
        let mut inner = Vec::with_capacity(frame.len());
        crate::net::Vlan::strip_into(frame, &mut inner);
        let mut s = summarize_with_ports(&inner, extra_ports);
        s.text = format!("vlan={} pcp={} {}", tci & 0x0fff, tci >> 13, s.text);
        return s;
    }
    match udp_dst_port(frame) {
        Some(port) if port == ROCEV2_PORT || extra_ports.contains(&port) => {
            summarize_roce(frame, port)
        }
        _ => FrameSummary {
            verdict: Verdict::NotRoce,
            error: None,
            text: describe_other(frame),
        },
    }
}

/// The TCI of a frame with one 802.1Q tag and an EtherType behind it.
fn vlan_tci(frame: &[u8]) -> Option<u16> {
    let b = frame.get(ethernet::HEADER_LEN - 2..ethernet::HEADER_LEN + 4)?;
    (u16::from_be_bytes([b[0], b[1]]) == EtherType::VLAN.0)
        .then(|| u16::from_be_bytes([b[2], b[3]]))
}

/// The summary text of a parsed, valid RoCEv2 frame (what [`summarize`] prints for it).
pub fn describe_roce(f: &RoceFrame<'_>) -> String {
    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = write_roce(&mut s, f);
    s
}

/// [`describe_roce`] of a RoCEv2/IPv6 frame.
pub fn describe_roce6(f: &RoceFrame6<'_>) -> String {
    let mut s = String::new();
    let _ = write_packet(
        &mut s,
        (f.ipv6.src_addr.into(), f.udp.src_port),
        (f.ipv6.dst_addr.into(), f.udp.dst_port),
        (f.ipv6.dscp, f.ipv6.ecn),
        &f.headers,
        f.payload,
    );
    s
}

fn summarize_roce(frame: &[u8], port: u16) -> FrameSummary {
    let is_v6 = frame.get(12..14) == Some(&EtherType::IPV6.0.to_be_bytes()[..]);
    let parsed = if is_v6 {
        RoceFrame6::parse_on_port(frame, port).map(|f| describe_roce6(&f))
    } else {
        RoceFrame::parse_on_port(frame, port).map(|f| describe_roce(&f))
    };
    match parsed {
        Ok(text) => FrameSummary {
            verdict: Verdict::Valid,
            error: None,
            text,
        },
        Err(e) => {
            let mut text = String::new();
            let _ = write_best_effort(&mut text, frame);
            let verdict = match e {
                FrameError::BadIcrc { expected, found } => {
                    let _ = write!(
                        text,
                        " !! BAD ICRC (expected {expected:#010x}, found {found:#010x})"
                    );
                    Verdict::BadIcrc
                }
                FrameError::Truncated { .. }
                | FrameError::BadIpHeaderLen(_)
                | FrameError::BadIpTotalLen(_)
                | FrameError::BadIpv6PayloadLen(_)
                | FrameError::BadUdpLength(_)
                | FrameError::BadPadCnt { .. }
                | FrameError::UnexpectedPayload { .. } => {
                    let _ = write!(text, " !! BAD LENGTH ({e})");
                    Verdict::BadLength
                }
                _ => {
                    let _ = write!(text, " !! BAD HEADER ({e})");
                    Verdict::BadHeader
                }
            };
            FrameSummary {
                verdict,
                error: Some(e),
                text,
            }
        }
    }
}

/// `ip` with a port as a socket address is written (`[v6]:port`), or alone.
fn write_addr(out: &mut String, ip: IpAddr, port: Option<u16>) -> fmt::Result {
    match (ip, port) {
        (IpAddr::V4(a), Some(p)) => write!(out, "{a}:{p}"),
        (IpAddr::V6(a), Some(p)) => write!(out, "[{a}]:{p}"),
        (a, None) => write!(out, "{a}"),
    }
}

fn write_endpoints(
    out: &mut String,
    src: IpAddr,
    src_port: Option<u16>,
    dst: IpAddr,
    dst_port: u16,
) -> fmt::Result {
    write_addr(out, src, src_port)?;
    out.push_str(" > ");
    write_addr(out, dst, (dst_port != ROCEV2_PORT).then_some(dst_port))
}

fn write_roce(out: &mut String, f: &RoceFrame<'_>) -> fmt::Result {
    write_packet(
        out,
        (f.ipv4.src_addr.into(), f.udp.src_port),
        (f.ipv4.dst_addr.into(), f.udp.dst_port),
        (f.ipv4.dscp, f.ipv4.ecn),
        &f.headers,
        f.payload,
    )
}

/// A valid RoCEv2 packet from `src` (address, UDP port) to `dst`, of either family, with its
/// IP traffic class (DSCP, ECN): written when not zero, the ECN codepoint by its RFC 3168
/// name (`ecn=CE` for a packet a congested queue marked).
fn write_packet(
    out: &mut String,
    src: (IpAddr, u16),
    dst: (IpAddr, u16),
    (dscp, ecn): (u8, u8),
    headers: &RoceHeaders,
    payload: &[u8],
) -> fmt::Result {
    write_endpoints(out, src.0, Some(src.1), dst.0, dst.1)?;
    if dscp != 0 {
        write!(out, " dscp={dscp}")?;
    }
    match ecn & 3 {
        1 => out.push_str(" ecn=ECT(1)"),
        2 => out.push_str(" ecn=ECT(0)"),
        3 => out.push_str(" ecn=CE"),
        _ => {}
    }
    out.push(' ');
    write_headers(out, headers)?;
    let op = headers.bth.opcode;
    if op.flags().contains(OpFlags::PAYLOAD) {
        write!(out, " payload={}", payload.len())?;
    }
    if headers.deth.is_some() && headers.bth.dest_qp == GSI_QP {
        out.push(' ');
        write_mad(out, payload)?;
    }
    Ok(())
}

/// The addresses of an IPv4 or IPv6 packet `l3`, its header length and where its packet ends
/// by its length field (`None` when the header does not parse).
fn ip_of(l3: &[u8], ethertype: EtherType) -> Option<(IpAddr, IpAddr, usize, usize)> {
    if ethertype == EtherType::IPV6 {
        let ip = ipv6::Packet::new_checked(l3).ok()?;
        let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
        return Some((
            ip.src_addr().into(),
            ip.dst_addr().into(),
            ipv6::HEADER_LEN,
            end,
        ));
    }
    let ip = ipv4::Packet::new_checked(l3).ok()?;
    let hl = ip.header_len();
    Some((
        ip.src_addr().into(),
        ip.dst_addr().into(),
        hl,
        usize::from(ip.total_len()),
    ))
}

/// Whatever can be read from a RoCEv2-port frame that failed validation: addresses, ports, the
/// BTH (and the extension headers when they parse).
fn write_best_effort(out: &mut String, frame: &[u8]) -> fmt::Result {
    let (Some(l3), Ok(eth)) = (
        frame.get(ethernet::HEADER_LEN..),
        ethernet::Packet::new_checked(frame),
    ) else {
        return out.write_str("?");
    };
    let Some((src, dst, hl, end)) = ip_of(l3, eth.ethertype()) else {
        return out.write_str("?");
    };
    let l4 = l3.get(hl..).unwrap_or_default();
    let (src_port, dst_port) = match udp::Packet::new_checked(l4) {
        Ok(u) => (Some(u.src_port()), u.dst_port()),
        Err(_) => (None, ROCEV2_PORT),
    };
    write_endpoints(out, src, src_port, dst, dst_port)?;
    // The transport bytes end where the IP packet says, or at the end of the frame.
    let ip_end = end.clamp(hl, l3.len());
    let ib = l3
        .get(hl + udp::HEADER_LEN..ip_end)
        .or_else(|| l3.get(hl + udp::HEADER_LEN..))
        .unwrap_or_default();
    let body = ib
        .get(..ib.len().saturating_sub(ICRC_LEN))
        .unwrap_or_default();
    out.push(' ');
    if let Ok((h, hdr_len)) = RoceHeaders::parse(body) {
        write_headers(out, &h)?;
        let data = body.len().saturating_sub(hdr_len);
        match data.checked_sub(usize::from(h.bth.pad_count)) {
            Some(n) if h.bth.opcode.flags().contains(OpFlags::PAYLOAD) => {
                write!(out, " payload={n}")
            }
            _ => Ok(()),
        }
    } else if let Ok(b) = bth::Packet::new_checked(ib) {
        write_opcode(out, b.opcode())?;
        write!(out, " QP={:#08x} PSN={}", b.dest_qp(), b.psn())
    } else {
        out.write_str("(no BTH)")
    }
}

fn write_opcode(out: &mut String, op: Opcode) -> fmt::Result {
    match op.info() {
        Some(i) => out.write_str(i.name),
        None => write!(out, "opcode {:#04x} (reserved)", op.0),
    }
}

fn write_headers(out: &mut String, h: &RoceHeaders) -> fmt::Result {
    let b = &h.bth;
    write_opcode(out, b.opcode)?;
    write!(out, " QP={:#08x} PSN={}", b.dest_qp, b.psn)?;
    for (set, name) in [
        (b.ack_req, "A"),
        (b.solicited, "SE"),
        (b.mig_req, "M"),
        (b.fecn, "FECN"),
        (b.becn, "BECN"),
    ] {
        if set {
            write!(out, " {name}")?;
        }
    }
    if b.pad_count != 0 {
        write!(out, " pad={}", b.pad_count)?;
    }
    if b.pkey != DEFAULT_PKEY {
        write!(out, " pkey={:#06x}", b.pkey)?;
    }
    if b.tver != 0 {
        write!(out, " tver={}", b.tver)?;
    }
    if let Some(d) = h.deth {
        write!(out, " DETH(qkey={:#010x} srcQP={:#x})", d.qkey, d.src_qp)?;
    }
    if let Some(r) = h.reth {
        write!(
            out,
            " RETH(va={:#x}, rkey={:#x}, len={})",
            r.va, r.rkey, r.dma_len
        )?;
    }
    if let Some(a) = h.atomic_eth {
        write_atomic(out, b.opcode, &a)?;
    }
    if let Some(a) = h.aeth {
        write_aeth(out, &a)?;
    }
    if let Some(a) = h.atomic_ack_eth {
        write!(out, " ATOMIC_ACK(orig={:#x})", a.orig_data)?;
    }
    if let Some(imm) = h.imm_dt {
        write!(out, " IMM={imm:#010x}")?;
    }
    if let Some(rkey) = h.ieth {
        write!(out, " IETH={rkey:#010x}")?;
    }
    Ok(())
}

fn write_atomic(out: &mut String, op: Opcode, a: &AtomicEthRepr) -> fmt::Result {
    write!(out, " ATOMIC(va={:#x}, rkey={:#x}, ", a.va, a.rkey)?;
    if op == Opcode::RC_FETCH_ADD {
        write!(out, "add={:#x})", a.swap_add)
    } else {
        write!(out, "swap={:#x}, cmp={:#x})", a.swap_add, a.compare)
    }
}

fn write_aeth(out: &mut String, a: &AethRepr) -> fmt::Result {
    out.write_str(" AETH(")?;
    match a.syndrome {
        Syndrome::Ack { credits } => write!(out, "ACK credits={credits}")?,
        Syndrome::RnrNak { timer } => {
            let ms = rnr_timer_ns(timer) as f64 / 1e6;
            write!(out, "RNR timer={timer} {ms:.2}ms")?;
        }
        Syndrome::Nak(code) => {
            out.write_str("NAK ")?;
            match code {
                NakCode::PsnSequenceError => out.write_str("PSN seq err")?,
                NakCode::InvalidRequest => out.write_str("invalid request")?,
                NakCode::RemoteAccessError => out.write_str("remote access err")?,
                NakCode::RemoteOperationalError => out.write_str("remote op err")?,
                NakCode::InvalidRdRequest => out.write_str("invalid RD request")?,
                NakCode::Reserved(c) => write!(out, "reserved code {c:#x}")?,
            }
        }
        Syndrome::Reserved(byte) => write!(out, "reserved syndrome {byte:#04x}")?,
    }
    write!(out, " MSN={})", a.msn)
}

/// The MAD in a UD SEND to QP1: CM messages with their IDs, other classes by number.
fn write_mad(out: &mut String, payload: &[u8]) -> fmt::Result {
    let Ok(p) = mad::Packet::new_checked(payload) else {
        return write!(out, "MAD? ({} bytes, need {MAD_LEN})", payload.len());
    };
    let h = MadHeader::parse(&p);
    if h.mgmt_class != mad::MGMT_CLASS_CM {
        return write!(
            out,
            "MAD class={:#04x} method={:#04x} attr={:#06x}",
            h.mgmt_class, h.method, h.attribute_id
        );
    }
    let msg = match CmMessage::parse(payload) {
        Ok((_, m)) => m,
        Err(e) => return write!(out, "CM (undecodable: {e})"),
    };
    match msg {
        CmMessage::Req(r) => {
            write!(
                out,
                "CM REQ local_comm_id={:#010x} service_id={:#018x}",
                r.local_comm_id, r.service_id
            )?;
            if let Some(port) = port_of_service_id(r.service_id) {
                write!(out, "(port {port})")?;
            }
            write!(
                out,
                " qpn={:#08x} start_psn={}",
                r.local_qpn, r.starting_psn
            )?;
            match Mtu::from_code(r.path_mtu) {
                Some(m) => write!(out, " mtu={}", m.bytes()),
                None => write!(out, " mtu=?{}", r.path_mtu),
            }
        }
        CmMessage::Rep(r) => write!(
            out,
            "CM REP local={:#010x} remote={:#010x} qpn={:#08x} start_psn={}",
            r.local_comm_id, r.remote_comm_id, r.local_qpn, r.starting_psn
        ),
        CmMessage::Rtu(r) => write_ids(out, "RTU", r.local_comm_id, r.remote_comm_id),
        CmMessage::Rej(r) => {
            let name = format!("REJ({:?} {})", r.reason, r.reason.code());
            write_ids(out, &name, r.local_comm_id, r.remote_comm_id)
        }
        CmMessage::Mra(r) => write_ids(out, "MRA", r.local_comm_id, r.remote_comm_id),
        CmMessage::Dreq(r) => {
            write_ids(out, "DREQ", r.local_comm_id, r.remote_comm_id)?;
            write!(out, " qpn={:#08x}", r.remote_qpn)
        }
        CmMessage::Drep(r) => write_ids(out, "DREP", r.local_comm_id, r.remote_comm_id),
    }
}

fn write_ids(out: &mut String, name: &str, local: u32, remote: u32) -> fmt::Result {
    write!(out, "CM {name} local={local:#010x} remote={remote:#010x}")
}

/// A short description of a frame that is not RoCEv2.
fn describe_other(frame: &[u8]) -> String {
    let Ok(eth) = ethernet::Packet::new_checked(frame) else {
        return format!("runt frame ({} bytes)", frame.len());
    };
    let payload = frame.get(ethernet::HEADER_LEN..).unwrap_or_default();
    match eth.ethertype() {
        EtherType::ARP => describe_arp(payload),
        EtherType::IPV4 => describe_ipv4(payload),
        EtherType::IPV6 => describe_ipv6(payload),
        EtherType(0x8915) => format!("RoCE v1 (not decoded, {} bytes)", frame.len()),
        EtherType(0x8100) => format!("802.1Q tag cut short ({} bytes)", frame.len()),
        EtherType(t) => format!("EtherType {t:#06x} ({} bytes)", frame.len()),
    }
}

fn describe_arp(b: &[u8]) -> String {
    let repr = arp::Packet::new_checked(b)
        .ok()
        .and_then(|p| ArpRepr::parse(&p).ok());
    match repr {
        Some(a) => match a.operation {
            ArpOperation::Request => format!(
                "ARP who-has {} tell {}",
                a.target_protocol_addr, a.source_protocol_addr
            ),
            ArpOperation::Reply => format!(
                "ARP {} is-at {}",
                a.source_protocol_addr, a.source_hardware_addr
            ),
            ArpOperation::Unknown(op) => format!("ARP operation {op}"),
        },
        None => format!("ARP (malformed, {} bytes)", b.len()),
    }
}

/// An IPv6 packet that is not RoCEv2: Neighbor Discovery (checked as RFC 4861 §7.1 says, or
/// marked malformed), other ICMPv6, UDP, TCP, or its next header.
fn describe_ipv6(b: &[u8]) -> String {
    let Ok(ip) = ipv6::Packet::new_checked(b).and_then(|p| Ipv6Repr::parse(&p)) else {
        return format!("IPv6 (malformed, {} bytes)", b.len());
    };
    let (src, dst, nh) = (ip.src_addr, ip.dst_addr, ip.next_header);
    let end = ipv6::HEADER_LEN + usize::from(ipv6::Packet::new_unchecked(b).payload_len());
    let l4 = b.get(ipv6::HEADER_LEN..end).unwrap_or_default();
    let ports = l4.get(..4).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    match (nh, ports) {
        (IPPROTO_ICMPV6, _) => describe_icmpv6(&ip, l4),
        (IPPROTO_UDP, Some((s, d))) => format!("UDP [{src}]:{s} > [{dst}]:{d}"),
        (6, Some((s, d))) => format!("TCP [{src}]:{s} > [{dst}]:{d}"),
        _ => format!("IPv6 {src} > {dst} next-header={nh}"),
    }
}

/// An ICMPv6 message: Neighbor Solicitation and Advertisement in full, others by type.
fn describe_icmpv6(ip: &Ipv6Repr, message: &[u8]) -> String {
    let (src, dst) = (ip.src_addr, ip.dst_addr);
    let Some(&ty) = message.first() else {
        return format!("ICMPv6 {src} > {dst} (truncated)");
    };
    if !matches!(
        ty,
        icmpv6::msg_type::NEIGHBOR_SOLICIT | icmpv6::msg_type::NEIGHBOR_ADVERT
    ) {
        return format!("ICMPv6 type {ty} {src} > {dst}");
    }
    match NdiscRepr::parse(ip, &icmpv6::Packet::new_unchecked(message)) {
        Ok(NdiscRepr::NeighborSolicit {
            target_addr,
            source_lladdr,
        }) => match source_lladdr {
            Some(m) => format!("ND who-has {target_addr} tell {src} at {m}"),
            None => format!("ND who-has {target_addr} tell {src}"),
        },
        Ok(NdiscRepr::NeighborAdvert {
            flags,
            target_addr,
            target_lladdr,
        }) => {
            let mut f = String::new();
            for (set, name) in [
                (flags.router, " R"),
                (flags.solicited, " S"),
                (flags.override_, " O"),
            ] {
                if set {
                    f.push_str(name);
                }
            }
            let at = target_lladdr.map_or_else(|| "?".to_string(), |m| m.to_string());
            format!("ND {target_addr} is-at {at} to {dst}{f}")
        }
        Err(e) => format!("ND type {ty} {src} > {dst} !! MALFORMED ({e})"),
    }
}

fn describe_ipv4(b: &[u8]) -> String {
    let Ok(ip) = ipv4::Packet::new_checked(b) else {
        return format!("IPv4 (malformed, {} bytes)", b.len());
    };
    let (src, dst, proto) = (ip.src_addr(), ip.dst_addr(), ip.protocol());
    let l4 = b.get(ip.header_len()..).unwrap_or_default();
    let ports = l4.get(..4).map(|p| {
        (
            u16::from_be_bytes([p[0], p[1]]),
            u16::from_be_bytes([p[2], p[3]]),
        )
    });
    match (proto, ports) {
        (IPPROTO_UDP, Some((s, d))) => format!("UDP {src}:{s} > {dst}:{d}"),
        (6, Some((s, d))) => format!("TCP {src}:{s} > {dst}:{d}"),
        (1, _) => format!("ICMP {src} > {dst}"),
        _ => format!("IPv4 {src} > {dst} proto={proto}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cm::ip_cm::service_id_for_port;
    use crate::wire::cm_msg::{attr as cm_attr, RejReason};
    use crate::wire::deth::{DethRepr, GSI_QKEY};
    use crate::wire::ethernet::EthernetAddress;
    use crate::wire::psn::Psn;
    use crate::wire::reth::RethRepr;
    use crate::wire::udp::UdpRepr;
    use crate::wire::{AtomicAckEthRepr, BthRepr};
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    fn frame_with(headers: RoceHeaders, payload: &[u8], dst_port: u16) -> Vec<u8> {
        let (eth, ip) = crate::wire::frame::fixtures::eth_ip();
        let mut udp = UdpRepr::rocev2(49153);
        udp.dst_port = dst_port;
        let f = RoceFrame::new(eth, ip, udp, headers, payload).unwrap();
        let mut buf = vec![0u8; f.buffer_len()];
        f.emit(&mut buf).unwrap();
        buf
    }

    fn frame(headers: RoceHeaders, payload: &[u8]) -> Vec<u8> {
        frame_with(headers, payload, ROCEV2_PORT)
    }

    fn bth(op: Opcode) -> BthRepr {
        BthRepr::new(op, 0x11, Psn::new(1234))
    }

    fn text(frame: &[u8]) -> String {
        let s = summarize(frame);
        assert!(s.is_valid(), "{s}");
        s.to_string()
    }

    #[test]
    fn send_with_flags_and_pad() {
        let mut b = bth(Opcode::RC_SEND_ONLY);
        b.ack_req = true;
        b.solicited = true;
        let t = text(&frame(RoceHeaders::new(b), b"hello"));
        assert_eq!(
            t,
            "10.0.0.1:49153 > 10.0.0.2 dscp=26 ecn=ECT(0) RC SEND only QP=0x000011 PSN=1234 A SE pad=3 payload=5"
        );
    }

    #[test]
    fn write_read_and_acks() {
        let reth = RethRepr {
            va: 0xaaab_26b5_8000,
            rkey: 0x220,
            dma_len: 18,
        };
        let t = text(&frame(
            RoceHeaders::new(bth(Opcode::RC_WRITE_ONLY)).with_reth(reth),
            &[0; 18],
        ));
        assert!(
            t.contains("RC RDMA WRITE only QP=0x000011 PSN=1234 pad=2 RETH(va=0xaaab26b58000, rkey=0x220, len=18) payload=18"),
            "{t}"
        );
        let ack = |a| {
            text(&frame(
                RoceHeaders::new(bth(Opcode::RC_ACK)).with_aeth(a),
                &[],
            ))
        };
        assert!(ack(AethRepr::ack(3))
            .ends_with("RC Acknowledge QP=0x000011 PSN=1234 AETH(ACK credits=31 MSN=3)"));
        assert!(ack(AethRepr::nak(NakCode::PsnSequenceError, 3))
            .ends_with("AETH(NAK PSN seq err MSN=3)"));
        assert!(ack(AethRepr::nak(NakCode::RemoteAccessError, 3))
            .ends_with("AETH(NAK remote access err MSN=3)"));
        assert!(ack(AethRepr::rnr_nak(12, 3)).ends_with("AETH(RNR timer=12 0.64ms MSN=3)"));
        assert!(ack(AethRepr::rnr_nak(0, 3)).ends_with("AETH(RNR timer=0 655.36ms MSN=3)"));
    }

    #[test]
    fn imm_ieth_atomics() {
        let t = text(&frame(
            RoceHeaders::new(bth(Opcode::RC_SEND_ONLY_IMM)).with_imm(0xdead_beef),
            &[1, 2, 3, 4],
        ));
        assert!(t.ends_with("IMM=0xdeadbeef payload=4"), "{t}");
        let t = text(&frame(
            RoceHeaders::new(bth(Opcode::RC_SEND_ONLY_INV)).with_ieth(0x1234),
            &[],
        ));
        assert!(t.ends_with("IETH=0x00001234 payload=0"), "{t}");
        let a = AtomicEthRepr {
            va: 0x1000,
            rkey: 0x42,
            swap_add: 5,
            compare: 7,
        };
        let t = text(&frame(
            RoceHeaders::new(bth(Opcode::RC_COMPARE_SWAP)).with_atomic_eth(a),
            &[],
        ));
        assert!(
            t.ends_with("ATOMIC(va=0x1000, rkey=0x42, swap=0x5, cmp=0x7)"),
            "{t}"
        );
        let t = text(&frame(
            RoceHeaders::new(bth(Opcode::RC_FETCH_ADD)).with_atomic_eth(a),
            &[],
        ));
        assert!(t.ends_with("ATOMIC(va=0x1000, rkey=0x42, add=0x5)"), "{t}");
        let t = text(&frame(
            RoceHeaders::new(bth(Opcode::RC_ATOMIC_ACK))
                .with_aeth(AethRepr::ack(9))
                .with_atomic_ack_eth(AtomicAckEthRepr { orig_data: 0x99 }),
            &[],
        ));
        assert!(
            t.ends_with("AETH(ACK credits=31 MSN=9) ATOMIC_ACK(orig=0x99)"),
            "{t}"
        );
    }

    /// A CM message of attribute `attr` with every field zero.
    fn blank_cm(attr: u16) -> CmMessage {
        let mut mad = [0u8; MAD_LEN];
        let mut p = mad::Packet::new_unchecked(&mut mad[..]);
        MadHeader::cm(attr, 1).emit(&mut p);
        CmMessage::parse(&mad).unwrap().1
    }

    fn cm_frame(m: CmMessage) -> Vec<u8> {
        let mut mad = [0u8; MAD_LEN];
        m.emit(&MadHeader::cm(0, 77), &mut mad);
        let b = BthRepr::new(Opcode::UD_SEND_ONLY, GSI_QP, Psn::new(0));
        let d = DethRepr {
            qkey: GSI_QKEY,
            src_qp: 1,
        };
        frame(RoceHeaders::new(b).with_deth(d), &mad)
    }

    #[test]
    fn cm_messages() {
        let CmMessage::Req(mut req) = blank_cm(cm_attr::REQ) else {
            panic!()
        };
        req.local_comm_id = 0xc857_7fdb;
        req.service_id = service_id_for_port(7471);
        req.local_qpn = 0x17;
        req.starting_psn = Psn::new(99);
        req.path_mtu = 3;
        let t = text(&cm_frame(CmMessage::Req(req)));
        assert!(t.contains("UD SEND only QP=0x000001 PSN=0 DETH(qkey=0x80010000 srcQP=0x1) payload=256 CM REQ local_comm_id=0xc8577fdb service_id=0x0000000001061d2f(port 7471) qpn=0x000017 start_psn=99 mtu=1024"), "{t}");
        let CmMessage::Rej(mut rej) = blank_cm(cm_attr::REJ) else {
            panic!()
        };
        rej.local_comm_id = 1;
        rej.remote_comm_id = 2;
        rej.reason = RejReason::InvalidServiceId;
        let t = text(&cm_frame(CmMessage::Rej(rej)));
        assert!(
            t.ends_with("CM REJ(InvalidServiceId 8) local=0x00000001 remote=0x00000002"),
            "{t}"
        );
    }

    #[test]
    fn bad_frames_are_marked() {
        let good = frame(RoceHeaders::new(bth(Opcode::RC_SEND_ONLY)), b"abcd");
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 1;
        let s = summarize(&bad);
        assert_eq!(s.verdict, Verdict::BadIcrc);
        assert!(s.is_roce() && !s.is_valid());
        assert!(
            s.text()
                .starts_with("10.0.0.1:49153 > 10.0.0.2 RC SEND only QP=0x000011 PSN=1234"),
            "{s}"
        );
        assert!(
            s.text().contains("payload=4 !! BAD ICRC (expected 0x"),
            "{s}"
        );

        let s = summarize(&good[..good.len() - 6]);
        assert_eq!(s.verdict, Verdict::BadLength);
        assert!(
            s.text()
                .contains("RC SEND only QP=0x000011 PSN=1234 !! BAD LENGTH (bad IPv4 total length"),
            "{s}"
        );

        let mut bad = good.clone();
        bad[24] ^= 0xff; // IPv4 checksum
        let s = summarize(&bad);
        assert_eq!(s.verdict, Verdict::BadHeader);
        assert!(
            s.text()
                .contains("!! BAD HEADER (bad IPv4 header checksum)"),
            "{s}"
        );
    }

    /// A CNP (annex A17.9.3) as a NIC sends it, and a data packet a switch marked CE.
    #[test]
    fn cnps_and_ecn_codepoints() {
        let (eth, mut ip) = crate::wire::frame::fixtures::eth_ip();
        let mut b = BthRepr::new(Opcode::CNP, 0x11, Psn::new(0));
        b.becn = true;
        for (dscp, ecn, tc) in [
            (48, 0, " dscp=48"),
            (0, 3, " ecn=CE"),
            (0, 1, " ecn=ECT(1)"),
        ] {
            ip.dscp = dscp;
            ip.ecn = ecn;
            let h = RoceHeaders::new(b);
            let f = RoceFrame::new(eth, ip, UdpRepr::rocev2(49153), h, &[]).unwrap();
            let mut buf = vec![0u8; f.buffer_len()];
            f.emit(&mut buf).unwrap();
            assert_eq!(
                text(&buf),
                format!("10.0.0.1:49153 > 10.0.0.2{tc} CNP QP=0x000011 PSN=0 BECN")
            );
        }
    }

    #[test]
    fn extra_ports_and_other_frames() {
        let f = frame_with(RoceHeaders::new(bth(Opcode::RC_SEND_ONLY)), b"abcd", 4792);
        let s = summarize(&f);
        assert_eq!(s.verdict, Verdict::NotRoce);
        assert_eq!(s.text(), "UDP 10.0.0.1:49153 > 10.0.0.2:4792");
        let s = summarize_with_ports(&f, &[4792]);
        assert!(s.is_valid(), "{s}");
        assert!(
            s.text()
                .starts_with("10.0.0.1:49153 > 10.0.0.2:4792 dscp=26 ecn=ECT(0) RC SEND only"),
            "{s}"
        );

        assert_eq!(summarize(&[1, 2, 3]).text(), "runt frame (3 bytes)");
        let mut v6 = f.clone();
        v6[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(
            summarize(&v6).text(),
            format!("IPv6 (malformed, {} bytes)", f.len() - 14)
        );
        assert!(!summarize(&v6).is_roce());
        let roce = frame_with(RoceHeaders::new(bth(Opcode::RC_SEND_ONLY)), b"abcd", 4791);
        let mut tagged = vec![0u8; roce.len() + 4];
        let vlan = crate::net::Vlan::new(Some(42), crate::net::Pcp::Fixed(1)).unwrap();
        assert!(vlan.write_tagged(&roce, &mut tagged));
        let s = summarize(&tagged);
        assert!(s.is_valid(), "{s}");
        assert_eq!(
            s.text(),
            format!("vlan=42 pcp=1 {}", summarize(&roce).text())
        );
        assert_eq!(
            summarize(&tagged[..16]).text(),
            "802.1Q tag cut short (16 bytes)"
        );
    }

    #[test]
    fn arp_frames() {
        let a = ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            source_protocol_addr: Ipv4Addr::new(10, 0, 0, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(10, 0, 0, 2),
        };
        let mut buf = [0u8; 14 + arp::PACKET_LEN];
        buf[12..14].copy_from_slice(&[0x08, 0x06]);
        a.emit(&mut arp::Packet::new_unchecked(&mut buf[14..]))
            .unwrap();
        assert_eq!(summarize(&buf).text(), "ARP who-has 10.0.0.2 tell 10.0.0.1");
        let reply = ArpRepr {
            operation: ArpOperation::Reply,
            ..a
        };
        reply
            .emit(&mut arp::Packet::new_unchecked(&mut buf[14..]))
            .unwrap();
        assert_eq!(
            summarize(&buf).text(),
            "ARP 10.0.0.1 is-at 02:00:00:00:00:01"
        );
    }

    /// RoCEv2/IPv6 (scapy's frames), Neighbor Discovery as `Ndp` sends it, other ICMPv6.
    #[test]
    fn ipv6_frames() {
        use crate::net::NdFrame;
        use crate::wire::frame6::fixtures::{ACK6, SEND6};
        let s = summarize(&SEND6);
        assert!(s.is_valid(), "{s}");
        assert_eq!(
            s.text(),
            "[fd00:77::1]:49153 > fd00:77::2 dscp=26 ecn=ECT(0) RC SEND only QP=0x000011 PSN=5 A pad=3 payload=5"
        );
        assert!(summarize(&ACK6)
            .text()
            .starts_with("[fd00:77::2]:49154 > fd00:77::1 RC Acknowledge QP=0x000022 PSN=5 AETH("));
        let mut bad = SEND6;
        bad[70] ^= 1;
        let s = summarize(&bad);
        assert_eq!(s.verdict, Verdict::BadIcrc);
        assert!(
            s.text()
                .starts_with("[fd00:77::1]:49153 > fd00:77::2 RC SEND only QP=0x000011")
                && s.text().contains("!! BAD ICRC"),
            "{s}"
        );
        let s = summarize(&SEND6[..SEND6.len() - 1]);
        assert_eq!(s.verdict, Verdict::BadLength, "{s}");

        let (mac, a, b) = (
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            "fd00:77::1".parse().unwrap(),
            "fd00:77::2".parse().unwrap(),
        );
        let ns = NdFrame::solicitation(mac, a, b, None);
        assert_eq!(
            summarize(ns.as_bytes()).text(),
            "ND who-has fd00:77::2 tell fd00:77::1 at 02:00:00:00:00:01"
        );
        let na = NdFrame::advertisement(EthernetAddress([2, 0, 0, 0, 0, 2]), b, mac, a);
        assert_eq!(
            summarize(na.as_bytes()).text(),
            "ND fd00:77::2 is-at 02:00:00:00:00:02 to fd00:77::1 S O"
        );
        let mut routed = *ns.as_bytes();
        routed[21] = 64; // hop limit: it crossed a router
        assert_eq!(
            summarize(&routed).text(),
            "ND type 135 fd00:77::1 > ff02::1:ff00:2 !! MALFORMED (bad value in NDP hop limit)"
        );
        let mut echo = *ns.as_bytes();
        echo[54] = 128;
        assert_eq!(
            summarize(&echo).text(),
            "ICMPv6 type 128 fd00:77::1 > ff02::1:ff00:2"
        );
        assert!(!summarize(&echo).is_roce());
    }

    proptest! {
        #[test]
        fn never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let s = summarize_with_ports(&bytes, &[1, 2]);
            prop_assert!(!s.text().is_empty());
        }

        /// Random bytes behind a valid Ethernet/IPv4/UDP-4791 prefix reach the RoCE paths.
        #[test]
        fn never_panics_on_corrupted_roce(
            cut in 0usize..400,
            flips in proptest::collection::vec((0usize..400, any::<u8>()), 0..8),
        ) {
            let mut f = cm_frame(blank_cm(cm_attr::REQ));
            for (at, x) in flips {
                if let Some(b) = f.get_mut(at) {
                    *b ^= x;
                }
            }
            f.truncate(cut);
            let s = summarize(&f);
            prop_assert!(!s.text().is_empty());
            prop_assert_eq!(s.is_roce(), udp_dst_port(&f) == Some(ROCEV2_PORT));
            prop_assert_eq!(s.error.is_some(), s.is_roce() && !s.is_valid());
        }
    }
}
