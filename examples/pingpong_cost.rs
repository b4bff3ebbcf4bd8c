//! CPU cost of the RoCE stack per RDMA WRITE ping-pong, without any I/O: two `Host`s on checked
//! region tables (`Host<Arc<MrTable>>`, as in roce-lat) in one thread, frames handed from one to
//! the other as byte slices. Each round trip is what both processes of `roce-lat --op write` do
//! on their critical path, minus the PMD: post the WRITE, build its frame (and the held ACK),
//! parse and check it on the other side, place the payload, see the byte, answer. The figure is
//! the stack's share of a half round trip; the rest of the measured latency is the port's I/O.
//!
//!     cargo run --release --example pingpong_cost -- [iterations] [size] [idle-spins-per-iteration]
//!
//! Under `valgrind --tool=callgrind` (idle spins 0) the instruction count per round trip is a
//! deterministic gauge for the VM's noisy spells: run it at N and 2N iterations and divide the
//! difference by N.

use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::engine::host::{Host, HostConfig, QpOptions};
use dpdk_roce::mem::{MrTable, Region};
use dpdk_roce::net::NetConfig;
use dpdk_roce::time::Instant;
use dpdk_roce::transport::memory::Access;
use dpdk_roce::transport::types::{SendOp, SendWr, Sge};
use dpdk_roce::wire::ethernet::EthernetAddress;
use dpdk_roce::wire::psn::Psn;
use std::net::Ipv4Addr;
use std::sync::Arc;

