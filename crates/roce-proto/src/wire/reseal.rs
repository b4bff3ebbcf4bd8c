//! Resealing an edited frame: after a test or a fuzzer changed bytes of an untagged Ethernet /
//! IPv4 / UDP frame, make its lengths, IPv4 header checksum and (for RoCEv2) ICRC consistent
//! again, so the frame passes the checks that guard the layers behind them and the edit
//! reaches the transport or the CM.

use super::icrc::icrc_parts;
use super::{ethernet, ipv4, udp};

const IP: usize = ethernet::HEADER_LEN;
const UDP: usize = IP + ipv4::HEADER_LEN;
const PAYLOAD: usize = UDP + udp::HEADER_LEN;
/// Smallest RoCEv2 frame: a BTH and the ICRC behind the UDP header.
const MIN_ROCE: usize = PAYLOAD + 12 + 4;

/// Sets the IPv4 total length and the UDP length from the frame's size. Whether the frame is
/// long enough to hold both headers.
pub fn fix_lengths(frame: &mut [u8]) -> bool {
    if frame.len() < PAYLOAD || frame.len() - IP > usize::from(u16::MAX) {
        return false;
    }
    let ip_len = (frame.len() - IP) as u16;
    frame[IP + 2..IP + 4].copy_from_slice(&ip_len.to_be_bytes());
    let udp_len = (frame.len() - UDP) as u16;
    frame[UDP + 4..UDP + 6].copy_from_slice(&udp_len.to_be_bytes());
    true
}

/// A correct IPv4 header checksum and ICRC (the last four bytes) over what an IPv4 frame with at
/// least a BTH behind its UDP header now holds. Whether the frame was resealed.
pub fn reseal(frame: &mut [u8]) -> bool {
    if frame.len() < MIN_ROCE || frame[12..14] != [0x08, 0x00] {
        return false;
    }
    ipv4::Packet::new_unchecked(&mut frame[IP..UDP]).fill_checksum();
    let end = frame.len() - 4;
    match icrc_parts(&frame[IP..end], &[]) {
        Ok(icrc) => {
            frame[end..].copy_from_slice(&icrc.to_le_bytes());
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::RoceFrame;

    /// An RDMA WRITE frame edited in its payload parses again once resealed, not before.
    #[test]
    fn an_edited_frame_parses_only_after_resealing() {
        use crate::wire::{
            BthRepr, EtherType, EthernetAddress, EthernetRepr, Ipv4Repr, Opcode, Psn, RethRepr,
            RoceHeaders, UdpRepr, IPPROTO_UDP,
        };
        let eth = EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::IPV4,
        };
        let ip = Ipv4Repr {
            src_addr: [10, 0, 0, 1].into(),
            dst_addr: [10, 0, 0, 2].into(),
            protocol: IPPROTO_UDP,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            ttl: 64,
        };
        let headers = RoceHeaders::new(BthRepr::new(Opcode::RC_WRITE_ONLY, 0x11, Psn::new(5)))
            .with_reth(RethRepr {
                va: 0x1000,
                rkey: 0x55,
                dma_len: 32,
            });
        let frame = RoceFrame::new(eth, ip, UdpRepr::rocev2(0xc0de), headers, &[7u8; 32])
            .expect("valid headers");
        let mut f = vec![0u8; frame.buffer_len()];
        let n = frame.emit(&mut f).expect("room");
        f.truncate(n);
        assert!(RoceFrame::parse(&f).is_ok());
        f[n - 6] ^= 0x40;
        assert!(RoceFrame::parse(&f).is_err(), "the ICRC catches the edit");
        assert!(reseal(&mut f));
        assert!(RoceFrame::parse(&f).is_ok());
        // Grown by 8 bytes: the lengths follow the frame.
        f.splice(n - 4..n - 4, [9u8; 8]);
        assert!(RoceFrame::parse(&f).is_err());
        assert!(fix_lengths(&mut f) && reseal(&mut f));
        assert_eq!(RoceFrame::parse(&f).map(|p| p.payload.len()), Ok(40));
    }

    #[test]
    fn short_or_non_ipv4_frames_are_left_alone() {
        assert!(!reseal(&mut [0u8; 10]));
        assert!(!fix_lengths(&mut [0u8; 20]));
        let mut arp = [0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!reseal(&mut arp));
        assert_eq!(arp[14..], [0u8; 46]);
    }
}
