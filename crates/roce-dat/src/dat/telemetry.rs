//! The provider's counters as DPDK telemetry commands (`crate::dpdk::telemetry`), answered by a
//! running process that opened an IA on a profile with `eal.telemetry` on (the default; off
//! with `telemetry = false` or `DPDK_ROCE_TELEMETRY=0`). Read them with
//! `dpdk-telemetry.py -f <file prefix>` or `roce-tool stats`:
//!
//! | command | what each device answers |
//! |---|---|
//! | `/roce/port` | address, shards, progress mode, link; the port's `rte_eth_stats` (packets, bytes, errors, missed, no-mbuf); per shard its polls, frames, drops and cross-shard traffic (`shard<i>`) |
//! | `/roce/net` | frames received and handed to RoCE; ARP sent, received, resolved, failed; every receive drop reason by name (`drops`); the frames the transport refused (`transport`: unknown QP, wrong origin, ...) |
//! | `/roce/cm` | connections established (active, passive) and held; MADs sent and received by kind; malformed, unmatched, duplicate, retransmitted, refused and expired requests |
//! | `/roce/qps` or `/roce/qps,<from>` | one page of the device's QPNs: `total` (its QPs), `qpns` (at most [`QPS_PAGE`] QPNs `>= from`, ascending; `from` decimal or `0x` hex, 0 without) and `next` (the QPN to ask from for the next page; absent on the last page) |
//! | `/roce/qp,<qpn>` | one QP (decimal or `0x` hex): state, peer, packets and payload bytes each way, retransmissions, timeouts (tail probes among them), duplicates, ACKs, NAKs sent and received by kind, drops; `sequence`: where it stands now (WQEs and PSNs outstanding, window, retries left, ACK timer, expected PSN, queued responses, posted receives) |
//!
//! `/roce/qps` is paged because DPDK 22.11 carries at most 512 entries per array and 16 KiB
//! per answer: ask again from `next` until an answer has none (`roce-tool stats` does).
//!
//! Every answer is a dictionary with one entry per device open in the process, named after
//! the DPDK device of its port (`net_af_packet0`, `net_memif0`, ...): the IAs opened on one
//! port share one device and are reported together; IAs on different ports are separate
//! entries. Counters run from the device's creation (the first IA open on the port).
//!
//! The counters live in each shard's `Host`, owned by its poll thread: a command asks every
//! shard for a copy through its submission ring ([`Engine::with_host_within`]), which a poll
//! thread answers between two bursts; with inline progress DPDK's telemetry thread drives the
//! shards itself meanwhile, as a waiting consumer would. A shard that has not answered within
//! [`SHARD_WAIT`] is reported as such instead of its counters.
//!
//! [`Engine::with_host_within`]: crate::engine::runtime::Engine::with_host_within

use super::device::{self, Device};
use super::memory::SharedMemory;
use crate::cc::{CcMode, CcStats};
use crate::cm::MadCounts;
use crate::dpdk::telemetry::{self as tel, Dict, Value};
use crate::engine::runtime::{shard_of_qpn, RuntimeStats};
use crate::host::{Host, HostStats};
use crate::net::{DropReason, NetStats};
use crate::transport::qp::{Qp, QpStats};
use crate::transport::snapshot::QpSnapshot;
use std::net::IpAddr;
use std::time::Duration;

/// How long a command waits for each shard's counters.
pub const SHARD_WAIT: Duration = Duration::from_millis(500);

/// What answers a command: its parameter in, the answer out (`None`: `null`).
type Handler = fn(Option<&str>) -> Option<Value>;

/// The commands, their help and their handlers.
const COMMANDS: [(&str, &str, Handler); 5] = [
    (
        "/roce/port",
        "dpdk-roce: port and shard counters of each device. Takes no parameters",
        port,
    ),
    (
        "/roce/net",
        "dpdk-roce: ARP, receive drops by reason and transport drops of each device. Takes no parameters",
        net,
    ),
    (
        "/roce/cm",
        "dpdk-roce: connection manager counters of each device. Takes no parameters",
        cm,
    ),
    (
        "/roce/qps",
        "dpdk-roce: a page of the QPNs of each device: total, qpns (256 at most), next. Parameter: the first QPN of the page (default 0)",
        qps,
    ),
    (
        "/roce/qp",
        "dpdk-roce: the counters of one QP. Parameter: its QPN, decimal or 0x hex",
        qp,
    ),
];

