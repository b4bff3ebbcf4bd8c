//! `--fuzz N`: a seeded mutation fuzzer at the live port. The peer makes real traffic with the
//! victim first (ARP, the CM's REQ, RTU and DREQ, RDMA WRITE, READ, SEND and both atomics on
//! a connection), and its frames are the seeds. Then `N` frames go from the attacker's port
//! to the victim, each a mutation of a seed: random bytes, a truncation, bit flips, a header
//! field set to an edge value, a payload grown or shrunk; most are resealed (IPv4 checksum,
//! lengths, ICRC) so they pass the neighbour layer and reach the transport and the CM.
//!
//! A second connection is never named by a fuzzed frame (its frames are not seeds); the
//! regions no fuzzed frame may reach (the guards, the local-only region, the other PZ's) are
//! compared byte for byte. Afterwards the quiet connection and a new one must move verified
//! data and ARP must still be answered. Prints `FUZZ {json}` with what was sent and what the
//! victim counted, then the usual `CASE`/`FINAL` lines.

use super::{Conn, Lab, REGION_LEN};
use dpdk_roce::cm::CmEvent;
use dpdk_roce::io::FrameIo;
use dpdk_roce::net::DropReason;
use dpdk_roce::transport::types::{SendOp, Sge};
use dpdk_roce::wire::ethernet;
use dpdk_roce::wire::ipv4;
use dpdk_roce::wire::reseal::{fix_lengths, reseal};
use rand::{Rng, RngCore};
use serde_json::json;
use std::time::{Duration, Instant};

/// Frames sent between two turns of both shards.
const CHUNK: usize = 32;
/// Where the IPv4, UDP and BTH headers start in an untagged Ethernet frame.
const IP: usize = ethernet::HEADER_LEN;
const UDP: usize = IP + ipv4::HEADER_LEN;
const BTH: usize = UDP + 8;
/// Largest frame the port sends (IP MTU 1500).
const MAX_FRAME: usize = 1514;
/// Regions no fuzzed frame may change: none is named by the fuzzed connection's R_Key.
const PROTECTED: [&str; 4] = ["guard_lo", "guard_hi", "local_only", "other_pz"];

