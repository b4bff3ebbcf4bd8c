//! roce-lat: perftest-style RDMA latency between two processes over a DPDK port.
//!
//! ```text
//! roce-lat --profile dpdk-config/af_packet-a.toml [--op write] [--size 8] ...
//! roce-lat --profile dpdk-config/af_packet-b.toml [--op write] [--size 8] ... 10.77.0.1
//! ```
//! As perftest's: the program without a server address is the server; with one (or
//! `--client --server-ip`) the client.
//! RDMA WRITE ping-pong (like `ib_write_lat`: each side polls the last byte of its buffer for
//! the peer's write, then writes back; half round trip reported), SEND/RECV ping-pong (half
//! round trip) and RDMA READ (full round trip). `--raw` echoes plain Ethernet frames of the same
//! length through the same port and loop with no RoCE processing: the I/O floor of the PMD.
//! `--with-raw` (given to both sides) puts one raw echo before each RDMA iteration of the same
//! run, through the same shard (a raw channel beside the stack, `engine::raw_l2`), and prints
//! the raw table and the ratio of the p50s: the transport's cost as a ratio measured in one
//! run, alike in the VM's slow and fast spells.
//! Each process drives its shard inline (one polling thread per process), so two processes fit
//! two cores. Output: perftest's test-info block and latency table; `-H` adds the HdrHistogram
//! percentile distribution of each size (`--hgrm-dir` writes `.hgrm` files), `--json` the rows; `--stages` adds, per size and side,
//! where the loop's busy time went (PMD receive, handling, frame build, copy, TX burst).
//!
//! Memory is the provider's checked region table (`Host<Arc<MrTable>>`, every access checked
//! for key, PZ, bounds and rights), its buffers allocated from DPDK hugepages
//! (`HugepageAllocator`) when the profile's EAL has hugepages, from the heap otherwise.
//! Payloads of at least `--zero-copy-min` bytes (default: the port's, `ZERO_COPY_MIN_PAYLOAD`)
//! leave as external buffers attached straight from the region (no copy); `--no-zero-copy`
//! copies every payload into the frame's mbuf.

use clap::{Parser, ValueEnum};
use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::config::Profile;
use dpdk_roce::dpdk::{DpdkFrameIo, ProfilePort};
use dpdk_roce::engine::clock::Clock;
use dpdk_roce::engine::raw_l2::{turn_around, RawChannel, RawMode};
use dpdk_roce::engine::shard::{Shard, StageTimes};
use dpdk_roce::host::QpOptions;
use dpdk_roce::io::FrameIo;
use dpdk_roce::mem::access::{Access, KeyKind, MemRef};
use dpdk_roce::mem::{MrTable, PinGuard, Region};
use dpdk_roce::transport::types::{RecvWr, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use dpdk_roce::wire::psn::Psn;
use roce_bench::args::{PayloadArgs, PeerArgs, PerftestCompat};
use roce_bench::{poll_until, stages_line, BenchIo, BenchShard};
use roce_perf::latency::{table_header, table_line, LatencySeries, Scale};
use roce_perf::perftest::{lat_title, RULE};
use roce_perf::progress::Progress;
use roce_sim::payload;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod dat_client;
mod dat_rust_client;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Op {
    Write,
    Send,
    Read,
    /// One RDMA WRITE posted and its completion waited for (the peer is passive): the lone
    /// completion an application waits for, what dapltest `-p 1 RW` measures; full round trip.
    WriteCompletion,
}

impl Op {
    /// perftest's name of the test.
    fn label(self) -> &'static str {
        match self {
            Op::Write => "RDMA_Write",
            Op::Send => "Send",
            Op::Read => "RDMA_Read",
            Op::WriteCompletion => "RDMA_Write_Completion",
        }
    }

    /// The peer does nothing but answer in its transport (READ responses, ACKs).
    fn passive_peer(self) -> bool {
        matches!(self, Op::Read | Op::WriteCompletion)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Api {
    Rust,
    Dat,
    /// The provider's DAT-shaped Rust API (`dpdk_roce::dat`), client only.
    DatRust,
}

#[derive(Parser, Debug)]
#[command(
    name = "roce-lat",
    version,
    about = "perftest-style RDMA latency over a DPDK port",
    long_about = "perftest-style RDMA latency over a DPDK port. Without a server address (and \
                  without --client) this process is the server, as perftest's; with one it is \
                  the client."
)]
struct Args {
    /// dpdk-config profile of this process (with `--api dat` the IA's profile is the one its
    /// dat.conf entry names; this one is only printed).
    #[arg(long)]
    profile: PathBuf,
    /// The API the client measures through: the provider's Rust API, the DAT C API (libdat2
    /// loads the provider through dat.conf: `DAT_OVERRIDE` or /etc/dat.conf), or `dat-rust`,
    /// the DAT-shaped Rust API (`dpdk_roce::dat`: the EP and EVD rings of `dat` without libdat2
    /// and the C layer; read and write-completion). The server always runs on the Rust API.
    #[arg(long, value_enum, default_value_t = Api::Rust, requires_if("dat", "ia"))]
    api: Api,
    /// The IA name in dat.conf (`--api dat`).
    #[arg(long)]
    ia: Option<String>,
    #[command(flatten)]
    peer: PeerArgs,
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
    /// Message size in bytes (2 ..= 8 MiB).
    #[arg(short = 's', long, default_value_t = 8)]
    size: usize,
    /// Run every power of two from 2 B to 8 MiB, whatever `--size` says (perftest -a); with
    /// `--raw` or `--with-raw` up to 1 KiB, the largest whose frame fits a 1500-byte MTU.
    #[arg(short = 'a', long, visible_alias = "all")]
    sweep: bool,
    /// Measured iterations per size.
    #[arg(short = 'n', long, default_value_t = 10_000)]
    iters: usize,
    #[command(flatten)]
    compat: PerftestCompat,
    /// Unmeasured iterations before measuring.
    #[arg(long, default_value_t = 1_000)]
    warmup: usize,
    /// Echo plain Ethernet frames instead of RoCE (the I/O floor of the same port and loop).
    #[arg(long)]
    raw: bool,
    /// Before each iteration, one raw Ethernet echo through the same shard (a raw channel
    /// beside the RoCE stack, `engine::raw_l2`): the I/O floor and the RDMA latency in one
    /// run, alike in every slow or fast spell of the machine. Prints the raw table and the
    /// ratio of the p50s too. Give it to both sides.
    #[arg(long, conflicts_with_all = ["raw", "stages"])]
    with_raw: bool,
    /// Receive and send every frame through the general paths (parse and dispatch, header
    /// set and emit): header prediction (`Host::set_header_prediction`) off, for A/B runs.
    #[arg(long)]
    no_header_prediction: bool,
    /// Print the table as JSON too.
    #[arg(long)]
    json: bool,
    /// Print each size's full latency distribution after the table (HdrHistogram's `.hgrm`
    /// percentile distribution; perftest -H prints every sample).
    #[arg(short = 'H', long = "report-histogram", alias = "report_histogram")]
    report_histogram: bool,
    /// Write one `.hgrm` file per size into this directory.
    #[arg(long)]
    hgrm_dir: Option<PathBuf>,
    /// Write every frame sent and received to this pcap file.
    #[arg(long)]
    capture: Option<PathBuf>,
    /// Give up when the peer does not answer for this many milliseconds.
    #[arg(long, default_value_t = 5_000)]
    timeout_ms: u64,
    #[command(flatten)]
    payload: PayloadArgs,
    /// Time the loop's stages over the measured iterations (PMD receive, handling, frame
    /// build, copy into mbufs, TX burst) and print them per size, on both sides. With
    /// `--api dat`: the client's calls instead (post, empty and completing dequeue).
    #[arg(long)]
    stages: bool,
}

