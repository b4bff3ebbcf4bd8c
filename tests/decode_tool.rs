//! `roce-tool decode` run as a program on the real captures in `tests/vectors` and on pcaps
//! written here with damaged frames.

use dpdk_roce::wire::RoceFrame;
use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");
const HISILICON: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/hw-hisilicon-rc-send.pcap"
);
const RXE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/rxe-rdmacm-write-read.pcap"
);

/// Fails the test when a vector file is missing, rather than skipping it.
fn vector(path: &str) -> &str {
    assert!(
        Path::new(path).is_file(),
        "test vector {path} is missing (expected in tests/vectors)"
    );
    path
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(args: &[&str]) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(TOOL)
        .args(args)
        .output()
        .expect("run roce-tool");
    Run {
        code: status.code().expect("exit code"),
        stdout: String::from_utf8(stdout).expect("UTF-8 output"),
        stderr: String::from_utf8(stderr).expect("UTF-8 errors"),
    }
}

fn decode(path: &str, extra: &[&str]) -> Run {
    let mut args = vec!["decode", path];
    args.extend_from_slice(extra);
    run(&args)
}

/// The line of frame `n` (1-based).
fn line(out: &str, n: usize) -> &str {
    let prefix = format!("{n:04}  t=");
    out.lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for frame {n} in:\n{out}"))
}

fn totals(out: &str) -> &str {
    let last = out.lines().last().expect("output");
    assert!(last.starts_with("frames: "), "last line: {last}");
    last
}

#[test]
fn hisilicon_capture_decodes_without_options() {
    let r = decode(vector(HISILICON), &[]);
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    assert_eq!(
        totals(&r.stdout),
        "frames: 123, rocev2: 105, valid: 105, bad icrc: 0, bad length/headers: 0, other: 18"
    );
    // Frame 16 is the worked ICRC vector: an ACK from hardware with 6 credits, sent
    // ECN-capable (this RNIC marks its RoCEv2 packets ECT(0), as DCQCN fabrics expect).
    let ack = line(&r.stdout, 16);
    assert!(
        ack.ends_with(
            "192.168.70.6:72 > 192.168.70.4 ecn=ECT(0) RC Acknowledge QP=0x000045 PSN=0 M AETH(ACK credits=6 MSN=1)"
        ),
        "{ack}"
    );
    let send = line(&r.stdout, 15);
    assert!(
        send.contains("RC SEND only with immediate QP=0x000048 PSN=0 A M pad=3"),
        "{send}"
    );
    assert!(send.ends_with("IMM=0x00000001 payload=141"), "{send}");
    assert!(line(&r.stdout, 118).ends_with("ARP who-has 192.168.70.4 tell 192.168.70.6"));
    assert!(line(&r.stdout, 5).contains("TCP 192.168.70.4:47378 > 192.168.70.6:9000"));
    assert!(!r.stdout.contains("!!"));
}

