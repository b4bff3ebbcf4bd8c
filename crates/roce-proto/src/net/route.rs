//! A sender's cached path to one peer QP: what `Net::write_headers_any_len` works out for every
//! packet (the neighbour's MAC, its header template, the traffic class, the UDP source port of
//! IBTA vol. 1 annex A17.3.2), kept by the sending QP and reused while the neighbour cache and
//! the encapsulation settings it came from are unchanged and the neighbour entry needs no
//! refresh. Each IPv4 packet still takes its own identification. Over IPv4 or IPv6: the route
//! says how long its headers are ([`Route::headers_len`]).

use super::encap::{HeaderTemplate, TrafficClass};
use crate::time::Instant;
use std::net::IpAddr;

/// See the module documentation. Built by `Net::route`, checked by `Net::route_valid`, used by
/// `Net::write_route_headers`.
#[derive(Clone, Debug)]
pub struct Route {
    pub(super) dst_ip: IpAddr,
    pub(super) dst_qpn: u32,
    pub(super) template: HeaderTemplate,
    pub(super) tc: TrafficClass,
    pub(super) src_port: u16,
    /// `Net::generation` when built.
    pub(super) generation: u64,
    /// The neighbour entry's refresh time, if it has one.
    pub(super) ready_until: Option<Instant>,
}

impl Route {
    /// The same path with packets of traffic class `tc` (a CNP's DSCP, not ECN-capable).
    pub fn with_traffic_class(&self, tc: TrafficClass) -> Route {
        Route { tc, ..self.clone() }
    }

    /// True if this route leads to QP `dst_qpn` at `dst_ip`.
    pub fn leads_to(&self, dst_ip: IpAddr, dst_qpn: u32) -> bool {
        self.dst_ip == dst_ip && self.dst_qpn == dst_qpn
    }

    /// The length of the Ethernet/IP/UDP headers `Net::write_route_headers` writes: 42 over
    /// IPv4, 62 over IPv6 (where the BTH starts).
    #[inline(always)]
    pub fn headers_len(&self) -> usize {
        self.template.headers_len()
    }
}