impl Args {
    /// The side this process plays (`PeerArgs::resolve_role`): the client of a server address
    /// given, else the server.
    fn with_role(mut self) -> Result<Args, String> {
        self.peer.resolve_role()?;
        Ok(self)
    }
}

/// The largest message, and the last size of `-a`: 8 MiB, as perftest's.
const MAX_SIZE: usize = 1 << 23;
/// Regions the bench registers (two), with room to spare.
const MR_CAPACITY: u32 = 16;
/// Raw frames' EtherType: IEEE 802 local experimental.
const RAW_ETHERTYPE: u16 = 0x88b5;
/// The raw echo's test name in tables, file names and JSON.
const RAW_LABEL: &str = "Raw_L2_Echo";
/// A raw frame's tag: the size round (u32) and the frame's number in it (u64), big-endian,
/// after the Ethernet header.
const RAW_TAG_AT: usize = 14;
const RAW_TAG_END: usize = RAW_TAG_AT + 12;
/// The tag of the raw frame that ends a `--raw` run: the client sends it after its last echo
/// came back, the server echoes it and stops polling (see [`ProfilePort::wait_peer_gone`]).
const RAW_END_TAG: (u32, u64) = (u32::MAX, u64::MAX);
/// How long the client resends the end frame while its echo does not come back.
const RAW_END_WAIT: Duration = Duration::from_secs(1);
/// How long the side that ends last waits, without polling, for its peer to go.
const PEER_GONE_WAIT: Duration = Duration::from_secs(3);

/// Idle turns between two reads of the wall clock in a wait loop (its deadline, resends):
/// `Instant::now` costs tens of nanoseconds, and a frame's arrival should not wait for it.
const CLOCK_EVERY: u32 = 1024;
/// An unanswered raw frame is sent again after this long (raw frames have no retransmission).
const RAW_RESEND: Duration = Duration::from_millis(100);

/// Length of the raw frame of a `size`-byte round: that of the RDMA WRITE-only frame carrying
/// `size` bytes (Ethernet, IPv4, UDP, BTH, RETH, padded payload, ICRC), at least 60.
fn raw_frame_len(size: usize) -> usize {
    (14 + 20 + 8 + 28 + size.div_ceil(4) * 4 + 4).max(60)
}

/// A raw frame of `size`'s length from `mac` to everyone, untagged.
fn raw_frame(mac: [u8; 6], size: usize) -> Vec<u8> {
    let mut frame = Vec::with_capacity(raw_frame_len(size));
    frame.extend_from_slice(&[0xff; 6]);
    frame.extend_from_slice(&mac);
    frame.extend_from_slice(&RAW_ETHERTYPE.to_be_bytes());
    frame.resize(raw_frame_len(size), 0);
    frame
}

/// Tags raw frame number `seq` of size round `round`.
fn raw_tag(frame: &mut [u8], round: u32, seq: u64) {
    frame[RAW_TAG_AT..RAW_TAG_AT + 4].copy_from_slice(&round.to_be_bytes());
    frame[RAW_TAG_AT + 4..RAW_TAG_END].copy_from_slice(&seq.to_be_bytes());
}

/// The (round, number) tag of raw frame `frame`, if it is a raw frame long enough to carry one.
fn raw_tag_of(frame: &[u8]) -> Option<(u32, u64)> {
    if frame.len() < RAW_TAG_END || u16::from_be_bytes([frame[12], frame[13]]) != RAW_ETHERTYPE {
        return None;
    }
    let mut round = [0u8; 4];
    let mut seq = [0u8; 8];
    round.copy_from_slice(&frame[RAW_TAG_AT..RAW_TAG_AT + 4]);
    seq.copy_from_slice(&frame[RAW_TAG_AT + 4..RAW_TAG_END]);
    Some((u32::from_be_bytes(round), u64::from_be_bytes(seq)))
}

