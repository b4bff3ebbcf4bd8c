//! The kinds of DAT objects (dat_get_handle_type(3DAT): DAT_HANDLE_TYPE_*), and the order in
//! which an abrupt dat_ia_close ends the objects of an IA.

/// A kind of DAT object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// An interface adapter ([`Ia`](super::Ia)).
    Ia,
    /// A protection zone ([`Pz`](super::Pz)).
    Pz,
    /// A local memory region ([`Lmr`](super::Lmr)).
    Lmr,
    /// A remote memory region, a window ([`Rmr`](super::Rmr)).
    Rmr,
    /// An event dispatcher ([`Evd`](super::Evd)).
    Evd,
    /// A consumer notification object ([`Cno`](super::Cno)).
    Cno,
    /// An endpoint ([`Ep`](super::Ep)).
    Ep,
    /// A shared receive queue ([`Srq`](super::Srq)).
    Srq,
    /// A public service point ([`Psp`](super::Psp)).
    Psp,
    /// A reserved service point ([`Rsp`](super::Rsp)).
    Rsp,
    /// A connection request ([`Cr`](super::Cr)).
    Cr,
}

impl ObjectKind {
    /// dat_ia_close with DAT_CLOSE_ABRUPT_FLAG ends every object of the IA, in this order:
    /// pending connection requests first (rejected: the peer hears at once), then the
    /// service points (no new requests), the EPs (disconnected; their work flushed to EVDs
    /// that still exist), memory windows before the regions they are bound to, regions and
    /// SRQs before their PZ, EVDs before the CNOs they notify, and the PZs last. The IA itself
    /// goes after all of them.
    pub const ABRUPT_CLOSE_ORDER: [ObjectKind; 10] = [
        ObjectKind::Cr,
        ObjectKind::Psp,
        ObjectKind::Rsp,
        ObjectKind::Ep,
        ObjectKind::Rmr,
        ObjectKind::Lmr,
        ObjectKind::Srq,
        ObjectKind::Evd,
        ObjectKind::Cno,
        ObjectKind::Pz,
    ];
}

#[cfg(test)]
mod tests {
    use super::ObjectKind;

    #[test]
    fn the_abrupt_close_order_names_every_kind_but_the_ia_once() {
        let order = ObjectKind::ABRUPT_CLOSE_ORDER;
        for (i, k) in order.iter().enumerate() {
            assert_ne!(*k, ObjectKind::Ia);
            assert!(!order[i + 1..].contains(k), "{k:?} twice");
        }
        let at = |k| order.iter().position(|&o| o == k).unwrap();
        // What uses another object ends before it.
        assert!(at(ObjectKind::Cr) < at(ObjectKind::Psp));
        assert!(at(ObjectKind::Ep) < at(ObjectKind::Evd));
        assert!(at(ObjectKind::Rmr) < at(ObjectKind::Lmr));
        assert!(at(ObjectKind::Lmr) < at(ObjectKind::Pz));
        assert!(at(ObjectKind::Srq) < at(ObjectKind::Pz));
        assert!(at(ObjectKind::Evd) < at(ObjectKind::Cno));
    }
}
