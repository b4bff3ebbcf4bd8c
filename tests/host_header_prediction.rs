//! Header prediction (`Host::set_header_prediction`: on receive `wire::write_only` and
//! `Qp::handle_write_only`, on send `Qp::next_write_only`) changes nothing but the path a frame
//! takes: two hosts run the same seeded workload twice, prediction on and off, over a wire that
//! drops, duplicates, corrupts and reorders frames (driven by the same seed), with RDMA WRITEs
//! of every size in both directions, WRITE with immediate, READs, and WRITEs with a wrong R_Key
//! or out of bounds. Every frame either host sends, every completion, the memory of every region and every counter
//! must be the same in both runs, and the run with prediction on must have taken a good share
//! of the frames received and sent through it.

mod host_common;

use host_common::{host, MrHost};
use std::net::Ipv4Addr;

use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::engine::deregister::Deregister;
use dpdk_roce::host::{HostStats, QpOptions};
use dpdk_roce::mem::access::Access;
use dpdk_roce::mem::Region;
use dpdk_roce::net::NetStats;
use dpdk_roce::time::Instant;
use dpdk_roce::transport::qp::QpStats;
use dpdk_roce::transport::types::{
    RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use dpdk_roce::wire::ethernet::EthernetAddress;
use dpdk_roce::wire::psn::Psn;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);
const PAIRS: usize = 3;
const REGION: usize = 64 * 1024;

/// One side's QP and regions: `src` to send from and READ into, `dst` for the peer's WRITEs
/// and READs, `recv` for WRITE with immediate's receive WQEs.
struct End {
    qpn: u32,
    src: Region,
    dst: Region,
}

/// What a run leaves behind, compared between the two runs.
#[derive(Debug, PartialEq)]
struct Outcome {
    /// Every frame sent, with its direction (true: A to B).
    frames: Vec<(bool, Vec<u8>)>,
    completions: Vec<(bool, WorkCompletion)>,
    memory: Vec<Vec<u8>>,
    net: (NetStats, NetStats),
    host: (HostStats, HostStats),
    qps: Vec<QpStats>,
}

struct Run {
    a: MrHost,
    b: MrHost,
    now: Instant,
    rng: ChaCha8Rng,
    frames: Vec<(bool, Vec<u8>)>,
    completions: Vec<(bool, WorkCompletion)>,
    /// A frame held back to be delivered after the next one in its direction.
    held: [Option<Vec<u8>>; 2],
    lossy: bool,
}

impl Run {
    fn new(seed: u64, predict: bool) -> Run {
        let mut a = host(MAC_A, IP_A, (IP_B, MAC_B));
        let mut b = host(MAC_B, IP_B, (IP_A, MAC_A));
        a.set_header_prediction(predict);
        b.set_header_prediction(predict);
        Run {
            a,
            b,
            now: Instant::from_nanos(1_000_000_000),
            rng: ChaCha8Rng::seed_from_u64(seed),
            frames: Vec::new(),
            completions: Vec::new(),
            held: [None, None],
            lossy: false,
        }
    }

    /// Delivers `frame` (sent A to B when `ab`) through the wire: dropped, duplicated, one
    /// byte corrupted or held back for reordering, by the seed, when the wire is lossy.
    fn carry(&mut self, ab: bool, frame: Vec<u8>) {
        self.frames.push((ab, frame.clone()));
        let mut deliver = vec![frame];
        if self.lossy {
            match self.rng.gen_range(0..100) {
                0..=2 => deliver.clear(),
                3..=5 => deliver.push(deliver[0].clone()),
                6..=7 => {
                    let at = self.rng.gen_range(0..deliver[0].len());
                    deliver[0][at] ^= 1 << self.rng.gen_range(0..8);
                }
                8..=10 => {
                    if let Some(old) = self.held[usize::from(ab)].replace(deliver.remove(0)) {
                        deliver.push(old);
                    }
                }
                _ => {}
            }
        }
        if !deliver.is_empty() {
            if let Some(old) = self.held[usize::from(ab)].take() {
                deliver.push(old);
            }
        }
        let to = if ab { &mut self.b } else { &mut self.a };
        for f in deliver {
            to.handle_frame(self.now, &f);
        }
    }

