//! Loopback on a one-shard IA, in memory: two EPs of the IA connect through its own address
//! and a multi-packet RDMA WRITE (64 KiB, 64 packets at the 1024-byte path MTU) between them
//! completes with every byte in place. The frames a shard sends to its own MAC wait in the
//! port's frame buffers for the next receive burst; a one-shard port once had a single
//! buffer, so every packet of a message but the first was dropped, again at each
//! retransmission, and the write never completed.

use dpdk_roce::config::Progress;
use dpdk_roce::dat::{
    ConnectionEventKind, DatEvent, Ep, Evd, EvdFlags, Ia, IaConfig, Lmr, Psp, Pz,
};
use dpdk_roce::engine::channel_io::ChannelIo;
use dpdk_roce::engine::runtime::EngineConfig;
use dpdk_roce::mem::access::Access;
use dpdk_roce::transport::types::{WcOpcode, WcStatus};
use dpdk_roce::wire::ethernet::EthernetAddress;
use std::net::Ipv4Addr;
use std::time::Duration;

const LEN: u32 = 64 * 1024;
const T: Option<Duration> = Some(Duration::from_secs(10));

#[test]
fn a_64_kib_rdma_write_between_two_eps_of_a_one_shard_ia_completes_over_loopback() {
    // Nothing reads the cable's other end: every frame the test needs is looped back.
    let (io, _cable) = ChannelIo::pair(4096);
    let ip = Ipv4Addr::new(10, 35, 0, 1);
    let ia = Ia::open_with(
        IaConfig {
            mac: EthernetAddress([2, 0, 0, 0, 2, 1]),
            address: dpdk_roce::config::PortAddresses::v4(ip, 24)
                .expect("a host address on its prefix"),
            routes: Default::default(),
            dscp: 0,
            cm: Default::default(),
            congestion: Default::default(),
            mtu: 1500,
            shards: 1,
            engine: EngineConfig {
                progress: Progress::Inline,
                ..EngineConfig::default()
            },
        },
        vec![Box::new(io)],
    )
    .expect("open");
    let pz = Pz::create(&ia).unwrap();
    let source = Lmr::create(&pz, LEN as usize, Access::LOCAL_READ).unwrap();
    let target = Lmr::create(&pz, LEN as usize, Access::REMOTE_WRITE).unwrap();
    let data: Vec<u8> = (0..LEN).map(|i| (i % 251) as u8).collect();
    source.write(0, &data).unwrap();
    let dto = Evd::create(&ia, 16, EvdFlags::DTO).unwrap();
    let conn = Evd::create(&ia, 16, EvdFlags::CONNECTION).unwrap();
    let cr_evd = Evd::create(&ia, 4, EvdFlags::CR).unwrap();
    let _psp = Psp::create(&ia, 7400u16, &cr_evd).unwrap();
    let new_ep = || Ep::create(&ia, &pz, Some(&dto), Some(&dto), Some(&conn), None, None);
    let (client, server) = (new_ep().unwrap(), new_ep().unwrap());

    client.connect(ip, 7400u16, b"").unwrap();
    let DatEvent::ConnectionRequest(cr) = cr_evd.wait(T, 1).expect("the request") else {
        panic!("not a connection request");
    };
    cr.accept(&server, b"").unwrap();
    for _ in 0..2 {
        match conn.wait(T, 1).expect("Established") {
            DatEvent::Connection {
                kind: ConnectionEventKind::Established,
                ..
            } => {}
            other => panic!("not Established: {other:?}"),
        }
    }
    client
        .post_rdma_write(&[source.triplet(0, LEN)], &target.rmr_triplet(0, LEN), 7)
        .unwrap();
    match dto.wait(T, 1).expect("the write's completion") {
        DatEvent::Dto(d) => assert_eq!(
            (d.cookie, d.status, d.opcode),
            (7, WcStatus::Success, WcOpcode::RdmaWrite)
        ),
        other => panic!("not a DTO: {other:?}"),
    }
    assert!(
        target.read(0, LEN as usize).unwrap() == data,
        "target bytes"
    );
}
