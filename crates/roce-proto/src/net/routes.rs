//! A port's static IPv4 routes: the next hop of a destination outside the port's subnet
//! (RFC 1812 §5.2.4.3, longest prefix first). A profile names them as `[roce] gateway` (the
//! default route, 0.0.0.0/0) and `routes = ["10.9.0.0/16 via 10.77.20.254"]`. The table is
//! bounded ([`MAX_ROUTES`]) and refuses routes that overlap each other; `NetConfig::validate`
//! refuses next hops off the port's subnet and routes into it.

use std::fmt;
use std::net::Ipv4Addr;

/// Routes a port holds at most (the default route included).
pub const MAX_ROUTES: usize = 16;

/// One route: destinations in `dest/prefix_len` go to the neighbour `via`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IpRoute {
    pub dest: Ipv4Addr,
    pub prefix_len: u8,
    pub via: Ipv4Addr,
}

impl IpRoute {
    /// The default route through `gateway`.
    pub fn default_via(gateway: Ipv4Addr) -> IpRoute {
        IpRoute {
            dest: Ipv4Addr::UNSPECIFIED,
            prefix_len: 0,
            via: gateway,
        }
    }

    /// Parses `a.b.c.d/len via e.f.g.h` (`default via e.f.g.h` for 0.0.0.0/0).
    pub fn parse(s: &str) -> Result<IpRoute, &'static str> {
        let mut words = s.split_whitespace();
        let (Some(net), Some("via"), Some(via), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err("not of the form `a.b.c.d/len via e.f.g.h`");
        };
        let via: Ipv4Addr = via.parse().map_err(|_| "the next hop is not dotted IPv4")?;
        if net == "default" {
            return Ok(IpRoute::default_via(via));
        }
        let (dest, len) = net
            .split_once('/')
            .ok_or("the destination's prefix length (/N) is missing")?;
        let dest: Ipv4Addr = dest
            .parse()
            .map_err(|_| "the destination is not dotted IPv4")?;
        let prefix_len: u8 = match len.parse() {
            Ok(n) if n <= 32 && !len.starts_with('+') => n,
            _ => return Err("the prefix length is not a number 0..=32"),
        };
        let r = IpRoute {
            dest,
            prefix_len,
            via,
        };
        if u32::from(dest) & !r.mask() != 0 {
            return Err("the destination has host bits set beyond its prefix length");
        }
        Ok(r)
    }

    fn mask(&self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix_len))
            .unwrap_or(0)
    }

    /// True when `ip` is in this route's destination.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.dest)
    }

    /// True when this route's destination and `dest/prefix_len` share an address.
    pub fn overlaps(&self, dest: Ipv4Addr, prefix_len: u8) -> bool {
        let other = IpRoute {
            dest,
            prefix_len,
            via: self.via,
        };
        let m = self.mask() & other.mask();
        u32::from(self.dest) & m == u32::from(dest) & m
    }

    /// The default route (0.0.0.0/0).
    pub fn is_default(&self) -> bool {
        self.prefix_len == 0
    }
}

impl fmt::Display for IpRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_default() {
            write!(f, "default via {}", self.via)
        } else {
            write!(f, "{}/{} via {}", self.dest, self.prefix_len, self.via)
        }
    }
}

/// Why a route cannot join a [`RouteTable`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("more than {MAX_ROUTES} routes")]
    Full,
    #[error("{new} overlaps {old}")]
    Overlap { new: IpRoute, old: IpRoute },
}

/// The routes of a port (a fixed-size table, so `NetConfig` stays `Copy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RouteTable {
    entries: [Option<IpRoute>; MAX_ROUTES],
}

impl RouteTable {
    /// Adds `r`; a second default route or a destination that overlaps another route's is
    /// refused (a default route overlaps nothing: it is what the others refine).
    pub fn add(&mut self, r: IpRoute) -> Result<(), RouteError> {
        if let Some(old) = self.iter().find(|o| {
            (o.is_default() && r.is_default())
                || (!o.is_default() && !r.is_default() && o.overlaps(r.dest, r.prefix_len))
        }) {
            return Err(RouteError::Overlap { new: r, old });
        }
        let slot = self
            .entries
            .iter_mut()
            .find(|e| e.is_none())
            .ok_or(RouteError::Full)?;
        *slot = Some(r);
        Ok(())
    }

