//! scripts/bottleneck.sh: a tbf and an ECN marker (the eBPF program scripts/bpf/ce_marker.c) on
//! the Y side of a veth-join.sh join. Its `up`, `status` and `down` are idempotent and refuse bad
//! input without changing anything; frames that cross the join pass through the marker, which
//! sets CE on ECT frames only when its phantom queue is above the threshold, and the tbf drops
//! what its queue cannot hold. Every test makes its own pairs (`bn` + the process id) and a guard
//! removes them, and the bottleneck's files, even when an assertion fails.

mod scripts_common;
use scripts_common::*;

use std::ffi::CString;
use std::process::Output;
use std::time::{Duration, Instant};

const RUN_DIR: &str = "/run/dpdk-roce/bottleneck";

/// Two veth pairs X and Y (maybe joined, maybe with a bottleneck); all of it goes when dropped.
struct Link {
    x: String,
    y: String,
}

impl Link {
    /// Names only: `bn<pid><tag>x` and `bn<pid><tag>y`; nothing is created yet.
    fn named(tag: char) -> Link {
        let p = format!("bn{}{tag}", pid_tag());
        Link {
            x: format!("{p}x"),
            y: format!("{p}y"),
        }
    }

    fn pairs(&self) {
        run_ok("veth.sh", &["up", &self.x], &[]);
        run_ok("veth.sh", &["up", &self.y], &[]);
    }

    fn join(&self) {
        run_ok("veth-join.sh", &["up", &self.x, &self.y], &[]);
    }

    fn xa(&self) -> String {
        format!("{}a", self.x)
    }
    fn xb(&self) -> String {
        format!("{}b", self.x)
    }
    fn ya(&self) -> String {
        format!("{}a", self.y)
    }
    fn yb(&self) -> String {
        format!("{}b", self.y)
    }

    /// `bottleneck.sh CMD X Y ARGS...`
    fn bn(&self, command: &str, args: &[&str]) -> Output {
        let mut all = vec![command, &self.x, &self.y];
        all.extend_from_slice(args);
        run("bottleneck.sh", &all, &[])
    }

