//! `Host` over the checked region table (`Host<Arc<MrTable>>`) and shared SRQ pools: two hosts
//! joined by an in-memory wire, connected through the CM. Data moves through registered memory
//! checked for key, PZ, bounds and rights; SRQ receives are accounted per EP (seeds 002/004);
//! SRQ-limit and watermark events come out as `HostEvent`s; `collect` looks only at QPs that
//! did something.

mod host_common;

use host_common::{host, MrHost};
use std::net::Ipv4Addr;

use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::host::{HostEvent, QpOptions};
use dpdk_roce::mem::access::Access;
use dpdk_roce::mem::{Pz, Region};
use dpdk_roce::srq::RecvQuery;
use dpdk_roce::time::Instant;
use dpdk_roce::transport::types::{RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use dpdk_roce::wire::ethernet::EthernetAddress;
use dpdk_roce::wire::psn::Psn;

const IP_A: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const MAC_A: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xa]);
const MAC_B: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 0xb]);

struct Wire {
    a: MrHost,
    b: MrHost,
    now: Instant,
}

impl Wire {
    fn new() -> Wire {
        Wire {
            a: host(MAC_A, IP_A, (IP_B, MAC_B)),
            b: host(MAC_B, IP_B, (IP_A, MAC_A)),
            now: Instant::from_nanos(1_000_000_000),
        }
    }

    /// Moves frames both ways (and fires timers) until `done` or nothing happens any more.
    fn run_until(&mut self, mut done: impl FnMut(&mut Wire) -> bool) {
        let mut buf = Vec::new();
        for _ in 0..100_000 {
            if done(self) {
                return;
            }
            let mut moved = false;
            while self.a.poll_transmit_into(self.now, &mut buf) {
                self.b.handle_frame(self.now, &buf);
                moved = true;
            }
            while self.b.poll_transmit_into(self.now, &mut buf) {
                self.a.handle_frame(self.now, &buf);
                moved = true;
            }
            if !moved {
                let next = [self.a.poll_timeout(), self.b.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                match next {
                    Some(t) => self.now = self.now.max(t),
                    None => {
                        assert!(done(self), "stalled");
                        return;
                    }
                }
                self.a.handle_timeout(self.now);
                self.b.handle_timeout(self.now);
            }
        }
        panic!("no progress");
    }

    /// Connects A's `qa` to B's `qb` through the CM (B listens on `port`).
    fn connect(&mut self, qa: u32, qb: u32, port: u16, srq_b: bool) {
        let _ = self.b.listen(port);
        let mut cp = ConnectParams::new(IP_B, port, qa, Psn::new(100));
        cp.access = Access::REMOTE_READ | Access::REMOTE_WRITE;
        self.a.connect(self.now, cp).unwrap();
        let mut req = None;
        self.run_until(|w| {
            while let Some(ev) = w.b.poll_event() {
                if let CmEvent::ConnectRequest { id, .. } = ev {
                    req = Some(id);
                }
            }
            req.is_some()
        });
        let mut ap = AcceptParams::new(qb, Psn::new(200));
        ap.srq = srq_b;
        ap.access = Access::REMOTE_READ | Access::REMOTE_WRITE;
        let now = self.now;
        self.b.accept(now, req.unwrap(), ap).unwrap();
        let (mut ua, mut ub) = (false, false);
        self.run_until(|w| {
            ua |= std::iter::from_fn(|| w.a.poll_event())
                .any(|e| matches!(e, CmEvent::Established { .. }));
            ub |= std::iter::from_fn(|| w.b.poll_event())
                .any(|e| matches!(e, CmEvent::Established { .. }));
            ua && ub
        });
    }
}

fn sge(r: &Region, off: u64, len: u32) -> dpdk_roce::transport::types::SgList {
    dpdk_roce::sgl![Sge {
        addr: r.addr + off,
        len,
        lkey: r.lkey,
    }]
}

fn wr(id: u64, op: SendOp, sgl: dpdk_roce::transport::types::SgList) -> SendWr {
    SendWr {
        wr_id: id,
        op,
        sgl,
        signaled: true,
        fence: false,
        solicited: false,
    }
}

fn qp_in(h: &mut MrHost, pz: Pz, srq: Option<u32>) -> u32 {
    let now = Instant::ZERO;
    h.create_qp(
        now,
        QpOptions {
            pd: pz.id(),
            srq,
            access: Access::REMOTE_READ | Access::REMOTE_WRITE,
            ..QpOptions::default()
        },
    )
    .unwrap()
}

fn read(h: &MrHost, r: &Region, off: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0; len];
    h.mr_table()
        .read_local(r.lkey, r.addr + off, &mut out)
        .unwrap();
    out
}