fn main() -> ExitCode {
    dpdk_roce::log::init_program();
    let args = match Args::parse().with_role() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("roce-lat: {e}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roce-lat: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The largest raw frame `-a` sends with `--raw` or `--with-raw`: one that fits a 1500-byte
/// IP MTU (a raw frame is one frame, where an RDMA message spans several).
const RAW_SWEEP_MAX_FRAME: usize = 1514;

/// The sizes of the run: `--size`, or with `-a` every power of two from 2 B to 8 MiB (with
/// `--raw` or `--with-raw`, up to the largest whose frame fits `RAW_SWEEP_MAX_FRAME`: 1 KiB).
fn sizes(args: &Args) -> Vec<usize> {
    if args.sweep {
        let raw = args.raw || args.with_raw;
        (1..=MAX_SIZE.trailing_zeros())
            .map(|s| 1usize << s)
            .filter(|&s| !raw || raw_frame_len(s) <= RAW_SWEEP_MAX_FRAME)
            .collect()
    } else {
        vec![args.size]
    }
}

fn run(args: &Args) -> Result<(), String> {
    if !args.sweep && !(2..=MAX_SIZE).contains(&args.size) {
        return Err(format!("--size must be 2..={MAX_SIZE}"));
    }
    if args.iters == 0 {
        return Err("--iters must be at least 1".into());
    }
    if args.peer.client && args.api == Api::Dat {
        let ia = args.ia.as_deref().ok_or("--api dat needs --ia")?;
        return dat_client::client(args, ia);
    }
    if args.peer.client && args.api == Api::DatRust {
        return dat_rust_client::client(args);
    }
    if args.op == Op::WriteCompletion && args.payload.verify {
        return Err(
            "--verify checks write, send and read (a write-completion peer is passive)".into(),
        );
    }
    let mut profile = Profile::load_with_env(&args.profile).map_err(|e| e.to_string())?;
    if let Some(c) = &args.capture {
        profile.engine.capture = Some(c.clone());
    }
    let pp = ProfilePort::open(&profile).map_err(|e| format!("DPDK: {e}"))?;
    let mac = pp.port.mac().map_err(|e| e.to_string())?;
    if args.peer.client && !pp.wait_link_up(Duration::from_secs(10)) {
        return Err("the port's link did not come up within 10 s".into());
    }
    let mut io = DpdkFrameIo::new(pp.eal, &pp.port, 2047).map_err(|e| e.to_string())?;
    args.payload.set_zero_copy(&mut io, &pp.port)?;
    let timeout = Duration::from_millis(args.timeout_ms);
    if args.raw {
        return raw(args, io, mac, &pp, timeout);
    }
    // Buffers from DPDK hugepages when the EAL has them (the provider's LMR memory), else heap.
    let mut host = roce_bench::host(&profile, &pp, mac, MR_CAPACITY)?;
    host.set_header_prediction(!args.no_header_prediction);
    eprintln!(
        "memory: {} regions, zero-copy TX from {}",
        if profile.eal.hugepages {
            "hugepage"
        } else {
            "heap"
        },
        io.zero_copy_min()
            .map_or("never (copy)".to_string(), |m| format!("{m} B payloads"))
    );
    let mut shard = Shard::new(host, BenchIo::new(io, &profile)?);
    if args.with_raw {
        let mode = if args.peer.server {
            RawMode::Echo
        } else {
            RawMode::Queue
        };
        shard.set_raw_channel(Some(RawChannel::new(
            RAW_ETHERTYPE,
            mode,
            64,
            raw_frame_len(MAX_SIZE).min(9216),
        )));
    }
    if let Some(c) = &profile.engine.capture {
        shard.capture_to(c).map_err(|e| e.to_string())?;
    }
    let result = if args.peer.server {
        server(args, &mut shard, &pp, timeout)
    } else {
        client(args, &mut shard, &profile, timeout)
    };
    let frames = shard.finish_capture().map_err(|e| e.to_string())?;
    if let Some(c) = &profile.engine.capture {
        eprintln!("capture: {frames} frames written to {}", c.display());
    }
    result
}

/// Both sides' buffers: `src` is what this side writes/sends from, `dst` what the peer writes
/// into (and what a READ reads). Both in one protection zone, the QP's.
struct Buffers {
    pd: u32,
    src: Region,
    dst: Region,
}

fn buffers(shard: &mut BenchShard) -> Result<Buffers, String> {
    let table = shard.host.mr_table();
    let pz = table.create_pz();
    let reg = |access| {
        table
            .register_alloc(pz, MAX_SIZE, 4096, access)
            .map_err(|e| format!("registering {MAX_SIZE} B: {e:?}"))
    };
    Ok(Buffers {
        pd: pz.id(),
        src: reg(Access::LOCAL_WRITE)?,
        dst: reg(Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ)?,
    })
}

/// Reads `out.len()` bytes at `offset` of region `r` (the consumer's own read, by L_Key).
fn read_region(
    shard: &BenchShard,
    r: &Region,
    offset: usize,
    out: &mut [u8],
) -> Result<(), String> {
    shard
        .host
        .mr_table()
        .read_local(r.lkey, r.addr + offset as u64, out)
        .map_err(|e| format!("reading the buffer: {e:?}"))
}

/// Writes `data` at `offset` of region `r`.
fn write_region(shard: &BenchShard, r: &Region, offset: usize, data: &[u8]) -> Result<(), String> {
    shard
        .host
        .mr_table()
        .write_local(r.lkey, r.addr + offset as u64, data)
        .map_err(|e| format!("writing the buffer: {e:?}"))
}

/// Private data carrying a buffer's address, R_Key and length.
fn encode_buffer(r: &Region) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&r.addr.to_be_bytes());
    v.extend_from_slice(&r.rkey.to_be_bytes());
    v.extend_from_slice(&(r.len as u32).to_be_bytes());
    v
}

fn decode_buffer(p: &[u8]) -> Result<(u64, u32), String> {
    if p.len() < 16 {
        return Err(format!(
            "peer's private data is {} bytes, expected 16",
            p.len()
        ));
    }
    let addr = u64::from_be_bytes(p[0..8].try_into().map_err(|_| "bad private data")?);
    let rkey = u32::from_be_bytes(p[8..12].try_into().map_err(|_| "bad private data")?);
    Ok((addr, rkey))
}

