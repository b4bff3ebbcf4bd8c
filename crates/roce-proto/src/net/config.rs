//! Configuration of the neighbour layer: our identity (MAC, IPv4 address and prefix, and an
//! optional IPv6 address and prefix), the IP header fields we send (RFC 791 TTL, DSCP and ECN
//! in the former TOS byte; the same values in IPv6's hop limit and traffic class, RFC 8200 §3)
//! and the ARP timers, which Neighbor Discovery uses too (RFC 826 leaves retransmission and
//! cache lifetime to the implementation; the defaults follow Linux: 1 s between requests, 3
//! retries, entries confirmed within 30 s are fresh, close to RFC 4861 §10's).

use super::ndp::{NdpConfig, NdpConfigError};
use super::routes::{IpRoute, RouteTable};
use crate::wire::ethernet::EthernetAddress;
use core::time::Duration;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Smallest IP MTU accepted: every IPv4 host must accept 576-byte datagrams (RFC 791), and a
/// RoCEv2 packet with a 256-byte IB MTU needs 320.
pub const MIN_MTU: u16 = 576;

/// Largest IP MTU accepted (jumbo frames).
pub const MAX_MTU: u16 = 9216;

/// Smallest IP MTU of a port with an IPv6 address: every IPv6 link carries 1280-byte packets
/// (RFC 8200 §5).
pub const MIN_MTU_IPV6: u16 = 1280;

/// Bytes of a RoCEv2 packet around a full-MTU payload: IPv4 20, UDP 8, BTH 12, the largest
/// extension headers that come with a payload (RETH 16 + ImmDt 4) and the ICRC 4.
const ROCE_OVERHEAD: u32 = 20 + 8 + 12 + 20 + 4;

/// What an IPv6 header (40 bytes, RFC 8200 §3) adds to [`ROCE_OVERHEAD`] over IPv4's 20.
const IPV6_EXTRA: u32 = 20;

/// A port's IPv4 address and subnet (`[roce] address = "10.0.0.1/24"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Identity {
    /// A unicast host address of its subnet.
    pub ip: Ipv4Addr,
    /// Subnet prefix length, 1..=31 (/31 is a point-to-point link, RFC 3021). Destinations
    /// outside the subnet go to the next hop of `NetConfig::routes`, or are unreachable.
    pub prefix_len: u8,
}

impl Ipv4Identity {
    fn netmask_bits(&self) -> u32 {
        match self.prefix_len {
            0 => 0,
            n if n >= 32 => u32::MAX,
            n => u32::MAX << (32 - u32::from(n)),
        }
    }

    /// The subnet mask, e.g. 255.255.255.0 for /24.
    pub fn netmask(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.netmask_bits())
    }

    /// The subnet's network address.
    pub fn subnet(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.ip) & self.netmask_bits())
    }

    /// True when `ip` is in the subnet (the address itself and the broadcast address included).
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        let m = self.netmask_bits();
        u32::from(ip) & m == u32::from(self.ip) & m
    }

    /// The directed broadcast address of the subnet (none on a /31).
    pub fn subnet_broadcast(&self) -> Option<Ipv4Addr> {
        (self.prefix_len < 31).then(|| Ipv4Addr::from(u32::from(self.ip) | !self.netmask_bits()))
    }

    /// True for the subnet's network and directed-broadcast addresses (none on /31 links, RFC
    /// 3021).
    fn is_network_or_broadcast(&self, ip: Ipv4Addr) -> bool {
        let host = u32::from(ip) & !self.netmask_bits();
        self.prefix_len < 31 && (host == 0 || host == !self.netmask_bits())
    }
}

/// A port's IPv6 address and on-link prefix (`[roce] address = "fd00:77::1/64"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Identity {
    /// A global or unique-local unicast address (`ndp::check_host_address`).
    pub ip: Ipv6Addr,
    /// The on-link prefix length, 1..=127. IPv6 has no routes yet: destinations off the prefix
    /// are `NetError::NoRoute`.
    pub prefix_len: u8,
}