impl Lab {
    pub(super) fn fuzz(&mut self, frames: u64) -> Result<(), String> {
        // The quiet connection first, unrecorded: none of its frames becomes a seed.
        let quiet = self.connect()?;
        self.peer.io.recording = true;
        let fuzzed = self.connect_with(64)?;
        let closing = self.connect()?;
        self.seed_traffic(&fuzzed)?;
        let now = self.peer.clock().now();
        self.peer
            .host
            .disconnect(now, closing.peer_qpn)
            .map_err(|e| format!("disconnect: {e}"))?;
        self.settle(Duration::from_millis(200));
        self.peer.io.recording = false;
        let seeds = std::mem::take(&mut self.peer.io.sent);
        if seeds.len() < 8 {
            return Err(format!("only {} seed frames recorded", seeds.len()));
        }
        let net0 = self.victim.host.net_stats().clone();
        let host0 = self.victim.host.stats().clone();
        let cm0 = self.victim.host.cm().stats();
        let qp0 = self
            .victim
            .host
            .qp(fuzzed.victim_qpn)
            .map(|q| *q.stats())
            .unwrap_or_default();
        let started = Instant::now();
        let (mut sent, mut refused, mut resealed) = (0u64, 0u64, 0u64);
        let mut kinds = [0u64; 5];
        let mut requests_rejected = 0u64;
        let mut chunk = Vec::with_capacity(CHUNK);
        while sent + refused < frames {
            chunk.clear();
            for _ in 0..CHUNK.min((frames - sent - refused) as usize) {
                let seed = &seeds[self.rng.gen_range(0..seeds.len())];
                let (f, kind, sealed) = mutate(&mut self.rng, seed);
                kinds[kind] += 1;
                resealed += u64::from(sealed);
                chunk.push(f);
            }
            for f in &chunk {
                if self.peer.io.tx(f) {
                    sent += 1;
                } else {
                    refused += 1;
                }
            }
            self.peer.io.flush();
            self.poll();
            // A consumer's turn: requests refused, completions taken; what the victim sent
            // is not kept.
            while let Some(ev) = self.victim.host.poll_event() {
                if let CmEvent::ConnectRequest { id, .. } = ev {
                    let now = self.victim.clock().now();
                    let _ = self.victim.host.reject(now, id, &[]);
                    requests_rejected += 1;
                }
            }
            while self.victim.host.poll_completion().is_some() {}
            while self.peer.host.poll_event().is_some() {}
            while self.peer.host.poll_completion().is_some() {}
            self.victim.io.sent.clear();
        }
        self.settle(Duration::from_millis(200));
        let secs = started.elapsed().as_secs_f64();
        let net1 = self.victim.host.net_stats().clone();
        let host1 = self.victim.host.stats().clone();
        let cm1 = self.victim.host.cm().stats();
        let qp1 = self
            .victim
            .host
            .qp(fuzzed.victim_qpn)
            .map(|q| *q.stats())
            .unwrap_or_default();
        let protected_changed = self.changed_in(|n| PROTECTED.contains(&n));
        let drops: serde_json::Map<String, serde_json::Value> = DropReason::ALL
            .iter()
            .filter(|&&r| net1.dropped(r) != net0.dropped(r))
            .map(|&r| {
                (
                    r.name().to_string(),
                    json!(net1.dropped(r) - net0.dropped(r)),
                )
            })
            .collect();
        let state = |l: &Lab, c: &Conn| {
            l.victim
                .host
                .qp(c.victim_qpn)
                .map(|q| format!("{:?}", q.state()))
        };
        let report = json!({
            "frames": frames,
            "sent": sent,
            "refused_by_tx_ring": refused,
            "resealed": resealed,
            "mutations": {
                "random": kinds[0], "truncated": kinds[1], "bit_flips": kinds[2],
                "field": kinds[3], "resized": kinds[4],
            },
            "seeds": seeds.len(),
            "seconds": secs,
            "frames_per_second": sent as f64 / secs,
            "received": net1.rx_frames - net0.rx_frames,
            "rx_roce": net1.rx_roce - net0.rx_roce,
            "drops": drops,
            "unknown_qp": host1.rx_unknown_qp - host0.rx_unknown_qp,
            "bad_gsi": host1.rx_bad_gsi - host0.rx_bad_gsi,
            "cm": {
                "req": cm1.received.req - cm0.received.req,
                "rtu": cm1.received.rtu - cm0.received.rtu,
                "dreq": cm1.received.dreq - cm0.received.dreq,
                "malformed": cm1.malformed - cm0.malformed,
                "unmatched": cm1.unmatched - cm0.unmatched,
                "duplicates": cm1.duplicates - cm0.duplicates,
                "requests_refused": cm1.requests_refused - cm0.requests_refused,
            },
            "requests_rejected": requests_rejected,
            "fuzzed_qp": {
                "packets_received": qp1.packets_received - qp0.packets_received,
                "dropped": qp1.dropped - qp0.dropped,
                "duplicates": qp1.duplicates - qp0.duplicates,
                "seq_naks_sent": qp1.seq_naks_sent - qp0.seq_naks_sent,
                "fatal_naks_sent": qp1.fatal_naks_sent - qp0.fatal_naks_sent,
                "state": state(self, &fuzzed),
            },
            "quiet_state": state(self, &quiet),
            "protected_changed": protected_changed,
        });
        println!("FUZZ {report}");
        self.legit_write_read(&quiet, "quiet_connection_after_fuzz")?;
        self.final_checks()
    }

