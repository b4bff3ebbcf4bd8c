//! Local memory regions (dat_lmr_create / dat_lmr_free / dat_lmr_query) of provider-allocated
//! memory (`DAT_MEM_TYPE_VIRTUAL` registration of consumer memory needs `unsafe` and comes with
//! the C ABI over `MrTable::register_raw`). The L_Key is the `lmr_context`, the R_Key the
//! `rmr_context` a peer names in RDMA operations.

use super::context::ConsumerContext;
use super::error::{DatError, Refused};
use super::ia::Ia;
use super::mem_priv::MemPriv;
use super::pz::{Pz, PzInner};
use crate::engine::deregister::Deregister;
use crate::mem::access::Access;
use crate::mem::{MrError, Region};
use std::sync::Arc;

pub use super::triplet::{LmrTriplet, RmrTriplet};

/// What dat_lmr_query reports (DAT_LMR_PARAM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LmrParam {
    /// The PZ's id ([`Pz::id`]).
    pub pz_id: u32,
    /// DAT_LMR_PARAM.registered_address: where the region starts.
    pub address: u64,
    /// DAT_LMR_PARAM.registered_size: the region's length, in bytes.
    pub length: u64,
    /// DAT_LMR_PARAM.lmr_context: the L_Key local DTOs name.
    pub lmr_context: u32,
    /// `None` once the R_Key was invalidated.
    pub rmr_context: Option<u32>,
    /// The rights the region grants, as the memory table checks them ([`MemPriv::access`]
    /// of `privileges`).
    pub access: Access,
    /// The privileges the LMR was created with.
    pub privileges: MemPriv,
}

/// The registration of an LMR, shared with the RMRs bound to it (which keep it registered).
pub(crate) struct Registered {
    pub pz: Arc<PzInner>,
    pub region: Region,
    pub privileges: MemPriv,
}

impl Registered {
    /// `r`, counted as an LMR of its IA ([`Ia::counters`](super::Ia::counters)).
    fn counted(r: Registered) -> Registered {
        r.pz.ia.objects.lmr.created();
        r
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.pz.ia.objects.lmr.freed();
        if self.region.lkey != 0 {
            // Waits for accesses in flight, then no core touches the memory again.
            let _ = self.pz.ia.mem.deregister(self.region.lkey);
        }
    }
}

/// A local memory region (DAT_LMR_HANDLE): memory registered in a PZ, named by DTOs
/// through its L_Key and by peers through its R_Key. Dropping it deregisters the memory
/// after the accesses in flight (an RMR bound over it keeps it registered until unbound).
pub struct Lmr {
    pub(crate) reg: Arc<Registered>,
    context: ConsumerContext,
}

/// Checks that every segment lies inside one registered LMR of `ia` (dat_lmr_sync_rdma_read /
/// dat_lmr_sync_rdma_write, DAT 2.0 §6.5.5): DAT_INVALID_PARAMETER (argument 2) names a
/// segment that does not.
fn check_segments(ia: &Ia, segments: &[LmrTriplet]) -> Result<(), DatError> {
    if segments.is_empty() {
        return Err(DatError::InvalidArg {
            arg: 3,
            what: "no segments",
        });
    }
    for t in segments {
        let inside = ia.inner.mem.query(t.lmr_context).is_ok_and(|r| {
            t.virtual_address >= r.addr
                && t.virtual_address - r.addr + u64::from(t.segment_length) <= r.len
        });
        if !inside {
            return Err(DatError::InvalidArg {
                arg: 2,
                what: "segment outside every registered LMR",
            });
        }
    }
    Ok(())
}