    /// Moves frames both ways until neither host has any, then drains completions.
    fn pump(&mut self) -> bool {
        let mut buf = Vec::new();
        let mut moved = false;
        loop {
            let mut any = false;
            while self.a.poll_transmit_into(self.now, &mut buf) {
                self.carry(true, buf.clone());
                any = true;
            }
            while self.b.poll_transmit_into(self.now, &mut buf) {
                self.carry(false, buf.clone());
                any = true;
            }
            if !any {
                break;
            }
            moved = true;
        }
        for ab in [true, false] {
            let h = if ab { &mut self.a } else { &mut self.b };
            while let Some(wc) = h.poll_completion() {
                // A consumed receive WQE (WRITE with immediate) is replaced.
                if wc.opcode == WcOpcode::RecvRdmaWithImm && wc.status == WcStatus::Success {
                    let _ = h.post_recv(wc.qp_num, zero_recv(wc.wr_id));
                }
                self.completions.push((ab, wc));
            }
        }
        moved
    }

    /// Pumps and fires timers until both hosts are idle (no frame, no timer) or `limit`
    /// timer rounds passed.
    fn settle(&mut self, limit: usize) {
        for _ in 0..limit {
            self.pump();
            for ab in [true, false] {
                if let Some(f) = self.held[usize::from(ab)].take() {
                    let to = if ab { &mut self.b } else { &mut self.a };
                    to.handle_frame(self.now, &f);
                }
            }
            if self.pump() {
                continue;
            }
            let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                .into_iter()
                .flatten()
                .min();
            let Some(t) = next else {
                return;
            };
            self.now = self.now.max(t);
            self.a.handle_timeout(self.now);
            self.b.handle_timeout(self.now);
        }
    }

    fn connect(&mut self, qa: u32, qb: u32, port: u16) {
        self.b.listen(port).unwrap();
        let mut cp = ConnectParams::new(IP_B, port, qa, Psn::new(100 + u32::from(port)));
        cp.access = Access::REMOTE_READ | Access::REMOTE_WRITE;
        // 4.096 us * 2^10 = 4.2 ms: lost packets are resent within the run.
        cp.local_ack_timeout = 10;
        self.a.connect(self.now, cp).unwrap();
        let mut req = None;
        for _ in 0..100 {
            self.settle(1);
            while let Some(ev) = self.b.poll_event() {
                if let CmEvent::ConnectRequest { id, .. } = ev {
                    req = Some(id);
                }
            }
            if req.is_some() {
                break;
            }
        }
        let mut ap = AcceptParams::new(qb, Psn::new(0xff_fff0 + u32::from(port % 8)));
        ap.access = Access::REMOTE_READ | Access::REMOTE_WRITE;
        let now = self.now;
        self.b
            .accept(now, req.expect("connect request"), ap)
            .unwrap();
        let (mut ua, mut ub) = (false, false);
        for _ in 0..100 {
            self.settle(1);
            ua |= std::iter::from_fn(|| self.a.poll_event())
                .any(|e| matches!(e, CmEvent::Established { .. }));
            ub |= std::iter::from_fn(|| self.b.poll_event())
                .any(|e| matches!(e, CmEvent::Established { .. }));
            if ua && ub {
                return;
            }
        }
        panic!("not established");
    }
}

fn end(h: &mut MrHost) -> End {
    let table = h.mr_table().clone();
    let pz = table.create_pz();
    let all = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let src = table.register_alloc(pz, REGION, 4096, all).unwrap();
    let dst = table.register_alloc(pz, REGION, 4096, all).unwrap();
    let qpn = h
        .create_qp(
            Instant::ZERO,
            QpOptions {
                pd: pz.id(),
                access: Access::REMOTE_READ | Access::REMOTE_WRITE,
                ..QpOptions::default()
            },
        )
        .unwrap();
    let mut fill = vec![0u8; REGION];
    for (i, b) in fill.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(h.config().net.ipv4_addr().unwrap().octets()[3]);
    }
    table.write_local(src.lkey, src.addr, &fill).unwrap();
    End { qpn, src, dst }
}

