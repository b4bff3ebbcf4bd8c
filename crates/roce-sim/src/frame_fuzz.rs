//! A stateful frame fuzzer: side B of a simulated pair has a listener, connected QPs and
//! registered memory; fuzz input is turned into frames, each an edit of a frame A really sent
//! (ARP, the CM's REQ, RTU and DREQ, RDMA WRITE, READ, SEND, atomics), most resealed (lengths,
//! IPv4 checksum, ICRC) so the edit reaches B's transport and CM, and injected at B. Then:
//! nothing panicked, no byte changed in B's regions that no remote key reaches (a local-only
//! region, a region of another protection domain), and a new connection still moves verified
//! data. Used by the `host_frames` target of `fuzz/` and by `tests/host_frame_fuzz.rs`.

use super::link::{LinkConfig, Side};
use super::pair::{ConnSpec, Pair};
use crate::cm::CmEvent;
use crate::mem::access::Access;
use crate::mem::vec_memory::Region;
use crate::transport::types::{SendOp, SendWr, Sge, WcStatus};
use crate::wire::reseal::{fix_lengths, reseal};
use core::time::Duration;

/// Bytes of each registered region.
const LEN: usize = 4096;
/// Longest frame an edit may make.
const MAX_FRAME: usize = 1514;
/// Virtual time the pair gets between two injected frames, and after the last.
const BETWEEN: Duration = Duration::from_micros(50);
const SETTLE: Duration = Duration::from_secs(3);

/// What one input did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeedReport {
    pub injected: usize,
    pub resealed: usize,
    /// Connection requests the fuzzed frames raised (refused as they came).
    pub requests: usize,
}

/// Side B's memory and the connections made before the fuzzing.
pub struct FrameFuzz {
    pair: Pair,
    seeds: Vec<Vec<u8>>,
    /// B's regions no remote key reaches, and what they hold.
    protected: Vec<(Region, Vec<u8>)>,
    b_target: Region,
    a_src: Region,
    a_dst: Region,
    next_port: u16,
}

impl FrameFuzz {
    /// The pair, B's memory, a connection with real traffic from A recorded as the seeds, and
    /// a second connection closed (its DREQ a seed too).
    pub fn new() -> FrameFuzz {
        let mut pair = Pair::with_arp(LinkConfig::clean());
        let b_target = pair.b.register(
            1,
            LEN,
            Access::LOCAL_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_WRITE
                | Access::REMOTE_ATOMIC,
        );
        let mut protected = Vec::new();
        for (pd, access) in [
            (1, Access::LOCAL_WRITE),
            (
                2,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
            ),
        ] {
            let r = pair.b.register(pd, LEN, access);
            let fill: Vec<u8> = (0..LEN).map(|i| (i * 7 + pd as usize) as u8).collect();
            pair.b
                .mem
                .bytes_mut(r.lkey)
                .expect("just registered")
                .copy_from_slice(&fill);
            protected.push((r, fill));
        }
        let a_src = pair.a.register(1, LEN, Access::LOCAL_WRITE);
        let a_dst = pair.a.register(1, LEN, Access::LOCAL_WRITE);
        let mut fz = FrameFuzz {
            pair,
            seeds: Vec::new(),
            protected,
            b_target,
            a_src,
            a_dst,
            next_port: 7000,
        };
        fz.pair.record(true);
        let conn = fz.connect().expect("the first connection");
        fz.seed_traffic(conn.0, conn.1);
        let closing = fz.connect().expect("the second connection");
        let now = fz.pair.now();
        fz.pair
            .a
            .disconnect(now, closing.0)
            .expect("the second connection is up");
        let _ = fz.pair.run_idle(SETTLE);
        fz.seeds = fz
            .pair
            .take_recorded()
            .into_iter()
            .filter(|(side, _)| *side == Side::A)
            .map(|(_, f)| f)
            .collect();
        fz.pair.record(false);
        fz
    }

    /// The frames edits start from.
    pub fn seeds(&self) -> &[Vec<u8>] {
        &self.seeds
    }

