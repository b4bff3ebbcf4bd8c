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
    }
}

impl CompletionFlags {
    /// DAT_COMPLETION_DEFAULT_FLAG.
    pub const DEFAULT: CompletionFlags = CompletionFlags::empty();
}

/// EP attributes (DAT_EP_ATTR). `Default` is what a NULL attribute pointer gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpAttr {
    pub max_message_size: u32,
    pub max_rdma_size: u32,
    pub max_recv_dtos: u32,
    pub max_request_dtos: u32,
    pub max_recv_iov: u32,
    pub max_request_iov: u32,
    /// Outstanding RDMA reads/atomics as target / as originator.
    pub max_rdma_read_in: u8,
    pub max_rdma_read_out: u8,
    /// Completion flags the EP supports for receives (DEFAULT, SOLICITED_WAIT, UNSIGNALLED or
    /// EVD_THRESHOLD; dat_ep_modify(3DAT) "Recv Completion Flags").
    pub recv_completion_flags: CompletionFlags,
    /// Completion flags the EP supports for requests (DEFAULT, UNSIGNALLED or EVD_THRESHOLD).
    pub request_completion_flags: CompletionFlags,
    /// Segments of an RDMA read / write.
    pub max_rdma_read_iov: u32,
    pub max_rdma_write_iov: u32,
    /// SRQ soft high watermark attribute (DAT_HW_DEFAULT = `WATERMARK_INFINITE`).
    pub srq_soft_hw: u32,
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
    pub struct EpParamMask: u64 {
        const IA_HANDLE = 0x0000_0001;
        const EP_STATE = 0x0000_0002;
        const COMM = 0x0000_0004;
        const LOCAL_IA_ADDRESS = 0x0000_0008;
        const LOCAL_PORT_QUAL = 0x0000_0010;
        const REMOTE_IA_ADDRESS = 0x0000_0020;
        const REMOTE_PORT_QUAL = 0x0000_0040;
        const PZ_HANDLE = 0x0000_0080;
        const RECV_EVD_HANDLE = 0x0000_0100;
        const REQUEST_EVD_HANDLE = 0x0000_0200;
        const CONNECT_EVD_HANDLE = 0x0000_0400;
        const SRQ_HANDLE = 0x0000_0800;
        const SERVICE_TYPE = 0x0000_1000;
        const MAX_MESSAGE_SIZE = 0x0000_2000;
        const MAX_RDMA_SIZE = 0x0000_4000;
        const QOS = 0x0000_8000;
        const RECV_COMPLETION_FLAGS = 0x0001_0000;
        const REQUEST_COMPLETION_FLAGS = 0x0002_0000;
        const MAX_RECV_DTOS = 0x0004_0000;
        const MAX_REQUEST_DTOS = 0x0008_0000;
        const MAX_RECV_IOV = 0x0010_0000;
        const MAX_REQUEST_IOV = 0x0020_0000;
        const MAX_RDMA_READ_IN = 0x0040_0000;
        const MAX_RDMA_READ_OUT = 0x0080_0000;
        const SRQ_SOFT_HW = 0x0100_0000;
        const MAX_RDMA_READ_IOV = 0x0200_0000;
        const MAX_RDMA_WRITE_IOV = 0x0400_0000;
        const NUM_TRANSPORT_ATTR = 0x0800_0000;
        const TRANSPORT_SPECIFIC_ATTR = 0x1000_0000;
        const NUM_PROVIDER_ATTR = 0x2000_0000;
        const PROVIDER_SPECIFIC_ATTR = 0x4000_0000;
    }
}

impl EpParamMask {
    /// DAT_EP_FIELD_EP_ATTR_ALL.
    pub const EP_ATTR_ALL: EpParamMask = EpParamMask::from_bits_truncate(0x7fff_f000);
}
