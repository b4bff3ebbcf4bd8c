//! ICMPv6 (RFC 4443): the message header and checksum (§2.1, §2.3), and the two Neighbor
//! Discovery messages a port resolves addresses with (RFC 4861): Neighbor Solicitation (§4.3)
//! and Neighbor Advertisement (§4.4), with the source/target link-layer address options
//! (§4.6.1, Ethernet form RFC 2464 §8). Router Discovery, Redirect and the other ICMPv6
//! messages are read as far as their type, never parsed.
//!
//! [`NdiscRepr::parse`] applies the validity checks of RFC 4861 §7.1.1 and §7.1.2 that need
//! only the packet: hop limit 255 (the message cannot have crossed a router), checksum, code 0,
//! length, a unicast target, options of non-zero length, and the rules for an unspecified
//! source (DAD) and a multicast destination.

use super::ethernet::EthernetAddress;
use super::ipv4::ones_complement_sum;
use super::ipv6::{self, Ipv6Repr, IPPROTO_ICMPV6};
use super::{check_len, check_room, get_u16, set_u16, Result, WireError};
use std::net::Ipv6Addr;

/// ICMPv6 message types (RFC 4443 §2.1, RFC 4861 §4).
pub mod msg_type {
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
    pub const ROUTER_SOLICIT: u8 = 133;
    pub const ROUTER_ADVERT: u8 = 134;
    pub const NEIGHBOR_SOLICIT: u8 = 135;
    pub const NEIGHBOR_ADVERT: u8 = 136;
    pub const REDIRECT: u8 = 137;
}

/// Neighbor Discovery option types (RFC 4861 §4.6).
pub mod option {
    pub const SOURCE_LLADDR: u8 = 1;
    pub const TARGET_LLADDR: u8 = 2;
}

/// Offsets of the fields of a Neighbor Solicitation or Advertisement.
pub mod field {
    use core::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    /// Neighbor Advertisement: R, S, O flags in the top three bits; reserved in a Solicitation.
    pub const FLAGS: usize = 4;
    pub const TARGET: Range<usize> = 8..24;
    pub const OPTIONS: usize = 24;
}

/// ICMPv6 header length (type, code, checksum).
pub const HEADER_LEN: usize = 4;

/// A Neighbor Solicitation or Advertisement without options.
pub const NDISC_LEN: usize = field::OPTIONS;

/// A link-layer address option for Ethernet: type, length 1 (8 bytes), the MAC.
pub const LLADDR_OPT_LEN: usize = 8;

/// The hop limit every Neighbor Discovery message is sent with and must arrive with (RFC 4861
/// §7.1.1: a message that crossed a router was not sent on this link).
pub const NDISC_HOP_LIMIT: u8 = 255;

/// Neighbor Advertisement flag bits (RFC 4861 §4.4).
const FLAG_ROUTER: u8 = 0x80;
const FLAG_SOLICITED: u8 = 0x40;
const FLAG_OVERRIDE: u8 = 0x20;

/// A view of an ICMPv6 message (the whole IPv6 payload).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Fails if the buffer is shorter than the 4-byte ICMPv6 header. The Neighbor Discovery
    /// fields are checked by [`NdiscRepr::parse`].
    pub fn new_checked(buffer: T) -> Result<Self> {
        check_len("ICMPv6 header", buffer.as_ref(), HEADER_LEN)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }
    pub fn checksum(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    /// Neighbor Advertisement flags byte (needs 5 bytes).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// The target address of a Solicitation or Advertisement (needs 24 bytes).
    pub fn target_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::TARGET]);
        Ipv6Addr::from(a)
    }
    /// The options after a Solicitation or Advertisement (empty if shorter).
    pub fn options(&self) -> &[u8] {
        self.buffer.as_ref().get(field::OPTIONS..).unwrap_or(&[])
    }

    /// The checksum the message should carry from `src` to `dst` (RFC 4443 §2.3: over the
    /// IPv6 pseudo-header and the whole message, the checksum field taken as zero).
    pub fn compute_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> u16 {
        let d = self.buffer.as_ref();
        let len = u32::try_from(d.len()).unwrap_or(u32::MAX);
        let mut acc = ipv6::pseudo_header_sum(src, dst, len, IPPROTO_ICMPV6);
        acc += u32::from(ones_complement_sum(d, 0));
        acc += u32::from(!self.checksum());
        !ones_complement_sum(&[], acc)
    }

    /// True when the checksum is correct for a message from `src` to `dst`.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let d = self.buffer.as_ref();
        let len = u32::try_from(d.len()).unwrap_or(u32::MAX);
        let acc = ipv6::pseudo_header_sum(src, dst, len, IPPROTO_ICMPV6);
        ones_complement_sum(d, acc) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    pub fn set_msg_type(&mut self, v: u8) {
        self.buffer.as_mut()[field::TYPE] = v;
    }
    pub fn set_code(&mut self, v: u8) {
        self.buffer.as_mut()[field::CODE] = v;
    }
    pub fn set_checksum(&mut self, v: u16) {
        set_u16(self.buffer.as_mut(), field::CHECKSUM, v);
    }
    /// Fills the checksum of the message (its length is the buffer's) from `src` to `dst`.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }
}

