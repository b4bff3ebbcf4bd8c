//! dpdk-port-check: exercises the DPDK layer on real virtual devices, for the integration tests
//! (`tests/dpdk_ports.rs`) and by hand.
//!
//! ```text
//! dpdk-port-check af-packet IFACE_A IFACE_B [--count N] [--mem no-huge|huge|auto]
//!     Two net_af_packet ports on the two ends of a veth pair: sends N frames of assorted sizes
//!     (60 B .. 4 KiB, a 2-segment chain, one with an external buffer) from port 0 and checks that
//!     port 1 receives each byte for byte. Exit 0 when all arrived intact.
//! dpdk-port-check tap IFACE --ip A.B.C.D [--timeout-ms T] [--mem ...]
//!     One net_tap port whose kernel side is IFACE: prints READY once the port runs, answers the
//!     kernel's ARP request for A.B.C.D and prints the payload of the first UDP datagram the
//!     kernel then sends to it. Exit 0 when both were seen.
//! ```
//! Output lines for the tests: `READY ...`, `EAL ...`, `RESULT key=value ...`, `ERROR ...`.

use std::io::Write;
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use dpdk_roce::dpdk::{DpdkError, Eal, EalArgs, ExtBufTracker, Mbuf, Mempool, Port, PortConfig};

const ETHERTYPE_TEST: u16 = 0x88b5; // IEEE local experimental
const MAGIC: &[u8; 4] = b"DRTE";
/// Ethernet header + magic + sequence number.
const HDR: usize = 14 + 4 + 4;
/// Largest frame data an mbuf of the pools here holds (9 KiB jumbo + headroom).
const DATA_ROOM: u16 = 9216 + 128;

/// The command line (see the module doc).
#[derive(clap::Parser, Debug)]
#[command(
    name = "dpdk-port-check",
    about = "checks of DPDK ports through the bindings"
)]
struct Cli {
    #[command(subcommand)]
    check: Check,
}

#[derive(clap::Subcommand, Debug)]
enum Check {
    /// Two net_af_packet ports on the ends of a veth pair.
    AfPacket {
        iface_a: String,
        iface_b: String,
        /// Frames each way.
        #[arg(long, default_value_t = 40)]
        count: usize,
        #[command(flatten)]
        mem: MemArg,
    },
    /// A net_tap port the kernel side talks to.
    Tap {
        iface: String,
        /// The port's IPv4 address.
        #[arg(long)]
        ip: Ipv4Addr,
        #[arg(long, default_value_t = 5000)]
        timeout_ms: u64,
        #[command(flatten)]
        mem: MemArg,
    },
}

/// EAL memory: `no-huge` (256 MiB, the default), `huge`, or `auto` (hugepages if any).
#[derive(clap::Args, Debug)]
struct MemArg {
    #[arg(long = "mem", value_enum, default_value_t = Mem::NoHuge)]
    mem: Mem,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Mem {
    NoHuge,
    Huge,
    Auto,
}

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let result = match <Cli as clap::Parser>::parse().check {
        Check::AfPacket {
            iface_a,
            iface_b,
            count,
            mem,
        } => af_packet(&iface_a, &iface_b, count, mem.mem),
        Check::Tap {
            iface,
            ip,
            timeout_ms,
            mem,
        } => tap(&iface, ip, Duration::from_millis(timeout_ms), mem.mem),
    };
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", runtime_prefix()));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("ERROR {e}");
            ExitCode::FAILURE
        }
    }
}

fn runtime_prefix() -> String {
    format!("dpdk-port-check-{}", std::process::id())
}

fn eal_args(mem: Mem, vdevs: &[String]) -> Vec<String> {
    let mut b = EalArgs::new("0").log_level("warning");
    for v in vdevs {
        b = b.vdev(v);
    }
    b = match mem {
        // A prefix of our own (the tests run two of these at once); main removes its runtime
        // directory at exit.
        Mem::NoHuge => b
            .no_huge(256)
            .file_prefix(&runtime_prefix())
            .arg("--no-shconf"),
        Mem::Huge => b,
        Mem::Auto => b.hugepages_or_no_huge(256),
    };
    b.to_args()
}

