//! [`Ndp`]: IPv6 Neighbor Discovery for one port's IPv6 address (RFC 4861 §7, address
//! resolution and reachability), sans-IO like [`Net`](super::Net) is for ARP: the caller passes
//! frames and time in, and takes solicitations and advertisements out.
//!
//! - A Neighbor Solicitation for our address is answered (solicited, override, unicast to the
//!   solicitor; to all nodes when it comes from :: in duplicate address detection) and teaches
//!   us the solicitor's MAC, as an ARP request for our address does.
//! - [`Ndp::resolve`] solicits a neighbour's MAC at its solicited-node group, retries every
//!   `retry_interval` and fails after `1 + max_retries` solicitations ([`NetEvent::Unresolvable`]);
//!   a stale entry is refreshed by a unicast solicitation to the MAC we hold (§7.3.3) while the
//!   MAC stays in use.
//! - A Neighbor Advertisement updates an entry we already have (pending or known) and never
//!   creates one: unsolicited and gratuitous advertisements for addresses we never asked for
//!   are ignored, as ARP replies are. One without the override flag does not move a known MAC
//!   (§7.2.5).
//! - An advertisement or solicitation claiming our address from another MAC is
//!   [`NetEvent::AddressConflict`].
//!
//! Simplifications: the cache's states are those of the ARP cache (`neighbours.rs`), so an
//! unsolicited advertisement that moves a MAC confirms the entry as a solicited one does (RFC
//! 4861 leaves it STALE); there is no router or prefix discovery, no redirect, no link-local
//! address of our own, and destinations off the prefix have no route yet.

use super::error::NetError;
use super::nd_frame::NdFrame;
use super::neighbours::{CacheConfig, CacheStats, Neighbours, NetEvent, Resolve};
use crate::time::Instant;
use crate::wire::ethernet::{self, EtherType, EthernetAddress};
use crate::wire::icmpv6::{self, msg_type, NdiscRepr, NDISC_HOP_LIMIT};
use crate::wire::ipv6::{self, Ipv6Repr, IPPROTO_ICMPV6};
use crate::wire::WireError;
use core::time::Duration;
use std::collections::VecDeque;
use std::net::Ipv6Addr;

/// Why an IPv6 address cannot be a port's own (the rules `config::Ipv6Cidr` applies too).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.reason())]
pub enum Ipv6AddressError {
    PrefixLen,
    Unspecified,
    Loopback,
    Multicast,
    Ipv4Mapped,
    LinkLocal,
    SubnetRouterAnycast,
}

impl Ipv6AddressError {
    /// The reason in words (the error's message), for `config`'s parsers.
    pub const fn reason(self) -> &'static str {
        match self {
            Ipv6AddressError::PrefixLen => "the prefix length is not 1..=128",
            Ipv6AddressError::Unspecified => ":: is the unspecified address, not a host address",
            Ipv6AddressError::Loopback => {
                "::1 is the loopback address and cannot be reached over the port"
            }
            Ipv6AddressError::Multicast => "a multicast address (ff00::/8) is not a host address",
            Ipv6AddressError::Ipv4Mapped => {
                "an IPv4-mapped address (::ffff:0:0/96) is an IPv4 address: write it as one"
            }
            Ipv6AddressError::LinkLocal => {
                "a link-local address (fe80::/10) needs an interface scope and is not supported \
                 yet: use a global or unique-local (fd00::/8) address"
            }
            Ipv6AddressError::SubnetRouterAnycast => {
                "this is the prefix's subnet-router anycast address (all host bits zero)"
            }
        }
    }
}

/// Checks that `ip` can be a port's own address on a `/prefix_len` prefix: a global or
/// unique-local unicast address (RFC 4291 §2.5), not the prefix's subnet-router anycast
/// address (§2.6.1: all host bits zero, on prefixes up to /126; /127 links have none, RFC 6164).
pub fn check_host_address(ip: Ipv6Addr, prefix_len: u8) -> Result<(), Ipv6AddressError> {
    if !(1..=128).contains(&prefix_len) {
        return Err(Ipv6AddressError::PrefixLen);
    }
    if ip.is_unspecified() {
        return Err(Ipv6AddressError::Unspecified);
    }
    if ip.is_loopback() {
        return Err(Ipv6AddressError::Loopback);
    }
    if ip.is_multicast() {
        return Err(Ipv6AddressError::Multicast);
    }
    if ip.to_ipv4_mapped().is_some() {
        return Err(Ipv6AddressError::Ipv4Mapped);
    }
    if ipv6::is_link_local(&ip) {
        return Err(Ipv6AddressError::LinkLocal);
    }
    if prefix_len <= 126 && u128::from(ip) & !prefix_mask(prefix_len) == 0 {
        return Err(Ipv6AddressError::SubnetRouterAnycast);
    }
    Ok(())
}