#[test]
fn send_write_read_through_checked_regions_and_a_foreign_pz_is_refused() {
    let mut w = Wire::new();
    let (pa, pb) = (w.a.create_pz(), w.b.create_pz());
    let other_pz = w.b.create_pz();
    let (qa, qb) = (qp_in(&mut w.a, pa, None), qp_in(&mut w.b, pb, None));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let pattern: Vec<u8> = (0..8192u32).map(|i| (i * 7 + 3) as u8).collect();
    let src = w.a.mr_table().register_bytes(pa, &pattern, rw).unwrap();
    let dst = w.b.mr_table().register_alloc(pb, 8192, 64, rw).unwrap();
    let foreign =
        w.b.mr_table()
            .register_alloc(other_pz, 4096, 64, rw)
            .unwrap();
    w.connect(qa, qb, 7000, false);

    // SEND 3000 bytes into a posted receive.
    w.b.post_recv(
        qb,
        RecvWr {
            wr_id: 9,
            sgl: sge(&dst, 0, 4096),
        },
    )
    .unwrap();
    let h = w.b.ep_recv_handle(qb).unwrap();
    assert_eq!(
        h.recv_query().nbufs_allocated,
        1,
        "own RQ: allocated when posted"
    );
    let now = w.now;
    w.a.post_send(now, qa, wr(1, SendOp::Send, sge(&src, 0, 3000)))
        .unwrap();
    let (mut got, mut sent) = (Vec::new(), Vec::new());
    w.run_until(|w| {
        got.extend(std::iter::from_fn(|| w.b.poll_completion()));
        sent.extend(std::iter::from_fn(|| w.a.poll_completion()));
        got.len() == 1 && sent.len() == 1
    });
    assert_eq!((sent[0].wr_id, sent[0].status), (1, WcStatus::Success));
    assert_eq!(
        (got[0].wr_id, got[0].status, got[0].byte_len),
        (9, WcStatus::Success, 3000)
    );
    assert_eq!(read(&w.b, &dst, 0, 3000), pattern[..3000]);
    assert_eq!(
        h.recv_query(),
        RecvQuery::default(),
        "completed: nothing allocated"
    );

    // RDMA WRITE 8000 bytes, then READ them back into another part of A's region.
    let now = w.now;
    w.a.post_send(
        now,
        qa,
        wr(
            2,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            sge(&src, 0, 8000),
        ),
    )
    .unwrap();
    let back = w.a.mr_table().register_alloc(pa, 8192, 64, rw).unwrap();
    w.a.post_send(
        now,
        qa,
        wr(
            3,
            SendOp::Read {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            sge(&back, 0, 8000),
        ),
    )
    .unwrap();
    let mut done = Vec::new();
    w.run_until(|w| {
        done.extend(std::iter::from_fn(|| w.a.poll_completion()));
        done.len() == 2
    });
    assert!(
        done.iter().all(|c| c.status == WcStatus::Success),
        "{done:?}"
    );
    assert_eq!(read(&w.b, &dst, 0, 8000), pattern[..8000]);
    assert_eq!(read(&w.a, &back, 0, 8000), pattern[..8000]);

    // A WRITE with the R_Key of a region in another PZ of B: remote access error, no byte
    // of that region changes.
    let now = w.now;
    w.a.post_send(
        now,
        qa,
        wr(
            4,
            SendOp::Write {
                remote_addr: foreign.addr,
                rkey: foreign.rkey,
            },
            sge(&src, 0, 64),
        ),
    )
    .unwrap();
    let mut bad = Vec::new();
    w.run_until(|w| {
        bad.extend(std::iter::from_fn(|| w.a.poll_completion()));
        !bad.is_empty()
    });
    assert_eq!(bad[0].wr_id, 4);
    assert_eq!(bad[0].status, WcStatus::RemAccessErr);
    assert!(read(&w.b, &foreign, 0, 4096).iter().all(|&b| b == 0));
}

#[test]
fn shared_srq_pool_feeds_two_eps_with_per_ep_accounting_and_events() {
    let mut w = Wire::new();
    let (pa, pb) = (w.a.create_pz(), w.b.create_pz());
    let (srqn, pool) = w.b.create_shared_srq(32);
    let qa1 = qp_in(&mut w.a, pa, None);
    let qa2 = qp_in(&mut w.a, pa, None);
    let qb1 = qp_in(&mut w.b, pb, Some(srqn));
    let qb2 = qp_in(&mut w.b, pb, Some(srqn));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let src = w.a.mr_table().register_bytes(pa, &[0x5a; 256], rw).unwrap();
    let dst = w.b.mr_table().register_alloc(pb, 64 * 16, 64, rw).unwrap();
    w.connect(qa1, qb1, 7001, true);
    w.connect(qa2, qb2, 7002, true);

    // A consumer thread posts the receives to the pool directly.
    let p = pool.clone();
    std::thread::spawn(move || {
        for i in 0..8u64 {
            p.post_recv(RecvWr {
                wr_id: 100 + i,
                sgl: sge(&dst, i * 64, 64),
            })
            .unwrap();
        }
    })
    .join()
    .unwrap();
    assert_eq!(pool.len(), 8);
    assert!(!w.b.arm_srq_limit(srqn, 4).unwrap(), "8 posted, limit 4");
    let h1 = w.b.ep_recv_handle(qb1).unwrap();
    let h2 = w.b.ep_recv_handle(qb2).unwrap();
    // A soft watermark of 1 on EP 1: fires when it holds 2 buffers.
    assert!(!h1
        .set_watermark(1, dpdk_roce::srq::WATERMARK_INFINITE)
        .any());

    // Three sends on QP 1, two on QP 2.
    let now = w.now;
    for i in 0..3 {
        w.a.post_send(now, qa1, wr(i, SendOp::Send, sge(&src, 0, 32)))
            .unwrap();
    }
    for i in 0..2 {
        w.a.post_send(now, qa2, wr(i, SendOp::Send, sge(&src, 0, 48)))
            .unwrap();
    }
    let mut recvs = Vec::new();
    let mut events = Vec::new();
    w.run_until(|w| {
        recvs.extend(std::iter::from_fn(|| w.b.poll_completion()));
        events.extend(std::iter::from_fn(|| w.b.poll_host_event()));
        recvs.len() == 5
    });
    assert!(recvs
        .iter()
        .all(|c| c.status == WcStatus::Success && c.srq == Some(srqn)));
    assert!(recvs.iter().all(|c| c.opcode == WcOpcode::Recv));
    let mut ids: Vec<u64> = recvs.iter().map(|c| c.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        vec![100, 101, 102, 103, 104],
        "five distinct WQEs of the pool"
    );
    assert_eq!(recvs.iter().filter(|c| c.qp_num == qb1).count(), 3);
    assert_eq!(pool.len(), 3);
    // 8 -> 3 crossed the limit of 4 once.
    assert_eq!(
        events
            .iter()
            .filter(|e| **e == HostEvent::SrqLimit { srqn })
            .count(),
        1,
        "{events:?}"
    );
    assert_eq!(pool.limit_events_fired(), 1);
    // Whether EP 1 ever held two buffers at once depends on delivery; when it did, the soft
    // event names it; it never names EP 2 (no watermark set there).
    assert!(events.iter().all(|e| match e {
        HostEvent::EpWatermark { qpn, soft, hard } => *qpn == qb1 && *soft && !*hard,
        _ => true,
    }));
    // Every taken buffer completed: nothing allocated, on either EP.
    assert_eq!(h1.recv_query(), RecvQuery::default());
    assert_eq!(h2.recv_query(), RecvQuery::default());
}

#[test]
fn watermark_event_fires_when_an_ep_holds_more_buffers_than_set() {
    let mut w = Wire::new();
    let (pa, pb) = (w.a.create_pz(), w.b.create_pz());
    let (srqn, pool) = w.b.create_shared_srq(8);
    let qa = qp_in(&mut w.a, pa, None);
    let qb = qp_in(&mut w.b, pb, Some(srqn));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let src = w.a.mr_table().register_bytes(pa, &[7; 4096], rw).unwrap();
    let dst = w.b.mr_table().register_alloc(pb, 8192, 64, rw).unwrap();
    w.connect(qa, qb, 7003, true);
    for i in 0..2u64 {
        pool.post_recv(RecvWr {
            wr_id: i,
            sgl: sge(&dst, i * 4096, 4096),
        })
        .unwrap();
    }
    let h = w.b.ep_recv_handle(qb).unwrap();
    h.set_watermark(0, dpdk_roce::srq::WATERMARK_INFINITE);
    // A 4 KiB SEND is four 1 KiB packets: after the first one EP B holds 1 buffer (> 0).
    let now = w.now;
    w.a.post_send(now, qa, wr(1, SendOp::Send, sge(&src, 0, 4096)))
        .unwrap();
    let mut events = Vec::new();
    let mut n = 0;
    w.run_until(|w| {
        n += std::iter::from_fn(|| w.b.poll_completion()).count();
        events.extend(std::iter::from_fn(|| w.b.poll_host_event()));
        n == 1
    });
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, HostEvent::EpWatermark { qpn, soft: true, hard: false } if *qpn == qb))
            .count(),
        1,
        "{events:?}"
    );
    assert_eq!(h.recv_query(), RecvQuery::default());
    assert_eq!(read(&w.b, &dst, 0, 4096), vec![7; 4096]);
}