/// A receive WQE without buffers (WRITE with immediate needs one, with no bytes).
fn zero_recv(wr_id: u64) -> RecvWr {
    RecvWr {
        wr_id,
        sgl: Default::default(),
    }
}

fn read(h: &MrHost, r: &Region) -> Vec<u8> {
    let mut out = vec![0; REGION];
    h.mr_table().read_local(r.lkey, r.addr, &mut out).unwrap();
    out
}

/// One seeded workload; the same seed makes the same posts and the same wire faults as long
/// as both hosts behave the same.
fn run(seed: u64, predict: bool, ops: usize) -> Outcome {
    let mut r = Run::new(seed, predict);
    let ends_a: Vec<End> = (0..PAIRS).map(|_| end(&mut r.a)).collect();
    let ends_b: Vec<End> = (0..PAIRS).map(|_| end(&mut r.b)).collect();
    for (i, (ea, eb)) in ends_a.iter().zip(&ends_b).enumerate() {
        r.connect(ea.qpn, eb.qpn, 7000 + i as u16);
    }
    // Receive WQEs for WRITE with immediate, plenty on both sides.
    for (h, ends) in [(&mut r.a, &ends_a), (&mut r.b, &ends_b)] {
        for e in ends {
            for id in 0..(ops as u64 / 4) {
                let wr = zero_recv(id);
                // Up to the receive queue's depth.
                if h.post_recv(e.qpn, wr).is_err() {
                    break;
                }
            }
        }
    }
    r.lossy = true;
    let mut refused = 0;
    for op in 0..ops {
        let i = r.rng.gen_range(0..PAIRS);
        let from_a = r.rng.gen_bool(0.5);
        let (from, to) = if from_a {
            (&ends_a[i], &ends_b[i])
        } else {
            (&ends_b[i], &ends_a[i])
        };
        let len = match r.rng.gen_range(0..10) {
            0 => r.rng.gen_range(1000..5000),
            1 => 0,
            _ => r.rng.gen_range(1..100),
        };
        let off = r.rng.gen_range(0..(REGION - len) as u64);
        let roff = r.rng.gen_range(0..(REGION - len) as u64);
        let mut remote_addr = to.dst.addr + roff;
        let mut rkey = to.dst.rkey;
        // Late in the run, pair 2 gets a WRITE the responder must refuse (NAK, both to ERROR).
        if i == 2 && op > ops * 3 / 4 && r.rng.gen_range(0..20) == 0 {
            if r.rng.gen_bool(0.5) {
                rkey ^= 0x100;
            } else {
                remote_addr = to.dst.addr + REGION as u64 - 4;
            }
        }
        let sop = match r.rng.gen_range(0..10) {
            0 => SendOp::WriteWithImm {
                remote_addr,
                rkey,
                imm: op as u32,
            },
            1 => SendOp::Read { remote_addr, rkey },
            _ => SendOp::Write { remote_addr, rkey },
        };
        let wr = SendWr {
            wr_id: op as u64,
            op: sop,
            sgl: dpdk_roce::sgl![Sge {
                addr: from.src.addr + off,
                len: len as u32,
                lkey: from.src.lkey,
            }],
            signaled: r.rng.gen_bool(0.3),
            fence: false,
            solicited: false,
        };
        let now = r.now;
        let h = if from_a { &mut r.a } else { &mut r.b };
        // A full send queue or a QP in ERROR refuses or flushes: the same in both runs.
        if let Err(e) = h.post_send(now, from.qpn, wr) {
            if refused == 0 {
                eprintln!("op {op}: first refused post: {e}");
            }
            refused += 1;
        }
        // Sometimes several posts leave in one go.
        if r.rng.gen_range(0..3) != 0 {
            r.pump();
        }
        // Time passes: a few microseconds per post, now and then a long pause; due timers
        // (ACK delay, ACK probe, retransmission) fire.
        let step = if r.rng.gen_range(0..20) == 0 {
            r.rng.gen_range(100_000..5_000_000)
        } else {
            r.rng.gen_range(100..5_000)
        };
        r.now = Instant::from_nanos(r.now.as_nanos() + step);
        r.a.handle_timeout(r.now);
        r.b.handle_timeout(r.now);
    }
    r.lossy = false;
    assert!(refused < ops / 10, "{refused} of {ops} posts refused");
    r.settle(10_000);
    let mut qps = Vec::new();
    for (h, ends) in [(&r.a, &ends_a), (&r.b, &ends_b)] {
        for e in ends {
            qps.push(*h.qp(e.qpn).expect("qp").stats());
        }
    }
    let mut memory = Vec::new();
    for (h, ends) in [(&r.a, &ends_a), (&r.b, &ends_b)] {
        for e in ends {
            memory.push(read(h, &e.src));
            memory.push(read(h, &e.dst));
        }
    }
    // Region addresses are the allocator's and differ between runs: RETH virtual addresses
    // are compared as (region, offset), and the ICRC over them is left out.
    let regions: Vec<u64> = [&ends_a, &ends_b]
        .iter()
        .flat_map(|ends| ends.iter().flat_map(|e| [e.src.addr, e.dst.addr]))
        .collect();
    let frames = r
        .frames
        .into_iter()
        .map(|(ab, f)| (ab, normalised(f, &regions)))
        .collect();
    Outcome {
        frames,
        completions: r.completions,
        memory,
        net: (r.a.net_stats().clone(), r.b.net_stats().clone()),
        host: (r.a.stats().clone(), r.b.stats().clone()),
        qps,
    }
}