/// The mask of a `/len` prefix.
fn prefix_mask(len: u8) -> u128 {
    u128::MAX
        .checked_shl(128 - u32::from(len.min(128)))
        .unwrap_or(0)
}

/// Configuration of an [`Ndp`]. The defaults follow RFC 4861 §10: a solicitation every second
/// (RetransTimer), three in all (MAX_MULTICAST_SOLICIT), neighbours confirmed within 30 s are
/// fresh (REACHABLE_TIME).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdpConfig {
    /// Our MAC address: unicast.
    pub mac: EthernetAddress,
    /// Our IPv6 address ([`check_host_address`]).
    pub ip: Ipv6Addr,
    /// The on-link prefix length, 1..=127 (a /128 has no neighbour on the link).
    pub prefix_len: u8,
    /// Time between solicitations for an unanswered address.
    pub retry_interval: Duration,
    /// Solicitations sent after the first one before a resolution fails.
    pub max_retries: u32,
    /// An entry confirmed longer ago than this is stale: used, and refreshed on the next
    /// `resolve`.
    pub reachable_time: Duration,
    /// After a failed resolution, `resolve` answers `Failed` for this long.
    pub failed_hold: Duration,
    /// Most cache entries (pending ones included).
    pub cache_capacity: usize,
    /// Most advertisements waiting to be sent; more are dropped and counted.
    pub tx_queue_capacity: usize,
}

/// An [`NdpConfig`] value that cannot work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NdpConfigError {
    #[error("MAC address {0} is not unicast")]
    MacNotUnicast(EthernetAddress),
    #[error("IPv6 address {ip}/{prefix_len}: {reason}")]
    Address {
        ip: Ipv6Addr,
        prefix_len: u8,
        reason: Ipv6AddressError,
    },
    #[error("prefix length /128 not supported: a /128 has no neighbour on the link")]
    HostPrefix,
    #[error("{0} must not be zero")]
    Zero(&'static str),
}

impl NdpConfig {
    /// A configuration with the RFC 4861 defaults (type documentation), a 1 s hold after a
    /// failure, 1024 entries and 64 queued advertisements.
    pub fn new(mac: EthernetAddress, ip: Ipv6Addr, prefix_len: u8) -> NdpConfig {
        NdpConfig {
            mac,
            ip,
            prefix_len,
            retry_interval: Duration::from_secs(1),
            max_retries: 2,
            reachable_time: Duration::from_secs(30),
            failed_hold: Duration::from_secs(1),
            cache_capacity: 1024,
            tx_queue_capacity: 64,
        }
    }

    /// Checks every field; the first bad one is reported.
    pub fn validate(&self) -> Result<(), NdpConfigError> {
        if !self.mac.is_unicast() {
            return Err(NdpConfigError::MacNotUnicast(self.mac));
        }
        check_host_address(self.ip, self.prefix_len).map_err(|reason| NdpConfigError::Address {
            ip: self.ip,
            prefix_len: self.prefix_len,
            reason,
        })?;
        if self.prefix_len == 128 {
            return Err(NdpConfigError::HostPrefix);
        }
        for (what, zero) in [
            ("retry_interval", self.retry_interval.is_zero()),
            ("reachable_time", self.reachable_time.is_zero()),
            ("cache_capacity", self.cache_capacity == 0),
            ("tx_queue_capacity", self.tx_queue_capacity == 0),
        ] {
            if zero {
                return Err(NdpConfigError::Zero(what));
            }
        }
        Ok(())
    }

    /// True when `ip` is on the link: in our prefix, or link-local.
    pub fn on_link(&self, ip: Ipv6Addr) -> bool {
        let m = prefix_mask(self.prefix_len);
        u128::from(ip) & m == u128::from(self.ip) & m || ipv6::is_link_local(&ip)
    }

    fn cache(&self) -> CacheConfig {
        CacheConfig {
            retry_interval: self.retry_interval,
            max_retries: self.max_retries,
            ttl: self.reachable_time,
            failed_hold: self.failed_hold,
            capacity: self.cache_capacity,
        }
    }
}

