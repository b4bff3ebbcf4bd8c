//! An IPv4 host address with its prefix length, written `10.77.0.1/24`.

use std::fmt;
use std::net::Ipv4Addr;

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
}
