//! Rust events to DAT_EVENTs: DTO completions name their EP handle and cookie (extended ones
//! are DAT_IB_DTO_EVENTs with DAT_IB_EXTENSION_EVENT_DATA), connection events carry the
//! private data (kept in the EP until its next event), a connection request becomes a CR
//! handle, async events name the EP or IA.

use super::handles::{self, Kind, Object};
use super::objects::{Body, CrObj};
use super::state::{lock, SockAddr};
use crate::dat::{AsyncError, AsyncObject, AsyncReason, ConnectionEventKind, DatAsync};
use crate::dat::{DatEvent, DtoEvent};
use crate::engine::runtime::AsyncEvent;
use crate::transport::types::{WcOpcode, WcStatus};
use dat_sys as d;
use std::sync::Mutex;

fn status(s: WcStatus) -> d::DAT_DTO_COMPLETION_STATUS {
    match s {
        WcStatus::Success => d::DAT_DTO_SUCCESS,
        WcStatus::WrFlushErr => d::DAT_DTO_ERR_FLUSHED,
        WcStatus::LocLenErr => d::DAT_DTO_ERR_LOCAL_LENGTH,
        WcStatus::LocQpOpErr => d::DAT_DTO_ERR_LOCAL_EP,
        WcStatus::LocProtErr | WcStatus::LocAccessErr => d::DAT_DTO_ERR_LOCAL_PROTECTION,
        WcStatus::BadRespErr => d::DAT_DTO_ERR_BAD_RESPONSE,
        WcStatus::RemAccessErr => d::DAT_DTO_ERR_REMOTE_ACCESS,
        WcStatus::RemInvReqErr | WcStatus::RemOpErr => d::DAT_DTO_ERR_REMOTE_RESPONDER,
        WcStatus::RetryExcErr => d::DAT_DTO_ERR_TRANSPORT,
        WcStatus::RnrRetryExcErr => d::DAT_DTO_ERR_RECEIVER_NOT_READY,
    }
}

fn ext_data(ev: &mut d::DAT_EVENT, ty: u32, immed: u32) {
    let mut x = d::DAT_IB_EXTENSION_EVENT_DATA::default();
    x.type_ = ty;
    x.status = 0;
    x.val.immed = d::DAT_IB_IMMED_DATA { data: immed };
    const _: () = assert!(
        core::mem::size_of::<d::DAT_IB_EXTENSION_EVENT_DATA>() <= core::mem::size_of::<[u64; 8]>()
    );
    // SAFETY: the extension data fits in event_extension_data (asserted above), which is
    // 8-aligned; the provider owns the layout of this area (dat_ib_extensions.h).
    unsafe {
        (ev.event_extension_data.as_mut_ptr() as *mut d::DAT_IB_EXTENSION_EVENT_DATA)
            .write_unaligned(x)
    };
}

