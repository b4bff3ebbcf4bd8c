//! [`Net`]: the neighbour layer of one port. It filters received frames (RoCEv2 for our address
//! goes up, ARP is answered and learnt from per RFC 826, everything else is counted and
//! dropped), resolves peers' MACs with ARP requests and retries, and builds the
//! Ethernet/IPv4/UDP headers of outgoing RoCEv2 packets (annex A17.4).

use super::arp_frame::ArpFrame;
use super::config::{ConfigError, NetConfig};
use super::encap::{Encap, TrafficClass};
use super::error::NetError;
use super::neighbours::{CacheConfig, Neighbours, NetEvent, Resolve};
use super::receive::receive_ipv4;
use super::route::Route;
use super::stats::{DropReason, NetStats};
use super::udp_port::udp_source_port;
use crate::time::Instant;
use crate::wire::arp::{self, ArpOperation, ArpRepr};
use crate::wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr};
use crate::wire::frame::ReceivedPacket;
use crate::wire::ipv4::Ipv4Repr;
use crate::wire::udp::UdpRepr;
use std::collections::VecDeque;
use std::net::Ipv4Addr;

/// What became of a received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inbound<'a> {
    /// A valid RoCEv2 frame for our MAC and IP (lengths, IP checksum and ICRC checked).
    Roce(ReceivedPacket<'a>),
    /// An ARP packet, handled: learnt from and, if it asked for our address, answered (the
    /// reply waits in [`Net::poll_transmit`]).
    Consumed,
    /// Dropped and counted under the reason.
    Dropped(DropReason),
}

/// The IPv4/ARP neighbour layer of one port (sans-IO).
#[derive(Debug)]
pub struct Net {
    config: NetConfig,
    neighbours: Neighbours<Ipv4Addr>,
    encap: Encap,
    /// Times `encap_mut` lent the encapsulator out (it may have changed).
    encap_lent: u64,
    /// ARP replies waiting to be sent.
    replies: VecDeque<ArpFrame>,
    stats: NetStats,
}