#[test]
fn collect_looks_only_at_qps_that_did_something() {
    let mut w = Wire::new();
    let (pa, pb) = (w.a.create_pz(), w.b.create_pz());
    let (qa, qb) = (qp_in(&mut w.a, pa, None), qp_in(&mut w.b, pb, None));
    for _ in 0..200 {
        qp_in(&mut w.a, pa, None);
    }
    w.connect(qa, qb, 7004, false);
    let before = w.a.stats().qps_collected;
    for _ in 0..1000 {
        assert!(w.a.poll_completion().is_none());
        assert!(w.a.poll_host_event().is_none());
    }
    assert_eq!(
        w.a.stats().qps_collected,
        before,
        "idle polls look at no QP"
    );
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let src = w.a.mr_table().register_bytes(pa, &[1; 64], rw).unwrap();
    let dst = w.b.mr_table().register_alloc(pb, 64, 64, rw).unwrap();
    let now = w.now;
    w.a.post_send(
        now,
        qa,
        wr(
            1,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            sge(&src, 0, 64),
        ),
    )
    .unwrap();
    let mut c = None;
    w.run_until(|w| {
        c = c.or_else(|| w.a.poll_completion());
        c.is_some()
    });
    assert_eq!(c.unwrap().status, WcStatus::Success);
    let looked = w.a.stats().qps_collected - before;
    assert!(
        (1..=4).contains(&looked),
        "one busy QP among 201 looked at {looked} times"
    );
}

