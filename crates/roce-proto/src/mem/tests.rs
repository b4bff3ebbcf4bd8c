use super::table::DEREGISTER_WAIT;
use super::*;
use crate::mem::access::{Access, AtomicOp, KeyKind, MemError, MemRef};

/// A wait bounded by `limit` on the process clock, as the engine bounds `deregister` (tests
/// may read the clock; the crate does not).
fn within(limit: std::time::Duration) -> impl FnMut() -> bool {
    let mut started: Option<std::time::Instant> = None;
    move || {
        started
            .get_or_insert_with(std::time::Instant::now)
            .elapsed()
            >= limit
    }
}

fn mr(kind: KeyKind, pz: Pz, key: u32, addr: u64, len: u32) -> MemRef {
    MemRef {
        kind,
        pd: pz.id(),
        key,
        addr,
        len,
    }
}

#[test]
fn key_pz_bounds_rights_in_order() {
    let t = MrTable::new(16);
    let pz = t.create_pz();
    let other = t.create_pz();
    let r = t
        .register_alloc(pz, 64, 8, Access::LOCAL_WRITE | Access::REMOTE_READ)
        .unwrap();
    let ok = mr(KeyKind::Remote, pz, r.rkey, r.addr + 8, 8);
    assert_eq!(t.check(&ok, Access::REMOTE_READ), Ok(()));
    assert_eq!(
        t.check(&ok, Access::REMOTE_WRITE),
        Err(MemError::AccessDenied)
    );
    assert_eq!(
        t.check(
            &MemRef {
                pd: other.id(),
                ..ok
            },
            Access::REMOTE_READ
        ),
        Err(MemError::PdMismatch)
    );
    assert_eq!(
        t.check(&MemRef { key: r.lkey, ..ok }, Access::REMOTE_READ),
        Err(MemError::InvalidKey),
        "an L_Key is not an R_Key"
    );
    let as_local = mr(KeyKind::Local, pz, r.rkey, r.addr, 8);
    assert_eq!(
        t.check(&as_local, Access::empty()),
        Err(MemError::InvalidKey)
    );
    // Remote rights through a local key are never granted.
    let l = mr(KeyKind::Local, pz, r.lkey, r.addr, 8);
    assert_eq!(
        t.check(&l, Access::REMOTE_READ),
        Err(MemError::AccessDenied)
    );
    assert_eq!(t.check(&l, Access::LOCAL_READ), Ok(()));
    assert_eq!(t.check(&l, Access::LOCAL_WRITE), Ok(()));
    // PZ is checked before bounds, bounds before rights.
    let both = mr(KeyKind::Remote, other, r.rkey, r.addr + 60, 8);
    assert_eq!(
        t.check(&both, Access::REMOTE_WRITE),
        Err(MemError::PdMismatch)
    );
    let oob_and_rights = mr(KeyKind::Remote, pz, r.rkey, r.addr + 60, 8);
    assert_eq!(
        t.check(&oob_and_rights, Access::REMOTE_WRITE),
        Err(MemError::OutOfBounds)
    );
}

/// `local_pz` names a live region's PZ by its L_Key only: not by its R_Key, not after it is
/// deregistered, not for a slot registered again (a new generation).
#[test]
fn local_pz_of_live_local_keys_only() {
    let t = MrTable::new(1);
    let pz = t.create_pz();
    let other = t.create_pz();
    let r = t.register_alloc(pz, 64, 8, Access::REMOTE_READ).unwrap();
    assert_eq!(t.local_pz(r.lkey), Some(pz));
    assert_eq!(t.local_pz(r.rkey), None, "an R_Key");
    t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
    assert_eq!(t.local_pz(r.lkey), None, "deregistered");
    let again = t.register_alloc(other, 64, 8, Access::REMOTE_READ).unwrap();
    assert_eq!(t.local_pz(r.lkey), None, "the old key of a reused slot");
    assert_eq!(t.local_pz(again.lkey), Some(other));
}

