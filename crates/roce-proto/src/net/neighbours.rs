//! The neighbour cache and its resolution state machine, for both families: ARP for IPv4 (RFC
//! 826, `Net`) and Neighbor Discovery for IPv6 (RFC 4861, `Ndp`). The cache is generic over the
//! address ([`NeighbourAddr`]); what is sent and how answers are read is the caller's.
//!
//! An entry is one of:
//! - *incomplete*: requests are being sent, one now and one every retry interval, up to
//!   `1 + max_retries` in all; when the last one goes unanswered for an interval the entry
//!   fails and [`NetEvent::Unresolvable`] is reported;
//! - *reachable*: the MAC is known; once older than the cache lifetime it is stale and the next
//!   lookup through `resolve` starts a refresh (same request schedule) while the stale MAC stays
//!   in use; a refresh that fails removes the MAC and reports `Unresolvable`;
//! - *static*: configured, never refreshed or overwritten;
//! - *failed*: `resolve` answers `Failed` until the failed hold has passed, then tries again.
//!
//! Received answers go through RFC 826's merge rule ([`Neighbours::merge`]): an address
//! already in the table gets the sender's MAC; a new one is added only when the packet was
//! addressed to us (an ARP request for our address, a Neighbor Solicitation for it), never
//! from an unsolicited reply or advertisement. RFC 4861's reachability states map onto these:
//! INCOMPLETE is *incomplete*, REACHABLE is *reachable* while fresh, STALE/DELAY/PROBE are a
//! stale *reachable* entry being refreshed.

use super::config::NetConfig;
use super::error::NetError;
use super::stats::NetStats;
use crate::time::Instant;
use crate::wire::ethernet::EthernetAddress;
use core::time::Duration;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address the neighbour cache resolves to a MAC: IPv4 (ARP) or IPv6 (Neighbor Discovery),
/// or either ([`IpAddr`], what [`Net`](super::Net) reports).
pub trait NeighbourAddr:
    Copy + Ord + Eq + core::hash::Hash + core::fmt::Debug + core::fmt::Display + 'static
{
    /// The resolution protocol of this address, for messages ("ARP").
    fn protocol(&self) -> &'static str;
    /// Its answer, for messages ("ARP reply").
    fn answer(&self) -> &'static str;
    /// The family, for messages ("IPv4").
    fn family(&self) -> &'static str;
}

impl NeighbourAddr for Ipv4Addr {
    fn protocol(&self) -> &'static str {
        "ARP"
    }
    fn answer(&self) -> &'static str {
        "ARP reply"
    }
    fn family(&self) -> &'static str {
        "IPv4"
    }
}

impl NeighbourAddr for Ipv6Addr {
    fn protocol(&self) -> &'static str {
        "Neighbor Discovery"
    }
    fn answer(&self) -> &'static str {
        "Neighbor Advertisement"
    }
    fn family(&self) -> &'static str {
        "IPv6"
    }
}

impl NeighbourAddr for IpAddr {
    fn protocol(&self) -> &'static str {
        match self {
            IpAddr::V4(a) => a.protocol(),
            IpAddr::V6(a) => a.protocol(),
        }
    }
    fn answer(&self) -> &'static str {
        match self {
            IpAddr::V4(a) => a.answer(),
            IpAddr::V6(a) => a.answer(),
        }
    }
    fn family(&self) -> &'static str {
        match self {
            IpAddr::V4(a) => a.family(),
            IpAddr::V6(a) => a.family(),
        }
    }
}

/// The counters a neighbour cache keeps in its owner's statistics.
pub(crate) trait CacheStats {
    /// A pending resolution got its answer.
    fn count_resolved(&mut self);
    /// A resolution or refresh failed after all retries.
    fn count_unresolvable(&mut self);
    /// A settled entry was evicted to make room.
    fn count_eviction(&mut self);
}

impl CacheStats for NetStats {
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

/// Outcome of [`Net::resolve`](super::Net::resolve) (either family, `A` = [`IpAddr`]) and of
/// the neighbour caches beneath it ([`Ndp::resolve`](super::Ndp::resolve): `Ipv6Addr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolve<A: NeighbourAddr = IpAddr> {
    /// The peer's MAC (possibly stale and being refreshed).
    Ready(EthernetAddress),
    /// An ARP request or Neighbor Solicitation is out; [`NetEvent::Resolved`] or
    /// [`NetEvent::Unresolvable`] follows.
    Pending,
    /// The peer cannot be reached: [`NetError::Unreachable`] after unanswered requests, or an
    /// address error ([`NetError::NoRoute`], [`NetError::Loopback`], ...).
    Failed(NetError<A>),
}

