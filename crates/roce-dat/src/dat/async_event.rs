//! What an asynchronous event means in DAT terms (DAT 2.0 §6.3.2.4, dat.h's
//! `DAT_ASYNC_ERROR_*` with `DAT_ASYNCH_ERROR_EVENT_DATA`): which error it is, which object it
//! names and, for the watermarks, the reason that tells them from a failure. One place for both
//! APIs: the Rust consumer reads [`DatAsync::of`], the C layer maps the result onto the codes.

use crate::engine::runtime::AsyncEvent;

/// The DAT_ASYNC_ERROR_* number of an asynchronous event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncError {
    /// DAT_ASYNC_ERROR_EVD_OVERFLOW: an EVD was full and lost an event.
    EvdOverflow,
    /// DAT_ASYNC_ERROR_IA_CATASTROPHIC: the IA can no longer work (a poll thread stopped).
    IaCatastrophic,
    /// DAT_ASYNC_ERROR_EP_BROKEN: an EP's connection or queue failed, or (with a reason) one
    /// of its watermarks fired.
    EpBroken,
    /// DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR: anything else the provider reports (an SRQ
    /// watermark, a refused SRQ receive, a neighbour-layer event).
    ProviderInternal,
}

/// The object an asynchronous event names (`dat_handle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncObject {
    /// The IA itself.
    Ia,
    /// The IA of the EVD with this [`Evd::id`](super::Evd::id): an overflow names the IA whose
    /// EVD overflowed, which need not own the async EVD reporting it
    /// ([`Ia::open_with_async_evd`](super::Ia::open_with_async_evd)).
    IaOfEvd(u64),
    /// The EP of this QPN ([`Ep::qpn`](super::Ep::qpn)).
    Ep(u32),
    /// The SRQ of (shard, SRQ number).
    Srq(usize, u32),
}

/// The `reason` of DAT_ASYNCH_ERROR_EVENT_DATA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncReason {
    /// None given (0).
    None,
    /// DAT_SRQ_LOW_WATERMARK_EVENT: the SRQ's posted receives dropped below its low
    /// watermark (dat_srq_set_lw).
    SrqLowWatermark,
    /// DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT: the EP's soft receive watermark was exceeded
    /// (dat_ep_set_watermark(3DAT); the hard one breaks the connection instead).
    EpSoftHighWatermark,
}

/// An asynchronous event as DAT reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DatAsync {
    /// The DAT_ASYNC_ERROR_* number.
    pub error: AsyncError,
    /// The object named.
    pub object: AsyncObject,
    /// The reason, for the watermarks.
    pub reason: AsyncReason,
}

impl DatAsync {
    /// What `event` means to a DAT consumer; `None` for a software event (DAT_SOFTWARE_EVENT,
    /// not an error).
    pub fn of(event: &AsyncEvent) -> Option<DatAsync> {
        let (error, object, reason) = match *event {
            AsyncEvent::Software { .. } => return None,
            AsyncEvent::EvdOverflow { evd } => (
                AsyncError::EvdOverflow,
                AsyncObject::IaOfEvd(evd),
                AsyncReason::None,
            ),
            AsyncEvent::SrqLimit { shard, srqn } => (
                AsyncError::ProviderInternal,
                AsyncObject::Srq(shard, srqn),
                AsyncReason::SrqLowWatermark,
            ),
            // Only the soft watermark comes as an event (the hard one breaks the connection).
            AsyncEvent::EpWatermark { qpn, .. } => (
                AsyncError::EpBroken,
                AsyncObject::Ep(qpn),
                AsyncReason::EpSoftHighWatermark,
            ),
            AsyncEvent::QpTransitionFailed { qpn }
            | AsyncEvent::LastWqeReached { qpn }
            | AsyncEvent::PostFailed { qpn, .. } => (
                AsyncError::EpBroken,
                AsyncObject::Ep(qpn),
                AsyncReason::None,
            ),
            AsyncEvent::ShardFailed { .. } => (
                AsyncError::IaCatastrophic,
                AsyncObject::Ia,
                AsyncReason::None,
            ),
            AsyncEvent::SrqPostFailed { .. } | AsyncEvent::Net(_) => (
                AsyncError::ProviderInternal,
                AsyncObject::Ia,
                AsyncReason::None,
            ),
        };
        Some(DatAsync {
            error,
            object,
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermarks_carry_their_reason_and_failures_none() {
        let soft = DatAsync::of(&AsyncEvent::EpWatermark {
            qpn: 7,
            soft: true,
            hard: false,
        })
        .unwrap();
        assert_eq!(
            (soft.error, soft.object, soft.reason),
            (
                AsyncError::EpBroken,
                AsyncObject::Ep(7),
                AsyncReason::EpSoftHighWatermark
            )
        );
        let lw = DatAsync::of(&AsyncEvent::SrqLimit { shard: 1, srqn: 3 }).unwrap();
        assert_eq!(
            (lw.object, lw.reason),
            (AsyncObject::Srq(1, 3), AsyncReason::SrqLowWatermark)
        );
        let broken = DatAsync::of(&AsyncEvent::LastWqeReached { qpn: 9 }).unwrap();
        assert_eq!(broken.reason, AsyncReason::None);
        let cat = DatAsync::of(&AsyncEvent::ShardFailed { shard: 0 }).unwrap();
        assert_eq!(cat.error, AsyncError::IaCatastrophic);
        assert_eq!(DatAsync::of(&AsyncEvent::Software { pointer: 1 }), None);
    }
}