fn dto(evd: &Object, ev: &mut d::DAT_EVENT, c: DtoEvent) {
    let ep_handle = evd.ia.ep_handle(c.ep);
    let ok = c.status == WcStatus::Success;
    if c.opcode == WcOpcode::BindMw {
        ev.event_number = d::DAT_RMR_BIND_COMPLETION_EVENT;
        let rmr = c.rmr.map_or(0, |id| evd.ia.rmr_handle(id));
        ev.event_data.rmr_completion_event_data = d::DAT_RMR_BIND_COMPLETION_EVENT_DATA {
            rmr_handle: rmr as d::DAT_RMR_HANDLE,
            user_cookie: d::DAT_RMR_COOKIE { as_64: c.cookie },
            status: if ok {
                d::DAT_DTO_SUCCESS
            } else {
                d::DAT_RMR_OPERATION_FAILED
            },
        };
        return;
    }
    ev.event_number = d::DAT_DTO_COMPLETION_EVENT;
    let mut op = match c.opcode {
        WcOpcode::Send => d::DAT_DTO_SEND,
        WcOpcode::RdmaWrite => d::DAT_DTO_RDMA_WRITE,
        WcOpcode::RdmaRead => d::DAT_DTO_RDMA_READ,
        // dat.h: a receive that invalidated an RMR names it.
        WcOpcode::Recv if c.invalidated_rmr.is_some() => d::DAT_DTO_RECEIVE_WITH_INVALIDATE,
        WcOpcode::Recv => d::DAT_DTO_RECEIVE,
        _ => d::DAT_DTO_RECEIVE,
    };
    let len = c.transferred_length;
    let ext = match c.opcode {
        // A WRITE's completion carries the immediate it sent (`SendOp::immediate`).
        WcOpcode::RdmaWrite if c.immediate.is_some() => Some((
            d::DAT_IB_DTO_RDMA_WRITE_IMMED,
            d::DAT_IB_RDMA_WRITE_IMMED,
            0,
        )),
        WcOpcode::CompSwap => Some((d::DAT_IB_DTO_CMP_SWAP, d::DAT_IB_CMP_AND_SWAP, 0)),
        WcOpcode::FetchAdd => Some((d::DAT_IB_DTO_FETCH_ADD, d::DAT_IB_FETCH_AND_ADD, 0)),
        WcOpcode::RecvRdmaWithImm => Some((
            d::DAT_IB_DTO_RECV_IMMED,
            d::DAT_IB_RDMA_WRITE_IMMED_DATA,
            c.immediate.unwrap_or(0),
        )),
        WcOpcode::Recv if c.immediate.is_some() => Some((
            d::DAT_IB_DTO_RECV_MSG_IMMED,
            d::DAT_IB_RECV_IMMED_DATA,
            c.immediate.unwrap_or(0),
        )),
        _ => None,
    };
    if let Some((dto_op, ty, immed)) = ext {
        ev.event_number = d::DAT_IB_DTO_EVENT;
        op = dto_op;
        ext_data(ev, ty, immed);
    }
    ev.event_data.dto_completion_event_data = d::DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle: ep_handle as d::DAT_EP_HANDLE,
        user_cookie: d::DAT_DTO_COOKIE { as_64: c.cookie },
        status: status(c.status),
        transfered_length: len,
        operation: op,
        rmr_context: c.invalidated_rmr.unwrap_or(0),
    };
}

