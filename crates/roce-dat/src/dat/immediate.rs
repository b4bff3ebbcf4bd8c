//! Immediate data as the reference uDAPL carries it.
//!
//! The DAT IB extension's immediate (`dat_ib_post_rdma_write_immed`'s `DAT_UINT32`, the
//! `DAT_IB_IMMED_DATA` of the completion) is a host-order value, and the verbs field under it
//! (`imm_data`) is `__be32`. The OFA provider (libdapl2's `libdaplofa`, the one existing
//! uDAPL peers run) copies the one into the other without a byte swap, both ways: on a
//! little-endian host the immediate `0x7777` goes on the wire as `77 77 00 00`. A DAT
//! consumer on this provider and one on the OFA provider see the same values only if this
//! provider does the same, so the DAT layer maps the value here; the wire codec (IBTA's ImmDt,
//! big-endian) and the Rust host API (the transport's `imm`, the value the wire's bytes read
//! big-endian, as verbs' `be32toh(wc.imm_data)`) stay as they are.

/// The transport's immediate for the DAT value `dat`: the wire carries `dat`'s host-order
/// bytes.
pub fn to_transport(dat: u32) -> u32 {
    u32::from_be_bytes(dat.to_ne_bytes())
}

/// The DAT value of the transport's immediate `imm`: the wire's bytes read in host order.
pub fn from_transport(imm: u32) -> u32 {
    u32::from_ne_bytes(imm.to_be_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_carries_the_dat_value_in_host_byte_order() {
        // dtestx posts 0x7777; libdaplofa on x86 puts 77 77 00 00 on the wire.
        let imm = to_transport(0x7777);
        assert_eq!(imm.to_be_bytes(), 0x7777u32.to_ne_bytes());
        if cfg!(target_endian = "little") {
            assert_eq!(imm.to_be_bytes(), [0x77, 0x77, 0x00, 0x00]);
        }
        assert_eq!(from_transport(imm), 0x7777);
    }

    #[test]
    fn the_mapping_round_trips_every_byte_pattern() {
        for v in [0, 1, 0x7777, 0x1234_5678, 0xdead_beef, u32::MAX] {
            assert_eq!(from_transport(to_transport(v)), v, "{v:#x}");
            assert_eq!(to_transport(from_transport(v)), v, "{v:#x}");
        }
    }
}