/// `frame` with its RETH VA (if any) as region index and offset and its ICRC zeroed.
fn normalised(mut frame: Vec<u8>, regions: &[u64]) -> Vec<u8> {
    const RETH_VA: usize = 14 + 20 + 8 + 12;
    let parsed = dpdk_roce::wire::RoceFrame::parse(&frame).expect("frames sent parse");
    if let Some(reth) = parsed.headers.reth {
        let (idx, base) = regions
            .iter()
            .enumerate()
            .find(|(_, &b)| (b..b + REGION as u64).contains(&reth.va))
            .map(|(i, &b)| (i as u64, b))
            .expect("every VA sent lies in a region");
        let rel = (idx << 32) | (reth.va - base);
        frame[RETH_VA..RETH_VA + 8].copy_from_slice(&rel.to_be_bytes());
        let n = frame.len();
        frame[n - 4..].copy_from_slice(&[0; 4]);
    }
    frame
}

#[test]
fn prediction_on_and_off_send_the_same_frames_and_leave_the_same_state() {
    for seed in [1u64, 2, 3, 4] {
        let on = run(seed, true, 3000);
        let mut off = run(seed, false, 3000);
        let predicted = on.host.0.rx_predicted + on.host.1.rx_predicted;
        let roce = on.net.0.rx_roce + on.net.1.rx_roce;
        assert_eq!(off.host.0.rx_predicted + off.host.1.rx_predicted, 0);
        // The workload reaches both paths: a quarter or more of the frames predicted (the
        // rest are ACKs, NAKs, READs, multi-packet messages, resends and faults).
        assert!(
            predicted * 4 > roce,
            "seed {seed}: {predicted} of {roce} predicted"
        );
        assert!(
            roce - predicted > 500,
            "seed {seed}: {predicted} of {roce} predicted"
        );
        // The send side: a fifth or more of the frames sent written from the WRITE Only
        // fast path, and the rest (ACKs, resends, READs, several packets) not. (The adaptive
        // retransmission timer resends sooner after the wire's faults: more resends.)
        let tx_predicted = on.host.0.tx_predicted + on.host.1.tx_predicted;
        let sent = on.host.0.tx_frames + on.host.1.tx_frames;
        assert_eq!(off.host.0.tx_predicted + off.host.1.tx_predicted, 0);
        assert!(
            tx_predicted * 5 > sent && sent - tx_predicted > 500,
            "seed {seed}: {tx_predicted} of {sent} frames sent predicted"
        );
        off.host.0.rx_predicted = on.host.0.rx_predicted;
        off.host.1.rx_predicted = on.host.1.rx_predicted;
        off.host.0.tx_predicted = on.host.0.tx_predicted;
        off.host.1.tx_predicted = on.host.1.tx_predicted;
        assert_eq!(
            on.frames.len(),
            off.frames.len(),
            "seed {seed}: frames sent"
        );
        for (n, (x, y)) in on.frames.iter().zip(&off.frames).enumerate() {
            assert_eq!(x, y, "seed {seed}: frame {n}");
        }
        assert_eq!(on.completions, off.completions, "seed {seed}");
        assert!(on.memory == off.memory, "seed {seed}: memory differs");
        assert_eq!(on.net, off.net, "seed {seed}");
        assert_eq!(on.host, off.host, "seed {seed}");
        assert_eq!(on.qps, off.qps, "seed {seed}");
        // The refused WRITEs and the faults of the wire happened.
        let errors = on
            .completions
            .iter()
            .filter(|(_, wc)| wc.status != WcStatus::Success)
            .count();
        assert!(
            errors > 0,
            "seed {seed}: no error completion; {} completions, qps {:?}",
            on.completions.len(),
            on.qps
        );
        let fatal: u64 = on.qps.iter().map(|q| q.fatal_naks_sent).sum();
        assert!(fatal > 0, "seed {seed}: no refused WRITE");
        let dropped: u64 = on.qps.iter().map(|q| q.duplicates + q.dropped).sum();
        assert!(dropped > 0, "seed {seed}: no duplicate or dropped packet");
    }
}

