//! A complete Neighbor Discovery frame as we send it (RFC 4861 over Ethernet, RFC 2464):
//! 14 bytes of Ethernet, the 40-byte IPv6 header (hop limit 255, next header ICMPv6) and a
//! 32-byte Neighbor Solicitation or Advertisement with our link-layer address option, 86 bytes
//! in all (above the Ethernet minimum: no padding).

use crate::wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr};
use crate::wire::icmpv6::{self, NaFlags, NdiscRepr, NDISC_HOP_LIMIT};
use crate::wire::ipv6::{self, Ipv6Repr, IPPROTO_ICMPV6};
use core::fmt;
use std::net::Ipv6Addr;

/// Length of a Neighbor Solicitation or Advertisement frame with a link-layer address option.
pub const ND_FRAME_LEN: usize =
    ethernet::HEADER_LEN + ipv6::HEADER_LEN + icmpv6::NDISC_LEN + icmpv6::LLADDR_OPT_LEN;

/// A Neighbor Solicitation or Advertisement ready to transmit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NdFrame {
    bytes: [u8; ND_FRAME_LEN],
}

impl NdFrame {
    /// Writes the frame of `nd` (which carries its link-layer address option) from `src` to
    /// `dst`, Ethernet `from` to `to`.
    fn new(
        from: EthernetAddress,
        to: EthernetAddress,
        src: Ipv6Addr,
        dst: Ipv6Addr,
        nd: NdiscRepr,
    ) -> NdFrame {
        let mut bytes = [0u8; ND_FRAME_LEN];
        let (e, rest) = bytes.split_at_mut(ethernet::HEADER_LEN);
        let (i, m) = rest.split_at_mut(ipv6::HEADER_LEN);
        let ip = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IPPROTO_ICMPV6,
            dscp: 0,
            ecn: 0,
            flow_label: 0,
            hop_limit: NDISC_HOP_LIMIT,
        };
        let eth = EthernetRepr {
            src_addr: from,
            dst_addr: to,
            ethertype: EtherType::IPV6,
        };
        // Every buffer has exactly the length its header needs and the values fit (the
        // message carries its option: 32 bytes), so emit cannot fail.
        let _ = eth.emit(&mut ethernet::Packet::new_unchecked(e));
        let _ = ip.emit(&mut ipv6::Packet::new_unchecked(i), m.len());
        let _ = nd.emit(&mut icmpv6::Packet::new_unchecked(m), &src, &dst);
        NdFrame { bytes }
    }

    /// "Who has `target`? I am `ip` at `mac`" (RFC 4861 §7.2.2): to the target's
    /// solicited-node group and its Ethernet group, or, to confirm a neighbour whose MAC we hold
    /// (`known`), unicast to that MAC and the target itself (§7.3.3, the PROBE state).
    pub fn solicitation(
        mac: EthernetAddress,
        ip: Ipv6Addr,
        target: Ipv6Addr,
        known: Option<EthernetAddress>,
    ) -> NdFrame {
        let (to, dst) = match known {
            Some(m) => (m, target),
            None => {
                let group = ipv6::solicited_node(target);
                (ipv6::multicast_mac(group), group)
            }
        };
        NdFrame::new(
            mac,
            to,
            ip,
            dst,
            NdiscRepr::NeighborSolicit {
                target_addr: target,
                source_lladdr: Some(mac),
            },
        )
    }

    /// "`ip` is at `mac`", answering a solicitation from `to_ip` at `to_mac` (RFC 4861
    /// §7.2.4): solicited and override, unicast. A solicitation from :: (duplicate address
    /// detection) is answered to all nodes, not solicited.
    pub fn advertisement(
        mac: EthernetAddress,
        ip: Ipv6Addr,
        to_mac: EthernetAddress,
        to_ip: Ipv6Addr,
    ) -> NdFrame {
        let dad = to_ip.is_unspecified();
        let (to, dst) = if dad {
            (ipv6::multicast_mac(ipv6::ALL_NODES), ipv6::ALL_NODES)
        } else {
            (to_mac, to_ip)
        };
        NdFrame::new(
            mac,
            to,
            ip,
            dst,
            NdiscRepr::NeighborAdvert {
                flags: NaFlags {
                    router: false,
                    solicited: !dad,
                    override_: true,
                },
                target_addr: ip,
                target_lladdr: Some(mac),
            },
        )
    }

    /// The frame's bytes.
    pub fn as_bytes(&self) -> &[u8; ND_FRAME_LEN] {
        &self.bytes
    }

    /// The Ethernet header.
    pub fn ethernet(&self) -> EthernetRepr {
        EthernetRepr::from_bytes(
            self.bytes
                .first_chunk()
                .unwrap_or(&[0; ethernet::HEADER_LEN]),
        )
    }

    /// The IPv6 header.
    pub fn ipv6(&self) -> Ipv6Repr {
        Ipv6Repr::from_header(
            self.bytes[ethernet::HEADER_LEN..]
                .first_chunk()
                .unwrap_or(&[0; ipv6::HEADER_LEN]),
        )
    }

    /// The Neighbor Discovery message (always valid: we built it).
    pub fn ndisc(&self) -> NdiscRepr {
        let m = &self.bytes[ethernet::HEADER_LEN + ipv6::HEADER_LEN..];
        NdiscRepr::parse(&self.ipv6(), &icmpv6::Packet::new_unchecked(m)).unwrap_or(
            NdiscRepr::NeighborSolicit {
                target_addr: Ipv6Addr::UNSPECIFIED,
                source_lladdr: None,
            },
        )
    }
}

impl fmt::Debug for NdFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = self.ipv6();
        match self.ndisc() {
            NdiscRepr::NeighborSolicit { target_addr, .. } => write!(
                f,
                "NdFrame(who has {target_addr}? tell {} at {}, to {})",
                ip.src_addr,
                self.ethernet().src_addr,
                ip.dst_addr
            ),
            NdiscRepr::NeighborAdvert {
                flags, target_addr, ..
            } => write!(
                f,
                "NdFrame({target_addr} is at {}, to {}{})",
                self.ethernet().src_addr,
                ip.dst_addr,
                if flags.solicited { ", solicited" } else { "" }
            ),
        }
    }
}
