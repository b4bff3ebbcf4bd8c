//! [`Net`]: the neighbour layer of one port, with an IPv4 address, an IPv6 address or both. It
//! filters received frames (RoCEv2 for our
//! address goes up, over IPv4 or IPv6; ARP is answered and learnt from per RFC 826, Neighbor
//! Solicitations and Advertisements per RFC 4861 through the port's [`Ndp`]; everything else is
//! counted and dropped), resolves peers' MACs with ARP requests or Neighbor Solicitations and
//! their retries, and builds the Ethernet/IP/UDP headers of outgoing RoCEv2 packets (annex
//! A17.4).

use super::arp_frame::ArpFrame;
use super::config::{ConfigError, NetConfig};
use super::control_frame::ControlFrame;
use super::encap::{Encap, TrafficClass};
use super::error::NetError;
use super::ndp::{Ndp, NdpDrop, NdpInbound};
use super::neighbours::{CacheConfig, Neighbours, NetEvent, Resolve};
use super::receive::{receive_ipv4, receive_ipv6};
use super::route::Route;
use super::stats::{DropReason, NetStats};
use super::udp_port::udp_source_port;
use crate::time::Instant;
use crate::wire::arp::{self, ArpOperation, ArpRepr};
use crate::wire::ethernet::{self, EtherType, EthernetAddress};
use crate::wire::frame::ReceivedPacket;
use crate::wire::ipv6::{self, IPPROTO_ICMPV6};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

/// What became of a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// A valid RoCEv2 frame for our MAC and IP address, IPv4 or IPv6 (lengths, IPv4 checksum
    /// and ICRC checked).
    Roce(ReceivedPacket<'a>),
    /// An ARP packet or a Neighbor Solicitation or Advertisement, handled: learnt from and, if
    /// it asked for our address, answered (the answer waits in [`Net::poll_transmit`]).
    Consumed,
    /// Dropped and counted under the reason.
    Dropped(DropReason),
}

/// The neighbour layer of one port (sans-IO): ARP for its IPv4 address and Neighbor Discovery
/// for its IPv6 address, whichever it has.
#[derive(Debug)]
pub struct Net {
    config: NetConfig,
    neighbours: Neighbours<Ipv4Addr>,
    /// Neighbor Discovery for the port's IPv6 address, if it has one.
    ndp: Option<Ndp>,
    encap: Encap,
    /// Times `encap_mut` lent the encapsulator out (it may have changed).
    encap_lent: u64,
    /// ARP replies waiting to be sent.
    replies: VecDeque<ArpFrame>,
    stats: NetStats,
}

impl Net {
    /// A neighbour layer with empty caches; fails if the configuration does not validate.
    pub fn new(config: NetConfig) -> Result<Net, ConfigError> {
        config.validate()?;
        let ndp = config
            .ndp()
            .map(Ndp::new)
            .transpose()
            .map_err(ConfigError::Ipv6)?;
        Ok(Net {
            neighbours: Neighbours::new(CacheConfig::arp(&config)),
            ndp,
            encap: Encap::new(&config),
            encap_lent: 0,
            replies: VecDeque::new(),
            stats: NetStats::default(),
            config,
        })
    }

    pub fn config(&self) -> &NetConfig {
        &self.config
    }

    pub fn stats(&self) -> &NetStats {
        &self.stats
    }

    /// Neighbor Discovery of the port's IPv6 address (its configuration and counters), if the
    /// port has one.
    pub fn ndp(&self) -> Option<&Ndp> {
        self.ndp.as_ref()
    }

    /// The encapsulator, to read traffic classes.
    pub fn encap(&self) -> &Encap {
        &self.encap
    }

    /// The encapsulator, to set traffic classes per destination or per QP. Cached routes are
    /// rebuilt afterwards (see [`route_valid`](Self::route_valid)).
    pub fn encap_mut(&mut self) -> &mut Encap {
        self.encap_lent += 1;
        &mut self.encap
    }

    /// Changes so far of everything a [`Route`] is built from.
    fn generation(&self) -> u64 {
        self.neighbours.changes()
            + self.ndp.as_ref().map_or(0, Ndp::changes)
            + self.encap.changes()
            + self.encap_lent
    }