/// What the neighbour layer reports, from [`Net::poll_event`](super::Net::poll_event) (either
/// family, `A` = [`IpAddr`]) and [`Ndp::poll_event`](super::Ndp::poll_event) (`Ipv6Addr`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetEvent<A: NeighbourAddr = IpAddr> {
    /// A pending resolution got its answer, or a known neighbour's MAC changed.
    Resolved { ip: A, mac: EthernetAddress },
    /// All requests for `ip` went unanswered: connection attempts to it should fail with
    /// [`NetError::Unreachable`].
    Unresolvable { ip: A },
    /// A router (or the peer) reported a RoCEv2 datagram to `ip` undeliverable (ICMP
    /// Destination Unreachable, `icmp.rs`).
    IcmpUnreachable { ip: A },
    /// Another station (`mac`) claims our own address `ip` (in its ARP packets, or its
    /// Neighbor Advertisements).
    AddressConflict { ip: A, mac: EthernetAddress },
}

impl<A: NeighbourAddr + Into<IpAddr>> Resolve<A> {
    /// The same outcome with the address as an [`IpAddr`].
    pub fn into_ip(self) -> Resolve {
        match self {
            Resolve::Ready(mac) => Resolve::Ready(mac),
            Resolve::Pending => Resolve::Pending,
            Resolve::Failed(e) => Resolve::Failed(e.into_ip()),
        }
    }
}

impl<A: NeighbourAddr + Into<IpAddr>> NetEvent<A> {
    /// The same event with the address as an [`IpAddr`].
    pub fn into_ip(self) -> NetEvent {
        match self {
            NetEvent::Resolved { ip, mac } => NetEvent::Resolved { ip: ip.into(), mac },
            NetEvent::Unresolvable { ip } => NetEvent::Unresolvable { ip: ip.into() },
            NetEvent::IcmpUnreachable { ip } => NetEvent::IcmpUnreachable { ip: ip.into() },
            NetEvent::AddressConflict { ip, mac } => {
                NetEvent::AddressConflict { ip: ip.into(), mac }
            }
        }
    }
}

/// Requests sent so far for an entry and when the next one (or the failure) is due.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Probe {
    sent: u32,
    next: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Incomplete(Probe),
    Reachable {
        mac: EthernetAddress,
        confirmed: Instant,
        refresh: Option<Probe>,
    },
    Static(EthernetAddress),
    Failed {
        requests: u32,
        until: Instant,
    },
}

/// The neighbour cache. Address checks (subnet, loopback) are the caller's: see `Net`, `Ndp`.
#[derive(Debug)]
pub(crate) struct Neighbours<A: NeighbourAddr> {
    entries: BTreeMap<A, Entry>,
    /// `poll_timeout`'s answer while no entry changed (`None`: recompute): the poll loop asks
    /// on every iteration, the table changes rarely.
    deadline: Cell<Option<Option<Instant>>>,
    /// Counts changes to the table (any entry added, changed or removed): a route cached by a
    /// sender stays valid while this stays the same.
    changes: u64,
    /// Addresses to send a request (ARP request, Neighbor Solicitation) for, in order.
    requests: VecDeque<A>,
    events: VecDeque<NetEvent<A>>,
    retry_interval: Duration,
    max_retries: u32,
    ttl: Duration,
    failed_hold: Duration,
    capacity: usize,
}

/// The timers and size of a [`Neighbours`] cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct CacheConfig {
    pub(crate) retry_interval: Duration,
    pub(crate) max_retries: u32,
    pub(crate) ttl: Duration,
    pub(crate) failed_hold: Duration,
    pub(crate) capacity: usize,
}

impl CacheConfig {
    /// The ARP cache's settings of `config`.
    pub(crate) fn arp(config: &NetConfig) -> Self {
        CacheConfig {
            retry_interval: config.arp_retry_interval,
            max_retries: config.arp_max_retries,
            ttl: config.arp_cache_ttl,
            failed_hold: config.arp_failed_hold,
            capacity: config.arp_cache_capacity,
        }
    }
}

impl<A: NeighbourAddr> Neighbours<A> {
    pub(crate) fn new(config: CacheConfig) -> Neighbours<A> {
        Neighbours {
            entries: BTreeMap::new(),
            deadline: Cell::new(None),
            changes: 0,
            requests: VecDeque::new(),
            events: VecDeque::new(),
            retry_interval: config.retry_interval,
            max_retries: config.max_retries,
            ttl: config.ttl,
            failed_hold: config.failed_hold,
            capacity: config.capacity,
        }
    }

