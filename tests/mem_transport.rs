//! The RC transport running over `MrTable` (the `Memory` trait through `&MrTable`): RDMA WRITE,
//! READ, atomics and SEND with Invalidate land in registered memory, and stale or invalidated
//! R_Keys are refused with a remote access error (IBTA vol. 1 §10.6, §9.7.5.2.3).

use std::sync::Arc;

use dpdk_roce::engine::deregister::Deregister;
use dpdk_roce::mem::access::{Access, KeyKind, MemError, MemRef};
use dpdk_roce::mem::{MrTable, Pz, Region};
use dpdk_roce::time::Instant;
use dpdk_roce::transport::types::{
    Mtu, QpAttr, QpConfig, QpState, RecvWr, SendOp, SendWr, Sge, WcStatus, WorkCompletion,
};
use dpdk_roce::transport::Qp;
use dpdk_roce::wire::psn::Psn;
use dpdk_roce::wire::roce::RocePacket;

struct Host {
    qp: Qp,
    mem: Arc<MrTable>,
    pz: Pz,
}

fn host(qpn: u32, dest: u32, sq: u32, rq: u32, capacity: u32) -> Host {
    let mem = Arc::new(MrTable::new(capacity));
    let pz = mem.create_pz();
    let mut qp = Qp::new(QpConfig {
        qpn,
        pd: pz.id(),
        sq_depth: 64,
        rq_depth: 64,
        max_send_sge: 4,
        max_recv_sge: 4,
        srq: None,
        sig_all: true,
    });
    let attr = QpAttr {
        pmtu: Mtu::Mtu1024,
        sq_psn: Psn::new(sq),
        rq_psn: Psn::new(rq),
        dest_qpn: dest,
        pkey: 0xffff,
        access: Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
        ..QpAttr::default()
    };
    for s in [QpState::Init, QpState::Rtr, QpState::Rts] {
        qp.modify(Instant::ZERO, s, &attr).unwrap();
    }
    Host { qp, mem, pz }
}

/// Moves packets both ways until both QPs are quiet.
fn run(h: &mut [Host; 2]) {
    let now = Instant::ZERO;
    for _ in 0..10_000 {
        let mut moved = 0;
        for from in 0..2 {
            while let Some(t) = h[from].qp.poll_transmit(now) {
                let mut payload = vec![0u8; t.payload.len()];
                let mem: &MrTable = &h[from].mem;
                t.payload.gather(&mem, &mut payload).unwrap();
                let to = &mut h[1 - from];
                let pkt = RocePacket {
                    headers: t.headers,
                    payload: &payload,
                };
                let mut view: &MrTable = &to.mem;
                to.qp.handle_packet(now, &pkt, &mut view, None);
                moved += 1;
            }
        }
        if moved == 0 {
            return;
        }
    }
    panic!("did not settle");
}

fn completions(h: &mut Host) -> Vec<WorkCompletion> {
    std::iter::from_fn(|| h.qp.poll_completion()).collect()
}

fn region(h: &Host, len: usize, fill: u8) -> Region {
    let all =
        Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    h.mem.register_bytes(h.pz, &vec![fill; len], all).unwrap()
}

fn send(h: &mut Host, wr_id: u64, op: SendOp, sgl: Vec<Sge>) {
    let mem: &MrTable = &h.mem;
    h.qp.post_send(
        Instant::ZERO,
        SendWr {
            wr_id,
            op,
            sgl: sgl.into(),
            signaled: true,
            fence: false,
            solicited: false,
        },
        &mem,
    )
    .unwrap();
}

fn sge(r: &Region, off: u64, len: u32) -> Sge {
    Sge {
        addr: r.addr + off,
        len,
        lkey: r.lkey,
    }
}

fn bytes(h: &Host, r: &Region) -> Vec<u8> {
    let mut v = vec![0u8; r.len as usize];
    h.mem.read_local(r.lkey, r.addr, &mut v).unwrap();
    v
}

