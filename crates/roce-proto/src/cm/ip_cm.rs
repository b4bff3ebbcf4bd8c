//! rdma_cm's IP addressing on top of IB CM (IBTA vol. 1 annex A11, "RDMA IP CM Service"):
//! the service ID of a TCP-port-space listener and the 36-byte header at the start of the REQ
//! private data that carries the IP addresses and the source port, and the GIDs of RoCEv2
//! (annex A17.4.3: an IPv6 address is its own GID, an IPv4 address is IPv4-mapped).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use thiserror::Error;

/// Service ID prefix of the rdma_cm TCP port space (`RDMA_PS_TCP` = 0x0106, annex A11.2).
pub const SERVICE_ID_TCP_PREFIX: u64 = 0x0000_0000_0106_0000;

/// Length of the IP CM private-data header (annex A11.6).
pub const IP_CM_HEADER_LEN: usize = 36;
/// Consumer private data after the header in a REQ (92 - 36).
pub const IP_CM_REQ_USER_LEN: usize = 56;
/// IP version nibble for IPv4.
pub const IP_VERSION_4: u8 = 4;
/// IP version nibble for IPv6.
pub const IP_VERSION_6: u8 = 6;

/// The service ID a listener on TCP `port` answers.
pub const fn service_id_for_port(port: u16) -> u64 {
    SERVICE_ID_TCP_PREFIX | port as u64
}

/// The TCP port named by a service ID, or `None` when it is not in the TCP port space.
pub const fn port_of_service_id(sid: u64) -> Option<u16> {
    if sid & !0xffff == SERVICE_ID_TCP_PREFIX {
        Some((sid & 0xffff) as u16)
    } else {
        None
    }
}

/// The IPv4-mapped GID `::ffff:a.b.c.d` used on RoCEv2 with IPv4.
pub fn gid_from_ipv4(ip: Ipv4Addr) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&ip.octets());
    g
}

/// The IPv4 address in the last four bytes of a 16-byte address field.
pub fn ipv4_of(addr16: &[u8; 16]) -> Ipv4Addr {
    Ipv4Addr::new(addr16[12], addr16[13], addr16[14], addr16[15])
}

