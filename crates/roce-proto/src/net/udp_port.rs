//! UDP source port of RoCEv2 packets. Annex A17.3.1 leaves the source port to the sender as
//! flow entropy for ECMP: packets of one QP connection keep one port (so the network keeps their
//! order) and different connections should spread over the paths.

/// The UDP source port for packets from QP `src_qpn` to QP `dst_qpn`.
///
/// Contract (shared with `sim::endpoint::udp_source_port`): always in `0xC000..=0xFFFF` (low
/// ports make Wireshark choose other dissectors), a pure function of the pair, and different
/// for different local QPs. For a fixed peer QP it is a bijection of the low 14 bits of
/// `src_qpn` within each block of 16384 QPNs, so consecutive local QPs never share a port; the
/// peer QP and the high bits of `src_qpn` (the shard, when QPNs encode one) move the mapping.
pub fn udp_source_port(src_qpn: u32, dst_qpn: u32) -> u16 {
    let src = src_qpn & 0x00ff_ffff;
    let dst = dst_qpn & 0x00ff_ffff;
    // An offset from the peer QP (Fibonacci hashing) and the high local bits.
    let offset = (dst.wrapping_mul(0x9e37_79b1) >> 18) ^ (src >> 14).wrapping_mul(0x2f1b);
    // Adding a constant and multiplying by an odd number are bijections modulo 2^14.
    let mixed = src.wrapping_add(offset).wrapping_mul(0x5bd1);
    0xc000 | (mixed & 0x3fff) as u16
}
