//! SEND with Invalidate between two simulated hosts, checked on the packet trace (IBTA vol. 1
//! §9.4.1.1.1): a multi-packet message goes out as SEND First / Middle / Last with Invalidate
//! (0x16, IETH on the last packet only), a one-packet message as SEND Only with Invalidate
//! (0x17); the responder invalidates the R_Key and names it in the receive completion; an
//! R_Key it cannot invalidate is answered with an Invalid Request NAK.

use core::time::Duration;
use dpdk_roce::mem::access::Access;
use dpdk_roce::transport::types::{
    RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use dpdk_roce::wire::aeth::{NakCode, Syndrome};
use dpdk_roce::wire::frame::RoceFrame;
use dpdk_roce::wire::opcode::Opcode;
use dpdk_roce::wire::roce::RoceHeaders;
use pcap_file::pcap::PcapReader;
use roce_sim::link::LinkConfig;
use roce_sim::pair::{Conn, ConnSpec, Pair};

/// Removes the capture file also when an assertion fails.
struct TempFile(std::path::PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn frames(path: &std::path::Path) -> Vec<Vec<u8>> {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.unwrap().data.into_owned());
    }
    out
}

fn send(pair: &mut Pair, conn: Conn, wr_id: u64, op: SendOp, sge: Sge) {
    let now = pair.now();
    pair.a
        .post_send(
            now,
            conn.qpn_a,
            SendWr {
                wr_id,
                op,
                sgl: dpdk_roce::sgl![sge],
                signaled: true,
                fence: false,
                solicited: false,
            },
        )
        .unwrap();
}

fn wait(pair: &mut Pair, a: usize, b: usize) -> (Vec<WorkCompletion>, Vec<WorkCompletion>) {
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    pair.run_until(Duration::from_secs(5), |p| {
        wa.extend(std::iter::from_fn(|| p.a.poll_completion()));
        wb.extend(std::iter::from_fn(|| p.b.poll_completion()));
        wa.len() >= a && wb.len() >= b
    })
    .unwrap();
    (wa, wb)
}

