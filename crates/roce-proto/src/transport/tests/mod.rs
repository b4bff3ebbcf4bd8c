//! In-memory tests of the RC transport: two QPs, each with its own `VecMemory`, joined by a
//! simulated wire with a virtual clock that can drop, duplicate and reorder chosen packets.
//! Each test reads like a packet trace: what goes over the wire, what arrives, what completes.

mod ack_policy;
mod ack_req;
mod basic;
mod congestion;
mod errors;
mod loss;
mod overflow;
mod random;
mod snapshot;

use std::collections::VecDeque;

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::qp::Qp;
use super::srq::Srq;
use super::types::{
    Mtu, QpAttr, QpConfig, QpState, RecvWr, SendOp, SendWr, SgList, Sge, WorkCompletion,
};
use crate::mem::access::Access;
use crate::mem::vec_memory::{Region, VecMemory};
use crate::time::Instant;
use crate::wire::aeth::Syndrome;
use crate::wire::opcode::Opcode;
use crate::wire::psn::Psn;
use crate::wire::roce::{RoceHeaders, RocePacket};

pub const A: usize = 0;
pub const B: usize = 1;
pub const PD: u32 = 1;
pub const MTU: usize = 1024;

/// One endpoint: a QP and its memory.
pub struct Side {
    pub qp: Qp,
    pub mem: VecMemory,
    pub srq: Option<Srq>,
}

/// A packet on the simulated wire.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub from: usize,
    pub headers: RoceHeaders,
    pub payload: Vec<u8>,
}

impl Pkt {
    pub fn op(&self) -> Opcode {
        self.headers.bth.opcode
    }
    pub fn psn(&self) -> u32 {
        self.headers.bth.psn.value()
    }
    pub fn syndrome(&self) -> Option<Syndrome> {
        self.headers.aeth.map(|a| a.syndrome)
    }
    pub fn is_seq_nak(&self) -> bool {
        self.syndrome() == Some(Syndrome::Nak(crate::wire::aeth::NakCode::PsnSequenceError))
    }
    pub fn is_rnr_nak(&self) -> bool {
        matches!(self.syndrome(), Some(Syndrome::RnrNak { .. }))
    }
}

/// What the wire does with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    Pass,
    Drop,
    Duplicate,
}

type Filter = Box<dyn FnMut(&Pkt) -> Fate>;

/// Random impairments.
pub struct Chaos {
    pub rng: ChaCha8Rng,
    pub loss: f64,
    pub dup: f64,
    pub reorder: f64,
}

/// Two connected QPs and the wire between them.
pub struct Pair {
    pub s: [Side; 2],
    pub now: Instant,
    pub wire: VecDeque<Pkt>,
    /// Every packet put on the wire, in order, before its fate.
    pub trace: Vec<Pkt>,
    pub filter: Option<Filter>,
    pub chaos: Option<Chaos>,
    /// When false the wire is cut: everything is dropped.
    pub link_up: bool,
}

pub fn config(qpn: u32) -> QpConfig {
    QpConfig {
        qpn,
        pd: PD,
        sq_depth: 256,
        rq_depth: 256,
        max_send_sge: 16,
        max_recv_sge: 16,
        srq: None,
        sig_all: false,
    }
}

pub fn attr(sq_psn: u32, rq_psn: u32, dest_qpn: u32) -> QpAttr {
    QpAttr {
        pmtu: Mtu::Mtu1024,
        sq_psn: Psn::new(sq_psn),
        rq_psn: Psn::new(rq_psn),
        retry_cnt: 7,
        rnr_retry: 7,
        timeout: 10,
        min_rnr_timer: 1,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 4,
        dest_qpn,
        pkey: 0xffff,
        access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
    }
}

/// Brings a QP through RESET -> INIT -> RTR -> RTS.
pub fn connect(qp: &mut Qp, a: &QpAttr) {
    qp.modify(Instant::ZERO, QpState::Init, a).unwrap();
    qp.modify(Instant::ZERO, QpState::Rtr, a).unwrap();
    qp.modify(Instant::ZERO, QpState::Rts, a).unwrap();
}

impl Pair {
    /// Two QPs 0x11 (A, first PSN 100) and 0x22 (B, first PSN 5000), MTU 1024.
    pub fn new() -> Pair {
        Pair::with(|_, _| {}, 100, 5000)
    }

