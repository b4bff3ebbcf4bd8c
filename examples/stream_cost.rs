//! CPU cost of the RoCE stack per message of a one-way RDMA WRITE stream, without any I/O, stage
//! by stage: what `roce-bw --op write -s SIZE -t 128 --cq-mod 100` does on its two sides, minus
//! the PMD. The sender posts while fewer than `DEPTH` messages are outstanding, builds up to a
//! burst of frames, the receiver handles them and builds its ACKs, the sender handles those and
//! polls its completions. Each stage is a function of its own, so callgrind counts each one's
//! instructions (inclusive) per message:
//!
//!     cargo build --release --example stream_cost
//!     valgrind --tool=callgrind --callgrind-out-file=/tmp/stream.cg \
//!         target/release/examples/stream_cost 200000 64
//!     callgrind_annotate --inclusive=yes /tmp/stream.cg | grep 'stream_cost::stage_'
//!
//! (`scripts/stream-cost.sh` runs that and prints instructions per message.) Without
//! valgrind it prints the thread's CPU time per message.

#[path = "common/mod.rs"]
mod common;

use common::{side, thread_cpu_ns, Side, VirtualClock};
use dpdk_roce::mem::Region;
use dpdk_roce::time::Instant;
use dpdk_roce::transport::types::{SendOp, SendWr, Sge, WcStatus};

/// Messages outstanding (roce-bw's `-t` default).
const DEPTH: u64 = 128;
/// One message in this many signaled (roce-bw's `--cq-mod` default).
const CQ_MOD: u64 = 100;
/// Messages posted between two turns (roce-bw's `POST_BUDGET`).
const POST_BUDGET: u64 = 64;
/// Frames per transmit burst (a DPDK burst).
const BURST: usize = 32;

/// Frames of one burst, each in a buffer of its own (as mbufs).
struct Burst {
    frames: Vec<Vec<u8>>,
    len: usize,
}

impl Burst {
    fn new() -> Burst {
        Burst {
            frames: (0..BURST).map(|_| Vec::with_capacity(9216)).collect(),
            len: 0,
        }
    }
}

/// The sender's stream state.
struct Stream {
    posted: u64,
    done: u64,
    total: u64,
}

#[inline(never)]
fn stage_sender_posts(a: &mut Side, s: &mut Stream, peer: &Region, size: usize, now: Instant) {
    let mut budget = POST_BUDGET;
    while budget > 0 && s.posted < s.total && s.posted - s.done < DEPTH {
        let seq = s.posted;
        a.host
            .post_send(
                now,
                a.qpn,
                SendWr {
                    wr_id: seq,
                    op: SendOp::Write {
                        remote_addr: peer.addr,
                        rkey: peer.rkey,
                    },
                    sgl: dpdk_roce::sgl![Sge {
                        addr: a.src.addr,
                        len: size as u32,
                        lkey: a.src.lkey,
                    }],
                    signaled: (seq + 1).is_multiple_of(CQ_MOD) || seq + 1 == s.total,
                    fence: false,
                    solicited: false,
                },
            )
            .expect("post");
        s.posted += 1;
        budget -= 1;
    }
}

/// Builds up to a burst of `side`'s frames.
fn build(side: &mut Side, now: Instant, out: &mut Burst) {
    out.len = 0;
    while out.len < BURST && side.host.has_output() {
        if !side.host.poll_transmit_into(now, &mut out.frames[out.len]) {
            break;
        }
        out.len += 1;
    }
    side.frames += out.len as u64;
}

/// Hands `side` a burst of frames.
fn handle(side: &mut Side, now: Instant, burst: &Burst) {
    for f in &burst.frames[..burst.len] {
        side.host.handle_frame(now, f);
    }
}

// Each stage has a body of its own (`black_box` of its number): the linker must not fold two
// stages with the same code into one function, whose count callgrind could not split.

#[inline(never)]
fn stage_sender_builds(a: &mut Side, now: Instant, out: &mut Burst) {
    std::hint::black_box(1);
    build(a, now, out);
}

#[inline(never)]
fn stage_receiver_handles(b: &mut Side, now: Instant, burst: &Burst) {
    std::hint::black_box(3);
    handle(b, now, burst);
}

#[inline(never)]
fn stage_receiver_builds(b: &mut Side, now: Instant, out: &mut Burst) {
    std::hint::black_box(2);
    build(b, now, out);
}

#[inline(never)]
fn stage_sender_handles(a: &mut Side, now: Instant, burst: &Burst) {
    std::hint::black_box(4);
    handle(a, now, burst);
}

#[inline(never)]
fn stage_sender_completions(a: &mut Side, s: &mut Stream) {
    while let Some(wc) = a.host.poll_completion() {
        assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
        s.done = wc.wr_id + 1;
    }
}

#[inline(never)]
fn stage_timers(a: &mut Side, b: &mut Side, now: Instant) {
    for s in [a, b] {
        if s.host.poll_timeout().is_some_and(|t| t <= now) {
            s.host.handle_timeout(now);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let messages: u64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("messages"));
    let size: usize = args.next().map_or(64, |a| a.parse().expect("size"));
    // Each reading about a burst's time on memif.
    let vclock = VirtualClock::new(1000);
    let mut a = side(1, size, DEPTH as u32 * 2, vclock.now());
    let mut b = side(2, size, DEPTH as u32 * 2, vclock.now());
    let mut buf = Vec::with_capacity(9216);
    common::connect(&mut a, &mut b, &vclock, &mut buf);
    let peer = b.dst;
    let (mut to_b, mut to_a) = (Burst::new(), Burst::new());
    let mut s = Stream {
        posted: 0,
        done: 0,
        total: messages,
    };
    let (fa, fb) = (a.frames, b.frames);
    let cpu0 = thread_cpu_ns();
    let mut turns = 0u64;
    while s.done < s.total {
        let now = vclock.now();
        stage_sender_posts(&mut a, &mut s, &peer, size, now);
        stage_sender_builds(&mut a, now, &mut to_b);
        stage_receiver_handles(&mut b, now, &to_b);
        stage_receiver_builds(&mut b, now, &mut to_a);
        stage_sender_handles(&mut a, now, &to_a);
        stage_sender_completions(&mut a, &mut s);
        stage_timers(&mut a, &mut b, now);
        turns += 1;
        assert!(
            turns < messages * 8 + 1000,
            "the stream stalled at {}",
            s.done
        );
    }
    let ns = (thread_cpu_ns() - cpu0) as f64 / messages as f64;
    println!(
        "RDMA WRITE {size} B stream: {ns:.0} ns of stack CPU per message, both sides; \
         frames per message {:.3} out, {:.3} back; {:.1} messages per turn",
        (a.frames - fa) as f64 / messages as f64,
        (b.frames - fb) as f64 / messages as f64,
        messages as f64 / turns as f64
    );
}
