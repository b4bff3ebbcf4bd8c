//! ICMP Destination Unreachable (RFC 792 type 3; RFC 1812 §4.3.2.3: what a router sends when it
//! cannot deliver) about a RoCEv2 datagram this port sent: the peer it was for cannot be
//! reached, and the connection requests still waiting for that peer fail at once instead of
//! after the CM's retries. The message quotes the original IPv4 header and the first 8 bytes
//! after it (the UDP header); it is taken only when its checksum is right and the quote is a
//! UDP datagram from our address to the RoCEv2 port. It cannot be authenticated, so it only
//! ends connection requests still waiting for a first answer, as ARP failure does (RFC 5927
//! §4.1's hard errors during connection set-up), never an established connection.

use crate::wire::ipv4::{self, IPPROTO_UDP};
use crate::wire::udp::ROCEV2_PORT;
use std::net::Ipv4Addr;

/// ICMP type 3.
const DEST_UNREACHABLE: u8 = 3;

/// The destination of the RoCEv2 datagram from `our_ip` that the ICMP message `icmp` (the IPv4
/// payload) reports undeliverable; `None` for any other ICMP message.
pub(super) fn unreachable_destination(icmp: &[u8], our_ip: Ipv4Addr) -> Option<Ipv4Addr> {
    if icmp.len() < 8 + ipv4::HEADER_LEN + 8 || icmp[0] != DEST_UNREACHABLE {
        return None;
    }
    if ipv4::ones_complement_sum(icmp, 0) != 0xffff {
        return None;
    }
    let quoted = &icmp[8..];
    let ip = ipv4::Packet::new_checked(quoted).ok()?;
    let hl = ip.header_len();
    if ip.version() != 4 || hl < ipv4::HEADER_LEN || ip.protocol() != IPPROTO_UDP {
        return None;
    }
    let udp = quoted.get(hl..hl + 8)?;
    let dst_port = u16::from_be_bytes([udp[2], udp[3]]);
    (ip.src_addr() == our_ip && dst_port == ROCEV2_PORT).then(|| ip.dst_addr())
}
