//! The neighbour layer of a RoCEv2 port: our own MAC and IP addresses (IPv4, IPv6 or one of
//! each), ARP requests, replies and cache (RFC 826), IPv6 Neighbor Discovery (RFC 4861,
//! [`Ndp`]), the receive filter in front of the transport, and the Ethernet/IP/UDP
//! encapsulation of outgoing RoCEv2 packets (IBTA vol. 1 annex A17.4; IPv6 per RFC 8200).
//!
//! Everything here is sans-IO in the manner of quinn-proto: no clock reads, no I/O, no threads.
//! The caller passes time in and moves bytes:
//!
//! - in: [`Net::handle_frame`] for every received frame, [`Net::handle_timeout`] when
//!   [`Net::poll_timeout`] says so, [`Net::resolve`] when a connection needs a peer's MAC;
//! - out: [`Net::poll_transmit`] (ARP and Neighbor Discovery frames to send, a
//!   [`ControlFrame`]), [`Net::poll_event`] (resolution outcomes), [`Net::route`] /
//!   [`Net::write_route_headers`] / [`Net::write_headers`] (headers of RoCEv2 packets to a
//!   resolved peer: 42 bytes over IPv4, 62 over IPv6).
//!
//! Every peer address is an [`IpAddr`](std::net::IpAddr); one of a family the port has no
//! address of is [`NetError::NoAddressOfFamily`].
//!
//! Scope: one IPv4 subnet, directly attached, and static routes through neighbours on it
//! (`NetConfig::routes`, a gateway being the default route): a destination outside
//! `ip/prefix_len` goes to the next hop of the longest matching route (ARP resolves the next
//! hop, the IP header names the destination), and without one is [`NetError::NoRoute`]. IPv6 is
//! on-link only (no routes, no router discovery): an IPv6 destination off the port's prefix is
//! [`NetError::NoRoute`] with the prefix. Our own address resolves to our own MAC (the engine
//! loops such frames back); 127.0.0.0/8 and ::1 are [`NetError::Loopback`]. An ICMP Destination
//! Unreachable about a RoCEv2 datagram we sent becomes [`NetEvent::IcmpUnreachable`]
//! (`icmp.rs`); other ICMP (echo included), ICMPv6 other than Neighbor Discovery, IPv6
//! extension headers and IP fragments are counted and dropped, never answered. 802.1Q tags are
//! added and removed at the port (`vlan.rs`): a tagged frame that reaches this layer is another
//! VLAN's.
//!
//! Neighbor Discovery ([`Ndp`]) resolves over the same cache as ARP (`neighbours.rs`, generic
//! over the address family) and answers solicitations for the port's IPv6 address
//! ([`NdFrame`]); `Net` holds one when the port has an IPv6 address ([`NetConfig::ipv6`]). A
//! port without an IPv4 address ([`NetConfig::ipv6_only`]) drops IPv4 and ARP.

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
pub use config::{
    ConfigError, Ipv4Identity, Ipv6Identity, NetConfig, MAX_MTU, MIN_MTU, MIN_MTU_IPV6,
};
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
