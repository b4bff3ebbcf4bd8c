//! roce-dpdk-bad-input: bad input at a real DPDK port. Two net_af_packet ports of one process on
//! the two ends of a veth pair: the victim (a `Shard` over `MrTable` memory: a target region
//! between guard regions, a local-only region, a region of another protection zone, receive
//! buffers) and its legitimate peer (a `Shard` over `VecMemory`), connected through the CM. An
//! attacker injects crafted frames through the peer's port: random bytes, truncations at every
//! header boundary, wrong ICRC / IPv4 checksum, other UDP ports, unknown QPs, a foreign P_Key,
//! PSNs far out of the window, and requests on the peer's connection (spoofed, correct PSN and
//! QPN) with bad R_Keys, out-of-bounds or wrapping addresses, misaligned atomics, bad opcode
//! sequences. Used by `tests/dpdk_bad_input.rs`.
//!
//! ```text
//! roce-dpdk-bad-input IFACE_VICTIM IFACE_ATTACKER [--seed N] [--fuzz FRAMES]
//! ```
//! Prints one `CASE {json}` line per case: the frames sent and received, the deltas of every
//! counter that moved (neighbour-layer drops by reason, host and QP counters), the NAKs, ACKs
//! and READ responses the victim sent (seen on its transmit path), its completions, the
//! victim QP's state, and how many bytes of registered memory differ from what legitimate
//! traffic wrote. Then `FINAL {json}` (ARP answered, a new connection moved verified data) and
//! `RESULT done`. Exit 0 unless the harness itself failed; the test judges the cases.

use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::dpdk::{DpdkFrameIo, Eal, EalArgs, Port, PortConfig};
use dpdk_roce::engine::deregister::Deregister;
use dpdk_roce::engine::shard::Shard;
use dpdk_roce::host::{Host, HostConfig, HostStats, QpOptions};
use dpdk_roce::io::FrameIo;
use dpdk_roce::mem::access::Access;
use dpdk_roce::mem::vec_memory::VecMemory;
use dpdk_roce::mem::{MrTable, Pz, Region};
use dpdk_roce::net::{ArpFrame, DropReason, NetConfig, NetStats};
use dpdk_roce::transport::qp::QpStats;
use dpdk_roce::transport::types::{QpState, RecvWr, SendOp, SendWr, Sge, WcStatus};
use dpdk_roce::wire::aeth::Syndrome;
use dpdk_roce::wire::ethernet::{self, EtherType, EthernetAddress, EthernetRepr};
use dpdk_roce::wire::ipv4::{self, Ipv4Repr, IPPROTO_UDP};
use dpdk_roce::wire::udp::{self, UdpRepr};
use dpdk_roce::wire::{
    icrc_parts, AtomicEthRepr, BthRepr, DethRepr, OpFlags, Opcode, Psn, RethRepr, RoceFrame,
    RoceHeaders,
};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

#[path = "roce_dpdk_bad_input/fuzz.rs"]
mod fuzz;

const VICTIM_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
const CM_PORT: u16 = 7471;
const REGION_LEN: usize = 4096;
/// Receives the victim posts on each QP (64 bytes each, in the receive region).
const RECVS: u64 = 2;
const RECV_LEN: u32 = 64;

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = <Args as clap::Parser>::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("ERROR {e}");
            ExitCode::FAILURE
        }
    }
}

/// A transmit path, recorded while `recording`: the victim's, so the test sees the NAKs it put
/// on the wire; the peer's, whose real traffic seeds the fuzzer.
struct Recorder {
    io: DpdkFrameIo,
    sent: Vec<Vec<u8>>,
    recording: bool,
}

impl FrameIo for Recorder {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        self.io.rx_burst(f)
    }

    fn tx(&mut self, frame: &[u8]) -> bool {
        if self.recording {
            self.sent.push(frame.to_vec());
        }
        self.io.tx(frame)
    }

    fn flush(&mut self) {
        self.io.flush();
    }
}

/// One RC connection between the victim and the peer.
#[derive(Clone, Copy, Debug)]
struct Conn {
    victim_qpn: u32,
    peer_qpn: u32,
    /// The PSN the victim's responder expects next (nothing sent on the connection yet).
    epsn: Psn,
}

/// A registered region of the victim and the bytes it must hold.
struct Watched {
    name: &'static str,
    region: Region,
    expected: Vec<u8>,
}

struct Lab {
    victim: Shard<MrTable, Recorder>,
    peer: Shard<VecMemory, Recorder>,
    victim_mac: EthernetAddress,
    peer_mac: EthernetAddress,
    pz: Pz,
    watched: Vec<Watched>,
    recv: Region,
    /// Peer buffers for legitimate traffic: source and READ destination.
    peer_src: dpdk_roce::mem::vec_memory::Region,
    peer_dst: dpdk_roce::mem::vec_memory::Region,
    rng: ChaCha8Rng,
    cases: usize,
}

fn region(lab: &Lab, name: &str) -> Region {
    lab.watched
        .iter()
        .find(|w| w.name == name)
        .map(|w| w.region)
        .unwrap_or_else(|| panic!("no region {name}"))
}

fn all_remote() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC
}

/// The command line (see the module doc).
#[derive(clap::Parser, Debug)]
#[command(
    name = "roce-dpdk-bad-input",
    about = "bad input and a mutation fuzzer at a real DPDK port"
)]
struct Args {
    /// The victim's veth end.
    iface_victim: String,
    /// The attacker's (and legitimate peer's) veth end.
    iface_attacker: String,
    /// Seed of the random frames (default: the process id).
    #[arg(long)]
    seed: Option<u64>,
    /// Send this many fuzzed frames instead of the cases.
    #[arg(long)]
    fuzz: Option<u64>,
}