#[test]
fn pinned_frames_match_whole_frames_and_hold_their_region_until_unpinned() {
    use dpdk_roce::host::{PinnedTx, TxOut};
    use dpdk_roce::io::PinnedFrame;
    use dpdk_roce::mem::MrError;
    use dpdk_roce::wire::frame::RoceFrame;

    let mut w = Wire::new();
    let (pa, pb) = (w.a.create_pz(), w.b.create_pz());
    let (qa, qb) = (qp_in(&mut w.a, pa, None), qp_in(&mut w.b, pb, None));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let pattern: Vec<u8> = (0..3001u32).map(|i| (i * 13) as u8).collect();
    let src = w.a.mr_table().register_bytes(pa, &pattern, rw).unwrap();
    let dst = w.b.mr_table().register_alloc(pb, 4096, 64, rw).unwrap();
    w.connect(qa, qb, 7005, false);

    // 3001 bytes at MTU 1024: three packets, the last with 953 bytes and 3 pad bytes.
    let now = w.now;
    w.a.post_send(
        now,
        qa,
        wr(
            1,
            SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            sge(&src, 0, 3001),
        ),
    )
    .unwrap();
    let mut hdr = Vec::new();
    let mut pinned = PinnedTx::new();
    let mut frames = Vec::new();
    let table = w.a.mr_table().clone();
    while let Some(out) = w.a.poll_transmit_pinned(now, &mut hdr, &mut pinned, 1) {
        assert_eq!(out, TxOut::Pinned);
        assert_eq!(pinned.segments.len(), 1);
        // The payload is pinned: the source region cannot be freed now.
        assert_eq!(table.try_deregister(src.lkey), Err(MrError::Busy));
        let trailer = pinned.trailer().to_vec();
        let mut frame = PinnedFrame {
            headers: &hdr,
            segments: &mut pinned.segments,
            trailer: &trailer,
            table: &table,
        };
        let mut bytes = Vec::new();
        frame.gather_into(&mut bytes);
        frame.unpin_all();
        assert!(pinned.segments.is_empty());
        let parsed = RoceFrame::parse(&bytes).expect("valid frame with a valid ICRC");
        frames.push((parsed.payload.to_vec(), bytes.clone()));
        w.b.handle_frame(now, &bytes);
    }
    assert_eq!(frames.len(), 3);
    let payload: Vec<u8> = frames.iter().flat_map(|(p, _)| p.clone()).collect();
    assert_eq!(payload, pattern);
    assert_eq!(w.a.stats().tx_pinned, 3);
    // Every pin released: the region is free to go once the WRITE completed.
    let mut c = None;
    w.run_until(|w| {
        c = c.or_else(|| w.a.poll_completion());
        c.is_some()
    });
    assert_eq!(c.unwrap().status, WcStatus::Success);
    assert_eq!(read(&w.b, &dst, 0, 3001), pattern);
    assert_eq!(table.try_deregister(src.lkey), Ok(()));
}