/// Why [`Ndp::handle_frame`] dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NdpDrop {
    /// Not a Neighbor Solicitation or Advertisement: not IPv6, another next header (RoCEv2's
    /// UDP among them: the caller's), an extension header, another ICMPv6 message.
    NotNeighborDiscovery,
    /// To a MAC that is neither ours, nor our solicited-node group's, nor all nodes'.
    NotOurMac,
    /// To another IPv6 address or group, or a solicitation for another target.
    NotForUs,
    /// Hop limit not 255: it crossed a router (RFC 4861 §7.1.1).
    HopLimit,
    /// ICMPv6 checksum wrong (RFC 4443 §2.3).
    BadChecksum,
    /// Any other RFC 4861 §7.1 validity check: truncated, code, target, options, a DAD probe
    /// with a link-layer address, a solicited advertisement to a group; a bad IPv6 header.
    Malformed,
}

impl NdpDrop {
    /// Every reason, in counter order.
    pub const ALL: [NdpDrop; 6] = [
        NdpDrop::NotNeighborDiscovery,
        NdpDrop::NotOurMac,
        NdpDrop::NotForUs,
        NdpDrop::HopLimit,
        NdpDrop::BadChecksum,
        NdpDrop::Malformed,
    ];
}

/// Counters of an [`Ndp`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NdpStats {
    pub rx_solicitations: u64,
    pub rx_advertisements: u64,
    /// Solicitations sent (first tries, retries, refreshes).
    pub tx_solicitations: u64,
    pub tx_advertisements: u64,
    /// Advertisements not queued because the queue was full.
    pub tx_queue_full: u64,
    /// Messages from another MAC claiming our address.
    pub address_conflicts: u64,
    pub resolved: u64,
    pub unresolvable: u64,
    pub cache_evictions: u64,
    drops: [u64; NdpDrop::ALL.len()],
}

impl NdpStats {
    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: NdpDrop) -> u64 {
        self.drops[reason as usize]
    }
    /// Frames dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }
}

impl CacheStats for NdpStats {
    fn count_resolved(&mut self) {
        self.resolved += 1;
    }
    fn count_unresolvable(&mut self) {
        self.unresolvable += 1;
    }
    fn count_eviction(&mut self) {
        self.cache_evictions += 1;
    }
}

/// What became of a frame given to [`Ndp::handle_frame`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdpInbound {
    /// A valid solicitation or advertisement, handled (learnt from, answered).
    Consumed,
    /// Dropped and counted under the reason.
    Dropped(NdpDrop),
}

/// The IPv6 neighbour layer of one port (sans-IO).
#[derive(Debug)]
pub struct Ndp {
    config: NdpConfig,
    neighbours: Neighbours<Ipv6Addr>,
    /// Advertisements waiting to be sent.
    replies: VecDeque<NdFrame>,
    stats: NdpStats,
}

impl Ndp {
    /// A layer with an empty cache; fails if the configuration does not validate.
    pub fn new(config: NdpConfig) -> Result<Ndp, NdpConfigError> {
        config.validate()?;
        Ok(Ndp {
            neighbours: Neighbours::new(config.cache()),
            replies: VecDeque::new(),
            stats: NdpStats::default(),
            config,
        })
    }

    pub fn config(&self) -> &NdpConfig {
        &self.config
    }

    pub fn stats(&self) -> &NdpStats {
        &self.stats
    }