    /// The peer's real traffic on `c`: SEND, RDMA WRITE (several packets), READ, fetch-and-add
    /// and compare-and-swap on the target; every one completes.
    fn seed_traffic(&mut self, c: &Conn) -> Result<(), String> {
        let target = super::region(self, "target");
        let src = self.peer_src;
        let dst = self.peer_dst;
        let sge = |r: &dpdk_roce::mem::vec_memory::Region, len: usize| Sge {
            addr: r.addr,
            len: len as u32,
            lkey: r.lkey,
        };
        let remote = |off: u64| (target.addr + off, target.rkey);
        let ops = [
            (SendOp::Send, sge(&src, 48)),
            (
                SendOp::Write {
                    remote_addr: remote(0).0,
                    rkey: remote(0).1,
                },
                sge(&src, REGION_LEN),
            ),
            (
                SendOp::Read {
                    remote_addr: remote(0).0,
                    rkey: remote(0).1,
                },
                sge(&dst, 2048),
            ),
            (
                SendOp::FetchAdd {
                    remote_addr: remote(64).0,
                    rkey: remote(64).1,
                    add: 3,
                },
                sge(&dst, 8),
            ),
            (
                SendOp::CompareSwap {
                    remote_addr: remote(128).0,
                    rkey: remote(128).1,
                    compare: 0,
                    swap: 1,
                },
                sge(&dst, 8),
            ),
            (SendOp::SendWithImm { imm: 0x1234 }, sge(&src, 16)),
        ];
        for (i, (op, sge)) in ops.into_iter().enumerate() {
            self.peer_op(c, 500 + i as u64, op, sge, "seed traffic")?;
            while self.victim.host.poll_completion().is_some() {}
        }
        // The target now holds what the seeds wrote; the fuzzer may change it further.
        let mut now = vec![0u8; REGION_LEN];
        self.victim
            .host
            .mem
            .read_local(target.lkey, target.addr, &mut now)
            .map_err(|e| format!("target: {e}"))?;
        if let Some(w) = self.watched.iter_mut().find(|w| w.name == "target") {
            w.expected = now;
        }
        Ok(())
    }
}

/// One mutation of `seed`: the frame, the kind (index into the report's `mutations`), and
/// whether it was resealed.
fn mutate(rng: &mut impl RngCore, seed: &[u8]) -> (Vec<u8>, usize, bool) {
    let mut f = seed.to_vec();
    let kind = match rng.gen_range(0..100u32) {
        0..=4 => 0,
        5..=14 => 1,
        15..=49 => 2,
        50..=89 => 3,
        _ => 4,
    };
    match kind {
        0 => {
            // Random bytes, half of them behind the seed's Ethernet header.
            let n = rng.gen_range(0..=MAX_FRAME);
            let mut r = vec![0u8; n];
            rng.fill_bytes(&mut r);
            if rng.gen_bool(0.5) && n >= IP && f.len() >= IP {
                r[..IP].copy_from_slice(&f[..IP]);
            }
            return (r, kind, false);
        }
        1 => {
            f.truncate(rng.gen_range(0..f.len().max(1)));
            return (f, kind, false);
        }
        2 => {
            for _ in 0..rng.gen_range(1..=8) {
                if f.len() > IP {
                    let bit = rng.gen_range(IP * 8..f.len() * 8);
                    f[bit / 8] ^= 1 << (bit % 8);
                }
            }
        }
        3 => {
            // A header field (IPv4, UDP, BTH and the extension headers or MAD behind it) set
            // to an edge value.
            let end = f.len().min(BTH + 64);
            if end > IP {
                let width = [1usize, 2, 4][rng.gen_range(0..3)];
                let at = rng.gen_range(IP..end);
                let value: u32 = match rng.gen_range(0..5) {
                    0 => 0,
                    1 => u32::MAX,
                    2 => 1,
                    3 => 0x8000_0000,
                    _ => rng.next_u32(),
                };
                let bytes = value.to_be_bytes();
                for (j, b) in bytes[4 - width..].iter().enumerate() {
                    if let Some(x) = f.get_mut(at + j) {
                        *x = *b;
                    }
                }
            }
        }
        _ => {
            // The payload grown or shrunk, the lengths fixed to match.
            if f.len() > BTH + 16 {
                if rng.gen_bool(0.5) {
                    let extra = rng.gen_range(1..=MAX_FRAME.saturating_sub(f.len()).max(1));
                    let mut r = vec![0u8; extra];
                    rng.fill_bytes(&mut r);
                    let at = f.len() - 4;
                    f.splice(at..at, r);
                    f.truncate(MAX_FRAME);
                } else {
                    let cut = rng.gen_range(1..=f.len() - BTH - 12);
                    let at = f.len() - 4 - cut;
                    f.drain(at..at + cut);
                }
                fix_lengths(&mut f);
            }
        }
    }
    let sealed = rng.gen_bool(0.85) && reseal(&mut f);
    (f, kind, sealed)
}