#[test]
fn bounds_at_exact_edges_and_wrapping() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let r = t.register_alloc(pz, 64, 8, Access::REMOTE_READ).unwrap();
    let c = |addr: u64, len: u32| {
        t.check(
            &mr(KeyKind::Remote, pz, r.rkey, addr, len),
            Access::REMOTE_READ,
        )
    };
    assert_eq!(c(r.addr, 64), Ok(()), "whole region");
    assert_eq!(c(r.addr + 63, 1), Ok(()), "last byte");
    assert_eq!(c(r.addr + 64, 0), Ok(()), "empty at the end");
    assert_eq!(c(r.addr, 65), Err(MemError::OutOfBounds));
    assert_eq!(c(r.addr + 64, 1), Err(MemError::OutOfBounds));
    assert_eq!(c(r.addr + 1, 64), Err(MemError::OutOfBounds));
    assert_eq!(c(r.addr - 1, 1), Err(MemError::OutOfBounds));
    assert_eq!(c(r.addr - 1, 0), Err(MemError::OutOfBounds));
    assert_eq!(c(u64::MAX, u32::MAX), Err(MemError::OutOfBounds));
    assert_eq!(
        c(u64::MAX - 2, 8),
        Err(MemError::OutOfBounds),
        "addr + len wraps"
    );
    assert_eq!(c(0, 1), Err(MemError::OutOfBounds));
    let mut buf = [0u8; 4];
    assert_eq!(
        t.read_local(r.lkey, r.addr + 61, &mut buf),
        Err(MemError::OutOfBounds)
    );
    assert_eq!(t.read_local(r.lkey, r.addr + 60, &mut buf), Ok(()));
    assert_eq!(
        t.write_local(r.lkey, u64::MAX - 1, &buf),
        Err(MemError::OutOfBounds)
    );
}

#[test]
fn read_write_roundtrip_and_length_mismatch() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let r = t
        .register_bytes(
            pz,
            &[1, 2, 3, 4, 5, 6, 7, 8],
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    let mut out = [0u8; 3];
    t.read(
        &mr(KeyKind::Local, pz, r.lkey, r.addr + 2, 3),
        Access::LOCAL_READ,
        &mut out,
    )
    .unwrap();
    assert_eq!(out, [3, 4, 5]);
    let m = &t;
    m.write(
        &mr(KeyKind::Remote, pz, r.rkey, r.addr + 6, 2),
        Access::REMOTE_WRITE,
        &[9, 9],
    )
    .unwrap();
    let mut all = [0u8; 8];
    t.read_local(r.lkey, r.addr, &mut all).unwrap();
    assert_eq!(all, [1, 2, 3, 4, 5, 6, 9, 9]);
    assert_eq!(
        m.write(
            &mr(KeyKind::Remote, pz, r.rkey, r.addr, 3),
            Access::REMOTE_WRITE,
            &[0; 2]
        ),
        Err(MemError::OutOfBounds),
        "data length must equal r.len"
    );
}

#[test]
fn stale_keys_never_match_after_free_and_reuse() {
    let t = MrTable::new(1);
    let pz = t.create_pz();
    let a = t.register_alloc(pz, 16, 8, Access::REMOTE_WRITE).unwrap();
    t.deregister_until(a.lkey, within(DEREGISTER_WAIT)).unwrap();
    assert_eq!(
        t.deregister_until(a.lkey, within(DEREGISTER_WAIT)),
        Err(MrError::InvalidKey)
    );
    let b = t.register_alloc(pz, 16, 8, Access::REMOTE_WRITE).unwrap();
    assert_ne!(a.lkey, b.lkey, "same slot, new generation");
    assert_eq!(t.query(a.lkey), Err(MrError::InvalidKey));
    let stale = mr(KeyKind::Remote, pz, a.rkey, b.addr, 4);
    assert_eq!(
        t.check(&stale, Access::REMOTE_WRITE),
        Err(MemError::InvalidKey)
    );
    let fresh = mr(KeyKind::Remote, pz, b.rkey, b.addr, 4);
    assert_eq!(t.check(&fresh, Access::REMOTE_WRITE), Ok(()));
    assert_eq!(
        t.register_alloc(pz, 1, 8, Access::empty()),
        Err(MrError::TableFull)
    );
}