/// With `--stages`: where this side's loop spent its busy time over the measured iterations
/// of `size` (`StageTimes`, TSC nanoseconds), then stops timing.
fn print_stages(who: &str, size: usize, shard: &mut BenchShard, progress: &Progress) {
    let Some(t) = shard.stage_times() else {
        return;
    };
    shard.time_stages(false);
    progress.println(&stages_line(who, size, &t));
}

fn check_wc(wc: &WorkCompletion) -> Result<(), String> {
    if wc.status == WcStatus::Success {
        Ok(())
    } else {
        Err(format!("work request failed: {wc:?}"))
    }
}

fn qp_options(bufs: &Buffers) -> QpOptions {
    QpOptions {
        pd: bufs.pd,
        sq_depth: 512,
        rq_depth: 512,
        ..QpOptions::default()
    }
}

fn server(
    args: &Args,
    shard: &mut BenchShard,
    pp: &ProfilePort,
    timeout: Duration,
) -> Result<(), String> {
    let bufs = buffers(shard)?;
    let now = shard.clock().now();
    let qpn = shard
        .host
        .create_qp(now, qp_options(&bufs))
        .map_err(|e| e.to_string())?;
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
    let (id, private) = poll_until(
        shard,
        Duration::from_secs(60),
        "a connection request",
        |s| {
            Ok(match s.host.poll_event() {
                Some(CmEvent::ConnectRequest {
                    id, private_data, ..
                }) => Some((id, private_data)),
                _ => None,
            })
        },
    )?;
    let (peer_addr, peer_rkey) = decode_buffer(&private)?;
    pre_post_recvs(shard, qpn, &bufs)?;
    // What the client's READs find, in place before the connection is accepted.
    if args.op == Op::Read {
        let b = payload::message(READ_SOURCE, 0, MAX_SIZE);
        write_region(shard, &bufs.dst, 0, &b)?;
    }
    let mut ap = AcceptParams::new(qpn, Psn::new(0x4000));
    ap.responder_resources = 16;
    ap.initiator_depth = 16;
    ap.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    ap.private_data = encode_buffer(&bufs.dst);
    let now = shard.clock().now();
    shard.host.accept(now, id, ap).map_err(|e| e.to_string())?;
    poll_until(shard, timeout, "the RTU", |s| {
        Ok(match s.host.poll_event() {
            Some(CmEvent::Established { .. }) => Some(()),
            _ => None,
        })
    })?;
    let peer = Peer {
        addr: peer_addr,
        rkey: peer_rkey,
        qpn,
    };
    let table = shard.host.mr_table().clone();
    let dst_view = pin_buffer(&table, bufs.pd, &bufs.dst, Access::empty())?;
    let src_view = pin_buffer(&table, bufs.pd, &bufs.src, Access::LOCAL_WRITE)?;
    let sizes = sizes(args);
    let progress = Progress::sizes(sizes.len());
    for size in progress.wrap(sizes) {
        let total = args.warmup + args.iters;
        let stages_from = args.stages.then_some(args.warmup + 1);
        match args.op {
            Op::Write => {
                for i in 1..=total {
                    if stages_from == Some(i) {
                        shard.time_stages(true);
                    }
                    wait_byte(shard, &dst_view, size, tag(i), timeout)?;
                    if args.payload.verify {
                        verify_dst(shard, &bufs, size, i, "RDMA WRITE")?;
                    }
                    post_write(shard, &bufs, &src_view, &peer, size, i, args.payload.verify)?;
                    shard.send_now();
                }
            }
            Op::Send => {
                for i in 1..=total {
                    if stages_from == Some(i) {
                        shard.time_stages(true);
                    }
                    wait_recv(shard, qpn, &bufs, timeout)?;
                    if args.payload.verify {
                        verify_dst(shard, &bufs, size, i, "SEND")?;
                    }
                    post_send(shard, &bufs, &peer, size, i, args.payload.verify)?;
                    shard.send_now();
                }
            }
            Op::Read | Op::WriteCompletion => {}
        }
        print_stages("server", size, shard, &progress);
    }
    // Serve (READs need no answer) until the client disconnects.
    poll_until(
        shard,
        Duration::from_secs(600),
        "the client's disconnect",
        |s| {
            while let Some(wc) = s.host.poll_completion() {
                if wc.status != WcStatus::Success && wc.status != WcStatus::WrFlushErr {
                    return Err(format!("work request failed: {wc:?}"));
                }
            }
            Ok(match s.host.poll_event() {
                Some(CmEvent::Disconnected { .. }) => Some(()),
                _ => None,
            })
        },
    )?;
    // The DREP goes out now, then this side stops polling until the client has gone (it ends
    // on the DREP; a lost one it waits for past one DREQ resend, `client`).
    shard.send_now();
    let wait = shard.host.config().cm.dreq_resend_wait() + PEER_GONE_WAIT;
    if !pp.wait_peer_gone(wait) {
        eprintln!("the client was still there {wait:?} after its disconnect");
    }
    println!("server done");
    Ok(())
}

/// With `--verify`: the whole message `i` must be in `dst`.
fn verify_dst(
    shard: &BenchShard,
    bufs: &Buffers,
    size: usize,
    i: usize,
    what: &str,
) -> Result<(), String> {
    let mut b = vec![0u8; size];
    read_region(shard, &bufs.dst, 0, &mut b)?;
    check_message(&b, i, what)
}

struct Peer {
    addr: u64,
    rkey: u32,
    qpn: u32,
}

/// The message of iteration `i`: message `i` of payload stream 0 (`roce_sim::payload`) but
/// for its last byte, the marker `tag(i)`.
fn fill_message(buf: &mut [u8], i: usize) {
    let n = buf.len();
    payload::fill(&mut buf[..n - 1], 0, i as u64);
    buf[n - 1] = tag(i);
}

/// The payload stream of what the client's READs find at the server: one message over the
/// whole buffer.
const READ_SOURCE: u64 = u64::MAX;