/// A copy of `frame` (Ethernet/IPv4/UDP/RoCEv2) claiming to come from `src`: the IPv4
/// checksum and the ICRC are made right again, so only the origin is wrong.
fn from_elsewhere(frame: &[u8], src: Ipv4Addr) -> Vec<u8> {
    use dpdk_roce::wire::{icrc, ipv4};
    let mut f = frame.to_vec();
    let mut ip = ipv4::Packet::new_unchecked(&mut f[14..]);
    ip.set_src_addr(src);
    ip.fill_checksum();
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let (crc, _) = icrc::icrc_frame(&f).unwrap();
    f[14 + total - 4..14 + total].copy_from_slice(&crc.to_le_bytes());
    f
}

/// Origin checks (IBTA: a packet's source must match the QP's path; Linux rxe check_addr): a
/// frame right in every RoCE field (QPN, PSN, R_Key, ICRC) but from another address is dropped
/// unread and counted; the genuine frame behind it is executed as if the forgery never came.
#[test]
fn a_frame_from_an_address_that_is_not_the_peer_is_dropped() {
    let mut w = Wire::new();
    let (pa, pb) = (w.a.create_pz(), w.b.create_pz());
    let (qa, qb) = (qp_in(&mut w.a, pa, None), qp_in(&mut w.b, pb, None));
    let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let src = w.a.mr_table().register_bytes(pa, b"genuine!", rw).unwrap();
    let dst = w.b.mr_table().register_alloc(pb, 4096, 64, rw).unwrap();
    w.connect(qa, qb, 7100, false);
    let op = SendOp::Write {
        remote_addr: dst.addr,
        rkey: dst.rkey,
    };
    let now = w.now;
    w.a.post_send(now, qa, wr(5, op, sge(&src, 0, 8))).unwrap();
    let mut frame = Vec::new();
    assert!(w.a.poll_transmit_into(now, &mut frame), "A sends the WRITE");
    let before = w.b.stats().rx_wrong_origin;
    // An off-path sender in the same subnet, with the connection's every secret.
    w.b.handle_frame(now, &from_elsewhere(&frame, Ipv4Addr::new(192, 0, 2, 66)));
    assert_eq!(w.b.stats().rx_wrong_origin, before + 1);
    assert_eq!(read(&w.b, &dst, 0, 8), vec![0u8; 8], "nothing written");
    let mut out = Vec::new();
    assert!(
        !w.b.poll_transmit_into(now, &mut out),
        "no ACK or NAK for the forgery"
    );
    // The genuine WRITE at the same PSN is executed, not taken for a duplicate.
    w.b.handle_frame(now, &frame);
    assert_eq!(read(&w.b, &dst, 0, 8), b"genuine!");
    let mut done = Vec::new();
    w.run_until(|w| {
        done.extend(std::iter::from_fn(|| w.a.poll_completion()));
        !done.is_empty()
    });
    assert_eq!((done[0].wr_id, done[0].status), (5, WcStatus::Success));
    assert_eq!(w.b.stats().rx_wrong_origin, before + 1);
}