#[test]
fn key_layout_leaves_generation_bits() {
    let t = MrTable::new(4096);
    assert_eq!(t.generations_per_slot(), 1 << 18);
    let one = MrTable::new(1);
    assert_eq!(one.generations_per_slot(), 1 << 30);
}

/// Keys are not guessable from the order of registrations: two tables (two secrets) give
/// the same slots other keys, and a slot's keys do not count up.
#[test]
fn keys_depend_on_the_tables_secret() {
    let keys = |t: &MrTable| {
        let pz = t.create_pz();
        (0..4)
            .map(|_| {
                let r = t.register_alloc(pz, 8, 8, Access::REMOTE_WRITE).unwrap();
                t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
                r.rkey
            })
            .collect::<Vec<u32>>()
    };
    let (a, b) = (keys(&MrTable::new(64)), keys(&MrTable::new(64)));
    assert_ne!(a, b, "the same keys from two tables");
    assert!(a.windows(2).any(|w| w[1] != w[0] + (1 << 7)), "{a:x?}");
}

/// A freed key stays dead for a whole cycle of its slot (the quarantine), then the slot's
/// keys come around again instead of the slot retiring: the table never runs out.
#[test]
fn a_slots_keys_come_around_after_its_cycle() {
    let t = MrTable::with_key_cycle(1, 5);
    let pz = t.create_pz();
    let mut seen = Vec::new();
    for _ in 0..5 {
        let r = t.register_alloc(pz, 8, 8, Access::empty()).unwrap();
        assert!(!seen.contains(&r.lkey), "a key repeated within the cycle");
        seen.push(r.lkey);
        t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
        assert_eq!(
            t.query(r.lkey),
            Err(MrError::InvalidKey),
            "a freed key is dead"
        );
    }
    let again = t.register_alloc(pz, 8, 8, Access::empty()).unwrap();
    assert_eq!(again.lkey, seen[0]);
    assert_eq!(t.retired_slots(), 0);
}

#[test]
fn slots_retire_when_generations_run_out() {
    let small = MrTable::with_generation_limit(1, 5);
    let pz = small.create_pz();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..5 {
        let r = small.register_alloc(pz, 8, 8, Access::empty()).unwrap();
        assert!(seen.insert(r.lkey), "key repeated");
        assert!(seen.insert(r.rkey), "key repeated");
        small
            .deregister_until(r.lkey, within(DEREGISTER_WAIT))
            .unwrap();
    }
    assert_eq!(small.retired_slots(), 1);
    assert_eq!(
        small.register_alloc(pz, 8, 8, Access::empty()),
        Err(MrError::TableFull)
    );
    for k in seen {
        assert_eq!(small.query(k & !RKEY_BIT), Err(MrError::InvalidKey));
    }
}

#[test]
fn the_memory_trait_object_is_the_same_checked_table() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let r = t
        .register_alloc(pz, 16, 8, Access::REMOTE_WRITE | Access::REMOTE_ATOMIC)
        .unwrap();
    let mut view = &t;
    let m: &mut dyn crate::mem::access::Memory = &mut view;
    let w = mr(KeyKind::Remote, pz, r.rkey, r.addr, 8);
    m.write(&w, Access::REMOTE_WRITE, &7u64.to_ne_bytes())
        .unwrap();
    assert_eq!(m.atomic(&w, AtomicOp::FetchAdd { add: 1 }), Ok(7));
    let mut out = [0u8; 8];
    m.read(
        &mr(KeyKind::Local, pz, r.lkey, r.addr, 8),
        Access::LOCAL_READ,
        &mut out,
    )
    .unwrap();
    assert_eq!(u64::from_ne_bytes(out), 8);
    let win = t
        .bind_window(r.lkey, pz.id(), r.addr, 8, Access::REMOTE_WRITE)
        .unwrap();
    let ww = mr(KeyKind::Remote, pz, win.rkey, r.addr, 8);
    m.invalidate(pz.id(), win.rkey).unwrap();
    assert_eq!(
        m.check(&ww, Access::REMOTE_WRITE),
        Err(MemError::InvalidKey)
    );
    assert_eq!(
        m.check(&w, Access::REMOTE_WRITE),
        Ok(()),
        "the region's key lives"
    );
}

