//! roce-dat-pair: the DAT-shaped Rust API over two real DPDK ports of one process
//! (net_af_packet on the two ends of a veth pair): two IAs with two shards each in `core`
//! progress (pinned poll threads), a PSP, CR accept with private data, then SEND/RECV,
//! RDMA WRITE with immediate, RDMA READ and fetch-add on EPs of both shards, every byte
//! checked, disconnect. Used by `tests/dpdk_dat.rs`.
//!
//! ```text
//! roce-dat-pair IFACE_A IFACE_B
//! ```

use dpdk_roce::config::Progress;
use dpdk_roce::dat::{
    ConnectionEventKind, DatEvent, Ep, EpState, Evd, EvdFlags, Ia, IaConfig, Lmr, Psp, Pz,
};
use dpdk_roce::dpdk::{DpdkFrameIo, Eal, EalArgs, Port, PortConfig};
use dpdk_roce::engine::runtime::EngineConfig;
use dpdk_roce::mem::access::Access;
use dpdk_roce::transport::types::{WcOpcode, WcStatus};
use dpdk_roce::wire::ethernet::EthernetAddress;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = <Args as clap::Parser>::parse();
    let prefix = format!("roce-dat-pair-{}", std::process::id());
    let r = run(&args, &prefix);
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("ERROR {e}");
            ExitCode::FAILURE
        }
    }
}

const T: Option<Duration> = Some(Duration::from_secs(30));
const RW: Access = Access::LOCAL_WRITE
    .union(Access::REMOTE_READ)
    .union(Access::REMOTE_WRITE)
    .union(Access::REMOTE_ATOMIC);

fn ensure(ok: bool, what: &str) -> Result<(), String> {
    ok.then_some(()).ok_or_else(|| what.to_string())
}

/// The command line (see the module doc).
#[derive(clap::Parser, Debug)]
#[command(
    name = "roce-dat-pair",
    about = "the DAT-shaped Rust API over two real DPDK ports"
)]
struct Args {
    /// IA A's interface.
    iface_a: String,
    /// IA B's interface.
    iface_b: String,
}

