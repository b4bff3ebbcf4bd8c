//! RX steering by destination QPN, for ports that cannot steer RoCEv2 by themselves: the PMDs
//! used here (net_af_packet, net_tap, net_memif) have no RSS or flow rule that matches on the
//! BTH (net_af_packet's several queues are filled by the kernel's fanout hash), so the shard
//! that receives a frame decides who owns it (docs/DESIGN.md "The engine": QPNs encode the shard).
//!
//! Rules: QP1 (CM MADs, IBTA vol. 1 §13.5) and every non-RoCEv2 frame belong to shard 0, which
//! runs the neighbour layer and the CM; ARP replies also go to every other shard so that their
//! neighbour tables learn the peers they asked for; a RoCEv2 frame to QPN `n` belongs to shard
//! `n % shards`. The classifier only reads fixed offsets with bounds checks and never panics;
//! full validation (checksums, ICRC) stays with the owning shard's `Host`.

/// UDP destination port of RoCEv2 (IANA 4791).
const ROCEV2_UDP_PORT: u16 = 4791;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETH_HEADER_LEN: usize = 14;
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
    /// An ARP reply: shard 0 handles it, every other shard learns from a copy.
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
        Some(ETHERTYPE_IPV4) => {
            Steer::Shard(roce_dest_qpn(frame).map_or(0, |q| shard_of_qpn(q, shards)))
        }
        _ => Steer::Shard(0),
    }
}

/// The BTH destination QP of an IPv4/UDP/4791 frame, if the headers are long enough to hold it.
pub fn roce_dest_qpn(frame: &[u8]) -> Option<u32> {
    let ip = frame.get(ETH_HEADER_LEN..)?;
    let ihl = usize::from(ip.first()? & 0x0f) * 4;
    if ihl < 20 || *ip.get(9)? != IPPROTO_UDP {
        return None;
    }
    let udp = ip.get(ihl..)?;
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
}