#[test]
fn invalidate_kills_rkey_not_region() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let other = t.create_pz();
    let parent = t
        .register_alloc(pz, 64, 8, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    // A registered region's R_Key cannot be invalidated remotely (IBTA vol. 1 §10.6.7).
    assert_eq!(
        t.invalidate(pz.id(), parent.rkey),
        Err(MemError::AccessDenied)
    );
    let r = t
        .bind_window(parent.lkey, pz.id(), parent.addr, 32, Access::REMOTE_WRITE)
        .unwrap();
    let m = &t;
    assert_eq!(m.invalidate(other.id(), r.rkey), Err(MemError::PdMismatch));
    assert_eq!(m.invalidate(pz.id(), r.lkey), Err(MemError::InvalidKey));
    assert_eq!(m.invalidate(pz.id(), r.rkey), Ok(()));
    assert_eq!(
        m.invalidate(pz.id(), r.rkey),
        Err(MemError::InvalidKey),
        "twice"
    );
    let rem = mr(KeyKind::Remote, pz, r.rkey, r.addr, 4);
    assert_eq!(
        t.check(&rem, Access::REMOTE_WRITE),
        Err(MemError::InvalidKey)
    );
    assert_eq!(t.query(r.lkey).unwrap().rkey, None);
    assert!(
        t.query(r.lkey).is_ok(),
        "the window itself stays until deregistered"
    );
    let parent_rem = mr(KeyKind::Remote, pz, parent.rkey, parent.addr, 4);
    assert_eq!(t.check(&parent_rem, Access::REMOTE_WRITE), Ok(()));
    t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
    t.deregister_until(parent.lkey, within(DEREGISTER_WAIT))
        .unwrap();
}

#[test]
fn atomics_alignment_rights_and_values() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let r = t.register_alloc(pz, 32, 8, Access::REMOTE_ATOMIC).unwrap();
    let m = &t;
    let w = mr(KeyKind::Remote, pz, r.rkey, r.addr + 8, 8);
    assert_eq!(m.atomic(&w, AtomicOp::FetchAdd { add: 5 }), Ok(0));
    assert_eq!(m.atomic(&w, AtomicOp::FetchAdd { add: u64::MAX }), Ok(5));
    assert_eq!(
        m.atomic(
            &w,
            AtomicOp::CompareSwap {
                compare: 4,
                swap: 99
            }
        ),
        Ok(4)
    );
    assert_eq!(
        m.atomic(
            &w,
            AtomicOp::CompareSwap {
                compare: 4,
                swap: 1
            }
        ),
        Ok(99),
        "compare fails: value unchanged"
    );
    let mut out = [0u8; 8];
    t.read_local(r.lkey, r.addr + 8, &mut out).unwrap();
    assert_eq!(u64::from_ne_bytes(out), 99);
    for off in 1..8 {
        let mis = mr(KeyKind::Remote, pz, r.rkey, r.addr + off, 8);
        assert_eq!(
            m.atomic(&mis, AtomicOp::FetchAdd { add: 1 }),
            Err(MemError::Misaligned)
        );
    }
    let short = MemRef { len: 4, ..w };
    assert_eq!(
        m.atomic(&short, AtomicOp::FetchAdd { add: 1 }),
        Err(MemError::OutOfBounds)
    );
    let edge = mr(KeyKind::Remote, pz, r.rkey, r.addr + 32, 8);
    assert_eq!(
        m.atomic(&edge, AtomicOp::FetchAdd { add: 1 }),
        Err(MemError::OutOfBounds)
    );
    let r2 = t.register_alloc(pz, 32, 8, Access::REMOTE_READ).unwrap();
    let nr = mr(KeyKind::Remote, pz, r2.rkey, r2.addr, 8);
    assert_eq!(
        m.atomic(&nr, AtomicOp::FetchAdd { add: 1 }),
        Err(MemError::AccessDenied)
    );
}

