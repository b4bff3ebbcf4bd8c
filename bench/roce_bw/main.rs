//! roce-bw: perftest-style RDMA bandwidth and message rate between two processes over a DPDK
//! port (`ib_write_bw`, `ib_send_bw`, `ib_read_bw`, `ib_atomic_bw`).
//!
//! ```text
//! roce-bw --profile dpdk-config/memif-server.toml
//! roce-bw --profile dpdk-config/memif-client.toml -s 64 -t 128 10.77.3.1
//! ```
//! As perftest's: the program without a server address is the server; with one (or
//! `--client --server-ip`) the client.
//! The client streams work requests over `-q` connections, at most `-t` messages outstanding
//! per connection, posted in lists of `-l`, one in `--cq-mod` signaled, for `-n` messages per
//! connection or `-D` seconds; `-b` streams both ways at once; `-a` runs every power of two from
//! 2 B to 8 MiB. The server takes every test parameter from the client's connection request.
//! Output: perftest's test-info block and table (`#bytes #iterations BW peak BW average
//! MsgRate`; MB/sec is MiB/s, 2^20 bytes, or Gb/sec, 10^9 bits, with `--report_gbits`),
//! `--cpu_util` adds perftest's CPU column; `--json FILE` writes the rows with both sides' CPU
//! use.
//!
//! `--raw` (the client's flag; the server follows) blasts plain Ethernet frames one way through
//! the same port, queue and poll loop before each size's RDMA test (the server counts them in a
//! raw channel beside the stack, `engine::raw_l2`): the PMD's frame rate measured in the same
//! run, printed with the ratio of the RDMA figures to it.
//!
//! `--verify` checks every byte: a WRITE is followed by a zero-length SEND with immediate
//! naming it, on whose receive the server checks the written slot (receives come back only
//! after the check, so a slot is never overwritten before it was checked); a SEND is checked in
//! its receive buffer; a READ's buffer is cleared before the READ and checked after; every
//! atomic fetch-and-add must return the count of the ones before it.
//!
//! Each process drives its shard inline (one polling thread), so two processes fit two cores.

use clap::{Parser, ValueEnum};
use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::config::Profile;
use dpdk_roce::dpdk::{DpdkFrameIo, ProfilePort};
use dpdk_roce::engine::raw_l2::{RawChannel, RawMode};
use dpdk_roce::engine::shard::Shard;
use dpdk_roce::host::QpOptions;
use dpdk_roce::io::FrameIo;
use dpdk_roce::mem::access::Access;
use dpdk_roce::mem::{MrTable, Region};
use dpdk_roce::transport::types::{
    RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use dpdk_roce::wire::psn::Psn;
use roce_bench::args::{PayloadArgs, PeerArgs, PerftestCompat};
use roce_bench::{poll_until, BenchIo, BenchShard};
use roce_perf::perftest::RULE;
use roce_perf::progress::Progress;
use roce_sim::payload;
use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod dat_client;
mod probe;
mod report;
mod stream;

use stream::{Poster, StreamSet};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Op {
    Write,
    Send,
    Read,
    Atomic,
}

impl Op {
    const ALL: [Op; 4] = [Op::Write, Op::Send, Op::Read, Op::Atomic];

    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(c: u8) -> Option<Op> {
        Op::ALL.into_iter().find(|o| o.code() == c)
    }

    /// perftest's name of the test (its `testsStr`; the atomic is a FETCH_AND_ADD).
    fn label(self) -> &'static str {
        match self {
            Op::Write => "RDMA_Write",
            Op::Send => "Send",
            Op::Read => "RDMA_Read",
            Op::Atomic => "Atomic",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Api {
    Rust,
    Dat,
}

#[derive(Parser, Debug)]
#[command(
    name = "roce-bw",
    version,
    about = "perftest-style RDMA bandwidth and message rate over a DPDK port",
    long_about = "perftest-style RDMA bandwidth and message rate over a DPDK port. Without a \
                  server address (and without --client) this process is the server, as \
                  perftest's; with one it is the client. Note: MB/sec is MiB/s (2^20 bytes), \
                  Gb/sec is 10^9 bits/s, as perftest's.",
    // `--server` and `--client` (`PeerArgs`) in this program's words: its server takes the
    // test parameters from the client.
    mut_arg("server", |a| a.help(
        "Run the server side (listens; takes the test parameters from the client). The \
         default without a server address"
    )),
    mut_arg("client", |a| a.help("Run the client side (connects, streams, reports)"))
)]
struct Args {
    /// dpdk-config profile of this process (with `--api rust`).
    #[arg(long, required_unless_present = "ia")]
    profile: Option<PathBuf>,
    /// The API the client streams through: the provider's Rust API, or the DAT C API
    /// (libdat2 loads the provider through dat.conf: `DAT_OVERRIDE` or /etc/dat.conf).
    #[arg(long, value_enum, default_value_t = Api::Rust, requires_if("dat", "ia"))]
    api: Api,
    /// The IA name in dat.conf (`--api dat`).
    #[arg(long)]
    ia: Option<String>,
    #[command(flatten)]
    peer: PeerArgs,
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
    /// Message size in bytes (1 ..= 8 MiB; atomics are 8 B).
    #[arg(short = 's', long, default_value_t = 65536)]
    size: usize,
    /// Every power of two from 2 B to 8 MiB, whatever `--size` says (perftest -a).
    #[arg(short = 'a', long = "all")]
    all: bool,
    /// Messages per connection and size.
    #[arg(short = 'n', long = "iters", default_value_t = 5000)]
    iters: u32,
    /// Run each size for this many seconds instead of `--iters` messages.
    #[arg(short = 'D', long = "duration")]
    duration: Option<u16>,
    /// Connections (queue pairs).
    #[arg(short = 'q', long = "qps", default_value_t = 1)]
    qps: u16,
    /// Messages outstanding per connection.
    #[arg(short = 't', long = "tx-depth", default_value_t = 128)]
    tx_depth: u16,
    /// Work requests posted together (a post list).
    #[arg(short = 'l', long = "post-list", default_value_t = 1)]
    post_list: u16,
    /// Signal one work request in this many (the others complete silently).
    #[arg(short = 'Q', long = "cq-mod", default_value_t = 100)]
    cq_mod: u16,
    /// Stream both ways at once; the table sums both directions.
    #[arg(short = 'b', long = "bidirectional")]
    bidirectional: bool,
    #[command(flatten)]
    compat: PerftestCompat,
    /// Report bandwidth in Gb/sec (10^9 bits/s) instead of MB/sec (MiB/s: 2^20 bytes/s).
    #[arg(long = "report_gbits", alias = "report-gbits")]
    report_gbits: bool,
    /// Add perftest's CPU_Util[%] column: this side's time on the CPU over the test (the
    /// JSON has both sides' always).
    #[arg(long = "cpu_util", alias = "cpu-util")]
    cpu_util: bool,
    /// Write the table as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Plot bandwidth (in the table's unit) and message rate against message size to this
    /// .svg or .png file (with `-a`, a sweep).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Before each size, blast plain Ethernet frames one way through the same port and loop
    /// (no RoCE) and print the PMD's rate and the ratio of the RDMA figures to it.
    #[arg(long)]
    raw: bool,
    /// Local ACK timeout exponent of the connections (perftest -u): 4.096 us * 2^N before
    /// an unanswered request is sent again; 0 waits forever. The REQ carries it, so both
    /// sides use it. perftest's default, 14 (67 ms).
    #[arg(short = 'u', long = "qp-timeout", default_value_t = 14,
          value_parser = clap::value_parser!(u8).range(0..=31))]
    qp_timeout: u8,
    /// Give up when the peer does not answer for this many milliseconds.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    #[command(flatten)]
    payload: PayloadArgs,
    /// Time each side's loop by stage (PMD receive, handling, frame build, copy into the
    /// mbuf, TX burst, the rest) and print it per message, both sides (the clock reads add
    /// to every stage they time).
    #[arg(long)]
    stages: bool,
    /// A latency probe beside the stream: one more QP on which the client sends 64 bytes
    /// and the server sends them back, one round trip at a time 200 us apart; prints the
    /// round trips alone (1 s before the stream) and while the stream runs.
    #[arg(long)]
    probe: bool,
}

