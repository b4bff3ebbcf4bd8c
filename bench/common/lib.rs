//! roce_bench, the top package's library: what roce-lat and roce-bw share. The command-line
//! arguments they have in common (`args`), a port's host from its profile, the poll-until loop
//! of a consumer driving its shard inline, and the DAT consumer helpers of their `--api dat`
//! clients (`dat`).

#![forbid(unsafe_code)]

pub mod args;
pub mod dat;

use dpdk_roce::config::faults::FaultConfig;
use dpdk_roce::config::Profile;
use dpdk_roce::dpdk::{DpdkFrameIo, HugepageAllocator, ProfilePort};
use dpdk_roce::engine::faults::FaultyIo;
use dpdk_roce::engine::shard::{Shard, StageTimes};
use dpdk_roce::host::{Host, HostConfig};
use dpdk_roce::io::{Built, FrameBuf, FrameIo, IoStats, PinnedFrame};
use dpdk_roce::mem::MrTable;
use dpdk_roce::transport::qp::QpStats;
use dpdk_roce::wire::ethernet::EthernetAddress;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A bench program's shard: the checked region table over one DPDK queue pair.
pub type BenchShard = Shard<Arc<MrTable>, BenchIo>;

/// A bench program's queue pair: the port's, behind the provider's fault injection when
/// `DPDK_ROCE_FAULTS` or the profile's `[faults]` asks for it, as an IA's is
/// (dpdk-config/README.md "`[faults]`: fault injection"). One per shard, so the variants' sizes do not
/// matter and neither is boxed (the port's is the hot path).
#[allow(clippy::large_enum_variant)]
pub enum BenchIo {
    Port(DpdkFrameIo),
    Faulty(FaultyIo<DpdkFrameIo>),
}

impl BenchIo {
    /// `io` as `profile` and the environment ask.
    pub fn new(io: DpdkFrameIo, profile: &Profile) -> Result<BenchIo, String> {
        Ok(match FaultConfig::from_env_or(profile.faults)? {
            Some(f) => {
                eprintln!("fault injection on: {f:?}");
                BenchIo::Faulty(FaultyIo::new(io, f, 0))
            }
            None => BenchIo::Port(io),
        })
    }

    /// The port queue's counters.
    pub fn port_stats(&self) -> &IoStats {
        match self {
            BenchIo::Port(io) => &io.stats,
            BenchIo::Faulty(io) => &io.inner().stats,
        }
    }
}

impl FrameIo for BenchIo {
    fn rx_burst(&mut self, f: &mut dyn FnMut(&[u8])) -> usize {
        match self {
            BenchIo::Port(io) => io.rx_burst(f),
            BenchIo::Faulty(io) => io.rx_burst(f),
        }
    }
    fn tx(&mut self, frame: &[u8]) -> bool {
        match self {
            BenchIo::Port(io) => io.tx(frame),
            BenchIo::Faulty(io) => io.tx(frame),
        }
    }
    fn tx_build(
        &mut self,
        scratch: &mut Vec<u8>,
        build: &mut dyn FnMut(&mut dyn FrameBuf) -> bool,
    ) -> Built {
        match self {
            BenchIo::Port(io) => io.tx_build(scratch, build),
            BenchIo::Faulty(io) => io.tx_build(scratch, build),
        }
    }
    fn flush(&mut self) {
        match self {
            BenchIo::Port(io) => io.flush(),
            BenchIo::Faulty(io) => io.flush(),
        }
    }
    fn ready(&mut self) -> bool {
        match self {
            BenchIo::Port(io) => io.ready(),
            BenchIo::Faulty(io) => io.ready(),
        }
    }
    fn tx_pending(&self) -> bool {
        match self {
            BenchIo::Port(io) => io.tx_pending(),
            BenchIo::Faulty(io) => io.tx_pending(),
        }
    }
    fn rx_other_vlan(&self) -> u64 {
        match self {
            BenchIo::Port(io) => io.rx_other_vlan(),
            BenchIo::Faulty(io) => io.rx_other_vlan(),
        }
    }
    fn zero_copy_min(&self) -> Option<usize> {
        match self {
            BenchIo::Port(io) => io.zero_copy_min(),
            BenchIo::Faulty(io) => io.zero_copy_min(),
        }
    }
    fn tx_pinned(&mut self, frame: PinnedFrame<'_>) -> bool {
        match self {
            BenchIo::Port(io) => io.tx_pinned(frame),
            BenchIo::Faulty(io) => io.tx_pinned(frame),
        }
    }
}