/// A pin that is never released (a TX buffer a PMD keeps) makes deregistration fail with
/// `Busy` after its bound, the region registered and usable as before, not hang.
#[test]
fn deregistration_gives_up_on_a_pin_held_past_its_bound() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let r = t
        .register_alloc(pz, 64, 8, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let l = mr(KeyKind::Local, pz, r.lkey, r.addr, 16);
    let g = t.pin(&l, Access::LOCAL_READ).unwrap();
    let t0 = std::time::Instant::now();
    assert_eq!(
        t.deregister_until(r.lkey, within(std::time::Duration::from_millis(50))),
        Err(MrError::Busy)
    );
    assert!(t0.elapsed() >= std::time::Duration::from_millis(50));
    assert_eq!(t.check(&l, Access::LOCAL_WRITE), Ok(()), "usable again");
    let remote = mr(KeyKind::Remote, pz, r.rkey, r.addr, 16);
    assert_eq!(
        t.check(&remote, Access::REMOTE_WRITE),
        Ok(()),
        "its R_Key too"
    );
    drop(g);
    assert_eq!(t.deregister_until(r.lkey, within(DEREGISTER_WAIT)), Ok(()));
    assert_eq!(t.query(r.lkey), Err(MrError::InvalidKey));
}

#[test]
fn pins_block_try_deregister_and_deregister_waits() {
    let t = std::sync::Arc::new(MrTable::new(4));
    let pz = t.create_pz();
    let r = t.register_alloc(pz, 64, 8, Access::LOCAL_WRITE).unwrap();
    let l = mr(KeyKind::Local, pz, r.lkey, r.addr + 16, 16);
    let g = t.pin(&l, Access::LOCAL_READ).unwrap();
    assert_eq!(g.len(), 16);
    assert_eq!(g.as_ptr() as u64, r.addr + 16);
    assert_eq!(g.iova(), None, "heap memory has no IOVA");
    assert_eq!(t.query(r.lkey).unwrap().pins, 1);
    assert_eq!(t.try_deregister(r.lkey), Err(MrError::Busy));
    assert_eq!(
        t.check(&l, Access::LOCAL_WRITE),
        Ok(()),
        "Busy leaves it usable"
    );
    let tok = g.into_token();
    assert_eq!(t.try_deregister(r.lkey), Err(MrError::Busy));
    let t2 = t.clone();
    let lkey = r.lkey;
    let h = std::thread::spawn(move || t2.deregister_until(lkey, within(DEREGISTER_WAIT)));
    // Once deregister has begun the region is dying: no new access. Wait for that (the
    // thread's start is not ours to time).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while t.check(&l, Access::LOCAL_READ) != Err(MemError::InvalidKey) {
        assert!(
            std::time::Instant::now() < deadline,
            "deregister never began"
        );
        std::thread::yield_now();
    }
    // The pin is still held, so deregister cannot have returned.
    assert!(!h.is_finished(), "deregister must wait for the pin");
    t.unpin(tok);
    assert_eq!(h.join().unwrap(), Ok(()));
    assert_eq!(t.live_regions(), 0);
}

#[test]
#[should_panic(expected = "another MrTable")]
fn unpin_with_foreign_token_panics() {
    let a = MrTable::new(2);
    let b = MrTable::new(2);
    let pz = a.create_pz();
    let r = a.register_alloc(pz, 8, 8, Access::empty()).unwrap();
    let tok = a
        .pin(
            &mr(KeyKind::Local, pz, r.lkey, r.addr, 8),
            Access::LOCAL_READ,
        )
        .unwrap()
        .into_token();
    b.unpin(tok);
}

#[test]
fn pz_lifecycle() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    assert_eq!(
        t.register_alloc(Pz(999), 8, 8, Access::empty()),
        Err(MrError::InvalidPz)
    );
    let r = t.register_alloc(pz, 8, 8, Access::empty()).unwrap();
    assert_eq!(t.free_pz(pz), Err(MrError::PzInUse));
    t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
    assert_eq!(t.free_pz(pz), Ok(()));
    assert_eq!(t.free_pz(pz), Err(MrError::InvalidPz));
    assert_eq!(
        t.register_alloc(pz, 8, 8, Access::empty()),
        Err(MrError::InvalidPz)
    );
    assert_eq!(t.live_regions(), 0);
}

