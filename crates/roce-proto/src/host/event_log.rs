//! What a host logs of its connection, neighbour and QP events (`crate::log`): connections made
//! and ended at `info`, refusals and failures at `info`, an address conflict at `warn`, a QP
//! entering the error state at `info`. Connection requests are `debug`. A peer's frames cause
//! every one of these, so each kind goes through the host's [`LogLimit`] (`log_limit`): a
//! flood logs a burst, then a few a second, and the next message logged says how many were
//! held back (`suppressed = N`). A message whose level is off costs no token.

use super::log_limit::{LogKind, LogLimit};
use crate::cm::CmEvent;
use crate::net::NetEvent;
use crate::time::Instant;
use crate::transport::types::QpState;

/// Logs at `$level` on `$target` if that level is on and the limiter lets a message of
/// `$kind` pass; one after held-back ones carries `suppressed`.
macro_rules! limited {
    ($limit:expr, $now:expr, $kind:expr, $level:ident, $target:literal, $($rest:tt)+) => {
        if tracing::enabled!(target: $target, tracing::Level::$level) {
            match $limit.admit($kind, $now) {
                None => {}
                Some(0) => tracing::event!(target: $target, tracing::Level::$level, $($rest)+),
                Some(suppressed) => tracing::event!(
                    target: $target,
                    tracing::Level::$level,
                    suppressed,
                    $($rest)+
                ),
            }
        }
    };
}

pub(super) fn cm_event(limit: &mut LogLimit, now: Instant, ev: &CmEvent) {
    use LogKind::*;
    match ev {
        CmEvent::ConnectRequest {
            id,
            port,
            src_ip,
            remote_qpn,
            ..
        } => {
            limited!(limit, now, ConnectRequest, DEBUG, "dpdk_roce::cm", ?id, port, %src_ip, remote_qpn, "connection request");
        }
        CmEvent::Established { id, .. } => {
            limited!(
                limit,
                now,
                Established,
                INFO,
                "dpdk_roce::cm",
                ?id,
                "connection established"
            )
        }
        CmEvent::Rejected { id, reason, .. } => {
            limited!(
                limit,
                now,
                Rejected,
                INFO,
                "dpdk_roce::cm",
                ?id,
                ?reason,
                "connection rejected by the peer"
            )
        }
        CmEvent::Unreachable { id } => {
            limited!(
                limit,
                now,
                Unreachable,
                INFO,
                "dpdk_roce::cm",
                ?id,
                "peer unreachable"
            )
        }
        CmEvent::TimedOut { id } => {
            limited!(
                limit,
                now,
                TimedOut,
                INFO,
                "dpdk_roce::cm",
                ?id,
                "connection timed out"
            )
        }
        CmEvent::Disconnected { id } => {
            limited!(
                limit,
                now,
                Disconnected,
                INFO,
                "dpdk_roce::cm",
                ?id,
                "disconnected"
            )
        }
        CmEvent::ConnectError { id, error } => {
            limited!(
                limit,
                now,
                ConnectError,
                INFO,
                "dpdk_roce::cm",
                ?id,
                ?error,
                "connection failed"
            )
        }
    }
}

pub(super) fn net_event(limit: &mut LogLimit, now: Instant, ev: &NetEvent) {
    use LogKind::*;
    match ev {
        NetEvent::Resolved { ip, mac } => {
            limited!(limit, now, ArpResolved, DEBUG, "dpdk_roce::net", %ip, %mac, "ARP resolved")
        }
        NetEvent::Unresolvable { ip } => {
            limited!(limit, now, ArpUnresolvable, INFO, "dpdk_roce::net", %ip, "ARP: no answer, address unreachable")
        }
        NetEvent::IcmpUnreachable { ip } => {
            limited!(limit, now, IcmpUnreachable, INFO, "dpdk_roce::net", %ip, "ICMP: destination unreachable")
        }
        NetEvent::AddressConflict { ip, mac } => {
            limited!(limit, now, AddressConflict, WARN, "dpdk_roce::net", %ip, %mac, "another station claims our address")
        }
    }
}

