//! RX steering by destination QPN, for ports that cannot steer RoCEv2 by themselves: the PMDs
//! used here (net_af_packet, net_tap, net_memif) have no RSS or flow rule that matches on the
//! BTH (net_af_packet's several queues are filled by the kernel's fanout hash), so the shard
//! that receives a frame decides who owns it (docs/DESIGN.md "The engine": QPNs encode the shard).
//!
//! Rules: QP1 (CM MADs, IBTA vol. 1 §13.5) and every non-RoCEv2 frame belong to shard 0, which
//! runs the neighbour layer and the CM; ARP replies and Neighbor Advertisements (RFC 4861 §4.4)
//! also go to every other shard so that their neighbour caches learn the peers they asked for;
//! a RoCEv2 frame to QPN `n`, over IPv4 or over IPv6 without extension headers (RoCEv2 carries
//! none), belongs to shard `n % shards`. The classifier only reads fixed offsets with bounds
//! checks and never panics; full validation (checksums, ICRC) stays with the owning shard's
//! `Host`.

/// UDP destination port of RoCEv2 (IANA 4791).
const ROCEV2_UDP_PORT: u16 = 4791;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETH_HEADER_LEN: usize = 14;
/// The fixed IPv6 header (RFC 8200 §3) and its next header field.
const IPV6_HEADER_LEN: usize = 40;
const IPV6_NEXT_HEADER_OFFSET: usize = 6;
const IPPROTO_ICMPV6: u8 = 58;
/// ICMPv6 type of a Neighbor Advertisement (RFC 4861 §4.4).
const ND_ADVERTISEMENT: u8 = 136;
/// ARP operation field offset in the ARP packet (RFC 826); 2 is a reply.
const ARP_OPER_OFFSET: usize = 6;
const ARP_OPER_REPLY: u16 = 2;
const UDP_HEADER_LEN: usize = 8;
const IPPROTO_UDP: u8 = 17;

/// Where a received frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Steer {
    /// The shard that owns it.
    Shard(usize),
    /// An ARP reply or a Neighbor Advertisement: shard 0 handles it, every other shard learns
    /// from a copy.
    ArpReply,
}

/// The shard that owns QPN `qpn` among `shards` (QPN low part modulo the shard count).
pub fn shard_of_qpn(qpn: u32, shards: usize) -> usize {
    if shards <= 1 || qpn == crate::cm::CM_QPN {
        0
    } else {
        (qpn as usize) % shards
    }
}

/// Classifies a received Ethernet frame.
pub fn classify(frame: &[u8], shards: usize) -> Steer {
    if shards <= 1 {
        return Steer::Shard(0);
    }
    let be16 = |at: usize| -> Option<u16> {
        Some(u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]))
    };
    match be16(12) {
        Some(ETHERTYPE_ARP) => {
            if be16(ETH_HEADER_LEN + ARP_OPER_OFFSET) == Some(ARP_OPER_REPLY) {
                Steer::ArpReply
            } else {
                Steer::Shard(0)
            }
        }
        Some(ETHERTYPE_IPV6) if is_neighbor_advertisement(frame) => Steer::ArpReply,
        Some(ETHERTYPE_IPV4 | ETHERTYPE_IPV6) => {
            Steer::Shard(roce_dest_qpn(frame).map_or(0, |q| shard_of_qpn(q, shards)))
        }
        _ => Steer::Shard(0),
    }
}

/// True for an IPv6 frame whose next header is ICMPv6 and whose message is a Neighbor
/// Advertisement (type 136).
fn is_neighbor_advertisement(frame: &[u8]) -> bool {
    frame.get(ETH_HEADER_LEN + IPV6_NEXT_HEADER_OFFSET) == Some(&IPPROTO_ICMPV6)
        && frame.get(ETH_HEADER_LEN + IPV6_HEADER_LEN) == Some(&ND_ADVERTISEMENT)
}