#[test]
fn raw_registration_reads_and_writes_consumer_memory() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let mut backing = vec![0u64; 4];
    let ptr = core::ptr::NonNull::new(backing.as_mut_ptr().cast::<u8>()).unwrap();
    // SAFETY: `backing` outlives the registration (deregistered below) and is not touched
    // through references until then.
    let r = unsafe { t.register_raw(pz, ptr, 32, Access::LOCAL_WRITE | Access::REMOTE_ATOMIC) }
        .unwrap();
    assert_eq!(r.addr, ptr.as_ptr() as u64);
    let info = t.query(r.lkey).unwrap();
    assert_eq!(info.backing, BackingKind::Virtual);
    assert_eq!(info.len, 32);
    assert_eq!(info.pz, pz);
    assert!(info
        .access
        .contains(Access::LOCAL_READ | Access::LOCAL_WRITE));
    let m = &t;
    let w = mr(KeyKind::Remote, pz, r.rkey, r.addr + 16, 8);
    m.atomic(&w, AtomicOp::FetchAdd { add: 41 }).unwrap();
    m.atomic(&w, AtomicOp::FetchAdd { add: 1 }).unwrap();
    t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
    assert_eq!(backing, vec![0, 0, 42, 0]);
    // SAFETY: a range whose end wraps the address space is refused before anything is touched.
    let wrap = unsafe {
        t.register_raw(
            pz,
            core::ptr::NonNull::dangling(),
            usize::MAX,
            Access::empty(),
        )
    };
    assert_eq!(wrap, Err(MrError::InvalidParameter));
}

#[test]
fn window_reaches_only_its_range_with_its_rights_and_pins_its_parent() {
    let t = MrTable::new(16);
    let pz = t.create_pz();
    let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    let p = t.register_alloc(pz, 256, 8, rw).unwrap();
    t.write_local(p.lkey, p.addr + 64, b"inside").unwrap();
    let w = t
        .bind_window(p.lkey, pz.id(), p.addr + 64, 32, Access::REMOTE_READ)
        .unwrap();
    assert_eq!(w.addr, p.addr + 64);
    let mut out = [0u8; 6];
    let inside = mr(KeyKind::Remote, pz, w.rkey, p.addr + 64, 6);
    t.read(&inside, Access::REMOTE_READ, &mut out).unwrap();
    assert_eq!(&out, b"inside", "the window aliases the parent's bytes");
    assert_eq!(
        t.check(&inside, Access::REMOTE_WRITE),
        Err(MemError::AccessDenied)
    );
    let before = mr(KeyKind::Remote, pz, w.rkey, p.addr + 63, 4);
    assert!(t.check(&before, Access::REMOTE_READ).is_err());
    // Rights the parent lacks, ranges outside it, local rights: refused.
    assert_eq!(
        t.bind_window(p.lkey, pz.id(), p.addr, 8, Access::REMOTE_ATOMIC),
        Err(MrError::InvalidParameter)
    );
    assert_eq!(
        t.bind_window(p.lkey, pz.id(), p.addr + 250, 8, Access::REMOTE_READ),
        Err(MrError::InvalidParameter)
    );
    assert_eq!(
        t.bind_window(p.lkey, pz.id(), p.addr, 8, Access::LOCAL_WRITE),
        Err(MrError::InvalidParameter)
    );
    // The parent is pinned while the window lives.
    assert_eq!(t.try_deregister(p.lkey), Err(MrError::Busy));
    t.deregister_until(w.lkey, within(DEREGISTER_WAIT)).unwrap();
    assert_eq!(
        t.check(&inside, Access::REMOTE_READ),
        Err(MemError::InvalidKey)
    );
    t.try_deregister(p.lkey).unwrap();
    assert_eq!(t.live_regions(), 0);
}

