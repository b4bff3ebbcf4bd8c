//! How the CM drives the consumer's queue pairs without owning them (IBTA vol. 1 §12.9.7 and
//! §11.2.5: the CM supplies the attributes of the RESET→INIT→RTR→RTS transitions and moves a QP
//! to ERROR on disconnect).

use crate::time::Instant;
use crate::transport::types::{QpAttr, QpError, QpState};

/// Implemented by whoever owns the QPs (the transport's `Qp` through the engine, a recorder in
/// tests). Each call asks for one transition of QP `qpn` to `state` with the negotiated `attr`
/// (the whole set is passed every time; the QP reads what the transition needs).
pub trait QpControl {
    fn modify_qp(
        &mut self,
        now: Instant,
        qpn: u32,
        state: QpState,
        attr: &QpAttr,
    ) -> Result<(), QpError>;
}