    pub fn iter(&self) -> impl Iterator<Item = IpRoute> + '_ {
        self.entries.iter().flatten().copied()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.iter().all(Option::is_none)
    }

    /// The next hop of `ip` by the longest matching prefix; `None` when no route covers it.
    pub fn next_hop(&self, ip: Ipv4Addr) -> Option<Ipv4Addr> {
        self.iter()
            .filter(|r| r.contains(ip))
            .max_by_key(|r| r.prefix_len)
            .map(|r| r.via)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn routes_parse_and_print_as_written() {
        for s in ["10.9.0.0/16 via 10.77.20.254", "default via 10.77.20.1"] {
            assert_eq!(IpRoute::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(
            IpRoute::parse("0.0.0.0/0 via 10.0.0.1").unwrap(),
            IpRoute::default_via(ip("10.0.0.1"))
        );
        for (bad, why) in [
            ("10.9.0.0/16", "form"),
            ("10.9.0.0/16 through 10.0.0.1", "form"),
            ("10.9.0.0/16 via 10.0.0.1 extra", "form"),
            ("10.9.0.0 via 10.0.0.1", "prefix length (/N) is missing"),
            ("10.9.0.0/33 via 10.0.0.1", "0..=32"),
            ("10.9.0.0/+8 via 10.0.0.1", "0..=32"),
            ("10.9.1.0/16 via 10.0.0.1", "host bits"),
            ("10.9.0.0/16 via gateway", "next hop"),
            ("ten/8 via 10.0.0.1", "destination"),
        ] {
            let e = IpRoute::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_longest_prefix_wins_and_nothing_else_matches() {
        let mut t = RouteTable::default();
        t.add(IpRoute::default_via(ip("10.0.0.1"))).unwrap();
        t.add(IpRoute::parse("10.9.0.0/16 via 10.0.0.2").unwrap())
            .unwrap();
        t.add(IpRoute::parse("192.168.7.5/32 via 10.0.0.3").unwrap())
            .unwrap();
        assert_eq!(t.next_hop(ip("10.9.200.1")), Some(ip("10.0.0.2")));
        assert_eq!(t.next_hop(ip("192.168.7.5")), Some(ip("10.0.0.3")));
        assert_eq!(t.next_hop(ip("192.168.7.6")), Some(ip("10.0.0.1")));
        let mut no_default = RouteTable::default();
        no_default
            .add(IpRoute::parse("10.9.0.0/16 via 10.0.0.2").unwrap())
            .unwrap();
        assert_eq!(no_default.next_hop(ip("10.10.0.1")), None);
    }

    #[test]
    fn overlapping_routes_and_a_full_table_are_refused() {
        let mut t = RouteTable::default();
        t.add(IpRoute::parse("10.9.0.0/16 via 10.0.0.2").unwrap())
            .unwrap();
        let inside = IpRoute::parse("10.9.4.0/24 via 10.0.0.3").unwrap();
        assert!(matches!(t.add(inside), Err(RouteError::Overlap { .. })));
        let around = IpRoute::parse("10.0.0.0/8 via 10.0.0.3").unwrap();
        assert!(matches!(t.add(around), Err(RouteError::Overlap { .. })));
        t.add(IpRoute::default_via(ip("10.0.0.1"))).unwrap();
        assert!(matches!(
            t.add(IpRoute::default_via(ip("10.0.0.4"))),
            Err(RouteError::Overlap { .. })
        ));
        for k in 0..(MAX_ROUTES as u8 - 2) {
            t.add(IpRoute {
                dest: Ipv4Addr::new(172, 16, k, 0),
                prefix_len: 24,
                via: ip("10.0.0.2"),
            })
            .unwrap();
        }
        let one_more = IpRoute::parse("172.31.0.0/24 via 10.0.0.2").unwrap();
        assert_eq!(t.add(one_more), Err(RouteError::Full));
    }
}
