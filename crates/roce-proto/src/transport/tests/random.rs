//! Seeded randomized runs: both QPs issue a mix of SEND, WRITE, READ and FETCH-ADD over a wire
//! with 5% loss, duplication and reordering. Every message must arrive exactly once, in order,
//! intact, and every WR must complete exactly once, in order, successfully.

use rand::{Rng, SeedableRng};

use super::*;
use crate::transport::types::{WcOpcode, WcStatus};

enum Check {
    /// SEND: the receive `recv_id` on the peer gets `data` in `dst`.
    Send {
        recv_id: u64,
        data: Vec<u8>,
        dst: Region,
    },
    /// WRITE / READ: `dst` on side `at` ends up equal to `data`.
    Copy {
        at: usize,
        data: Vec<u8>,
        dst: Region,
    },
    /// FETCH-ADD of 1: the original value lands in `dst`.
    Faa { dst: Region },
}

fn run_seed(seed: u64, ops_per_side: u64, loss: f64, pmtu: Mtu) {
    let mut p = Pair::with(|_, a| a.pmtu = pmtu, 0xff_ff00, 5000);
    let mtu = pmtu.bytes() as usize;
    p.chaos = Some(Chaos {
        rng: ChaCha8Rng::seed_from_u64(seed),
        loss,
        dup: loss,
        reorder: loss,
    });
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let counters = [p.zeroed(A, 8), p.zeroed(B, 8)];
    let mut checks: [Vec<(u64, Check)>; 2] = [Vec::new(), Vec::new()];
    let mut recv_ids = [0u64; 2];
    for i in 0..ops_per_side {
        for side in [A, B] {
            let peer = 1 - side;
            let len = match rng.gen_range(0..5) {
                0 => 0,
                1 => rng.gen_range(1..mtu),
                2 => mtu * rng.gen_range(1..3),
                _ => rng.gen_range(1..5 * mtu),
            };
            let seed_byte: u8 = rng.gen();
            match rng.gen_range(0..4) {
                0 => {
                    let src = p.region(side, len.max(1), seed_byte);
                    let dst = p.zeroed(peer, len.max(1));
                    let rid = recv_ids[peer];
                    recv_ids[peer] += 1;
                    p.post_recv(peer, rid, vec![sge(&dst, 0, len as u32)]);
                    p.post_send(side, wr(i, SendOp::Send, vec![sge(&src, 0, len as u32)]));
                    let data = p.bytes(side, &src)[..len].to_vec();
                    checks[side].push((
                        i,
                        Check::Send {
                            recv_id: rid,
                            data,
                            dst,
                        },
                    ));
                }
                1 => {
                    let src = p.region(side, len.max(1), seed_byte);
                    let dst = p.zeroed(peer, len.max(1));
                    p.post_send(
                        side,
                        wr(
                            i,
                            SendOp::Write {
                                remote_addr: dst.addr,
                                rkey: dst.rkey,
                            },
                            vec![sge(&src, 0, len as u32)],
                        ),
                    );
                    let data = p.bytes(side, &src)[..len].to_vec();
                    checks[side].push((
                        i,
                        Check::Copy {
                            at: peer,
                            data,
                            dst,
                        },
                    ));
                }
                2 => {
                    let remote = p.region(peer, len.max(1), seed_byte);
                    let dst = p.zeroed(side, len.max(1));
                    p.post_send(
                        side,
                        wr(
                            i,
                            SendOp::Read {
                                remote_addr: remote.addr,
                                rkey: remote.rkey,
                            },
                            vec![sge(&dst, 0, len as u32)],
                        ),
                    );
                    let data = p.bytes(peer, &remote)[..len].to_vec();
                    checks[side].push((
                        i,
                        Check::Copy {
                            at: side,
                            data,
                            dst,
                        },
                    ));
                }
                _ => {
                    let dst = p.zeroed(side, 8);
                    let c = counters[peer];
                    p.post_send(
                        side,
                        wr(
                            i,
                            SendOp::FetchAdd {
                                remote_addr: c.addr,
                                rkey: c.rkey,
                                add: 1,
                            },
                            vec![sge(&dst, 0, 8)],
                        ),
                    );
                    checks[side].push((i, Check::Faa { dst }));
                }
            }
        }
    }
    p.run();
    for side in [A, B] {
        let peer = 1 - side;
        assert_eq!(p.s[side].qp.state(), QpState::Rts, "seed {seed}");
        let all = p.completions(side);
        assert!(
            all.iter().all(|c| c.status == WcStatus::Success),
            "seed {seed}: {all:?}"
        );
        let sends: Vec<u64> = all
            .iter()
            .filter(|c| c.opcode != WcOpcode::Recv)
            .map(|c| c.wr_id)
            .collect();
        assert_eq!(
            sends,
            (0..ops_per_side).collect::<Vec<_>>(),
            "seed {seed}: every WR once, in order"
        );
        let recvs: Vec<&WorkCompletion> =
            all.iter().filter(|c| c.opcode == WcOpcode::Recv).collect();
        assert_eq!(
            recvs.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
            (0..recv_ids[side]).collect::<Vec<_>>(),
            "seed {seed}: every message received once, in order"
        );
        let mut faa_seen = Vec::new();
        for (_, check) in &checks[side] {
            match check {
                Check::Send { recv_id, data, dst } => {
                    let got = p.bytes(peer, dst);
                    assert_eq!(&got[..data.len()], &data[..], "seed {seed}");
                    let _ = recv_id;
                }
                Check::Copy { at, data, dst } => {
                    assert_eq!(&p.bytes(*at, dst)[..data.len()], &data[..], "seed {seed}");
                }
                Check::Faa { dst } => {
                    faa_seen.push(u64::from_ne_bytes(
                        p.bytes(side, dst)[..8].try_into().unwrap(),
                    ));
                }
            }
        }
        // Each FETCH-ADD executed exactly once: the originals are 0..n and the counter is n.
        let n = faa_seen.len() as u64;
        faa_seen.sort_unstable();
        assert_eq!(faa_seen, (0..n).collect::<Vec<_>>(), "seed {seed}");
        let c = p.bytes(peer, &counters[peer]);
        assert_eq!(
            u64::from_ne_bytes(c[..8].try_into().unwrap()),
            n,
            "seed {seed}"
        );
        // Byte lengths of receives match what was sent.
        for (_, check) in &checks[peer] {
            if let Check::Send { recv_id, data, .. } = check {
                let c = recvs.iter().find(|c| c.wr_id == *recv_id).unwrap();
                assert_eq!(c.byte_len as usize, data.len(), "seed {seed}");
            }
        }
    }
    let st = *p.s[A].qp.stats();
    assert!(st.retransmits > 0, "seed {seed}: the wire was lossy");
}

/// Seeds to run: `ROCE_RANDOM_SEEDS` (default 12).
fn seeds() -> u64 {
    std::env::var("ROCE_RANDOM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12)
}

#[test]
fn lossy_duplicating_reordering_wire_delivers_exactly_once() {
    for seed in 1..=seeds() {
        run_seed(seed, 120, 0.05, Mtu::Mtu1024);
    }
}

#[test]
fn heavy_loss_small_mtu_across_psn_wrap() {
    for seed in 1..=seeds() / 2 {
        run_seed(1000 + seed, 80, 0.15, Mtu::Mtu256);
    }
}