    /// The MAC of `ip` if known (stale included), without side effects.
    pub(crate) fn lookup(&self, ip: A) -> Option<EthernetAddress> {
        match self.entries.get(&ip)? {
            Entry::Reachable { mac, .. } | Entry::Static(mac) => Some(*mac),
            Entry::Incomplete(_) | Entry::Failed { .. } => None,
        }
    }

    /// An entry changed: the cached deadline and routes built from the table are stale.
    fn changed(&mut self) {
        self.deadline.set(None);
        self.changes += 1;
    }

    /// The change counter (see `changes`).
    pub(crate) fn changes(&self) -> u64 {
        self.changes
    }

    /// How long `resolve(ip)` keeps answering `Ready` with the MAC [`lookup`](Self::lookup)
    /// gives and no side effect, if nothing changes: `None` when it would not answer `Ready`,
    /// `Some(None)` until the table changes, `Some(Some(t))` until `t` (a reachable entry's
    /// refresh starts then).
    pub(crate) fn ready_until(&self, ip: A) -> Option<Option<Instant>> {
        match self.entries.get(&ip)? {
            Entry::Reachable {
                confirmed,
                refresh: None,
                ..
            } => Some(Some(*confirmed + self.ttl)),
            Entry::Reachable {
                refresh: Some(_), ..
            }
            | Entry::Static(_) => Some(None),
            Entry::Incomplete(_) | Entry::Failed { .. } => None,
        }
    }