/// The largest message, and the last size of `-a`: 8 MiB, as perftest's.
const MAX_SIZE: usize = 1 << 23;
/// Bytes of a control message (`Ctl`): its kind and four numbers. A plain SEND where the
/// stream sends none (WRITE, READ, atomics); in a SEND stream the kind is in the immediate
/// data too (`CTL_BIT`), which data SENDs lack. A DAT client (`--api dat`), which has no SEND
/// with immediate, writes its control messages into the server's inboxes with RDMA WRITE with
/// immediate `CTL_BIT | inbox`.
const CTL_LEN: usize = 40;
/// Control messages kept in flight at once (each has its own source slot).
const CTL_SLOTS: usize = 16;
/// Receives every QP keeps for control messages (beyond those of a SEND stream).
const CTL_RECVS: u32 = 8;
/// The immediate-data bit marking a control message; below it: a verify marker's number.
const CTL_BIT: u32 = 1 << 31;
/// The wr_id bit of a control SEND.
const CTL_WRID: u64 = 1 << 63;
/// Largest region each side registers for the message slots (without `--verify` the
/// connections share them).
const SLOT_AREA_CAP: usize = 64 << 20;
/// Largest region `--verify` may ask for (every connection has slots of its own).
const VERIFY_AREA_CAP: usize = 256 << 20;
/// Messages posted between two turns of the poll loop.
const POST_BUDGET: usize = 64;
/// The raw blast's EtherType (IEEE 802 local experimental) and its frames per TX burst.
const RAW_ETHERTYPE: u16 = 0x88b6;
const RAW_BURST: usize = 32;
/// How often the loop reads the clock (deadlines, `-D`).
const CLOCK_EVERY: u32 = 256;
/// The window of the peak rate: the best rate over any stretch at least this long (or a
/// twentieth of the run, whichever is longer).
const PEAK_WINDOW: Duration = Duration::from_millis(1);
const PEER_GONE_WAIT: Duration = Duration::from_secs(3);

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let mut args = Args::parse();
    if let Err(e) = args.peer.resolve_role() {
        eprintln!("roce-bw: {e}");
        return ExitCode::FAILURE;
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-bw: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The test as the client asks for it: carried in every connection request's private data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Params {
    op: Op,
    verify: bool,
    bidirectional: bool,
    raw: bool,
    all: bool,
    size: u32,
    iters: u32,
    duration_s: u16,
    tx_depth: u16,
    post_list: u16,
    cq_mod: u16,
    qps: u16,
    stages: bool,
    probe: bool,
}

const PARAMS_LEN: usize = 20;

impl Params {
    fn from_args(a: &Args) -> Result<Params, String> {
        let size = match a.op {
            Op::Atomic => 8,
            _ if a.all => MAX_SIZE,
            _ => a.size,
        };
        if !(1..=MAX_SIZE).contains(&size) {
            return Err(format!("-s must be 1..={MAX_SIZE}"));
        }
        if a.iters == 0 && a.duration.is_none() {
            return Err("-n must be at least 1".into());
        }
        if a.duration == Some(0) {
            return Err("-D must be at least 1 second".into());
        }
        if a.qps == 0 || a.tx_depth == 0 || a.post_list == 0 || a.cq_mod == 0 {
            return Err("-q, -t, -l and --cq-mod must be at least 1".into());
        }
        if a.post_list > a.tx_depth {
            return Err("-l must not exceed -t".into());
        }
        if a.probe && a.api == Api::Dat {
            return Err("--probe runs on the Rust API (--api rust)".into());
        }
        Ok(Params {
            op: a.op,
            verify: a.payload.verify,
            bidirectional: a.bidirectional,
            raw: a.raw,
            all: a.all && a.op != Op::Atomic,
            size: size as u32,
            iters: a.iters,
            duration_s: a.duration.unwrap_or(0),
            tx_depth: a.tx_depth,
            post_list: a.post_list,
            // Checking a READ or an atomic needs its own completion.
            cq_mod: if a.payload.verify && matches!(a.op, Op::Read | Op::Atomic) {
                1
            } else {
                a.cq_mod.min(a.tx_depth)
            },
            qps: a.qps,
            stages: a.stages,
            probe: a.probe,
        })
    }

    fn encode(&self) -> [u8; PARAMS_LEN] {
        let mut b = [0u8; PARAMS_LEN];
        b[0] = self.op.code();
        b[1] = u8::from(self.verify)
            | u8::from(self.bidirectional) << 1
            | u8::from(self.raw) << 2
            | u8::from(self.all) << 3
            | u8::from(self.stages) << 4
            | u8::from(self.probe) << 5;
        b[2..6].copy_from_slice(&self.size.to_be_bytes());
        b[6..10].copy_from_slice(&self.iters.to_be_bytes());
        b[10..12].copy_from_slice(&self.duration_s.to_be_bytes());
        b[12..14].copy_from_slice(&self.tx_depth.to_be_bytes());
        b[14..16].copy_from_slice(&self.post_list.to_be_bytes());
        b[16..18].copy_from_slice(&self.cq_mod.to_be_bytes());
        b[18..20].copy_from_slice(&self.qps.to_be_bytes());
        b
    }

    /// The peer's parameters, checked as `from_args` checks ours.
    fn decode(b: &[u8]) -> Result<Params, String> {
        if b.len() < PARAMS_LEN {
            return Err(format!("test parameters of {} bytes", b.len()));
        }
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let p = Params {
            op: Op::from_code(b[0]).ok_or("unknown operation")?,
            verify: b[1] & 1 != 0,
            bidirectional: b[1] & 2 != 0,
            raw: b[1] & 4 != 0,
            all: b[1] & 8 != 0,
            size: u32_at(2),
            iters: u32_at(6),
            duration_s: u16_at(10),
            tx_depth: u16_at(12),
            post_list: u16_at(14),
            cq_mod: u16_at(16),
            qps: u16_at(18),
            stages: b[1] & 16 != 0,
            probe: b[1] & 32 != 0,
        };
        let ok = (1..=MAX_SIZE as u32).contains(&p.size)
            && (p.iters > 0 || p.duration_s > 0)
            && p.qps > 0
            && p.tx_depth > 0
            && (1..=p.tx_depth).contains(&p.post_list)
            && (1..=p.tx_depth).contains(&p.cq_mod);
        if ok {
            Ok(p)
        } else {
            Err(format!("invalid test parameters {p:?}"))
        }
    }

    fn sizes(&self) -> Vec<usize> {
        if self.all {
            (1..=MAX_SIZE.trailing_zeros())
                .map(|s| 1usize << s)
                .filter(|&s| s <= self.size as usize)
                .collect()
        } else {
            vec![self.size as usize]
        }
    }

    fn max_size(&self) -> usize {
        self.size as usize
    }