/// Registers the commands (once per process; later calls do nothing).
pub(crate) fn register_commands() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (command, help, handler) in COMMANDS {
            if let Err(e) = tel::register(command, help, handler) {
                tracing::warn!("telemetry command {command}: {e}");
            }
        }
    });
}

/// Pushes `prefix` + each named field of `$s` (a struct of u64 counters) into `$d`.
macro_rules! fields {
    ($d:expr, $s:expr, $prefix:literal, [$($f:ident),* $(,)?]) => {
        $( $d.u64(concat!($prefix, stringify!($f)), $s.$f); )*
    };
}

/// Pushes, for each named field, its sum over the structs `$v` yields.
macro_rules! sums {
    ($d:expr, $v:expr, [$($f:ident),* $(,)?]) => {
        $( $d.u64(stringify!($f), $v.iter().map(|s| s.$f).sum()); )*
    };
}

/// One dictionary entry per open device, made by `f`.
fn per_device(mut f: impl FnMut(&Device) -> Value) -> Value {
    let mut all = Dict::new();
    for (name, dev) in device::open_devices() {
        all.push(tel::key(&name), f(&dev));
    }
    Value::Dict(all)
}

/// `f` run on every shard's host (each answer, or why there is none).
fn on_shards<R: Send + 'static>(
    dev: &Device,
    f: fn(&mut Host<SharedMemory>, usize) -> R,
) -> Vec<Result<R, String>> {
    (0..dev.engine.shards())
        .map(|i| {
            dev.engine
                .with_host_within(i, SHARD_WAIT, move |h| f(h, i))
                .map_err(|e| e.to_string())
        })
        .collect()
}

/// The answers of the shards that answered; the others noted in `d` as `shard<i>: <why>`.
fn answered<R>(d: &mut Dict, answers: Vec<Result<R, String>>) -> Vec<R> {
    let mut got = Vec::with_capacity(answers.len());
    for (i, a) in answers.into_iter().enumerate() {
        match a {
            Ok(r) => got.push(r),
            Err(e) => {
                d.str(format!("shard{i}"), e);
            }
        }
    }
    got
}

fn port(_: Option<&str>) -> Option<Value> {
    Some(per_device(|dev| {
        let mut d = Dict::new();
        d.str("ip", dev.ips.primary().to_string());
        if let (Some(_), Some(v6)) = (dev.ips.v4, dev.ips.v6) {
            // A dual-stack port: `ip` is the IPv4 address.
            d.str("ipv6", v6.to_string());
        }
        d.u64("shards", dev.engine.shards() as u64)
            .str("progress", dev.engine.progress_mode().as_str());
        if let Some(pp) = &dev.port {
            if let Ok(l) = pp.port.link(false) {
                d.u64("link_up", u64::from(l.up))
                    .u64("link_speed_mbps", u64::from(l.speed_mbps));
            }
            match pp.port.stats() {
                Ok(s) => {
                    d.u64("rx_packets", s.ipackets)
                        .u64("tx_packets", s.opackets)
                        .u64("rx_bytes", s.ibytes)
                        .u64("tx_bytes", s.obytes)
                        .u64("rx_errors", s.ierrors)
                        .u64("tx_errors", s.oerrors)
                        .u64("rx_missed", s.imissed)
                        .u64("rx_nombuf", s.rx_nombuf);
                }
                Err(e) => {
                    d.str("port_stats", e.to_string());
                }
            }
        }
        for i in 0..dev.engine.shards() {
            match dev.engine.stats_within(i, SHARD_WAIT) {
                Ok(r) => d.dict(format!("shard{i}"), shard(&r)),
                Err(e) => d.str(format!("shard{i}"), e.to_string()),
            };
        }
        Value::Dict(d)
    }))
}

/// One shard's runtime counters.
fn shard(r: &RuntimeStats) -> Dict {
    let mut d = Dict::new();
    fields!(
        d,
        r.shard,
        "",
        [
            polls,
            busy_polls,
            rx_frames,
            tx_frames,
            tx_dropped,
            rx_other_vlan,
            timers_deferred
        ]
    );
    fields!(
        d,
        r.io,
        "",
        [
            forwarded,
            arp_copies,
            from_inbox,
            relayed_out,
            relayed_sent,
            cm_frames,
            looped
        ]
    );
    d.u64("io_dropped", r.io.dropped);
    fields!(
        d,
        r.worker,
        "",
        [
            commands,
            post_errors,
            completions,
            unrouted,
            evd_overflows,
            away_polls,
            away_busy_polls,
            away_rx_frames,
            away_idle_sleeps,
            away_irq_sleeps,
            away_irq_wakes
        ]
    );
    d.u64("pinned", u64::from(r.pinned));
    d
}

