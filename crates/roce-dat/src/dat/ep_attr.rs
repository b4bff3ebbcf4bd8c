//! EP attributes (DAT_EP_ATTR), completion flags (DAT_COMPLETION_FLAGS) and the parameter mask
//! of `dat_ep_modify` (DAT_EP_PARAM_MASK), with the provider defaults a NULL attribute pointer
//! gets (dat_ep_create(3DAT): "the Provider fills it with its default Endpoint attributes";
//! dapltest needs 4 IOVs each way and room for its DTOs).

use bitflags::bitflags;

/// `DAT_WATERMARK_INFINITE` ((DAT_COUNT)~0): no watermark event.
pub const WATERMARK_INFINITE: u32 = crate::srq::WATERMARK_INFINITE;

/// `DAT_VALUE_UNKNOWN` (((DAT_COUNT)~0)-1): a count the provider cannot obtain.
pub const VALUE_UNKNOWN: u32 = u32::MAX - 1;

bitflags! {
    /// DAT_COMPLETION_FLAGS (dat.h): per post, and as the EP's recv/request completion
    /// flag attributes.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
    pub struct CompletionFlags: u32 {
        /// DAT_COMPLETION_SUPPRESS_FLAG: no event for a successful completion.
        const SUPPRESS = 0x01;
        /// DAT_COMPLETION_SOLICITED_WAIT_FLAG.
        const SOLICITED_WAIT = 0x02;
        /// DAT_COMPLETION_UNSIGNALLED_FLAG.
        const UNSIGNALLED = 0x04;
        /// DAT_COMPLETION_BARRIER_FENCE_FLAG.
        const BARRIER_FENCE = 0x08;
        /// DAT_COMPLETION_EVD_THRESHOLD_FLAG.
        const EVD_THRESHOLD = 0x10;
        /// DAT_COMPLETION_LMR_INVALIDATE_FENCE_FLAG: wait for earlier LMR invalidations. No
        /// call of this provider invalidates an LMR locally, so there is nothing to wait for.
        const LMR_INVALIDATE_FENCE = 0x20;
    }
}

impl CompletionFlags {
    /// DAT_COMPLETION_DEFAULT_FLAG.
    pub const DEFAULT: CompletionFlags = CompletionFlags::empty();

    /// The flags dat_rmr_bind(3DAT) takes: a bind is never fenced nor solicited.
    pub const RMR_BIND: CompletionFlags =
        CompletionFlags::SUPPRESS.union(CompletionFlags::UNSIGNALLED);
}

/// EP attributes (DAT_EP_ATTR). `Default` is what a NULL attribute pointer gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpAttr {
    /// DAT_EP_ATTR.max_message_size: the largest send, in bytes; at most the IA's
    /// [`IaAttr::max_message_size`](super::IaAttr::max_message_size). A hint: as in the OFA
    /// providers, a post is refused (DAT_LENGTH_ERROR) only beyond what the transport carries.
    pub max_message_size: u32,
    /// DAT_EP_ATTR.max_rdma_size: the largest RDMA read or write, in bytes; a hint as
    /// `max_message_size`.
    pub max_rdma_size: u32,
    /// DAT_EP_ATTR.max_recv_dtos: receives outstanding at once (the receive queue's depth);
    /// one more post is DAT_INSUFFICIENT_RESOURCES. 1..=`max_dto_per_ep`; 0 allowed, and
    /// unused, for an EP on an SRQ.
    pub max_recv_dtos: u32,
    /// DAT_EP_ATTR.max_request_dtos: sends, RDMA and atomic operations outstanding at once
    /// (the send queue's depth), 1..=`max_dto_per_ep`.
    pub max_request_dtos: u32,
    /// DAT_EP_ATTR.max_recv_iov: LMR triplets of one receive, at most
    /// `max_iov_segments_per_dto` (16).
    pub max_recv_iov: u32,
    /// DAT_EP_ATTR.max_request_iov: LMR triplets of one send (and the cap of the RDMA IOV
    /// counts), at most 16.
    pub max_request_iov: u32,
    /// DAT_EP_ATTR.max_rdma_read_in: RDMA reads and atomics the peer may have outstanding at
    /// this EP as their target (the CM REQ's responder resources), at most
    /// `max_rdma_read_per_ep` (16).
    pub max_rdma_read_in: u8,
    /// DAT_EP_ATTR.max_rdma_read_out: RDMA reads and atomics this EP may have outstanding as
    /// their originator (the CM REQ's initiator depth), at most 16.
    pub max_rdma_read_out: u8,
    /// Completion flags the EP supports for receives (DEFAULT, SOLICITED_WAIT, UNSIGNALLED or
    /// EVD_THRESHOLD; dat_ep_modify(3DAT) "Recv Completion Flags").
    pub recv_completion_flags: CompletionFlags,
    /// Completion flags the EP supports for requests (DEFAULT, UNSIGNALLED or EVD_THRESHOLD).
    pub request_completion_flags: CompletionFlags,
    /// DAT_EP_ATTR.max_rdma_read_iov: LMR triplets an RDMA read scatters into, at most 16.
    pub max_rdma_read_iov: u32,
    /// DAT_EP_ATTR.max_rdma_write_iov: LMR triplets an RDMA write gathers from, at most 16.
    pub max_rdma_write_iov: u32,
    /// SRQ soft high watermark attribute (DAT_HW_DEFAULT = `WATERMARK_INFINITE`).
    pub srq_soft_hw: u32,
    /// DAT_EP_ATTR.qos: the service class, carried as the DSCP of the EP's packets
    /// ([`Qos`](super::Qos)).
    pub qos: super::Qos,
}