    /// Connects a new QP of A to a new QP of B (B posts receives); their QPNs.
    fn connect(&mut self) -> Result<(u32, u32), String> {
        let spec = ConnSpec {
            port: self.next_port,
            ..ConnSpec::default()
        };
        self.next_port += 1;
        let c = self.pair.connect(&spec).map_err(|e| e.to_string())?;
        for i in 0..4u64 {
            let wr = crate::transport::types::RecvWr {
                wr_id: i,
                sgl: crate::sgl![Sge {
                    addr: self.b_target.addr + 1024 * i,
                    len: 1024,
                    lkey: self.b_target.lkey,
                }],
            };
            self.pair
                .b
                .post_recv(c.qpn_b, wr)
                .map_err(|e| e.to_string())?;
        }
        Ok((c.qpn_a, c.qpn_b))
    }

    /// Posts `op` from A's QP `qpn_a` and runs until it completes; its status.
    fn op(&mut self, qpn_a: u32, op: SendOp, local: Region, len: usize) -> Option<WcStatus> {
        let now = self.pair.now();
        let wr = SendWr {
            wr_id: 1,
            op,
            sgl: crate::sgl![Sge {
                addr: local.addr,
                len: len as u32,
                lkey: local.lkey,
            }],
            signaled: true,
            fence: true,
            solicited: false,
        };
        self.pair.a.post_send(now, qpn_a, wr).ok()?;
        let mut status = None;
        let _ = self.pair.run_until(SETTLE, |p| {
            if let Some(wc) = p.a.poll_completion() {
                status = Some(wc.status);
            }
            status.is_some()
        });
        while self.pair.b.poll_completion().is_some() {}
        status
    }

    fn seed_traffic(&mut self, qpn_a: u32, _qpn_b: u32) {
        let t = self.b_target;
        let (src, dst) = (self.a_src, self.a_dst);
        let w = |off: u64| (t.addr + off, t.rkey);
        self.op(qpn_a, SendOp::Send, src, 48);
        let (addr, rkey) = w(0);
        self.op(
            qpn_a,
            SendOp::Write {
                remote_addr: addr,
                rkey,
            },
            src,
            3000,
        );
        self.op(
            qpn_a,
            SendOp::Read {
                remote_addr: addr,
                rkey,
            },
            dst,
            2048,
        );
        let (addr, rkey) = w(64);
        self.op(
            qpn_a,
            SendOp::FetchAdd {
                remote_addr: addr,
                rkey,
                add: 1,
            },
            dst,
            8,
        );
        self.op(
            qpn_a,
            SendOp::CompareSwap {
                remote_addr: addr,
                rkey,
                compare: 1,
                swap: 2,
            },
            dst,
            8,
        );
        self.op(qpn_a, SendOp::SendWithImm { imm: 7 }, src, 16);
    }

    /// Injects the frames `input` describes at B; panics when an invariant breaks (the
    /// fuzzer's finding).
    pub fn feed(&mut self, input: &[u8]) -> FeedReport {
        let mut report = FeedReport::default();
        let mut rest = input;
        while let Some((frame, sealed)) = self.next_frame(&mut rest) {
            let now = self.pair.now();
            self.pair.b.handle_frame(now, &frame);
            report.injected += 1;
            report.resealed += usize::from(sealed);
            let _ = self.pair.run_until(BETWEEN, |_| false);
            report.requests += self.consume();
        }
        let _ = self.pair.run_until(SETTLE, |_| false);
        report.requests += self.consume();
        self.check();
        report
    }

    /// B's consumer: refuses every request; both sides' completions taken.
    fn consume(&mut self) -> usize {
        let mut requests = 0;
        while let Some(ev) = self.pair.b.poll_event() {
            if let CmEvent::ConnectRequest { id, .. } = ev {
                let now = self.pair.now();
                let _ = self.pair.b.reject(now, id, &[]);
                requests += 1;
            }
        }
        while self.pair.a.poll_event().is_some() {}
        while self.pair.a.poll_completion().is_some() {}
        while self.pair.b.poll_completion().is_some() {}
        requests
    }