/// The flags of a Neighbor Advertisement (RFC 4861 §4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NaFlags {
    /// R: the sender is a router.
    pub router: bool,
    /// S: sent in answer to a Solicitation (a reachability confirmation).
    pub solicited: bool,
    /// O: the advertisement should override a cached link-layer address.
    pub override_: bool,
}

impl NaFlags {
    fn to_byte(self) -> u8 {
        (if self.router { FLAG_ROUTER } else { 0 })
            | (if self.solicited { FLAG_SOLICITED } else { 0 })
            | (if self.override_ { FLAG_OVERRIDE } else { 0 })
    }
    fn from_byte(b: u8) -> Self {
        NaFlags {
            router: b & FLAG_ROUTER != 0,
            solicited: b & FLAG_SOLICITED != 0,
            override_: b & FLAG_OVERRIDE != 0,
        }
    }
}

/// A Neighbor Solicitation or Advertisement on Ethernet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdiscRepr {
    /// "Who has `target_addr`? I am at `source_lladdr`" (absent from a DAD probe).
    NeighborSolicit {
        target_addr: Ipv6Addr,
        source_lladdr: Option<EthernetAddress>,
    },
    /// "`target_addr` is at `target_lladdr`".
    NeighborAdvert {
        flags: NaFlags,
        target_addr: Ipv6Addr,
        target_lladdr: Option<EthernetAddress>,
    },
}

impl NdiscRepr {
    /// The target address of either message.
    pub fn target_addr(&self) -> Ipv6Addr {
        match *self {
            NdiscRepr::NeighborSolicit { target_addr, .. }
            | NdiscRepr::NeighborAdvert { target_addr, .. } => target_addr,
        }
    }

    /// The link-layer address option of either message, if present.
    pub fn lladdr(&self) -> Option<EthernetAddress> {
        match *self {
            NdiscRepr::NeighborSolicit { source_lladdr, .. } => source_lladdr,
            NdiscRepr::NeighborAdvert { target_lladdr, .. } => target_lladdr,
        }
    }

