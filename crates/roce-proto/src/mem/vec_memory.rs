//! `VecMemory`: the `Memory` trait over plain `Vec<u8>` regions, for tests and the in-memory
//! harness. Every access is checked for key, protection domain, bounds (overflow-safe) and
//! rights (IBTA vol. 1 §10.6), and atomics for 8-byte alignment (§9.4.5).
//!
//! Keys: bits 30:8 name the slot (+1), bits 7:0 its generation, bit 31 is set in R_Keys and clear
//! in L_Keys. Deregistering bumps the slot's generation, so a freed key never matches again; a
//! slot whose generation would wrap is retired.

use crate::mem::access::{Access, AtomicOp, KeyKind, MemError, MemRef, Memory};

const RKEY_BIT: u32 = 0x8000_0000;
const MAX_SLOTS: usize = (1 << 23) - 1;

/// A registered region as the owner sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub lkey: u32,
    pub rkey: u32,
    /// Base virtual address.
    pub addr: u64,
    pub len: u64,
}

impl Region {
    /// No region: its keys match nothing.
    pub const NONE: Region = Region {
        lkey: 0,
        rkey: RKEY_BIT,
        addr: 0,
        len: 0,
    };
}

#[derive(Debug)]
struct Slot {
    gen: u8,
    live: Option<Live>,
    retired: bool,
}

#[derive(Debug)]
struct Live {
    pd: u32,
    access: Access,
    addr: u64,
    rkey_valid: bool,
    data: Vec<u8>,
}

/// Registered memory over vectors.
#[derive(Debug)]
pub struct VecMemory {
    slots: Vec<Slot>,
    next_addr: u64,
}

impl Default for VecMemory {
    fn default() -> Self {
        Self::new()
    }
}

impl VecMemory {
    /// No regions yet; base addresses start at 0x1000_0000 and regions never overlap.
    pub fn new() -> Self {
        VecMemory {
            slots: Vec::new(),
            next_addr: 0x1000_0000,
        }
    }

    /// Registers `len` zeroed bytes in protection domain `pd` with `access` rights.
    /// Local read access is always granted. When the key space or the address space is
    /// exhausted the returned region has `len` 0 and keys that match nothing (`Region::NONE`).
    pub fn register(&mut self, pd: u32, len: usize, access: Access) -> Region {
        self.try_register(pd, len, access).unwrap_or(Region::NONE)
    }

    /// `register`, or `None` when the key space or the address space is exhausted.
    pub fn try_register(&mut self, pd: u32, len: usize, access: Access) -> Option<Region> {
        let idx = match self
            .slots
            .iter()
            .position(|s| s.live.is_none() && !s.retired)
        {
            Some(i) => i,
            None => {
                if self.slots.len() >= MAX_SLOTS {
                    return None;
                }
                self.slots.push(Slot {
                    gen: 0,
                    live: None,
                    retired: false,
                });
                self.slots.len() - 1
            }
        };
        let addr = self.next_addr;
        // Keep a guard gap between regions and page alignment.
        let span = (len as u64).checked_add(0x1fff)? & !0xfff;
        self.next_addr = self.next_addr.checked_add(span)?;
        let slot = &mut self.slots[idx];
        slot.live = Some(Live {
            pd,
            access,
            addr,
            rkey_valid: true,
            data: vec![0; len],
        });
        let lkey = (((idx as u32) + 1) << 8) | u32::from(slot.gen);
        Some(Region {
            lkey,
            rkey: lkey | RKEY_BIT,
            addr,
            len: len as u64,
        })
    }

    /// Frees a region by its L_Key (its R_Key dies with it).
    pub fn deregister(&mut self, lkey: u32) -> Result<(), MemError> {
        let idx = self.slot_of(lkey & !RKEY_BIT).ok_or(MemError::InvalidKey)?;
        let slot = &mut self.slots[idx];
        slot.live = None;
        if slot.gen == u8::MAX {
            slot.retired = true;
        } else {
            slot.gen += 1;
        }
        Ok(())
    }

    /// The bytes of a live region by L_Key.
    pub fn bytes(&self, lkey: u32) -> Option<&[u8]> {
        let idx = self.slot_of(lkey)?;
        self.slots[idx].live.as_ref().map(|l| &l.data[..])
    }

    /// The bytes of a live region by L_Key, mutable.
    pub fn bytes_mut(&mut self, lkey: u32) -> Option<&mut [u8]> {
        let idx = self.slot_of(lkey)?;
        self.slots[idx].live.as_mut().map(|l| &mut l.data[..])
    }

