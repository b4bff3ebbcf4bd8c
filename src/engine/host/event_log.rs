//! What a host logs of its connection and neighbour events (`crate::log`): connections made
//! and ended at `info`, refusals and failures at `info`, an address conflict at `warn`.
//! Connection requests are `debug` (a flood of them must not flood the log).

use crate::cm::CmEvent;
use crate::net::NetEvent;

pub(super) fn cm_event(ev: &CmEvent) {
    match ev {
        CmEvent::ConnectRequest {
            id,
            port,
            src_ip,
            remote_qpn,
            ..
        } => {
            tracing::debug!(target: "dpdk_roce::cm", ?id, port, %src_ip, remote_qpn, "connection request");
        }
        CmEvent::Established { id, .. } => {
            tracing::info!(target: "dpdk_roce::cm", ?id, "connection established")
        }
        CmEvent::Rejected { id, reason, .. } => {
            tracing::info!(target: "dpdk_roce::cm", ?id, ?reason, "connection rejected by the peer")
        }
        CmEvent::Unreachable { id } => {
            tracing::info!(target: "dpdk_roce::cm", ?id, "peer unreachable")
        }
        CmEvent::TimedOut { id } => {
            tracing::info!(target: "dpdk_roce::cm", ?id, "connection timed out")
        }
        CmEvent::Disconnected { id } => {
            tracing::info!(target: "dpdk_roce::cm", ?id, "disconnected")
        }
        CmEvent::ConnectError { id, error } => {
            tracing::info!(target: "dpdk_roce::cm", ?id, ?error, "connection failed")
        }
    }
}

pub(super) fn net_event(ev: &NetEvent) {
    match ev {
        NetEvent::Resolved { ip, mac } => {
            tracing::debug!(target: "dpdk_roce::net", %ip, %mac, "ARP resolved")
        }
        NetEvent::Unresolvable { ip } => {
            tracing::info!(target: "dpdk_roce::net", %ip, "ARP: no answer, address unreachable")
        }
        NetEvent::IcmpUnreachable { ip } => {
            tracing::info!(target: "dpdk_roce::net", %ip, "ICMP: destination unreachable")
        }
        NetEvent::AddressConflict { ip, mac } => {
            tracing::warn!(target: "dpdk_roce::net", %ip, %mac, "another station claims our address")
        }
    }
}