    /// Two QPs with attributes adjusted by `tweak(side, attr)` and the given send PSNs.
    pub fn with(tweak: impl Fn(usize, &mut QpAttr), psn_a: u32, psn_b: u32) -> Pair {
        Pair::with_configs(tweak, psn_a, psn_b, config(0x11), config(0x22))
    }

    pub fn with_configs(
        tweak: impl Fn(usize, &mut QpAttr),
        psn_a: u32,
        psn_b: u32,
        ca: QpConfig,
        cb: QpConfig,
    ) -> Pair {
        let mut aa = attr(psn_a, psn_b, 0x22);
        let mut ab = attr(psn_b, psn_a, 0x11);
        tweak(A, &mut aa);
        tweak(B, &mut ab);
        let mut qa = Qp::new(ca);
        let mut qb = Qp::new(cb);
        connect(&mut qa, &aa);
        connect(&mut qb, &ab);
        Pair {
            s: [
                Side {
                    qp: qa,
                    mem: VecMemory::new(),
                    srq: None,
                },
                Side {
                    qp: qb,
                    mem: VecMemory::new(),
                    srq: None,
                },
            ],
            now: Instant(1_000_000),
            wire: VecDeque::new(),
            trace: Vec::new(),
            filter: None,
            chaos: None,
            link_up: true,
        }
    }

    pub fn filter(&mut self, f: impl FnMut(&Pkt) -> Fate + 'static) {
        self.filter = Some(Box::new(f));
    }

    /// Registers `len` bytes on `side` filled with a pattern seeded by `seed`.
    pub fn region(&mut self, side: usize, len: usize, seed: u8) -> Region {
        let r = self.s[side].mem.register(
            PD,
            len,
            Access::LOCAL_WRITE
                | Access::REMOTE_READ
                | Access::REMOTE_WRITE
                | Access::REMOTE_ATOMIC,
        );
        let b = self.s[side].mem.bytes_mut(r.lkey).unwrap();
        for (i, x) in b.iter_mut().enumerate() {
            *x = pattern(seed, i);
        }
        r
    }

    pub fn zeroed(&mut self, side: usize, len: usize) -> Region {
        self.region(side, len, 0).tap_zero(&mut self.s[side].mem)
    }

    pub fn bytes(&self, side: usize, r: &Region) -> Vec<u8> {
        self.s[side].mem.bytes(r.lkey).unwrap().to_vec()
    }

    pub fn post_send(&mut self, side: usize, wr: SendWr) {
        let s = &mut self.s[side];
        s.qp.post_send(self.now, wr, &s.mem).unwrap();
    }

    pub fn post_recv(&mut self, side: usize, wr_id: u64, sgl: impl Into<SgList>) {
        self.s[side]
            .qp
            .post_recv(RecvWr {
                wr_id,
                sgl: sgl.into(),
            })
            .unwrap();
    }

    /// Moves every packet both QPs want to send onto the wire, then delivers the wire.
    /// Returns the number of packets transmitted.
    pub fn step(&mut self) -> usize {
        let mut n = 0;
        for from in [A, B] {
            while let Some(t) = self.s[from].qp.poll_transmit(self.now) {
                let mut payload = vec![0u8; t.payload.len()];
                t.payload
                    .gather(&self.s[from].mem, &mut payload)
                    .expect("transmit payload must be readable registered memory");
                let p = Pkt {
                    from,
                    headers: t.headers,
                    payload,
                };
                self.trace.push(p.clone());
                n += 1;
                let mut fate = match self.filter.as_mut() {
                    Some(f) => f(&p),
                    None => Fate::Pass,
                };
                if let Some(c) = self.chaos.as_mut() {
                    if fate == Fate::Pass {
                        let x: f64 = c.rng.gen();
                        if x < c.loss {
                            fate = Fate::Drop;
                        } else if x < c.loss + c.dup {
                            fate = Fate::Duplicate;
                        }
                    }
                }
                if !self.link_up {
                    fate = Fate::Drop;
                }
                match fate {
                    Fate::Pass => self.wire.push_back(p),
                    Fate::Drop => {}
                    Fate::Duplicate => {
                        self.wire.push_back(p.clone());
                        self.wire.push_back(p);
                    }
                }
            }
        }
        if let Some(c) = self.chaos.as_mut() {
            // Reorder: swap some neighbours.
            let len = self.wire.len();
            for i in 1..len {
                if c.rng.gen::<f64>() < c.reorder {
                    self.wire.swap(i - 1, i);
                }
            }
        }
        self.now += core::time::Duration::from_micros(1);
        while let Some(p) = self.wire.pop_front() {
            self.deliver(&p);
        }
        n
    }