fn init(mem: Mem, vdevs: &[String]) -> Result<&'static Eal, String> {
    let eal_args = eal_args(mem, vdevs);
    let eal = Eal::init(&eal_args).map_err(|e| e.to_string())?;
    // Once per process: the same arguments give the same handle, others an error.
    let again = Eal::init(&eal_args).map_err(|e| format!("second Eal::init: {e}"))?;
    let mut other = eal_args.clone();
    other.push("--no-telemetry".into());
    let reinit_ok = std::ptr::eq(eal, again)
        && matches!(Eal::init(&other), Err(DpdkError::EalArgsMismatch { .. }));
    println!(
        "EAL args={:?} hugepages={} ports={} reinit_ok={reinit_ok} tsc_hz={}",
        eal.args().join(" "),
        eal.has_hugepages(),
        eal.port_count(),
        eal.tsc_hz()
    );
    Ok(eal)
}

fn port_config() -> PortConfig {
    PortConfig {
        rx_desc: 512,
        tx_desc: 512,
        mbufs_per_rx_queue: 1023,
        mbuf_cache: 32,
        data_room: DATA_ROOM,
        promiscuous: true,
        ..PortConfig::default()
    }
}

/// How a test frame is built.
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// One contiguous mbuf.
    Plain,
    /// Two direct segments, split at the given offset.
    Chained(usize),
    /// The header in a direct mbuf, the rest in an external buffer.
    External,
}

const FRAMES: &[(usize, Shape)] = &[
    (60, Shape::Plain),
    (64, Shape::Plain),
    (128, Shape::Plain),
    (333, Shape::Plain),
    (1000, Shape::Plain),
    (1514, Shape::Plain),
    (2048, Shape::Plain),
    (3000, Shape::Chained(1500)),
    (1200, Shape::External),
    (4096, Shape::Plain),
];

fn frame_bytes(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ETHERTYPE_TEST.to_be_bytes());
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((HDR..len).map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq * 7) as u8));
    f
}

fn build(
    pool: &Mempool,
    bytes: &[u8],
    shape: Shape,
    tracker: &std::sync::Arc<ExtBufTracker>,
) -> Result<Mbuf, String> {
    let mut m = pool.alloc().ok_or("tx pool empty")?;
    match shape {
        Shape::Plain => {
            if !m.extend_from_slice(bytes) {
                return Err(format!("{} bytes do not fit one mbuf", bytes.len()));
            }
        }
        Shape::Chained(at) => {
            let mut tail = pool.alloc().ok_or("tx pool empty")?;
            if !(m.extend_from_slice(&bytes[..at]) && tail.extend_from_slice(&bytes[at..])) {
                return Err("segment does not fit".into());
            }
            m.chain(tail).map_err(|_| "chain refused")?;
        }
        Shape::External => {
            if !m.extend_from_slice(&bytes[..HDR]) {
                return Err("header does not fit".into());
            }
            let mut ext = pool.alloc().ok_or("tx pool empty")?;
            ext.attach_extbuf(bytes[HDR..].to_vec(), None, Some(tracker.clone()))
                .map_err(|_| "attach_extbuf refused")?;
            if !ext.is_external() || ext.data_mut().is_some() {
                return Err("external segment not marked read-only".into());
            }
            m.chain(ext).map_err(|_| "chain refused")?;
        }
    }
    if m.pkt_len() as usize != bytes.len() {
        return Err(format!(
            "built {} bytes, wanted {}",
            m.pkt_len(),
            bytes.len()
        ));
    }
    Ok(m)
}

