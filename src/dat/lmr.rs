//! Local memory regions (dat_lmr_create / dat_lmr_free / dat_lmr_query) of provider-allocated
//! memory (`DAT_MEM_TYPE_VIRTUAL` registration of consumer memory needs `unsafe` and comes with
//! the C ABI over `MrTable::register_raw`). The L_Key is the `lmr_context`, the R_Key the
//! `rmr_context` a peer names in RDMA operations.

use super::error::{DatError, Refused};
use super::pz::{Pz, PzInner};
use crate::mem::{MrError, Region};
use crate::transport::memory::Access;
use std::sync::Arc;

/// An LMR triplet (DAT_LMR_TRIPLET): local memory of a DTO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LmrTriplet {
    pub lmr_context: u32,
    pub virtual_address: u64,
    pub segment_length: u32,
}

/// An RMR triplet (DAT_RMR_TRIPLET): remote memory of an RDMA operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmrTriplet {
    pub rmr_context: u32,
    pub target_address: u64,
    pub segment_length: u32,
}

/// A registered region.
pub struct Lmr {
    pz: Arc<PzInner>,
    region: Region,
}

impl Lmr {
    /// Allocates and registers `len` zeroed bytes in `pz` with `access` rights.
    pub fn create(pz: &Pz, len: usize, access: Access) -> Result<Lmr, DatError> {
        let region = pz
            .inner
            .ia
            .mem
            .register_alloc(pz.inner.pz, len, 64, access)
            .map_err(|e| match e {
                MrError::InvalidParameter => DatError::InvalidParameter("LMR length"),
                e => DatError::InsufficientResources(e.to_string()),
            })?;
        Ok(Lmr {
            pz: pz.inner.clone(),
            region,
        })
    }

    /// An LMR over a region already registered in `pz`'s table (consumer memory registered with
    /// `MrTable::register_raw` by the C ABI, which upholds its contract); deregistered on drop.
    pub(crate) fn from_region(pz: &Pz, region: Region) -> Lmr {
        Lmr {
            pz: pz.inner.clone(),
            region,
        }
    }

    /// The L_Key (lmr_context).
    pub fn lmr_context(&self) -> u32 {
        self.region.lkey
    }

    /// The R_Key (rmr_context).
    pub fn rmr_context(&self) -> u32 {
        self.region.rkey
    }

    /// The region's virtual address.
    pub fn address(&self) -> u64 {
        self.region.addr
    }

    pub fn length(&self) -> u64 {
        self.region.len
    }

    /// A triplet naming `len` bytes at `offset` of this region.
    pub fn triplet(&self, offset: u64, len: u32) -> LmrTriplet {
        LmrTriplet {
            lmr_context: self.region.lkey,
            virtual_address: self.region.addr + offset,
            segment_length: len,
        }
    }

    /// An RMR triplet for a peer: `len` bytes at `offset`.
    pub fn rmr_triplet(&self, offset: u64, len: u32) -> RmrTriplet {
        RmrTriplet {
            rmr_context: self.region.rkey,
            target_address: self.region.addr + offset,
            segment_length: len,
        }
    }

    /// Copies `data` into the region at `offset` (the consumer writing its own memory).
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<(), DatError> {
        self.pz
            .ia
            .mem
            .write_local(self.region.lkey, self.region.addr + offset, data)
            .map_err(|_| DatError::InvalidParameter("outside the LMR"))
    }

    /// Copies `len` bytes at `offset` out of the region.
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>, DatError> {
        let mut out = vec![0; len];
        self.pz
            .ia
            .mem
            .read_local(self.region.lkey, self.region.addr + offset, &mut out)
            .map_err(|_| DatError::InvalidParameter("outside the LMR"))?;
        Ok(out)
    }

    /// Frees the region; refused (DAT_INVALID_STATE) while a transmit still holds it.
    pub fn free(self) -> Result<(), Refused<Lmr>> {
        match self.pz.ia.mem.try_deregister(self.region.lkey) {
            Ok(()) => {
                self.forget();
                Ok(())
            }
            Err(e) => Err(Refused {
                object: self,
                error: DatError::InvalidState(e.to_string()),
            }),
        }
    }

    fn forget(mut self) {
        self.region.lkey = 0;
    }
}

impl Drop for Lmr {
    fn drop(&mut self) {
        if self.region.lkey != 0 {
            // Waits for accesses in flight, then no core touches the memory again.
            let _ = self.pz.ia.mem.deregister(self.region.lkey);
        }
    }
}