    /// Takes everything `side` wants to send now, in order, without delivering it.
    pub fn drain(&mut self, side: usize) -> Vec<Pkt> {
        std::iter::from_fn(|| self.take_one(side)).collect()
    }

    /// Takes the next packet `side` sends; it must have one.
    pub fn drain_one(&mut self, side: usize) -> Pkt {
        self.take_one(side).expect("a packet to send")
    }

    pub fn take_one(&mut self, side: usize) -> Option<Pkt> {
        let t = self.s[side].qp.poll_transmit(self.now)?;
        let mut payload = vec![0u8; t.payload.len()];
        t.payload.gather(&self.s[side].mem, &mut payload).unwrap();
        Some(Pkt {
            from: side,
            headers: t.headers,
            payload,
        })
    }

    /// Hands one packet to the QP it is addressed to.
    pub fn deliver(&mut self, p: &Pkt) {
        let to = 1 - p.from;
        let s = &mut self.s[to];
        let pkt = RocePacket {
            headers: p.headers,
            payload: &p.payload,
        };
        let srq = s.srq.as_mut().map(|q| q as &mut dyn super::srq::RecvSource);
        s.qp.handle_packet(self.now, &pkt, &mut s.mem, srq);
    }

    /// Runs until both QPs are idle with no timer armed, or `limit` rounds passed.
    pub fn run(&mut self) {
        self.run_limit(1_000_000);
    }

    pub fn run_limit(&mut self, limit: usize) {
        for _ in 0..limit {
            if !self.turn() {
                return;
            }
        }
        panic!("did not settle");
    }

    /// Runs packets and timers for `d` of virtual time, settled or not.
    pub fn run_for(&mut self, d: core::time::Duration) {
        let until = self.now + d;
        while self.now < until && self.turn() {}
    }

    /// One step of the wire, or, when it is quiet, the clock moved to the next timer and the
    /// timers run; false when both QPs are idle with no timer armed.
    fn turn(&mut self) -> bool {
        if self.step() > 0 {
            return true;
        }
        let next = [A, B]
            .iter()
            .filter_map(|&i| self.s[i].qp.poll_timeout())
            .min();
        let Some(at) = next else { return false };
        self.now = at.max(self.now);
        for i in [A, B] {
            self.s[i].qp.handle_timeout(self.now);
        }
        true
    }

    pub fn completions(&mut self, side: usize) -> Vec<WorkCompletion> {
        let mut v = Vec::new();
        while let Some(c) = self.s[side].qp.poll_completion() {
            v.push(c);
        }
        v
    }

    /// Packets in the trace sent by `from` with opcode `op`.
    pub fn count(&self, from: usize, pred: impl Fn(&Pkt) -> bool) -> usize {
        self.trace
            .iter()
            .filter(|p| p.from == from && pred(p))
            .count()
    }
}

trait TapZero {
    fn tap_zero(self, mem: &mut VecMemory) -> Region;
}

impl TapZero for Region {
    fn tap_zero(self, mem: &mut VecMemory) -> Region {
        mem.bytes_mut(self.lkey).unwrap().fill(0);
        self
    }
}

/// The (wr_id, status) of each completion, in order.
pub fn statuses(c: &[WorkCompletion]) -> Vec<(u64, super::types::WcStatus)> {
    c.iter().map(|c| (c.wr_id, c.status)).collect()
}

pub fn pattern(seed: u8, i: usize) -> u8 {
    (i as u32)
        .wrapping_mul(2654435761)
        .rotate_left(seed as u32 % 31) as u8
        ^ seed
}

pub fn sge(r: &Region, off: u64, len: u32) -> Sge {
    Sge {
        addr: r.addr + off,
        len,
        lkey: r.lkey,
    }
}

/// A signaled RDMA WRITE of the whole of `from` to the start of `to`.
pub fn write_all(wr_id: u64, from: &Region, to: &Region) -> SendWr {
    wr(
        wr_id,
        SendOp::Write {
            remote_addr: to.addr,
            rkey: to.rkey,
        },
        vec![sge(from, 0, from.len as u32)],
    )
}

pub fn wr(wr_id: u64, op: SendOp, sgl: impl Into<SgList>) -> SendWr {
    SendWr {
        wr_id,
        op,
        sgl: sgl.into(),
        signaled: true,
        fence: false,
        solicited: false,
    }
}
