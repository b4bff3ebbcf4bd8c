//! Cost of one idle poll of a `Host` (what a shard does when no frame arrived: ask for frames to
//! send, the next timer, completions and events) with N QPs, in nanoseconds per poll.
//!
//!     cargo run --release --example host_poll_cost -- 1 64 256 1024

use dpdk_roce::host::{Host, HostConfig, QpOptions};
use dpdk_roce::mem::vec_memory::VecMemory;
use dpdk_roce::net::NetConfig;
use dpdk_roce::time::Instant;
use dpdk_roce::wire::ethernet::EthernetAddress;
use std::hint::black_box;
use std::net::Ipv4Addr;

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("QP counts"))
        .collect();
    for n in if sizes.is_empty() {
        vec![1, 64, 256, 1024]
    } else {
        sizes
    } {
        let mut h = Host::new(
            HostConfig {
                net: NetConfig::new(
                    EthernetAddress([2, 0, 0, 0, 0, 1]),
                    Ipv4Addr::new(192, 0, 2, 1),
                    24,
                ),
                ca_guid: 1,
                seed: 1,
                qpns: dpdk_roce::host::QpnPolicy::Sequential,
                cm: Default::default(),
            },
            VecMemory::new(),
        )
        .unwrap();
        let now = Instant::from_nanos(1_000_000_000);
        for _ in 0..n {
            h.create_qp(now, QpOptions::default()).unwrap();
        }
        let mut buf = Vec::with_capacity(9216);
        let iters = 200_000;
        let t0 = std::time::Instant::now();
        for _ in 0..iters {
            black_box(h.poll_transmit_into(now, &mut buf));
            if h.poll_timeout().is_some_and(|t| t <= now) {
                h.handle_timeout(now);
            }
            black_box(h.poll_completion());
            black_box(h.poll_host_event());
        }
        let ns = t0.elapsed().as_nanos() as f64 / f64::from(iters);
        println!("qps {n:5}  idle poll {ns:9.1} ns");
    }
}
