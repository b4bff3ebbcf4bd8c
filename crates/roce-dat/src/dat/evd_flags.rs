//! The event streams an EVD accepts (DAT_EVD_FLAGS of dat_evd_create(3DAT)): what an
//! [`Evd`](super::Evd) is created with and what the objects that feed it check.

use bitflags::bitflags;

bitflags! {
    /// Event streams an EVD accepts (DAT_EVD_*_FLAG, with the DAT values).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct EvdFlags: u32 {
        /// DAT_EVD_SOFTWARE_FLAG: software events posted with
        /// [`Evd::post_se`](super::Evd::post_se).
        const SOFTWARE = 0x001;
        /// DAT_EVD_CR_FLAG: connection requests of the PSPs and RSPs that name this EVD
        /// ([`DatEvent::ConnectionRequest`](super::DatEvent::ConnectionRequest)).
        const CR = 0x010;
        /// DAT_EVD_DTO_FLAG: DTO completions of the EPs that use it as receive or request
        /// EVD ([`DatEvent::Dto`](super::DatEvent::Dto)).
        const DTO = 0x020;
        /// DAT_EVD_CONNECTION_FLAG: connection events of the EPs that use it as connection
        /// EVD ([`DatEvent::Connection`](super::DatEvent::Connection)); dat_ep_create(3DAT)
        /// requires it there.
        const CONNECTION = 0x040;
        /// DAT_EVD_RMR_BIND_FLAG: RMR bind completions (they arrive on the EP's request EVD
        /// as [`DatEvent::Dto`](super::DatEvent::Dto) with opcode `BindMw`).
        const RMR_BIND = 0x080;
        /// DAT_EVD_ASYNC_FLAG: asynchronous errors ([`DatEvent::Async`](super::DatEvent::Async));
        /// the IA's own [`Ia::async_evd`](super::Ia::async_evd) has it.
        const ASYNC = 0x100;
    }
}