impl Default for EpAttr {
    fn default() -> Self {
        EpAttr {
            max_message_size: crate::transport::MAX_MSG_SIZE,
            max_rdma_size: crate::transport::MAX_MSG_SIZE,
            max_recv_dtos: 256,
            max_request_dtos: 256,
            max_recv_iov: 4,
            max_request_iov: 4,
            max_rdma_read_in: 4,
            max_rdma_read_out: 4,
            recv_completion_flags: CompletionFlags::DEFAULT,
            request_completion_flags: CompletionFlags::DEFAULT,
            max_rdma_read_iov: 4,
            max_rdma_write_iov: 4,
            srq_soft_hw: WATERMARK_INFINITE,
            qos: super::Qos::BestEffort,
        }
    }
}

impl EpAttr {
    /// What a consumer's zeros ask for, as the OFA providers read them (dtest leaves sizes and
    /// RDMA IOVs 0): a 0 message or RDMA size is the provider's maximum, a 0 IOV count one
    /// segment, a 0 RDMA read or write IOV count the request IOV count.
    pub fn with_zeros_resolved(self) -> EpAttr {
        let or_max = |v: u32| {
            if v == 0 {
                crate::transport::MAX_MSG_SIZE
            } else {
                v
            }
        };
        let max_request_iov = self.max_request_iov.max(1);
        let or_request_iov = |v: u32| if v == 0 { max_request_iov } else { v };
        EpAttr {
            max_message_size: or_max(self.max_message_size),
            max_rdma_size: or_max(self.max_rdma_size),
            max_recv_iov: self.max_recv_iov.max(1),
            max_request_iov,
            max_rdma_read_iov: or_request_iov(self.max_rdma_read_iov),
            max_rdma_write_iov: or_request_iov(self.max_rdma_write_iov),
            ..self
        }
    }

    /// Valid values of the completion-flag attributes (dat_ep_modify(3DAT): receives do not
    /// support SUPPRESS or BARRIER_FENCE; requests take UNSIGNALLED or EVD_THRESHOLD, the
    /// per-post flags are not attributes).
    pub(crate) fn flags_valid(&self) -> bool {
        let recv_ok = CompletionFlags::SOLICITED_WAIT
            | CompletionFlags::UNSIGNALLED
            | CompletionFlags::EVD_THRESHOLD;
        let req_ok = CompletionFlags::UNSIGNALLED | CompletionFlags::EVD_THRESHOLD;
        recv_ok.contains(self.recv_completion_flags)
            && req_ok.contains(self.request_completion_flags)
    }
}

