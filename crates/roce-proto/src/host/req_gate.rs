//! A connection request waits until its source is known to answer: a REQ from an address whose
//! MAC the port does not know is held (at most [`HELD_PER_SOURCE`] per source and
//! [`HELD_REQUESTS`] in all) while ARP asks for it, and goes to the CM when the source answers.
//! A spoofed source never answers: its REQs cost held slots until ARP gives up or newer
//! requests take the slots, never CM state or a request the consumer must answer, so a flood of
//! REQs from spoofed addresses does not crowd out a legitimate one (whose sender resolved this
//! port's address first, which put its own in the table: RFC 826's merge).
//!
//! A client behind a router connects its QPs at once before this port has resolved the way
//! back: each REQ (its own local communication ID) is held, and a retransmission of one (the
//! same ID) takes its copy's place. Holding one per source lost all but the last, and each lost
//! one waited out the CM's response timeout (4.3 s by default) for its retransmission.

use std::collections::VecDeque;
use std::net::IpAddr;

/// REQs held at once; a new one beyond takes the oldest's place.
pub(super) const HELD_REQUESTS: usize = 256;
/// REQs held from one source; a new one beyond takes the place of that source's oldest.
pub(super) const HELD_PER_SOURCE: usize = 64;

/// The REQ's local communication ID (IBTA vol. 1 §12.6.5: the first word after the 24-byte
/// MAD header), which a retransmission keeps.
fn comm_id(mad: &[u8]) -> Option<&[u8]> {
    mad.get(24..28)
}

#[derive(Debug, Default)]
pub(super) struct RequestGate {
    held: VecDeque<(IpAddr, Vec<u8>)>,
}

impl RequestGate {
    /// Holds `mad` from `ip` (in place of an earlier copy of the same request); whether an
    /// older request was dropped to make room.
    pub fn hold(&mut self, ip: IpAddr, mad: &[u8]) -> bool {
        let id = comm_id(mad);
        if let Some(slot) = self
            .held
            .iter_mut()
            .find(|(i, m)| *i == ip && comm_id(m) == id)
        {
            slot.1 = mad.to_vec();
            return false;
        }
        let from_ip = self.held.iter().filter(|(i, _)| *i == ip).count();
        let evicted = if from_ip >= HELD_PER_SOURCE {
            let oldest = self.held.iter().position(|(i, _)| *i == ip);
            oldest.and_then(|at| self.held.remove(at)).is_some()
        } else {
            self.held.len() >= HELD_REQUESTS && self.held.pop_front().is_some()
        };
        self.held.push_back((ip, mad.to_vec()));
        evicted
    }

    /// The held requests whose source is now `known`, removed, oldest first.
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

    /// Drops the requests of `ip` (ARP gave up on it); whether there were any.
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

    fn ip(k: u32) -> IpAddr {
        IpAddr::from(std::net::Ipv4Addr::from(0x0a00_0000 + k))
    }

    /// A REQ's MAD with local communication ID `id` and `tag` after it.
    fn req(id: u32, tag: u8) -> Vec<u8> {
        let mut m = vec![0u8; 32];
        m[24..28].copy_from_slice(&id.to_be_bytes());
        m[31] = tag;
        m
    }

    #[test]
    fn every_request_of_a_source_is_held_and_a_retransmission_replaces_its_copy() {
        let mut g = RequestGate::default();
        // A client connecting four QPs at once, the second REQ retransmitted.
        for id in 1..=4 {
            assert!(!g.hold(ip(1), &req(id, 0)));
        }
        assert!(!g.hold(ip(1), &req(2, 1)));
        assert_eq!(g.len(), 4);
        let got = g.take_known(|i| i == ip(1));
        let ids: Vec<_> = got.iter().map(|(_, m)| (m[27], m[31])).collect();
        assert_eq!(
            ids,
            [(1, 0), (2, 1), (3, 0), (4, 0)],
            "all four, oldest first"
        );
        assert!(g.is_empty());
    }

    #[test]
    fn one_source_holds_at_most_its_share_and_its_oldest_gives_way() {
        let mut g = RequestGate::default();
        assert!(!g.hold(ip(2), &req(7, 0)));
        for id in 0..HELD_PER_SOURCE as u32 {
            assert!(!g.hold(ip(1), &req(100 + id, 0)));
        }
        assert!(g.hold(ip(1), &req(999, 0)), "its oldest (100) gives way");
        assert_eq!(g.len(), HELD_PER_SOURCE + 1);
        let got = g.take_known(|i| i == ip(1));
        assert_eq!(got.len(), HELD_PER_SOURCE);
        assert_eq!(got[0].1[24..28], 101u32.to_be_bytes());
        assert_eq!(got.last().unwrap().1[24..28], 999u32.to_be_bytes());
        assert_eq!(
            g.take_known(|i| i == ip(2)).len(),
            1,
            "the other source kept its one"
        );
    }

    #[test]
    fn the_table_is_bounded_and_the_oldest_gives_way() {
        let mut g = RequestGate::default();
        for k in 1..=HELD_REQUESTS as u32 {
            assert!(!g.hold(ip(k), &req(k, 0)));
        }
        assert!(g.hold(ip(9999), &req(1, 0)), "full: the oldest goes");
        assert_eq!(g.len(), HELD_REQUESTS);
        assert!(!g.forget(ip(1)), "ip 1 was the oldest, already gone");
        let got = g.take_known(|i| i == ip(2) || i == ip(9999));
        assert_eq!(got, vec![(ip(2), req(2, 0)), (ip(9999), req(1, 0))]);
        assert!(g.forget(ip(3)));
        assert_eq!(g.len(), HELD_REQUESTS - 3);
    }
}