    /// The next frame of `input`: a seed (byte 0), an edit (byte 1: kind in bits 0-1, no
    /// reseal when bit 7 is set) at a place (byte 2, scaled to the frame) with up to 15 bytes
    /// (count in byte 3).
    fn next_frame(&self, input: &mut &[u8]) -> Option<(Vec<u8>, bool)> {
        let &[sel, flags, at, count, ref rest @ ..] = *input else {
            return None;
        };
        let n = usize::from(count % 16).min(rest.len());
        let (data, rest) = rest.split_at(n);
        *input = rest;
        let mut f = self.seeds[usize::from(sel) % self.seeds.len()].clone();
        let at = usize::from(at) * f.len() / 256;
        match flags & 3 {
            0 => {
                for (j, b) in data.iter().enumerate() {
                    if let Some(x) = f.get_mut(at + j) {
                        *x = *b;
                    }
                }
            }
            1 => {
                for (j, b) in data.iter().enumerate() {
                    if let Some(x) = f.get_mut(at + j) {
                        *x ^= *b;
                    }
                }
            }
            2 => f.truncate(at),
            _ => {
                f.splice(at..at, data.iter().copied());
                f.truncate(MAX_FRAME);
                fix_lengths(&mut f);
            }
        }
        let sealed = flags & 0x80 == 0 && reseal(&mut f);
        Some((f, sealed))
    }

    /// The invariants after an input.
    fn check(&mut self) {
        for (r, fill) in &self.protected {
            let now = self
                .pair
                .b
                .mem
                .bytes(r.lkey)
                .expect("protected region registered");
            assert!(
                now == fill.as_slice(),
                "a region no remote key reaches changed"
            );
        }
        // A new connection moves verified data both ways.
        let (qpn_a, _) = self.connect().expect("a new connection after the fuzzing");
        let pattern: Vec<u8> = (0..LEN).map(|i| (i * 13 + 5) as u8).collect();
        self.pair
            .a
            .mem
            .bytes_mut(self.a_src.lkey)
            .expect("A's source")
            .copy_from_slice(&pattern);
        let t = self.b_target;
        let w = self.op(
            qpn_a,
            SendOp::Write {
                remote_addr: t.addr,
                rkey: t.rkey,
            },
            self.a_src,
            LEN,
        );
        let r = self.op(
            qpn_a,
            SendOp::Read {
                remote_addr: t.addr,
                rkey: t.rkey,
            },
            self.a_dst,
            LEN,
        );
        assert_eq!((w, r), (Some(WcStatus::Success), Some(WcStatus::Success)));
        assert!(
            self.pair.a.mem.bytes(self.a_dst.lkey) == Some(pattern.as_slice()),
            "a new connection's WRITE then READ returned other bytes"
        );
    }
}

impl Default for FrameFuzz {
    fn default() -> Self {
        Self::new()
    }
}

/// One fuzz input on a fresh pair (the `host_frames` fuzz target).
pub fn run_one(input: &[u8]) -> FeedReport {
    FrameFuzz::new().feed(input)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::{classify, FrameKind};

    #[test]
    fn the_seeds_hold_arp_cm_and_rc_frames_of_a() {
        let fz = FrameFuzz::new();
        let kinds: Vec<FrameKind> = fz.seeds().iter().map(|f| classify(f)).collect();
        assert!(kinds.contains(&FrameKind::Arp), "{kinds:?}");
        assert!(kinds.contains(&FrameKind::RoceV2), "{kinds:?}");
        // REQ, RTU, DREQ (QP1) and the RC requests: more than a handful.
        assert!(fz.seeds().len() >= 10, "{}", fz.seeds().len());
    }

    #[test]
    fn an_empty_input_passes_and_a_changed_protected_byte_is_a_finding() {
        let mut fz = FrameFuzz::new();
        assert_eq!(fz.feed(&[]), FeedReport::default());
        let r = fz.protected[0].0;
        fz.pair.b.mem.bytes_mut(r.lkey).expect("region")[100] ^= 1;
        let found = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fz.feed(&[])));
        assert!(found.is_err(), "the check must catch a changed byte");
    }
}