    /// Receives each QP keeps posted: a SEND stream's depth (or a WRITE's markers with
    /// `--verify`) plus the control messages'.
    fn recv_depth(&self) -> u32 {
        let data = match self.op {
            Op::Send => u32::from(self.tx_depth).max(512),
            Op::Write if self.verify => u32::from(self.tx_depth),
            _ => 0,
        };
        data + CTL_RECVS
    }

    /// Work requests per message: a verified WRITE carries its marker SEND.
    fn wrs_per_msg(&self) -> u32 {
        if self.op == Op::Write && self.verify {
            2
        } else {
            1
        }
    }
}

/// Where messages go in each side's regions. `out`: what this side sends from and where its
/// READs and atomics land, then `CTL_SLOTS` control sources. `inc`: where the peer's WRITEs
/// land and its READs read from, then one 8-byte atomic counter per QP, then `CTL_SLOTS`
/// control inboxes. `rx`: receive buffers.
#[derive(Clone, Copy, Debug)]
struct Layout {
    /// Bytes per message slot.
    stride: usize,
    /// Message slots per QP.
    slots: usize,
    /// All QPs use the same slots (no `--verify`: the bytes are not checked).
    shared: bool,
    qps: usize,
    /// Bytes per receive buffer, receives per QP, and the distinct buffers they use: one per
    /// receive with `--verify`, else as many as `SLOT_AREA_CAP` holds, receives beyond them
    /// reusing them in turn (the bytes are not checked; a control message is read at its
    /// completion, before any later SEND of the peer can arrive).
    rx_stride: usize,
    rx_per_qp: usize,
    rx_bufs: usize,
}

impl Layout {
    fn new(p: &Params) -> Result<Layout, String> {
        let stride = p.max_size().max(8).next_multiple_of(64);
        let qps = usize::from(p.qps);
        let t = usize::from(p.tx_depth);
        let rx_per_qp = p.recv_depth() as usize;
        let rx_stride = if p.op == Op::Send {
            stride.max(CTL_LEN)
        } else {
            CTL_LEN
        };
        let l = if p.verify {
            // A slot is reused after `slots` messages: by then the one before was checked
            // (see the module doc), with a receive per outstanding marker.
            let l = Layout {
                stride,
                slots: t + CTL_RECVS as usize + 1,
                shared: false,
                qps,
                rx_stride,
                rx_per_qp,
                rx_bufs: qps * rx_per_qp,
            };
            let need = l.slot_area().max(l.rx_len());
            if need > VERIFY_AREA_CAP {
                return Err(format!(
                    "--verify needs {} MiB per region for -q {qps} -t {t} -s {}; at most {} MiB: \
                     lower -q, -t or -s",
                    need >> 20,
                    p.size,
                    VERIFY_AREA_CAP >> 20
                ));
            }
            l
        } else {
            Layout {
                stride,
                slots: t.min(SLOT_AREA_CAP / stride).max(1),
                shared: true,
                qps,
                rx_stride,
                rx_per_qp,
                rx_bufs: (qps * rx_per_qp).min(SLOT_AREA_CAP / rx_stride).max(1),
            }
        };
        Ok(l)
    }

    fn slot_area(&self) -> usize {
        let owners = if self.shared { 1 } else { self.qps };
        owners * self.slots * self.stride
    }

    /// Offset of QP `qp`'s message slot `slot` in `out` or `inc`.
    fn slot(&self, qp: usize, slot: usize) -> u64 {
        let owner = if self.shared { 0 } else { qp };
        ((owner * self.slots + slot) * self.stride) as u64
    }

    fn out_len(&self) -> usize {
        self.slot_area() + CTL_SLOTS * CTL_LEN
    }

    fn ctl(&self, i: usize) -> u64 {
        (self.slot_area() + (i % CTL_SLOTS) * CTL_LEN) as u64
    }

    fn inc_len(&self) -> usize {
        self.slot_area() + self.qps * 8 + CTL_SLOTS * CTL_LEN
    }

    fn counter(&self, qp: usize) -> u64 {
        (self.slot_area() + qp * 8) as u64
    }

    /// Offset in `inc` of control inbox `i`, where a DAT client writes its control messages.
    fn inbox(&self, i: usize) -> u64 {
        (self.slot_area() + self.qps * 8 + (i % CTL_SLOTS) * CTL_LEN) as u64
    }

    fn rx_len(&self) -> usize {
        self.rx_bufs * self.rx_stride
    }

    fn rx(&self, qp: usize, slot: usize) -> u64 {
        (((qp * self.rx_per_qp + slot) % self.rx_bufs) * self.rx_stride) as u64
    }
}

/// A peer's `inc` region: address, R_Key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RemoteBuf {
    addr: u64,
    rkey: u32,
}

/// The descriptor of an `inc` region at `addr` with R_Key `rkey`.
fn encode_buf(addr: u64, rkey: u32) -> [u8; 12] {
    let mut b = [0u8; 12];
    b[..8].copy_from_slice(&addr.to_be_bytes());
    b[8..].copy_from_slice(&rkey.to_be_bytes());
    b
}

fn decode_buf(b: &[u8]) -> Result<RemoteBuf, String> {
    if b.len() < 12 {
        return Err(format!("peer's buffer descriptor of {} bytes", b.len()));
    }
    Ok(RemoteBuf {
        addr: u64::from_be_bytes(b[..8].try_into().map_err(|_| "descriptor")?),
        rkey: u32::from_be_bytes(b[8..12].try_into().map_err(|_| "descriptor")?),
    })
}

/// Control messages between the two sides, on QP 0 (see `CTL_LEN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctl {
    /// Client: the raw blast of this size is over; it sent `sent` frames.
    RawDone { sent: u64 },
    /// Server: it counted `frames` frames of `bytes` bytes over `ns` nanoseconds.
    RawResult { frames: u64, bytes: u64, ns: u64 },
    /// Client: start the RDMA test of `size` bytes.
    Start { size: u64 },
    /// Server: ready (receives posted, counters reset).
    Ready,
    /// A side's stream is over (`sent` messages over `ns`), it received and checked
    /// `received` messages, and was on the CPU for `cpu_ns` of the test.
    Done {
        sent: u64,
        ns: u64,
        received: u64,
        cpu_ns: u64,
    },
}

impl Ctl {
    /// The message's bytes: kind, then four numbers, big-endian.
    fn to_bytes(self) -> [u8; CTL_LEN] {
        let (kind, v) = self.encode();
        let mut b = [0u8; CTL_LEN];
        b[..8].copy_from_slice(&u64::from(kind).to_be_bytes());
        for (i, x) in v.iter().enumerate() {
            b[8 + i * 8..16 + i * 8].copy_from_slice(&x.to_be_bytes());
        }
        b
    }

    fn from_bytes(b: &[u8]) -> Option<Ctl> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_be_bytes(
                b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        let kind = u32::try_from(word(0)?).ok()?;
        Ctl::decode(kind, [word(1)?, word(2)?, word(3)?, word(4)?])
    }

    fn kind(self) -> u32 {
        self.encode().0
    }

    fn encode(&self) -> (u32, [u64; 4]) {
        match *self {
            Ctl::RawDone { sent } => (1, [sent, 0, 0, 0]),
            Ctl::RawResult { frames, bytes, ns } => (2, [frames, bytes, ns, 0]),
            Ctl::Start { size } => (3, [size, 0, 0, 0]),
            Ctl::Ready => (4, [0; 4]),
            Ctl::Done {
                sent,
                ns,
                received,
                cpu_ns,
            } => (5, [sent, ns, received, cpu_ns]),
        }
    }

