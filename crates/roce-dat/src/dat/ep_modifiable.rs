//! Which EP parameters dat_ep_modify(3DAT) may change in which EP states (seed 000; the
//! rules are listed in [`ep_modify`](super::ep_modify)): a table over [`EpParamMask`] bits
//! and [`EpState`]s.

use super::ep_attr::EpParamMask;
use super::ep_state::EpState;

/// Parameters that cannot be modified in any state.
pub(crate) const UNMODIFIABLE: EpParamMask = EpParamMask::IA_HANDLE
    .union(EpParamMask::EP_STATE)
    .union(EpParamMask::COMM)
    .union(EpParamMask::LOCAL_IA_ADDRESS)
    .union(EpParamMask::LOCAL_PORT_QUAL)
    .union(EpParamMask::REMOTE_IA_ADDRESS)
    .union(EpParamMask::REMOTE_PORT_QUAL)
    .union(EpParamMask::SRQ_HANDLE);

/// The quiescent states (PZ).
const QUIESCENT: &[EpState] = &[EpState::Unconnected, EpState::TentativeConnectionPending];
/// Before a connection is requested or accepted.
const BEFORE_CONNECTION: &[EpState] = &[
    EpState::Unconnected,
    EpState::Reserved,
    EpState::PassiveConnectionPending,
    EpState::TentativeConnectionPending,
];
/// Transport/provider-specific attributes.
const UNCONNECTED_ONLY: &[EpState] = &[EpState::Unconnected];

/// The states in which the parameter `field` (one bit) may change; `None`: never.
pub fn modifiable_states(field: EpParamMask) -> Option<&'static [EpState]> {
    if UNMODIFIABLE.intersects(field) {
        return None;
    }
    if field == EpParamMask::PZ_HANDLE {
        return Some(QUIESCENT);
    }
    if field.intersects(
        EpParamMask::NUM_TRANSPORT_ATTR
            | EpParamMask::TRANSPORT_SPECIFIC_ATTR
            | EpParamMask::NUM_PROVIDER_ATTR
            | EpParamMask::PROVIDER_SPECIFIC_ATTR,
    ) {
        return Some(UNCONNECTED_ONLY);
    }
    Some(BEFORE_CONNECTION)
}