    /// Parses a Neighbor Solicitation or Advertisement that arrived in the IPv6 packet `ip`
    /// (its fields; the next header must be ICMPv6), with the validity checks of RFC 4861
    /// §7.1.1 and §7.1.2 (module documentation). Any other ICMPv6 message is
    /// `BadValue("ICMPv6 type")`. Unknown options are skipped (RFC 4861 §4.6); a repeated
    /// link-layer option keeps the first.
    pub fn parse<T: AsRef<[u8]>>(ip: &Ipv6Repr, packet: &Packet<T>) -> Result<Self> {
        let d = packet.buffer.as_ref();
        check_len("ICMPv6 header", d, HEADER_LEN)?;
        let ty = packet.msg_type();
        let (want_opt, solicit) = match ty {
            msg_type::NEIGHBOR_SOLICIT => (option::SOURCE_LLADDR, true),
            msg_type::NEIGHBOR_ADVERT => (option::TARGET_LLADDR, false),
            _ => return Err(WireError::BadValue("ICMPv6 type")),
        };
        if ip.next_header != IPPROTO_ICMPV6 {
            return Err(WireError::BadValue("IPv6 next header"));
        }
        if ip.hop_limit != NDISC_HOP_LIMIT {
            return Err(WireError::BadValue("NDP hop limit"));
        }
        if !packet.verify_checksum(&ip.src_addr, &ip.dst_addr) {
            return Err(WireError::BadValue("ICMPv6 checksum"));
        }
        if packet.code() != 0 {
            return Err(WireError::BadValue("ICMPv6 code"));
        }
        check_len("NDP message", d, NDISC_LEN)?;
        let target_addr = packet.target_addr();
        if target_addr.is_multicast() {
            return Err(WireError::BadValue("NDP target address"));
        }
        let lladdr = link_layer_option(packet.options(), want_opt)?;
        if solicit {
            // A DAD probe (RFC 4861 §7.1.1): from ::, to the target's solicited-node group,
            // without a source link-layer address.
            if ip.src_addr.is_unspecified()
                && (ip.dst_addr != ipv6::solicited_node(target_addr) || lladdr.is_some())
            {
                return Err(WireError::BadValue("NDP solicitation from ::"));
            }
            Ok(NdiscRepr::NeighborSolicit {
                target_addr,
                source_lladdr: lladdr,
            })
        } else {
            let flags = NaFlags::from_byte(packet.flags());
            if ip.dst_addr.is_multicast() && flags.solicited {
                return Err(WireError::BadValue(
                    "NDP solicited advertisement to multicast",
                ));
            }
            Ok(NdiscRepr::NeighborAdvert {
                flags,
                target_addr,
                target_lladdr: lladdr,
            })
        }
    }

    /// Length of the ICMPv6 message `emit` writes.
    pub fn buffer_len(&self) -> usize {
        NDISC_LEN
            + if self.lladdr().is_some() {
                LLADDR_OPT_LEN
            } else {
                0
            }
    }

    /// Writes the message into `packet` (exactly [`buffer_len`](Self::buffer_len) bytes are
    /// checksummed: give a buffer of that length) with the checksum for `src` to `dst`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
    ) -> Result<()> {
        let len = self.buffer_len();
        check_room(packet.buffer.as_ref(), len)?;
        let b = &mut packet.buffer.as_mut()[..len];
        b.fill(0);
        let (ty, flags, opt) = match *self {
            NdiscRepr::NeighborSolicit { .. } => {
                (msg_type::NEIGHBOR_SOLICIT, 0, option::SOURCE_LLADDR)
            }
            NdiscRepr::NeighborAdvert { flags, .. } => (
                msg_type::NEIGHBOR_ADVERT,
                flags.to_byte(),
                option::TARGET_LLADDR,
            ),
        };
        b[field::TYPE] = ty;
        b[field::FLAGS] = flags;
        b[field::TARGET].copy_from_slice(&self.target_addr().octets());
        if let Some(mac) = self.lladdr() {
            let o = &mut b[field::OPTIONS..field::OPTIONS + LLADDR_OPT_LEN];
            o[0] = opt;
            o[1] = 1;
            o[2..].copy_from_slice(mac.as_bytes());
        }
        Packet::new_unchecked(b).fill_checksum(src, dst);
        Ok(())
    }
}