fn check_message(buf: &[u8], i: usize, what: &str) -> Result<(), String> {
    let n = buf.len();
    payload::check(&buf[..n - 1], 0, i as u64)
        .map_err(|e| format!("{what} of iteration {i} ({n} B): {e}"))?;
    if buf[n - 1] != tag(i) {
        return Err(format!("{what} of iteration {i}: marker byte wrong"));
    }
    Ok(())
}

/// The marker byte of iteration `i` (never 0, so a fresh buffer never matches).
fn tag(i: usize) -> u8 {
    (i % 255) as u8 + 1
}

fn pre_post_recvs(shard: &mut BenchShard, qpn: u32, bufs: &Buffers) -> Result<(), String> {
    for i in 0..256 {
        shard
            .host
            .post_recv(qpn, recv_wr(bufs, i))
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn recv_wr(bufs: &Buffers, id: u64) -> RecvWr {
    RecvWr {
        wr_id: id,
        sgl: dpdk_roce::sgl![Sge {
            addr: bufs.dst.addr,
            len: MAX_SIZE as u32,
            lkey: bufs.dst.lkey,
        }],
    }
}

fn wait_byte(
    shard: &mut BenchShard,
    dst: &PinGuard<'_>,
    size: usize,
    v: u8,
    timeout: Duration,
) -> Result<(), String> {
    poll_until(shard, timeout, "the peer's RDMA WRITE", |s| {
        while let Some(wc) = s.host.poll_completion() {
            check_wc(&wc)?;
        }
        let b = dst
            .load(size - 1)
            .map_err(|e| format!("reading the buffer: {e:?}"))?;
        Ok((b == v).then_some(()))
    })
}

/// Buffer `r` pinned for the run: the consumer polls the last byte of its destination directly
/// and stores the tag byte of its source directly, as `ib_write_lat` does with its buffers,
/// instead of looking the key up on every access (`access`: `LOCAL_WRITE` to store).
fn pin_buffer<'t>(
    table: &'t MrTable,
    pd: u32,
    r: &Region,
    access: Access,
) -> Result<PinGuard<'t>, String> {
    table
        .pin(
            &MemRef {
                kind: KeyKind::Local,
                pd,
                key: r.lkey,
                addr: r.addr,
                len: MAX_SIZE as u32,
            },
            access,
        )
        .map_err(|e| format!("pinning the buffer: {e:?}"))
}

fn wait_recv(
    shard: &mut BenchShard,
    qpn: u32,
    bufs: &Buffers,
    timeout: Duration,
) -> Result<(), String> {
    let id = poll_until(shard, timeout, "the peer's SEND", |s| {
        while let Some(wc) = s.host.poll_completion() {
            check_wc(&wc)?;
            if wc.opcode == dpdk_roce::transport::types::WcOpcode::Recv {
                return Ok(Some(wc.wr_id));
            }
        }
        Ok(None)
    })?;
    shard
        .host
        .post_recv(qpn, recv_wr(bufs, id))
        .map_err(|e| e.to_string())
}

fn post_write(
    shard: &mut BenchShard,
    bufs: &Buffers,
    src: &PinGuard<'_>,
    peer: &Peer,
    size: usize,
    i: usize,
    verify: bool,
) -> Result<(), String> {
    let v = tag(i);
    if verify {
        let mut b = vec![0u8; size];
        fill_message(&mut b, i);
        write_region(shard, &bufs.src, 0, &b)?;
    } else {
        src.store(size - 1, v)
            .map_err(|e| format!("writing the buffer: {e:?}"))?;
    }
    let now = shard.clock().now();
    shard
        .host
        .post_send(
            now,
            peer.qpn,
            SendWr {
                wr_id: u64::from(v),
                op: SendOp::Write {
                    remote_addr: peer.addr,
                    rkey: peer.rkey,
                },
                sgl: dpdk_roce::sgl![Sge {
                    addr: bufs.src.addr,
                    len: size as u32,
                    lkey: bufs.src.lkey,
                }],
                signaled: false,
                fence: false,
                solicited: false,
            },
        )
        .map_err(|e| e.to_string())
}

fn post_send(
    shard: &mut BenchShard,
    bufs: &Buffers,
    peer: &Peer,
    size: usize,
    i: usize,
    verify: bool,
) -> Result<(), String> {
    if verify {
        let mut b = vec![0u8; size];
        fill_message(&mut b, i);
        write_region(shard, &bufs.src, 0, &b)?;
    }
    let now = shard.clock().now();
    shard
        .host
        .post_send(
            now,
            peer.qpn,
            SendWr {
                wr_id: 0,
                op: SendOp::Send,
                sgl: dpdk_roce::sgl![Sge {
                    addr: bufs.src.addr,
                    len: size as u32,
                    lkey: bufs.src.lkey,
                }],
                signaled: false,
                fence: false,
                solicited: false,
            },
        )
        .map_err(|e| e.to_string())
}