impl Net {
    /// A neighbour layer with an empty cache; fails if the configuration does not validate.
    pub fn new(config: NetConfig) -> Result<Net, ConfigError> {
        config.validate()?;
        Ok(Net {
            neighbours: Neighbours::new(CacheConfig::arp(&config)),
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
        self.neighbours.changes() + self.encap.changes() + self.encap_lent
    }

    /// The route of packets from local QP `src_qpn` to QP `dst_qpn` at `dst_ip`, for the QP
    /// to keep. Resolves like [`resolve`](Self::resolve): `NetError::Pending` while ARP is in
    /// progress.
    pub fn route(
        &mut self,
        now: Instant,
        dst_ip: Ipv4Addr,
        src_qpn: u32,
        dst_qpn: u32,
    ) -> Result<Route, NetError> {
        let mac = self.resolved(now, dst_ip)?;
        // Our own address needs no neighbour entry (loopback): it never goes stale.
        let hop = self.next_hop(dst_ip)?;
        let ready_until = if hop == self.config.ip {
            None
        } else {
            self.neighbours
                .ready_until(hop)
                .ok_or(NetError::Pending(dst_ip))?
        };
        let tc = self.encap.traffic_class(dst_ip, src_qpn);
        let template = *self.encap.template(dst_ip, mac);
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
    /// in the neighbour cache or the encapsulation changed since it was built, and its
    /// neighbour entry is not due for a refresh.
    pub fn route_valid(&self, route: &Route, now: Instant) -> bool {
        route.generation == self.generation() && route.ready_until.is_none_or(|t| now < t)
    }

    /// Writes the 42 Ethernet/IPv4/UDP header bytes of a RoCEv2 packet whose UDP payload is
    /// `roce_len` bytes along `route` (checked with [`route_valid`](Self::route_valid)).
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

    /// Checks that `ip` is a peer we could reach: a unicast host of our subnet, ourselves
    /// included (loopback through the port: the engine delivers frames to our own MAC to
    /// ourselves), or a unicast address a route covers.
    pub fn check_destination(&self, ip: Ipv4Addr) -> Result<(), NetError> {
        self.next_hop(ip).map(|_| ())
    }

    /// The neighbour frames to `ip` go to: `ip` itself on our subnet, else the next hop of the
    /// longest route that covers it ([`check_destination`](Self::check_destination)'s errors
    /// otherwise).
    pub fn next_hop(&self, ip: Ipv4Addr) -> Result<Ipv4Addr, NetError> {
        let c = &self.config;
        if ip == c.ip {
            return Ok(ip);
        }
        if ip.is_loopback() {
            return Err(NetError::Loopback(ip));
        }
        if ip.is_unspecified()
            || ip.is_multicast()
            || ip.is_broadcast()
            || Some(ip) == c.subnet_broadcast()
        {
            return Err(NetError::NotUnicast(ip));
        }
        if !c.on_link(ip) {
            return c.routes.next_hop(ip).ok_or(NetError::NoRoute {
                ip,
                subnet: Ipv4Addr::from(u32::from(c.ip) & u32::from(c.netmask())),
                prefix_len: c.prefix_len,
            });
        }
        if c.prefix_len < 31 && u32::from(ip) & !u32::from(c.netmask()) == 0 {
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
            EtherType::IPV4 => match receive_ipv4(frame, self.config.ip) {
                Ok(f) => Inbound::Roce(f),
                Err(DropReason::Icmp) => self.handle_icmp(frame),
                Err(reason) => Inbound::Dropped(reason),
            },
            EtherType::ARP if dst != self.config.mac && !dst.is_multicast() => {
                Inbound::Dropped(DropReason::NotOurMac)
            }
            EtherType::ARP => self.handle_arp(now, &frame[ethernet::HEADER_LEN..]),
            _ => Inbound::Dropped(DropReason::EtherType),
        }
    }

    /// An ICMP message for us (its IPv4 header checked by the receive filter): a Destination
    /// Unreachable about one of our RoCEv2 datagrams is an event; anything else is dropped.
    fn handle_icmp(&mut self, frame: &[u8]) -> Inbound<'static> {
        let l3 = &frame[ethernet::HEADER_LEN..];
        let ip = crate::wire::ipv4::Packet::new_unchecked(l3);
        let (hl, total) = (ip.header_len(), usize::from(ip.total_len()));
        let icmp = l3.get(hl..total).unwrap_or(&[]);
        match super::icmp::unreachable_destination(icmp, self.config.ip) {
            Some(dst) => {
                self.stats.rx_icmp_unreachable += 1;
                self.neighbours
                    .push_event(NetEvent::IcmpUnreachable { ip: dst });
                Inbound::Consumed
            }
            None => Inbound::Dropped(DropReason::Icmp),
        }
    }

    /// RFC 826 "Packet Reception", for Ethernet/IPv4 ARP.
    fn handle_arp(&mut self, now: Instant, payload: &[u8]) -> Inbound<'static> {
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
        if sha == self.config.mac && spa == self.config.ip {
            // Our own frame reflected back (a bridge or tap echoing): nothing to learn.
            return Inbound::Consumed;
        }
        // A sender with our MAC but another address is not a reflection: on net_tap the
        // kernel side of the tap and the DPDK port share one MAC, and the kernel must still be
        // answered.
        if spa == self.config.ip {
            self.stats.arp_conflicts += 1;
            self.neighbours
                .push_event(NetEvent::AddressConflict { ip: spa, mac: sha });
            return Inbound::Consumed;
        }
        let for_us = repr.target_protocol_addr == self.config.ip;
        // Merge: only neighbours on the link go into the table (not 0.0.0.0 probes, not other
        // subnets). Header templates follow a changed MAC on their next use.
        if self.config.on_link(spa) && self.check_destination(spa).is_ok() {
            self.neighbours
                .merge(now, spa, sha, for_us, &mut self.stats);
        }
        if for_us && repr.operation == ArpOperation::Request {
            if self.replies.len() >= self.config.tx_queue_capacity {
                self.stats.tx_queue_full += 1;
            } else {
                self.replies
                    .push_back(ArpFrame::reply(self.config.mac, self.config.ip, sha, spa));
            }
        }
        Inbound::Consumed
    }

    /// The MAC of `ip`, starting an ARP resolution (or the refresh of a stale entry) when
    /// needed. `Pending` means a request was queued for [`poll_transmit`](Self::poll_transmit);
    /// the outcome comes from [`poll_event`](Self::poll_event).
    /// Off the subnet, the next hop is what is resolved (its outcome events name the next
    /// hop).
    pub fn resolve(&mut self, now: Instant, ip: Ipv4Addr) -> Resolve {
        let hop = match self.next_hop(ip) {
            Ok(hop) => hop,
            Err(e) => return Resolve::Failed(e),
        };
        if hop == self.config.ip {
            return Resolve::Ready(self.config.mac);
        }
        self.neighbours.resolve(now, hop, &mut self.stats)
    }

    /// The cached MAC of `ip` (stale included; our own address: our MAC), with no side
    /// effects.
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<EthernetAddress> {
        let hop = self.next_hop(ip).ok()?;
        if hop == self.config.ip {
            return Some(self.config.mac);
        }
        self.neighbours.lookup(hop)
    }

    /// Number of cache entries (pending and failed ones included).
    pub fn cache_len(&self) -> usize {
        self.neighbours.len()
    }

    /// Adds a static neighbour: never expires, never changed by ARP.
    pub fn add_static(&mut self, ip: Ipv4Addr, mac: EthernetAddress) -> Result<(), NetError> {
        self.check_destination(ip)?;
        if !self.config.on_link(ip) {
            // A static neighbour is on the link; an address behind a router has none.
            return Err(NetError::NotOnLink(ip));
        }
        if !mac.is_unicast() {
            return Err(NetError::NotUnicast(ip));
        }
        self.neighbours.insert_static(ip, mac);
        self.encap.forget(ip);
        Ok(())
    }

    /// Forgets `ip` (any state). Returns true if it was cached.
    pub fn remove_neighbour(&mut self, ip: Ipv4Addr) -> bool {
        self.encap.forget(ip);
        self.neighbours.remove(ip)
    }

    /// The next ARP frame to send: replies first, then requests. Runs due timers first, so
    /// polling this every loop iteration is enough to drive retries.
    #[inline]
    pub fn poll_transmit(&mut self, now: Instant) -> Option<ArpFrame> {
        // Asked before every frame the host sends: nothing due is the common case, decided
        // inline with three loads.
        if self.replies.is_empty()
            && !self.neighbours.has_request()
            && self.neighbours.poll_timeout().is_none_or(|t| t > now)
        {
            return None;
        }
        self.poll_transmit_due(now)
    }

    /// [`poll_transmit`](Self::poll_transmit) once something may be due.
    #[inline(never)]
    fn poll_transmit_due(&mut self, now: Instant) -> Option<ArpFrame> {
        if self.neighbours.poll_timeout().is_some_and(|t| t <= now) {
            self.handle_timeout(now);
        }
        if let Some(f) = self.replies.pop_front() {
            self.stats.tx_arp_replies += 1;
            return Some(f);
        }
        let ip = self.neighbours.poll_request()?;
        self.stats.tx_arp_requests += 1;
        Some(ArpFrame::request(self.config.mac, self.config.ip, ip))
    }

    /// True when an ARP reply or request waits to be sent (timers aside: see
    /// [`poll_timeout`](Self::poll_timeout)).
    pub fn has_transmit(&self) -> bool {
        !self.replies.is_empty() || self.neighbours.has_request()
    }

    /// True when [`poll_event`](Self::poll_event) has an event.
    #[inline]
    pub fn has_event(&self) -> bool {
        self.neighbours.has_event()
    }

    /// The next resolution outcome or address conflict.
    pub fn poll_event(&mut self) -> Option<NetEvent> {
        self.neighbours.poll_event()
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.neighbours.poll_timeout()
    }

    /// Sends due ARP retries and fails exhausted resolutions.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.neighbours.handle_timeout(now, &mut self.stats);
    }