    /// Number of entries, pending and failed ones included.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    fn probe(&mut self, now: Instant, ip: A) -> Probe {
        self.requests.push_back(ip);
        Probe {
            sent: 1,
            next: now + self.retry_interval,
        }
    }

    /// Looks `ip` up, starting a resolution or a refresh when needed.
    pub(crate) fn resolve(
        &mut self,
        now: Instant,
        ip: A,
        stats: &mut impl CacheStats,
    ) -> Resolve<A> {
        match self.entries.get(&ip).copied() {
            Some(Entry::Static(mac)) => Resolve::Ready(mac),
            Some(Entry::Reachable {
                mac,
                confirmed,
                refresh,
            }) => {
                if refresh.is_none() && now >= confirmed + self.ttl {
                    let p = self.probe(now, ip);
                    self.changed();
                    self.entries.insert(
                        ip,
                        Entry::Reachable {
                            mac,
                            confirmed,
                            refresh: Some(p),
                        },
                    );
                }
                Resolve::Ready(mac)
            }
            Some(Entry::Incomplete(_)) => Resolve::Pending,
            Some(Entry::Failed { requests, until }) if now < until => {
                Resolve::Failed(NetError::Unreachable { ip, requests })
            }
            Some(Entry::Failed { .. }) | None => {
                if !self.make_room(ip, stats) {
                    return Resolve::Failed(NetError::CacheFull(ip));
                }
                let p = self.probe(now, ip);
                self.changed();
                self.entries.insert(ip, Entry::Incomplete(p));
                Resolve::Pending
            }
        }
    }

    /// Makes room for `ip` by evicting a failed entry, else the oldest pending one (reported
    /// [`NetEvent::Unresolvable`], so whoever waits on it fails instead of hanging), else the
    /// least recently confirmed reachable one. Pending entries go before reachable ones: a
    /// flood of packets from spoofed sources, each answered through an ARP request, must not
    /// push out the neighbours that answered. False only when every entry is static.
    fn make_room(&mut self, ip: A, stats: &mut impl CacheStats) -> bool {
        if self.entries.len() < self.capacity || self.entries.contains_key(&ip) {
            return true;
        }
        let victim = self
            .entries
            .iter()
            .filter_map(|(&k, e)| match e {
                Entry::Failed { .. } => Some((0, Instant::ZERO, k)),
                Entry::Incomplete(p) => Some((1, p.next, k)),
                Entry::Reachable { confirmed, .. } => Some((2, *confirmed, k)),
                Entry::Static(_) => None,
            })
            .min();
        match victim {
            Some((kind, _, k)) => {
                self.changed();
                self.entries.remove(&k);
                stats.count_eviction();
                if kind == 1 {
                    self.requests.retain(|&r| r != k);
                    self.events.push_back(NetEvent::Unresolvable { ip: k });
                }
                true
            }
            None => false,
        }
    }

    /// RFC 826's merge step for a received ARP packet from `ip` at `mac`: an entry already in
    /// the table takes the new MAC (and is confirmed now); a missing one is added only when
    /// `addressed_to_us`. Static entries are never overwritten. Returns true when the table
    /// changed or was confirmed.
    pub(crate) fn merge(
        &mut self,
        now: Instant,
        ip: A,
        mac: EthernetAddress,
        addressed_to_us: bool,
        stats: &mut impl CacheStats,
    ) -> bool {
        let confirmed = Entry::Reachable {
            mac,
            confirmed: now,
            refresh: None,
        };
        match self.entries.get(&ip).copied() {
            Some(Entry::Static(_)) => return false,
            Some(Entry::Reachable { mac: old, .. }) => {
                if old != mac {
                    self.events.push_back(NetEvent::Resolved { ip, mac });
                }
            }
            Some(Entry::Incomplete(_)) | Some(Entry::Failed { .. }) => {
                stats.count_resolved();
                self.events.push_back(NetEvent::Resolved { ip, mac });
            }
            None => {
                if !addressed_to_us {
                    return false;
                }
                if !self.make_room(ip, stats) {
                    return false;
                }
            }
        }
        self.changed();
        self.entries.insert(ip, confirmed);
        true
    }

    /// Adds or replaces a static entry (never refreshed, never overwritten by ARP).
    pub(crate) fn insert_static(&mut self, ip: A, mac: EthernetAddress) {
        self.changed();
        self.entries.insert(ip, Entry::Static(mac));
    }

    /// Forgets `ip`. Returns true if it was there.
    pub(crate) fn remove(&mut self, ip: A) -> bool {
        self.changed();
        self.entries.remove(&ip).is_some()
    }

    /// Sends due retries, fails exhausted resolutions and refreshes, and drops failed entries
    /// whose hold time is over.
    pub(crate) fn handle_timeout(&mut self, now: Instant, stats: &mut impl CacheStats) {
        let (interval, max, hold) = (self.retry_interval, self.max_retries, self.failed_hold);
        let requests = &mut self.requests;
        let events = &mut self.events;
        // Advances a due probe: Some(failed entry) when exhausted.
        let mut step = |ip: A, p: &mut Probe| -> Option<Entry> {
            if p.next > now {
                return None;
            }
            if p.sent > max {
                stats.count_unresolvable();
                events.push_back(NetEvent::Unresolvable { ip });
                return Some(Entry::Failed {
                    requests: p.sent,
                    until: now + hold,
                });
            }
            p.sent += 1;
            p.next = now + interval;
            requests.push_back(ip);
            None
        };
        self.deadline.set(None);
        self.changes += 1;
        self.entries.retain(|&ip, e| {
            let failed = match e {
                Entry::Incomplete(p) => step(ip, p),
                Entry::Reachable {
                    refresh: Some(p), ..
                } => step(ip, p),
                Entry::Failed { until, .. } => return *until > now,
                Entry::Reachable { refresh: None, .. } | Entry::Static(_) => None,
            };
            if let Some(f) = failed {
                *e = f;
            }
            true
        });
    }

    /// When `handle_timeout` next has work: the earliest retry, failure, or end of a failed
    /// entry's hold.
    #[inline]
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        if let Some(d) = self.deadline.get() {
            return d;
        }
        let d = self.scan_deadline();
        self.deadline.set(Some(d));
        d
    }

    fn scan_deadline(&self) -> Option<Instant> {
        self.entries
            .values()
            .filter_map(|e| match e {
                Entry::Incomplete(p)
                | Entry::Reachable {
                    refresh: Some(p), ..
                } => Some(p.next),
                Entry::Failed { until, .. } => Some(*until),
                _ => None,
            })
            .min()
    }

    /// True when a request waits to be sent.
    pub(crate) fn has_request(&self) -> bool {
        !self.requests.is_empty()
    }

    /// The next address to send a request for.
    pub(crate) fn poll_request(&mut self) -> Option<A> {
        self.requests.pop_front()
    }

    pub(crate) fn push_event(&mut self, e: NetEvent<A>) {
        self.events.push_back(e);
    }

    /// True when [`poll_event`](Self::poll_event) has an event.
    #[inline]
    pub(crate) fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    pub(crate) fn poll_event(&mut self) -> Option<NetEvent<A>> {
        self.events.pop_front()
    }
}