/// Configuration of a [`Net`](super::Net). Build it with [`NetConfig::new`] and adjust fields;
/// [`NetConfig::validate`] (called by `Net::new`) rejects values that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetConfig {
    /// Our MAC address: unicast.
    pub mac: EthernetAddress,
    /// Our IPv4 address, if the port has one (ARP answers for it and RoCEv2/IPv4 to it is
    /// delivered). A port has an IPv4 address, an IPv6 address or both.
    pub ipv4: Option<Ipv4Identity>,
    /// Our IPv6 address, if the port has one ([`with_ipv6`](Self::with_ipv6)): Neighbor
    /// Discovery answers for it and RoCEv2/IPv6 to it is delivered. The ARP timers and limits
    /// below serve Neighbor Discovery too.
    pub ipv6: Option<Ipv6Identity>,
    /// Static IPv4 routes (a gateway is the default route): next hops on the IPv4 subnet for
    /// destinations outside it. None without an IPv4 address.
    pub routes: RouteTable,
    /// IP MTU of the link (Ethernet payload size), [`MIN_MTU`]..=[`MAX_MTU`].
    pub mtu: u16,
    /// Default DSCP of RoCEv2 packets (6 bits; 26 is the common RoCE lossless class).
    pub dscp: u8,
    /// Default ECN codepoint of RoCEv2 packets: 0 (not ECT), 1 (ECT(1)) or 2 (ECT(0)); 3 (CE)
    /// is set by switches, never by a sender.
    pub ecn: u8,
    /// IP time to live, >= 1; the IPv6 hop limit too.
    pub ttl: u8,
    /// Time between ARP requests for an unanswered address.
    pub arp_retry_interval: Duration,
    /// Requests sent after the first one before a resolution fails.
    pub arp_max_retries: u32,
    /// An entry confirmed longer ago than this is stale: still used, but the next `resolve`
    /// sends a new request to refresh it.
    pub arp_cache_ttl: Duration,
    /// After a failed resolution, `resolve` answers `Failed` for this long before trying again.
    pub arp_failed_hold: Duration,
    /// Most cache entries (pending ones included). When full, the oldest settled entry goes.
    pub arp_cache_capacity: usize,
    /// Most ARP frames waiting in the transmit queue; more are dropped and counted.
    pub tx_queue_capacity: usize,
}

impl NetConfig {
    /// An IPv4 port's configuration with the defaults: MTU 1500, DSCP 0, ECN 0, TTL 64, ARP
    /// retry every second up to 3 times, 30 s cache lifetime, 1 s hold after a failure, 1024
    /// entries. [`with_ipv6`](Self::with_ipv6) adds an IPv6 address.
    pub fn new(mac: EthernetAddress, ip: Ipv4Addr, prefix_len: u8) -> NetConfig {
        NetConfig {
            ipv4: Some(Ipv4Identity { ip, prefix_len }),
            ipv6: None,
            ..NetConfig::ipv6_only(mac, Ipv6Addr::UNSPECIFIED, 0)
        }
    }

    /// An IPv6-only port's configuration: `ip` on a `/prefix_len` prefix, no IPv4 address (so
    /// no ARP and no routes), the defaults of [`new`](Self::new).
    pub fn ipv6_only(mac: EthernetAddress, ip: Ipv6Addr, prefix_len: u8) -> NetConfig {
        NetConfig {
            mac,
            ipv4: None,
            ipv6: Some(Ipv6Identity { ip, prefix_len }),
            routes: RouteTable::default(),
            mtu: 1500,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            arp_retry_interval: Duration::from_secs(1),
            arp_max_retries: 3,
            arp_cache_ttl: Duration::from_secs(30),
            arp_failed_hold: Duration::from_secs(1),
            arp_cache_capacity: 1024,
            tx_queue_capacity: 64,
        }
    }

    /// This configuration with the IPv6 address `ip` on a `/prefix_len` prefix as well.
    pub fn with_ipv6(self, ip: Ipv6Addr, prefix_len: u8) -> NetConfig {
        NetConfig {
            ipv6: Some(Ipv6Identity { ip, prefix_len }),
            ..self
        }
    }

    /// The Neighbor Discovery configuration of the port's IPv6 address: its MAC and address,
    /// with the ARP timers and limits.
    pub fn ndp(&self) -> Option<NdpConfig> {
        let v6 = self.ipv6?;
        Some(NdpConfig {
            retry_interval: self.arp_retry_interval,
            max_retries: self.arp_max_retries,
            reachable_time: self.arp_cache_ttl,
            failed_hold: self.arp_failed_hold,
            cache_capacity: self.arp_cache_capacity,
            tx_queue_capacity: self.tx_queue_capacity,
            ..NdpConfig::new(self.mac, v6.ip, v6.prefix_len)
        })
    }

    /// The port's IPv4 address, if it has one.
    pub fn ipv4_addr(&self) -> Option<Ipv4Addr> {
        self.ipv4.map(|v4| v4.ip)
    }