#[test]
fn rxe_capture_shows_cm_write_read_fields() {
    let r = decode(vector(RXE), &[]);
    assert_eq!(r.code, 0, "stderr: {}", r.stderr);
    assert_eq!(
        totals(&r.stdout),
        "frames: 16, rocev2: 12, valid: 12, bad icrc: 0, bad length/headers: 0, other: 4"
    );
    let req = line(&r.stdout, 1);
    assert!(
        req.contains("UD SEND only QP=0x000001 PSN=82 A DETH(qkey=0x80010000 srcQP=0x1) payload=256 CM REQ local_comm_id=0xac6608b9 service_id=0x0000000001061d2f(port 7471) qpn=0x000017"),
        "{req}"
    );
    assert!(req.ends_with("mtu=1024"), "{req}");
    let rep = line(&r.stdout, 2);
    assert!(
        rep.contains("CM REP local=0xc8577fdb remote=0xac6608b9 qpn=0x000011 start_psn=12726936"),
        "{rep}"
    );
    assert!(line(&r.stdout, 3).ends_with("CM RTU local=0xac6608b9 remote=0xc8577fdb"));
    let write = line(&r.stdout, 4);
    assert!(
        write.contains(
            "192.168.2.25:62017 > 192.168.2.24 RC RDMA WRITE only QP=0x000011 PSN=12726936 A pad=2 RETH(va=0xaaab26b58000, rkey=0x220, len=18) payload=18"
        ),
        "{write}"
    );
    assert!(line(&r.stdout, 5)
        .ends_with("RC Acknowledge QP=0x000017 PSN=12726936 AETH(ACK credits=31 MSN=1)"));
    assert!(line(&r.stdout, 6).contains("RC RDMA READ request QP=0x000011 PSN=12726937 A RETH(va=0xaaab26b58000, rkey=0x220, len=4096)"));
    for n in 7..=10 {
        assert!(line(&r.stdout, n).ends_with("payload=1024"), "frame {n}");
        assert!(
            line(&r.stdout, n).contains("RC RDMA READ response"),
            "frame {n}"
        );
    }
    assert!(line(&r.stdout, 7).contains("AETH(ACK credits=31 MSN=2)"));
    assert!(
        line(&r.stdout, 11).ends_with("CM DREQ local=0xac6608b9 remote=0xc8577fdb qpn=0x000011")
    );
    assert!(line(&r.stdout, 16).ends_with("CM DREP local=0xc8577fdb remote=0xac6608b9"));
}

/// A pcap in the temp directory, removed on drop.
struct TempPcap(PathBuf);

impl TempPcap {
    fn new(tag: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "roce-tool-{tag}-{}-{}.pcap",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        TempPcap(std::env::temp_dir().join(name))
    }

    fn write_frames(tag: &str, frames: &[Vec<u8>]) -> Self {
        let t = TempPcap::new(tag);
        let file = std::fs::File::create(&t.0).expect("create temp pcap");
        let mut w = PcapWriter::new(file).expect("pcap header");
        for (i, f) in frames.iter().enumerate() {
            let ts = Duration::from_micros(1_000_000 + i as u64);
            w.write_packet(&PcapPacket::new(ts, f.len() as u32, f))
                .expect("write frame");
        }
        t
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 temp path")
    }
}

impl Drop for TempPcap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn rxe_frames() -> Vec<Vec<u8>> {
    let f = std::fs::File::open(vector(RXE)).expect("open vector");
    let mut r = PcapReader::new(f).expect("pcap header");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.expect("record").data.into_owned());
    }
    out
}

#[test]
fn damaged_frames_are_marked_and_exit_1() {
    let frames = rxe_frames();
    let write = frames[3].clone();
    let mut bad_icrc = write.clone();
    *bad_icrc.last_mut().unwrap() ^= 0x01;
    let truncated = frames[6][..frames[6].len() - 100].to_vec();
    let t = TempPcap::write_frames("damaged", &[write, bad_icrc, truncated, frames[11].clone()]);
    let r = decode(t.path(), &[]);
    assert_eq!(r.code, 1, "stdout:\n{}\nstderr: {}", r.stdout, r.stderr);
    assert!(!line(&r.stdout, 1).contains("!!"));
    let icrc = line(&r.stdout, 2);
    assert!(
        icrc.contains("RC RDMA WRITE only QP=0x000011 PSN=12726936"),
        "{icrc}"
    );
    assert!(icrc.contains("!! BAD ICRC (expected 0x"), "{icrc}");
    let short = line(&r.stdout, 3);
    assert!(
        short.contains("192.168.2.24:57236 > 192.168.2.25 RC RDMA READ response first QP=0x000017 PSN=12726937"),
        "{short}"
    );
    assert!(short.contains("!! BAD LENGTH ("), "{short}");
    assert!(line(&r.stdout, 4).ends_with("ARP who-has 192.168.2.25 tell 192.168.2.24"));
    assert_eq!(
        totals(&r.stdout),
        "frames: 4, rocev2: 3, valid: 1, bad icrc: 1, bad length/headers: 1, other: 1"
    );
}

