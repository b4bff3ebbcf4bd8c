//! Random register / deregister / invalidate / access sequences against a simple model of
//! IBTA vol. 1 §10.6 checking: the table must give the model's result for every step, and
//! successful reads must return the model's bytes.

use dpdk_roce::engine::deregister::Deregister;
use dpdk_roce::mem::access::{Access, AtomicOp, KeyKind, MemError, MemRef};
use dpdk_roce::mem::{MrTable, Pz, Region};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Register {
        len: usize,
        rights: u32,
        pz: usize,
    },
    Deregister(usize),
    Invalidate {
        which: usize,
        pz: usize,
    },
    Write {
        which: usize,
        remote: bool,
        pz: usize,
        off: i64,
        len: u32,
        byte: u8,
    },
    Read {
        which: usize,
        remote: bool,
        pz: usize,
        off: i64,
        len: u32,
    },
    Atomic {
        which: usize,
        pz: usize,
        off: i64,
        add: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0usize..48, 0u32..32, 0usize..2).prop_map(|(len, rights, pz)| Op::Register {
            len,
            rights,
            pz
        }),
        (0usize..16).prop_map(Op::Deregister),
        (0usize..16, 0usize..2).prop_map(|(which, pz)| Op::Invalidate { which, pz }),
        (
            0usize..16,
            any::<bool>(),
            0usize..2,
            -2i64..50,
            0u32..20,
            any::<u8>()
        )
            .prop_map(|(which, remote, pz, off, len, byte)| Op::Write {
                which,
                remote,
                pz,
                off,
                len,
                byte
            }),
        (0usize..16, any::<bool>(), 0usize..2, -2i64..50, 0u32..20).prop_map(
            |(which, remote, pz, off, len)| Op::Read {
                which,
                remote,
                pz,
                off,
                len
            }
        ),
        (0usize..16, 0usize..2, -2i64..50, any::<u64>()).prop_map(|(which, pz, off, add)| {
            Op::Atomic {
                which,
                pz,
                off,
                add,
            }
        }),
    ]
}

struct ModelRegion {
    region: Region,
    access: Access,
    live: bool,
    rkey_valid: bool,
    bytes: Vec<u8>,
}

impl ModelRegion {
    fn check(
        &self,
        kind: KeyKind,
        pz: Pz,
        addr: u64,
        len: u32,
        need: Access,
    ) -> Result<usize, MemError> {
        if !self.live || (kind == KeyKind::Remote && !self.rkey_valid) {
            return Err(MemError::InvalidKey);
        }
        if pz != self.region.pz {
            return Err(MemError::PdMismatch);
        }
        let start = addr as i128 - self.region.addr as i128;
        if start < 0 || start + i128::from(len) > self.bytes.len() as i128 {
            return Err(MemError::OutOfBounds);
        }
        let mut need = need;
        need.remove(Access::LOCAL_READ);
        let allowed = match kind {
            KeyKind::Local => Access::LOCAL_WRITE,
            KeyKind::Remote => Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC,
        };
        if !allowed.contains(need) || !self.access.contains(need) {
            return Err(MemError::AccessDenied);
        }
        Ok(start as usize)
    }
}