/// What `/roce/net` reads of one shard: the neighbour layer's and the host's counters, the
/// neighbour cache's size, congestion control's sums and limited QPs, and its mode.
type NetView = (NetStats, HostStats, usize, (CcStats, u64), CcMode);

fn net(_: Option<&str>) -> Option<Value> {
    Some(per_device(|dev| {
        let mut d = Dict::new();
        let got: Vec<NetView> = answered(
            &mut d,
            on_shards(dev, |h, _| {
                (
                    h.net_stats().clone(),
                    h.stats().clone(),
                    h.net().cache_len(),
                    h.congestion_stats(),
                    h.congestion().mode,
                )
            }),
        );
        let net: Vec<&NetStats> = got.iter().map(|g| &g.0).collect();
        let host: Vec<&HostStats> = got.iter().map(|g| &g.1).collect();
        sums!(d, net, [rx_frames, rx_roce]);
        d.u64("dropped", net.iter().map(|n| n.dropped_total()).sum());
        // Shard 0 runs ARP; every shard keeps the replies it hears.
        d.u64("neighbours", got.first().map_or(0, |g| g.2 as u64));
        let mut arp = Dict::new();
        sums!(
            arp,
            net,
            [
                rx_arp_requests,
                rx_arp_replies,
                tx_arp_requests,
                tx_arp_replies,
                arp_conflicts,
                resolved,
                unresolvable,
                cache_evictions,
                tx_queue_full,
            ]
        );
        d.dict("arp", arp);
        let mut drops = Dict::new();
        for r in DropReason::ALL {
            drops.u64(r.name(), net.iter().map(|n| n.dropped(r)).sum());
        }
        d.dict("drops", drops);
        let mut transport = Dict::new();
        sums!(
            transport,
            host,
            [
                rx_unknown_qp,
                rx_bad_gsi,
                rx_wrong_origin,
                tx_no_peer,
                tx_mads_dropped,
                tx_build_errors,
                tx_payload_errors,
            ]
        );
        d.dict("transport", transport);
        // Congestion control (`cc`): the QPs there are now, summed over the shards.
        let mut cc = CcStats::default();
        for g in &got {
            cc += g.3 .0;
        }
        let mut congestion = Dict::new();
        congestion.str("mode", got.first().map_or(CcMode::Off, |g| g.4).name());
        congestion.u64("limited_qps", got.iter().map(|g| g.3 .1).sum());
        congestion_counters(&mut congestion, &cc);
        d.dict("congestion", congestion);
        Value::Dict(d)
    }))
}

fn cm(_: Option<&str>) -> Option<Value> {
    Some(per_device(|dev| {
        let mut d = Dict::new();
        // The CM runs on shard 0; every shard gates the requests it receives.
        let cm = dev.engine.with_host_within(0, SHARD_WAIT, |h| {
            (h.cm().stats(), h.cm().connection_count())
        });
        let (stats, conns) = match cm {
            Ok(c) => c,
            Err(e) => {
                d.str("shard0", e.to_string());
                return Value::Dict(d);
            }
        };
        fields!(
            d,
            stats,
            "",
            [
                established_active,
                established_passive,
                malformed,
                unmatched,
                duplicates,
                retransmits,
                foreign_pkey,
                requests_refused,
                requests_expired,
            ]
        );
        d.u64("connections", conns as u64);
        let host: Vec<HostStats> = answered(&mut d, on_shards(dev, |h, _| h.stats().clone()));
        d.u64(
            "requests_held",
            host.iter().map(|h| h.rx_requests_held).sum(),
        );
        d.u64(
            "requests_unverified",
            host.iter().map(|h| h.rx_requests_unverified).sum(),
        );
        d.dict("sent", mads(&stats.sent));
        d.dict("received", mads(&stats.received));
        Value::Dict(d)
    }))
}

fn mads(m: &MadCounts) -> Dict {
    let mut d = Dict::new();
    fields!(d, m, "", [req, mra, rej, rep, rtu, dreq, drep]);
    d
}

/// QPNs in one answer of `/roce/qps` at most (DPDK's arrays hold 512; the answer, 16 KiB).
pub const QPS_PAGE: usize = 256;

