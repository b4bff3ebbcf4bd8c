//! Connection qualifiers (DAT_CONN_QUAL): what a PSP or RSP listens on and a connect names.

/// A DAT connection qualifier. DAT_CONN_QUAL has 64 bits; the IP CM's service ID carries a
/// TCP-space port of 16 bits (IBTA vol. 1 annex A11, the rdma_cm port space), so a wider
/// qualifier travels as its low 16 bits, as the OFA uDAPL rdma_cm provider does
/// (`SID_TO_PORT`; dapltest's limit test listens on 0xAffab1e + n). Both ends map it the
/// same way; a service point keeps and reports the qualifier it was given, and two
/// qualifiers with the same port cannot listen at once (DAT_CONN_QUAL_IN_USE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConnQual(u64);

impl ConnQual {
    /// The qualifier `value`.
    pub const fn new(value: u64) -> ConnQual {
        ConnQual(value)
    }

    /// The qualifier as DAT_CONN_QUAL.
    pub const fn value(self) -> u64 {
        self.0
    }

    /// The port the CM carries: the low 16 bits.
    pub const fn port(self) -> u16 {
        self.0 as u16
    }
}

impl From<u16> for ConnQual {
    fn from(port: u16) -> ConnQual {
        ConnQual(u64::from(port))
    }
}

impl From<u64> for ConnQual {
    fn from(value: u64) -> ConnQual {
        ConnQual(value)
    }
}

/// A qualifier equals a port when it is exactly that port (not merely its low 16 bits).
impl PartialEq<u16> for ConnQual {
    fn eq(&self, port: &u16) -> bool {
        self.0 == u64::from(*port)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wide_qualifier_travels_as_its_low_16_bits() {
        let q = ConnQual::new(0xaffab1e + 3);
        assert_eq!(q.port(), 0xab21);
        assert_eq!(q.value(), 0xaffab21);
        assert_ne!(q, 0xab21u16, "not the same qualifier");
        assert_eq!(ConnQual::from(4791u16), 4791u16);
        assert_eq!(ConnQual::from(4791u16), ConnQual::new(4791));
    }
}