/// The first link-layer address option of type `kind` in `opts`. Every option must have a
/// non-zero length that fits (RFC 4861 §4.6, §7.1.1); an Ethernet link-layer option is 8 bytes
/// long (RFC 2464 §8).
fn link_layer_option(mut opts: &[u8], kind: u8) -> Result<Option<EthernetAddress>> {
    let mut found = None;
    while !opts.is_empty() {
        let [ty, units, ..] = *opts else {
            return Err(WireError::BadValue("NDP option length"));
        };
        let len = usize::from(units) * 8;
        if len == 0 || len > opts.len() {
            return Err(WireError::BadValue("NDP option length"));
        }
        if ty == kind && found.is_none() {
            if len != LLADDR_OPT_LEN {
                return Err(WireError::BadValue("NDP link-layer address option"));
            }
            found = EthernetAddress::from_bytes(&opts[2..8]);
        }
        opts = &opts[len..];
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv6::solicited_node;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    const LINUX_MAC: EthernetAddress = EthernetAddress([0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12]);

    /// A Neighbor Solicitation for fd00:77::1 from fd00:77::2 (52:54:00:8b:2d:12), as Linux
    /// sends it to the target's solicited-node group ff02::1:ff00:1; the checksum 0xfeb9 is the one
    /// scapy 2.8 computes for this message.
    #[rustfmt::skip]
    const NS: [u8; 32] = [
        135, 0, 0xfe, 0xb9, 0, 0, 0, 0, // type, code, checksum, reserved
        0xfd, 0x00, 0x00, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // target
        1, 1, 0x52, 0x54, 0x00, 0x8b, 0x2d, 0x12, // source link-layer address
    ];

    fn ns_ip() -> Ipv6Repr {
        Ipv6Repr {
            next_header: IPPROTO_ICMPV6,
            hop_limit: 255,
            ..Ipv6Repr::rocev2(a("fd00:77::2"), solicited_node(a("fd00:77::1")), 255)
        }
    }

    #[test]
    fn solicitation_parses_and_emits_byte_for_byte() {
        let p = Packet::new_checked(&NS[..]).unwrap();
        let want = NdiscRepr::NeighborSolicit {
            target_addr: a("fd00:77::1"),
            source_lladdr: Some(LINUX_MAC),
        };
        assert_eq!(NdiscRepr::parse(&ns_ip(), &p), Ok(want));
        assert_eq!(want.buffer_len(), 32);
        let mut out = [0xa5u8; 32];
        want.emit(
            &mut Packet::new_unchecked(&mut out[..]),
            &ns_ip().src_addr,
            &ns_ip().dst_addr,
        )
        .unwrap();
        assert_eq!(out, NS);
    }

    #[test]
    fn advertisement_round_trips_with_flags() {
        let (src, dst) = (a("fd00:77::1"), a("fd00:77::2"));
        let ip = Ipv6Repr {
            next_header: IPPROTO_ICMPV6,
            ..Ipv6Repr::rocev2(src, dst, 255)
        };
        for (r, s, o) in [
            (false, true, true),
            (true, false, false),
            (false, false, true),
        ] {
            let na = NdiscRepr::NeighborAdvert {
                flags: NaFlags {
                    router: r,
                    solicited: s,
                    override_: o,
                },
                target_addr: src,
                target_lladdr: Some(EthernetAddress([2, 0, 0, 0, 0, 1])),
            };
            let mut b = [0u8; 32];
            na.emit(&mut Packet::new_unchecked(&mut b[..]), &src, &dst)
                .unwrap();
            assert_eq!(b[0], 136);
            assert_eq!(b[4] >> 5, u8::from(r) << 2 | u8::from(s) << 1 | u8::from(o));
            assert_eq!(b[24..26], [2, 1], "target link-layer address option");
            assert_eq!(
                NdiscRepr::parse(&ip, &Packet::new_checked(&b[..]).unwrap()),
                Ok(na)
            );
        }
    }

    /// RFC 4861 §7.1.1/§7.1.2, one case each: what a node must silently discard.
    #[test]
    fn invalid_messages_are_refused() {
        let good_ip = ns_ip();
        let check = |what: &str, ip: Ipv6Repr, b: &[u8], want: &'static str| {
            let got = Packet::new_checked(b).and_then(|p| NdiscRepr::parse(&ip, &p));
            assert_eq!(got, Err(WireError::BadValue(want)), "{what}");
        };
        let refill = |mut b: Vec<u8>, ip: &Ipv6Repr| {
            Packet::new_unchecked(&mut b[..]).fill_checksum(&ip.src_addr, &ip.dst_addr);
            b
        };
        // Hop limit 254: it crossed a router.
        check(
            "hop limit",
            Ipv6Repr {
                hop_limit: 254,
                ..good_ip
            },
            &NS,
            "NDP hop limit",
        );
        let mut bad = NS;
        bad[31] ^= 1;
        check("checksum", good_ip, &bad, "ICMPv6 checksum");
        let mut code = NS.to_vec();
        code[1] = 1;
        check("code", good_ip, &refill(code, &good_ip), "ICMPv6 code");
        let mut mc = NS.to_vec();
        mc[8] = 0xff;
        check(
            "multicast target",
            good_ip,
            &refill(mc, &good_ip),
            "NDP target address",
        );
        let mut zero_opt = NS.to_vec();
        zero_opt[25] = 0;
        check(
            "option length 0",
            good_ip,
            &refill(zero_opt, &good_ip),
            "NDP option length",
        );
        let mut long_opt = NS.to_vec();
        long_opt[25] = 2;
        check(
            "option beyond",
            good_ip,
            &refill(long_opt, &good_ip),
            "NDP option length",
        );
        let dad = Ipv6Repr {
            src_addr: Ipv6Addr::UNSPECIFIED,
            ..good_ip
        };
        check(
            "DAD with SLLA",
            dad,
            &refill(NS.to_vec(), &dad),
            "NDP solicitation from ::",
        );
        let mut rs = NS.to_vec();
        rs[0] = msg_type::ROUTER_SOLICIT;
        check(
            "router solicitation",
            good_ip,
            &refill(rs, &good_ip),
            "ICMPv6 type",
        );
        // A solicited advertisement to a multicast group.
        let na = NdiscRepr::NeighborAdvert {
            flags: NaFlags {
                solicited: true,
                ..NaFlags::default()
            },
            target_addr: a("fd00:77::2"),
            target_lladdr: None,
        };
        let ip = Ipv6Repr {
            dst_addr: ipv6::ALL_NODES,
            ..good_ip
        };
        let mut b = [0u8; 24];
        na.emit(
            &mut Packet::new_unchecked(&mut b[..]),
            &ip.src_addr,
            &ip.dst_addr,
        )
        .unwrap();
        check(
            "solicited to all nodes",
            ip,
            &b,
            "NDP solicited advertisement to multicast",
        );
        // Short messages: never a panic.
        for n in 0..NS.len() {
            let _ = Packet::new_checked(&NS[..n]).and_then(|p| NdiscRepr::parse(&good_ip, &p));
        }
        for n in HEADER_LEN..NDISC_LEN {
            let short = refill(NS[..n].to_vec(), &good_ip);
            let got = NdiscRepr::parse(&good_ip, &Packet::new_checked(&short[..]).unwrap());
            assert!(
                matches!(got, Err(WireError::Truncated { .. })),
                "{n} bytes: {got:?}"
            );
        }
    }

    /// A DAD probe (from ::, to the solicited-node group, no option) is valid; unknown
    /// options are skipped.
    #[test]
    fn dad_probe_and_unknown_options() {
        let target = a("fd00:77::1");
        let ip = Ipv6Repr {
            src_addr: Ipv6Addr::UNSPECIFIED,
            ..ns_ip()
        };
        let probe = NdiscRepr::NeighborSolicit {
            target_addr: target,
            source_lladdr: None,
        };
        let mut b = [0u8; 24];
        probe
            .emit(
                &mut Packet::new_unchecked(&mut b[..]),
                &ip.src_addr,
                &ip.dst_addr,
            )
            .unwrap();
        assert_eq!(
            NdiscRepr::parse(&ip, &Packet::new_checked(&b[..]).unwrap()),
            Ok(probe)
        );
        // A nonce option (type 14, RFC 3971 style) before the link-layer address.
        let mut with_nonce = NS[..24].to_vec();
        with_nonce.extend_from_slice(&[14, 1, 1, 2, 3, 4, 5, 6]);
        with_nonce.extend_from_slice(&NS[24..]);
        let ip = ns_ip();
        Packet::new_unchecked(&mut with_nonce[..]).fill_checksum(&ip.src_addr, &ip.dst_addr);
        let got = NdiscRepr::parse(&ip, &Packet::new_checked(&with_nonce[..]).unwrap());
        assert_eq!(got.map(|r| r.lladdr()), Ok(Some(LINUX_MAC)));
    }
}
