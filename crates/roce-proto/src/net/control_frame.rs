//! [`ControlFrame`]: what the neighbour layer sends, an ARP frame (IPv4, RFC 826) or a Neighbor
//! Solicitation or Advertisement (IPv6, RFC 4861), one type for the host to transmit.

use super::arp_frame::ArpFrame;
use super::nd_frame::NdFrame;

/// A frame from [`Net::poll_transmit`](super::Net::poll_transmit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlFrame {
    Arp(ArpFrame),
    Nd(NdFrame),
}

impl ControlFrame {
    /// The bytes to transmit, at least the 60-byte Ethernet minimum: an ARP frame zero-padded
    /// (42 bytes of frame), a Neighbor Discovery frame as it is (86 bytes).
    pub fn padded(&self) -> &[u8] {
        match self {
            ControlFrame::Arp(f) => f.padded_bytes(),
            ControlFrame::Nd(f) => f.as_bytes(),
        }
    }

    /// The frame without padding.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            ControlFrame::Arp(f) => f.as_bytes(),
            ControlFrame::Nd(f) => f.as_bytes(),
        }
    }

    /// The ARP frame, if it is one.
    pub fn arp(&self) -> Option<&ArpFrame> {
        match self {
            ControlFrame::Arp(f) => Some(f),
            ControlFrame::Nd(_) => None,
        }
    }

    /// The Neighbor Discovery frame, if it is one.
    pub fn nd(&self) -> Option<&NdFrame> {
        match self {
            ControlFrame::Nd(f) => Some(f),
            ControlFrame::Arp(_) => None,
        }
    }
}

impl AsRef<[u8]> for ControlFrame {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}