    fn decode(kind: u32, v: [u64; 4]) -> Option<Ctl> {
        Some(match kind {
            1 => Ctl::RawDone { sent: v[0] },
            2 => Ctl::RawResult {
                frames: v[0],
                bytes: v[1],
                ns: v[2],
            },
            3 => Ctl::Start { size: v[0] },
            4 => Ctl::Ready,
            5 => Ctl::Done {
                sent: v[0],
                ns: v[1],
                received: v[2],
                cpu_ns: v[3],
            },
            _ => return None,
        })
    }
}

/// The payload stream of the server's READ source: one message over its whole slot area
/// (QP `qp`'s messages are the payload stream `qp`, `roce_sim::payload`).
const READ_SOURCE: u64 = u64::MAX;

/// Whether `b`, read back from offset `off` of a READ's source, holds what the server put
/// there.
fn check_read_source(b: &[u8], off: usize) -> Result<(), payload::Mismatch> {
    payload::check_at(b, READ_SOURCE, 0, off)
}

/// This thread's time on the CPU so far (`/proc/thread-self/schedstat`), in nanoseconds.
fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// One side of the test: its shard, QPs, memory and what the peer sent.
struct Side<'a> {
    shard: &'a mut BenchShard,
    params: Params,
    layout: Layout,
    qpns: Vec<u32>,
    out: Region,
    inc: Region,
    rx: Region,
    peer: RemoteBuf,
    set: StreamSet,
    /// The size of the test running.
    size: usize,
    ctl_sent: usize,
    ctl_in: VecDeque<Ctl>,
    timeout: Duration,
    /// `received_total` when the test of the current size started.
    received_base: u64,
    scratch: Vec<u8>,
    /// The latency probe's QP (`--probe`), beside `qpns`.
    probe: Option<probe::Probe>,
}

/// A side's three registered regions (see `Layout`).
struct Regions {
    out: Region,
    inc: Region,
    rx: Region,
}

impl<'a> Side<'a> {
    /// A side over its connected `qpns`, every receive posted.
    fn new(
        shard: &'a mut BenchShard,
        params: Params,
        layout: Layout,
        qpns: Vec<u32>,
        r: Regions,
        peer: RemoteBuf,
        timeout: Duration,
    ) -> Result<Side<'a>, String> {
        let mut side = Side {
            shard,
            params,
            layout,
            set: StreamSet::new(qpns.len(), &params),
            qpns,
            out: r.out,
            inc: r.inc,
            rx: r.rx,
            peer,
            size: params.max_size(),
            ctl_sent: 0,
            ctl_in: VecDeque::new(),
            timeout,
            received_base: 0,
            scratch: Vec::new(),
            probe: None,
        };
        for qp in 0..side.qpns.len() {
            side.post_all_recvs(qp)?;
        }
        Ok(side)
    }
}

