//! What the host tests share: a port over the checked region table that knows its one peer.

use std::net::Ipv4Addr;
use std::sync::Arc;

use dpdk_roce::host::{Host, HostConfig, QpnPolicy};
use dpdk_roce::mem::MrTable;
use dpdk_roce::net::NetConfig;
use dpdk_roce::wire::ethernet::EthernetAddress;

pub type MrHost = Host<Arc<MrTable>>;

/// A host at `mac` / `ip` (a /24) over a 64-region table, with `peer`'s MAC known; its QP
/// numbers and memory keys are the same in every run (tests compare runs frame by frame).
pub fn host(mac: EthernetAddress, ip: Ipv4Addr, peer: (Ipv4Addr, EthernetAddress)) -> MrHost {
    let mut h = Host::new(
        HostConfig {
            net: NetConfig::new(mac, ip, 24),
            ca_guid: u64::from(ip.octets()[3]),
            seed: u64::from(ip.octets()[3]),
            qpns: QpnPolicy::Sequential,
            cm: Default::default(),
        },
        Arc::new(MrTable::with_key_secret(64, u64::from(ip.octets()[3]))),
    )
    .unwrap();
    h.add_neighbour(peer.0, peer.1).unwrap();
    h
}