    fn slot_of(&self, key: u32) -> Option<usize> {
        let key = key & !RKEY_BIT;
        let idx = ((key >> 8) as usize).checked_sub(1)?;
        let slot = self.slots.get(idx)?;
        if slot.live.is_some() && slot.gen == (key & 0xff) as u8 {
            Some(idx)
        } else {
            None
        }
    }

    /// Finds the region and the byte range inside it for `r`, checking everything.
    fn locate(
        &self,
        r: &MemRef,
        access: Access,
    ) -> Result<(usize, core::ops::Range<usize>), MemError> {
        let is_rkey = r.key & RKEY_BIT != 0;
        if is_rkey != (r.kind == KeyKind::Remote) {
            return Err(MemError::InvalidKey);
        }
        let idx = self.slot_of(r.key).ok_or(MemError::InvalidKey)?;
        let live = self.slots[idx].live.as_ref().ok_or(MemError::InvalidKey)?;
        if r.kind == KeyKind::Remote && !live.rkey_valid {
            return Err(MemError::InvalidKey);
        }
        if live.pd != r.pd {
            return Err(MemError::PdMismatch);
        }
        let start = r.addr.checked_sub(live.addr).ok_or(MemError::OutOfBounds)?;
        let end = start
            .checked_add(u64::from(r.len))
            .ok_or(MemError::OutOfBounds)?;
        if end > live.data.len() as u64 {
            return Err(MemError::OutOfBounds);
        }
        let mut need = access;
        need.remove(Access::LOCAL_READ);
        let allowed = match r.kind {
            KeyKind::Local => Access::LOCAL_WRITE,
            KeyKind::Remote => Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
        };
        if !allowed.contains(need) || !live.access.contains(need) {
            return Err(MemError::AccessDenied);
        }
        Ok((idx, start as usize..end as usize))
    }

    fn data(&self, idx: usize) -> &[u8] {
        self.slots[idx].live.as_ref().map_or(&[], |l| &l.data[..])
    }
}

impl Memory for VecMemory {
    fn check(&self, r: &MemRef, access: Access) -> Result<(), MemError> {
        self.locate(r, access).map(|_| ())
    }

    fn read(&self, r: &MemRef, access: Access, out: &mut [u8]) -> Result<(), MemError> {
        if out.len() != r.len as usize {
            return Err(MemError::OutOfBounds);
        }
        let (idx, range) = self.locate(r, access)?;
        out.copy_from_slice(&self.data(idx)[range]);
        Ok(())
    }

    fn write(&mut self, r: &MemRef, access: Access, data: &[u8]) -> Result<(), MemError> {
        if data.len() != r.len as usize {
            return Err(MemError::OutOfBounds);
        }
        let (idx, range) = self.locate(r, access)?;
        let live = self.slots[idx].live.as_mut().ok_or(MemError::InvalidKey)?;
        live.data[range].copy_from_slice(data);
        Ok(())
    }

    fn atomic(&mut self, r: &MemRef, op: AtomicOp) -> Result<u64, MemError> {
        if r.len != 8 {
            return Err(MemError::OutOfBounds);
        }
        let (idx, range) = self.locate(r, Access::REMOTE_ATOMIC)?;
        if !r.addr.is_multiple_of(8) {
            return Err(MemError::Misaligned);
        }
        let live = self.slots[idx].live.as_mut().ok_or(MemError::InvalidKey)?;
        let word = &mut live.data[range];
        let mut b = [0u8; 8];
        b.copy_from_slice(word);
        let orig = u64::from_ne_bytes(b);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        word.copy_from_slice(&new.to_ne_bytes());
        Ok(orig)
    }

