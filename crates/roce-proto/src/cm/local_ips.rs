//! The local addresses a CM speaks for: one per family at most, as a port has them. A REQ goes
//! out from the local address of its destination's family (rdma_cm binds the same way).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A port's IPv4 and IPv6 addresses; at least one is present.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalIps {
    pub v4: Option<Ipv4Addr>,
    pub v6: Option<Ipv6Addr>,
}

impl LocalIps {
    /// The local address of `peer`'s family, if the port has one.
    pub fn toward(&self, peer: IpAddr) -> Option<IpAddr> {
        match peer {
            IpAddr::V4(_) => self.v4.map(IpAddr::V4),
            IpAddr::V6(_) => self.v6.map(IpAddr::V6),
        }
    }

    /// True if `ip` is one of ours.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.toward(ip) == Some(ip)
    }

    /// The first address: IPv4 if the port has one.
    pub fn primary(&self) -> IpAddr {
        match (self.v4, self.v6) {
            (Some(v4), _) => IpAddr::V4(v4),
            (None, Some(v6)) => IpAddr::V6(v6),
            (None, None) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }
}

impl From<Ipv4Addr> for LocalIps {
    fn from(v4: Ipv4Addr) -> LocalIps {
        LocalIps {
            v4: Some(v4),
            v6: None,
        }
    }
}

impl From<Ipv6Addr> for LocalIps {
    fn from(v6: Ipv6Addr) -> LocalIps {
        LocalIps {
            v4: None,
            v6: Some(v6),
        }
    }
}

impl From<IpAddr> for LocalIps {
    fn from(ip: IpAddr) -> LocalIps {
        match ip {
            IpAddr::V4(v4) => v4.into(),
            IpAddr::V6(v6) => v6.into(),
        }
    }
}
