//! The IPv4/ARP neighbour layer of a RoCEv2 port: our own MAC and IPv4 address, ARP requests,
//! replies and cache (RFC 826), the receive filter in front of the transport, and the
//! Ethernet/IPv4/UDP encapsulation of outgoing RoCEv2 packets (IBTA vol. 1 annex A17).
//!
//! Everything here is sans-IO in the manner of quinn-proto: no clock reads, no I/O, no threads.
//! The caller passes time in and moves bytes:
//!
//! - in: [`Net::handle_frame`] for every received frame, [`Net::handle_timeout`] when
//!   [`Net::poll_timeout`] says so, [`Net::resolve`] when a connection needs a peer's MAC;
//! - out: [`Net::poll_transmit`] (ARP requests and replies to send), [`Net::poll_event`]
//!   (resolution outcomes), [`Net::frame_for`] / [`Net::write_headers`] (headers of RoCEv2
//!   packets to a resolved peer).
//!
//! Scope: one IPv4 subnet, directly attached, and static routes through neighbours on it
//! (`NetConfig::routes`, a gateway being the default route): a destination outside
//! `ip/prefix_len` goes to the next hop of the longest matching route (ARP resolves the next
//! hop, the IP header names the destination), and without one is [`NetError::NoRoute`]. Our own address resolves to our own MAC
//! (the engine loops such frames back); 127.0.0.0/8 is [`NetError::Loopback`]. An ICMP
//! Destination Unreachable about a RoCEv2 datagram we sent becomes [`NetEvent::IcmpUnreachable`]
//! (`icmp.rs`); other ICMP (echo included), IPv6 and IP fragments are counted and dropped, never
//! answered. 802.1Q tags are added and removed at the port (`vlan.rs`): a tagged frame that
//! reaches this layer is another VLAN's.
//!
//! IPv6: [`Ndp`] resolves neighbours with Neighbor Discovery (RFC 4861) over the same cache as
//! ARP (`neighbours.rs`, generic over the address family) and answers solicitations for the
//! port's IPv6 address ([`NdFrame`]). It stands beside `Net`, not yet inside it: `Net`'s
//! receive filter still drops IPv6, and RoCEv2/IPv6 encapsulation is `wire::frame6` only.

mod arp_frame;
mod config;
mod control_frame;
mod encap;
mod error;
mod icmp;
mod iface;
mod nd_frame;
mod ndp;
mod neighbours;
mod receive;
mod route;
mod routes;
mod stats;
mod udp_port;
mod vlan;

#[cfg(test)]
mod tests;

pub use arp_frame::{ArpFrame, ARP_FRAME_LEN, ARP_FRAME_MIN_LEN};
pub use config::{ConfigError, Ipv6Identity, NetConfig, MAX_MTU, MIN_MTU, MIN_MTU_IPV6};
pub use control_frame::ControlFrame;
pub use encap::{Encap, HeaderTemplate, TrafficClass, HEADERS_LEN, HEADERS_LEN_V6};
pub use error::NetError;
pub use iface::{Inbound, Net};
pub use nd_frame::{NdFrame, ND_FRAME_LEN};
pub use ndp::{
    check_host_address, Ipv6AddressError, Ndp, NdpConfig, NdpConfigError, NdpDrop, NdpInbound,
    NdpStats,
};
pub use neighbours::{NeighbourAddr, NetEvent, Resolve};
pub use route::Route;
pub use routes::{IpRoute, RouteError, RouteTable, MAX_ROUTES};
pub use stats::{DropReason, NetStats};
pub use udp_port::udp_source_port;
pub use vlan::{Pcp, Received, Vlan, VlanError, MAX_VLAN_ID, TAG_LEN};
