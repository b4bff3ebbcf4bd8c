//! A host address with its prefix length: IPv4 written `10.77.0.1/24`, IPv6 written
//! `fd00:77::1/64` (the `[roce] address` of a profile; a port may later have one of each).

use crate::net::check_host_address;
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A host address on a subnet: the address the RoCE port answers ARP for, and the subnet it
/// reaches directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    addr: Ipv4Addr,
    prefix_len: u8,
}

impl Ipv4Cidr {
    /// Checks that `addr` is usable as a host address on a `/prefix_len` subnet.
    pub fn new(addr: Ipv4Addr, prefix_len: u8) -> Result<Self, &'static str> {
        if prefix_len > 32 {
            return Err("the prefix length is above 32");
        }
        if prefix_len == 0 {
            return Err("the prefix length is 0");
        }
        if addr.is_unspecified() {
            return Err("0.0.0.0 is not a host address");
        }
        if addr.is_multicast() || addr.is_broadcast() {
            return Err("a multicast or broadcast address is not a host address");
        }
        if addr.is_loopback() {
            return Err("a loopback address cannot be reached over the port");
        }
        let cidr = Ipv4Cidr { addr, prefix_len };
        // /31 (RFC 3021) and /32 have no network or broadcast address.
        if prefix_len <= 30 {
            if addr == cidr.network() {
                return Err("this is the subnet's network address");
            }
            if addr == cidr.broadcast() {
                return Err("this is the subnet's broadcast address");
            }
        }
        Ok(cidr)
    }

    /// Parses `a.b.c.d/len`.
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        let (addr, len) = s
            .split_once('/')
            .ok_or("the prefix length (/N) is missing")?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| "the address is not dotted IPv4")?;
        if len.is_empty() || len.len() > 2 || !len.bytes().all(|b| b.is_ascii_digit()) {
            return Err("the prefix length is not a number 1..=32");
        }
        let len: u8 = len
            .parse()
            .map_err(|_| "the prefix length is not a number 1..=32")?;
        Ipv4Cidr::new(addr, len)
    }

    pub fn addr(&self) -> Ipv4Addr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// The subnet mask, e.g. 255.255.255.0 for /24.
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(
            u32::MAX
                .checked_shl(32 - u32::from(self.prefix_len))
                .unwrap_or(0),
        )
    }

    /// The subnet's first address.
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) & u32::from(self.netmask()))
    }

    /// The subnet's last address.
    pub fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.addr) | !u32::from(self.netmask()))
    }

    /// Whether `other` is on this subnet (reachable without a router).
    pub fn contains(&self, other: Ipv4Addr) -> bool {
        u32::from(other) & u32::from(self.netmask()) == u32::from(self.network())
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// An IPv6 host address on a prefix: the address a port answers Neighbor Discovery for and
/// its GID, and the prefix it reaches directly. Global and unique-local unicast addresses only
/// (`net::check_host_address`): not ::, ::1, multicast, IPv4-mapped, nor link-local (fe80::/10
/// needs an interface scope, which neither the profile nor the DAT addresses carry yet), nor
/// the prefix's subnet-router anycast address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv6Cidr {
    addr: Ipv6Addr,
    prefix_len: u8,
}

impl Ipv6Cidr {
    /// Checks that `addr` is usable as a host address on a `/prefix_len` prefix (1..=128).
    pub fn new(addr: Ipv6Addr, prefix_len: u8) -> Result<Self, &'static str> {
        check_host_address(addr, prefix_len).map_err(|e| e.reason())?;
        Ok(Ipv6Cidr { addr, prefix_len })
    }

    /// Parses `addr/len` (RFC 4291 §2.2 text form, no zone, no brackets).
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        let (addr, len) = s
            .split_once('/')
            .ok_or("the prefix length (/N) is missing")?;
        let addr: Ipv6Addr = addr
            .parse()
            .map_err(|_| "the address is not an IPv6 address (RFC 4291 text form, no zone)")?;
        if len.is_empty()
            || len.len() > 3
            || len.starts_with('0')
            || !len.bytes().all(|b| b.is_ascii_digit())
        {
            return Err("the prefix length is not a number 1..=128");
        }
        let len: u8 = len
            .parse()
            .map_err(|_| "the prefix length is not a number 1..=128")?;
        Ipv6Cidr::new(addr, len)
    }

    pub fn addr(&self) -> Ipv6Addr {
        self.addr
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    fn mask(&self) -> u128 {
        u128::MAX
            .checked_shl(128 - u32::from(self.prefix_len))
            .unwrap_or(0)
    }

    /// The prefix's first address (`fd00:77::` for `fd00:77::1/64`).
    pub fn network(&self) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.addr) & self.mask())
    }

    /// Whether `other` is on this prefix (reachable without a router).
    pub fn contains(&self, other: Ipv6Addr) -> bool {
        u128::from(other) & self.mask() == u128::from(self.network())
    }
}

impl fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

/// A host address of either family, as a profile writes it: IPv6 when it holds a colon.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpCidr {
    V4(Ipv4Cidr),
    V6(Ipv6Cidr),
}

impl IpCidr {
    /// Parses `a.b.c.d/len` or `x:x::x/len`.
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        if s.contains(':') {
            Ipv6Cidr::parse(s).map(IpCidr::V6)
        } else {
            Ipv4Cidr::parse(s).map(IpCidr::V4)
        }
    }
}