/// The GID of a RoCEv2 address: the IPv6 address itself, or the IPv4-mapped one.
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => gid_from_ipv4(v4),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The address a RoCEv2 GID names: an IPv4-mapped GID is the IPv4 address.
pub fn ip_of_gid(gid: &[u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(*gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum IpCmError {
    #[error("private data shorter than the 36-byte IP CM header")]
    Truncated,
    #[error("unsupported IP CM header version {0}.{1}")]
    Version(u8, u8),
    #[error("IP CM header names IP version {0}")]
    IpVersion(u8),
}

/// Header field offsets (annex A11.6, Table 300).
mod field {
    use core::ops::Range;
    /// Major version[7:4] | minor version[3:0].
    pub const VERSION: usize = 0;
    /// IP version[7:4] | reserved.
    pub const IP_VERSION: usize = 1;
    pub const SRC_PORT: Range<usize> = 2..4;
    pub const SRC_IP: Range<usize> = 4..20;
    pub const DST_IP: Range<usize> = 20..36;
}

/// The ports an active side's IP CM header names as its source: rdma_cm binds a connecting
/// ID to a port of the local port range (Linux's default `ip_local_port_range`), never 0.
pub const EPHEMERAL_PORTS: std::ops::RangeInclusive<u16> = 32768..=60999;

/// The ephemeral source port that the random value `r` picks.
pub fn ephemeral_port(r: u32) -> u16 {
    let (lo, hi) = (*EPHEMERAL_PORTS.start(), *EPHEMERAL_PORTS.end());
    lo + (r % u32::from(hi - lo + 1)) as u16
}

/// The IP CM private-data header of a REQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpCmHeader {
    pub major_version: u8,
    pub minor_version: u8,
    /// 4 for IPv4, 6 for IPv6.
    pub ip_version: u8,
    pub src_port: u16,
    /// IPv4: in the last four bytes, the rest zero (Linux `union cma_ip_addr`); IPv6: all 16.
    pub src_ip: [u8; 16],
    pub dst_ip: [u8; 16],
}

impl IpCmHeader {
    /// An IPv4 header, version 0.0.
    pub fn ipv4(src_ip: Ipv4Addr, src_port: u16, dst_ip: Ipv4Addr) -> IpCmHeader {
        let mut s = [0u8; 16];
        s[12..].copy_from_slice(&src_ip.octets());
        let mut d = [0u8; 16];
        d[12..].copy_from_slice(&dst_ip.octets());
        IpCmHeader {
            major_version: 0,
            minor_version: 0,
            ip_version: IP_VERSION_4,
            src_port,
            src_ip: s,
            dst_ip: d,
        }
    }

    /// An IPv6 header, version 0.0.
    pub fn ipv6(src_ip: Ipv6Addr, src_port: u16, dst_ip: Ipv6Addr) -> IpCmHeader {
        IpCmHeader {
            major_version: 0,
            minor_version: 0,
            ip_version: IP_VERSION_6,
            src_port,
            src_ip: src_ip.octets(),
            dst_ip: dst_ip.octets(),
        }
    }

    /// The header of a REQ from `src_ip` to `dst_ip`; `None` when their families differ.
    pub fn new(src_ip: IpAddr, src_port: u16, dst_ip: IpAddr) -> Option<IpCmHeader> {
        match (src_ip, dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Some(Self::ipv4(s, src_port, d)),
            (IpAddr::V6(s), IpAddr::V6(d)) => Some(Self::ipv6(s, src_port, d)),
            _ => None,
        }
    }

    /// Read the header from the start of REQ private data; only version 0 is accepted.
    pub fn parse(private: &[u8]) -> Result<IpCmHeader, IpCmError> {
        if private.len() < IP_CM_HEADER_LEN {
            return Err(IpCmError::Truncated);
        }
        let v = private[field::VERSION];
        let (major, minor) = (v >> 4, v & 0xf);
        if major != 0 {
            return Err(IpCmError::Version(major, minor));
        }
        let mut src_ip = [0u8; 16];
        src_ip.copy_from_slice(&private[field::SRC_IP]);
        let mut dst_ip = [0u8; 16];
        dst_ip.copy_from_slice(&private[field::DST_IP]);
        Ok(IpCmHeader {
            major_version: major,
            minor_version: minor,
            ip_version: private[field::IP_VERSION] >> 4,
            src_port: u16::from_be_bytes([private[2], private[3]]),
            src_ip,
            dst_ip,
        })
    }

    /// Write the header into the first 36 bytes of `private` (which must be that long).
    pub fn emit(&self, private: &mut [u8]) {
        private[field::VERSION] = (self.major_version << 4) | (self.minor_version & 0xf);
        private[field::IP_VERSION] = self.ip_version << 4;
        private[field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        private[field::SRC_IP].copy_from_slice(&self.src_ip);
        private[field::DST_IP].copy_from_slice(&self.dst_ip);
    }

    pub fn src_ipv4(&self) -> Ipv4Addr {
        ipv4_of(&self.src_ip)
    }
    pub fn dst_ipv4(&self) -> Ipv4Addr {
        ipv4_of(&self.dst_ip)
    }

    /// The source address in the header's IP version.
    pub fn src_addr(&self) -> Result<IpAddr, IpCmError> {
        self.addr(&self.src_ip)
    }

    /// The destination address in the header's IP version.
    pub fn dst_addr(&self) -> Result<IpAddr, IpCmError> {
        self.addr(&self.dst_ip)
    }

    fn addr(&self, field: &[u8; 16]) -> Result<IpAddr, IpCmError> {
        match self.ip_version {
            IP_VERSION_4 => Ok(IpAddr::V4(ipv4_of(field))),
            IP_VERSION_6 => Ok(IpAddr::V6(Ipv6Addr::from(*field))),
            v => Err(IpCmError::IpVersion(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_id() {
        assert_eq!(service_id_for_port(0x1d2f), 0x0000_0000_0106_1d2f);
        assert_eq!(port_of_service_id(0x0000_0000_0106_1d2f), Some(0x1d2f));
        assert_eq!(port_of_service_id(0x0000_0000_0111_1d2f), None);
    }

    #[test]
    fn header_roundtrip() {
        let h = IpCmHeader::ipv4(
            Ipv4Addr::new(192, 168, 2, 25),
            0xa129,
            Ipv4Addr::new(192, 168, 2, 24),
        );
        let mut b = [0u8; 92];
        h.emit(&mut b);
        assert_eq!(&b[..4], &[0x00, 0x40, 0xa1, 0x29]);
        assert_eq!(&b[16..20], &[192, 168, 2, 25]);
        assert_eq!(&b[32..36], &[192, 168, 2, 24]);
        assert_eq!(IpCmHeader::parse(&b).unwrap(), h);
        assert_eq!(IpCmHeader::parse(&b[..35]), Err(IpCmError::Truncated));
        b[0] = 0x10;
        assert_eq!(IpCmHeader::parse(&b), Err(IpCmError::Version(1, 0)));
    }

    #[test]
    fn ipv6_header_carries_whole_addresses() {
        let (a, b): (Ipv6Addr, Ipv6Addr) =
            ("fd00:77::1".parse().unwrap(), "fd00:77::2".parse().unwrap());
        let h = IpCmHeader::new(a.into(), 40000, b.into()).unwrap();
        let mut p = [0u8; 92];
        h.emit(&mut p);
        assert_eq!(&p[..4], &[0x00, 0x60, 0x9c, 0x40]);
        assert_eq!(&p[4..20], &a.octets());
        assert_eq!(&p[20..36], &b.octets());
        let back = IpCmHeader::parse(&p).unwrap();
        assert_eq!(back.src_addr(), Ok(IpAddr::V6(a)));
        assert_eq!(back.dst_addr(), Ok(IpAddr::V6(b)));
        assert_eq!(
            IpCmHeader::new(a.into(), 1, Ipv4Addr::LOCALHOST.into()),
            None
        );
        p[1] = 0x50;
        assert_eq!(
            IpCmHeader::parse(&p).unwrap().src_addr(),
            Err(IpCmError::IpVersion(5))
        );
    }

    #[test]
    fn gids_of_both_families() {
        let v6: Ipv6Addr = "fd00:77::1".parse().unwrap();
        assert_eq!(gid_of(v6.into()), v6.octets());
        assert_eq!(ip_of_gid(&v6.octets()), IpAddr::V6(v6));
        let v4 = Ipv4Addr::new(10, 0, 0, 1);
        assert_eq!(ip_of_gid(&gid_of(v4.into())), IpAddr::V4(v4));
    }

    #[test]
    fn gid() {
        let g = gid_from_ipv4(Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(g, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]);
        assert_eq!(ipv4_of(&g), Ipv4Addr::new(10, 0, 0, 1));
    }
}