/// One shard's part of a `/roce/qps` page: how many QPs it owns, and the first
/// [`QPS_PAGE`] + 1 of them `>= from`, ascending (shard 0 also holds the CM's stand-ins of
/// other shards' QPs: they are left to their owners).
fn owned_page(
    h: &mut Host<SharedMemory>,
    shard: usize,
    shards: usize,
    from: u32,
) -> (u64, Vec<u32>) {
    let mut total = 0;
    let mut page = Vec::new();
    for (qp, _) in h.qps() {
        let n = qp.qpn();
        if shard_of_qpn(n, shards) != shard {
            continue;
        }
        total += 1;
        if n >= from {
            page.push(n);
        }
    }
    page.sort_unstable();
    page.truncate(QPS_PAGE + 1);
    (total, page)
}

/// A device's page from its shards' parts: `total`, `qpns` (the first [`QPS_PAGE`]) and
/// `next` (the QPN after them, when there is one).
fn qps_page(d: &mut Dict, parts: Vec<(u64, Vec<u32>)>) {
    let total = parts.iter().map(|p| p.0).sum();
    let mut qpns: Vec<u32> = parts.into_iter().flat_map(|p| p.1).collect();
    qpns.sort_unstable();
    let next = qpns.get(QPS_PAGE).copied();
    qpns.truncate(QPS_PAGE);
    d.u64("total", total).push(
        "qpns",
        Value::U64s(qpns.into_iter().map(u64::from).collect()),
    );
    if let Some(n) = next {
        d.u64("next", u64::from(n));
    }
}

fn qps(params: Option<&str>) -> Option<Value> {
    let from = match params.map(str::trim) {
        None | Some("") => 0,
        Some(p) => parse_qpn(p)?,
    };
    Some(per_device(|dev| {
        let shards = dev.engine.shards();
        let mut d = Dict::new();
        let answers = (0..shards)
            .map(|i| {
                dev.engine
                    .with_host_within(i, SHARD_WAIT, move |h| owned_page(h, i, shards, from))
                    .map_err(|e| e.to_string())
            })
            .collect();
        let parts = answered(&mut d, answers);
        qps_page(&mut d, parts);
        Value::Dict(d)
    }))
}

/// A QPN parameter: decimal or `0x` hex.
fn parse_qpn(p: &str) -> Option<u32> {
    let p = p.trim();
    match p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => p.parse().ok(),
    }
}

/// What `/roce/qp` reports of one QP.
struct QpView {
    state: String,
    dest_qpn: u32,
    peer: Option<IpAddr>,
    pmtu: u64,
    stats: QpStats,
    snapshot: QpSnapshot,
    /// Congestion control: mode, rate (bits/s, `None` unlimited), window, counters.
    cc: (CcMode, Option<u64>, Option<f64>, CcStats),
}

impl QpView {
    fn of(qp: &Qp, peer: Option<IpAddr>) -> QpView {
        QpView {
            state: format!("{:?}", qp.state()).to_uppercase(),
            dest_qpn: qp.attr().dest_qpn,
            peer,
            pmtu: qp.attr().pmtu.bytes() as u64,
            stats: *qp.stats(),
            snapshot: qp.snapshot(),
            cc: {
                let c = qp.congestion();
                (c.mode(), c.rate_bps(), c.cwnd(), c.stats)
            },
        }
    }
}

fn qp(params: Option<&str>) -> Option<Value> {
    let qpn = parse_qpn(params?)?;
    let mut found = false;
    let all = per_device(|dev| {
        let owner = shard_of_qpn(qpn, dev.engine.shards());
        let view = dev.engine.with_host_within(owner, SHARD_WAIT, move |h| {
            let (qp, peer) = h.qps().find(|(q, _)| q.qpn() == qpn)?;
            Some(QpView::of(qp, peer))
        });
        match view {
            Ok(Some(v)) => {
                found = true;
                Value::Dict(qp_dict(qpn, owner, &v))
            }
            Ok(None) => Value::Str("no such QP".into()),
            Err(e) => Value::Str(e.to_string()),
        }
    });
    found.then_some(all)
}