    #[track_caller]
    fn bn_ok(&self, command: &str, args: &[&str]) -> String {
        let out = self.bn(command, args);
        assert!(
            out.status.success(),
            "bottleneck.sh {command} {args:?}: {}",
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The counters of `status`.
    #[track_caller]
    fn counters(&self) -> Counters {
        let line = self.bn_ok("status", &[]);
        let n = |k: &str| -> u64 {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(k))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {k}N in {line}"))
        };
        Counters {
            packets: n("packets="),
            ect: n("ect="),
            marked: n("marked="),
            dropped: n("dropped="),
        }
    }

    /// Everything bottleneck.sh could change: Ya's and Xb's qdiscs and filters (but the tc action
    /// indexes, which a new join allocates afresh), and its files.
    fn state(&self) -> String {
        let mut s = String::new();
        for dev in [self.ya(), self.xb()] {
            for args in [
                vec!["qdisc", "show", "dev", &dev],
                vec!["filter", "show", "dev", &dev, "ingress"],
                vec!["filter", "show", "dev", &dev, "egress"],
            ] {
                for line in String::from_utf8_lossy(&cmd("tc", &args).stdout).lines() {
                    if !line.trim_start().starts_with("index ") {
                        s += line;
                        s += "\n";
                    }
                }
            }
        }
        for f in self.files() {
            s += &format!("{f}: {}\n", std::path::Path::new(&f).exists());
        }
        s
    }

    /// The files `up` writes for this bottleneck.
    fn files(&self) -> [String; 2] {
        let ya = self.ya();
        [
            format!("{RUN_DIR}/ce_marker-{ya}.o"),
            format!("{RUN_DIR}/{ya}.conf"),
        ]
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        run("bottleneck.sh", &["down", &self.x, &self.y], &[]);
        run("veth.sh", &["down", &self.x], &[]);
        run("veth.sh", &["down", &self.y], &[]);
    }
}

#[derive(Clone, Copy, Debug)]
struct Counters {
    packets: u64,
    ect: u64,
    marked: u64,
    dropped: u64,
}

impl std::ops::Sub for Counters {
    type Output = Counters;
    fn sub(self, o: Counters) -> Counters {
        Counters {
            packets: self.packets - o.packets,
            ect: self.ect - o.ect,
            marked: self.marked - o.marked,
            dropped: self.dropped - o.dropped,
        }
    }
}

fn tc(args: &[&str]) -> String {
    let out = cmd("tc", args);
    assert!(out.status.success(), "tc {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[track_caller]
fn assert_code(out: &Output, code: i32, what: &str) {
    assert_eq!(out.status.code(), Some(code), "{what}: {}", text(out));
}

#[test]
fn bottleneck_up_status_down_idempotent_and_refusing() {
    require_root();
    let link = Link::named('c');
    let (xb, ya) = (link.xb(), link.ya());

    // Nothing there yet: up and status refuse, down has nothing to do.
    assert_code(&link.bn("up", &["300mbit"]), 1, "up without the pairs");
    assert_code(&link.bn("status", &[]), 1, "status without the pairs");
    link.bn_ok("down", &[]);
    link.pairs();
    let before = link.state();
    assert_code(&link.bn("up", &["300mbit"]), 1, "up without the join");
    assert_eq!(link.state(), before, "a refused up changed something");
    link.join();

    // Bad usage, rates and sizes: exit 2, nothing changed.
    let before = link.state();
    for args in [
        vec![],
        vec!["fast"],
        vec!["10%"],
        vec!["1kbit"],
        vec!["1tbit"],
        vec!["300mbit", "--queue"],
        vec!["300mbit", "--queue", "lots"],
        vec!["300mbit", "--mark-at", "-1"],
        vec!["300mbit", "--mark-at", "128kb"], // above the 64 KiB queue
        vec!["300mbit", "--burst", "1000"],    // below a full frame
        vec!["300mbit", "--queue", "1k", "--mark-at", "0"],
        vec!["300mbit", "--drain", "40"],
        vec!["300mbit", "--drain", "101"],
        vec!["300mbit", "--drain", "x"],
        vec!["300mbit", "--colour", "red"],
    ] {
        assert_code(&link.bn("up", &args), 2, &format!("up {args:?}"));
        assert_eq!(link.state(), before, "up {args:?} changed something");
    }
    for args in [
        vec!["up", &link.x, &link.x, "300mbit"],
        vec!["up", "bad/name", &link.y, "300mbit"],
        vec!["status", &link.x],
        vec!["down", &link.x, &link.y, "now"],
        vec!["sideways", &link.x, &link.y],
    ] {
        let out = run("bottleneck.sh", &args, &[]);
        assert_code(&out, 2, &format!("{args:?}"));
        assert_eq!(link.state(), before, "{args:?} changed something");
    }
    // The join the other way round (Yb -> Xa) does not exist.
    let out = run("bottleneck.sh", &["up", &link.y, &link.x, "300mbit"], &[]);
    assert_code(&out, 1, "up Y X");
    assert_eq!(link.state(), before);

    // Not ours: a root qdisc or an egress filter someone else put on Ya stays, and up refuses.
    tc(&["qdisc", "add", "dev", &ya, "root", "handle", "1:", "htb"]);
    let foreign = link.state();
    assert_code(&link.bn("up", &["300mbit"]), 1, "up over an htb");
    assert_eq!(link.state(), foreign, "up touched the htb");
    link.bn_ok("down", &[]);
    assert_eq!(link.state(), foreign, "down touched the htb");
    tc(&["qdisc", "del", "dev", &ya, "root"]);
    let accept = "1,6 0 0 0,"; // cBPF `ret #0`: TC_ACT_OK in direct-action mode
    let filter = [
        "egress", "pref", "5", "handle", "5", "bpf", "da", "bytecode", accept,
    ];
    tc(&[&["filter", "add", "dev", &ya][..], &filter].concat());
    let foreign = link.state();
    assert_code(&link.bn("up", &["300mbit"]), 1, "up over an egress filter");
    assert_eq!(link.state(), foreign, "up touched the egress filter");
    tc(&["filter", "del", "dev", &ya, "egress", "pref", "5"]);
    assert_eq!(link.state(), before);
    assert_eq!(
        link.bn_ok("status", &[]).trim(),
        format!("bottleneck {ya}: not present")
    );

    // Up: the tbf on Ya's root, the marker on Ya's egress, the join's filters untouched.
    let join_filters = tc(&["filter", "show", "dev", &ya, "ingress"]);
    link.bn_ok("up", &["300mbit"]);
    assert_eq!(
        link.bn_ok("status", &[]).trim(),
        format!(
            "bottleneck {ya}: rate=300mbit queue=65536 mark_at=16384 packets=0 ect=0 marked=0 \
             dropped=0"
        )
    );
    let qdisc = tc(&["qdisc", "show", "dev", &ya, "root"]);
    assert!(qdisc.starts_with("qdisc tbf ce: root"), "{qdisc}");
    // tc shows the limit as the latency it allows: (64 KiB - 16 KiB) at 300 Mbit/s.
    assert!(
        qdisc.contains("rate 300Mbit") && qdisc.contains("lat 1.31ms"),
        "{qdisc}"
    );
    let egress = tc(&["filter", "show", "dev", &ya, "egress"]);
    assert!(
        egress.contains(&format!("ce_marker-{ya}.o:[tc] direct-action")),
        "{egress}"
    );
    assert_eq!(tc(&["filter", "show", "dev", &ya, "ingress"]), join_filters);
    for f in link.files() {
        assert!(std::path::Path::new(&f).exists(), "{f} missing after up");
    }

    // Up again, other settings: replaced, not added to.
    link.bn_ok(
        "up",
        &[
            "1.5gbit",
            "--queue",
            "256kb",
            "--mark-at",
            "30000",
            "--burst",
            "32k",
        ],
    );
    assert_eq!(
        link.bn_ok("status", &[]).trim(),
        format!(
            "bottleneck {ya}: rate=1.5gbit queue=262144 mark_at=30000 packets=0 ect=0 marked=0 \
             dropped=0"
        )
    );
    let egress = tc(&["filter", "show", "dev", &ya, "egress"]);
    assert_eq!(egress.matches("handle").count(), 1, "{egress}");
    assert_eq!(
        tc(&["qdisc", "show", "dev", &ya, "root"]).lines().count(),
        1
    );
    assert_eq!(tc(&["filter", "show", "dev", &ya, "ingress"]), join_filters);
    let up = link.state();
    // A refused up leaves the working bottleneck alone.
    assert_code(&link.bn("up", &["fast"]), 2, "up fast over a bottleneck");
    assert_eq!(link.state(), up);

    // veth-join.sh's up makes a new clsact qdisc, without the marker: status says so.
    link.join();
    let out = link.bn("status", &[]);
    assert_code(&out, 1, "status without the marker");
    assert!(
        text(&out).contains("run bottleneck.sh up again"),
        "{}",
        text(&out)
    );
    link.bn_ok("up", &["300mbit"]);
    link.counters();

    // Down: the tbf, the marker and the files go, the join stays; twice is fine.
    link.bn_ok("down", &[]);
    assert_eq!(
        link.state(),
        before,
        "down did not restore the joined pairs"
    );
    assert!(
        tc(&["filter", "show", "dev", &xb, "ingress"])
            .contains(&format!("Egress Redirect to device {ya})")),
        "the join went with down"
    );
    link.bn_ok("down", &[]);
    assert_eq!(link.state(), before);
    assert_eq!(
        link.bn_ok("status", &[]).trim(),
        format!("bottleneck {ya}: not present")
    );
}

// ---- Frames: IPv4/IPv6 UDP with a chosen ECN field, sent and received by packet sockets ----

const NOT_ECT: u8 = 0;
const ECT1: u8 = 1;
const ECT0: u8 = 2;
const CE: u8 = 3;
/// Every test frame is this long (Ethernet header included), IPv4 and IPv6 alike.
const FRAME_LEN: usize = 1042;
const MAGIC: &[u8; 4] = b"bnCE";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ip {
    V4,
    V6,
}

/// Where the test payload starts: after Ethernet, IP and UDP headers.
fn payload_at(ip: Ip) -> usize {
    match ip {
        Ip::V4 => 14 + 20 + 8,
        Ip::V6 => 14 + 40 + 8,
    }
}

/// The Internet checksum of the concatenated parts (each of even length but the last).
fn checksum(parts: &[&[u8]]) -> u16 {
    let mut sum = 0u32;
    for part in parts {
        for w in part.chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A UDP frame of FRAME_LEN bytes; the payload names the test process, the phase, the frame's
/// index in it and the ECN field it was sent with.
fn frame(ip: Ip, ecn: u8, phase: u8, index: u32, src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME_LEN);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    let at = payload_at(ip);
    let udp_len = (FRAME_LEN - at + 8) as u16;
    let mut payload = vec![0u8; FRAME_LEN - at];
    payload[..4].copy_from_slice(MAGIC);
    payload[4..8].copy_from_slice(&std::process::id().to_be_bytes());
    payload[8] = phase;
    payload[9] = ecn;
    payload[10..14].copy_from_slice(&index.to_be_bytes());
    let mut udp = Vec::with_capacity(8);
    udp.extend_from_slice(&40000u16.to_be_bytes());
    udp.extend_from_slice(&9u16.to_be_bytes()); // discard
    udp.extend_from_slice(&udp_len.to_be_bytes());
    match ip {
        Ip::V4 => {
            f.extend_from_slice(&0x0800u16.to_be_bytes());
            let mut h = [0u8; 20];
            h[0] = 0x45;
            h[1] = ecn; // DSCP 0
            h[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
            h[4..6].copy_from_slice(&(index as u16).to_be_bytes());
            h[6] = 0x40; // don't fragment
            h[8] = 64;
            h[9] = 17;
            h[12..16].copy_from_slice(&[10, 77, 9, 1]);
            h[16..20].copy_from_slice(&[10, 77, 9, 2]);
            let c = checksum(&[&h]);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            f.extend_from_slice(&h);
            udp.extend_from_slice(&0u16.to_be_bytes()); // no UDP checksum (IPv4 allows it)
        }
        Ip::V6 => {
            f.extend_from_slice(&0x86ddu16.to_be_bytes());
            let mut h = [0u8; 40];
            h[0] = 0x60;
            h[1] = ecn << 4; // traffic class = DSCP 0, ECN
            h[4..6].copy_from_slice(&udp_len.to_be_bytes());
            h[6] = 17;
            h[7] = 64;
            h[8..24].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
            h[24..40].copy_from_slice(&[0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
            let pseudo_tail = [0, 0, (udp_len >> 8) as u8, udp_len as u8, 0, 0, 0, 17];
            let c = checksum(&[&h[8..40], &pseudo_tail, &udp, &[0, 0], &payload]);
            f.extend_from_slice(&h);
            udp.extend_from_slice(&c.to_be_bytes());
        }
    }
    f.extend_from_slice(&udp);
    f.extend_from_slice(&payload);
    assert_eq!(f.len(), FRAME_LEN);
    f
}

/// A test frame as it arrived.
#[derive(Debug)]
struct Arrived {
    ip: Ip,
    phase: u8,
    index: u32,
    sent_ecn: u8,
    ecn: u8,
    /// The IPv4 header checksum still adds up (always true for IPv6).
    header_ok: bool,
}

fn parse(f: &[u8]) -> Option<Arrived> {
    let ip = match f.get(12..14)? {
        [0x08, 0x00] => Ip::V4,
        [0x86, 0xdd] => Ip::V6,
        _ => return None,
    };
    let p = f.get(payload_at(ip)..payload_at(ip) + 14)?;
    if &p[..4] != MAGIC || p[4..8] != std::process::id().to_be_bytes() {
        return None;
    }
    let (ecn, header_ok) = match ip {
        Ip::V4 => (f[15] & 3, checksum(&[&f[14..34]]) == 0),
        Ip::V6 => (f[15] >> 4 & 3, true),
    };
    Some(Arrived {
        ip,
        phase: p[8],
        index: u32::from_be_bytes(p[10..14].try_into().unwrap()),
        sent_ecn: p[9],
        ecn,
        header_ok,
    })
}

/// An AF_PACKET socket on one interface.
struct PacketSocket {
    fd: i32,
    ifindex: i32,
}

impl PacketSocket {
    /// protocol 0: receives nothing until bound with a protocol.
    fn open(dev: &str) -> PacketSocket {
        let name = CString::new(dev).unwrap();
        // SAFETY: `name` is a NUL-terminated string that outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) } as i32;
        assert!(ifindex > 0, "no interface {dev}");
        // SAFETY: plain system call, no pointers.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        assert!(
            fd >= 0,
            "AF_PACKET socket: {}",
            std::io::Error::last_os_error()
        );
        let s = PacketSocket { fd, ifindex };
        // Room for every frame of a burst, queued or in flight.
        s.set_int(libc::SO_SNDBUFFORCE, 8 << 20);
        s.set_int(libc::SO_RCVBUFFORCE, 8 << 20);
        s
    }

    fn set_int(&self, option: i32, value: i32) {
        // SAFETY: `value` is a live i32 and its size is passed.
        let r = unsafe {
            libc::setsockopt(
                self.fd,
                libc::SOL_SOCKET,
                option,
                (&value as *const i32).cast(),
                std::mem::size_of::<i32>() as u32,
            )
        };
        assert_eq!(
            r,
            0,
            "setsockopt {option}: {}",
            std::io::Error::last_os_error()
        );
    }

    fn address(&self, protocol: u16, dst: [u8; 6]) -> libc::sockaddr_ll {
        let mut addr = [0u8; 8];
        addr[..6].copy_from_slice(&dst);
        libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: protocol.to_be(),
            sll_ifindex: self.ifindex,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 6,
            sll_addr: addr,
        }
    }

    /// Receives every frame of its interface, both directions, from now on.
    fn tap(dev: &str) -> PacketSocket {
        let s = PacketSocket::open(dev);
        let addr = s.address(libc::ETH_P_ALL as u16, [0; 6]);
        // SAFETY: `addr` is a live sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                s.fd,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(r, 0, "bind to {dev}: {}", std::io::Error::last_os_error());
        s
    }

    fn send(&self, frame: &[u8]) {
        let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
        let addr = self.address(ethertype, frame[..6].try_into().unwrap());
        // SAFETY: `frame` and `addr` are live for the call and their sizes are passed.
        let n = unsafe {
            libc::sendto(
                self.fd,
                frame.as_ptr().cast(),
                frame.len(),
                0,
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(
            n,
            frame.len() as isize,
            "sendto: {}",
            std::io::Error::last_os_error()
        );
    }

    /// This test's frames now queued on the socket (without waiting).
    fn drain(&self, into: &mut Vec<Arrived>) {
        let mut buf = [0u8; 2048];
        loop {
            // SAFETY: `buf` is live and writable for its length.
            let n = unsafe {
                libc::recv(
                    self.fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "recv: {e}");
                return;
            }
            into.extend(parse(&buf[..n as usize]));
        }
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this socket's own and closed once.
        unsafe { libc::close(self.fd) };
    }
}

fn mac(dev: &str) -> [u8; 6] {
    let s = std::fs::read_to_string(format!("/sys/class/net/{dev}/address")).unwrap();
    let v: Vec<u8> = s
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    v.try_into().unwrap()
}

/// Waits until every frame of a phase is accounted for: seen by the marker, and then either
/// received on Yb or dropped by the tbf. Returns the phase's frames and the counters since `from`.
#[track_caller]
fn settle(
    link: &Link,
    rx: &PacketSocket,
    phase: u8,
    sent: u64,
    from: Counters,
) -> (Vec<Arrived>, Counters) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    loop {
        rx.drain(&mut got);
        got.retain(|a| a.phase == phase);
        let d = link.counters() - from;
        if d.packets >= sent && got.len() as u64 + d.dropped == sent {
            return (got, d);
        }
        assert!(
            Instant::now() < deadline,
            "phase {phase}: of {sent} frames, {} received, {d:?}",
            got.len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn bottleneck_marks_ect_frames_above_the_threshold_and_drops_on_overflow() {
    require_root();
    let link = Link::named('t');
    link.pairs();
    link.join();
    // 100 Mbit/s: a 1042-byte frame every 83 us. Defaults: queue 64 KiB, burst 16 KiB, marks
    // above 16 KiB (15.7 frames) in the phantom queue.
    link.bn_ok("up", &["100mbit"]);
    let (src, dst) = (mac(&link.xa()), mac(&link.yb()));
    let tx = PacketSocket::open(&link.xa());
    let rx = PacketSocket::tap(&link.yb());
    let start = link.counters();

    // Phase 1, a low rate: one ECT(0) frame every 2 ms (4 % of the rate). The phantom queue never
    // holds more than one frame (a sleep can only make the gaps longer): nothing is marked.
    let slow = 40u32;
    for i in 0..slow {
        tx.send(&frame(Ip::V4, ECT0, 1, i, src, dst));
        std::thread::sleep(Duration::from_millis(2));
    }
    let (got, d) = settle(&link, &rx, 1, slow.into(), start);
    eprintln!("low rate: {d:?}");
    assert_eq!((d.ect, d.marked, d.dropped), (40, 0, 0), "low rate: {d:?}");
    assert_eq!(got.len(), 40);
    assert!(got.iter().all(|a| a.ecn == ECT0 && a.header_ok), "{got:?}");

    // Phase 2, a burst far above the rate: 300 frames back to back (~3 Gbit/s or more), of five
    // kinds in turn. A packet socket on Xb holds a clone of every frame the marker sees, as a
    // capture would: the marker must still be able to write the headers.
    let kinds = [
        (Ip::V4, ECT0),
        (Ip::V4, ECT1),
        (Ip::V4, NOT_ECT),
        (Ip::V6, ECT0),
        (Ip::V6, NOT_ECT),
    ];
    let burst = 300u32;
    let capture = PacketSocket::tap(&link.xb());
    let before = link.counters();
    for i in 0..burst {
        let (ip, ecn) = kinds[i as usize % kinds.len()];
        tx.send(&frame(ip, ecn, 2, i, src, dst));
    }
    let (got, d) = settle(&link, &rx, 2, burst.into(), before);
    drop(capture);
    let ce = |ip: Ip, sent: u8| {
        got.iter()
            .filter(|a| a.ip == ip && a.sent_ecn == sent && a.ecn == CE)
            .count()
    };
    eprintln!(
        "burst: {d:?}; received {} of which CE: v4 ECT(0) {}, v4 ECT(1) {}, v6 ECT(0) {}",
        got.len(),
        ce(Ip::V4, ECT0),
        ce(Ip::V4, ECT1),
        ce(Ip::V6, ECT0)
    );
    assert_eq!(d.ect, 180, "three kinds in five are ECT: {d:?}");
    assert!(d.marked > 0 && d.marked <= d.ect, "{d:?}");
    // The tbf holds 16 KiB (burst) + 64 KiB (queue), ~78 frames; the rest is dropped.
    assert!(d.dropped > 0, "nothing dropped: {d:?}");
    assert!(d.dropped < u64::from(burst), "everything dropped: {d:?}");
    for a in &got {
        assert!(a.header_ok, "bad IPv4 header checksum after marking: {a:?}");
        if a.sent_ecn == NOT_ECT {
            assert_eq!(a.ecn, NOT_ECT, "a Not-ECT frame was changed: {a:?}");
        } else {
            assert!(a.ecn == a.sent_ecn || a.ecn == CE, "{a:?}");
        }
        // The phantom queue ahead of the burst's i-th frame holds at most i frames: the first
        // 15 (15 630 bytes) are below the 16 KiB threshold.
        if a.index < 15 {
            assert_ne!(a.ecn, CE, "marked below the threshold: {a:?}");
        }
    }
    for (ip, ecn) in [(Ip::V4, ECT0), (Ip::V4, ECT1), (Ip::V6, ECT0)] {
        assert!(
            ce(ip, ecn) > 0,
            "no {ip:?} frame sent with ECN {ecn} arrived as CE"
        );
    }
    let received_ce = got.iter().filter(|a| a.ecn == CE).count() as u64;
    assert!(received_ce <= d.marked, "{received_ce} CE frames, {d:?}");

    link.bn_ok("down", &[]);
    for f in link.files() {
        assert!(!std::path::Path::new(&f).exists(), "{f} left after down");
    }
}
