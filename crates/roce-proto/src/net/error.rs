//! Errors of address resolution and encapsulation, worded so a failed connection attempt can
//! tell the user what to fix.

use super::neighbours::NeighbourAddr;
use std::net::IpAddr;

/// Why a peer cannot be reached (or cannot be reached yet). `Net` speaks of either family
/// (`A` = [`IpAddr`]); the caches beneath it of one (`Ipv4Addr` for ARP, `Ipv6Addr` for
/// Neighbor Discovery).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NetError<A: NeighbourAddr = IpAddr> {
    /// The address is outside our subnet and no route (or gateway) covers it. IPv6 has no
    /// routes yet: every IPv6 destination off the port's prefix is this.
    #[error("no route to {ip}: not in our subnet {subnet}/{prefix_len}, and no route or gateway covers it")]
    NoRoute { ip: A, subnet: A, prefix_len: u8 },
    /// A static neighbour outside our subnet (it is reached through a route's next hop).
    #[error("{0} is not on the port's subnet: a neighbour entry is for the link only")]
    NotOnLink(A),
    /// A host loopback address (127.0.0.0/8, ::1): not on the port (our own address is).
    #[error("{0} is a host loopback address, not on the port (use the port's own address)")]
    Loopback(A),
    /// Not a unicast host address (unspecified, multicast, limited or subnet broadcast, a
    /// subnet-router anycast address).
    #[error("{0} is not a unicast host address")]
    NotUnicast(A),
    /// An address of a family the port has no address of (an IPv6 peer of an IPv4-only port).
    #[error("{0} is an {} address, and the port has none of that family", .0.family())]
    NoAddressOfFamily(A),
    /// Requests for the address went unanswered (ARP, RFC 826, or Neighbor Discovery, RFC
    /// 4861 §7.2, resolution failed).
    #[error("{ip} is unreachable: no {} after {requests} requests", .ip.answer())]
    Unreachable { ip: A, requests: u32 },
    /// No MAC known yet: call `resolve` and wait for `NetEvent::Resolved`.
    #[error("{0} is not resolved yet ({} pending)", .0.protocol())]
    Pending(A),
    /// A RoCEv2 packet whose UDP payload of `len` bytes does not fit in the MTU.
    #[error("RoCEv2 packet with {len} bytes after the UDP header exceeds the MTU")]
    TooLong { len: usize },
    /// The output buffer is shorter than the headers.
    #[error("buffer too small: need {need} bytes, have {have}")]
    BufferTooSmall { need: usize, have: usize },
    /// The neighbour cache is full of pending resolutions.
    #[error("neighbour cache full: cannot resolve {0}")]
    CacheFull(A),
}

impl<A: NeighbourAddr + Into<IpAddr>> NetError<A> {
    /// The same error with the addresses as [`IpAddr`]s.
    pub fn into_ip(self) -> NetError {
        match self {
            NetError::NoRoute {
                ip,
                subnet,
                prefix_len,
            } => NetError::NoRoute {
                ip: ip.into(),
                subnet: subnet.into(),
                prefix_len,
            },
            NetError::NotOnLink(a) => NetError::NotOnLink(a.into()),
            NetError::Loopback(a) => NetError::Loopback(a.into()),
            NetError::NotUnicast(a) => NetError::NotUnicast(a.into()),
            NetError::NoAddressOfFamily(a) => NetError::NoAddressOfFamily(a.into()),
            NetError::Unreachable { ip, requests } => NetError::Unreachable {
                ip: ip.into(),
                requests,
            },
            NetError::Pending(a) => NetError::Pending(a.into()),
            NetError::TooLong { len } => NetError::TooLong { len },
            NetError::BufferTooSmall { need, have } => NetError::BufferTooSmall { need, have },
            NetError::CacheFull(a) => NetError::CacheFull(a.into()),
        }
    }
}