type H = Host<Arc<MrTable>>;

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`, first field): the
/// figure does not grow while other processes have the CPU, so it holds on a loaded machine.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat")
}

const PORT: u16 = 18515;

struct Side {
    host: H,
    qpn: u32,
    src: Region,
    dst: Region,
    frames: u64,
}

fn host(n: u8) -> H {
    let mac = EthernetAddress([2, 0, 0, 0, 0, n]);
    let net = NetConfig::new(mac, Ipv4Addr::new(10, 0, 0, n), 24);
    let mut h = Host::new(
        HostConfig {
            net,
            ca_guid: u64::from(n),
            seed: u64::from(n),
            // Deterministic: instruction counts compare across builds.
            qpns: dpdk_roce::engine::host::QpnPolicy::Sequential,
        },
        Arc::new(MrTable::new(16)),
    )
    .expect("host");
    let peer = 3 - n;
    h.add_neighbour(
        Ipv4Addr::new(10, 0, 0, peer),
        EthernetAddress([2, 0, 0, 0, 0, peer]),
    )
    .expect("neighbour");
    h
}

fn side(n: u8, size: usize, now: Instant) -> Side {
    let mut host = host(n);
    let table = host.mr_table().clone();
    let pz = table.create_pz();
    let reg = |access| {
        table
            .register_alloc(pz, size, 4096, access)
            .expect("register")
    };
    let src = reg(Access::LOCAL_WRITE);
    let dst = reg(Access::LOCAL_WRITE | Access::REMOTE_WRITE);
    let qpn = host
        .create_qp(
            now,
            QpOptions {
                pd: pz.id(),
                sq_depth: 512,
                rq_depth: 512,
                ..QpOptions::default()
            },
        )
        .expect("qp");
    Side {
        host,
        qpn,
        src,
        dst,
        frames: 0,
    }
}

/// Hands every frame `from` has to send to `to`.
fn shuttle(from: &mut Side, to: &mut Side, now: Instant, buf: &mut Vec<u8>) {
    // As `Shard::transmit`: no transmit poll once the host says it has nothing.
    while from.host.has_output() && from.host.poll_transmit_into(now, buf) {
        from.frames += 1;
        to.host.handle_frame(now, buf);
    }
    if from.host.poll_timeout().is_some_and(|t| t <= now) {
        from.host.handle_timeout(now);
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let iters: u64 = args
        .next()
        .map_or(200_000, |a| a.parse().expect("iterations"));
    let size: usize = args.next().map_or(8, |a| a.parse().expect("size"));
    let idle_per_iter: u64 = args.next().map_or(4, |a| a.parse().expect("idle spins"));
    // A virtual clock: each reading (one per round trip) is `STEP_NS` after the previous one,
    // about a memif round trip, so timers fire as in a real run however
    // slowly this runs (e.g. under callgrind).
    const STEP_NS: u64 = 1500;
    let virtual_ns = std::cell::Cell::new(1_000_000_000u64);
    let clock = || {
        virtual_ns.set(virtual_ns.get() + STEP_NS);
        Instant::from_nanos(virtual_ns.get())
    };
    let mut a = side(1, size, clock());
    let mut b = side(2, size, clock());
    let mut buf = Vec::with_capacity(9216);

    // Connection through the CM, frames shuttled until both sides are established.
    b.host.listen(PORT).expect("listen");
    let mut cp = ConnectParams::new(Ipv4Addr::new(10, 0, 0, 2), PORT, a.qpn, Psn::new(0x4000));
    cp.access = Access::REMOTE_WRITE;
    a.host.connect(clock(), cp).expect("connect");
    let (mut up_a, mut up_b) = (false, false);
    for _ in 0..10_000 {
        let now = clock();
        shuttle(&mut a, &mut b, now, &mut buf);
        shuttle(&mut b, &mut a, now, &mut buf);
        while let Some(ev) = b.host.poll_event() {
            match ev {
                CmEvent::ConnectRequest { id, .. } => {
                    let mut ap = AcceptParams::new(b.qpn, Psn::new(0x4000));
                    ap.access = Access::REMOTE_WRITE;
                    b.host.accept(now, id, ap).expect("accept");
                }
                CmEvent::Established { .. } => up_b = true,
                _ => {}
            }
        }
        while let Some(ev) = a.host.poll_event() {
            if let CmEvent::Established { .. } = ev {
                up_a = true;
            }
        }
        if up_a && up_b {
            break;
        }
    }
    assert!(up_a && up_b, "the connection did not come up");

    let write = |s: &mut Side, peer_dst: &Region, v: u8, now: Instant| {
        let t = s.host.mr_table().clone();
        t.write_local(s.src.lkey, s.src.addr + size as u64 - 1, &[v])
            .expect("write src");
        s.host
            .post_send(
                now,
                s.qpn,
                SendWr {
                    wr_id: u64::from(v),
                    op: SendOp::Write {
                        remote_addr: peer_dst.addr,
                        rkey: peer_dst.rkey,
                    },
                    sgl: dpdk_roce::sgl![Sge {
                        addr: s.src.addr,
                        len: size as u32,
                        lkey: s.src.lkey,
                    }],
                    signaled: false,
                    fence: false,
                    solicited: false,
                },
            )
            .expect("post");
    };
    let seen = |s: &Side, v: u8| {
        let mut b = [0u8];
        s.host
            .mr_table()
            .read_local(s.dst.lkey, s.dst.addr + size as u64 - 1, &mut b)
            .expect("read dst");
        b[0] == v
    };

    let (b_dst, a_dst) = (b.dst, a.dst);
    let (fa, fb) = (a.frames, b.frames);
    let start = std::time::Instant::now();
    let cpu0 = thread_cpu_ns();
    for i in 0..iters {
        let v = (i % 250) as u8 + 1;
        let now = clock();
        write(&mut a, &b_dst, v, now);
        shuttle(&mut a, &mut b, now, &mut buf);
        assert!(seen(&b, v), "iteration {i}: the WRITE did not land");
        write(&mut b, &a_dst, v, now);
        shuttle(&mut b, &mut a, now, &mut buf);
        assert!(seen(&a, v), "iteration {i}: the answer did not land");
        while a.host.poll_completion().is_some() {}
        while b.host.poll_completion().is_some() {}
    }
    let wall = start.elapsed().as_nanos() as f64 / iters as f64;
    let ns = (thread_cpu_ns() - cpu0) as f64 / iters as f64;
    println!(
        "RDMA WRITE {size} B ping-pong: {:.0} ns of stack CPU per round trip \
         ({:.0} ns wall), {:.0} ns per half round trip; frames per round trip {:.2}",
        ns,
        wall,
        ns / 2.0,
        ((a.frames - fa) + (b.frames - fb)) as f64 / iters as f64
    );

    // One spin of a waiting consumer with nothing arriving: the host's part of each turn of
    // roce-lat's wait loop (timers, transmit, completions, the polled byte), without the PMD's
    // rx_burst. It bounds how soon a landed frame is noticed.
    let spins = iters * idle_per_iter;
    let cpu0 = thread_cpu_ns();
    let mut polled = 0u64;
    for _ in 0..spins {
        let now = clock();
        if a.host.poll_timeout().is_some_and(|t| t <= now) {
            a.host.handle_timeout(now);
        }
        while a.host.has_output() && a.host.poll_transmit_into(now, &mut buf) {
            polled += 1;
        }
        while a.host.poll_completion().is_some() {}
        polled += u64::from(seen(&a, 0));
    }
    let ns = (thread_cpu_ns() - cpu0) as f64 / spins.max(1) as f64;
    println!("idle wait loop: {ns:.1} ns of stack CPU per spin ({polled} frames or hits)");
}