fn qp_dict(qpn: u32, shard: usize, v: &QpView) -> Dict {
    let s = &v.stats;
    let mut d = Dict::new();
    d.u64("qpn", u64::from(qpn))
        .u64("shard", shard as u64)
        .str("state", v.state.clone())
        .u64("dest_qpn", u64::from(v.dest_qpn))
        .str("peer", v.peer.map_or_else(String::new, |p| p.to_string()))
        .u64("pmtu", v.pmtu);
    fields!(
        d,
        s,
        "",
        [
            packets_sent,
            packets_received,
            bytes_sent,
            bytes_received,
            retransmits,
            timeouts,
            tail_probes,
            spurious_retransmits,
            duplicates,
            duplicate_responses,
            acks_sent,
            acks_received,
            dropped,
        ]
    );
    let mut sent = Dict::new();
    sent.u64("psn_sequence", s.seq_naks_sent)
        .u64("rnr", s.rnr_naks_sent)
        .u64("invalid_request", s.invalid_request_naks_sent)
        .u64("remote_access", s.remote_access_naks_sent)
        .u64("remote_operational", s.remote_op_naks_sent);
    let mut received = Dict::new();
    received
        .u64("psn_sequence", s.seq_naks_received)
        .u64("rnr", s.rnr_naks_received)
        .u64("invalid_request", s.invalid_request_naks_received)
        .u64("remote_access", s.remote_access_naks_received)
        .u64("remote_operational", s.remote_op_naks_received);
    d.dict("naks_sent", sent).dict("naks_received", received);
    let q = &v.snapshot;
    let mut seq = Dict::new();
    seq.u64("send_wqes", q.send_wqes as u64)
        .u64("reads_outstanding", u64::from(q.reads_outstanding))
        .u64("una", u64::from(q.una.value()))
        .u64("sent_hw", u64::from(q.sent_hw.value()))
        .u64("next_psn", u64::from(q.next_psn.value()))
        .u64("window", u64::from(q.window))
        .u64("retry_left", u64::from(q.retry_left))
        .u64("rnr_retry_left", u64::from(q.rnr_left))
        .u64("rnr_wait", u64::from(q.rnr_wait))
        .u64("ack_timer_armed", u64::from(q.ack_timer.is_some()))
        .u64("turnaround_us", q.turnaround.as_micros() as u64)
        .u64("lossy", u64::from(q.lossy))
        .u64("expected_psn", u64::from(q.epsn.value()))
        .u64("responses_queued", q.responses_queued as u64)
        .u64("receives_posted", q.receives_posted as u64);
    d.dict("sequence", seq);
    let (mode, rate, cwnd, cs) = v.cc;
    let mut cc = Dict::new();
    cc.str("mode", mode.name())
        // 0: not limited (line rate).
        .u64("rate_kbps", rate.map_or(0, |r| r / 1000))
        // Hundredths of a packet; 0 without a window.
        .u64(
            "window_centipackets",
            cwnd.map_or(0, |w| (w * 100.0) as u64),
        );
    congestion_counters(&mut cc, &cs);
    d.dict("congestion", cc);
    d
}