fn run(args: &Args, prefix: &str) -> Result<(), String> {
    let (ia_name, ib_name) = (&args.iface_a, &args.iface_b);
    let eal_args = EalArgs::new("0,1")
        .no_huge(512)
        .file_prefix(prefix)
        .arg("--no-shconf")
        .log_level("warning")
        .vdev(&format!("net_af_packet0,iface={ia_name}"))
        .vdev(&format!("net_af_packet1,iface={ib_name}"));
    let eal = Eal::init(&eal_args.to_args()).map_err(|e| format!("EAL: {e}"))?;
    let e = |e: dpdk_roce::dat::DatError| e.to_string();
    let open = |name: &str, ip| -> Result<Ia, String> {
        let port = Port::open(eal, name, &PortConfig::default()).map_err(|e| e.to_string())?;
        let mac = EthernetAddress(port.mac().map_err(|e| e.to_string())?);
        let io = DpdkFrameIo::new(eal, &port, 4095).map_err(|e| e.to_string())?;
        Ia::open_with(
            IaConfig {
                mac,
                address: dpdk_roce::config::PortAddresses::v4(ip, 24)
                    .expect("a host address on its prefix"),
                routes: Default::default(),
                dscp: 0,
                cm: Default::default(),
                congestion: Default::default(),
                mtu: 1500,
                shards: 2,
                engine: EngineConfig {
                    progress: Progress::Core,
                    poll_cores: vec![0, 1],
                    idle_pause_us: 20,
                    idle_polls_before_pause: 256,
                    ..EngineConfig::default()
                },
            },
            vec![Box::new(io)],
        )
        .map_err(|e| e.to_string())
    };
    let (ip_a, ip_b) = (Ipv4Addr::new(10, 79, 0, 1), Ipv4Addr::new(10, 79, 0, 2));
    let a = open("net_af_packet0", ip_a)?;
    let b = open("net_af_packet1", ip_b)?;
    println!("READY prefix={prefix}");
    let objs = |ia: &Ia| -> Result<(Pz, Evd, Evd, Evd), String> {
        Ok((
            Pz::create(ia).map_err(e)?,
            Evd::create(ia, 256, EvdFlags::DTO).map_err(e)?,
            Evd::create(ia, 64, EvdFlags::CONNECTION).map_err(e)?,
            Evd::create(ia, 64, EvdFlags::CR).map_err(e)?,
        ))
    };
    let (pz_a, dto_a, conn_a, _cr_a) = objs(&a)?;
    let (pz_b, dto_b, conn_b, cr_b) = objs(&b)?;
    let psp = Psp::create(&b, 45248u16, &cr_b).map_err(e)?;
    let la = Lmr::create(&pz_a, 65536, RW).map_err(e)?;
    let lb = Lmr::create(&pz_b, 65536, RW).map_err(e)?;
    let msg: Vec<u8> = (0..4000u32).map(|i| (i * 31 + 7) as u8).collect();
    la.write(0, &msg).map_err(e)?;
    lb.write(20000, &msg[..1000]).map_err(e)?;
    let dto = |evd: &Evd| -> Result<dpdk_roce::dat::DtoEvent, String> {
        match evd.wait(T, 1).map_err(e)? {
            DatEvent::Dto(d) if d.status == WcStatus::Success => Ok(d),
            other => Err(format!("not a successful DTO: {other:?}")),
        }
    };
    let mut shards = Vec::new();
    for k in 0..4u64 {
        let ea = Ep::create(
            &a,
            &pz_a,
            Some(&dto_a),
            Some(&dto_a),
            Some(&conn_a),
            None,
            None,
        )
        .map_err(e)?;
        let eb = Ep::create(
            &b,
            &pz_b,
            Some(&dto_b),
            Some(&dto_b),
            Some(&conn_b),
            None,
            None,
        )
        .map_err(e)?;
        shards.push(ea.shard());
        eb.post_recv(&[lb.triplet(0, 4000)], 10 + k).map_err(e)?;
        eb.post_recv(&[lb.triplet(8000, 64)], 20 + k).map_err(e)?;
        ea.connect(ip_b, 45248u16, &k.to_be_bytes()).map_err(e)?;
        let DatEvent::ConnectionRequest(cr) = cr_b.wait(T, 1).map_err(e)? else {
            return Err("no connection request".into());
        };
        ensure(cr.private_data()[..8] == k.to_be_bytes(), "CR private data")?;
        cr.accept(&eb, b"ok").map_err(e)?;
        for (evd, name) in [(&conn_a, "A"), (&conn_b, "B")] {
            match evd.wait(T, 1).map_err(e)? {
                DatEvent::Connection {
                    kind: ConnectionEventKind::Established,
                    ..
                } => {}
                other => return Err(format!("{name}: {other:?}")),
            }
        }
        ensure(ea.state() == EpState::Connected, "A connected")?;
        ea.post_send(&[la.triplet(0, 4000)], 1).map_err(e)?;
        ensure(dto(&dto_a)?.opcode == WcOpcode::Send, "send completion")?;
        let d = dto(&dto_b)?;
        ensure(
            d.cookie == 10 + k && d.transferred_length == 4000,
            "recv completion",
        )?;
        ensure(lb.read(0, 4000).map_err(e)? == msg, "SEND data")?;
        ea.post_rdma_write_imm(&[la.triplet(0, 3000)], &lb.rmr_triplet(10000, 3000), 9, 2)
            .map_err(e)?;
        dto(&dto_a)?;
        ensure(dto(&dto_b)?.immediate == Some(9), "immediate")?;
        ensure(
            lb.read(10000, 3000).map_err(e)? == msg[..3000],
            "WRITE data",
        )?;
        ea.post_rdma_read(&[la.triplet(30000, 1000)], &lb.rmr_triplet(20000, 1000), 3)
            .map_err(e)?;
        ensure(dto(&dto_a)?.opcode == WcOpcode::RdmaRead, "read completion")?;
        ensure(la.read(30000, 1000).map_err(e)? == msg[..1000], "READ data")?;
        ea.post_fetch_add(1, &la.triplet(40000, 8), &lb.rmr_triplet(50000, 8), 4)
            .map_err(e)?;
        dto(&dto_a)?;
        ensure(
            la.read(40000, 8).map_err(e)? == k.to_le_bytes(),
            "fetch-add original",
        )?;
        ea.disconnect().map_err(e)?;
        for evd in [&conn_a, &conn_b] {
            match evd.wait(T, 1).map_err(e)? {
                DatEvent::Connection {
                    kind: ConnectionEventKind::Disconnected,
                    ..
                } => {}
                other => return Err(format!("disconnect: {other:?}")),
            }
        }
        println!("RESULT ep={k} shard={} verified", ea.shard());
    }
    ensure(
        shards.contains(&0) && shards.contains(&1),
        "EPs on both shards",
    )?;
    drop(psp);
    println!("RESULT done");
    Ok(())
}
