//! A complete ARP frame as we send it (RFC 826 over Ethernet II): 14 bytes of Ethernet header
//! and 28 bytes of Ethernet/IPv4 ARP, 42 bytes in all, like Linux. The NIC pads it to the
//! 60-byte Ethernet minimum (DPDK PMDs and kernel drivers do); [`ArpFrame::padded`] gives the
//! padded form for links that do not.

use crate::wire::arp::{self, ArpOperation, ArpRepr};
use crate::wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr};
use std::net::Ipv4Addr;

/// Length of an ARP frame without Ethernet padding.
pub const ARP_FRAME_LEN: usize = ethernet::HEADER_LEN + arp::PACKET_LEN;

/// Minimum Ethernet frame length without FCS.
pub const ARP_FRAME_MIN_LEN: usize = 60;

/// An ARP request or reply ready to transmit.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct ArpFrame {
    /// The frame and its zero padding to the Ethernet minimum.
    bytes: [u8; ARP_FRAME_MIN_LEN],
}

impl ArpFrame {
    /// Writes `eth` and `arp` into a new frame.
    pub fn new(eth: EthernetRepr, repr: ArpRepr) -> ArpFrame {
        let mut bytes = [0u8; ARP_FRAME_MIN_LEN];
        let (e, a) = bytes[..ARP_FRAME_LEN].split_at_mut(ethernet::HEADER_LEN);
        // Both buffers have exactly the lengths the headers need, so emit cannot fail.
        let _ = eth.emit(&mut ethernet::Packet::new_unchecked(e));
        let _ = repr.emit(&mut arp::Packet::new_unchecked(a));
        ArpFrame { bytes }
    }

    /// "Who has `target`? Tell `ip`": broadcast, target hardware address zero (as Linux sends).
    pub fn request(mac: EthernetAddress, ip: Ipv4Addr, target: Ipv4Addr) -> ArpFrame {
        ArpFrame::new(
            EthernetRepr {
                src_addr: mac,
                dst_addr: EthernetAddress::BROADCAST,
                ethertype: EtherType::ARP,
            },
            ArpRepr {
                operation: ArpOperation::Request,
                source_hardware_addr: mac,
                source_protocol_addr: ip,
                target_hardware_addr: EthernetAddress([0; 6]),
                target_protocol_addr: target,
            },
        )
    }

    /// "`ip` is at `mac`", unicast to the requester (RFC 826: swap the sender and target fields,
    /// put ours in the sender fields, opcode reply, send to the new target hardware address).
    pub fn reply(
        mac: EthernetAddress,
        ip: Ipv4Addr,
        to_mac: EthernetAddress,
        to_ip: Ipv4Addr,
    ) -> ArpFrame {
        ArpFrame::new(
            EthernetRepr {
                src_addr: mac,
                dst_addr: to_mac,
                ethertype: EtherType::ARP,
            },
            ArpRepr {
                operation: ArpOperation::Reply,
                source_hardware_addr: mac,
                source_protocol_addr: ip,
                target_hardware_addr: to_mac,
                target_protocol_addr: to_ip,
            },
        )
    }

    /// The 42 bytes.
    pub fn as_bytes(&self) -> &[u8; ARP_FRAME_LEN] {
        // The array is longer than the frame: the fallback is never taken.
        self.bytes.first_chunk().unwrap_or(&[0; ARP_FRAME_LEN])
    }

    /// The frame zero-padded to the 60-byte Ethernet minimum.
    pub fn padded(&self) -> [u8; ARP_FRAME_MIN_LEN] {
        self.bytes
    }

    /// [`padded`](Self::padded) by reference.
    pub(super) fn padded_bytes(&self) -> &[u8; ARP_FRAME_MIN_LEN] {
        &self.bytes
    }

    /// The Ethernet header.
    pub fn ethernet(&self) -> EthernetRepr {
        let p = ethernet::Packet::new_unchecked(&self.bytes[..]);
        EthernetRepr {
            src_addr: p.src_addr(),
            dst_addr: p.dst_addr(),
            ethertype: p.ethertype(),
        }
    }

    /// The ARP packet.
    pub fn arp(&self) -> ArpRepr {
        let p = arp::Packet::new_unchecked(&self.bytes[ethernet::HEADER_LEN..]);
        ArpRepr {
            operation: p.operation(),
            source_hardware_addr: p.source_hardware_addr(),
            source_protocol_addr: p.source_protocol_addr(),
            target_hardware_addr: p.target_hardware_addr(),
            target_protocol_addr: p.target_protocol_addr(),
        }
    }
}

impl AsRef<[u8]> for ArpFrame {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl core::fmt::Debug for ArpFrame {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let a = self.arp();
        match a.operation {
            ArpOperation::Request => write!(
                f,
                "ArpFrame(who has {}? tell {} at {})",
                a.target_protocol_addr, a.source_protocol_addr, a.source_hardware_addr
            ),
            _ => write!(
                f,
                "ArpFrame({} is at {}, to {} at {})",
                a.source_protocol_addr,
                a.source_hardware_addr,
                a.target_protocol_addr,
                a.target_hardware_addr
            ),
        }
    }
}