impl Side<'_> {
    fn now(&self) -> dpdk_roce::time::Instant {
        self.shard.clock().now()
    }

    fn table(&self) -> &Arc<MrTable> {
        self.shard.host.mr_table()
    }

    fn post(&mut self, qp: usize, wr: SendWr) -> Result<(), String> {
        let now = self.now();
        self.shard
            .host
            .post_send(now, self.qpns[qp], wr)
            .map_err(|e| format!("posting on QP {qp}: {e}"))
    }

    /// Posts receive `slot` of QP `qp` (again).
    fn post_recv(&mut self, qp: usize, slot: usize) -> Result<(), String> {
        let addr = self.rx.addr + self.layout.rx(qp, slot);
        let wr = RecvWr {
            wr_id: ((slot as u64) << 16) | qp as u64,
            sgl: dpdk_roce::sgl![Sge {
                addr,
                len: self.layout.rx_stride as u32,
                lkey: self.rx.lkey,
            }],
        };
        self.shard
            .host
            .post_recv(self.qpns[qp], wr)
            .map_err(|e| format!("posting a receive on QP {qp}: {e}"))
    }

    fn post_all_recvs(&mut self, qp: usize) -> Result<(), String> {
        for slot in 0..self.layout.rx_per_qp {
            self.post_recv(qp, slot)?;
        }
        Ok(())
    }

    /// Sends a control message on QP 0.
    fn send_ctl(&mut self, c: Ctl) -> Result<(), String> {
        let (kind, b) = (c.kind(), c.to_bytes());
        let at = self.out.addr + self.layout.ctl(self.ctl_sent);
        self.ctl_sent += 1;
        self.table()
            .write_local(self.out.lkey, at, &b)
            .map_err(|e| format!("control buffer: {e:?}"))?;
        self.post(
            0,
            SendWr {
                wr_id: CTL_WRID,
                // The immediate only where data SENDs flow (a DAT client would get the
                // immediate as an IB extension event it does not need).
                op: if self.params.op == Op::Send {
                    SendOp::SendWithImm {
                        imm: CTL_BIT | kind,
                    }
                } else {
                    SendOp::Send
                },
                sgl: dpdk_roce::sgl![Sge {
                    addr: at,
                    len: CTL_LEN as u32,
                    lkey: self.out.lkey,
                }],
                signaled: true,
                fence: false,
                solicited: false,
            },
        )?;
        self.shard.send_now();
        Ok(())
    }

    /// Polls until a control message arrives (others may arrive first and stay queued);
    /// gives up after `timeout` without any traffic (the peer's stream may run for long).
    fn wait_ctl(&mut self, what: &str) -> Result<Ctl, String> {
        let mut deadline = Instant::now() + self.timeout;
        let mut busy = false;
        let mut n = 0u32;
        loop {
            if let Some(c) = self.ctl_in.pop_front() {
                return Ok(c);
            }
            busy |= self.shard.poll();
            self.completions()?;
            n = n.wrapping_add(1);
            if n.is_multiple_of(CLOCK_EVERY) {
                let now = Instant::now();
                if busy {
                    deadline = now + self.timeout;
                    busy = false;
                } else if now > deadline {
                    return Err(format!(
                        "no traffic for {:?} waiting for {what}",
                        self.timeout
                    ));
                }
            }
        }
    }

    /// Handles every completion the host has: the stream's, receives, control.
    fn completions(&mut self) -> Result<(), String> {
        let mut any = false;
        while let Some(wc) = self.shard.host.poll_completion() {
            if wc.status == WcStatus::WrFlushErr && !self.shard.host.connection_up(wc.qp_num) {
                // The peer disconnected: what was still posted is flushed.
                continue;
            }
            if wc.status != WcStatus::Success {
                return Err(format!("work request failed: {wc:?}"));
            }
            if let Some(p) = self.probe.as_mut().filter(|p| p.qpn == wc.qp_num) {
                let now = self.shard.clock().now();
                p.on_completion(&mut self.shard.host, now, &wc)?;
                continue;
            }
            match wc.opcode {
                WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => {
                    let queued = self.ctl_in.len();
                    self.received(&wc)?;
                    if self.ctl_in.len() > queued {
                        // The caller acts on it first: behind a READY come the peer's
                        // messages of the next size.
                        break;
                    }
                }
                WcOpcode::Send if wc.wr_id & CTL_WRID != 0 => {}
                _ => {
                    self.stream_done(&wc)?;
                    any = true;
                }
            }
        }
        if any {
            self.set.sample();
        }
        Ok(())
    }

    /// A signaled message of the stream completed: it and every one before it on its QP.
    fn stream_done(&mut self, wc: &WorkCompletion) -> Result<(), String> {
        let qp = (wc.wr_id & 0xffff) as usize;
        let seq = wc.wr_id >> 16;
        let Some(s) = self.set.streams.get(qp).copied() else {
            return Err(format!("completion of an unknown QP: {wc:?}"));
        };
        if self.params.verify {
            match self.params.op {
                Op::Read => self.check_read(qp, seq)?,
                Op::Atomic => self.check_atomic(qp, seq, s.atomics_seen)?,
                _ => {}
            }
        }
        self.set.completed_through(qp, seq);
        if self.params.op == Op::Atomic {
            self.set.streams[qp].atomics_seen += 1;
        }
        Ok(())
    }

    fn check_read(&mut self, qp: usize, seq: u64) -> Result<(), String> {
        let slot = (seq % self.layout.slots as u64) as usize;
        let off = self.layout.slot(qp, slot);
        let mut b = std::mem::take(&mut self.scratch);
        b.resize(self.size, 0);
        self.table()
            .read_local(self.out.lkey, self.out.addr + off, &mut b)
            .map_err(|e| format!("reading the READ buffer: {e:?}"))?;
        let bad = check_read_source(&b, off as usize);
        self.scratch = b;
        bad.map_err(|e| format!("RDMA READ {seq} of QP {qp} ({} B): {e}", self.size))
    }

    fn check_atomic(&mut self, qp: usize, seq: u64, before: u64) -> Result<(), String> {
        let slot = (seq % self.layout.slots as u64) as usize;
        let mut v = [0u8; 8];
        self.table()
            .read_local(
                self.out.lkey,
                self.out.addr + self.layout.slot(qp, slot),
                &mut v,
            )
            .map_err(|e| format!("reading the atomic result: {e:?}"))?;
        let got = u64::from_ne_bytes(v);
        if got != before {
            return Err(format!(
                "fetch-and-add {seq} of QP {qp} returned {got}, expected {before}"
            ));
        }
        Ok(())
    }

    /// A receive completed: a control message, a WRITE's marker or a SEND of the stream.
    fn received(&mut self, wc: &WorkCompletion) -> Result<(), String> {
        let qp = (wc.wr_id & 0xffff) as usize;
        let slot = (wc.wr_id >> 16) as usize;
        if qp >= self.set.streams.len() || slot >= self.layout.rx_per_qp {
            return Err(format!("receive completion of an unknown buffer: {wc:?}"));
        }
        match wc.imm_data {
            Some(imm) if imm & CTL_BIT != 0 && wc.opcode == WcOpcode::RecvRdmaWithImm => {
                // A DAT client's control message, written into inbox `imm & !CTL_BIT`.
                let at = self.inc.addr + self.layout.inbox((imm & !CTL_BIT) as usize);
                self.read_ctl(self.inc.lkey, at)?
            }
            Some(imm) if imm & CTL_BIT != 0 => self.received_ctl(qp, slot)?,
            None if self.params.op != Op::Send => self.received_ctl(qp, slot)?,
            Some(seq) => {
                // A WRITE's marker: the WRITE before it has landed.
                let seq = u64::from(seq);
                let expect = self.set.streams[qp].received & u64::from(!CTL_BIT);
                if seq != expect {
                    return Err(format!("QP {qp}: marker {seq}, expected {expect}"));
                }
                let off = self
                    .layout
                    .slot(qp, (seq % self.layout.slots as u64) as usize);
                self.check_message(
                    &self.inc.clone(),
                    off,
                    qp,
                    self.set.streams[qp].received,
                    "WRITE",
                )?;
                self.set.streams[qp].received += 1;
            }
            None => {
                if wc.byte_len as usize != self.size {
                    return Err(format!(
                        "QP {qp}: a SEND of {} B, expected {}",
                        wc.byte_len, self.size
                    ));
                }
                if self.params.verify {
                    let off = self.layout.rx(qp, slot);
                    self.check_message(
                        &self.rx.clone(),
                        off,
                        qp,
                        self.set.streams[qp].received,
                        "SEND",
                    )?;
                }
                self.set.streams[qp].received += 1;
            }
        }
        self.post_recv(qp, slot)
    }

    /// A control message in receive buffer `slot` of QP `qp`.
    fn received_ctl(&mut self, qp: usize, slot: usize) -> Result<(), String> {
        self.read_ctl(self.rx.lkey, self.rx.addr + self.layout.rx(qp, slot))
    }

    /// Queues the control message at `at` of the region of `lkey`.
    fn read_ctl(&mut self, lkey: u32, at: u64) -> Result<(), String> {
        let mut b = [0u8; CTL_LEN];
        self.table()
            .read_local(lkey, at, &mut b)
            .map_err(|e| format!("reading a control message: {e:?}"))?;
        let c = Ctl::from_bytes(&b).ok_or_else(|| format!("unknown control message {b:?}"))?;
        self.ctl_in.push_back(c);
        Ok(())
    }

    /// Message `seq` of QP `qp` must be at `off` of `r`.
    fn check_message(
        &mut self,
        r: &Region,
        off: u64,
        qp: usize,
        seq: u64,
        what: &str,
    ) -> Result<(), String> {
        let mut b = std::mem::take(&mut self.scratch);
        b.resize(self.size, 0);
        self.table()
            .read_local(r.lkey, r.addr + off, &mut b)
            .map_err(|e| format!("reading a {what}: {e:?}"))?;
        let bad = payload::check(&b, qp as u64, seq);
        self.scratch = b;
        bad.map_err(|e| format!("{what} {seq} of QP {qp} ({} B): {e}", self.size))
    }

    /// Posts message `seq` of QP `qp` (with `--verify` a WRITE's marker behind it).
    fn post_one(&mut self, qp: usize, seq: u64, signaled: bool) -> Result<(), String> {
        let slot = (seq % self.layout.slots as u64) as usize;
        let off = self.layout.slot(qp, slot);
        let wr_id = (seq << 16) | qp as u64;
        let local = Sge {
            addr: self.out.addr + off,
            len: self.size as u32,
            lkey: self.out.lkey,
        };
        let verify = self.params.verify;
        if verify && matches!(self.params.op, Op::Write | Op::Send) {
            let msg = payload::message(qp as u64, seq, self.size);
            self.table()
                .write_local(self.out.lkey, local.addr, &msg)
                .map_err(|e| format!("filling a message: {e:?}"))?;
        }
        if verify && self.params.op == Op::Read {
            self.table()
                .write_local(self.out.lkey, local.addr, &vec![0u8; self.size])
                .map_err(|e| format!("clearing a READ buffer: {e:?}"))?;
        }
        let peer = self.peer;
        let (op, sgl) = match self.params.op {
            Op::Write => (
                SendOp::Write {
                    remote_addr: peer.addr + off,
                    rkey: peer.rkey,
                },
                dpdk_roce::sgl![local],
            ),
            Op::Send => (SendOp::Send, dpdk_roce::sgl![local]),
            Op::Read => (
                SendOp::Read {
                    remote_addr: peer.addr + off,
                    rkey: peer.rkey,
                },
                dpdk_roce::sgl![local],
            ),
            Op::Atomic => (
                SendOp::FetchAdd {
                    remote_addr: peer.addr + self.layout.counter(qp),
                    rkey: peer.rkey,
                    add: 1,
                },
                dpdk_roce::sgl![Sge { len: 8, ..local }],
            ),
        };
        let marker = verify && self.params.op == Op::Write;
        self.post(
            qp,
            SendWr {
                wr_id,
                op,
                sgl,
                signaled: signaled && !marker,
                fence: false,
                solicited: false,
            },
        )?;
        if marker {
            self.post(
                qp,
                SendWr {
                    wr_id,
                    op: SendOp::SendWithImm {
                        imm: (seq as u32) & !CTL_BIT,
                    },
                    sgl: dpdk_roce::sgl![],
                    signaled,
                    fence: false,
                    solicited: false,
                },
            )?;
        }
        Ok(())
    }

    /// Resets the counters for a test of `size` bytes; `sending`: this side streams.
    fn start(&mut self, size: usize, sending: bool) {
        self.size = size;
        let total = if !sending {
            0
        } else if self.params.duration_s > 0 {
            u64::MAX
        } else {
            u64::from(self.params.iters)
        };
        self.received_base = self.received_total();
        self.set.start(total);
    }

    /// Messages received and checked so far, over all QPs and sizes.
    fn received_total(&self) -> u64 {
        self.set.streams.iter().map(|s| s.received).sum()
    }

    /// Messages received and checked in the test of the current size.
    fn received_now(&self) -> u64 {
        self.received_total() - self.received_base
    }
}