impl fmt::Display for IpCidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpCidr::V4(c) => c.fmt(f),
            IpCidr::V6(c) => c.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_derives_subnet() {
        let c = Ipv4Cidr::parse("10.77.0.1/24").unwrap();
        assert_eq!(c.addr(), Ipv4Addr::new(10, 77, 0, 1));
        assert_eq!(c.prefix_len(), 24);
        assert_eq!(c.netmask(), Ipv4Addr::new(255, 255, 255, 0));
        assert_eq!(c.network(), Ipv4Addr::new(10, 77, 0, 0));
        assert_eq!(c.broadcast(), Ipv4Addr::new(10, 77, 0, 255));
        assert!(c.contains(Ipv4Addr::new(10, 77, 0, 2)));
        assert!(!c.contains(Ipv4Addr::new(10, 77, 1, 2)));
        assert_eq!(c.to_string(), "10.77.0.1/24");
    }

    #[test]
    fn edge_prefixes() {
        let c = Ipv4Cidr::parse("192.168.5.7/32").unwrap();
        assert_eq!(c.netmask(), Ipv4Addr::new(255, 255, 255, 255));
        assert!(!c.contains(Ipv4Addr::new(192, 168, 5, 8)));
        // /31 point-to-point: both addresses are hosts.
        assert!(Ipv4Cidr::parse("10.0.0.0/31").is_ok());
        assert!(Ipv4Cidr::parse("10.0.0.1/31").is_ok());
        let c = Ipv4Cidr::parse("10.1.2.3/1").unwrap();
        assert_eq!(c.netmask(), Ipv4Addr::new(128, 0, 0, 0));
    }

    #[test]
    fn rejects_bad_input() {
        for bad in [
            "10.77.0.1",
            "10.77.0.1/",
            "10.77.0.1/33",
            "10.77.0.1/0",
            "10.77.0.1/-1",
            "10.77.0.1/+8",
            "10.77.0.1/024",
            "10.77.0/24",
            "10.77.0.256/24",
            "host/24",
            "10.77.0.0/24",
            "10.77.0.255/24",
            "0.0.0.0/8",
            "224.0.0.1/4",
            "255.255.255.255/32",
            "127.0.0.1/8",
            " 10.77.0.1/24",
        ] {
            assert!(Ipv4Cidr::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn ipv6_parses_and_derives_its_prefix() {
        let c = Ipv6Cidr::parse("fd00:77::1/64").unwrap();
        assert_eq!(c.addr(), "fd00:77::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(c.prefix_len(), 64);
        assert_eq!(c.network(), "fd00:77::".parse::<Ipv6Addr>().unwrap());
        assert!(c.contains("fd00:77::ffff:2".parse().unwrap()));
        assert!(!c.contains("fd00:78::2".parse().unwrap()));
        assert_eq!(c.to_string(), "fd00:77::1/64");
        // Global unicast, a /127 link (RFC 6164: both ends usable), a host route, a /1.
        for ok in [
            "2001:db8:1::10/48",
            "fd00:77::/127",
            "fd00:77::1/127",
            "2001:db8::5/128",
            "fd00::1/1",
            "FD00:0077:0000::0001/64",
        ] {
            assert!(Ipv6Cidr::parse(ok).is_ok(), "{ok} was refused");
        }
        assert_eq!(
            IpCidr::parse("fd00:77::1/64"),
            Ok(IpCidr::V6(Ipv6Cidr::parse("fd00:77::1/64").unwrap()))
        );
        assert_eq!(
            IpCidr::parse("10.77.0.1/24"),
            Ok(IpCidr::V4(Ipv4Cidr::parse("10.77.0.1/24").unwrap()))
        );
        assert_eq!(
            IpCidr::parse("fd00:77::1/64").unwrap().to_string(),
            "fd00:77::1/64"
        );
    }

    #[test]
    fn ipv6_rejects_what_cannot_be_a_port_address() {
        for (bad, why) in [
            ("fd00:77::1", "the prefix length (/N) is missing"),
            ("fd00:77::1/", "the prefix length is not a number 1..=128"),
            ("fd00:77::1/129", "the prefix length is not 1..=128"),
            ("fd00:77::1/0", "the prefix length is not a number 1..=128"),
            ("fd00:77::1/064", "the prefix length is not a number 1..=128"),
            ("fd00:77::1/+64", "the prefix length is not a number 1..=128"),
            ("fd00:77::1%eth0/64", "the address is not an IPv6 address (RFC 4291 text form, no zone)"),
            ("[fd00:77::1]/64", "the address is not an IPv6 address (RFC 4291 text form, no zone)"),
            ("fd00:77:::1/64", "the address is not an IPv6 address (RFC 4291 text form, no zone)"),
            ("::/64", ":: is the unspecified address, not a host address"),
            ("::1/128", "::1 is the loopback address and cannot be reached over the port"),
            ("ff02::1/16", "a multicast address (ff00::/8) is not a host address"),
            ("::ffff:10.0.0.1/96", "an IPv4-mapped address (::ffff:0:0/96) is an IPv4 address: write it as one"),
            ("fe80::1/64", "a link-local address (fe80::/10) needs an interface scope and is not supported yet: use a global or unique-local (fd00::/8) address"),
            ("fd00:77::/64", "this is the prefix's subnet-router anycast address (all host bits zero)"),
            (" fd00:77::1/64", "the address is not an IPv6 address (RFC 4291 text form, no zone)"),
        ] {
            assert_eq!(Ipv6Cidr::parse(bad), Err(why), "{bad}");
            assert_eq!(IpCidr::parse(bad), Err(why), "{bad}");
        }
    }
}