fn run(args: &Args) -> Result<(), String> {
    let (iface_v, iface_a) = (&args.iface_victim, &args.iface_attacker);
    let seed = args.seed.unwrap_or(u64::from(std::process::id()));
    let fuzz = args.fuzz;
    let prefix = format!("roce-bad-input-{}", std::process::id());
    let eal_args = EalArgs::new("0")
        .no_huge(512)
        .file_prefix(&prefix)
        .arg("--no-shconf")
        .log_level("warning")
        .vdev(&format!("net_af_packet0,iface={iface_v}"))
        .vdev(&format!("net_af_packet1,iface={iface_a}"));
    let eal = Eal::init(&eal_args.to_args()).map_err(|e| format!("EAL: {e}"))?;
    let result = (|| {
        let cfg = PortConfig::default();
        let pv = Port::open(eal, "net_af_packet0", &cfg).map_err(|e| e.to_string())?;
        let pa = Port::open(eal, "net_af_packet1", &cfg).map_err(|e| e.to_string())?;
        let mut lab = Lab::new(eal, &pv, &pa, seed)?;
        println!(
            "READY victim {iface_v} {} attacker {iface_a} {} seed {seed}",
            lab.victim_mac, lab.peer_mac
        );
        match fuzz {
            Some(frames) => lab.fuzz(frames),
            None => lab.run_all(),
        }
    })();
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    result
}

impl Lab {
    fn new(eal: &Eal, pv: &Port, pa: &Port, seed: u64) -> Result<Lab, String> {
        let victim_mac = EthernetAddress(pv.mac().map_err(|e| e.to_string())?);
        let peer_mac = EthernetAddress(pa.mac().map_err(|e| e.to_string())?);
        let host_config = |mac: EthernetAddress, ip, seed| HostConfig {
            net: NetConfig::new(mac, ip, 24),
            ca_guid: 0x0200_0000_0000_0000 | u64::from(mac.0[5]),
            seed,
            qpns: dpdk_roce::host::QpnPolicy::Random,
            cm: Default::default(),
        };
        let vhost = Host::new(host_config(victim_mac, VICTIM_IP, seed), MrTable::new(64))
            .map_err(|e| e.to_string())?;
        let phost = Host::new(host_config(peer_mac, PEER_IP, seed ^ 1), VecMemory::new())
            .map_err(|e| e.to_string())?;
        let vio = Recorder {
            io: DpdkFrameIo::new(eal, pv, 1023).map_err(|e| e.to_string())?,
            sent: Vec::new(),
            recording: true,
        };
        let pio = Recorder {
            io: DpdkFrameIo::new(eal, pa, 1023).map_err(|e| e.to_string())?,
            sent: Vec::new(),
            recording: false,
        };
        let mut victim = Shard::new(vhost, vio);
        let mut peer = Shard::new(phost, pio);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);