#[test]
fn frames_cut_by_the_snap_length_say_so() {
    let frames = rxe_frames();
    let read_resp = &frames[6];
    let t = TempPcap::new("snap");
    let file = std::fs::File::create(&t.0).expect("create temp pcap");
    let mut w = PcapWriter::new(file).expect("pcap header");
    let pkt = PcapPacket::new(
        Duration::from_secs(1),
        read_resp.len() as u32,
        &read_resp[..96],
    );
    w.write_packet(&pkt).expect("write frame");
    drop(w);
    let r = decode(t.path(), &[]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let l = line(&r.stdout, 1);
    assert!(l.contains("!! BAD LENGTH"), "{l}");
    assert!(
        l.ends_with(&format!("[captured 96 of {} bytes]", read_resp.len())),
        "{l}"
    );
}

#[test]
fn extra_udp_port_is_decoded_as_rocev2() {
    let frames = rxe_frames();
    let mut f = RoceFrame::parse(&frames[3]).expect("valid WRITE");
    f.udp.dst_port = 4792;
    f.icrc = f.compute_icrc().expect("icrc");
    let mut moved = vec![0u8; f.buffer_len()];
    f.emit(&mut moved).expect("emit");
    let t = TempPcap::write_frames("port", &[moved]);

    let r = decode(t.path(), &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(line(&r.stdout, 1).ends_with("UDP 192.168.2.25:62017 > 192.168.2.24:4792"));
    assert_eq!(
        totals(&r.stdout),
        "frames: 1, rocev2: 0, valid: 0, bad icrc: 0, bad length/headers: 0, other: 1"
    );

    let r = decode(t.path(), &["--udp-port", "4792"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let l = line(&r.stdout, 1);
    assert!(
        l.contains("192.168.2.25:62017 > 192.168.2.24:4792 RC RDMA WRITE only QP=0x000011"),
        "{l}"
    );
    assert_eq!(
        totals(&r.stdout),
        "frames: 1, rocev2: 1, valid: 1, bad icrc: 0, bad length/headers: 0, other: 0"
    );
}

#[test]
fn unreadable_input_exits_2() {
    let t = TempPcap::new("notpcap");
    std::fs::write(&t.0, b"this is not a pcap file at all\n").expect("write temp file");
    let r = decode(t.path(), &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("not a pcap file"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);

    std::fs::write(&t.0, [0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0]).expect("write temp file");
    let r = decode(t.path(), &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("pcapng is not supported"), "{}", r.stderr);

    let missing = TempPcap::new("missing");
    let r = decode(missing.path(), &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains(missing.path()), "{}", r.stderr);
}

/// A program's log follows `RUST_LOG` (`dpdk_roce::log`): nothing below a warning by default,
/// the connection events at `info`, the requests at `debug` of `dpdk_roce::cm`.
#[test]
fn roce_tool_logs_connection_events_at_the_level_rust_log_asks_for() {
    let run = |log: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_roce-tool"));
        c.args(["simulate", "--count", "10"]).env_remove("RUST_LOG");
        if let Some(l) = log {
            c.env("RUST_LOG", l);
        }
        let out = c.output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let quiet = run(None);
    assert!(
        !quiet.contains(" INFO ") && !quiet.contains(" DEBUG "),
        "{quiet}"
    );
    let info = run(Some("info"));
    assert_eq!(info.matches("connection established").count(), 2, "{info}");
    assert!(!info.contains("connection request"), "{info}");
    let debug = run(Some("dpdk_roce::cm=debug"));
    assert!(
        debug.contains(" DEBUG ") && debug.contains("connection request"),
        "{debug}"
    );
}

/// A `RUST_LOG` that does not parse: the default filter (warnings) is installed and the bad
/// directive reported through it, as a warning of `dpdk_roce::log`.
#[test]
fn roce_tool_reports_a_bad_log_filter_as_a_warning_and_logs_warnings() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_roce-tool"))
        .args(["simulate", "--count", "10"])
        .env("RUST_LOG", "dpdk_roce=loud")
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let reports: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(" WARN dpdk_roce::log: log filter \"dpdk_roce=loud\""))
        .collect();
    assert_eq!(reports.len(), 1, "{err}");
    assert!(reports[0].ends_with("; logging warnings"), "{err}");
    assert!(!err.contains(" INFO "), "the default filter: {err}");
}
