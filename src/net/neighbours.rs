//! The neighbour (ARP) cache and its resolution state machine (RFC 826).
//!
//! An entry is one of:
//! - *incomplete*: requests are being sent, one now and one every `arp_retry_interval`, up to
//!   `1 + arp_max_retries` in all; when the last one goes unanswered for an interval the entry
//!   fails and [`NetEvent::Unresolvable`] is reported;
//! - *reachable*: the MAC is known; once older than `arp_cache_ttl` it is stale and the next
//!   lookup through `resolve` starts a refresh (same request schedule) while the stale MAC stays
//!   in use; a refresh that fails removes the MAC and reports `Unresolvable`;
//! - *static*: configured, never refreshed or overwritten;
//! - *failed*: `resolve` answers `Failed` until `arp_failed_hold` has passed, then tries again.
//!
//! Received ARP packets go through RFC 826's merge rule ([`Neighbours::merge`]): an address
//! already in the table gets the sender's MAC; a new one is added only when the packet was
//! addressed to us.

use super::config::NetConfig;
use super::error::NetError;
use super::stats::NetStats;
use crate::time::Instant;
use crate::wire::ethernet::EthernetAddress;
use core::time::Duration;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;

/// Outcome of [`Net::resolve`](super::Net::resolve).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolve {
    /// The peer's MAC (possibly stale and being refreshed).
    Ready(EthernetAddress),
    /// An ARP request is out; [`NetEvent::Resolved`] or [`NetEvent::Unresolvable`] follows.
    Pending,
    /// The peer cannot be reached: [`NetError::Unreachable`] after unanswered requests, or an
    /// address error ([`NetError::NoRoute`], [`NetError::Loopback`], ...).
    Failed(NetError),
}

/// What the neighbour layer reports, from [`Net::poll_event`](super::Net::poll_event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NetEvent {
    /// A pending resolution got its answer, or a known neighbour's MAC changed.
    Resolved { ip: Ipv4Addr, mac: EthernetAddress },
    /// All requests for `ip` went unanswered: connection attempts to it should fail with
    /// [`NetError::Unreachable`].
    Unresolvable { ip: Ipv4Addr },
    /// A router (or the peer) reported a RoCEv2 datagram to `ip` undeliverable (ICMP
    /// Destination Unreachable, `icmp.rs`).
    IcmpUnreachable { ip: Ipv4Addr },
    /// Another station (`mac`) claims our own address `ip` in its ARP packets.
    AddressConflict { ip: Ipv4Addr, mac: EthernetAddress },
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

/// The neighbour cache. Address checks (subnet, loopback) are the caller's: see `Net`.
#[derive(Debug)]
pub(crate) struct Neighbours {
    entries: BTreeMap<Ipv4Addr, Entry>,
    /// `poll_timeout`'s answer while no entry changed (`None`: recompute): the poll loop asks
    /// on every iteration, the table changes rarely.
    deadline: Cell<Option<Option<Instant>>>,
    /// Counts changes to the table (any entry added, changed or removed): a route cached by a
    /// sender stays valid while this stays the same.
    changes: u64,
    /// Addresses to send an ARP request for, in order.
    requests: VecDeque<Ipv4Addr>,
    events: VecDeque<NetEvent>,
    retry_interval: Duration,
    max_retries: u32,
    ttl: Duration,
    failed_hold: Duration,
    capacity: usize,
}

impl Neighbours {
    pub(crate) fn new(config: &NetConfig) -> Neighbours {
        Neighbours {
            entries: BTreeMap::new(),
            deadline: Cell::new(None),
            changes: 0,
            requests: VecDeque::new(),
            events: VecDeque::new(),
            retry_interval: config.arp_retry_interval,
            max_retries: config.arp_max_retries,
            ttl: config.arp_cache_ttl,
            failed_hold: config.arp_failed_hold,
            capacity: config.arp_cache_capacity,
        }
    }

    /// The MAC of `ip` if known (stale included), without side effects.
    pub(crate) fn lookup(&self, ip: Ipv4Addr) -> Option<EthernetAddress> {
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
    pub(crate) fn ready_until(&self, ip: Ipv4Addr) -> Option<Option<Instant>> {
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

    fn probe(&mut self, now: Instant, ip: Ipv4Addr) -> Probe {
        self.requests.push_back(ip);
        Probe {
            sent: 1,
            next: now + self.retry_interval,
        }
    }

    /// Looks `ip` up, starting a resolution or a refresh when needed.
    pub(crate) fn resolve(&mut self, now: Instant, ip: Ipv4Addr, stats: &mut NetStats) -> Resolve {
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
    fn make_room(&mut self, ip: Ipv4Addr, stats: &mut NetStats) -> bool {
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
                stats.cache_evictions += 1;
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
        ip: Ipv4Addr,
        mac: EthernetAddress,
        addressed_to_us: bool,
        stats: &mut NetStats,
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
                stats.resolved += 1;
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
    pub(crate) fn insert_static(&mut self, ip: Ipv4Addr, mac: EthernetAddress) {
        self.changed();
        self.entries.insert(ip, Entry::Static(mac));
    }

    /// Forgets `ip`. Returns true if it was there.
    pub(crate) fn remove(&mut self, ip: Ipv4Addr) -> bool {
        self.changed();
        self.entries.remove(&ip).is_some()
    }

    /// Sends due retries, fails exhausted resolutions and refreshes, and drops failed entries
    /// whose hold time is over.
    pub(crate) fn handle_timeout(&mut self, now: Instant, stats: &mut NetStats) {
        let (interval, max, hold) = (self.retry_interval, self.max_retries, self.failed_hold);
        let requests = &mut self.requests;
        let events = &mut self.events;
        // Advances a due probe: Some(failed entry) when exhausted.
        let mut step = |ip: Ipv4Addr, p: &mut Probe| -> Option<Entry> {
            if p.next > now {
                return None;
            }
            if p.sent > max {
                stats.unresolvable += 1;
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

    /// True when an ARP request waits to be sent.
    pub(crate) fn has_request(&self) -> bool {
        !self.requests.is_empty()
    }

    /// The next address to send an ARP request for.
    pub(crate) fn poll_request(&mut self) -> Option<Ipv4Addr> {
        self.requests.pop_front()
    }

    pub(crate) fn push_event(&mut self, e: NetEvent) {
        self.events.push_back(e);
    }

    /// True when [`poll_event`](Self::poll_event) has an event.
    #[inline]
    pub(crate) fn has_event(&self) -> bool {
        !self.events.is_empty()
    }

    pub(crate) fn poll_event(&mut self) -> Option<NetEvent> {
        self.events.pop_front()
    }
}