#[test]
fn send_with_invalidate_on_the_trace_invalidates_and_reports_the_r_key() {
    let path = std::env::temp_dir().join(format!("send-inv-{}.pcap", std::process::id()));
    let _cleanup = TempFile(path.clone());
    let mut pair = Pair::new(LinkConfig::clean());
    pair.capture_to(&path).unwrap();
    let conn = pair.connect(&ConnSpec::default()).unwrap();
    let src = pair.a.register(1, 3000, Access::LOCAL_WRITE);
    let rbuf = pair.b.register(1, 4096, Access::LOCAL_WRITE);
    let target = pair.b.register(1, 64, Access::REMOTE_WRITE);
    let other = pair.b.register(1, 64, Access::REMOTE_WRITE);
    let pattern: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    pair.a
        .mem
        .bytes_mut(src.lkey)
        .unwrap()
        .copy_from_slice(&pattern);
    for id in [10, 11, 12] {
        pair.b
            .post_recv(
                conn.qpn_b,
                RecvWr {
                    wr_id: id,
                    sgl: dpdk_roce::sgl![Sge {
                        addr: rbuf.addr,
                        len: 4096,
                        lkey: rbuf.lkey,
                    }],
                },
            )
            .unwrap();
    }
    let sge = |len| Sge {
        addr: src.addr,
        len,
        lkey: src.lkey,
    };
    // 3000 bytes at PMTU 1024: three packets.
    send(
        &mut pair,
        conn,
        1,
        SendOp::SendWithInv { rkey: target.rkey },
        sge(3000),
    );
    send(
        &mut pair,
        conn,
        2,
        SendOp::SendWithInv { rkey: other.rkey },
        sge(10),
    );
    let (wa, wb) = wait(&mut pair, 2, 2);
    assert_eq!(
        wa.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(
        wb.iter()
            .map(|c| (c.wr_id, c.status, c.opcode, c.byte_len, c.invalidated_rkey))
            .collect::<Vec<_>>(),
        vec![
            (
                10,
                WcStatus::Success,
                WcOpcode::Recv,
                3000,
                Some(target.rkey)
            ),
            (11, WcStatus::Success, WcOpcode::Recv, 10, Some(other.rkey)),
        ]
    );
    assert_eq!(&pair.b.mem.bytes(rbuf.lkey).unwrap()[..3000], &pattern[..]);

    // The invalidated key no longer reaches memory: an RDMA write with it is refused.
    send(
        &mut pair,
        conn,
        3,
        SendOp::Write {
            remote_addr: target.addr,
            rkey: target.rkey,
        },
        sge(8),
    );
    let (wa, _) = wait(&mut pair, 1, 0);
    assert_eq!((wa[0].wr_id, wa[0].status), (3, WcStatus::RemAccessErr));
    assert_eq!(pair.b.mem.bytes(target.lkey).unwrap(), &[0u8; 64]);
    pair.finish_capture().unwrap();

    // The trace: A's requests and B's acknowledgements (only A sends requests here; the QP
    // numbers of the two sides may be equal, so the opcode tells the direction).
    let mut from_a: Vec<(Opcode, Option<u32>, usize)> = Vec::new();
    let mut from_b: Vec<RoceHeaders> = Vec::new();
    for f in frames(&path) {
        let Ok(rf) = RoceFrame::parse(&f) else {
            continue;
        };
        if rf.headers.bth.dest_qp == 1 {
            continue; // the CM's MADs on QP1
        }
        if rf.headers.bth.opcode == Opcode::RC_ACK {
            from_b.push(rf.headers);
        } else {
            from_a.push((rf.headers.bth.opcode, rf.headers.ieth, rf.payload.len()));
        }
    }
    assert_eq!(
        from_a,
        vec![
            (Opcode::RC_SEND_FIRST, None, 1024),
            (Opcode::RC_SEND_MIDDLE, None, 1024),
            (Opcode::RC_SEND_LAST_INV, Some(target.rkey), 952),
            (Opcode::RC_SEND_ONLY_INV, Some(other.rkey), 10),
            (Opcode::RC_WRITE_ONLY, None, 8),
        ]
    );
    let last = from_b.last().unwrap();
    assert_eq!(last.bth.opcode, Opcode::RC_ACK);
    assert_eq!(
        last.aeth.unwrap().syndrome,
        Syndrome::Nak(NakCode::RemoteAccessError)
    );
}

#[test]
fn send_with_invalidate_of_an_unknown_r_key_is_an_invalid_request_nak() {
    let path = std::env::temp_dir().join(format!("send-inv-bad-{}.pcap", std::process::id()));
    let _cleanup = TempFile(path.clone());
    let mut pair = Pair::new(LinkConfig::clean());
    pair.capture_to(&path).unwrap();
    let conn = pair.connect(&ConnSpec::default()).unwrap();
    let src = pair.a.register(1, 16, Access::LOCAL_WRITE);
    let rbuf = pair.b.register(1, 64, Access::LOCAL_WRITE);
    // A key of a region of another protection domain on B.
    let foreign = pair.b.register(2, 64, Access::REMOTE_WRITE);
    pair.b
        .post_recv(
            conn.qpn_b,
            RecvWr {
                wr_id: 20,
                sgl: dpdk_roce::sgl![Sge {
                    addr: rbuf.addr,
                    len: 64,
                    lkey: rbuf.lkey,
                }],
            },
        )
        .unwrap();
    let sge = Sge {
        addr: src.addr,
        len: 16,
        lkey: src.lkey,
    };
    send(
        &mut pair,
        conn,
        4,
        SendOp::SendWithInv { rkey: foreign.rkey },
        sge,
    );
    let (wa, wb) = wait(&mut pair, 1, 1);
    assert_eq!((wa[0].wr_id, wa[0].status), (4, WcStatus::RemInvReqErr));
    assert_eq!(wb[0].wr_id, 20);
    assert_ne!(wb[0].status, WcStatus::Success, "the receive fails too");
    assert_eq!(wb[0].invalidated_rkey, None);
    pair.finish_capture().unwrap();
    let naks: Vec<Syndrome> = frames(&path)
        .iter()
        .filter_map(|f| RoceFrame::parse(f).ok())
        .filter(|rf| rf.headers.bth.opcode == Opcode::RC_ACK)
        .filter_map(|rf| rf.headers.aeth.map(|a| a.syndrome))
        .filter(|s| matches!(s, Syndrome::Nak(_)))
        .collect();
    assert_eq!(naks, vec![Syndrome::Nak(NakCode::InvalidRequest)]);
}