/// A WRITE whose source region is freed between its post and its transmission: its packet
/// cannot be built and is counted (`tx_payload_errors`), the requester resends it on every
/// local ACK timeout until its retries run out, and it completes in error. Both paths do the
/// same, frame for frame and count for count.
#[test]
fn a_write_from_a_region_freed_after_its_post_is_counted_the_same_on_both_paths() {
    let run = |predict: bool| {
        let mut r = Run::new(9, predict);
        let ea = end(&mut r.a);
        let eb = end(&mut r.b);
        r.connect(ea.qpn, eb.qpn, 7100);
        let sent_before = r.frames.len();
        let wr = SendWr {
            wr_id: 77,
            op: SendOp::Write {
                remote_addr: eb.dst.addr,
                rkey: eb.dst.rkey,
            },
            sgl: dpdk_roce::sgl![Sge {
                addr: ea.src.addr,
                len: 8,
                lkey: ea.src.lkey,
            }],
            signaled: true,
            fence: false,
            solicited: false,
        };
        let now = r.now;
        r.a.post_send(now, ea.qpn, wr).unwrap();
        r.a.mr_table().deregister(ea.src.lkey).unwrap();
        r.settle(1_000);
        let wcs: Vec<WorkCompletion> = r.completions.iter().map(|(_, wc)| *wc).collect();
        (
            r.a.stats().clone(),
            r.frames.len() - sent_before,
            wcs,
            *r.a.qp(ea.qpn).expect("qp").stats(),
        )
    };
    let on = run(true);
    let mut off = run(false);
    // The first attempt took the fast path and failed there: nothing sent, nothing predicted.
    assert_eq!(on.0.tx_predicted, 0);
    assert!(
        on.0.tx_payload_errors >= 2,
        "first try and resends: {:?}",
        on.0
    );
    let failed =
        on.2.iter()
            .find(|wc| wc.wr_id == 77)
            .expect("the WRITE completes");
    assert_ne!(failed.status, WcStatus::Success);
    off.0.rx_predicted = on.0.rx_predicted;
    assert_eq!(on, off);
}