    /// The port's first address, to name it: IPv4 if it has one, else IPv6 (unspecified only
    /// for a configuration that does not validate).
    pub fn primary_address(&self) -> IpAddr {
        match (self.ipv4, self.ipv6) {
            (Some(v4), _) => IpAddr::V4(v4.ip),
            (None, Some(v6)) => IpAddr::V6(v6.ip),
            (None, None) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }

    /// Checks every field; the first bad one is reported.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.mac.is_unicast() {
            return Err(ConfigError::MacNotUnicast(self.mac));
        }
        if self.ipv4.is_none() && self.ipv6.is_none() {
            return Err(ConfigError::NoAddress);
        }
        if let Some(v4) = self.ipv4 {
            Self::validate_ipv4(v4)?;
        }
        for r in self.routes.iter() {
            let Some(v4) = self.ipv4 else {
                return Err(ConfigError::NextHop(r));
            };
            let via = r.via;
            if !v4.on_link(via) || via == v4.ip || v4.is_network_or_broadcast(via) {
                return Err(ConfigError::NextHop(r));
            }
            if !r.is_default() && r.overlaps(v4.ip, v4.prefix_len) {
                return Err(ConfigError::RouteIntoSubnet(r));
            }
        }
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(ConfigError::Mtu(self.mtu));
        }
        if self.dscp > 63 {
            return Err(ConfigError::Dscp(self.dscp));
        }
        if self.ecn > 2 {
            return Err(ConfigError::Ecn(self.ecn));
        }
        if self.ttl == 0 {
            return Err(ConfigError::Ttl);
        }
        if self.arp_retry_interval.is_zero() {
            return Err(ConfigError::ZeroDuration("arp_retry_interval"));
        }
        if self.arp_cache_ttl.is_zero() {
            return Err(ConfigError::ZeroDuration("arp_cache_ttl"));
        }
        if self.arp_cache_capacity == 0 {
            return Err(ConfigError::ZeroCapacity("arp_cache_capacity"));
        }
        if self.tx_queue_capacity == 0 {
            return Err(ConfigError::ZeroCapacity("tx_queue_capacity"));
        }
        if let Some(ndp) = self.ndp() {
            ndp.validate().map_err(ConfigError::Ipv6)?;
            if self.mtu < MIN_MTU_IPV6 {
                return Err(ConfigError::Ipv6Mtu(self.mtu));
            }
        }
        Ok(())
    }

    /// The IPv4 address's own rules: prefix 1..=31, a unicast host address of its subnet (the
    /// network and directed-broadcast addresses excepted, but on /31 links, RFC 3021).
    fn validate_ipv4(v4: Ipv4Identity) -> Result<(), ConfigError> {
        if !(1..=31).contains(&v4.prefix_len) {
            return Err(ConfigError::PrefixLen(v4.prefix_len));
        }
        let ip = v4.ip;
        if ip.is_unspecified() || ip.is_loopback() || ip.is_multicast() || ip.is_broadcast() {
            return Err(ConfigError::IpNotUnicast(ip));
        }
        if v4.is_network_or_broadcast(ip) {
            return Err(ConfigError::IpNotHost {
                ip,
                prefix_len: v4.prefix_len,
            });
        }
        Ok(())
    }

    /// True when `ip` is in our IPv4 subnet (our own address and the broadcast address
    /// included); false without an IPv4 address.
    pub fn on_link(&self, ip: Ipv4Addr) -> bool {
        self.ipv4.is_some_and(|v4| v4.on_link(ip))
    }

    /// The largest IB path MTU (256, 512, 1024, 2048 or 4096) whose packets fit in the IP MTU:
    /// 1024 on a 1500-byte link, 4096 on 4200 and above. With an IPv6 address, packets must
    /// fit behind IPv6's 40-byte header (the QPs of a port share one path MTU).
    pub fn path_mtu(&self) -> u32 {
        let overhead = ROCE_OVERHEAD + if self.ipv6.is_some() { IPV6_EXTRA } else { 0 };
        let room = u32::from(self.mtu).saturating_sub(overhead);
        [4096, 2048, 1024, 512]
            .into_iter()
            .find(|&m| m <= room)
            .unwrap_or(256)
    }
}

/// A [`NetConfig`] value that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("MAC address {0} is not unicast (group bit set or all zeros)")]
    MacNotUnicast(EthernetAddress),
    #[error("no address: a port needs an IPv4 address, an IPv6 address or both")]
    NoAddress,
    #[error("prefix length /{0} not supported: need 1..=31 (a /32 has no neighbour on the link, not even a gateway)")]
    PrefixLen(u8),
    #[error(
        "IPv4 address {0} is not a unicast address (unspecified, loopback, multicast or broadcast)"
    )]
    IpNotUnicast(Ipv4Addr),
    #[error("IPv4 address {ip} is the network or broadcast address of its /{prefix_len} subnet")]
    IpNotHost { ip: Ipv4Addr, prefix_len: u8 },
    #[error("route {0}: the next hop must be another host of the port's IPv4 subnet")]
    NextHop(IpRoute),
    #[error("route {0}: its destination overlaps the port's own subnet, which is on the link")]
    RouteIntoSubnet(IpRoute),
    #[error("MTU {0} out of range {MIN_MTU}..={MAX_MTU}")]
    Mtu(u16),
    #[error("DSCP {0} does not fit in 6 bits")]
    Dscp(u8),
    #[error("ECN {0} not allowed: senders use 0 (not ECT), 1 (ECT(1)) or 2 (ECT(0)); 3 (CE) is set by switches")]
    Ecn(u8),
    #[error("TTL 0: packets would be dropped by the first hop")]
    Ttl,
    #[error("{0} must not be zero")]
    ZeroDuration(&'static str),
    #[error("{0} must not be zero")]
    ZeroCapacity(&'static str),
    /// The `ipv6` field: the address or its prefix length (`NdpConfig::validate`).
    #[error("ipv6: {0}")]
    Ipv6(NdpConfigError),
    #[error(
        "MTU {0} too small for IPv6: every IPv6 link carries {MIN_MTU_IPV6} bytes (RFC 8200 §5)"
    )]
    Ipv6Mtu(u16),
}