fn addr_at(r: &Region, off: i64) -> u64 {
    r.addr.wrapping_add_signed(off)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]
    #[test]
    fn table_matches_model(ops in proptest::collection::vec(op(), 1..60)) {
        let table = MrTable::new(4);
        let pzs = [table.create_pz(), table.create_pz()];
        let mut model: Vec<ModelRegion> = Vec::new();
        for op in ops {
            match op {
                Op::Register { len, rights, pz } => {
                    let access = Access::from_bits_truncate(rights);
                    let live = model.iter().filter(|m| m.live).count();
                    match table.register_alloc(pzs[pz], len, 8, access) {
                        Ok(region) => {
                            prop_assert!(live < 4);
                            prop_assert!(model.iter().all(|m| m.region.lkey != region.lkey), "key reused");
                            model.push(ModelRegion { region, access, live: true, rkey_valid: true, bytes: vec![0; len] });
                        }
                        Err(e) => {
                            prop_assert_eq!(live, 4, "only a full table refuses: {:?}", e);
                        }
                    }
                }
                Op::Deregister(which) => {
                    if let Some(m) = model.get_mut(which) {
                        let got = table.deregister(m.region.lkey);
                        prop_assert_eq!(got.is_ok(), m.live);
                        m.live = false;
                    }
                }
                Op::Invalidate { which, pz } => {
                    if let Some(m) = model.get_mut(which) {
                        let want = if !m.live || !m.rkey_valid {
                            Err(MemError::InvalidKey)
                        } else if pzs[pz] != m.region.pz {
                            Err(MemError::PdMismatch)
                        } else {
                            // A registered region (not a memory window) cannot have its
                            // R_Key invalidated (IBTA vol. 1 §10.6.7).
                            Err(MemError::AccessDenied)
                        };
                        prop_assert_eq!(table.invalidate(pzs[pz].id(), m.region.rkey), want);
                        if want.is_ok() {
                            m.rkey_valid = false;
                        }
                    }
                }
                Op::Write { which, remote, pz, off, len, byte } => {
                    if let Some(m) = model.get_mut(which) {
                        let (kind, key, need) = if remote {
                            (KeyKind::Remote, m.region.rkey, Access::REMOTE_WRITE)
                        } else {
                            (KeyKind::Local, m.region.lkey, Access::LOCAL_WRITE)
                        };
                        let addr = addr_at(&m.region, off);
                        let r = MemRef { kind, pd: pzs[pz].id(), key, addr, len };
                        let want = m.check(kind, pzs[pz], addr, len, need);
                        let got = table.write(&r, need, &vec![byte; len as usize]);
                        prop_assert_eq!(got, want.map(|_| ()));
                        if let Ok(start) = want {
                            m.bytes[start..start + len as usize].fill(byte);
                        }
                    }
                }
                Op::Read { which, remote, pz, off, len } => {
                    if let Some(m) = model.get(which) {
                        let (kind, key, need) = if remote {
                            (KeyKind::Remote, m.region.rkey, Access::REMOTE_READ)
                        } else {
                            (KeyKind::Local, m.region.lkey, Access::LOCAL_READ)
                        };
                        let addr = addr_at(&m.region, off);
                        let r = MemRef { kind, pd: pzs[pz].id(), key, addr, len };
                        let want = m.check(kind, pzs[pz], addr, len, need);
                        let mut out = vec![0u8; len as usize];
                        let got = table.read(&r, need, &mut out);
                        prop_assert_eq!(got, want.map(|_| ()));
                        if let Ok(start) = want {
                            prop_assert_eq!(&out[..], &m.bytes[start..start + len as usize]);
                        }
                    }
                }
                Op::Atomic { which, pz, off, add } => {
                    if let Some(m) = model.get_mut(which) {
                        let addr = addr_at(&m.region, off);
                        let r = MemRef { kind: KeyKind::Remote, pd: pzs[pz].id(), key: m.region.rkey, addr, len: 8 };
                        let want = m.check(KeyKind::Remote, pzs[pz], addr, 8, Access::REMOTE_ATOMIC)
                            .and_then(|s| if addr.is_multiple_of(8) { Ok(s) } else { Err(MemError::Misaligned) });
                        let got = table.atomic(&r, AtomicOp::FetchAdd { add });
                        match want {
                            Ok(s) => {
                                let mut w = [0u8; 8];
                                w.copy_from_slice(&m.bytes[s..s + 8]);
                                let orig = u64::from_ne_bytes(w);
                                prop_assert_eq!(got, Ok(orig));
                                m.bytes[s..s + 8].copy_from_slice(&orig.wrapping_add(add).to_ne_bytes());
                            }
                            Err(e) => prop_assert_eq!(got, Err(e)),
                        }
                    }
                }
            }
        }
        for m in model.iter().filter(|m| m.live) {
            prop_assert_eq!(table.deregister(m.region.lkey), Ok(()));
        }
        prop_assert_eq!(table.live_regions(), 0);
    }
}