/// Congestion control's counters (`cc::CcStats`): one QP's, or a port's sum.
fn congestion_counters(d: &mut Dict, cs: &CcStats) {
    fields!(
        d,
        cs,
        "",
        [
            ce_marks,
            cnps_sent,
            cnps_received,
            cnps_ignored,
            rate_cuts,
            paced_waits,
        ]
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dat::{Ep, Ia, IaConfig, Pz};

    #[test]
    fn qpn_parameters_in_decimal_or_hex() {
        assert_eq!(parse_qpn("17"), Some(17));
        assert_eq!(parse_qpn(" 0x1f "), Some(31));
        assert_eq!(parse_qpn("0XAB"), Some(0xab));
        assert_eq!(parse_qpn("qp"), None);
        assert_eq!(parse_qpn(""), None);
    }

    /// Pages of QPNs spread over three shards: every QPN once, in order, `next` on all pages
    /// but the last, `total` on every page.
    #[test]
    fn qpn_pages_cover_every_qp_once_in_order() {
        let all: Vec<u32> = (0..1000u32).map(|k| 0x10_0000 + 7 * k + (k % 3)).collect();
        let part = |shard: u32, from: u32| {
            let mine: Vec<u32> = all.iter().copied().filter(|n| n % 3 == shard).collect();
            let total = mine.len() as u64;
            let page = mine
                .into_iter()
                .filter(|&n| n >= from)
                .take(QPS_PAGE + 1)
                .collect();
            (total, page)
        };
        let mut listed = Vec::new();
        let mut from = 0;
        let mut pages = 0;
        loop {
            let mut d = Dict::new();
            qps_page(&mut d, (0..3).map(|s| part(s, from)).collect());
            pages += 1;
            assert_eq!(d.get("total"), Some(&Value::U64(1000)), "{d:?}");
            let Some(Value::U64s(qpns)) = d.get("qpns") else {
                panic!("{d:?}")
            };
            assert!(qpns.len() <= QPS_PAGE && !qpns.is_empty(), "{d:?}");
            listed.extend(qpns.iter().map(|&n| n as u32));
            match d.get("next") {
                Some(Value::U64(n)) => {
                    assert_eq!(qpns.len(), QPS_PAGE);
                    assert!(*n > *qpns.last().unwrap());
                    from = *n as u32;
                }
                None => break,
                other => panic!("next: {other:?}"),
            }
        }
        assert_eq!(pages, 1000_usize.div_ceil(QPS_PAGE));
        assert_eq!(listed, all, "every QPN once, ascending");
        let mut d = Dict::new();
        qps_page(&mut d, vec![(0, vec![]), (0, vec![])]);
        assert_eq!(d.get("total"), Some(&Value::U64(0)));
        assert_eq!(d.get("qpns"), Some(&Value::U64s(vec![])));
        assert_eq!(d.get("next"), None);
    }

    #[test]
    fn a_qpns_parameter_is_a_first_qpn_or_nothing() {
        // No device open in this test: an empty answer, or null for a bad parameter.
        assert!(qps(None).is_some());
        assert!(qps(Some("")).is_some());
        assert!(qps(Some("0x10")).is_some());
        assert_eq!(qps(Some("ten")), None);
    }

    #[test]
    fn a_qp_reports_its_state_and_every_counter() {
        let (io, _other) = crate::engine::channel_io::ChannelIo::pair(16);
        let ia = Ia::open_with(
            IaConfig {
                mac: crate::wire::ethernet::EthernetAddress([2, 0, 0, 0, 9, 7]),
                address: crate::config::PortAddresses::v4(
                    std::net::Ipv4Addr::new(10, 36, 0, 7),
                    24,
                )
                .expect("a host address on its prefix"),
                routes: Default::default(),
                dscp: 0,
                cm: Default::default(),
                congestion: Default::default(),
                mtu: 1500,
                shards: 1,
                engine: Default::default(),
            },
            vec![Box::new(io)],
        )
        .unwrap();
        let pz = Pz::create(&ia).unwrap();
        let ep = Ep::create(&ia, &pz, None, None, None, None, None).unwrap();
        let qpn = ep.qpn();
        let shards = ia.inner.engine.shards();
        let listed = ia
            .inner
            .engine
            .with_host_within(0, SHARD_WAIT, move |h| owned_page(h, 0, shards, 0))
            .unwrap();
        assert_eq!(listed, (1, vec![qpn]));
        let after = ia
            .inner
            .engine
            .with_host_within(0, SHARD_WAIT, move |h| owned_page(h, 0, shards, qpn + 1))
            .unwrap();
        assert_eq!(after, (1, vec![]));
        let view = ia
            .inner
            .engine
            .with_host_within(0, SHARD_WAIT, move |h| {
                let (qp, peer) = h.qps().find(|(q, _)| q.qpn() == qpn).unwrap();
                QpView::of(qp, peer)
            })
            .unwrap();
        let d = qp_dict(qpn, 0, &view);
        assert_eq!(d.get("qpn"), Some(&Value::U64(u64::from(qpn))));
        assert_eq!(d.get("state"), Some(&Value::Str("INIT".into())));
        for k in [
            "packets_sent",
            "bytes_received",
            "retransmits",
            "timeouts",
            "tail_probes",
            "spurious_retransmits",
            "duplicates",
        ] {
            assert_eq!(d.get(k), Some(&Value::U64(0)), "{k}");
        }
        let Some(Value::Dict(naks)) = d.get("naks_received") else {
            panic!("naks_received: {d:?}");
        };
        assert_eq!(naks.len(), 5);
        let Some(Value::Dict(seq)) = d.get("sequence") else {
            panic!("sequence: {d:?}");
        };
        assert_eq!(seq.get("send_wqes"), Some(&Value::U64(0)));
        assert_eq!(seq.get("ack_timer_armed"), Some(&Value::U64(0)));
        assert_eq!(
            seq.get("lossy"),
            Some(&Value::U64(0)),
            "a new QP's path is calm"
        );
        assert_eq!(seq.len(), 15);
        // Every key is one DPDK accepts as it is.
        for (k, _) in d.entries() {
            assert_eq!(&tel::key(k), k);
        }
    }
}