impl Poster for Side<'_> {
    fn streams(&mut self) -> &mut StreamSet {
        &mut self.set
    }

    fn post_message(&mut self, qp: usize, seq: u64, signaled: bool) -> Result<(), String> {
        self.post_one(qp, seq, signaled)
    }

    fn turn(&mut self) -> Result<(), String> {
        self.shard.poll();
        self.completions()?;
        if let Some(p) = self.probe.as_mut() {
            let now = self.shard.clock().now();
            p.tick(&mut self.shard.host, now)?;
        }
        Ok(())
    }
}

/// The best message rate over any stretch of at least `PEAK_WINDOW` (and a twentieth of the
/// run) in `samples` of (time, messages completed), in messages per second.
fn peak_rate(s: &[(Instant, u64)], elapsed: Duration) -> f64 {
    let window = PEAK_WINDOW.max(elapsed / 20);
    let mut best = 0f64;
    let mut i = 0;
    for j in 0..s.len() {
        while i < j && s[j].0.duration_since(s[i + 1].0) >= window {
            i += 1;
        }
        let dt = s[j].0.duration_since(s[i].0);
        if dt >= window {
            best = best.max((s[j].1 - s[i].1) as f64 / dt.as_secs_f64());
        }
    }
    best
}

fn run(args: &Args) -> Result<(), String> {
    let params = if args.peer.client {
        let p = Params::from_args(args)?;
        Layout::new(&p)?;
        Some(p)
    } else {
        None
    };
    // The server always runs on the Rust API (like every test parameter, the client's API
    // is the client's alone).
    if let (Api::Dat, Some(p)) = (args.api, params) {
        let ia = args.ia.as_deref().ok_or("--api dat needs --ia")?;
        return dat_client::client(args, p, ia);
    }
    let profile_path = args
        .profile
        .as_ref()
        .ok_or("--profile is needed with --api rust")?;
    let profile = Profile::load_with_env(profile_path).map_err(|e| e.to_string())?;
    let pp = ProfilePort::open(&profile).map_err(|e| format!("DPDK: {e}"))?;
    let mac = pp.port.mac().map_err(|e| e.to_string())?;
    if args.peer.client && !pp.wait_link_up(Duration::from_secs(10)) {
        return Err("the port's link did not come up within 10 s".into());
    }
    let mut io = DpdkFrameIo::new(pp.eal, &pp.port, 2047).map_err(|e| e.to_string())?;
    args.payload.set_zero_copy(&mut io, &pp.port)?;
    let host = roce_bench::host(&profile, &pp, mac, 16)?;
    let mut shard = Shard::new(host, BenchIo::new(io, &profile)?);
    let timeout = Duration::from_millis(args.timeout_ms);
    let result = match params {
        Some(p) => client(args, p, &mut shard, &profile, timeout),
        None => server(args, &mut shard, &pp, timeout),
    };
    // What the port itself dropped (a receive ring that overflowed: net_af_packet counts the
    // kernel's drops at its socket here).
    if let Ok(s) = pp.port.stats() {
        eprintln!(
            "summary: port: rx_packets: {}  rx_missed: {}  rx_nombuf: {}  tx_errors: {}",
            s.ipackets, s.imissed, s.rx_nombuf, s.oerrors
        );
    }
    result
}

/// Registers this side's three regions for `layout`, `inc` filled for READs, counters zero.
fn regions(
    shard: &mut BenchShard,
    layout: &Layout,
) -> Result<(u32, Region, Region, Region), String> {
    let table = shard.host.mr_table().clone();
    let pz = table.create_pz();
    let reg = |len: usize, access| {
        table
            .register_alloc(pz, len.max(64), 4096, access)
            .map_err(|e| format!("registering {len} B: {e:?}"))
    };
    // The probe's buffer (`--probe`) after the stream's.
    let out = reg(layout.out_len() + probe::BYTES, Access::LOCAL_WRITE)?;
    let inc = reg(
        layout.inc_len(),
        Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
    )?;
    let rx = reg(layout.rx_len(), Access::LOCAL_WRITE)?;
    let mut fill = payload::message(READ_SOURCE, 0, layout.slot_area());
    fill.resize(layout.inc_len(), 0);
    table
        .write_local(inc.lkey, inc.addr, &fill)
        .map_err(|e| format!("filling the READ source: {e:?}"))?;
    Ok((pz.id(), out, inc, rx))
}

fn qp_options(pd: u32, p: &Params) -> QpOptions {
    let sq = u32::from(p.tx_depth) * p.wrs_per_msg() + CTL_SLOTS as u32;
    QpOptions {
        pd,
        sq_depth: sq,
        rq_depth: p.recv_depth(),
        ..QpOptions::default()
    }
}