fn client(
    args: &Args,
    shard: &mut BenchShard,
    p: &Profile,
    timeout: Duration,
) -> Result<(), String> {
    let server_ip = args.peer.server_ip.ok_or("--client needs --server-ip")?;
    let bufs = buffers(shard)?;
    let now = shard.clock().now();
    let qpn = shard
        .host
        .create_qp(now, qp_options(&bufs))
        .map_err(|e| e.to_string())?;
    pre_post_recvs(shard, qpn, &bufs)?;
    let mut cp = ConnectParams::new(server_ip, args.peer.port, qpn, Psn::new(0x4000));
    cp.responder_resources = 16;
    cp.initiator_depth = 16;
    cp.access = Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    cp.private_data = encode_buffer(&bufs.dst);
    let now = shard.clock().now();
    shard.host.connect(now, cp).map_err(|e| e.to_string())?;
    let private = poll_until(shard, Duration::from_secs(30), "the server's REP", |s| {
        Ok(match s.host.poll_event() {
            Some(CmEvent::Established { private_data, .. }) => Some(private_data),
            Some(
                ev @ (CmEvent::Rejected { .. }
                | CmEvent::Unreachable { .. }
                | CmEvent::TimedOut { .. }),
            ) => return Err(format!("connection failed: {ev:?}")),
            _ => None,
        })
    })?;
    let (addr, rkey) = decode_buffer(&private)?;
    let peer = Peer { addr, rkey, qpn };
    let scale = if args.op.passive_peer() {
        Scale::Full
    } else {
        Scale::HalfRoundTrip
    };
    let mut series = Vec::new();
    let mut raw_series = Vec::new();
    let table = shard.host.mr_table().clone();
    let dst_view = pin_buffer(&table, bufs.pd, &bufs.dst, Access::empty())?;
    let src_view = pin_buffer(&table, bufs.pd, &bufs.src, Access::LOCAL_WRITE)?;
    let mac = shard.host.config().net.mac.0;
    let mut back = Vec::with_capacity(9216);
    let sizes = sizes(args);
    let progress = Progress::sizes(sizes.len());
    for (round, size) in progress.wrap(sizes).enumerate() {
        let mut s = LatencySeries::new(size, scale);
        let mut raw_s = LatencySeries::new(size, Scale::HalfRoundTrip);
        let mut frame = raw_frame(mac, size);
        for i in 1..=args.warmup + args.iters {
            if args.stages && i == args.warmup + 1 {
                shard.time_stages(true);
            }
            if args.with_raw {
                raw_tag(&mut frame, round as u32, i as u64);
                let dt = raw_echo(shard, &frame, &mut back, timeout)?;
                if i > args.warmup {
                    raw_s.record(dt.as_nanos() as u64);
                }
            }
            let t0 = Instant::now();
            match args.op {
                Op::Write => {
                    post_write(shard, &bufs, &src_view, &peer, size, i, args.payload.verify)?;
                    shard.send_now();
                    wait_byte(shard, &dst_view, size, tag(i), timeout)?;
                }
                Op::Send => {
                    post_send(shard, &bufs, &peer, size, i, args.payload.verify)?;
                    shard.send_now();
                    wait_recv(shard, qpn, &bufs, timeout)?;
                }
                Op::Read => {
                    if args.payload.verify {
                        write_region(shard, &bufs.dst, 0, &vec![0u8; size])?;
                    }
                    let now = shard.clock().now();
                    shard
                        .host
                        .post_send(
                            now,
                            qpn,
                            SendWr {
                                wr_id: i as u64,
                                op: SendOp::Read {
                                    remote_addr: peer.addr,
                                    rkey: peer.rkey,
                                },
                                sgl: dpdk_roce::sgl![Sge {
                                    addr: bufs.dst.addr,
                                    len: size as u32,
                                    lkey: bufs.dst.lkey,
                                }],
                                signaled: true,
                                fence: false,
                                solicited: false,
                            },
                        )
                        .map_err(|e| e.to_string())?;
                    poll_until(shard, timeout, "the RDMA READ", |s| {
                        match s.host.poll_completion() {
                            Some(wc) => check_wc(&wc).map(|()| Some(())),
                            None => Ok(None),
                        }
                    })?;
                }
                Op::WriteCompletion => {
                    let now = shard.clock().now();
                    shard
                        .host
                        .post_send(
                            now,
                            qpn,
                            SendWr {
                                wr_id: i as u64,
                                op: SendOp::Write {
                                    remote_addr: peer.addr,
                                    rkey: peer.rkey,
                                },
                                sgl: dpdk_roce::sgl![Sge {
                                    addr: bufs.src.addr,
                                    len: size as u32,
                                    lkey: bufs.src.lkey,
                                }],
                                signaled: true,
                                fence: false,
                                solicited: false,
                            },
                        )
                        .map_err(|e| e.to_string())?;
                    shard.send_now();
                    poll_until(shard, timeout, "the RDMA WRITE's completion", |s| {
                        match s.host.poll_completion() {
                            Some(wc) => check_wc(&wc).map(|()| Some(())),
                            None => Ok(None),
                        }
                    })?;
                }
            }
            let dt = t0.elapsed();
            if args.payload.verify {
                match args.op {
                    Op::Write => verify_dst(shard, &bufs, size, i, "RDMA WRITE")?,
                    Op::Send => verify_dst(shard, &bufs, size, i, "SEND")?,
                    Op::WriteCompletion => {}
                    Op::Read => {
                        let mut b = vec![0u8; size];
                        read_region(shard, &bufs.dst, 0, &mut b)?;
                        payload::check(&b, READ_SOURCE, 0)
                            .map_err(|e| format!("RDMA READ of {size} B: {e}"))?;
                    }
                }
            }
            if i > args.warmup {
                s.record(dt.as_nanos() as u64);
            }
        }
        print_stages("client", size, shard, &progress);
        series.push(s);
        raw_series.push(raw_s);
    }
    let now = shard.clock().now();
    shard.host.disconnect(now, qpn).map_err(|e| e.to_string())?;
    // A lost DREQ is sent again after the CM response timeout (IBTA vol. 1 §12.6.11; 4.3 s at
    // the default exponent 20): wait past one resend, or the server, which ends on the DREQ,
    // would wait for a client that is gone. The DREP normally comes within microseconds.
    let drep_wait = shard.host.config().cm.dreq_resend_wait();
    let _ = poll_until(shard, drep_wait, "the DREP", |s| {
        Ok(match s.host.poll_event() {
            Some(CmEvent::Disconnected { .. }) => Some(()),
            _ => None,
        })
    });
    roce_bench::print_summary(shard, &[qpn]);
    if let Some(r) = shard.raw_channel() {
        eprintln!("raw channel: {:?}", r.stats());
    }
    let label = args.op.label();
    let memory = format!(
        "{} MR, zero-copy TX {}",
        if p.eal.hugepages { "hugepage" } else { "heap" },
        shard
            .io
            .zero_copy_min()
            .map_or("off".to_string(), |m| format!(">= {m} B"))
    );
    report(args, label, &memory, &series)?;
    if args.with_raw {
        report_interleaved_raw(args, label, &series, &raw_series)?;
    }
    Ok(())
}