bitflags! {
    /// DAT_EP_PARAM_MASK (dat.h `DAT_EP_FIELD_*`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    /// Each bit names one DAT_EP_PARAM field; which ones `dat_ep_modify` may change, and in
    /// which states, is [`modifiable_states`](super::ep_modify::modifiable_states)
    /// (dat_ep_modify(3DAT)).
    pub struct EpParamMask: u64 {
        /// DAT_EP_FIELD_IA_HANDLE: the EP's IA (never modifiable).
        const IA_HANDLE = 0x0000_0001;
        /// DAT_EP_FIELD_EP_STATE: the EP's state (never modifiable).
        const EP_STATE = 0x0000_0002;
        /// DAT_EP_FIELD_COMM: the EP's communicator (never modifiable).
        const COMM = 0x0000_0004;
        /// DAT_EP_FIELD_LOCAL_IA_ADDRESS_PTR: the local IA address (never modifiable).
        const LOCAL_IA_ADDRESS = 0x0000_0008;
        /// DAT_EP_FIELD_LOCAL_PORT_QUAL: the local port qualifier (never modifiable).
        const LOCAL_PORT_QUAL = 0x0000_0010;
        /// DAT_EP_FIELD_REMOTE_IA_ADDRESS_PTR: the peer's IA address (never modifiable).
        const REMOTE_IA_ADDRESS = 0x0000_0020;
        /// DAT_EP_FIELD_REMOTE_PORT_QUAL: the peer's port qualifier (never modifiable).
        const REMOTE_PORT_QUAL = 0x0000_0040;
        /// DAT_EP_FIELD_PZ_HANDLE: the EP's protection zone.
        const PZ_HANDLE = 0x0000_0080;
        /// DAT_EP_FIELD_RECV_EVD_HANDLE: the EVD of receive completions.
        const RECV_EVD_HANDLE = 0x0000_0100;
        /// DAT_EP_FIELD_REQUEST_EVD_HANDLE: the EVD of request completions.
        const REQUEST_EVD_HANDLE = 0x0000_0200;
        /// DAT_EP_FIELD_CONNECT_EVD_HANDLE: the EVD of connection events.
        const CONNECT_EVD_HANDLE = 0x0000_0400;
        /// DAT_EP_FIELD_SRQ_HANDLE: the EP's SRQ (never modifiable).
        const SRQ_HANDLE = 0x0000_0800;
        /// DAT_EP_FIELD_EP_ATTR_SERVICE_TYPE: the service type (only RC).
        const SERVICE_TYPE = 0x0000_1000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_MESSAGE_SIZE: [`EpAttr::max_message_size`].
        const MAX_MESSAGE_SIZE = 0x0000_2000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_RDMA_SIZE: [`EpAttr::max_rdma_size`].
        const MAX_RDMA_SIZE = 0x0000_4000;
        /// DAT_EP_FIELD_EP_ATTR_QOS: the quality of service (only best effort).
        const QOS = 0x0000_8000;
        /// DAT_EP_FIELD_EP_ATTR_RECV_COMPLETION_FLAGS: [`EpAttr::recv_completion_flags`].
        const RECV_COMPLETION_FLAGS = 0x0001_0000;
        /// DAT_EP_FIELD_EP_ATTR_REQUEST_COMPLETION_FLAGS:
        /// [`EpAttr::request_completion_flags`].
        const REQUEST_COMPLETION_FLAGS = 0x0002_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_RECV_DTOS: [`EpAttr::max_recv_dtos`].
        const MAX_RECV_DTOS = 0x0004_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_DTOS: [`EpAttr::max_request_dtos`].
        const MAX_REQUEST_DTOS = 0x0008_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_RECV_IOV: [`EpAttr::max_recv_iov`].
        const MAX_RECV_IOV = 0x0010_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_REQUEST_IOV: [`EpAttr::max_request_iov`].
        const MAX_REQUEST_IOV = 0x0020_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IN: [`EpAttr::max_rdma_read_in`].
        const MAX_RDMA_READ_IN = 0x0040_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_OUT: [`EpAttr::max_rdma_read_out`].
        const MAX_RDMA_READ_OUT = 0x0080_0000;
        /// DAT_EP_FIELD_EP_ATTR_SRQ_SOFT_HW: [`EpAttr::srq_soft_hw`].
        const SRQ_SOFT_HW = 0x0100_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_RDMA_READ_IOV: [`EpAttr::max_rdma_read_iov`].
        const MAX_RDMA_READ_IOV = 0x0200_0000;
        /// DAT_EP_FIELD_EP_ATTR_MAX_RDMA_WRITE_IOV: [`EpAttr::max_rdma_write_iov`].
        const MAX_RDMA_WRITE_IOV = 0x0400_0000;
        /// DAT_EP_FIELD_EP_ATTR_NUM_TRANSPORT_ATTR: the count of transport-specific
        /// attributes (this provider has none: only 0).
        const NUM_TRANSPORT_ATTR = 0x0800_0000;
        /// DAT_EP_FIELD_EP_ATTR_TRANSPORT_SPECIFIC_ATTR: the transport-specific attributes.
        const TRANSPORT_SPECIFIC_ATTR = 0x1000_0000;
        /// DAT_EP_FIELD_EP_ATTR_NUM_PROVIDER_ATTR: the count of provider-specific
        /// attributes (this provider has none: only 0).
        const NUM_PROVIDER_ATTR = 0x2000_0000;
        /// DAT_EP_FIELD_EP_ATTR_PROVIDER_SPECIFIC_ATTR: the provider-specific attributes.
        const PROVIDER_SPECIFIC_ATTR = 0x4000_0000;
    }
}

impl EpParamMask {
    /// DAT_EP_FIELD_EP_ATTR_ALL.
    pub const EP_ATTR_ALL: EpParamMask = EpParamMask::from_bits_truncate(0x7fff_f000);
}