impl Lmr {
    /// dat_lmr_sync_rdma_read: makes the segments' memory consistent before a peer's RDMA read.
    /// Memory here is coherent (cores and NIC DMA share the cache hierarchy), so the call only
    /// validates that each segment lies in a registered LMR.
    pub fn sync_rdma_read(ia: &Ia, segments: &[LmrTriplet]) -> Result<(), DatError> {
        check_segments(ia, segments)?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// dat_lmr_sync_rdma_write: makes data a peer RDMA-wrote visible to the consumer; as
    /// [`Lmr::sync_rdma_read`], a validation plus a fence on coherent memory.
    pub fn sync_rdma_write(ia: &Ia, segments: &[LmrTriplet]) -> Result<(), DatError> {
        check_segments(ia, segments)?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        Ok(())
    }

    /// Allocates and registers `len` zeroed bytes in `pz` with `access` rights; a length
    /// outside 1..=max_lmr_block_size is DAT_LENGTH_ERROR ([`super::ia_attr::check_lmr_length`]).
    pub fn create(pz: &Pz, len: usize, access: Access) -> Result<Lmr, DatError> {
        let len = super::limits::check_lmr_length(len as u64)?;
        let region = pz
            .inner
            .ia
            .mem
            .register_alloc(pz.inner.pz, len, 64, access)
            .map_err(registration_error)?;
        Ok(Lmr {
            reg: Arc::new(Registered::counted(Registered {
                pz: pz.inner.clone(),
                region,
                privileges: MemPriv::of_access(access),
            })),
            context: Default::default(),
        })
    }

    /// An LMR over a region already registered in `pz`'s table with `privileges`' rights
    /// (consumer memory registered with `MrTable::register_raw` by the C ABI, which upholds its
    /// contract); deregistered on drop.
    pub(crate) fn from_region(pz: &Pz, region: Region, privileges: MemPriv) -> Lmr {
        Lmr {
            reg: Arc::new(Registered::counted(Registered {
                pz: pz.inner.clone(),
                region,
                privileges,
            })),
            context: Default::default(),
        }
    }

    /// dat_lmr_query: PZ, address, length, contexts and rights of the live region.
    pub fn query(&self) -> Result<LmrParam, DatError> {
        let r = self
            .reg
            .pz
            .ia
            .mem
            .query(self.reg.region.lkey)
            .map_err(|_| DatError::InvalidHandleOf {
                kind: super::error::HandleKind::Lmr,
                what: "LMR no longer registered",
            })?;
        Ok(LmrParam {
            pz_id: r.pz.id(),
            address: r.addr,
            length: r.len,
            lmr_context: r.lkey,
            rmr_context: r.rkey,
            access: r.access,
            privileges: self.reg.privileges,
        })
    }

    /// The consumer context (dat_set_consumer_context / dat_get_consumer_context).
    pub fn context(&self) -> &ConsumerContext {
        &self.context
    }

    /// The L_Key (lmr_context).
    pub fn lmr_context(&self) -> u32 {
        self.reg.region.lkey
    }

    /// The R_Key (rmr_context).
    pub fn rmr_context(&self) -> u32 {
        self.reg.region.rkey
    }

    /// The region's virtual address.
    pub fn address(&self) -> u64 {
        self.reg.region.addr
    }

    /// The region's length, in bytes.
    pub fn length(&self) -> u64 {
        self.reg.region.len
    }

    /// A triplet naming `len` bytes at `offset` of this region.
    pub fn triplet(&self, offset: u64, len: u32) -> LmrTriplet {
        LmrTriplet {
            lmr_context: self.reg.region.lkey,
            virtual_address: self.reg.region.addr + offset,
            segment_length: len,
        }
    }

    /// An RMR triplet for a peer: `len` bytes at `offset`.
    pub fn rmr_triplet(&self, offset: u64, len: u32) -> RmrTriplet {
        RmrTriplet {
            rmr_context: self.reg.region.rkey,
            target_address: self.reg.region.addr + offset,
            segment_length: len,
        }
    }

    /// Copies `data` into the region at `offset` (the consumer writing its own memory).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), DatError> {
        self.reg
            .pz
            .ia
            .mem
            .write_local(self.reg.region.lkey, self.reg.region.addr + offset, data)
            .map_err(|_| DatError::InvalidParameter("outside the LMR"))
    }

    /// Copies `len` bytes at `offset` out of the region.
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, DatError> {
        let mut out = vec![0; len];
        self.reg
            .pz
            .ia
            .mem
            .read_local(
                self.reg.region.lkey,
                self.reg.region.addr + offset,
                &mut out,
            )
            .map_err(|_| DatError::InvalidParameter("outside the LMR"))?;
        Ok(out)
    }

    /// Frees the region; refused (DAT_INVALID_STATE) while an RMR is bound to it or a
    /// transmit still holds it.
    pub fn free(mut self) -> Result<(), Refused<Lmr>> {
        let rmrs = Arc::strong_count(&self.reg) - 1;
        if rmrs > 0 {
            return Err(Refused {
                object: self,
                error: DatError::InvalidStateOf {
                    kind: super::error::StateKind::LmrInUse,
                    what: format!("{rmrs} RMRs bound"),
                },
            });
        }
        match self.reg.pz.ia.mem.try_deregister(self.reg.region.lkey) {
            Ok(()) => {
                if let Some(reg) = Arc::get_mut(&mut self.reg) {
                    reg.region.lkey = 0;
                }
                Ok(())
            }
            // Accesses still in flight (a zero-copy send the PMD holds): in use all the same.
            Err(e) => Err(Refused {
                object: self,
                error: DatError::InvalidStateOf {
                    kind: super::error::StateKind::LmrInUse,
                    what: e.to_string(),
                },
            }),
        }
    }
}

/// dat_lmr_create's error for a registration the memory table refused: a region it cannot
/// describe (its range wraps) is DAT_INVALID_PARAMETER, anything else (no slot, no memory)
/// DAT_INSUFFICIENT_RESOURCES.
pub(crate) fn registration_error(e: MrError) -> DatError {
    match e {
        MrError::InvalidParameter => DatError::InvalidParameter("LMR region"),
        e => DatError::InsufficientResources(e.to_string()),
    }
}