/// How often a poll loop reads the clock for its deadline.
const CLOCK_EVERY: u32 = 1024;

/// The host of `profile`'s port (MAC `mac`): its RoCE address and MTU, a CA GUID from the MAC
/// (EUI-64), and a region table of `mr_capacity` regions allocated from DPDK hugepages when
/// the profile's EAL has them (the provider's LMR memory), from the heap otherwise.
pub fn host(
    profile: &Profile,
    pp: &ProfilePort,
    mac: [u8; 6],
    mr_capacity: u32,
) -> Result<Host<Arc<MrTable>>, String> {
    let table = if profile.eal.hugepages {
        MrTable::with_allocator(mr_capacity, Arc::new(HugepageAllocator::new(pp.eal)))
    } else {
        MrTable::new(mr_capacity)
    };
    let mut net = profile.roce.address.net_config(EthernetAddress(mac));
    net.mtu = profile.port.mtu;
    net.routes = profile.roce.route_table();
    net.dscp = profile.roce.dscp;
    net.ecn = profile.congestion.ecn;
    let mut host = Host::new(
        HostConfig {
            net,
            ca_guid: u64::from_be_bytes([
                mac[0], mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5],
            ]),
            seed: dpdk_roce::random::os_u64().map_err(|e| format!("OS random source: {e}"))?,
            qpns: dpdk_roce::host::QpnPolicy::Random,
            cm: Default::default(),
        },
        Arc::new(table),
    )
    .map_err(|e| e.to_string())?;
    host.set_congestion(profile.congestion.cc);
    Ok(host)
}

/// The end-of-run summary on stderr, six lines of `name: N` counters (the names the telemetry
/// commands use): the frames through the port and their fast paths, the receive drops that
/// happened by reason, the QPs' packets, retransmissions, timeouts and NAKs, congestion
/// control's marks, CNPs, cuts and each QP's rate at the end (Mbit/s; `wN`: the delay mode's
/// window in packets; `-`: unlimited), and the connection
/// manager's retransmitted and duplicate MADs and the REQs held until their source answered
/// ARP (`requests_unverified`: dropped unheard). A running
/// process's full counters are in its telemetry (`roce-tool stats`).
pub fn print_summary(shard: &BenchShard, qpns: &[u32]) {
    let s = shard.stats();
    let host = shard.host.stats();
    eprintln!(
        "summary: rx_frames: {}  tx_frames: {}  tx_dropped: {}  tx_zero_copy: {}  \
         rx_predicted: {}  tx_predicted: {}",
        s.rx_frames,
        s.tx_frames,
        s.tx_dropped,
        shard.io.port_stats().tx_zero_copy,
        host.rx_predicted,
        host.tx_predicted
    );
    let mut drops: Vec<String> = shard
        .host
        .net_stats()
        .drops()
        .map(|(r, n)| format!("{r}: {n}"))
        .collect();
    for (what, n) in [
        ("rx_unknown_qp", host.rx_unknown_qp),
        ("rx_wrong_origin", host.rx_wrong_origin),
        ("rx_bad_gsi", host.rx_bad_gsi),
        ("rx_other_vlan", s.rx_other_vlan),
    ] {
        if n > 0 {
            drops.push(format!("{what}: {n}"));
        }
    }
    eprintln!(
        "summary: receive drops: {}",
        if drops.is_empty() {
            "none".to_owned()
        } else {
            drops.join("  ")
        }
    );
    let q = qpns
        .iter()
        .filter_map(|&n| shard.host.qp(n))
        .fold(QpStats::default(), |sum, qp| sum + *qp.stats());
    eprintln!(
        "summary: {} QP(s): packets_sent: {}  packets_received: {}  retransmits: {}  \
         timeouts: {}  tail_probes: {}  spurious: {}  duplicates: {}  duplicate_responses: {}  \
         timers_deferred: {}",
        qpns.len(),
        q.packets_sent,
        q.packets_received,
        q.retransmits,
        q.timeouts,
        q.tail_probes,
        q.spurious_retransmits,
        q.duplicates,
        q.duplicate_responses,
        s.timers_deferred
    );
    eprintln!(
        "summary: NAKs sent/received: psn_sequence {}/{}  rnr {}/{}  fatal {}/{}",
        q.seq_naks_sent,
        q.seq_naks_received,
        q.rnr_naks_sent,
        q.rnr_naks_received,
        q.fatal_naks_sent,
        q.fatal_naks_received
    );
    let mut cc = dpdk_roce::cc::CcStats::default();
    let mut rates = Vec::new();
    for qp in qpns.iter().filter_map(|&n| shard.host.qp(n)) {
        let c = qp.congestion();
        cc += c.stats;
        rates.push(match (c.rate_bps(), c.cwnd()) {
            (Some(r), _) => format!("{:.1}", r as f64 / 1e6),
            (None, Some(w)) => format!("w{w:.1}"),
            (None, None) => "-".into(),
        });
    }
    eprintln!(
        "summary: congestion: {}  ce_marks: {}  cnps_sent: {}  cnps_received: {}  \
         cnps_ignored: {}  rate_cuts: {}  paced_waits: {}  rate_mbps: {}",
        shard.host.congestion().mode.name(),
        cc.ce_marks,
        cc.cnps_sent,
        cc.cnps_received,
        cc.cnps_ignored,
        cc.rate_cuts,
        cc.paced_waits,
        rates.join(",")
    );
    let cm = shard.host.cm().stats();
    eprintln!(
        "summary: CM: retransmits: {}  duplicates: {}  requests_held: {}  \
         requests_unverified: {}",
        cm.retransmits, cm.duplicates, host.rx_requests_held, host.rx_requests_unverified
    );
}