fn server(
    args: &Args,
    shard: &mut BenchShard,
    pp: &ProfilePort,
    timeout: Duration,
) -> Result<(), String> {
    shard
        .host
        .listen(args.peer.port)
        .map_err(|e| e.to_string())?;
    println!(
        "READY listening on port {} ({} {})",
        args.peer.port,
        shard.host.config().net.primary_address(),
        shard.host.config().net.mac
    );
    let _ = std::io::stdout().flush();
    // The first request names the test; every connection must ask for the same one.
    let mut setup: Option<(Params, Layout, u32, Region, Region, Region)> = None;
    let mut qpns: Vec<Option<u32>> = Vec::new();
    let mut peer = None;
    let mut established = 0usize;
    let mut wait = Duration::from_secs(60);
    loop {
        let ev = poll_until(shard, wait, "a connection request", |s| {
            Ok(s.host.poll_event())
        })?;
        wait = timeout;
        match ev {
            CmEvent::ConnectRequest {
                id, private_data, ..
            } => {
                let p = Params::decode(&private_data)?;
                let idx = private_data
                    .get(PARAMS_LEN..PARAMS_LEN + 2)
                    .map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
                    .ok_or("connection request without a QP index")?;
                let buf = decode_buf(&private_data[PARAMS_LEN + 2..])?;
                if setup.is_none() {
                    let layout = Layout::new(&p)?;
                    let (pd, out, inc, rx) = regions(shard, &layout)?;
                    qpns = vec![None; usize::from(p.qps) + usize::from(p.probe)];
                    if p.raw {
                        shard.set_raw_channel(Some(RawChannel::new(
                            RAW_ETHERTYPE,
                            RawMode::Count,
                            1,
                            0,
                        )));
                    }
                    eprintln!("test: {p:?}");
                    setup = Some((p, layout, pd, out, inc, rx));
                    peer = Some(buf);
                }
                let Some((sp, _, pd, _, inc, _)) = setup.as_ref() else {
                    return Err("no test set up".into());
                };
                if *sp != p || idx >= qpns.len() || qpns[idx].is_some() || peer != Some(buf) {
                    let now = shard.clock().now();
                    let _ = shard.host.reject(now, id, &[]);
                    eprintln!("rejected a connection request for another test ({p:?}, QP {idx})");
                    continue;
                }
                let now = shard.clock().now();
                let qpn = shard
                    .host
                    .create_qp(now, qp_options(*pd, &p))
                    .map_err(|e| e.to_string())?;
                let mut ap = AcceptParams::new(qpn, Psn::new(0x4000));
                ap.responder_resources = 16;
                ap.initiator_depth = 16;
                ap.min_rnr_timer = 1;
                ap.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
                ap.private_data = encode_buf(inc.addr, inc.rkey).to_vec();
                qpns[idx] = Some(qpn);
                shard.host.accept(now, id, ap).map_err(|e| e.to_string())?;
            }
            CmEvent::Established { .. } => {
                established += 1;
                if established == qpns.len() {
                    break;
                }
            }
            other => eprintln!("connection event: {other:?}"),
        }
    }
    let (p, layout, _, out, inc, rx) = setup.ok_or("no connection")?;
    let mut qpns: Vec<u32> = qpns.into_iter().flatten().collect();
    let probe_qpn = p.probe.then(|| qpns.pop()).flatten();
    let probe_buf = (out.addr + layout.out_len() as u64, out.lkey);
    let regions = Regions { out, inc, rx };
    let peer = peer.ok_or("no peer")?;
    let mut side = Side::new(shard, p, layout, qpns, regions, peer, timeout)?;
    if let Some(qpn) = probe_qpn {
        side.probe = Some(probe::Probe::new(
            &mut side.shard.host,
            qpn,
            probe_buf,
            false,
        )?);
    }
    // Serve one test per size the client starts, until it disconnects.
    // The raw blast: when its first and last frames were seen, and the counts before it.
    let mut raw_first: Option<Instant> = None;
    let mut raw_last = Instant::now();
    let mut raw_seen = (0u64, 0u64);
    let mut raw_now = 0u64;
    loop {
        if let Some(c) = side.ctl_in.pop_front() {
            match c {
                Ctl::RawDone { sent } => {
                    let (frames, bytes) = side
                        .shard
                        .raw_channel()
                        .map(|r| (r.stats().received, r.stats().received_bytes))
                        .unwrap_or((0, 0));
                    let ns = raw_first.map_or(0, |f| raw_last.duration_since(f).as_nanos() as u64);
                    side.send_ctl(Ctl::RawResult {
                        frames: frames - raw_seen.0,
                        bytes: bytes - raw_seen.1,
                        ns,
                    })?;
                    eprintln!("raw: {} of {sent} frames counted", frames - raw_seen.0);
                    raw_seen = (frames, bytes);
                    raw_first = None;
                }
                Ctl::Start { size } => {
                    let (t0, cpu0) = (Instant::now(), cpu_ns());
                    side.start(size as usize, p.bidirectional);
                    side.shard.time_stages(p.stages);
                    side.send_ctl(Ctl::Ready)?;
                    let mine = stream::run(&mut side, p.duration_s, timeout)?;
                    let (sent, mut elapsed, mut cpu) = (mine.sent, mine.elapsed, mine.cpu_ns);
                    let client_done = match side.wait_ctl("the client's end of the test")? {
                        d @ Ctl::Done { .. } => d,
                        other => return Err(format!("unexpected {other:?}")),
                    };
                    let received = side.received_now();
                    if !p.bidirectional {
                        // A passive side's CPU time is that of the whole test.
                        elapsed = t0.elapsed();
                        cpu = cpu_ns().saturating_sub(cpu0);
                    }
                    if let (Some(t), Ctl::Done { sent: theirs, .. }) =
                        (side.shard.stage_times(), &client_done)
                    {
                        side.shard.time_stages(false);
                        let messages = if p.bidirectional { sent } else { *theirs };
                        let line = roce_bench::stream_stages_line(
                            "server",
                            size as usize,
                            &t,
                            messages,
                            elapsed.as_nanos() as u64,
                        );
                        println!("{line}");
                    }
                    side.send_ctl(Ctl::Done {
                        sent,
                        ns: elapsed.as_nanos() as u64,
                        received,
                        cpu_ns: cpu,
                    })?;
                    eprintln!("size {size}: client {client_done:?}, server sent {sent}");
                }
                other => return Err(format!("unexpected control message {other:?}")),
            }
            continue;
        }
        side.shard.poll();
        side.completions()?;
        if let Some(seen) = side.shard.raw_channel().map(|r| r.stats().received) {
            if seen > raw_now {
                let now = Instant::now();
                raw_first.get_or_insert(now);
                raw_last = now;
                raw_now = seen;
            }
        }
        if let Some(CmEvent::Disconnected { .. }) = side.shard.host.poll_event() {
            break;
        }
    }
    // The DREPs go out; wait for the rest of the disconnects, then for the client to go.
    let mut gone = 1;
    let n = side.qpns.len() + usize::from(side.probe.is_some());
    let drep_wait = side.shard.host.config().cm.dreq_resend_wait();
    let _ = poll_until(side.shard, drep_wait, "the client's disconnects", |s| {
        while let Some(wc) = s.host.poll_completion() {
            if wc.status != WcStatus::Success && wc.status != WcStatus::WrFlushErr {
                return Err(format!("work request failed: {wc:?}"));
            }
        }
        while let Some(ev) = s.host.poll_event() {
            if matches!(ev, CmEvent::Disconnected { .. }) {
                gone += 1;
            }
        }
        Ok((gone >= n).then_some(()))
    });
    side.shard.send_now();
    let wait = drep_wait + PEER_GONE_WAIT;
    if !pp.wait_peer_gone(wait) {
        eprintln!("the client was still there {wait:?} after its disconnect");
    }
    // This side's drops and retransmissions (a READ's data, a bidirectional stream's).
    roce_bench::print_summary(side.shard, &side.qpns);
    if let Some(qpn) = probe_qpn {
        probe::print_qp(&side.shard.host, qpn);
    }
    println!("server done");
    Ok(())
}