#[test]
fn a_window_bound_on_a_qp_serves_only_that_qp() {
    let t = MrTable::new(8);
    let pz = t.create_pz();
    let r = t
        .register_alloc(pz, 64, 8, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    let on_qp = t
        .bind_window_on_qp(r.lkey, pz.id(), r.addr, 32, Access::REMOTE_WRITE, 0x42)
        .unwrap();
    let any = t
        .bind_window(r.lkey, pz.id(), r.addr, 32, Access::REMOTE_WRITE)
        .unwrap();
    assert!(t.rkey_usable_on(on_qp.rkey, 0x42));
    assert!(!t.rkey_usable_on(on_qp.rkey, 0x43));
    assert!(t.rkey_usable_on(any.rkey, 0x43));
    assert!(t.rkey_usable_on(r.rkey, 0x43), "regions serve any QP");
    // A dead key is left to the access check (which refuses it).
    t.deregister_until(on_qp.lkey, within(DEREGISTER_WAIT))
        .unwrap();
    assert!(t.rkey_usable_on(on_qp.rkey, 0x43));
    let m: &dyn crate::mem::access::Memory = &&t;
    assert!(m.rkey_usable_on(any.rkey, 7));
    t.deregister_until(any.lkey, within(DEREGISTER_WAIT))
        .unwrap();
    t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
}

#[test]
fn a_remote_write_on_a_qp_checks_what_rkey_usable_on_and_write_check() {
    let t = MrTable::new(8);
    let pz = t.create_pz();
    let r = t
        .register_alloc(
            pz,
            64,
            8,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .unwrap();
    let on_qp = t
        .bind_window_on_qp(r.lkey, pz.id(), r.addr, 32, Access::REMOTE_WRITE, 0x42)
        .unwrap();
    let read_only = t
        .bind_window(r.lkey, pz.id(), r.addr, 32, Access::REMOTE_READ)
        .unwrap();
    let at = |key: u32, addr: u64, len: u32| MemRef {
        kind: KeyKind::Remote,
        pd: pz.id(),
        key,
        addr,
        len,
    };
    let mut m: &MrTable = &t;
    let mem: &mut dyn crate::mem::access::Memory = &mut m;
    // The bound QP writes; another QP is refused and writes nothing.
    mem.remote_write_on(&at(on_qp.rkey, r.addr, 4), 0x42, &[1, 2, 3, 4])
        .unwrap();
    assert_eq!(
        mem.remote_write_on(&at(on_qp.rkey, r.addr + 4, 4), 0x43, &[9; 4]),
        Err(MemError::AccessDenied)
    );
    // A region serves every QP; bounds, rights, PZ, length and dead keys are still checked.
    mem.remote_write_on(&at(r.rkey, r.addr + 60, 4), 0x43, &[5, 6, 7, 8])
        .unwrap();
    assert_eq!(
        mem.remote_write_on(&at(r.rkey, r.addr + 61, 4), 0x43, &[0; 4]),
        Err(MemError::OutOfBounds)
    );
    assert_eq!(
        mem.remote_write_on(&at(on_qp.rkey, r.addr + 30, 4), 0x42, &[0; 4]),
        Err(MemError::OutOfBounds)
    );
    assert_eq!(
        mem.remote_write_on(&at(read_only.rkey, r.addr, 4), 0x42, &[0; 4]),
        Err(MemError::AccessDenied)
    );
    assert_eq!(
        mem.remote_write_on(&at(r.rkey, r.addr, 3), 0x42, &[0; 4]),
        Err(MemError::OutOfBounds)
    );
    let mut other_pz = at(r.rkey, r.addr, 4);
    other_pz.pd = pz.id() + 1;
    assert_eq!(
        mem.remote_write_on(&other_pz, 0x42, &[0; 4]),
        Err(MemError::PdMismatch)
    );
    assert_eq!(
        mem.remote_write_on(&at(r.lkey, r.addr, 4), 0x42, &[0; 4]),
        Err(MemError::InvalidKey)
    );
    t.deregister_until(on_qp.lkey, within(DEREGISTER_WAIT))
        .unwrap();
    assert_eq!(
        mem.remote_write_on(&at(on_qp.rkey, r.addr, 4), 0x42, &[0; 4]),
        Err(MemError::InvalidKey)
    );
    let mut got = [0u8; 64];
    t.read_local(r.lkey, r.addr, &mut got).unwrap();
    assert_eq!(&got[..4], &[1, 2, 3, 4]);
    assert_eq!(
        &got[4..8],
        &[0; 4],
        "the refused write left memory as it was"
    );
    assert_eq!(&got[60..], &[5, 6, 7, 8]);
    t.deregister_until(read_only.lkey, within(DEREGISTER_WAIT))
        .unwrap();
    t.deregister_until(r.lkey, within(DEREGISTER_WAIT)).unwrap();
}

#[test]
fn a_pinned_range_loads_and_stores_within_its_bounds_and_rights() {
    let t = MrTable::new(8);
    let pz = t.create_pz();
    let r = t.register_alloc(pz, 64, 64, Access::LOCAL_WRITE).unwrap();
    t.write_local(r.lkey, r.addr + 16, &[7]).unwrap();
    let g = t
        .pin(
            &mr(KeyKind::Local, pz, r.lkey, r.addr + 16, 8),
            Access::empty(),
        )
        .unwrap();
    assert_eq!(g.load(0), Ok(7));
    // A later write (as an RDMA WRITE landing) is seen by the next load.
    t.write_local(r.lkey, r.addr + 23, &[9]).unwrap();
    assert_eq!(g.load(7), Ok(9));
    // Outside the pinned 8 bytes, even though still inside the region: refused.
    assert_eq!(g.load(8), Err(MemError::OutOfBounds));
    assert_eq!(g.load(usize::MAX), Err(MemError::OutOfBounds));
    // This pin did not ask for LOCAL_WRITE: no stores through it.
    assert_eq!(g.store(0, 1), Err(MemError::AccessDenied));
    drop(g);
    // A writable pin stores within its bounds, seen by the checked read.
    let w = t
        .pin(
            &mr(KeyKind::Local, pz, r.lkey, r.addr + 32, 4),
            Access::LOCAL_WRITE,
        )
        .unwrap();
    w.store(3, 0x5a).unwrap();
    let mut b = [0u8];
    t.read_local(r.lkey, r.addr + 35, &mut b).unwrap();
    assert_eq!(b[0], 0x5a);
    assert_eq!(w.store(4, 1), Err(MemError::OutOfBounds));
    drop(w);
    // A region without LOCAL_WRITE cannot be pinned for writing at all.
    let ro = t.register_alloc(pz, 64, 64, Access::empty()).unwrap();
    assert!(t
        .pin(
            &mr(KeyKind::Local, pz, ro.lkey, ro.addr, 4),
            Access::LOCAL_WRITE
        )
        .is_err());
}

/// Every copy length the inline small-copy paths take (0..=16) and some beyond, at odd offsets:
/// exactly the named bytes change, in both directions and through the checked accessors.
#[test]
fn copies_of_every_small_length_touch_exactly_their_bytes() {
    let t = MrTable::new(4);
    let pz = t.create_pz();
    let r = t
        .register_alloc(pz, 64, 8, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        .unwrap();
    for n in 0..=40usize {
        for at in [0usize, 1, 3, 7] {
            t.write_local(r.lkey, r.addr, &[0xee; 64]).unwrap();
            let data: Vec<u8> = (0..n).map(|i| i as u8 + 1).collect();
            t.write_local(r.lkey, r.addr + at as u64, &data).unwrap();
            let mut all = [0u8; 64];
            t.read_local(r.lkey, r.addr, &mut all).unwrap();
            assert!(all[..at].iter().all(|&b| b == 0xee), "{n} at {at}");
            assert_eq!(&all[at..at + n], &data[..], "{n} at {at}");
            assert!(all[at + n..].iter().all(|&b| b == 0xee), "{n} at {at}");
            let mut back = vec![0u8; n];
            t.read_local(r.lkey, r.addr + at as u64, &mut back).unwrap();
            assert_eq!(back, data, "{n} at {at}");
            let rw = mr(KeyKind::Remote, pz, r.rkey, r.addr + at as u64, n as u32);
            let flipped: Vec<u8> = data.iter().map(|b| !b).collect();
            t.remote_write_on(&rw, 1, &flipped).unwrap();
            let mut out = vec![0u8; n];
            let lr = mr(KeyKind::Local, pz, r.lkey, r.addr + at as u64, n as u32);
            t.read(&lr, Access::empty(), &mut out).unwrap();
            assert_eq!(out, flipped, "{n} at {at}");
        }
    }
}