    fn invalidate(&mut self, pd: u32, rkey: u32) -> Result<(), MemError> {
        if rkey & RKEY_BIT == 0 {
            return Err(MemError::InvalidKey);
        }
        let idx = self.slot_of(rkey).ok_or(MemError::InvalidKey)?;
        let live = self.slots[idx].live.as_mut().ok_or(MemError::InvalidKey)?;
        if live.pd != pd {
            return Err(MemError::PdMismatch);
        }
        if !live.rkey_valid {
            return Err(MemError::InvalidKey);
        }
        live.rkey_valid = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mr(kind: KeyKind, pd: u32, key: u32, addr: u64, len: u32) -> MemRef {
        MemRef {
            kind,
            pd,
            key,
            addr,
            len,
        }
    }

    #[test]
    fn checks_key_pd_bounds_rights() {
        let mut m = VecMemory::new();
        let r = m.register(1, 64, Access::LOCAL_WRITE | Access::REMOTE_READ);
        let ok = mr(KeyKind::Remote, 1, r.rkey, r.addr + 8, 8);
        assert_eq!(m.check(&ok, Access::REMOTE_READ), Ok(()));
        assert_eq!(
            m.check(&ok, Access::REMOTE_WRITE),
            Err(MemError::AccessDenied)
        );
        let wrong_pd = MemRef { pd: 2, ..ok };
        assert_eq!(
            m.check(&wrong_pd, Access::REMOTE_READ),
            Err(MemError::PdMismatch)
        );
        let lkey_as_rkey = MemRef { key: r.lkey, ..ok };
        assert_eq!(
            m.check(&lkey_as_rkey, Access::REMOTE_READ),
            Err(MemError::InvalidKey)
        );
        let oob = mr(KeyKind::Remote, 1, r.rkey, r.addr + 60, 8);
        assert_eq!(
            m.check(&oob, Access::REMOTE_READ),
            Err(MemError::OutOfBounds)
        );
        let below = mr(KeyKind::Remote, 1, r.rkey, r.addr - 1, 1);
        assert_eq!(
            m.check(&below, Access::REMOTE_READ),
            Err(MemError::OutOfBounds)
        );
        let wrap = mr(KeyKind::Remote, 1, r.rkey, u64::MAX - 2, 8);
        assert_eq!(
            m.check(&wrap, Access::REMOTE_READ),
            Err(MemError::OutOfBounds)
        );
        let local = mr(KeyKind::Local, 1, r.lkey, r.addr, 64);
        m.write(&local, Access::LOCAL_WRITE, &[7; 64]).unwrap();
        assert_eq!(m.bytes(r.lkey).unwrap(), &[7; 64][..]);
    }

    #[test]
    fn freed_and_invalidated_keys_never_match() {
        let mut m = VecMemory::new();
        let a = m.register(1, 16, Access::REMOTE_WRITE);
        m.deregister(a.lkey).unwrap();
        let b = m.register(1, 16, Access::REMOTE_WRITE);
        assert_ne!(a.lkey, b.lkey);
        assert!(m.bytes(a.lkey).is_none());
        let stale = mr(KeyKind::Remote, 1, a.rkey, b.addr, 4);
        assert_eq!(
            m.check(&stale, Access::REMOTE_WRITE),
            Err(MemError::InvalidKey)
        );
        let fresh = mr(KeyKind::Remote, 1, b.rkey, b.addr, 4);
        assert_eq!(m.check(&fresh, Access::REMOTE_WRITE), Ok(()));
        m.invalidate(1, b.rkey).unwrap();
        assert_eq!(
            m.check(&fresh, Access::REMOTE_WRITE),
            Err(MemError::InvalidKey)
        );
        assert_eq!(m.invalidate(1, b.rkey), Err(MemError::InvalidKey));
    }

    #[test]
    fn exhausted_address_space_gives_a_dead_region() {
        let mut m = VecMemory::new();
        m.next_addr = u64::MAX - 10;
        let r = m.register(1, 64, Access::REMOTE_READ);
        assert_eq!(r, Region::NONE);
        assert!(m.bytes(r.lkey).is_none());
        let any = mr(KeyKind::Remote, 1, r.rkey, 0, 0);
        assert_eq!(m.check(&any, Access::empty()), Err(MemError::InvalidKey));
    }

    #[test]
    fn atomics_need_alignment_and_rights() {
        let mut m = VecMemory::new();
        let r = m.register(3, 32, Access::REMOTE_ATOMIC);
        let w = mr(KeyKind::Remote, 3, r.rkey, r.addr + 8, 8);
        assert_eq!(m.atomic(&w, AtomicOp::FetchAdd { add: 5 }), Ok(0));
        assert_eq!(m.atomic(&w, AtomicOp::FetchAdd { add: 5 }), Ok(5));
        assert_eq!(
            m.atomic(
                &w,
                AtomicOp::CompareSwap {
                    compare: 10,
                    swap: 99
                }
            ),
            Ok(10)
        );
        assert_eq!(
            m.atomic(
                &w,
                AtomicOp::CompareSwap {
                    compare: 10,
                    swap: 1
                }
            ),
            Ok(99)
        );
        let mis = mr(KeyKind::Remote, 3, r.rkey, r.addr + 4, 8);
        assert_eq!(
            m.atomic(&mis, AtomicOp::FetchAdd { add: 1 }),
            Err(MemError::Misaligned)
        );
        let r2 = m.register(3, 32, Access::REMOTE_READ);
        let nr = mr(KeyKind::Remote, 3, r2.rkey, r2.addr, 8);
        assert_eq!(
            m.atomic(&nr, AtomicOp::FetchAdd { add: 1 }),
            Err(MemError::AccessDenied)
        );
    }
}
