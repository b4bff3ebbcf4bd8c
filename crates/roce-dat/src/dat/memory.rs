//! The registered memory of an IA: one lock-free [`MrTable`] shared by the consumer (LMR
//! create/free, local reads and writes) and every shard of the engine (checked accesses).

use crate::mem::access::{Access, AtomicOp, MemError, MemRef, Memory};
use crate::mem::MrTable;
use std::sync::Arc;

/// An `MrTable` shared between the consumer and the shards.
#[derive(Clone, Debug)]
pub struct SharedMemory(pub Arc<MrTable>);

impl Memory for SharedMemory {
    fn check(&self, r: &MemRef, access: Access) -> Result<(), MemError> {
        self.0.check(r, access)
    }
    fn read(&self, r: &MemRef, access: Access, out: &mut [u8]) -> Result<(), MemError> {
        self.0.read(r, access, out)
    }
    fn write(&mut self, r: &MemRef, access: Access, data: &[u8]) -> Result<(), MemError> {
        self.0.write(r, access, data)
    }
    fn atomic(&mut self, r: &MemRef, op: AtomicOp) -> Result<u64, MemError> {
        self.0.atomic(r, op)
    }
    fn invalidate(&mut self, pd: u32, rkey: u32) -> Result<(), MemError> {
        self.0.invalidate(pd, rkey)
    }
    fn rkey_usable_on(&self, rkey: u32, qpn: u32) -> bool {
        self.0.rkey_usable_on(rkey, qpn)
    }
    fn remote_write_on(&mut self, r: &MemRef, qpn: u32, data: &[u8]) -> Result<(), MemError> {
        self.0.remote_write_on(r, qpn, data)
    }
}