    fn resolved(&mut self, now: Instant, ip: Ipv4Addr) -> Result<EthernetAddress, NetError> {
        match self.resolve(now, ip) {
            Resolve::Ready(mac) => Ok(mac),
            Resolve::Pending => Err(NetError::Pending(ip)),
            Resolve::Failed(e) => Err(e),
        }
    }

    /// Header reprs for a RoCEv2 packet from local QP `src_qpn` to QP `dst_qpn` at `dst_ip`
    /// (for `RoceFrame::new`). Resolves like [`resolve`](Self::resolve):
    /// `NetError::Pending` while ARP is in progress.
    pub fn frame_for(
        &mut self,
        now: Instant,
        dst_ip: Ipv4Addr,
        src_qpn: u32,
        dst_qpn: u32,
    ) -> Result<(EthernetRepr, Ipv4Repr, UdpRepr), NetError> {
        let mac = self.resolved(now, dst_ip)?;
        Ok(self.encap.frame_for(dst_ip, mac, src_qpn, dst_qpn))
    }

    /// Writes the 42 Ethernet/IPv4/UDP header bytes of a RoCEv2 packet whose UDP payload (BTH
    /// through ICRC) is `roce_len` bytes, from the destination's template. Returns 42.
    pub fn write_headers(
        &mut self,
        now: Instant,
        dst_ip: Ipv4Addr,
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
    /// path: the same bytes as [`frame_for`](Self::frame_for)'s reprs emitted, from the
    /// destination's template (see [`Encap::write_headers_any_len`]).
    pub fn write_headers_any_len(
        &mut self,
        now: Instant,
        dst_ip: Ipv4Addr,
        src_qpn: u32,
        dst_qpn: u32,
        roce_len: usize,
        buf: &mut [u8],
    ) -> Result<usize, NetError> {
        let mac = self.resolved(now, dst_ip)?;
        self.encap
            .write_headers_any_len(dst_ip, mac, src_qpn, dst_qpn, roce_len, buf)
    }

    /// Sets the traffic class of packets to `ip`; see [`Encap::set_dest_traffic_class`].
    pub fn set_dest_traffic_class(&mut self, ip: Ipv4Addr, tc: TrafficClass) {
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