#[test]
fn rdma_write_read_atomic_and_send_with_invalidate_over_the_table() {
    let mut h = [
        host(0x11, 0x22, 100, 900, 64),
        host(0x22, 0x11, 900, 100, 64),
    ];
    let src = region(&h[0], 3000, 0xab);
    let dst = region(&h[1], 3000, 0);
    send(
        &mut h[0],
        1,
        SendOp::Write {
            remote_addr: dst.addr,
            rkey: dst.rkey,
        },
        vec![sge(&src, 0, 3000)],
    );
    run(&mut h);
    assert_eq!(completions(&mut h[0])[0].status, WcStatus::Success);
    assert_eq!(bytes(&h[1], &dst), vec![0xab; 3000]);

    // READ back part of it into a fresh local region.
    let back = region(&h[0], 100, 0);
    send(
        &mut h[0],
        2,
        SendOp::Read {
            remote_addr: dst.addr + 10,
            rkey: dst.rkey,
        },
        vec![sge(&back, 0, 100)],
    );
    run(&mut h);
    assert_eq!(completions(&mut h[0])[0].status, WcStatus::Success);
    assert_eq!(bytes(&h[0], &back), vec![0xab; 100]);

    // FETCH_ADD on an aligned word.
    let word = region(&h[1], 16, 0);
    h[1].mem
        .write_local(word.lkey, word.addr + 8, &41u64.to_ne_bytes())
        .unwrap();
    let orig = region(&h[0], 8, 0);
    send(
        &mut h[0],
        3,
        SendOp::FetchAdd {
            remote_addr: word.addr + 8,
            rkey: word.rkey,
            add: 1,
        },
        vec![sge(&orig, 0, 8)],
    );
    run(&mut h);
    assert_eq!(completions(&mut h[0])[0].status, WcStatus::Success);
    assert_eq!(bytes(&h[0], &orig), 41u64.to_ne_bytes());
    assert_eq!(bytes(&h[1], &word)[8..], 42u64.to_ne_bytes());

    // SEND with Invalidate kills the R_Key of a memory window over `dst` on the receiver, not
    // the window or its region (IBTA vol. 1 §9.4.1.1.1).
    let win = h[1]
        .mem
        .bind_window(dst.lkey, h[1].pz.id(), dst.addr, 64, Access::REMOTE_READ)
        .unwrap();
    let rbuf = region(&h[1], 64, 0);
    h[1].qp
        .post_recv(RecvWr {
            wr_id: 9,
            sgl: dpdk_roce::sgl![sge(&rbuf, 0, 64)],
        })
        .unwrap();
    send(
        &mut h[0],
        4,
        SendOp::SendWithInv { rkey: win.rkey },
        vec![sge(&src, 0, 16)],
    );
    run(&mut h);
    let rc = completions(&mut h[1]);
    assert_eq!(rc[0].status, WcStatus::Success);
    assert_eq!(rc[0].invalidated_rkey, Some(win.rkey));
    let pd = h[1].pz.id();
    let probe = |key| MemRef {
        kind: KeyKind::Remote,
        pd,
        key,
        addr: dst.addr,
        len: 1,
    };
    assert_eq!(
        h[1].mem.check(&probe(win.rkey), Access::REMOTE_READ),
        Err(MemError::InvalidKey)
    );
    assert_eq!(h[1].mem.query(win.lkey).unwrap().rkey, None);
    assert_eq!(
        h[1].mem.check(&probe(dst.rkey), Access::REMOTE_READ),
        Ok(()),
        "the region's own key is untouched"
    );
    assert_eq!(completions(&mut h[0])[0].status, WcStatus::Success);

    // A registered region's R_Key cannot be invalidated: Invalid Request NAK, the send
    // completes in error at the requester and the receive in error at the responder.
    h[1].qp
        .post_recv(RecvWr {
            wr_id: 10,
            sgl: dpdk_roce::sgl![sge(&rbuf, 0, 64)],
        })
        .unwrap();
    send(
        &mut h[0],
        5,
        SendOp::SendWithInv { rkey: dst.rkey },
        vec![sge(&src, 0, 16)],
    );
    run(&mut h);
    let sc = completions(&mut h[0]);
    assert_eq!((sc[0].wr_id, sc[0].status), (5, WcStatus::RemInvReqErr));
    assert_eq!(
        h[1].mem.check(&probe(dst.rkey), Access::REMOTE_READ),
        Ok(()),
        "still valid"
    );
    assert_ne!(
        completions(&mut h[1])
            .iter()
            .find(|c| c.wr_id == 10)
            .map(|c| c.status),
        Some(WcStatus::Success)
    );
}

#[test]
fn write_to_a_deregistered_rkey_is_a_remote_access_error() {
    let mut h = [
        host(0x11, 0x22, 100, 900, 64),
        host(0x22, 0x11, 900, 100, 1),
    ];
    let src = region(&h[0], 64, 0x5a);
    let dst = region(&h[1], 64, 0);
    h[1].mem.deregister(dst.lkey).unwrap();
    // The slot is reused by a new region: the old R_Key must still not reach it.
    let reuse = region(&h[1], 64, 0x11);
    assert_eq!(reuse.lkey & 1, dst.lkey & 1, "same slot (capacity 1)");
    assert_ne!(reuse.rkey, dst.rkey);
    send(
        &mut h[0],
        1,
        SendOp::Write {
            remote_addr: reuse.addr,
            rkey: dst.rkey,
        },
        vec![sge(&src, 0, 64)],
    );
    run(&mut h);
    let c = completions(&mut h[0]);
    assert_eq!(c[0].status, WcStatus::RemAccessErr);
    assert_eq!(bytes(&h[1], &reuse), vec![0x11; 64]);
}