fn af_packet(a: &str, b: &str, count: usize, mem: Mem) -> Result<(), String> {
    // framesz/blocksz: room for 4 KiB frames in the PACKET_MMAP rings (default is 2 KiB).
    let ring = "blocksz=8192,framesz=8192,framecnt=512";
    let eal = init(
        mem,
        &[
            format!("net_af_packet0,iface={a},{ring}"),
            format!("net_af_packet1,iface={b},{ring}"),
        ],
    )?;
    let cfg = port_config();
    let p0 = Port::open(eal, "net_af_packet0", &cfg).map_err(|e| e.to_string())?;
    let p1 = Port::open(eal, "net_af_packet1", &cfg).map_err(|e| e.to_string())?;
    let (mac0, mac1) = (
        p0.mac().map_err(|e| e.to_string())?,
        p1.mac().map_err(|e| e.to_string())?,
    );
    let link = p1.link(false).map_err(|e| e.to_string())?;
    println!(
        "READY driver={} mac0={} mac1={} link1_up={} mtu0={} promisc1={}",
        p0.driver_name().map_err(|e| e.to_string())?,
        fmt_mac(mac0),
        fmt_mac(mac1),
        link.up,
        p0.mtu().map_err(|e| e.to_string())?,
        p1.promiscuous()
    );
    let (_rx0, mut tx0) = p0.take_queue_pair(0).map_err(|e| e.to_string())?;
    let (mut rx1, _tx1) = p1.take_queue_pair(0).map_err(|e| e.to_string())?;
    if p1.take_rx_queue(0).is_ok() {
        return Err("queue 0 handed out twice".into());
    }
    let pool = Mempool::new(eal, "txpool", 255, 0, DATA_ROOM).map_err(|e| e.to_string())?;
    let tracker = ExtBufTracker::new();

    let expected: Vec<Vec<u8>> = (0..count)
        .map(|i| frame_bytes(mac1, mac0, i as u32, FRAMES[i % FRAMES.len()].0))
        .collect();
    let mut received: Vec<Option<Vec<u8>>> = vec![None; count];
    let (mut got, mut stray, mut segs_seen) = (0usize, 0usize, 0usize);
    let mut rx: [Option<Mbuf>; 32] = Default::default();
    let mut poll = |received: &mut Vec<Option<Vec<u8>>>, got: &mut usize| {
        let n = rx1.rx_burst(&mut rx);
        for m in rx[..n].iter().flatten() {
            segs_seen += usize::from(m.nb_segs());
            let v = m.to_vec();
            if v.len() >= HDR && v[12..14] == ETHERTYPE_TEST.to_be_bytes() && &v[14..18] == MAGIC {
                let seq = u32::from_be_bytes(v[18..22].try_into().expect("4 bytes")) as usize;
                if seq < received.len() && received[seq].is_none() {
                    received[seq] = Some(v);
                    *got += 1;
                    continue;
                }
            }
            stray += 1;
        }
    };
    let start = Instant::now();
    for (i, bytes) in expected.iter().enumerate() {
        let m = build(&pool, bytes, FRAMES[i % FRAMES.len()].1, &tracker)?;
        let mut one = [Some(m)];
        while tx0.tx_burst(&mut one) == 0 {
            if start.elapsed() > Duration::from_secs(5) {
                return Err(format!("tx queue stuck at frame {i}"));
            }
            poll(&mut received, &mut got);
        }
        poll(&mut received, &mut got);
    }
    while got < count && start.elapsed() < Duration::from_secs(3) {
        poll(&mut received, &mut got);
    }
    let elapsed = start.elapsed();
    drop(rx);

    let mut intact = 0;
    for (i, (want, have)) in expected.iter().zip(&received).enumerate() {
        match have {
            Some(h) if h == want => intact += 1,
            Some(h) => println!(
                "MISMATCH seq={i} len_sent={} len_received={} first_diff={:?}",
                want.len(),
                h.len(),
                want.iter().zip(h).position(|(x, y)| x != y)
            ),
            None => println!("MISSING seq={i} len={}", want.len()),
        }
    }
    let s0 = p0.stats().map_err(|e| e.to_string())?;
    let s1 = p1.stats().map_err(|e| e.to_string())?;
    println!(
        "RESULT sent={count} received={got} intact={intact} stray={stray} \
         extbuf_attached={} extbuf_released={} tx_pool_in_use={} \
         p0_opackets={} p0_oerrors={} p1_ipackets={} p1_ierrors={} p1_imissed={} p1_rx_nombuf={} \
         rx_segments={segs_seen} elapsed_us={}",
        tracker.attached(),
        tracker.released(),
        pool.in_use(),
        s0.opackets,
        s0.oerrors,
        s1.ipackets,
        s1.ierrors,
        s1.imissed,
        s1.rx_nombuf,
        elapsed.as_micros()
    );
    let _ = std::io::stdout().flush();
    if intact != count {
        return Err(format!("{intact} of {count} frames arrived intact"));
    }
    if tracker.in_flight() != 0 || tracker.attached() == 0 {
        return Err(format!(
            "external buffers: attached {}, released {}",
            tracker.attached(),
            tracker.released()
        ));
    }
    Ok(())
}

