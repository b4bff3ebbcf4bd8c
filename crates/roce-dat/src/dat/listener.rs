//! The device's record of a listening PSP (dat_psp_create(3DAT)), by CM port: where its
//! connection requests go (its EVD) and, for a provider PSP, the PZ of the EPs made for them.

use super::conn_qual::ConnQual;
use super::evd::EvdInner;
use super::pz::PzInner;
use std::sync::{Arc, Weak};

/// What the IA knows of a listening PSP, by CM port.
pub(crate) struct Listener {
    pub qual: ConnQual,
    pub evd: Weak<EvdInner>,
    /// [`PspFlag::Provider`](super::PspFlag::Provider): the PZ of the EPs made for its requests.
    pub provider_pz: Option<Arc<PzInner>>,
}
