//! Receive, ARP and Neighbor Discovery counters (the latter in detail: `NdpStats`). Every frame [`Net::handle_frame`](super::Net::handle_frame) does not
//! deliver or consume is counted under exactly one [`DropReason`].

use crate::wire::frame::FrameError;

/// Why a received frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// Shorter than an Ethernet header.
    Runt,
    /// EtherType neither IPv4 nor ARP, nor IPv6 on a port with an IPv6 address (VLAN-tagged,
    /// LLDP, ...).
    EtherType,
    /// Unicast to another MAC, IPv4 or RoCEv2/IPv6 to a broadcast/multicast MAC, Neighbor
    /// Discovery to a group that is not ours.
    NotOurMac,
    /// ARP packet too short, not Ethernet/IPv4, an unknown operation or a sender hardware
    /// address that is not unicast.
    MalformedArp,
    /// IPv4 header too short, version not 4, IHL < 5, total length beyond the frame; IPv6
    /// header too short, version not 6, payload length beyond the frame (RFC 8200 §3).
    MalformedIp,
    /// IPv4 header checksum wrong (RFC 791).
    BadIpChecksum,
    /// A valid IP header for another address (a Neighbor Solicitation for another target).
    NotOurIp,
    /// An IPv4 fragment (RoCEv2 is never fragmented).
    IpFragment,
    /// ICMP (echo included): out of scope, never answered.
    Icmp,
    /// Another IP protocol than UDP and ICMP (ICMPv6 over IPv6).
    NotUdp,
    /// UDP header truncated, UDP length not matching the IP payload, or a wrong non-zero UDP
    /// checksum.
    MalformedUdp,
    /// UDP to a port other than 4791.
    NotRocePort,
    /// RoCEv2 with a wrong ICRC (annex A17.3.3).
    BadIcrc,
    /// RoCEv2 whose lengths do not add up: truncated BTH or extension headers, PadCnt beyond the
    /// data, a payload on an opcode without one.
    RoceLength,
    /// RoCEv2 with a bad BTH: transport version not 0, unknown opcode, inconsistent headers.
    RoceHeader,
    /// An IPv6 extension header after the fixed header (RFC 8200 §4): RoCEv2 carries none, and
    /// Neighbor Discovery is never behind one here.
    Ipv6ExtensionHeader,
    /// ICMPv6 other than Neighbor Solicitation and Advertisement (echo included): out of
    /// scope, never answered.
    Icmpv6,
    /// A Neighbor Solicitation or Advertisement that fails RFC 4861 §7.1's checks (hop limit
    /// not 255, ICMPv6 checksum, code, options, ...).
    MalformedNd,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [DropReason; 18] = [
        DropReason::Runt,
        DropReason::EtherType,
        DropReason::NotOurMac,
        DropReason::MalformedArp,
        DropReason::MalformedIp,
        DropReason::BadIpChecksum,
        DropReason::NotOurIp,
        DropReason::IpFragment,
        DropReason::Icmp,
        DropReason::NotUdp,
        DropReason::MalformedUdp,
        DropReason::NotRocePort,
        DropReason::BadIcrc,
        DropReason::RoceLength,
        DropReason::RoceHeader,
        DropReason::Ipv6ExtensionHeader,
        DropReason::Icmpv6,
        DropReason::MalformedNd,
    ];

    /// A short stable name, for logs and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Runt => "runt",
            DropReason::EtherType => "ethertype",
            DropReason::NotOurMac => "not_our_mac",
            DropReason::MalformedArp => "malformed_arp",
            DropReason::MalformedIp => "malformed_ip",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::NotOurIp => "not_our_ip",
            DropReason::IpFragment => "ip_fragment",
            DropReason::Icmp => "icmp",
            DropReason::NotUdp => "not_udp",
            DropReason::MalformedUdp => "malformed_udp",
            DropReason::NotRocePort => "not_roce_port",
            DropReason::BadIcrc => "bad_icrc",
            DropReason::RoceLength => "roce_length",
            DropReason::RoceHeader => "roce_header",
            DropReason::Ipv6ExtensionHeader => "ipv6_extension_header",
            DropReason::Icmpv6 => "icmpv6",
            DropReason::MalformedNd => "malformed_nd",
        }
    }

    const fn index(self) -> usize {
        self as usize
    }

    /// The reason for a RoCEv2 parse error found after the IP header, address and protocol
    /// were checked (so only UDP and InfiniBand-level errors are expected here).
    pub(crate) fn of_roce_error(e: &FrameError) -> DropReason {
        match e {
            FrameError::BadIcrc { .. } => DropReason::BadIcrc,
            FrameError::BadUdpLength(_) | FrameError::BadUdpChecksum => DropReason::MalformedUdp,
            FrameError::NotRoce(_) => DropReason::NotRocePort,
            FrameError::Truncated { .. }
            | FrameError::BadPadCnt { .. }
            | FrameError::UnexpectedPayload { .. } => DropReason::RoceLength,
            FrameError::BadIpChecksum => DropReason::BadIpChecksum,
            FrameError::NotIpv4(_) | FrameError::NotIpv6(_) => DropReason::EtherType,
            FrameError::BadIpVersion(_)
            | FrameError::BadIpHeaderLen(_)
            | FrameError::BadIpTotalLen(_)
            | FrameError::BadIpv6PayloadLen(_) => DropReason::MalformedIp,
            FrameError::IpFragment => DropReason::IpFragment,
            FrameError::NotUdp(_) => DropReason::NotUdp,
            FrameError::Ipv6ExtensionHeader(_) => DropReason::Ipv6ExtensionHeader,
            FrameError::BadTver(_)
            | FrameError::UnknownOpcode(_)
            | FrameError::Header(_)
            | FrameError::BufferTooSmall { .. }
            | FrameError::TooLong(_) => DropReason::RoceHeader,
        }
    }
}

impl core::fmt::Display for DropReason {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// Counters of a [`Net`](super::Net).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetStats {
    /// Frames passed to `handle_frame`.
    pub rx_frames: u64,
    /// Valid RoCEv2 frames for us, handed to the transport.
    pub rx_roce: u64,
    /// ARP requests received (for any address).
    pub rx_arp_requests: u64,
    /// ARP replies received (for any address).
    pub rx_arp_replies: u64,
    /// ARP packets whose sender claims our own IP address from another MAC.
    pub arp_conflicts: u64,
    /// ARP requests sent (first tries, retries and refreshes).
    pub tx_arp_requests: u64,
    /// ARP replies sent.
    pub tx_arp_replies: u64,
    /// ARP frames not queued because the transmit queue was full.
    pub tx_queue_full: u64,
    /// Resolutions that succeeded (pending entry answered).
    pub resolved: u64,
    /// Resolutions or refreshes that failed after all retries.
    pub unresolvable: u64,
    /// ICMP Destination Unreachable messages about our RoCEv2 datagrams (`icmp.rs`).
    pub rx_icmp_unreachable: u64,
    /// Settled entries evicted to make room.
    pub cache_evictions: u64,
    drops: [u64; DropReason::ALL.len()],
}

impl NetStats {
    /// Frames dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()]
    }

    /// Frames dropped for any reason.
    pub fn dropped_total(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Non-zero drop counters, in [`DropReason::ALL`] order.
    pub fn drops(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .into_iter()
            .map(|r| (r, self.dropped(r)))
            .filter(|&(_, n)| n != 0)
    }

    pub(crate) fn count_drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }
}