    /// Handles one received Ethernet frame (without FCS; padding allowed). Only Neighbor
    /// Solicitations and Advertisements are consumed.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) -> NdpInbound {
        let r = self.receive(now, frame);
        if let NdpInbound::Dropped(reason) = r {
            self.stats.drops[reason as usize] += 1;
        }
        r
    }

    fn receive(&mut self, now: Instant, frame: &[u8]) -> NdpInbound {
        use NdpDrop::*;
        let drop = NdpInbound::Dropped;
        let Ok(eth) = ethernet::Packet::new_checked(frame) else {
            return drop(NotNeighborDiscovery);
        };
        if eth.ethertype() != EtherType::IPV6 {
            return drop(NotNeighborDiscovery);
        }
        let l3 = &frame[ethernet::HEADER_LEN..];
        let ip = match ipv6::Packet::new_checked(l3).and_then(|p| Ipv6Repr::parse(&p)) {
            Ok(ip) => ip,
            Err(_) => return drop(Malformed),
        };
        let end = ipv6::HEADER_LEN + usize::from(ipv6::Packet::new_unchecked(l3).payload_len());
        let message = l3.get(ipv6::HEADER_LEN..end).unwrap_or_default();
        let ty = message.first().copied();
        if ip.next_header != IPPROTO_ICMPV6
            || !matches!(
                ty,
                Some(msg_type::NEIGHBOR_SOLICIT | msg_type::NEIGHBOR_ADVERT)
            )
        {
            return drop(NotNeighborDiscovery);
        }
        let dst_mac = eth.dst_addr();
        let group = ipv6::solicited_node(self.config.ip);
        if dst_mac != self.config.mac
            && dst_mac != ipv6::multicast_mac(group)
            && dst_mac != ipv6::multicast_mac(ipv6::ALL_NODES)
        {
            return drop(NotOurMac);
        }
        if ip.dst_addr != self.config.ip && ip.dst_addr != group && ip.dst_addr != ipv6::ALL_NODES {
            return drop(NotForUs);
        }
        let nd = match NdiscRepr::parse(&ip, &icmpv6::Packet::new_unchecked(message)) {
            Ok(nd) => nd,
            Err(WireError::BadValue("NDP hop limit")) => return drop(HopLimit),
            Err(WireError::BadValue("ICMPv6 checksum")) => return drop(BadChecksum),
            Err(_) => return drop(Malformed),
        };
        debug_assert_eq!(ip.hop_limit, NDISC_HOP_LIMIT);
        let sender_mac = nd.lladdr().unwrap_or(eth.src_addr());
        match nd {
            NdiscRepr::NeighborSolicit { target_addr, .. } => {
                self.stats.rx_solicitations += 1;
                if target_addr != self.config.ip {
                    return drop(NotForUs);
                }
                self.handle_solicitation(now, ip.src_addr, sender_mac, nd.lladdr())
            }
            NdiscRepr::NeighborAdvert {
                flags,
                target_addr,
                target_lladdr,
            } => {
                self.stats.rx_advertisements += 1;
                self.handle_advertisement(now, target_addr, sender_mac, target_lladdr, flags)
            }
        }
    }

    /// RFC 4861 §7.2.3/§7.2.4: a valid solicitation for our address from `src` at `mac`
    /// (`lladdr`: its source link-layer option).
    fn handle_solicitation(
        &mut self,
        now: Instant,
        src: Ipv6Addr,
        mac: EthernetAddress,
        lladdr: Option<EthernetAddress>,
    ) -> NdpInbound {
        let c = self.config;
        if src == c.ip {
            if mac != c.mac {
                self.conflict(mac);
            }
            // Our own solicitation reflected back: nothing to learn or answer.
            return NdpInbound::Consumed;
        }
        if !mac.is_unicast() {
            return NdpInbound::Dropped(NdpDrop::Malformed);
        }
        // Learn the solicitor (it asked for us, as an ARP request for our address teaches
        // its sender). A DAD probe (from ::, no link-layer option) teaches nothing.
        if let Some(m) = lladdr {
            if c.on_link(src) {
                self.neighbours.merge(now, src, m, true, &mut self.stats);
            }
        }
        if self.replies.len() >= c.tx_queue_capacity {
            self.stats.tx_queue_full += 1;
        } else {
            self.replies
                .push_back(NdFrame::advertisement(c.mac, c.ip, mac, src));
        }
        NdpInbound::Consumed
    }

    /// RFC 4861 §7.2.5: a valid advertisement that `target` is at `mac`.
    fn handle_advertisement(
        &mut self,
        now: Instant,
        target: Ipv6Addr,
        mac: EthernetAddress,
        lladdr: Option<EthernetAddress>,
        flags: icmpv6::NaFlags,
    ) -> NdpInbound {
        let c = self.config;
        if target == c.ip {
            if mac != c.mac {
                self.conflict(mac);
            }
            return NdpInbound::Consumed;
        }
        // Without the target's link-layer address there is nothing to record; an address we
        // never asked for is not added (merge with addressed_to_us = false).
        let Some(m) = lladdr.filter(EthernetAddress::is_unicast) else {
            return NdpInbound::Consumed;
        };
        if !c.on_link(target) {
            return NdpInbound::Consumed;
        }
        let known = self.neighbours.lookup(target);
        if !flags.override_ && known.is_some_and(|old| old != m) {
            // A known MAC is replaced only by an advertisement that says to (§7.2.5).
            return NdpInbound::Consumed;
        }
        self.neighbours
            .merge(now, target, m, false, &mut self.stats);
        NdpInbound::Consumed
    }

    fn conflict(&mut self, mac: EthernetAddress) {
        self.stats.address_conflicts += 1;
        self.neighbours.push_event(NetEvent::AddressConflict {
            ip: self.config.ip,
            mac,
        });
    }

    /// Checks that `ip` is a neighbour we could resolve: our own address, or a unicast address
    /// on the link.
    pub fn check_destination(&self, ip: Ipv6Addr) -> Result<(), NetError<Ipv6Addr>> {
        let c = &self.config;
        if ip == c.ip {
            return Ok(());
        }
        if ip.is_loopback() {
            return Err(NetError::Loopback(ip));
        }
        if ip.is_unspecified() || ip.is_multicast() {
            return Err(NetError::NotUnicast(ip));
        }
        if !c.on_link(ip) {
            return Err(NetError::NoRoute {
                ip,
                subnet: Ipv6Addr::from(u128::from(c.ip) & prefix_mask(c.prefix_len)),
                prefix_len: c.prefix_len,
            });
        }
        if c.prefix_len <= 126 && u128::from(ip) & !prefix_mask(c.prefix_len) == 0 {
            return Err(NetError::NotUnicast(ip));
        }
        Ok(())
    }

    /// The MAC of `ip`, starting a resolution (or the refresh of a stale entry) when needed.
    /// `Pending` means a solicitation waits in [`poll_transmit`](Self::poll_transmit); the
    /// outcome comes from [`poll_event`](Self::poll_event).
    pub fn resolve(&mut self, now: Instant, ip: Ipv6Addr) -> Resolve<Ipv6Addr> {
        if let Err(e) = self.check_destination(ip) {
            return Resolve::Failed(e);
        }
        if ip == self.config.ip {
            return Resolve::Ready(self.config.mac);
        }
        self.neighbours.resolve(now, ip, &mut self.stats)
    }

    /// The cached MAC of `ip` (stale included; our own address: our MAC), with no side effects.
    pub fn lookup(&self, ip: Ipv6Addr) -> Option<EthernetAddress> {
        if ip == self.config.ip {
            return Some(self.config.mac);
        }
        self.neighbours.lookup(ip)
    }

    /// Number of cache entries (pending and failed ones included).
    pub fn cache_len(&self) -> usize {
        self.neighbours.len()
    }

    /// Changes to the cache so far (a route built from it is valid while this stays).
    pub(super) fn changes(&self) -> u64 {
        self.neighbours.changes()
    }

    /// How long `resolve(ip)` keeps answering `Ready` (`Neighbours::ready_until`).
    pub(super) fn ready_until(&self, ip: Ipv6Addr) -> Option<Option<Instant>> {
        self.neighbours.ready_until(ip)
    }

    /// Adds a static neighbour on the link: never expires, never changed by advertisements.
    pub fn add_static(
        &mut self,
        ip: Ipv6Addr,
        mac: EthernetAddress,
    ) -> Result<(), NetError<Ipv6Addr>> {
        self.check_destination(ip)?;
        if !mac.is_unicast() {
            return Err(NetError::NotUnicast(ip));
        }
        self.neighbours.insert_static(ip, mac);
        Ok(())
    }

    /// Forgets `ip` (any state). Returns true if it was cached.
    pub fn remove_neighbour(&mut self, ip: Ipv6Addr) -> bool {
        self.neighbours.remove(ip)
    }

    /// The next frame to send: advertisements first, then solicitations. Runs due timers
    /// first, so polling this every loop iteration drives the retries.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<NdFrame> {
        if self.neighbours.poll_timeout().is_some_and(|t| t <= now) {
            self.handle_timeout(now);
        }
        if let Some(f) = self.replies.pop_front() {
            self.stats.tx_advertisements += 1;
            return Some(f);
        }
        let target = self.neighbours.poll_request()?;
        self.stats.tx_solicitations += 1;
        // A stale entry's refresh goes unicast to the MAC we hold (§7.3.3).
        let known = self.neighbours.lookup(target);
        Some(NdFrame::solicitation(
            self.config.mac,
            self.config.ip,
            target,
            known,
        ))
    }

    /// True when a frame waits to be sent (timers aside: see [`poll_timeout`](Self::poll_timeout)).
    pub fn has_transmit(&self) -> bool {
        !self.replies.is_empty() || self.neighbours.has_request()
    }

    /// True when [`poll_transmit`](Self::poll_transmit) may have a frame at `now` (one waits, or
    /// a timer is due).
    pub(super) fn due(&self, now: Instant) -> bool {
        self.has_transmit() || self.neighbours.poll_timeout().is_some_and(|t| t <= now)
    }

    /// True when [`poll_event`](Self::poll_event) has an event.
    pub fn has_event(&self) -> bool {
        self.neighbours.has_event()
    }

    /// The next resolution outcome or address conflict.
    pub fn poll_event(&mut self) -> Option<NetEvent<Ipv6Addr>> {
        self.neighbours.poll_event()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.neighbours.poll_timeout()
    }

    /// Queues due retries and fails exhausted resolutions.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.neighbours.handle_timeout(now, &mut self.stats);
    }
}
