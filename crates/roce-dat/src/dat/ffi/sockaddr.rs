//! DAT_IA_ADDRESS_PTR is a `struct sockaddr *` (dat.h: DAT_SOCK_ADDR): a `sockaddr_in` for
//! IPv4 and a `sockaddr_in6` for IPv6 (netinet/in.h), told apart by the family in their
//! first two bytes. dapl's OFA provider and its test programs pass what getaddrinfo gives.

use dat_sys as d;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// AF_INET.
pub(crate) const AF_INET: u16 = 2;
/// AF_INET6 (Linux).
pub(crate) const AF_INET6: u16 = 10;

/// Bytes of a `sockaddr_in6`, the larger of the two.
const SOCKADDR_IN6_LEN: usize = 28;
/// Bytes of a `sockaddr_in`.
const SOCKADDR_IN_LEN: usize = 16;

/// A `sockaddr_in` or `sockaddr_in6`, laid out as both are: family and port (network order),
/// then for IPv4 the address and 8 zero bytes, for IPv6 the flow information, the address and
/// the scope ID.
#[repr(C, align(4))]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SockAddr {
    family: u16,
    port_be: u16,
    rest: [u8; SOCKADDR_IN6_LEN - 4],
}

impl Default for SockAddr {
    /// An unspecified IPv4 address (what a query of an unconnected EP shows).
    fn default() -> SockAddr {
        SockAddr::new(Ipv4Addr::UNSPECIFIED)
    }
}

impl SockAddr {
    /// The address with port 0 (DAT carries the port as a connection qualifier).
    pub fn new(ip: impl Into<IpAddr>) -> SockAddr {
        let mut rest = [0u8; SOCKADDR_IN6_LEN - 4];
        let family = match ip.into() {
            IpAddr::V4(v4) => {
                rest[..4].copy_from_slice(&v4.octets());
                AF_INET
            }
            IpAddr::V6(v6) => {
                // sin6_flowinfo (4 bytes, 0), sin6_addr, sin6_scope_id (0: a global address).
                rest[4..20].copy_from_slice(&v6.octets());
                AF_INET6
            }
        };
        SockAddr {
            family,
            port_be: 0,
            rest,
        }
    }

    /// The address.
    pub fn ip(&self) -> IpAddr {
        if self.family == AF_INET6 {
            let mut a = [0u8; 16];
            a.copy_from_slice(&self.rest[4..20]);
            IpAddr::V6(Ipv6Addr::from(a))
        } else {
            IpAddr::V4(Ipv4Addr::new(
                self.rest[0],
                self.rest[1],
                self.rest[2],
                self.rest[3],
            ))
        }
    }

    /// The port (host order).
    pub fn port(&self) -> u16 {
        u16::from_be(self.port_be)
    }

    /// The address as the DAT_IA_ADDRESS_PTR the consumer reads (it must not write it).
    pub fn as_dat(&self) -> d::DAT_IA_ADDRESS_PTR {
        self as *const SockAddr as *mut d::DAT_SOCK_ADDR
    }

    /// Reads a consumer's address: `None` for a family other than AF_INET and AF_INET6, and
    /// for an IPv6 address with a scope (a link-local address needs an interface, which a
    /// port's addresses never are).
    ///
    /// # Safety
    /// `addr` is non-NULL and valid for reads of a `sockaddr_in` when its family is AF_INET,
    /// of a `sockaddr_in6` when it is AF_INET6 (the sockaddr contract), for the call.
    pub unsafe fn read(addr: d::DAT_IA_ADDRESS_PTR) -> Option<SockAddr> {
        let p = addr as *const u8;
        // SAFETY: every sockaddr starts with its 2-byte family (this fn's contract); read
        // unaligned, as consumers' buffers need not be aligned.
        let family = unsafe { (p as *const u16).read_unaligned() };
        let len = match family {
            AF_INET => SOCKADDR_IN_LEN,
            AF_INET6 => SOCKADDR_IN6_LEN,
            _ => return None,
        };
        let mut bytes = [0u8; SOCKADDR_IN6_LEN];
        // SAFETY: the family says the consumer's structure is `len` bytes long (this fn's
        // contract); `bytes` is a distinct local of at least that size.
        unsafe { core::ptr::copy_nonoverlapping(p, bytes.as_mut_ptr(), len) };
        let mut rest = [0u8; SOCKADDR_IN6_LEN - 4];
        rest.copy_from_slice(&bytes[4..]);
        let sa = SockAddr {
            family,
            port_be: u16::from_ne_bytes([bytes[2], bytes[3]]),
            rest,
        };
        let scope = &sa.rest[20..24];
        if family == AF_INET6 && scope != [0; 4] {
            return None;
        }
        Some(sa)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_families_lay_out_as_the_c_structures() {
        assert_eq!(core::mem::size_of::<SockAddr>(), 28);
        let v4 = SockAddr::new(Ipv4Addr::new(10, 77, 0, 1));
        // SAFETY: `v4` is a live SockAddr: 28 readable bytes.
        let b: [u8; 28] = unsafe { core::mem::transmute(v4) };
        assert_eq!(&b[..8], &[2, 0, 0, 0, 10, 77, 0, 1]);
        let ip6: Ipv6Addr = "fd00:77::1".parse().unwrap();
        let v6 = SockAddr::new(ip6);
        // SAFETY: as above.
        let b: [u8; 28] = unsafe { core::mem::transmute(v6) };
        assert_eq!(&b[..8], &[10, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[8..24], &ip6.octets());
        assert_eq!(v6.ip(), IpAddr::V6(ip6));
        assert_eq!(v4.ip(), IpAddr::V4(Ipv4Addr::new(10, 77, 0, 1)));
    }

    #[test]
    fn a_consumer_sockaddr_is_read_by_its_family() {
        let ip6: Ipv6Addr = "fd00:77::2".parse().unwrap();
        let mut b = [0u8; 28];
        b[..2].copy_from_slice(&AF_INET6.to_ne_bytes());
        b[2..4].copy_from_slice(&4791u16.to_be_bytes());
        b[8..24].copy_from_slice(&ip6.octets());
        // SAFETY: 28 readable bytes, a sockaddr_in6.
        let sa = unsafe { SockAddr::read(b.as_ptr() as d::DAT_IA_ADDRESS_PTR) }.unwrap();
        assert_eq!((sa.ip(), sa.port()), (IpAddr::V6(ip6), 4791));
        b[24] = 3; // a scope ID: link-local
                   // SAFETY: as above.
        assert!(unsafe { SockAddr::read(b.as_ptr() as d::DAT_IA_ADDRESS_PTR) }.is_none());
        let mut c = [0u8; 16];
        c[..2].copy_from_slice(&1u16.to_ne_bytes()); // AF_UNIX
                                                     // SAFETY: 16 readable bytes, a sockaddr.
        assert!(unsafe { SockAddr::read(c.as_ptr() as d::DAT_IA_ADDRESS_PTR) }.is_none());
    }
}