/// Fills `ev` from `e` dequeued from the EVD `evd`.
pub(crate) fn convert(evd: &Object, e: DatEvent, ev: &mut d::DAT_EVENT) {
    ev.evd_handle = evd.handle as d::DAT_EVD_HANDLE;
    match e {
        DatEvent::Dto(c) => dto(evd, ev, c),
        DatEvent::Connection {
            ep,
            kind,
            private_data,
            reject_reason: _,
        } => {
            ev.event_number = match kind {
                ConnectionEventKind::Established => d::DAT_CONNECTION_EVENT_ESTABLISHED,
                ConnectionEventKind::PeerRejected => d::DAT_CONNECTION_EVENT_PEER_REJECTED,
                ConnectionEventKind::NonPeerRejected => d::DAT_CONNECTION_EVENT_NON_PEER_REJECTED,
                ConnectionEventKind::Unreachable => d::DAT_CONNECTION_EVENT_UNREACHABLE,
                ConnectionEventKind::TimedOut => d::DAT_CONNECTION_EVENT_TIMED_OUT,
                ConnectionEventKind::Broken => d::DAT_CONNECTION_EVENT_BROKEN,
                ConnectionEventKind::Disconnected => d::DAT_CONNECTION_EVENT_DISCONNECTED,
            };
            let h = evd.ia.ep_handle(ep);
            let mut data = d::DAT_CONNECTION_EVENT_DATA {
                ep_handle: h as d::DAT_EP_HANDLE,
                private_data_size: 0,
                private_data: core::ptr::null_mut(),
            };
            if let Ok(o) = handles::get(h as d::DAT_HANDLE, Kind::Ep) {
                if let Body::Ep(e) = &o.body {
                    let mut buf = lock(&e.pdata);
                    *buf = private_data;
                    data.private_data_size = buf.len() as i32;
                    // The buffer lives in the EP until its next connection event.
                    data.private_data = buf.as_mut_ptr() as d::DAT_PVOID;
                }
            }
            ev.event_data.connect_event_data = data;
        }
        DatEvent::ConnectionRequest(cr) => {
            let conn_qual = cr.conn_qual();
            let sp = crate::dat::ffi::state::lock(&evd.ia.sps)
                .get(&conn_qual.port())
                .copied()
                .unwrap_or(0);
            // The EP the request names: the one the provider made for a PSP with
            // DAT_PSP_PROVIDER_FLAG (it gets a handle here), else an RSP's reserved EP (by the
            // QPN the Rust request knows), else none.
            let (ep, provider_ep) = match cr.provider_ep() {
                Some(e) => (super::ep::provider_ep_handle(&evd.ia, e).handle, true),
                None => (
                    cr.reserved_ep().map_or(0, |qpn| evd.ia.ep_handle(qpn)),
                    false,
                ),
            };
            let o = handles::insert(evd.ia.provider(), Kind::Cr, evd.ia.clone(), |_| {
                Body::Cr(CrObj {
                    cr: Mutex::new(Some(cr)),
                    query_remote: Mutex::new(SockAddr::default()),
                    ep,
                    provider_ep,
                })
            });
            ev.event_number = d::DAT_CONNECTION_REQUEST_EVENT;
            ev.event_data.cr_arrival_event_data = d::DAT_CR_ARRIVAL_EVENT_DATA {
                sp_handle: d::DAT_SP_HANDLE {
                    psp_handle: sp as d::DAT_PSP_HANDLE,
                },
                local_ia_address_ptr: evd.ia.addr.as_dat(),
                conn_qual: conn_qual.value(),
                cr_handle: o.handle as d::DAT_CR_HANDLE,
                truncate_flag: d::DAT_FALSE,
            };
        }
        DatEvent::Async(AsyncEvent::Software { pointer }) => {
            ev.event_number = d::DAT_SOFTWARE_EVENT;
            ev.event_data.software_event_data = d::DAT_SOFTWARE_EVENT_DATA {
                pointer: pointer as usize as d::DAT_PVOID,
            };
        }
        DatEvent::Async(a) => {
            // Software events are matched above: every other one is an error.
            let Some(x) = DatAsync::of(&a) else { return };
            let number = match x.error {
                AsyncError::EvdOverflow => d::DAT_ASYNC_ERROR_EVD_OVERFLOW,
                AsyncError::IaCatastrophic => d::DAT_ASYNC_ERROR_IA_CATASTROPHIC,
                AsyncError::EpBroken => d::DAT_ASYNC_ERROR_EP_BROKEN,
                AsyncError::ProviderInternal => d::DAT_ASYNC_ERROR_PROVIDER_INTERNAL_ERROR,
            };
            // An async EVD given to other IAs' dat_ia_open carries their events too.
            let handle = evd.ia.async_handle(|s| match x.object {
                AsyncObject::Ia => s.handle(),
                AsyncObject::IaOfEvd(id) if lock(&s.evds).contains_key(&id) => s.handle(),
                AsyncObject::IaOfEvd(_) => 0,
                AsyncObject::Ep(qpn) => s.ep_handle(qpn),
                AsyncObject::Srq(shard, srqn) => s.srq_handle((shard, srqn)),
            });
            // An EVD freed since it overflowed: the IA of the reporting EVD.
            let handle = match (handle, x.object) {
                (0, AsyncObject::IaOfEvd(_)) => evd.ia.handle(),
                _ => handle,
            };
            let reason = match x.reason {
                AsyncReason::None => 0,
                AsyncReason::SrqLowWatermark => d::DAT_SRQ_LOW_WATERMARK_EVENT as i32,
                AsyncReason::EpSoftHighWatermark => d::DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT as i32,
            };
            ev.event_number = number;
            ev.event_data.asynch_error_event_data = d::DAT_ASYNCH_ERROR_EVENT_DATA {
                dat_handle: handle as d::DAT_HANDLE,
                reason,
            };
        }
    }
}