fn tap(iface: &str, ip: Ipv4Addr, timeout: Duration, mem: Mem) -> Result<(), String> {
    let eal = init(mem, &[format!("net_tap0,iface={iface}")])?;
    let port = Port::open(eal, "net_tap0", &port_config()).map_err(|e| e.to_string())?;
    let mac = port.mac().map_err(|e| e.to_string())?;
    let (mut rx, mut tx) = port.take_queue_pair(0).map_err(|e| e.to_string())?;
    let pool =
        Mempool::new(eal, "taptx", 63, 0, Mempool::DEFAULT_DATA_ROOM).map_err(|e| e.to_string())?;
    println!(
        "READY driver={} mac={} iface={iface}",
        port.driver_name().map_err(|e| e.to_string())?,
        fmt_mac(mac)
    );
    let _ = std::io::stdout().flush();

    let start = Instant::now();
    let (mut arp_requests, mut other) = (0u32, 0u32);
    let mut burst: [Option<Mbuf>; 32] = Default::default();
    while start.elapsed() < timeout {
        let n = rx.rx_burst(&mut burst);
        for m in burst[..n].iter().flatten() {
            let f = m.to_vec();
            if let Some(reply) = arp_reply_for(&f, ip, mac) {
                arp_requests += 1;
                let mut out = pool.alloc().ok_or("tap tx pool empty")?;
                if !out.extend_from_slice(&reply) {
                    return Err("ARP reply does not fit".into());
                }
                tx.send(out).map_err(|_| "tap tx queue full")?;
                println!("ARP request for {ip} answered");
            } else if let Some(payload) = udp_payload_to(&f, ip, mac) {
                println!(
                    "RESULT arp_requests={arp_requests} other_frames={other} udp_payload={} elapsed_ms={}",
                    String::from_utf8_lossy(payload),
                    start.elapsed().as_millis()
                );
                let s = port.stats().map_err(|e| e.to_string())?;
                println!(
                    "STATS ipackets={} opackets={} ierrors={}",
                    s.ipackets, s.opackets, s.ierrors
                );
                return Ok(());
            } else {
                other += 1;
            }
        }
    }
    println!("RESULT arp_requests={arp_requests} other_frames={other} udp_payload=");
    Err(format!("no UDP datagram to {ip} within {timeout:?}"))
}

/// The ARP reply to `f` when it is a request for `ip`.
fn arp_reply_for(f: &[u8], ip: Ipv4Addr, mac: [u8; 6]) -> Option<Vec<u8>> {
    // Ethernet(14) + ARP for IPv4 over Ethernet (28).
    if f.len() < 42 || f[12..14] != [0x08, 0x06] || f[14..22] != [0, 1, 8, 0, 6, 4, 0, 1] {
        return None;
    }
    if f[38..42] != ip.octets() {
        return None;
    }
    let (sha, spa) = (&f[22..28], &f[28..32]);
    let mut r = Vec::with_capacity(60);
    r.extend_from_slice(sha);
    r.extend_from_slice(&mac);
    r.extend_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2]);
    r.extend_from_slice(&mac);
    r.extend_from_slice(&ip.octets());
    r.extend_from_slice(sha);
    r.extend_from_slice(spa);
    r.resize(60, 0);
    Some(r)
}

/// The payload of `f` when it is an IPv4 UDP datagram to `mac`/`ip`.
fn udp_payload_to(f: &[u8], ip: Ipv4Addr, mac: [u8; 6]) -> Option<&[u8]> {
    if f.len() < 42 || f[0..6] != mac || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return None;
    }
    if f[30..34] != ip.octets() {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let udp = f.get(14 + ihl..)?;
    let len = usize::from(u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]));
    udp.get(8..len)
}

fn fmt_mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