/// Polls the shard until `done` returns Some, or `timeout` passes. Each poll is an inline
/// consumer's turn (`Shard::poll_holding_acks`): a lone ACK waits for this program's next post
/// or poll, which always follows.
pub fn poll_until<T>(
    shard: &mut BenchShard,
    timeout: Duration,
    what: &str,
    mut done: impl FnMut(&mut BenchShard) -> Result<Option<T>, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + timeout;
    let mut n = 0u32;
    loop {
        shard.poll_holding_acks();
        if let Some(v) = done(shard)? {
            return Ok(v);
        }
        n = n.wrapping_add(1);
        if n.is_multiple_of(CLOCK_EVERY) && Instant::now() > deadline {
            return Err(format!("timed out waiting for {what}"));
        }
    }
}

/// One line of `--stages` output: mean nanoseconds per event of each stage.
pub fn stages_line(who: &str, size: usize, t: &StageTimes) -> String {
    let per = |ns: u64, n: u64| ns.checked_div(n).unwrap_or(0);
    format!(
        "stages {who} {size} B: rx_io {} ns/burst ({} bursts), handle {} ns/frame ({} frames), \
         build {} ns/frame ({} frames), tx_io {} ns/frame, flush {} ns/burst ({} bursts)",
        per(t.rx_io_ns, t.rx_bursts),
        t.rx_bursts,
        per(t.handle_ns, t.rx_frames),
        t.rx_frames,
        per(t.build_ns, t.tx_frames),
        t.tx_frames,
        per(t.tx_io_ns, t.tx_frames),
        per(t.flush_ns, t.flushes),
        t.flushes,
    )
}

/// `--stages` of a stream (roce-bw): each stage's time per message of the `messages` this side
/// sent or received in `busy_ns` of its loop, and the rest of the loop (posting, completions,
/// empty polls) per message. Stages overlap nothing, so the parts add up to the loop's time.
pub fn stream_stages_line(
    who: &str,
    size: usize,
    t: &StageTimes,
    messages: u64,
    loop_ns: u64,
) -> String {
    let per = |ns: u64| ns as f64 / messages.max(1) as f64;
    let staged = t.rx_io_ns + t.handle_ns + t.build_ns + t.tx_io_ns + t.flush_ns;
    format!(
        "stages {who} {size} B, ns per message: rx_io {:.1}, handle {:.1}, build {:.1}, \
         tx_io {:.1}, flush {:.1}, rest of the loop {:.1}; total {:.1} \
         ({} messages; frames in {} / out {} in {} / {} bursts; turns {}, idle {}, \
         TX queue full {})",
        per(t.rx_io_ns),
        per(t.handle_ns),
        per(t.build_ns),
        per(t.tx_io_ns),
        per(t.flush_ns),
        per(loop_ns.saturating_sub(staged)),
        per(loop_ns),
        messages,
        t.rx_frames,
        t.tx_frames,
        t.rx_bursts,
        t.flushes,
        t.turns,
        t.idle_turns,
        t.tx_full,
    )
}
