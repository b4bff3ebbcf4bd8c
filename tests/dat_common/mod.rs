//! Shared harness of the DAT API tests: two IAs (two shards each, inline progress) over an
//! in-memory cable, one thread driving both.
#![allow(dead_code)]

use dpdk_roce::config::Progress;
use dpdk_roce::dat::{
    ConnectionEventKind, DatError, DatEvent, DtoEvent, Ep, EpState, Evd, EvdFlags, Ia, IaConfig,
    Psp, Pz,
};
use dpdk_roce::engine::channel_io::ChannelIo;
use dpdk_roce::engine::runtime::EngineConfig;
use dpdk_roce::mem::access::Access;
use dpdk_roce::wire::ethernet::EthernetAddress;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 34, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 34, 0, 2);
pub const QUAL: u16 = 45248;
pub const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);
/// Longest any event may take (a hang guard, not a timing assertion).
pub const GUARD: Duration = Duration::from_secs(30);

pub fn ias() -> (Ia, Ia) {
    ias_capturing(None)
}

/// `ias`, with A capturing every frame its shards send and receive (one pcap per shard,
/// `dpdk_roce::engine::runtime::capture_path`).
pub fn ias_capturing(a_capture: Option<std::path::PathBuf>) -> (Ia, Ia) {
    let (io_a, io_b) = ChannelIo::pair(4096);
    let open = |mac: u8, ip, io: ChannelIo, capture| {
        Ia::open_with(
            IaConfig {
                mac: EthernetAddress([2, 0, 0, 0, 1, mac]),
                address: dpdk_roce::config::PortAddresses::v4(ip, 24)
                    .expect("a host address on its prefix"),
                routes: Default::default(),
                dscp: 0,
                cm: Default::default(),
                congestion: Default::default(),
                mtu: 1500,
                shards: 2,
                engine: EngineConfig {
                    progress: Progress::Inline,
                    capture,
                    ..EngineConfig::default()
                },
            },
            vec![Box::new(io)],
        )
        .expect("open")
    };
    (
        open(0xa, IP_A, io_a, a_capture),
        open(0xb, IP_B, io_b, None),
    )
}

/// Waits on `evd` while also driving the other IA.
pub fn wait(evd: &Evd, other: &Ia) -> DatEvent {
    let t0 = Instant::now();
    loop {
        other.progress();
        match evd.wait(Some(Duration::from_micros(200)), 1) {
            Ok(ev) => return ev,
            Err(DatError::TimeoutExpired) => {}
            Err(e) => panic!("{e}"),
        }
        assert!(t0.elapsed() < GUARD, "nothing arrived");
    }
}

/// Drives both IAs for a while and returns what `evd` got (possibly nothing).
pub fn drain(evd: &Evd, a: &Ia, b: &Ia, rounds: usize) -> Vec<DatEvent> {
    let mut out = Vec::new();
    for _ in 0..rounds {
        a.progress();
        b.progress();
        while let Ok(ev) = evd.dequeue() {
            out.push(ev);
        }
    }
    out
}

pub fn dto(evd: &Evd, other: &Ia) -> DtoEvent {
    match wait(evd, other) {
        DatEvent::Dto(d) => d,
        other => panic!("not a DTO: {other:?}"),
    }
}

pub fn conn(evd: &Evd, other: &Ia) -> ConnectionEventKind {
    match wait(evd, other) {
        DatEvent::Connection { kind, .. } => kind,
        other => panic!("not a connection event: {other:?}"),
    }
}

pub struct Side {
    pub ia: Ia,
    pub pz: Pz,
    pub dto: Evd,
    pub conn: Evd,
    pub cr: Evd,
}

pub fn side(ia: Ia) -> Side {
    let pz = Pz::create(&ia).unwrap();
    let dto = Evd::create(&ia, 256, EvdFlags::DTO).unwrap();
    let conn = Evd::create(&ia, 64, EvdFlags::CONNECTION).unwrap();
    let cr = Evd::create(&ia, 64, EvdFlags::CR).unwrap();
    Side {
        ia,
        pz,
        dto,
        conn,
        cr,
    }
}

/// Two sides with B listening on QUAL.
pub fn pair() -> (Side, Side, Psp) {
    let (a, b) = ias();
    let (a, b) = (side(a), side(b));
    let psp = Psp::create(&b.ia, QUAL, &b.cr).unwrap();
    (a, b, psp)
}

pub fn ep(s: &Side) -> Ep {
    Ep::create(
        &s.ia,
        &s.pz,
        Some(&s.dto),
        Some(&s.dto),
        Some(&s.conn),
        None,
        None,
    )
    .unwrap()
}

/// Connects `ea` (on A) to a new accept on `eb` (on B).
pub fn connect(a: &Side, b: &Side, ea: &Ep, eb: &Ep) {
    ea.connect(IP_B, QUAL, b"hello").unwrap();
    let DatEvent::ConnectionRequest(cr) = wait(&b.cr, &a.ia) else {
        panic!("no CR");
    };
    cr.accept(eb, b"welcome").unwrap();
    assert_eq!(eb.state(), EpState::CompletionPending);
    assert_eq!(conn(&a.conn, &b.ia), ConnectionEventKind::Established);
    assert_eq!(conn(&b.conn, &a.ia), ConnectionEventKind::Established);
    assert_eq!(ea.state(), EpState::Connected);
    assert_eq!(eb.state(), EpState::Connected);
}
