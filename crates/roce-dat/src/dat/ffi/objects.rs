//! What each handle holds: the Rust object plus the DAT-level facts the Rust API does not
//! keep (handles of related objects, query parameters, event buffers).

use super::state::{lock, SockAddr};
use crate::dat::{Cno, Cr, Ep, Evd, Lmr, Psp, Pz, Rmr, Rsp, Srq};
use std::sync::Mutex;

/// The body of a handle.
pub(crate) enum Body {
    Ia,
    Pz(Pz),
    Lmr(LmrObj),
    Rmr(RmrObj),
    Evd(EvdObj),
    Cno(CnoObj),
    Ep(EpObj),
    Srq(SrqObj),
    /// A PSP or an RSP.
    Sp(SpObj),
    Cr(CrObj),
}

/// An LMR handle: the Rust LMR (until dat_lmr_free takes it) and its PZ's handle.
pub(crate) struct LmrObj {
    pub lmr: Mutex<Option<Lmr>>,
    pub pz: usize,
}

pub(crate) struct RmrObj {
    pub rmr: Mutex<Option<Rmr>>,
    pub pz: usize,
}

pub(crate) struct EvdObj {
    pub evd: Evd,
}

pub(crate) struct CnoObj {
    pub cno: Cno,
}

pub(crate) struct EpObj {
    pub ep: Ep,
    /// The handles of its parameters.
    pub view: Mutex<EpView>,
    pub srq: usize,
    /// What dat_ep_query's `remote_ia_address_ptr` points at: [`Ep::remote`] as a
    /// `sockaddr_in`, written by each query (the pointer stays valid while the handle lives).
    pub query_remote: Mutex<SockAddr>,
    /// Private data of the last connection event (the event points into it).
    pub pdata: Mutex<Vec<u8>>,
}

/// The handles an EP's parameters name that dat_ep_modify changes (the Rust EP holds the
/// objects; these are what the consumer called them).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct EpView {
    pub pz: usize,
    pub recv_evd: usize,
    pub request_evd: usize,
    pub connect_evd: usize,
}

impl EpObj {
    /// The handles now.
    pub fn view(&self) -> EpView {
        *self.view.lock().unwrap_or_else(|p| p.into_inner())
    }
}

pub(crate) struct SrqObj {
    pub srq: Srq,
    pub pz: usize,
}

pub(crate) struct SpObj {
    /// A PSP's listener (None for an RSP, and once freed).
    pub psp: Mutex<Option<Psp>>,
    /// An RSP: the Rust RSP, which holds its EP RESERVED (None once freed).
    pub rsp: Mutex<Option<Rsp>>,
    pub evd: usize,
    /// RSP: its EP.
    pub ep: usize,
}

impl SpObj {
    /// The Rust PSP's flag (an RSP's requests come on its own EP: the consumer's).
    pub fn flag(&self) -> crate::dat::PspFlag {
        lock(&self.psp)
            .as_ref()
            .map_or(crate::dat::PspFlag::Consumer, Psp::flag)
    }

    /// The qualifier of its Rust PSP or RSP (`kind`'s invalid handle once freed).
    pub fn conn_qual(&self, kind: super::handles::Kind) -> Result<crate::dat::ConnQual, u32> {
        if let Some(p) = lock(&self.psp).as_ref() {
            return Ok(p.conn_qual());
        }
        lock(&self.rsp)
            .as_ref()
            .map(Rsp::conn_qual)
            .ok_or(kind.invalid())
    }
}

pub(crate) struct CrObj {
    pub cr: Mutex<Option<Cr>>,
    /// What dat_cr_query's `remote_ia_address_ptr` points at: [`Cr::remote_address`] as a
    /// `sockaddr_in`, written by each query (the pointer stays valid while the handle lives).
    pub query_remote: Mutex<SockAddr>,
    /// For an RSP: the EP reserved for it; for a PSP with DAT_PSP_PROVIDER_FLAG: the EP the
    /// provider created for the request.
    pub ep: usize,
    /// `ep` was created by the provider: freed when the request is rejected.
    pub provider_ep: bool,
}
