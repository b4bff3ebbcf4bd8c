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

#[path = "common/mod.rs"]
mod common;

use common::{shuttle, side, thread_cpu_ns, Side, VirtualClock};
use dpdk_roce::mem::Region;
use dpdk_roce::time::Instant;
use dpdk_roce::transport::types::{SendOp, SendWr, Sge};

fn main() {
    let mut args = std::env::args().skip(1);
    let iters: u64 = args
        .next()
        .map_or(200_000, |a| a.parse().expect("iterations"));
    let size: usize = args.next().map_or(8, |a| a.parse().expect("size"));
    let idle_per_iter: u64 = args.next().map_or(4, |a| a.parse().expect("idle spins"));
    // A virtual clock: each reading (one per round trip) is about a memif round trip after
    // the previous one.
    let vclock = VirtualClock::new(1500);
    let clock = || vclock.now();
    let mut a = side(1, size, 512, clock());
    let mut b = side(2, size, 512, clock());
    let mut buf = Vec::with_capacity(9216);
    common::connect(&mut a, &mut b, &vclock, &mut buf);

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
