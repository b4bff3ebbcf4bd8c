//! The DAT-shaped Rust API (uDAPL 2.0 object model): [`Ia`] (interface adapter, one port and
//! its engine), [`Pz`], [`Lmr`], [`Evd`], [`Cno`], [`Ep`], [`Srq`], [`Psp`] and [`Cr`]. The seed man
//! pages fix the EP rules (creation in UNCONNECTED, `get_status` idleness); errors are
//! [`DatError`]s named after the DAT return codes, so the C ABI only maps them.
//!
//! Objects keep what they use alive (an EP its PZ, EVDs, SRQ and IA); explicit `free`s are
//! refused with DAT_INVALID_STATE while an object is still used (an EVD of a live EP, a PZ
//! with LMRs, an IA with open objects), and dropping frees in any order without leaks.

#![warn(missing_docs)]

pub mod async_event;
pub mod cno;
pub mod conn_qual;
pub mod context;
pub mod counters;
pub mod cr;
pub(crate) mod device;
pub mod ep;
pub mod ep_attr;
pub(crate) mod ep_modifiable;
pub mod ep_modify;
pub mod ep_recv;
pub mod ep_rmr;
pub(crate) mod ep_state;
pub mod error;
pub mod evd;
pub(crate) mod evd_flags;
pub(crate) mod evd_streams;
// The DAT parameter structs are large C structs filled field by field from a zeroed default.
#[allow(clippy::field_reassign_with_default)]
#[allow(unsafe_code)]
pub mod ffi;
pub mod ia;
pub mod ia_attr;
pub mod immediate;
pub(crate) mod limits;
pub(crate) mod listener;
pub mod lmr;
pub mod mem_priv;
pub mod memory;
pub mod object_kind;
pub mod port_io;
pub mod provider_attr;
pub mod psp;
pub mod pz;
pub mod qos;
pub(crate) mod query_counters;
pub mod rmr;
pub mod rsp;
pub mod srq;
pub(crate) mod telemetry;
pub(crate) mod triplet;
pub(crate) mod window_sink;

pub use async_event::{AsyncError, AsyncObject, AsyncReason, DatAsync};
pub use cno::{Cno, CnoParam};
pub use conn_qual::ConnQual;
pub use context::ConsumerContext;
pub use counters::{EpCounters, IaCounters};
pub use cr::{Cr, CrParam, RejectError};
pub use ep::Ep;
pub use ep_attr::{CompletionFlags, EpAttr, EpParamMask, VALUE_UNKNOWN, WATERMARK_INFINITE};
pub use ep_modify::EpParam;
pub use ep_recv::RecvQuery;
pub use ep_state::EpState;
pub use error::{AccessKind, DatError, HandleKind, Refused, StateKind};
pub use evd::{ConnectionEventKind, DatEvent, DtoEvent, Evd, EvdParam};
pub use evd_flags::EvdFlags;
pub use ia::{Ia, IaConfig};
pub use ia_attr::IaAttr;
pub use lmr::{Lmr, LmrParam};
pub use mem_priv::MemPriv;
pub use memory::SharedMemory;
pub use object_kind::ObjectKind;
pub use port_io::PortIo;
pub use provider_attr::{Multipath, ProviderAttr};
pub use psp::{Psp, PspFlag};
pub use pz::Pz;
pub use qos::Qos;
pub use rmr::{Rmr, RmrParam};
pub use rsp::Rsp;
pub use srq::{Srq, SrqCounts};
pub use triplet::{LmrTriplet, RmrTriplet};