/// One raw echo round trip through the shard (`--with-raw`): sends the tagged `frame`, polls
/// until its echo is back (resent every [`RAW_RESEND`] while unanswered), returns the time.
fn raw_echo(
    shard: &mut BenchShard,
    frame: &[u8],
    back: &mut Vec<u8>,
    timeout: Duration,
) -> Result<Duration, String> {
    // An ACK the last RDMA round trip left for this side's next frame leaves first, untimed:
    // the echo's time is the raw path's alone.
    shard.send_now();
    let t0 = Instant::now();
    if !shard.send_raw(frame) {
        return Err("raw: TX queue full".into());
    }
    let mut last_send = t0;
    let mut n = 0u32;
    loop {
        shard.poll();
        while shard.pop_raw(back) {
            if back.len() >= RAW_TAG_END
                && back[RAW_TAG_AT..RAW_TAG_END] == frame[RAW_TAG_AT..RAW_TAG_END]
            {
                return Ok(t0.elapsed());
            }
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(CLOCK_EVERY) {
            if t0.elapsed() > timeout {
                return Err("raw: an echo never came back".into());
            }
            if last_send.elapsed() > RAW_RESEND {
                shard.send_raw(frame);
                last_send = Instant::now();
            }
        }
    }
}

/// `--with-raw`: the raw echoes' table and hdrhistograms, then the ratio of the p50s (and
/// p99s) of the RDMA test to the raw echo, size by size.
fn report_interleaved_raw(
    args: &Args,
    label: &str,
    series: &[LatencySeries],
    raw: &[LatencySeries],
) -> Result<(), String> {
    report(args, RAW_LABEL, "none (L2 echo, interleaved)", raw)?;
    for (s, r) in series.iter().zip(raw) {
        let (a, b) = (s.row(), r.row());
        println!(
            "ratio {label}/{RAW_LABEL} {} B: p50 {:.2}x ({:.2} / {:.2} us), p99 {:.2}x ({:.2} / {:.2} us)",
            s.bytes,
            a.t_typical / b.t_typical,
            a.t_typical,
            b.t_typical,
            a.p99 / b.p99,
            a.p99,
            b.p99
        );
    }
    Ok(())
}

fn report(args: &Args, label: &str, memory: &str, series: &[LatencySeries]) -> Result<(), String> {
    let device = match (args.api, args.ia.as_deref()) {
        (Api::Dat, Some(ia)) if args.peer.client => format!("IA {ia} through libdat2"),
        (Api::DatRust, _) if args.peer.client => {
            format!("{} through the Rust DAT API", args.profile.display())
        }
        _ => args.profile.display().to_string(),
    };
    let rtt = if series.first().is_some_and(|s| s.scale == Scale::Full) {
        "full round trip"
    } else {
        "half round trip"
    };
    // perftest's test-info block where it has the field (`ctx_print_test_info`), then ours.
    for line in [
        RULE.to_owned(),
        lat_title(label),
        format!(" Dual-port       : OFF\t\tDevice         : {device}"),
        " Number of qps   : 1\t\tTransport type : RoCEv2 (dpdk-roce)".to_owned(),
        " Connection type : RC\t\tUsing SRQ      : OFF".to_owned(),
        " TX depth        : 1".to_owned(),
        " Link type       : Ethernet".to_owned(),
        " Progress        : inline".to_owned(),
        format!(" Memory          : {memory}"),
        format!(" Times           : microseconds, {rtt}"),
        table_header(),
    ] {
        println!("{line}");
    }
    for s in series {
        println!("{}", table_line(&s.row()));
    }
    println!("{RULE}");
    for s in series {
        let text = s.hgrm();
        if let Some(dir) = &args.hgrm_dir {
            std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            let path = dir.join(format!("{}-{}B.hgrm", label.to_lowercase(), s.bytes));
            std::fs::write(&path, &text).map_err(|e| e.to_string())?;
            println!("hdrhistogram: {}", path.display());
        }
        if args.report_histogram {
            println!(
                "# HdrHistogram percentile distribution, {} B, microseconds",
                s.bytes
            );
            print!("{text}");
        }
    }
    if args.json {
        let rows: Vec<_> = series.iter().map(LatencySeries::row).collect();
        let j = serde_json::json!({
            "test": label,
            "raw": label == RAW_LABEL,
            "memory": memory,
            "rows": rows,
        });
        println!("{j}");
    }
    Ok(())
}

/// `--raw`: L2 echo of frames as long as the RDMA WRITE frames of the same size.
/// `--stages` for `--raw`: the same `StageTimes` as a shard's (no stack: nothing is handled or
/// built), timed with the same clock.
struct RawStages {
    clock: Clock,
    times: Option<StageTimes>,
}

impl RawStages {
    fn new(on: bool) -> RawStages {
        RawStages {
            clock: Clock::new(),
            times: on.then(StageTimes::default),
        }
    }

    /// The start of a timed stage (`None` when not timing).
    fn start(&self) -> Option<dpdk_roce::time::Instant> {
        self.times.map(|_| self.clock.now())
    }

    /// Ends the stage begun at `start`: `add` gets its nanoseconds.
    fn end(
        &mut self,
        start: Option<dpdk_roce::time::Instant>,
        add: impl FnOnce(&mut StageTimes, u64),
    ) {
        if let (Some(s), Some(t)) = (start, self.times.as_mut()) {
            add(t, self.clock.now().saturating_nanos_since(s));
        }
    }
}

fn raw(
    args: &Args,
    mut io: DpdkFrameIo,
    mac: [u8; 6],
    pp: &ProfilePort,
    timeout: Duration,
) -> Result<(), String> {
    let total = args.warmup + args.iters;
    if args.peer.server {
        println!("READY raw echo");
        let _ = std::io::stdout().flush();
        let deadline_idle = Duration::from_secs(60);
        let mut last = Instant::now();
        let mut stages = RawStages::new(args.stages);
        let mut ended = false;
        // Echo everything until the client's end frame, echoed too; then stop polling.
        while !ended {
            let mut got = Vec::new();
            let t = stages.start();
            let n = io.rx_burst(&mut |f| {
                if raw_tag_of(f).is_some() {
                    got.push(f.to_vec());
                }
            });
            if n > 0 {
                stages.end(t, |st, ns| st.received(n as u64, ns, 0));
            }
            let echoed = !got.is_empty();
            for mut f in got {
                ended |= raw_tag_of(&f) == Some(RAW_END_TAG);
                turn_around(&mut f, mac);
                let t = stages.start();
                io.tx(&f);
                stages.end(t, StageTimes::copied);
                last = Instant::now();
            }
            let t = stages.start();
            io.flush();
            if echoed {
                stages.end(t, StageTimes::flushed);
            }
            if last.elapsed() > deadline_idle {
                return Err("raw: the client went quiet".into());
            }
        }
        if !pp.wait_peer_gone(PEER_GONE_WAIT) {
            eprintln!("raw: the client was still there {PEER_GONE_WAIT:?} after its end frame");
        }
        if let Some(t) = stages.times {
            println!(
                "{}",
                stages_line("server (all sizes, warm-up included)", 0, &t)
            );
        }
        println!("server done");
        return Ok(());
    }
    let mut series = Vec::new();
    let sizes = sizes(args);
    let progress = Progress::sizes(sizes.len());
    for (round, size) in progress.wrap(sizes).enumerate() {
        let mut s = LatencySeries::new(size, Scale::HalfRoundTrip);
        let mut frame = raw_frame(mac, size);
        let mut stages = RawStages::new(false);
        for i in 1..=total {
            if args.stages && i == args.warmup + 1 {
                stages = RawStages::new(true);
            }
            raw_tag(&mut frame, round as u32, i as u64);
            let t0 = Instant::now();
            let t = stages.start();
            if !io.tx(&frame) {
                return Err("raw: TX queue full".into());
            }
            stages.end(t, StageTimes::copied);
            let t = stages.start();
            io.flush();
            stages.end(t, StageTimes::flushed);
            let mut back = false;
            let mut last_send = t0;
            let mut turns = 0u32;
            while !back {
                // Raw frames have no retransmission: resend while the path is still being set
                // up (e.g. taps joined after the processes start). Only unanswered frames are
                // resent, so measured iterations are unaffected once the path works.
                turns = turns.wrapping_add(1);
                let check = turns.is_multiple_of(CLOCK_EVERY);
                if check && last_send.elapsed() > RAW_RESEND {
                    io.tx(&frame);
                    io.flush();
                    last_send = Instant::now();
                }
                let t = stages.start();
                let n = io.rx_burst(&mut |f| {
                    if raw_tag_of(f) == Some((round as u32, i as u64)) {
                        back = true;
                    }
                });
                if n > 0 {
                    stages.end(t, |st, ns| st.received(n as u64, ns, 0));
                }
                if !back && check && t0.elapsed() > timeout {
                    return Err(format!("raw: frame {i} never came back"));
                }
            }
            if i > args.warmup {
                s.record(t0.elapsed().as_nanos() as u64);
            }
        }
        if let Some(t) = stages.times {
            progress.println(&stages_line("client", size, &t));
        }
        series.push(s);
    }
    if !raw_end(&mut io, mac) {
        eprintln!("raw: the server did not echo the end frame within {RAW_END_WAIT:?}");
    }
    report(args, RAW_LABEL, "none (L2 echo)", &series)
}

/// Ends a `--raw` run in order: sends the end frame until its echo comes back (at most
/// [`RAW_END_WAIT`]). The server stops polling once it has echoed it, and this side stops too,
/// so neither polls while the other leaves. Returns whether the echo came.
fn raw_end(io: &mut DpdkFrameIo, mac: [u8; 6]) -> bool {
    let mut frame = raw_frame(mac, 2);
    raw_tag(&mut frame, RAW_END_TAG.0, RAW_END_TAG.1);
    let t0 = Instant::now();
    let mut last_send: Option<Instant> = None;
    let mut turns = 0u32;
    loop {
        if last_send.is_none_or(|t| t.elapsed() > RAW_RESEND) {
            io.tx(&frame);
            io.flush();
            last_send = Some(Instant::now());
        }
        let mut back = false;
        io.rx_burst(&mut |f| back |= raw_tag_of(f) == Some(RAW_END_TAG));
        if back {
            return true;
        }
        turns = turns.wrapping_add(1);
        if turns.is_multiple_of(CLOCK_EVERY) && t0.elapsed() > RAW_END_WAIT {
            return false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data frame's tag reads back; the end frame is told from every data frame, also from
    /// the last of a long run; frames of another EtherType or too short carry no tag.
    #[test]
    fn raw_tags_read_back_and_the_end_frame_is_its_own() {
        let mac = [2, 0, 0, 0, 0, 1];
        let mut f = raw_frame(mac, 8);
        raw_tag(&mut f, 3, 17);
        assert_eq!(raw_tag_of(&f), Some((3, 17)));
        assert_ne!(raw_tag_of(&f), Some(RAW_END_TAG));
        raw_tag(&mut f, u32::MAX, u64::MAX - 1);
        assert_ne!(raw_tag_of(&f), Some(RAW_END_TAG));
        raw_tag(&mut f, RAW_END_TAG.0, RAW_END_TAG.1);
        assert_eq!(raw_tag_of(&f), Some(RAW_END_TAG));
        turn_around(&mut f, [2, 0, 0, 0, 0, 2]);
        assert_eq!(raw_tag_of(&f), Some(RAW_END_TAG), "the echo keeps the tag");
        let mut other = f.clone();
        other[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        assert_eq!(raw_tag_of(&other), None);
        assert_eq!(raw_tag_of(&f[..RAW_TAG_END - 1]), None);
    }
}