fn client(
    args: &Args,
    p: Params,
    shard: &mut BenchShard,
    profile: &Profile,
    timeout: Duration,
) -> Result<(), String> {
    let server_ip = args.peer.server_ip.ok_or("--client needs --server-ip")?;
    let layout = Layout::new(&p)?;
    let (pd, out, inc, rx) = regions(shard, &layout)?;
    let mut qpns = Vec::with_capacity(usize::from(p.qps));
    for idx in 0..p.qps + u16::from(p.probe) {
        let now = shard.clock().now();
        let qpn = shard
            .host
            .create_qp(now, qp_options(pd, &p))
            .map_err(|e| e.to_string())?;
        qpns.push(qpn);
        let mut cp = ConnectParams::new(server_ip, args.peer.port, qpn, Psn::new(0x4000));
        cp.responder_resources = 16;
        cp.initiator_depth = 16;
        cp.min_rnr_timer = 1;
        cp.local_ack_timeout = args.qp_timeout;
        cp.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        let mut private = p.encode().to_vec();
        private.extend_from_slice(&idx.to_be_bytes());
        private.extend_from_slice(&encode_buf(inc.addr, inc.rkey));
        cp.private_data = private;
        shard.host.connect(now, cp).map_err(|e| e.to_string())?;
    }
    let probe_qpn = p.probe.then(|| qpns.pop()).flatten();
    let probe_buf = (out.addr + layout.out_len() as u64, out.lkey);
    let regions = Regions { out, inc, rx };
    let unknown = RemoteBuf { addr: 0, rkey: 0 };
    let mut side = Side::new(shard, p, layout, qpns, regions, unknown, timeout)?;
    let mut up = 0;
    let mut peer = None;
    poll_until(
        side.shard,
        Duration::from_secs(30).max(timeout),
        "the server's REPs",
        |s| {
            while let Some(ev) = s.host.poll_event() {
                match ev {
                    CmEvent::Established { private_data, .. } => {
                        let b = decode_buf(&private_data)?;
                        if peer.is_some_and(|p| p != b) {
                            return Err("the server answered with two buffers".into());
                        }
                        peer = Some(b);
                        up += 1;
                    }
                    ev @ (CmEvent::Rejected { .. }
                    | CmEvent::Unreachable { .. }
                    | CmEvent::TimedOut { .. }
                    | CmEvent::ConnectError { .. }) => {
                        // Why, as the neighbour layer saw it: a router's ICMP, or a next hop
                        // that never answered ARP.
                        let n = s.host.net_stats();
                        return Err(format!(
                            "connection failed: {ev:?} (ICMP destination unreachable \
                             received: {}, ARP resolutions failed: {})",
                            n.rx_icmp_unreachable, n.unresolvable
                        ));
                    }
                    _ => {}
                }
            }
            Ok((up == usize::from(p.qps) + usize::from(p.probe)).then_some(()))
        },
    )?;
    side.peer = peer.ok_or("no REP")?;
    eprintln!("{} connections up", up);
    // The probe alone first: its idle round trips.
    let mut idle = Vec::new();
    if let Some(qpn) = probe_qpn {
        side.probe = Some(probe::Probe::new(
            &mut side.shard.host,
            qpn,
            probe_buf,
            true,
        )?);
        let t0 = Instant::now();
        while t0.elapsed() < probe::IDLE {
            side.turn()?;
        }
        idle = side.probe.as_mut().map_or(Vec::new(), |p| p.take_phase());
    }
    let mac = side.shard.host.config().net.mac.0;
    let pmtu = profile_pmtu(profile);
    let device = args
        .profile
        .as_ref()
        .map_or(String::new(), |p| p.display().to_string());
    println!("{}", report::header(&p, args, &device, Some(pmtu)));
    let mut rows = Vec::new();
    let sizes = p.sizes();
    let progress = Progress::sizes(sizes.len());
    for size in progress.wrap(sizes) {
        let raw = if p.raw {
            Some(raw_blast(&mut side, &p, mac, size.min(pmtu))?)
        } else {
            None
        };
        side.send_ctl(Ctl::Start { size: size as u64 })?;
        match side.wait_ctl("the server's READY")? {
            Ctl::Ready => {}
            other => return Err(format!("expected READY, got {other:?}")),
        }
        side.start(size, true);
        side.shard.time_stages(p.stages);
        if let Some(pr) = side.probe.as_mut() {
            pr.take_phase();
        }
        let from = probe::unix_ns();
        let mine = stream::run(&mut side, p.duration_s, timeout)?;
        let loaded = side.probe.as_mut().map(|pr| pr.take_phase());
        let to = probe::unix_ns();
        let stages = side.shard.stage_times();
        side.shard.time_stages(false);
        side.send_ctl(Ctl::Done {
            sent: mine.sent,
            ns: mine.elapsed.as_nanos() as u64,
            received: side.received_now(),
            cpu_ns: mine.cpu_ns,
        })?;
        let server_done = side.wait_ctl("the server's end of the test")?;
        let received = side.received_now();
        let row = report::row(args, &p, size, pmtu, &mine, received, server_done, raw)?;
        progress.println(&report::row_text(&row, args.cpu_util));
        if p.qps > 1 && p.duration_s > 0 {
            progress.println(&mine.fairness_line());
        }
        if let Some(l) = &loaded {
            progress.println(&format!(
                "probe: idle {}; beside the stream {}",
                probe::summary(&idle),
                probe::summary(l)
            ));
            // For captures (bench/congestion.sh --split): which frames were beside the stream.
            progress.println(&format!(
                "probe: the stream ran from {from} to {to} (Unix ns)"
            ));
        }
        if let Some(t) = stages {
            let ns = mine.elapsed.as_nanos() as u64;
            progress.println(&roce_bench::stream_stages_line(
                "client", size, &t, mine.sent, ns,
            ));
        }
        rows.push(row);
    }
    drop(progress);
    println!("{RULE}");
    // Disconnect every QP (the probe's too); the server ends on the DREQs.
    let all: Vec<u32> = side.qpns.iter().copied().chain(probe_qpn).collect();
    for qpn in all {
        let now = side.now();
        side.shard
            .host
            .disconnect(now, qpn)
            .map_err(|e| e.to_string())?;
    }
    let mut gone = 0;
    let n = side.qpns.len() + usize::from(probe_qpn.is_some());
    let drep_wait = side.shard.host.config().cm.dreq_resend_wait();
    let _ = poll_until(side.shard, drep_wait, "the DREPs", |s| {
        while s.host.poll_completion().is_some() {}
        while let Some(ev) = s.host.poll_event() {
            if matches!(ev, CmEvent::Disconnected { .. }) {
                gone += 1;
            }
        }
        Ok((gone >= n).then_some(()))
    });
    roce_bench::print_summary(side.shard, &side.qpns);
    if let Some(qpn) = probe_qpn {
        probe::print_qp(&side.shard.host, qpn);
    }
    report::write_json(args, &p, Some(pmtu), &rows)?;
    report::write_plot(args, &p, &rows)?;
    Ok(())
}

/// The RoCE path MTU payload of a profile's port MTU (IBTA: 256..4096, at most the IP MTU less
/// the IPv4, UDP, BTH and ICRC bytes and a RETH).
fn profile_pmtu(p: &Profile) -> usize {
    let room = usize::from(p.port.mtu).saturating_sub(20 + 8 + 12 + 16 + 4);
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| m <= room)
        .unwrap_or(256)
}

/// The raw blast before a size's RDMA test: `frame_payload`-byte frames one way for as many
/// frames as the test's messages carry (or its duration); returns what the server counted
/// (frames, payload bytes, nanoseconds from its first to its last frame).
fn raw_blast(
    side: &mut Side<'_>,
    p: &Params,
    mac: [u8; 6],
    frame_payload: usize,
) -> Result<(u64, u64, u64), String> {
    let mut frame = Vec::with_capacity(14 + frame_payload + 60);
    frame.extend_from_slice(&[0xff; 6]);
    frame.extend_from_slice(&mac);
    frame.extend_from_slice(&RAW_ETHERTYPE.to_be_bytes());
    // As long as the RoCE frame carrying the same payload (IPv4, UDP, BTH, RETH, ICRC).
    frame.resize((14 + 20 + 8 + 12 + 16 + frame_payload + 4).max(60), 0);
    let frames_per_msg = (p.size as usize).div_ceil(frame_payload).max(1) as u64;
    let target = u64::from(p.iters) * u64::from(p.qps) * frames_per_msg.min(64);
    let t0 = Instant::now();
    let limit = Duration::from_secs(u64::from(p.duration_s));
    let mut sent = 0u64;
    loop {
        for _ in 0..RAW_BURST {
            if side.shard.io.tx(&frame) {
                sent += 1;
            }
        }
        side.shard.io.flush();
        side.shard.poll();
        side.completions()?;
        let done = if p.duration_s > 0 {
            t0.elapsed() >= limit
        } else {
            sent >= target
        };
        if done {
            break;
        }
    }
    side.send_ctl(Ctl::RawDone { sent })?;
    match side.wait_ctl("the server's raw count")? {
        Ctl::RawResult { frames, ns, .. } => Ok((frames, frames * frame_payload as u64, ns)),
        other => Err(format!("expected the raw count, got {other:?}")),
    }
}