/// QP `qpn` left state `from` for ERROR (a peer's NAK, a retry count exhausted, ...).
pub(super) fn qp_error(limit: &mut LogLimit, now: Instant, qpn: u32, from: QpState) {
    limited!(
        limit,
        now,
        LogKind::QpError,
        INFO,
        "dpdk_roce::transport",
        qpn,
        ?from,
        "QP to the error state"
    );
}

#[cfg(test)]
mod tests {
    use super::super::log_limit::{BURST, PER_SECOND};
    use super::super::{Host, HostConfig, QpOptions, QpnPolicy};
    use crate::log_capture::captured;
    use crate::mem::vec_memory::VecMemory;
    use crate::net::NetConfig;
    use crate::time::Instant;
    use crate::transport::types::{QpAttr, QpState};
    use crate::wire::ethernet::EthernetAddress;
    use std::net::Ipv4Addr;

    const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 1]);
    const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 9, 0, 1);

    fn host() -> Host<VecMemory> {
        let config = HostConfig {
            net: NetConfig::new(OUR_MAC, OUR_IP, 24),
            ca_guid: 1,
            seed: 7,
            qpns: QpnPolicy::Random,
            cm: Default::default(),
        };
        Host::new(config, VecMemory::new()).unwrap()
    }

    /// A broadcast ARP request from `sha` claiming our address.
    fn conflicting_arp(sha: EthernetAddress) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&sha.0);
        f.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01]);
        f.extend_from_slice(&sha.0);
        f.extend_from_slice(&OUR_IP.octets());
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&Ipv4Addr::new(10, 9, 0, 2).octets());
        f.resize(60, 0);
        f
    }

    const CONFLICT: &str = "another station claims our address";

    #[test]
    fn a_flood_of_conflicting_arp_logs_a_burst_then_the_rate_and_counts_the_rest() {
        captured(|capture| {
            let mut h = host();
            let t0 = Instant::from_nanos(1_700_000_000_000_000_000);
            let at = |us: u64| t0 + std::time::Duration::from_micros(us);
            let frame = conflicting_arp(EthernetAddress([0x02, 0, 0, 0, 0, 0x66]));
            // 1000 frames within one second.
            for i in 0..1000 {
                h.handle_frame(at(i * 999), &frame);
            }
            assert_eq!(h.net_stats().arp_conflicts, 1000);
            let logged = capture.take(CONFLICT);
            assert!(
                logged.len() as u64 <= BURST + PER_SECOND && logged.len() as u64 >= BURST,
                "{} logged: {logged:?}",
                logged.len()
            );
            // The next one, a second later, says how many were held back since the last.
            h.handle_frame(at(2_000_000), &frame);
            let next = capture.take(CONFLICT);
            assert_eq!(next.len(), 1, "{next:?}");
            assert!(next[0].suppressed > 0, "{next:?}");
            // Each frame is logged or counted in a later message.
            let counted: u64 = logged.iter().chain(&next).map(|s| s.suppressed).sum();
            assert_eq!(logged.len() as u64 + counted, 1000, "{logged:?} {next:?}");
        });
    }

    #[test]
    fn qps_entering_error_are_logged_through_the_limit() {
        captured(|capture| {
            let mut h = host();
            let t0 = Instant::from_nanos(5_000_000_000);
            h.handle_timeout(t0);
            let n = 3 * BURST as usize;
            let qpns: Vec<u32> = (0..=n)
                .map(|_| h.create_qp(t0, QpOptions::default()).unwrap())
                .collect();
            for &q in &qpns[..n] {
                h.modify_qp(t0, q, QpState::Error, &QpAttr::default())
                    .unwrap();
            }
            while h.poll_completion().is_some() {}
            let logged = capture.take("QP to the error state");
            assert_eq!(logged.len() as u64, BURST, "{logged:?}");
            h.handle_timeout(t0 + std::time::Duration::from_secs(1));
            h.modify_qp(t0, qpns[n], QpState::Error, &QpAttr::default())
                .unwrap();
            while h.poll_completion().is_some() {}
            let next = capture.take("QP to the error state");
            assert_eq!(next.len(), 1, "{next:?}");
            assert_eq!(next[0].suppressed, n as u64 - BURST);
        });
    }
}
