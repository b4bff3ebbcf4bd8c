//! A connection request waits until its source is known to answer: a REQ from an address whose
//! MAC the port does not know is held (one per source, at most [`HELD_REQUESTS`]) while ARP
//! asks for it, and goes to the CM when the source answers. A spoofed source never answers: its
//! REQ costs a held slot until ARP gives up or a newer request takes the slot, never CM state
//! or a request the consumer must answer, so a flood of REQs from spoofed addresses does not
//! crowd out a legitimate one (whose sender resolved this port's address first, which put its
//! own in the table: RFC 826's merge).

use std::collections::VecDeque;
use std::net::IpAddr;

/// REQs held at once; a new one beyond takes the oldest's place.
pub(super) const HELD_REQUESTS: usize = 256;

#[derive(Debug, Default)]
pub(super) struct RequestGate {
    held: VecDeque<(IpAddr, Vec<u8>)>,
}

impl RequestGate {
    /// Holds `mad` from `ip` (replacing an earlier one from `ip`); whether an older request
    /// was dropped to make room.
    pub fn hold(&mut self, ip: IpAddr, mad: &[u8]) -> bool {
        if let Some(slot) = self.held.iter_mut().find(|(i, _)| *i == ip) {
            slot.1 = mad.to_vec();
            return false;
        }
        let evicted = self.held.len() >= HELD_REQUESTS && self.held.pop_front().is_some();
        self.held.push_back((ip, mad.to_vec()));
        evicted
    }

    /// The held requests whose source is now `known`, removed.
    pub fn take_known(&mut self, known: impl Fn(IpAddr) -> bool) -> Vec<(IpAddr, Vec<u8>)> {
        let mut out = Vec::new();
        self.held.retain_mut(|(ip, mad)| {
            if known(*ip) {
                out.push((*ip, std::mem::take(mad)));
                false
            } else {
                true
            }
        });
        out
    }

    /// Drops the request of `ip` (ARP gave up on it); whether there was one.
    pub fn forget(&mut self, ip: IpAddr) -> bool {
        let before = self.held.len();
        self.held.retain(|(i, _)| *i != ip);
        self.held.len() != before
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    pub fn len(&self) -> usize {
        self.held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_request_per_source_and_the_oldest_gives_way() {
        let mut g = RequestGate::default();
        let ip = |k: u32| IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + k));
        assert!(!g.hold(ip(1), b"a"));
        assert!(!g.hold(ip(1), b"b"));
        assert_eq!(g.len(), 1);
        for k in 2..=HELD_REQUESTS as u32 {
            assert!(!g.hold(ip(k), b"x"));
        }
        assert!(g.hold(ip(9999), b"y"), "full: the oldest goes");
        assert_eq!(g.len(), HELD_REQUESTS);
        assert!(!g.forget(ip(1)), "ip 1 was the oldest, already gone");
        let got = g.take_known(|i| i == ip(2) || i == ip(9999));
        assert_eq!(got, vec![(ip(2), b"x".to_vec()), (ip(9999), b"y".to_vec())]);
        assert!(g.forget(ip(3)));
        assert_eq!(g.len(), HELD_REQUESTS - 3);
    }
}
