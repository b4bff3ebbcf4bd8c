//! The privileges of an LMR as the consumer asked for them (DAT_MEM_PRIV_FLAGS,
//! dat_lmr_create(3DAT); the IB extension's remote atomic, dat_ib_extensions.h), kept as asked
//! so dat_lmr_query reports them, and the access rights of the region they grant.

use crate::mem::access::Access;
use bitflags::bitflags;

bitflags! {
    /// DAT_MEM_PRIV_* (the values of dat.h).
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
    pub struct MemPriv: u32 {
        /// DAT_MEM_PRIV_LOCAL_READ_FLAG: local reads (sends and RDMA write sources); granted
        /// whatever was asked, see [`MemPriv::access`].
        const LOCAL_READ = 0x01;
        /// DAT_MEM_PRIV_REMOTE_READ_FLAG: a peer may RDMA-read the region.
        const REMOTE_READ = 0x02;
        /// DAT_MEM_PRIV_LOCAL_WRITE_FLAG: receives and RDMA read sinks may write the region.
        const LOCAL_WRITE = 0x10;
        /// DAT_MEM_PRIV_REMOTE_WRITE_FLAG: a peer may RDMA-write the region (and, as verbs
        /// providers grant, run atomics on it).
        const REMOTE_WRITE = 0x20;
        /// DAT_IB_MEM_PRIV_REMOTE_ATOMIC, the first DAT_MEM_PRIV extension bit.
        const REMOTE_ATOMIC = 0x40;
        /// DAT_MEM_PRIV_ALL_FLAG (the IB extension not included).
        const ALL = 0x33;
    }
}

impl MemPriv {
    /// The region's access rights: local read is always granted, and remote write grants
    /// remote atomics too (what verbs providers do for DAT's REMOTE_WRITE).
    pub fn access(self) -> Access {
        let mut a = Access::LOCAL_READ;
        if self.contains(MemPriv::LOCAL_WRITE) {
            a |= Access::LOCAL_WRITE;
        }
        if self.contains(MemPriv::REMOTE_READ) {
            a |= Access::REMOTE_READ;
        }
        if self.contains(MemPriv::REMOTE_WRITE) {
            a |= Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
        }
        if self.contains(MemPriv::REMOTE_ATOMIC) {
            a |= Access::REMOTE_ATOMIC;
        }
        a
    }

    /// The privileges a Rust caller's access rights stand for.
    pub fn of_access(a: Access) -> MemPriv {
        let mut p = MemPriv::LOCAL_READ;
        for (access, privilege) in [
            (Access::LOCAL_WRITE, MemPriv::LOCAL_WRITE),
            (Access::REMOTE_READ, MemPriv::REMOTE_READ),
            (Access::REMOTE_WRITE, MemPriv::REMOTE_WRITE),
            (Access::REMOTE_ATOMIC, MemPriv::REMOTE_ATOMIC),
        ] {
            if a.contains(access) {
                p |= privilege;
            }
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges_grant_their_rights_and_a_rust_callers_rights_round_trip() {
        assert_eq!(MemPriv::empty().access(), Access::LOCAL_READ);
        assert!(MemPriv::REMOTE_WRITE
            .access()
            .contains(Access::REMOTE_ATOMIC));
        for bits in 0..=0x7fu32 {
            let Some(p) = MemPriv::from_bits(bits) else {
                continue;
            };
            assert_eq!(MemPriv::of_access(p.access()).access(), p.access(), "{p:?}");
        }
    }
}
