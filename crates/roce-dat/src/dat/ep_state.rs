//! The EP states of the DAT state machine (DAT_EP_STATE_*, dat_ep_get_status(3DAT)): what an
//! [`Ep`](super::Ep) is in, and what DAT_INVALID_STATE names when a call is not allowed.

/// EP states (DAT_EP_STATE_*, dat_ep_get_status(3DAT)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpState {
    /// DAT_EP_STATE_UNCONNECTED: created (dat_ep_create(3DAT)) or reset, ready to connect or
    /// to accept a request.
    Unconnected,
    /// Bound to a reserved service point (dat_rsp_create).
    Reserved,
    /// A connection request arrived for this EP (RSP) and is not answered yet.
    PassiveConnectionPending,
    /// DAT_EP_STATE_ACTIVE_CONNECTION_PENDING: [`Ep::connect`](super::Ep::connect) sent a
    /// request; the outcome comes on the connection EVD.
    ActiveConnectionPending,
    /// A provider-created EP of a connection request not answered yet.
    TentativeConnectionPending,
    /// Passive side after dat_cr_accept, before ESTABLISHED
    /// (DAT_EP_STATE_COMPLETION_PENDING).
    CompletionPending,
    /// DAT_EP_STATE_CONNECTED: `Established` was dequeued from the connection EVD; DTOs flow.
    Connected,
    /// DAT_EP_STATE_DISCONNECT_PENDING: [`Ep::disconnect`](super::Ep::disconnect) started the
    /// teardown, the `Disconnected` event is not dequeued yet.
    DisconnectPending,
    /// DAT_EP_STATE_DISCONNECTED: the connection is down (disconnected, rejected, broken,
    /// unreachable or timed out); outstanding DTOs flushed. [`Ep::reset`](super::Ep::reset)
    /// makes it UNCONNECTED again.
    Disconnected,
}