    /// True when `ip` is one of the port's own addresses (its IPv4 address, or its IPv6
    /// address if it has one).
    pub fn is_own_address(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.config.ipv4_addr() == Some(a),
            IpAddr::V6(a) => self.config.ipv6.is_some_and(|v6| v6.ip == a),
        }
    }

    /// The route of packets from local QP `src_qpn` to QP `dst_qpn` at `dst_ip`, for the QP
    /// to keep. Resolves like [`resolve`](Self::resolve): `NetError::Pending` while ARP or
    /// Neighbor Discovery is in progress.
    pub fn route(
        &mut self,
        now: Instant,
        dst_ip: IpAddr,
        src_qpn: u32,
        dst_qpn: u32,
    ) -> Result<Route, NetError> {
        let mac = self.resolved(now, dst_ip)?;
        // Our own address needs no neighbour entry (loopback): it never goes stale.
        let hop = self.next_hop(dst_ip)?;
        let ready_until = if self.is_own_address(hop) {
            None
        } else {
            let until = match hop {
                IpAddr::V4(a) => self.neighbours.ready_until(a),
                IpAddr::V6(a) => self.ndp.as_ref().and_then(|n| n.ready_until(a)),
            };
            until.ok_or(NetError::Pending(dst_ip))?
        };
        let tc = self.encap.traffic_class(dst_ip, src_qpn);
        let template = *self.encap.template(dst_ip, mac)?;
        Ok(Route {
            dst_ip,
            dst_qpn,
            template,
            tc,
            src_port: udp_source_port(src_qpn, dst_qpn),
            generation: self.generation(),
            ready_until,
        })
    }

    /// True while `route` still gives the headers
    /// [`write_headers_any_len`](Self::write_headers_any_len) would write at `now`: nothing
    /// in the neighbour caches or the encapsulation changed since it was built, and its
    /// neighbour entry is not due for a refresh.
    pub fn route_valid(&self, route: &Route, now: Instant) -> bool {
        route.generation == self.generation() && route.ready_until.is_none_or(|t| now < t)
    }

    /// Writes the Ethernet/IP/UDP header bytes of a RoCEv2 packet whose UDP payload is
    /// `roce_len` bytes along `route` (checked with [`route_valid`](Self::route_valid)):
    /// [`Route::headers_len`] bytes, 42 over IPv4 and 62 over IPv6. Returns that length.
    #[inline]
    pub fn write_route_headers(
        &mut self,
        route: &Route,
        roce_len: usize,
        buf: &mut [u8],
    ) -> Result<usize, NetError> {
        let ident = self.encap.next_ident();
        route
            .template
            .write(buf, route.tc, ident, route.src_port, roce_len)
    }

    /// Checks that `ip` is a peer we could reach: a unicast host of our subnet (IPv4) or
    /// prefix (IPv6), ourselves included (loopback through the port: the engine delivers frames
    /// to our own MAC to ourselves), or an IPv4 address a route covers. An address of a family
    /// the port has no address of is [`NetError::NoAddressOfFamily`]; IPv6 has no routes yet,
    /// so an IPv6 address off the prefix is [`NetError::NoRoute`].
    pub fn check_destination(&self, ip: IpAddr) -> Result<(), NetError> {
        self.next_hop(ip).map(|_| ())
    }

    /// The neighbour frames to `ip` go to: `ip` itself on the link, else (IPv4) the next hop of
    /// the longest route that covers it ([`check_destination`](Self::check_destination)'s
    /// errors otherwise).
    pub fn next_hop(&self, ip: IpAddr) -> Result<IpAddr, NetError> {
        match ip {
            IpAddr::V4(a) => self
                .next_hop_v4(a)
                .map(IpAddr::V4)
                .map_err(NetError::into_ip),
            IpAddr::V6(a) => match &self.ndp {
                Some(ndp) => ndp
                    .check_destination(a)
                    .map(|()| ip)
                    .map_err(NetError::into_ip),
                None => Err(NetError::NoAddressOfFamily(ip)),
            },
        }
    }

    /// [`next_hop`](Self::next_hop) of an IPv4 address.
    fn next_hop_v4(&self, ip: Ipv4Addr) -> Result<Ipv4Addr, NetError<Ipv4Addr>> {
        let c = &self.config;
        let Some(v4) = c.ipv4 else {
            return Err(NetError::NoAddressOfFamily(ip));
        };
        if ip == v4.ip {
            return Ok(ip);
        }
        if ip.is_loopback() {
            return Err(NetError::Loopback(ip));
        }
        if ip.is_unspecified()
            || ip.is_multicast()
            || ip.is_broadcast()
            || Some(ip) == v4.subnet_broadcast()
        {
            return Err(NetError::NotUnicast(ip));
        }
        if !v4.on_link(ip) {
            return c.routes.next_hop(ip).ok_or(NetError::NoRoute {
                ip,
                subnet: v4.subnet(),
                prefix_len: v4.prefix_len,
            });
        }
        if v4.prefix_len < 31 && ip == v4.subnet() {
            return Err(NetError::NotUnicast(ip));
        }
        Ok(ip)
    }

    /// Handles one received Ethernet frame (without FCS; Ethernet padding allowed).
    #[inline(always)]
    pub fn handle_frame<'a>(&mut self, now: Instant, frame: &'a [u8]) -> Inbound<'a> {
        self.stats.rx_frames += 1;
        let r = self.receive(now, frame);
        match r {
            Inbound::Roce(_) => self.stats.rx_roce += 1,
            Inbound::Dropped(reason) => self.stats.count_drop(reason),
            Inbound::Consumed => {}
        }
        r
    }

    /// Counts a frame the host's header prediction took (`wire::write_only`) as
    /// [`handle_frame`](Self::handle_frame) counts a valid RoCEv2 frame for us.
    #[inline(always)]
    pub fn count_predicted_roce(&mut self) {
        self.stats.rx_frames += 1;
        self.stats.rx_roce += 1;
    }

    #[inline(always)]
    fn receive<'a>(&mut self, now: Instant, frame: &'a [u8]) -> Inbound<'a> {
        let Ok(eth) = ethernet::Packet::new_checked(frame) else {
            return Inbound::Dropped(DropReason::Runt);
        };
        let dst = eth.dst_addr();
        match eth.ethertype() {
            EtherType::IPV4 if dst != self.config.mac => Inbound::Dropped(DropReason::NotOurMac),
            EtherType::IPV4 => match self.config.ipv4 {
                Some(v4) => match receive_ipv4(frame, v4.ip) {
                    Ok(f) => Inbound::Roce(f),
                    Err(DropReason::Icmp) => self.handle_icmp(frame, v4.ip),
                    Err(reason) => Inbound::Dropped(reason),
                },
                // A port without IPv4 speaks neither it nor ARP.
                None => Inbound::Dropped(DropReason::EtherType),
            },
            EtherType::ARP if dst != self.config.mac && !dst.is_multicast() => {
                Inbound::Dropped(DropReason::NotOurMac)
            }
            EtherType::ARP => match self.config.ipv4 {
                Some(v4) => self.handle_arp(now, &frame[ethernet::HEADER_LEN..], v4.ip),
                None => Inbound::Dropped(DropReason::EtherType),
            },
            EtherType::IPV6 => self.receive_ipv6(now, frame, dst),
            _ => Inbound::Dropped(DropReason::EtherType),
        }
    }

    /// An IPv6 frame: Neighbor Discovery goes to the [`Ndp`] (which checks its MAC, group and
    /// RFC 4861 §7.1 validity), RoCEv2 to our MAC and address is delivered, the rest dropped.
    /// Dropped as an EtherType we do not speak when the port has no IPv6 address.
    #[inline(never)]
    fn receive_ipv6<'a>(
        &mut self,
        now: Instant,
        frame: &'a [u8],
        dst: EthernetAddress,
    ) -> Inbound<'a> {
        let Some(ndp) = self.ndp.as_mut() else {
            return Inbound::Dropped(DropReason::EtherType);
        };
        let our_ip = ndp.config().ip;
        let next_header = frame.get(ethernet::HEADER_LEN + ipv6::field::NEXT_HEADER);
        if next_header == Some(&IPPROTO_ICMPV6) {
            return match ndp.handle_frame(now, frame) {
                NdpInbound::Consumed => Inbound::Consumed,
                NdpInbound::Dropped(why) => Inbound::Dropped(match why {
                    NdpDrop::NotNeighborDiscovery => DropReason::Icmpv6,
                    NdpDrop::NotOurMac => DropReason::NotOurMac,
                    NdpDrop::NotForUs => DropReason::NotOurIp,
                    NdpDrop::HopLimit | NdpDrop::BadChecksum | NdpDrop::Malformed => {
                        DropReason::MalformedNd
                    }
                }),
            };
        }
        if dst != self.config.mac {
            return Inbound::Dropped(DropReason::NotOurMac);
        }
        match receive_ipv6(frame, our_ip) {
            Ok(f) => Inbound::Roce(f),
            Err(reason) => Inbound::Dropped(reason),
        }
    }

    /// An ICMP message for us (its IPv4 header checked by the receive filter): a Destination
    /// Unreachable about one of our RoCEv2 datagrams is an event; anything else is dropped.
    fn handle_icmp(&mut self, frame: &[u8], our_ip: Ipv4Addr) -> Inbound<'static> {
        let l3 = &frame[ethernet::HEADER_LEN..];
        let ip = crate::wire::ipv4::Packet::new_unchecked(l3);
        let (hl, total) = (ip.header_len(), usize::from(ip.total_len()));
        let icmp = l3.get(hl..total).unwrap_or(&[]);
        match super::icmp::unreachable_destination(icmp, our_ip) {
            Some(dst) => {
                self.stats.rx_icmp_unreachable += 1;
                self.neighbours
                    .push_event(NetEvent::IcmpUnreachable { ip: dst });
                Inbound::Consumed
            }
            None => Inbound::Dropped(DropReason::Icmp),
        }
    }

    /// RFC 826 "Packet Reception", for Ethernet/IPv4 ARP to a port whose IPv4 address is
    /// `our_ip`.
    fn handle_arp(&mut self, now: Instant, payload: &[u8], our_ip: Ipv4Addr) -> Inbound<'static> {
        let Ok(repr) = arp::Packet::new_checked(payload).and_then(|p| ArpRepr::parse(&p)) else {
            return Inbound::Dropped(DropReason::MalformedArp);
        };
        match repr.operation {
            ArpOperation::Request => self.stats.rx_arp_requests += 1,
            ArpOperation::Reply => self.stats.rx_arp_replies += 1,
            ArpOperation::Unknown(_) => return Inbound::Dropped(DropReason::MalformedArp),
        }
        let (sha, spa) = (repr.source_hardware_addr, repr.source_protocol_addr);
        if !sha.is_unicast() {
            return Inbound::Dropped(DropReason::MalformedArp);
        }
        if sha == self.config.mac && spa == our_ip {
            // Our own frame reflected back (a bridge or tap echoing): nothing to learn.
            return Inbound::Consumed;
        }
        // A sender with our MAC but another address is not a reflection: on net_tap the
        // kernel side of the tap and the DPDK port share one MAC, and the kernel must still be
        // answered.
        if spa == our_ip {
            self.stats.arp_conflicts += 1;
            self.neighbours
                .push_event(NetEvent::AddressConflict { ip: spa, mac: sha });
            return Inbound::Consumed;
        }
        let for_us = repr.target_protocol_addr == our_ip;
        // Merge: only neighbours on the link go into the table (not 0.0.0.0 probes, not other
        // subnets). Header templates follow a changed MAC on their next use.
        if self.config.on_link(spa) && self.next_hop_v4(spa).is_ok() {
            self.neighbours
                .merge(now, spa, sha, for_us, &mut self.stats);
        }
        if for_us && repr.operation == ArpOperation::Request {
            if self.replies.len() >= self.config.tx_queue_capacity {
                self.stats.tx_queue_full += 1;
            } else {
                self.replies
                    .push_back(ArpFrame::reply(self.config.mac, our_ip, sha, spa));
            }
        }
        Inbound::Consumed
    }

    /// The MAC of `ip`, starting an ARP or Neighbor Discovery resolution (or the refresh of a
    /// stale entry) when needed. `Pending` means a request was queued for
    /// [`poll_transmit`](Self::poll_transmit); the outcome comes from
    /// [`poll_event`](Self::poll_event). Off the IPv4 subnet, the next hop is what is resolved
    /// (its outcome events name the next hop).
    pub fn resolve(&mut self, now: Instant, ip: IpAddr) -> Resolve {
        let hop = match self.next_hop(ip) {
            Ok(hop) => hop,
            Err(e) => return Resolve::Failed(e),
        };
        if self.is_own_address(hop) {
            return Resolve::Ready(self.config.mac);
        }
        match hop {
            IpAddr::V4(a) => self.neighbours.resolve(now, a, &mut self.stats).into_ip(),
            IpAddr::V6(a) => match self.ndp.as_mut() {
                Some(ndp) => ndp.resolve(now, a).into_ip(),
                None => Resolve::Failed(NetError::NoAddressOfFamily(ip)),
            },
        }
    }

    /// The cached MAC of `ip` (stale included; our own address: our MAC), with no side
    /// effects.
    pub fn lookup(&self, ip: IpAddr) -> Option<EthernetAddress> {
        let hop = self.next_hop(ip).ok()?;
        if self.is_own_address(hop) {
            return Some(self.config.mac);
        }
        match hop {
            IpAddr::V4(a) => self.neighbours.lookup(a),
            IpAddr::V6(a) => self.ndp.as_ref()?.lookup(a),
        }
    }

    /// Number of cache entries of both families (pending and failed ones included).
    pub fn cache_len(&self) -> usize {
        self.neighbours.len() + self.ndp.as_ref().map_or(0, Ndp::cache_len)
    }

    /// Adds a static neighbour on the link: never expires, never changed by ARP or
    /// advertisements.
    pub fn add_static(&mut self, ip: IpAddr, mac: EthernetAddress) -> Result<(), NetError> {
        self.check_destination(ip)?;
        if !mac.is_unicast() {
            return Err(NetError::NotUnicast(ip));
        }
        match ip {
            IpAddr::V4(a) => {
                if !self.config.on_link(a) {
                    // A static neighbour is on the link; an address behind a router has none.
                    return Err(NetError::NotOnLink(ip));
                }
                self.neighbours.insert_static(a, mac);
            }
            IpAddr::V6(a) => {
                let ndp = self.ndp.as_mut().ok_or(NetError::NoAddressOfFamily(ip))?;
                ndp.add_static(a, mac).map_err(NetError::into_ip)?;
            }
        }
        self.encap.forget(ip);
        Ok(())
    }

    /// Forgets `ip` (any state). Returns true if it was cached.
    pub fn remove_neighbour(&mut self, ip: IpAddr) -> bool {
        self.encap.forget(ip);
        match ip {
            IpAddr::V4(a) => self.neighbours.remove(a),
            IpAddr::V6(a) => self.ndp.as_mut().is_some_and(|n| n.remove_neighbour(a)),
        }
    }

    /// The next frame to send: ARP replies, then ARP requests, then Neighbor Discovery's
    /// advertisements and solicitations. Runs due timers first, so polling this every loop
    /// iteration is enough to drive retries.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<ControlFrame> {
        // Asked before every frame the host sends: nothing due is the common case, decided
        // inline with three loads (and one more without IPv6).
        if self.replies.is_empty()
            && !self.neighbours.has_request()
            && self.neighbours.poll_timeout().is_none_or(|t| t > now)
            && self.ndp.as_ref().is_none_or(|n| !n.due(now))
        {
            return None;
        }
        self.poll_transmit_due(now)
    }

    /// [`poll_transmit`](Self::poll_transmit) once something may be due.
    #[inline(never)]
    fn poll_transmit_due(&mut self, now: Instant) -> Option<ControlFrame> {
        if self.neighbours.poll_timeout().is_some_and(|t| t <= now) {
            self.neighbours.handle_timeout(now, &mut self.stats);
        }
        if let Some(f) = self.replies.pop_front() {
            self.stats.tx_arp_replies += 1;
            return Some(ControlFrame::Arp(f));
        }
        // Requests exist only for a port with an IPv4 address (`next_hop_v4`).
        if let (Some(v4), Some(ip)) = (self.config.ipv4, self.neighbours.poll_request()) {
            self.stats.tx_arp_requests += 1;
            return Some(ControlFrame::Arp(ArpFrame::request(
                self.config.mac,
                v4.ip,
                ip,
            )));
        }
        self.ndp.as_mut()?.poll_transmit(now).map(ControlFrame::Nd)
    }

    /// True when an ARP or Neighbor Discovery frame waits to be sent (timers aside: see
    /// [`poll_timeout`](Self::poll_timeout)).
    pub fn has_transmit(&self) -> bool {
        !self.replies.is_empty()
            || self.neighbours.has_request()
            || self.ndp.as_ref().is_some_and(Ndp::has_transmit)
    }

    /// True when [`poll_event`](Self::poll_event) has an event.
    #[inline]
    pub fn has_event(&self) -> bool {
        self.neighbours.has_event() || self.ndp.as_ref().is_some_and(Ndp::has_event)
    }

    /// The next resolution outcome, ICMP report or address conflict, of either family.
    pub fn poll_event(&mut self) -> Option<NetEvent> {
        if let Some(e) = self.neighbours.poll_event() {
            return Some(e.into_ip());
        }
        Some(self.ndp.as_mut()?.poll_event()?.into_ip())
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let v4 = self.neighbours.poll_timeout();
        match self.ndp.as_ref().and_then(Ndp::poll_timeout) {
            Some(t) => Some(v4.map_or(t, |u| u.min(t))),
            None => v4,
        }
    }

    /// Sends due ARP and Neighbor Discovery retries and fails exhausted resolutions.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.neighbours.handle_timeout(now, &mut self.stats);
        if let Some(ndp) = self.ndp.as_mut() {
            ndp.handle_timeout(now);
        }
    }

    fn resolved(&mut self, now: Instant, ip: IpAddr) -> Result<EthernetAddress, NetError> {
        match self.resolve(now, ip) {
            Resolve::Ready(mac) => Ok(mac),
            Resolve::Pending => Err(NetError::Pending(ip)),
            Resolve::Failed(e) => Err(e),
        }
    }

    /// Header reprs for an IPv4 RoCEv2 packet from local QP `src_qpn` to QP `dst_qpn` at
    /// `dst_ip` (for `RoceFrame::new`): the tests' oracle for the templates' bytes.
    #[cfg(test)]
    pub(crate) fn frame_for(
        &mut self,
        now: Instant,
        dst_ip: Ipv4Addr,
        src_qpn: u32,
        dst_qpn: u32,
    ) -> Result<
        (
            crate::wire::ethernet::EthernetRepr,
            crate::wire::ipv4::Ipv4Repr,
            crate::wire::udp::UdpRepr,
        ),
        NetError,
    > {
        let mac = self.resolved(now, IpAddr::V4(dst_ip))?;
        Ok(self.encap.frame_for(dst_ip, mac, src_qpn, dst_qpn))
    }

    /// Writes the Ethernet/IP/UDP header bytes (42 over IPv4, 62 over IPv6) of a RoCEv2 packet
    /// whose UDP payload (BTH through ICRC) is `roce_len` bytes, from the destination's
    /// template, checking the MTU. Returns the length written.
    pub fn write_headers(
        &mut self,
        now: Instant,
        dst_ip: IpAddr,
        src_qpn: u32,
        dst_qpn: u32,
        roce_len: usize,
        buf: &mut [u8],
    ) -> Result<usize, NetError> {
        let mac = self.resolved(now, dst_ip)?;
        self.encap
            .write_headers(dst_ip, mac, src_qpn, dst_qpn, roce_len, buf)
    }

    /// [`write_headers`](Self::write_headers) without the MTU check, for the host's transmit
    /// path (see [`Encap::write_headers_any_len`]). Returns the length written.
    pub fn write_headers_any_len(
        &mut self,
        now: Instant,
        dst_ip: IpAddr,
        src_qpn: u32,
        dst_qpn: u32,
        roce_len: usize,
        buf: &mut [u8],
    ) -> Result<usize, NetError> {
        let mac = self.resolved(now, dst_ip)?;
        self.encap
            .write_headers_any_len(dst_ip, mac, src_qpn, dst_qpn, roce_len, buf)
    }

    /// The length of the Ethernet/IP/UDP headers of packets to `ip`: 42 over IPv4, 62 over
    /// IPv6.
    pub fn headers_len(ip: IpAddr) -> usize {
        match ip {
            IpAddr::V4(_) => super::encap::HEADERS_LEN,
            IpAddr::V6(_) => super::encap::HEADERS_LEN_V6,
        }
    }

    /// The ECN codepoint of the port's RoCEv2 packets from now on (`NetConfig::ecn`: 0 not
    /// ECT, 1 ECT(1), 2 ECT(0); CE is refused).
    pub fn set_ecn(&mut self, ecn: u8) -> Result<(), ConfigError> {
        if ecn > 2 {
            return Err(ConfigError::Ecn(ecn));
        }
        self.config.ecn = ecn;
        self.encap.set_default_ecn(ecn);
        Ok(())
    }

    /// Sets the traffic class of packets to `ip`; see [`Encap::set_dest_traffic_class`].
    pub fn set_dest_traffic_class(&mut self, ip: IpAddr, tc: TrafficClass) {
        self.encap.set_dest_traffic_class(ip, tc);
    }

    /// Sets the traffic class of packets from local QP `qpn`.
    pub fn set_qp_traffic_class(&mut self, qpn: u32, tc: TrafficClass) {
        self.encap.set_qp_traffic_class(qpn, tc);
    }

    /// Back to the destination's or the default traffic class for QP `qpn`'s packets.
    pub fn clear_qp_traffic_class(&mut self, qpn: u32) {
        self.encap.clear_qp_traffic_class(qpn);
    }
}