/// The BTH destination QP of an IPv4/UDP/4791 frame, or of an IPv6/UDP/4791 frame without
/// extension headers, if the headers are long enough to hold it.
pub fn roce_dest_qpn(frame: &[u8]) -> Option<u32> {
    let ip = frame.get(ETH_HEADER_LEN..)?;
    let udp = match u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]) {
        ETHERTYPE_IPV4 => {
            let ihl = usize::from(ip.first()? & 0x0f) * 4;
            if ihl < 20 || *ip.get(9)? != IPPROTO_UDP {
                return None;
            }
            ip.get(ihl..)?
        }
        ETHERTYPE_IPV6 => {
            if *ip.get(IPV6_NEXT_HEADER_OFFSET)? != IPPROTO_UDP {
                return None;
            }
            ip.get(IPV6_HEADER_LEN..)?
        }
        _ => return None,
    };
    if u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]) != ROCEV2_UDP_PORT {
        return None;
    }
    // BTH (IBTA vol. 1 §9.2): opcode, flags, P_Key (2), reserved, DestQP (3 bytes).
    let bth = udp.get(UDP_HEADER_LEN..UDP_HEADER_LEN + 8)?;
    Some(u32::from_be_bytes([0, bth[5], bth[6], bth[7]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roce_frame(dest_qpn: u32) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 8 + 12];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[14 + 9] = IPPROTO_UDP;
        f[34 + 2..34 + 4].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
        f[42 + 5..42 + 8].copy_from_slice(&dest_qpn.to_be_bytes()[1..]);
        f
    }

    #[test]
    fn roce_frames_go_to_the_shard_of_their_qpn_and_qp1_to_shard_0() {
        assert_eq!(classify(&roce_frame(0x12), 2), Steer::Shard(0));
        assert_eq!(classify(&roce_frame(0x13), 2), Steer::Shard(1));
        assert_eq!(classify(&roce_frame(0x17), 3), Steer::Shard(2));
        assert_eq!(classify(&roce_frame(1), 3), Steer::Shard(0));
        assert_eq!(classify(&roce_frame(0x13), 1), Steer::Shard(0));
    }

    #[test]
    fn arp_replies_are_copied_and_everything_odd_goes_to_shard_0() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
        arp[20..22].copy_from_slice(&2u16.to_be_bytes());
        assert_eq!(classify(&arp, 2), Steer::ArpReply);
        arp[20..22].copy_from_slice(&1u16.to_be_bytes());
        assert_eq!(classify(&arp, 2), Steer::Shard(0));
        // Truncated at every length: never panics; shard 0 until the DestQP field is whole
        // (Ethernet 14 + IPv4 20 + UDP 8 + BTH up to DestQP 8 = 50 bytes).
        let f = roce_frame(0x13);
        for n in 0..f.len() {
            let want = if n >= 50 {
                Steer::Shard(1)
            } else {
                Steer::Shard(0)
            };
            assert_eq!(classify(&f[..n], 2), want, "len {n}");
        }
        let mut udp_other_port = roce_frame(0x13);
        udp_other_port[36..38].copy_from_slice(&53u16.to_be_bytes());
        assert_eq!(classify(&udp_other_port, 2), Steer::Shard(0));
    }

    /// [`roce_frame`] over IPv6: Ethernet 14, IPv6 40 (next header UDP), UDP 8, BTH.
    fn roce_frame6(dest_qpn: u32) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 8 + 12];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        f[14] = 0x60;
        f[14 + 6] = IPPROTO_UDP;
        f[54 + 2..54 + 4].copy_from_slice(&ROCEV2_UDP_PORT.to_be_bytes());
        f[62 + 5..62 + 8].copy_from_slice(&dest_qpn.to_be_bytes()[1..]);
        f
    }

    #[test]
    fn ipv6_roce_goes_to_the_shard_of_its_qpn_behind_the_fixed_header_only() {
        assert_eq!(classify(&roce_frame6(0x13), 2), Steer::Shard(1));
        assert_eq!(classify(&roce_frame6(0x17), 3), Steer::Shard(2));
        assert_eq!(classify(&roce_frame6(1), 3), Steer::Shard(0));
        assert_eq!(roce_dest_qpn(&roce_frame6(0xabcdef)), Some(0xabcdef));
        // The real thing: scapy's RC SEND Only to QP 0x11.
        let send6 = crate::wire::frame6::fixtures::SEND6;
        assert_eq!(roce_dest_qpn(&send6), Some(0x11));
        assert_eq!(classify(&send6, 2), Steer::Shard(1));
        // Where an IPv4 header would put the BTH (offset 42) nothing is read.
        let mut v4_offsets = roce_frame6(0x12);
        v4_offsets[42 + 5..42 + 8].copy_from_slice(&0x13u32.to_be_bytes()[1..]);
        assert_eq!(classify(&v4_offsets, 2), Steer::Shard(0));
        // Behind an extension header (hop-by-hop): not RoCEv2 here, shard 0 drops it.
        let mut ext = roce_frame6(0x13);
        ext[14 + 6] = 0;
        assert_eq!(roce_dest_qpn(&ext), None);
        assert_eq!(classify(&ext, 2), Steer::Shard(0));
        // Truncated at every length: never panics; shard 0 until DestQP is whole (62 + 8).
        let f = roce_frame6(0x13);
        for n in 0..f.len() {
            let want = Steer::Shard(if n >= 70 { 1 } else { 0 });
            assert_eq!(classify(&f[..n], 2), want, "len {n}");
        }
        // Not IP at all: nothing read behind it.
        let mut other = roce_frame(0x13);
        other[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
        assert_eq!(roce_dest_qpn(&other), None);
    }

    #[test]
    fn neighbor_advertisements_are_copied_solicitations_go_to_shard_0() {
        let mut nd = vec![0u8; 86];
        nd[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        nd[14] = 0x60;
        nd[14 + 6] = IPPROTO_ICMPV6;
        nd[54] = ND_ADVERTISEMENT;
        assert_eq!(classify(&nd, 2), Steer::ArpReply);
        assert_eq!(classify(&nd, 1), Steer::Shard(0));
        nd[54] = 135; // a solicitation: shard 0 answers it
        assert_eq!(classify(&nd, 2), Steer::Shard(0));
        assert_eq!(classify(&nd[..54], 2), Steer::Shard(0));
    }
}
