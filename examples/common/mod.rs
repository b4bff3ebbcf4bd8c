//! What the cost examples share: two `Host`s on checked region tables (`Host<Arc<MrTable>>`, as
//! in the bench programs) in one thread, a virtual clock, the connection through the CM, and
//! frames handed from one host to the other as byte slices. Included with
//! `#[path = "common/mod.rs"] mod common;`.

#![allow(dead_code)]

use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::host::{Host, HostConfig, QpOptions, QpnPolicy};
use dpdk_roce::mem::access::Access;
use dpdk_roce::mem::{MrTable, Region};
use dpdk_roce::net::NetConfig;
use dpdk_roce::time::Instant;
use dpdk_roce::wire::ethernet::EthernetAddress;
use dpdk_roce::wire::psn::Psn;
use std::cell::Cell;
use std::net::Ipv4Addr;
use std::sync::Arc;

pub type H = Host<Arc<MrTable>>;

/// Nanoseconds this thread has run on a CPU (`/proc/thread-self/schedstat`, first field): the
/// figure does not grow while other processes have the CPU, so it holds on a loaded machine.
pub fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat")
}

const PORT: u16 = 18515;

/// A virtual clock: each reading is `step_ns` after the previous one, so timers fire as in a
/// real run however slowly the program runs (e.g. under callgrind).
pub struct VirtualClock {
    ns: Cell<u64>,
    step_ns: u64,
}

impl VirtualClock {
    pub fn new(step_ns: u64) -> VirtualClock {
        VirtualClock {
            ns: Cell::new(1_000_000_000),
            step_ns,
        }
    }

    pub fn now(&self) -> Instant {
        self.ns.set(self.ns.get() + self.step_ns);
        Instant::from_nanos(self.ns.get())
    }
}

/// One host with one QP and a source and a destination region of `size` bytes.
pub struct Side {
    pub host: H,
    pub qpn: u32,
    pub src: Region,
    pub dst: Region,
    /// Frames this side sent.
    pub frames: u64,
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
            qpns: QpnPolicy::Sequential,
            cm: Default::default(),
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

/// Host `n` (1 or 2) with its QP (queues of `depth`) and regions.
pub fn side(n: u8, size: usize, depth: u32, now: Instant) -> Side {
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
                sq_depth: depth,
                rq_depth: depth,
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

/// Hands every frame `from` has to send to `to` (as `Shard::transmit`: no transmit poll once
/// the host says it has nothing), then fires `from`'s due timers.
pub fn shuttle(from: &mut Side, to: &mut Side, now: Instant, buf: &mut Vec<u8>) {
    while from.host.has_output() && from.host.poll_transmit_into(now, buf) {
        from.frames += 1;
        to.host.handle_frame(now, buf);
    }
    if from.host.poll_timeout().is_some_and(|t| t <= now) {
        from.host.handle_timeout(now);
    }
}

/// Connects `a`'s QP to `b`'s through the CM (RDMA WRITE access both ways).
pub fn connect(a: &mut Side, b: &mut Side, clock: &VirtualClock, buf: &mut Vec<u8>) {
    b.host.listen(PORT).expect("listen");
    let mut cp = ConnectParams::new(Ipv4Addr::new(10, 0, 0, 2), PORT, a.qpn, Psn::new(0x4000));
    cp.access = Access::REMOTE_WRITE;
    a.host.connect(clock.now(), cp).expect("connect");
    let (mut up_a, mut up_b) = (false, false);
    for _ in 0..10_000 {
        let now = clock.now();
        shuttle(a, b, now, buf);
        shuttle(b, a, now, buf);
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
            return;
        }
    }
    panic!("the connection did not come up");
}