        // The victim's memory: target between two guards, then regions the target's R_Key
        // must never reach, each filled with its own pattern.
        let mem = &victim.host.mem;
        let pz = mem.create_pz();
        let other_pz = mem.create_pz();
        let mut watched = Vec::new();
        for (name, pz, access) in [
            ("guard_lo", pz, all_remote()),
            ("target", pz, all_remote()),
            ("guard_hi", pz, all_remote()),
            ("local_only", pz, Access::LOCAL_WRITE),
            ("other_pz", other_pz, all_remote()),
            ("recv", pz, Access::LOCAL_WRITE),
        ] {
            let region = mem
                .register_alloc(pz, REGION_LEN, 64, access)
                .map_err(|e| format!("register {name}: {e}"))?;
            let mut expected = vec![0u8; REGION_LEN];
            rng.fill_bytes(&mut expected);
            mem.write_local(region.lkey, region.addr, &expected)
                .map_err(|e| format!("fill {name}: {e}"))?;
            watched.push(Watched {
                name,
                region,
                expected,
            });
        }
        let recv = watched[5].region;
        victim
            .host
            .listen(CM_PORT)
            .map_err(|e| format!("listen: {e}"))?;
        let peer_src = peer.host.register(1, REGION_LEN, Access::LOCAL_WRITE);
        let peer_dst = peer.host.register(1, REGION_LEN, Access::LOCAL_WRITE);
        Ok(Lab {
            victim,
            peer,
            victim_mac,
            peer_mac,
            pz,
            watched,
            recv,
            peer_src,
            peer_dst,
            rng,
            cases: 0,
        })
    }

    fn poll(&mut self) {
        self.victim.poll();
        self.peer.poll();
    }

    /// Polls both shards until `done` or `timeout`; returns whether `done` became true.
    fn poll_until(&mut self, timeout: Duration, mut done: impl FnMut(&mut Lab) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            self.poll();
            if done(self) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
        }
    }

    /// Polls both shards for `d` (lets responses cross the wire).
    fn settle(&mut self, d: Duration) {
        let _ = self.poll_until(d, |_| false);
    }

    /// A new RC connection, the peer active, the victim passive; the victim posts `RECVS`
    /// receives. Nothing is sent on it yet, so the victim expects its `rq_psn`.
    fn connect(&mut self) -> Result<Conn, String> {
        self.connect_with(RECVS)
    }

    /// [`connect`](Self::connect) with `recvs` receives posted.
    fn connect_with(&mut self, recvs: u64) -> Result<Conn, String> {
        let now = self.victim.clock().now();
        let victim_qpn = self
            .victim
            .host
            .create_qp(
                now,
                QpOptions {
                    pd: self.pz.id(),
                    access: all_remote(),
                    ..QpOptions::default()
                },
            )
            .map_err(|e| format!("victim create_qp: {e}"))?;
        for i in 0..recvs {
            let wr = RecvWr {
                wr_id: i,
                sgl: dpdk_roce::sgl![Sge {
                    addr: self.recv.addr + i * u64::from(RECV_LEN),
                    len: RECV_LEN,
                    lkey: self.recv.lkey,
                }],
            };
            self.victim
                .host
                .post_recv(victim_qpn, wr)
                .map_err(|e| format!("victim post_recv: {e}"))?;
        }
        let pnow = self.peer.clock().now();
        let peer_qpn = self
            .peer
            .host
            .create_qp(pnow, QpOptions::default())
            .map_err(|e| format!("peer create_qp: {e}"))?;
        let mut cp = ConnectParams::new(
            VICTIM_IP,
            CM_PORT,
            peer_qpn,
            Psn::new(self.rng.gen_range(0..1 << 24)),
        );
        cp.responder_resources = 16;
        cp.initiator_depth = 16;
        cp.access = all_remote();
        self.peer
            .host
            .connect(pnow, cp)
            .map_err(|e| format!("connect: {e}"))?;
        // The peer's request; any other (a fuzzed one the victim let through late) is refused.
        let mut request = None;
        if !self.poll_until(Duration::from_secs(10), |l| {
            while let Some(ev) = l.victim.host.poll_event() {
                if let CmEvent::ConnectRequest { id, remote_qpn, .. } = ev {
                    if remote_qpn == peer_qpn {
                        request = Some(id);
                    } else {
                        let now = l.victim.clock().now();
                        let _ = l.victim.host.reject(now, id, &[]);
                    }
                }
            }
            request.is_some()
        }) {
            return Err("no connection request reached the victim".into());
        }
        let id = request.ok_or("no request")?;
        let mut ap = AcceptParams::new(victim_qpn, Psn::new(self.rng.gen_range(0..1 << 24)));
        ap.responder_resources = 16;
        ap.initiator_depth = 16;
        ap.access = all_remote();
        let now = self.victim.clock().now();
        self.victim
            .host
            .accept(now, id, ap)
            .map_err(|e| format!("accept: {e}"))?;
        let (mut up_v, mut up_p) = (false, false);
        if !self.poll_until(Duration::from_secs(10), |l| {
            while let Some(ev) = l.victim.host.poll_event() {
                up_v |= matches!(ev, CmEvent::Established { .. });
            }
            while let Some(ev) = l.peer.host.poll_event() {
                up_p |= matches!(ev, CmEvent::Established { .. });
            }
            up_v && up_p
        }) {
            return Err(format!(
                "not established (victim {up_v}, peer {up_p}); victim's neighbour {PEER_IP}: {:?} \
                 (peer {}), victim net {:?}, host {:?}, cm {:?}; peer cm {:?}, peer net {:?}",
                self.victim.host.net().lookup(PEER_IP.into()),
                self.peer_mac,
                self.victim.host.net_stats(),
                self.victim.host.stats(),
                self.victim.host.cm().stats(),
                self.peer.host.cm().stats(),
                self.peer.host.net_stats()
            ));
        }
        let qp = self.victim.host.qp(victim_qpn).ok_or("victim QP gone")?;
        if qp.state() != QpState::Rts {
            return Err(format!("victim QP in {:?} after connecting", qp.state()));
        }
        Ok(Conn {
            victim_qpn,
            peer_qpn,
            epsn: qp.attr().rq_psn,
        })
    }

    fn eth(&self) -> EthernetRepr {
        EthernetRepr {
            src_addr: self.peer_mac,
            dst_addr: self.victim_mac,
            ethertype: EtherType::IPV4,
        }
    }

    fn ip(&self) -> Ipv4Repr {
        Ipv4Repr {
            src_addr: PEER_IP,
            dst_addr: VICTIM_IP,
            protocol: IPPROTO_UDP,
            dscp: 0,
            ecn: 0,
            ident: 0,
            dont_frag: true,
            ttl: 64,
        }
    }

    /// A valid RoCEv2 frame from the peer's addresses (correct ICRC), built by `RoceFrame`.
    fn roce(&self, headers: RoceHeaders, payload: &[u8]) -> Vec<u8> {
        self.roce_with(self.ip(), UdpRepr::rocev2(0xc0de), headers, payload)
    }

    fn roce_with(
        &self,
        ip: Ipv4Repr,
        udp: UdpRepr,
        headers: RoceHeaders,
        payload: &[u8],
    ) -> Vec<u8> {
        let f = RoceFrame::new(self.eth(), ip, udp, headers, payload).expect("valid headers");
        let mut out = vec![0u8; f.buffer_len()];
        let n = f.emit(&mut out).expect("room");
        out.truncate(n);
        out
    }

    /// Ethernet/IPv4/UDP to port 4791 around `ib` (BTH onwards, ICRC excluded), lengths and
    /// IPv4 checksum consistent, then a correct ICRC when `ib` holds at least a BTH.
    fn udp_roce(&self, ib: &[u8]) -> Vec<u8> {
        let l4 = udp::HEADER_LEN + ib.len() + 4;
        let mut f = vec![0u8; ethernet::HEADER_LEN + ipv4::HEADER_LEN + l4];
        let (e, rest) = f.split_at_mut(ethernet::HEADER_LEN);
        self.eth()
            .emit(&mut ethernet::Packet::new_unchecked(e))
            .expect("room");
        let (i, rest) = rest.split_at_mut(ipv4::HEADER_LEN);
        self.ip()
            .emit(&mut ipv4::Packet::new_unchecked(i), l4)
            .expect("room");
        let (u, rest) = rest.split_at_mut(udp::HEADER_LEN);
        UdpRepr::rocev2(0xc0de)
            .emit(&mut udp::Packet::new_unchecked(u), ib.len() + 4)
            .expect("room");
        rest[..ib.len()].copy_from_slice(ib);
        let end = f.len() - 4;
        if let Ok(icrc) = icrc_parts(&f[ethernet::HEADER_LEN..end], &[]) {
            f[end..].copy_from_slice(&icrc.to_le_bytes());
        }
        f
    }

    fn bth(op: Opcode, conn: &Conn, psn: Psn) -> BthRepr {
        let mut b = BthRepr::new(op, conn.victim_qpn, psn);
        b.ack_req = true;
        b
    }

    /// RDMA WRITE only at the expected PSN.
    fn write(&self, conn: &Conn, va: u64, rkey: u32, payload: &[u8]) -> Vec<u8> {
        self.write_at(conn, conn.epsn, va, rkey, payload)
    }

    fn write_at(&self, conn: &Conn, psn: Psn, va: u64, rkey: u32, payload: &[u8]) -> Vec<u8> {
        let h = RoceHeaders::new(Self::bth(Opcode::RC_WRITE_ONLY, conn, psn)).with_reth(RethRepr {
            va,
            rkey,
            dma_len: payload.len() as u32,
        });
        self.roce(h, payload)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.rng.fill_bytes(&mut v);
        v
    }

    /// Sends `frames` from the attacker's port, waits until the victim received them (or 5 s),
    /// lets the responses cross, and reports every counter that moved.
    fn case(&mut self, name: &str, conn: Option<Conn>, frames: Vec<Vec<u8>>) -> Value {
        self.cases += 1;
        let net0 = self.victim.host.net_stats().clone();
        let host0 = self.victim.host.stats().clone();
        let qp_stats = |l: &Lab| {
            conn.and_then(|c| l.victim.host.qp(c.victim_qpn).map(|q| *q.stats()))
                .unwrap_or_default()
        };
        let qp0 = qp_stats(self);
        let sent0 = self.victim.io.sent.len();
        for chunk in frames.chunks(16) {
            for f in chunk {
                let _ = self.peer.io.tx(f);
            }
            self.peer.io.flush();
            self.poll();
        }
        let want = net0.rx_frames + frames.len() as u64;
        let _ = self.poll_until(Duration::from_secs(5), |l| {
            l.victim.host.net_stats().rx_frames >= want
        });
        self.settle(Duration::from_millis(30));
        let mut completions = Vec::new();
        while let Some(wc) = self.victim.host.poll_completion() {
            completions.push(format!("{:?}", wc.status));
        }
        let report = self.report(
            name,
            frames.len(),
            conn,
            &net0,
            &host0,
            &qp0,
            &qp_stats(self),
            sent0,
            completions,
        );
        println!("CASE {report}");
        report
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &mut self,
        name: &str,
        sent: usize,
        conn: Option<Conn>,
        net0: &NetStats,
        host0: &HostStats,
        qp0: &QpStats,
        qp1: &QpStats,
        sent0: usize,
        completions: Vec<String>,
    ) -> Value {
        let net1 = self.victim.host.net_stats().clone();
        let host1 = self.victim.host.stats().clone();
        let drops: serde_json::Map<String, Value> = DropReason::ALL
            .iter()
            .filter(|&&r| net1.dropped(r) != net0.dropped(r))
            .map(|&r| {
                (
                    r.name().to_string(),
                    json!(net1.dropped(r) - net0.dropped(r)),
                )
            })
            .collect();
        let (mut naks, mut acks, mut read_responses, mut atomic_acks) = (Vec::new(), 0, 0, 0);
        for f in &self.victim.io.sent[sent0..] {
            let Ok(f) = RoceFrame::parse(f) else { continue };
            let flags = f.headers.bth.opcode.flags();
            if flags.contains(OpFlags::READ) && flags.contains(OpFlags::RESPONSE) {
                read_responses += 1;
            }
            if f.headers.bth.opcode == Opcode::RC_ATOMIC_ACK {
                atomic_acks += 1;
            }
            if f.headers.bth.opcode == Opcode::RC_ACK {
                match f.headers.aeth.map(|a| a.syndrome) {
                    Some(Syndrome::Ack { .. }) => acks += 1,
                    Some(Syndrome::Nak(code)) => naks.push(format!("{code:?}")),
                    Some(other) => naks.push(format!("{other:?}")),
                    None => {}
                }
            }
        }
        let d = |a: u64, b: u64| b - a;
        let state = conn.and_then(|c| self.victim.host.qp(c.victim_qpn).map(|q| q.state()));
        let peer_state = conn.and_then(|c| self.peer.host.qp(c.peer_qpn).map(|q| q.state()));
        json!({
            "case": name,
            "sent": sent,
            "received": net1.rx_frames - net0.rx_frames,
            "drops": drops,
            "dropped_total": net1.dropped_total() - net0.dropped_total(),
            "rx_roce": d(net0.rx_roce, net1.rx_roce),
            "unknown_qp": d(host0.rx_unknown_qp, host1.rx_unknown_qp),
            "bad_gsi": d(host0.rx_bad_gsi, host1.rx_bad_gsi),
            "wrong_origin": d(host0.rx_wrong_origin, host1.rx_wrong_origin),
            "qp": {
                "packets_received": d(qp0.packets_received, qp1.packets_received),
                "dropped": d(qp0.dropped, qp1.dropped),
                "duplicates": d(qp0.duplicates, qp1.duplicates),
                "seq_naks_sent": d(qp0.seq_naks_sent, qp1.seq_naks_sent),
                "fatal_naks_sent": d(qp0.fatal_naks_sent, qp1.fatal_naks_sent),
                "rnr_naks_sent": d(qp0.rnr_naks_sent, qp1.rnr_naks_sent),
            },
            "state": state.map(|s| format!("{s:?}")),
            "peer_state": peer_state.map(|s| format!("{s:?}")),
            "naks": naks,
            "acks": acks,
            "read_responses": read_responses,
            "atomic_acks": atomic_acks,
            "completions": completions,
            "mem_changed": self.memory_changed(),
        })
    }

    /// Bytes of the victim's registered regions that differ from what they must hold.
    fn memory_changed(&self) -> usize {
        self.changed_in(|_| true)
    }

    /// [`memory_changed`](Self::memory_changed) over the regions `named` picks.
    fn changed_in(&self, named: impl Fn(&str) -> bool) -> usize {
        self.watched
            .iter()
            .filter(|w| named(w.name))
            .map(|w| {
                let mut now = vec![0u8; w.expected.len()];
                match self
                    .victim
                    .host
                    .mem
                    .read_local(w.region.lkey, w.region.addr, &mut now)
                {
                    Ok(()) => now.iter().zip(&w.expected).filter(|(a, b)| a != b).count(),
                    Err(_) => w.expected.len(),
                }
            })
            .sum()
    }

    fn run_all(&mut self) -> Result<(), String> {
        let c0 = self.connect()?;
        self.net_cases(&c0);
        self.qp_cases_keeping_the_qp(&c0)?;
        self.fatal_cases()?;
        self.final_checks()
    }

    /// Frames the neighbour layer or the host must drop before any QP sees them.
    fn net_cases(&mut self, c: &Conn) {
        let target = region(self, "target");
        let payload = self.bytes(64);
        let good = self.write(c, target.addr, target.rkey, &payload);

        // Random bytes: fully random, to our MAC, and to our MAC as IPv4.
        let mut frames = Vec::new();
        for i in 0..96 {
            let len = self.rng.gen_range(ethernet::HEADER_LEN..=1514);
            let mut f = self.bytes(len);
            if i % 3 >= 1 {
                f[..6].copy_from_slice(&self.victim_mac.0);
            }
            if i % 3 == 2 {
                f[12..14].copy_from_slice(&[0x08, 0x00]);
                if len > 14 {
                    f[14] = 0x45;
                }
                // Not a fragment: net_af_packet's PACKET_FANOUT_FLAG_DEFRAG makes the kernel
                // hold (and never deliver) what looks like an IPv4 fragment.
                if len >= 22 {
                    f[20] &= 0x40;
                    f[21] = 0;
                }
            }
            frames.push(f);
        }
        self.case("random_bytes", Some(*c), frames);

        // Random transport bytes after valid Ethernet/IPv4/UDP 4791 headers, with a correct
        // ICRC: random BTHs for unknown QPs, unknown opcodes, bad lengths.
        let frames = (0..64)
            .map(|_| {
                let n = self.rng.gen_range(12..200);
                let ib = self.bytes(n);
                self.udp_roce(&ib)
            })
            .collect();
        self.case("random_transport_bytes", Some(*c), frames);

        // A valid WRITE cut at every header boundary (and inside each header), lengths left as
        // they were: the IPv4 total length runs past the frame.
        let cuts = [14, 24, 34, 38, 42, 48, 54, 62, 70, 100, good.len() - 2];
        let frames = cuts.iter().map(|&n| good[..n].to_vec()).collect();
        self.case("truncated_at_header_boundaries", Some(*c), frames);

        // The same cuts inside the InfiniBand headers with consistent IPv4/UDP lengths and a
        // correct ICRC: no transport bytes, half a BTH, a WRITE's BTH without its RETH, half
        // the RETH; and a PadCnt larger than the payload.
        let ib = &good[42..good.len() - 4];
        let mut padded = ib[..12].to_vec();
        padded[0] = Opcode::RC_SEND_ONLY.0;
        padded[1] |= 0x30; // PadCnt 3, no payload
        let frames = vec![
            self.udp_roce(&[]),
            self.udp_roce(&ib[..6]),
            self.udp_roce(&ib[..12]),
            self.udp_roce(&ib[..20]),
            self.udp_roce(&padded),
        ];
        self.case("truncated_transport_headers", Some(*c), frames);

        let mut bad_icrc = good.clone();
        let n = bad_icrc.len();
        bad_icrc[n - 1] ^= 0x01;
        let mut flipped_payload = good.clone();
        flipped_payload[n - 10] ^= 0x80;
        self.case("wrong_icrc", Some(*c), vec![bad_icrc, flipped_payload]);

        let mut bad_ip = good.clone();
        bad_ip[ethernet::HEADER_LEN + 10] ^= 0x5a;
        self.case("wrong_ipv4_checksum", Some(*c), vec![bad_ip]);

        let h = RoceHeaders::new(Self::bth(Opcode::RC_WRITE_ONLY, c, c.epsn)).with_reth(RethRepr {
            va: target.addr,
            rkey: target.rkey,
            dma_len: 64,
        });
        let frames = [4792u16, 4790, 0, 53]
            .iter()
            .map(|&port| {
                let udp = UdpRepr {
                    src_port: 0xc0de,
                    dst_port: port,
                    checksum: 0,
                };
                self.roce_with(self.ip(), udp, h, &payload)
            })
            .collect();
        self.case("udp_port_not_4791", Some(*c), frames);

        let mut ip = self.ip();
        ip.dst_addr = Ipv4Addr::new(10, 77, 0, 99);
        let other_ip = self.roce_with(ip, UdpRepr::rocev2(0xc0de), h, &payload);
        self.case("not_our_ip", Some(*c), vec![other_ip]);

        // (No IPv4 fragment case: net_af_packet joins its sockets to a PACKET_FANOUT group with
        // PACKET_FANOUT_FLAG_DEFRAG, so the kernel holds a lone fragment and it never reaches
        // the port; `src/net` unit tests cover the IpFragment drop.)

        let frames = [0u32, 2, 0x00ab_cdef, c.victim_qpn + 1000]
            .iter()
            .map(|&qpn| {
                let mut b = Self::bth(Opcode::RC_WRITE_ONLY, c, c.epsn);
                b.dest_qp = qpn;
                let h = RoceHeaders::new(b).with_reth(RethRepr {
                    va: target.addr,
                    rkey: target.rkey,
                    dma_len: 64,
                });
                self.roce(h, &payload)
            })
            .collect();
        self.case("unknown_dest_qpn", Some(*c), frames);

        let gsi = |qkey| {
            let b = BthRepr::new(Opcode::UD_SEND_ONLY, 1, Psn::new(0));
            RoceHeaders::new(b).with_deth(DethRepr { qkey, src_qp: 1 })
        };
        let mad = vec![0u8; 256];
        let frames = vec![
            self.roce(gsi(0x1234_5678), &mad),
            self.roce(
                RoceHeaders::new(Self::bth(Opcode::RC_SEND_ONLY, c, Psn::new(0))).with_bth_dest(1),
                &mad,
            ),
        ];
        self.case("qp1_not_gsi", Some(*c), frames);

        // A MAD to QP1 in a partition the port does not have.
        let mut foreign = gsi(dpdk_roce::wire::deth::GSI_QKEY);
        foreign.bth.pkey = 0x1234;
        let f = self.roce(foreign, &mad);
        self.case("qp1_foreign_pkey", Some(*c), vec![f]);
    }

    /// Requests the QP drops or answers without leaving RTS.
    fn qp_cases_keeping_the_qp(&mut self, c: &Conn) -> Result<(), String> {
        let target = region(self, "target");
        let payload = self.bytes(64);

        // A foreign P_Key on an otherwise valid WRITE (valid R_Key, expected PSN): dropped
        // silently (IBTA vol. 1 §9.6.1.1, §10.9.3), nothing written.
        let mut b = Self::bth(Opcode::RC_WRITE_ONLY, c, c.epsn);
        b.pkey = 0x1234;
        let h = RoceHeaders::new(b).with_reth(RethRepr {
            va: target.addr,
            rkey: target.rkey,
            dma_len: 64,
        });
        let f = self.roce(h, &payload);
        self.case("wrong_pkey", Some(*c), vec![f]);

        // Right in every RoCE field (QPN, PSN, R_Key, ICRC) but from an address that is not
        // the connection's peer: dropped before the QP, nothing written, no ACK to the peer.
        let h = RoceHeaders::new(Self::bth(Opcode::RC_WRITE_ONLY, c, c.epsn)).with_reth(RethRepr {
            va: target.addr,
            rkey: target.rkey,
            dma_len: 64,
        });
        let elsewhere = Ipv4Repr {
            src_addr: std::net::Ipv4Addr::new(10, 77, 0, 77),
            ..self.ip()
        };
        let f = self.roce_with(elsewhere, UdpRepr::rocev2(0xc0de), h, &payload);
        self.case("from_another_address", Some(*c), vec![f]);

        // A valid WRITE with a PSN 2^22 behind: a duplicate, ACKed, not executed (§9.7.5.1.1).
        let f = self.write_at(c, c.epsn.sub(1 << 22), target.addr, target.rkey, &payload);
        self.case("psn_far_behind_duplicate", Some(*c), vec![f]);

        // 2^22 ahead: out of sequence, one PSN sequence error NAK, not executed (§9.7.5.2.1);
        // the next one is dropped silently.
        let ahead = self.write_at(c, c.epsn.add(1 << 22), target.addr, target.rkey, &payload);
        self.case("psn_far_ahead", Some(*c), vec![ahead.clone()]);
        self.case("psn_far_ahead_again", Some(*c), vec![ahead]);

        // The connection still works: the peer WRITEs and READs back through it.
        self.legit_write_read(c, "legit_traffic_after_bad_psns")?;

        // A duplicate of that READ (4 KiB WRITE = 4 PSNs at MTU 1024, then the READ) naming
        // memory past the region: re-executed READs are checked again, so it is dropped.
        let end = target.addr + target.len;
        let frames = [(end - 100, 200), (u64::MAX - 7, 16)]
            .iter()
            .map(|&(va, dma_len)| {
                let h = RoceHeaders::new(Self::bth(Opcode::RC_READ_REQUEST, c, c.epsn.add(4)))
                    .with_reth(RethRepr {
                        va,
                        rkey: target.rkey,
                        dma_len,
                    });
                self.roce(h, &[])
            })
            .collect();
        self.case("duplicate_read_out_of_bounds", Some(*c), frames);
        Ok(())
    }

    /// The peer WRITEs a fresh pattern into the victim's target region and READs it back.
    fn legit_write_read(&mut self, c: &Conn, name: &str) -> Result<(), String> {
        let target = region(self, "target");
        let pattern = self.bytes(REGION_LEN);
        self.peer
            .host
            .mem
            .bytes_mut(self.peer_src.lkey)
            .ok_or("peer src")?
            .copy_from_slice(&pattern);
        let sge = |r: &dpdk_roce::mem::vec_memory::Region| Sge {
            addr: r.addr,
            len: REGION_LEN as u32,
            lkey: r.lkey,
        };
        let ops = [
            SendOp::Write {
                remote_addr: target.addr,
                rkey: target.rkey,
            },
            SendOp::Read {
                remote_addr: target.addr,
                rkey: target.rkey,
            },
        ];
        let sgls = [sge(&self.peer_src), sge(&self.peer_dst)];
        let mut statuses = Vec::new();
        for (i, (op, sge)) in ops.into_iter().zip(sgls).enumerate() {
            statuses.push(Some(self.peer_op(c, 100 + i as u64, op, sge, name)?));
        }
        if let Some(w) = self.watched.iter_mut().find(|w| w.name == "target") {
            w.expected.copy_from_slice(&pattern);
        }
        let read_back = self
            .peer
            .host
            .mem
            .bytes(self.peer_dst.lkey)
            .ok_or("peer dst")?;
        let verified = statuses.iter().all(|s| *s == Some(WcStatus::Success))
            && read_back == pattern.as_slice();
        let report = json!({
            "case": name,
            "statuses": statuses.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>(),
            "bytes": REGION_LEN * 2,
            "verified": verified,
            "mem_changed": self.memory_changed(),
        });
        println!("CASE {report}");
        Ok(())
    }

    /// The peer posts `op` on `c` (signaled, fenced) and waits for its completion: its status.
    fn peer_op(
        &mut self,
        c: &Conn,
        wr_id: u64,
        op: SendOp,
        sge: Sge,
        what: &str,
    ) -> Result<WcStatus, String> {
        let now = self.peer.clock().now();
        let wr = SendWr {
            wr_id,
            op,
            sgl: dpdk_roce::sgl![sge],
            signaled: true,
            fence: true,
            solicited: false,
        };
        self.peer
            .host
            .post_send(now, c.peer_qpn, wr)
            .map_err(|e| format!("{what}: post: {e}"))?;
        let mut wc = None;
        self.poll_until(Duration::from_secs(10), |l| {
            wc = l.peer.host.poll_completion();
            wc.is_some()
        });
        wc.map(|w| w.status)
            .ok_or_else(|| format!("{what}: no completion of work request {wr_id}"))
    }

    /// Requests on the peer's connection (correct QPN and PSN, as a spoofer would send) that the
    /// responder must refuse with a NAK, moving the QP to ERROR (IBTA vol. 1 §9.7.5.2); each on
    /// a connection of its own.
    fn fatal_cases(&mut self) -> Result<(), String> {
        let target = region(self, "target");
        let guard_hi = region(self, "guard_hi");
        let local_only = region(self, "local_only");
        let other_pz = region(self, "other_pz");
        // A region registered and freed again: its R_Key must never match (generation).
        let freed = {
            let mem = &self.victim.host.mem;
            let r = mem
                .register_alloc(self.pz, REGION_LEN, 64, all_remote())
                .map_err(|e| e.to_string())?;
            mem.deregister(r.lkey).map_err(|e| e.to_string())?;
            r
        };
        let end = target.addr + target.len;
        let p8 = self.bytes(8);
        let p64 = self.bytes(64);
        let p1k = self.bytes(1024);

        type Build = dyn Fn(&Lab, &Conn) -> Vec<u8>;
        let cases: Vec<(&str, Box<Build>)> = vec![
            (
                "write_wrong_rkey_spoofing_peer",
                Box::new({
                    let p = p64.clone();
                    move |l, c| l.write(c, target.addr, target.rkey ^ 0x0000_0100, &p)
                }),
            ),
            (
                "write_freed_rkey",
                Box::new({
                    let p = p64.clone();
                    move |l, c| l.write(c, freed.addr, freed.rkey, &p)
                }),
            ),
            (
                "write_rkey_of_other_pz",
                Box::new({
                    let p = p64.clone();
                    move |l, c| l.write(c, other_pz.addr, other_pz.rkey, &p)
                }),
            ),
            (
                "write_region_without_remote_rights",
                Box::new({
                    let p = p64.clone();
                    move |l, c| l.write(c, local_only.addr, local_only.rkey, &p)
                }),
            ),
            (
                "write_just_past_the_end",
                Box::new({
                    let p = p8.clone();
                    move |l, c| l.write(c, end - 4, target.rkey, &p)
                }),
            ),
            (
                "write_into_the_next_region_with_target_rkey",
                Box::new({
                    let p = p64.clone();
                    move |l, c| l.write(c, guard_hi.addr, target.rkey, &p)
                }),
            ),
            (
                "write_first_huge_length",
                Box::new({
                    let p = p1k.clone();
                    move |l, c| {
                        let h = RoceHeaders::new(Lab::bth(Opcode::RC_WRITE_FIRST, c, c.epsn))
                            .with_reth(RethRepr {
                                va: target.addr,
                                rkey: target.rkey,
                                dma_len: 1 << 30,
                            });
                        l.roce(h, &p)
                    }
                }),
            ),
            (
                "write_first_length_beyond_max_message",
                Box::new({
                    let p = p1k.clone();
                    move |l, c| {
                        let h = RoceHeaders::new(Lab::bth(Opcode::RC_WRITE_FIRST, c, c.epsn))
                            .with_reth(RethRepr {
                                va: target.addr,
                                rkey: target.rkey,
                                dma_len: u32::MAX,
                            });
                        l.roce(h, &p)
                    }
                }),
            ),
            (
                "write_address_wraps",
                Box::new({
                    let p = p8.clone();
                    move |l, c| l.write(c, u64::MAX - 3, target.rkey, &p)
                }),
            ),
            (
                "write_middle_without_first",
                Box::new({
                    let p = p1k.clone();
                    move |l, c| {
                        let h = RoceHeaders::new(Lab::bth(Opcode::RC_WRITE_MIDDLE, c, c.epsn));
                        l.roce(h, &p)
                    }
                }),
            ),
            (
                "read_out_of_bounds",
                Box::new(move |l, c| {
                    let h = RoceHeaders::new(Lab::bth(Opcode::RC_READ_REQUEST, c, c.epsn))
                        .with_reth(RethRepr {
                            va: end - 100,
                            rkey: target.rkey,
                            dma_len: 200,
                        });
                    l.roce(h, &[])
                }),
            ),
            (
                "read_address_wraps",
                Box::new(move |l, c| {
                    let h = RoceHeaders::new(Lab::bth(Opcode::RC_READ_REQUEST, c, c.epsn))
                        .with_reth(RethRepr {
                            va: u64::MAX - 7,
                            rkey: target.rkey,
                            dma_len: 16,
                        });
                    l.roce(h, &[])
                }),
            ),
            (
                "atomic_misaligned",
                Box::new(move |l, c| {
                    let h = RoceHeaders::new(Lab::bth(Opcode::RC_FETCH_ADD, c, c.epsn))
                        .with_atomic_eth(AtomicEthRepr {
                            va: target.addr + 4,
                            rkey: target.rkey,
                            swap_add: 1,
                            compare: 0,
                        });
                    l.roce(h, &[])
                }),
            ),
            (
                "atomic_out_of_bounds",
                Box::new(move |l, c| {
                    let h = RoceHeaders::new(Lab::bth(Opcode::RC_COMPARE_SWAP, c, c.epsn))
                        .with_atomic_eth(AtomicEthRepr {
                            va: end,
                            rkey: target.rkey,
                            swap_add: 0xdead_beef,
                            compare: 0,
                        });
                    l.roce(h, &[])
                }),
            ),
            (
                "send_longer_than_the_receive",
                Box::new(move |l, c| {
                    let h = RoceHeaders::new(Lab::bth(Opcode::RC_SEND_ONLY, c, c.epsn));
                    l.roce(h, &vec![0x5a; RECV_LEN as usize + 100])
                }),
            ),
            (
                // Zero-length RDMA WRITE: no memory is accessed, so the R_Key and address are
                // not checked (IBTA vol. 1 §9.7.5.2.3 / C9-88); ACKed, nothing written.
                "write_zero_length_unchecked_rkey",
                Box::new(move |l, c| l.write(c, u64::MAX - 3, 0x8000_dead, &[])),
            ),
        ];
        for (name, build) in cases {
            let c = self.connect()?;
            let f = build(self, &c);
            self.case(name, Some(c), vec![f]);
        }

        // Random transport bytes aimed at a live QP (TVer 0, P_Key and QPN right, half of them
        // at or just after the expected PSN, the rest random, correct ICRC). No receives are
        // posted, so no random SEND may legitimately land: whatever they do, no memory
        // changes and the port keeps working.
        let c = self.connect_with(0)?;
        let frames = (0..64)
            .map(|i| {
                let n = self.rng.gen_range(12..120);
                let mut ib = self.bytes(n);
                ib[0] &= 0x1f; // RC opcodes (and a few unknown ones)
                ib[1] &= 0xf0; // TVer 0
                ib[2..4].copy_from_slice(&[0xff, 0xff]);
                ib[5..8].copy_from_slice(&c.victim_qpn.to_be_bytes()[1..]);
                if i % 2 == 0 {
                    let psn = c.epsn.add(self.rng.gen_range(0..4));
                    ib[9..12].copy_from_slice(&psn.value().to_be_bytes()[1..]);
                }
                self.udp_roce(&ib)
            })
            .collect();
        self.case("random_requests_to_a_live_qp", Some(c), frames);
        Ok(())
    }

    /// After the barrage: ARP is answered, and a new connection moves verified data.
    fn final_checks(&mut self) -> Result<(), String> {
        let asker = EthernetAddress([0x02, 0xba, 0xd1, 0x00, 0x00, 0x01]);
        let replies0 = self.victim.host.net_stats().tx_arp_replies;
        let sent0 = self.victim.io.sent.len();
        let req = ArpFrame::request(asker, Ipv4Addr::new(10, 77, 0, 50), VICTIM_IP);
        let _ = self.peer.io.tx(&req.padded());
        self.peer.io.flush();
        let _ = self.poll_until(Duration::from_secs(5), |l| {
            l.victim.host.net_stats().tx_arp_replies > replies0
        });
        let arp_reply_on_wire = self.victim.io.sent[sent0..].iter().any(|f| {
            f.len() >= 42
                && f[..6] == asker.0
                && f[12..14] == [0x08, 0x06]
                && f[20..22] == [0x00, 0x02]
                && f[22..28] == self.victim_mac.0
        });
        let c = self.connect()?;
        self.legit_write_read(&c, "new_connection_after_barrage")?;
        let report = json!({
            "cases": self.cases,
            "arp_replies": self.victim.host.net_stats().tx_arp_replies - replies0,
            "arp_reply_on_wire": arp_reply_on_wire,
            "mem_changed": self.memory_changed(),
            "victim_shard": format!("{:?}", self.victim.stats()),
        });
        println!("FINAL {report}");
        println!("RESULT done");
        Ok(())
    }
}

/// A BTH destination QP override for hand-made headers.
trait WithBthDest {
    fn with_bth_dest(self, qpn: u32) -> Self;
}

impl WithBthDest for RoceHeaders {
    fn with_bth_dest(mut self, qpn: u32) -> Self {
        self.bth.dest_qp = qpn;
        self
    }
}
