//! The memory table under concurrent registration, deregistration and invalidation while another
//! thread (standing in for a poll-mode core) does checked reads, writes and atomics in a loop
//! (IBTA vol. 1 §10.6: a freed or invalidated key never reaches memory again).
//!
//! Regions come from a quarantine allocator: freed blocks are checked (their canary must be
//! intact, so no access through a stale key ever landed in a newer region), poisoned and kept,
//! and at the end no poisoned byte may have changed (no access touched freed memory).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dpdk_roce::engine::deregister::Deregister;
use dpdk_roce::mem::access::{Access, AtomicOp, KeyKind, MemError, MemRef};
use dpdk_roce::mem::{Allocator, MrTable, QuarantineAllocator, Region};

const LEN: usize = 64;
const POISON: u8 = 0xdd;

/// Bytes 8..64 of every region: a pattern from its first canary byte, which differs per region.
fn canary(seed: u8) -> [u8; LEN - 8] {
    let mut c = [0u8; LEN - 8];
    c[0] = seed;
    for (i, b) in c.iter_mut().enumerate().skip(1) {
        *b = seed.wrapping_mul(31).wrapping_add(i as u8) | 1;
    }
    c
}

fn canary_ok(bytes: &[u8]) -> bool {
    bytes.len() == LEN && bytes[8..] == canary(bytes[8])
}

#[test]
fn accesses_racing_with_deregistration_never_touch_freed_memory() {
    let atomics_landed = Arc::new(AtomicU64::new(0));
    let landed = atomics_landed.clone();
    let quarantine = Arc::new(QuarantineAllocator::new(
        POISON,
        Some(Box::new(move |b: &[u8]| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[..8]);
            landed.fetch_add(u64::from_ne_bytes(w), Ordering::SeqCst);
            canary_ok(b)
        })),
    ));
    let alloc: Arc<dyn Allocator> = quarantine.clone();
    let table = Arc::new(MrTable::with_allocator(8, alloc));
    let pz = table.create_pz();
    let all =
        Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC;
    // Every region ever registered, with its canary seed (stale ones stay in the list).
    let known: Arc<Mutex<Vec<(Region, u8)>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));

    let core = {
        let (table, known, stop) = (table.clone(), known.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut ok_atomics = 0u64;
            let mut ok = HashMap::<&str, u64>::new();
            let mut i = 0usize;
            let mut out = [0u8; LEN - 8];
            while !stop.load(Ordering::Relaxed) {
                let pick = {
                    let k = known.lock().unwrap();
                    if k.is_empty() {
                        continue;
                    }
                    // Mostly recent regions, sometimes old (stale) ones.
                    let n = k.len();
                    let j = if i.is_multiple_of(4) {
                        i % n
                    } else {
                        n - 1 - (i % n.min(8))
                    };
                    k[j]
                };
                i += 1;
                let (r, seed) = pick;
                let remote = i.is_multiple_of(2);
                let (kind, key) = if remote {
                    (KeyKind::Remote, r.rkey)
                } else {
                    (KeyKind::Local, r.lkey)
                };
                let body = MemRef {
                    kind,
                    pd: pz.id(),
                    key,
                    addr: r.addr + 8,
                    len: (LEN - 8) as u32,
                };
                match table.read(&body, Access::LOCAL_READ, &mut out) {
                    Ok(()) => {
                        assert_eq!(
                            out,
                            canary(seed),
                            "read through a key returned another region"
                        );
                        *ok.entry("read").or_default() += 1;
                    }
                    Err(e) => assert_eq!(e, MemError::InvalidKey),
                }
                let need = if remote {
                    Access::REMOTE_WRITE
                } else {
                    Access::LOCAL_WRITE
                };
                match table.write(&body, need, &canary(seed)) {
                    Ok(()) => *ok.entry("write").or_default() += 1,
                    Err(e) => assert_eq!(e, MemError::InvalidKey),
                }
                if remote {
                    let w = MemRef {
                        len: 8,
                        addr: r.addr,
                        ..body
                    };
                    match table.atomic(&w, AtomicOp::FetchAdd { add: 1 }) {
                        Ok(_) => ok_atomics += 1,
                        Err(e) => assert_eq!(e, MemError::InvalidKey),
                    }
                }
            }
            (ok_atomics, ok)
        })
    };

    let deadline = Instant::now() + Duration::from_millis(500);
    let mut live: Vec<Region> = Vec::new();
    let mut seed = 1u8;
    let mut registered = 0u32;
    let mut invalidated = 0u32;
    while Instant::now() < deadline {
        if live.len() < 6 {
            let r = table.register_alloc(pz, LEN, 8, all).unwrap();
            seed = seed.wrapping_add(2) | 1;
            let mut init = [0u8; LEN];
            init[8..].copy_from_slice(&canary(seed));
            table.write_local(r.lkey, r.addr, &init).unwrap();
            known.lock().unwrap().push((r, seed));
            live.push(r);
            registered += 1;
        }
        if registered.is_multiple_of(3) {
            // Invalidate the R_Key of a window over a live region while the core hammers the
            // regions: the window's key dies, the region's does not.
            let r = live[live.len() / 2];
            let w = table
                .bind_window(r.lkey, pz.id(), r.addr, LEN as u32, Access::REMOTE_READ)
                .unwrap();
            assert_eq!(
                table.invalidate(pz.id(), r.rkey),
                Err(MemError::AccessDenied)
            );
            table.invalidate(pz.id(), w.rkey).unwrap();
            let probe = |key| MemRef {
                kind: KeyKind::Remote,
                pd: pz.id(),
                key,
                addr: r.addr,
                len: 8,
            };
            assert_eq!(
                table.check(&probe(w.rkey), Access::REMOTE_READ),
                Err(MemError::InvalidKey)
            );
            assert_eq!(table.check(&probe(r.rkey), Access::REMOTE_READ), Ok(()));
            table.deregister(w.lkey).unwrap();
            invalidated += 1;
        }
        if live.len() >= 4 {
            let r = live.remove(0);
            table.deregister(r.lkey).unwrap();
            // After deregister returns, both keys are dead.
            let probe = MemRef {
                kind: KeyKind::Local,
                pd: pz.id(),
                key: r.lkey,
                addr: r.addr,
                len: 8,
            };
            assert_eq!(
                table.check(&probe, Access::LOCAL_READ),
                Err(MemError::InvalidKey)
            );
        }
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    let (ok_atomics, ok) = core.join().unwrap();
    for r in live {
        table.deregister(r.lkey).unwrap();
    }
    assert!(registered > 20, "the registrar made progress: {registered}");
    assert!(invalidated > 0);
    assert!(
        ok.get("read").copied().unwrap_or(0) > 0,
        "some accesses succeeded"
    );
    assert_eq!(table.live_regions(), 0);
    assert_eq!(quarantine.freed(), registered as usize);
    assert_eq!(
        quarantine.failed_checks(),
        0,
        "a canary was overwritten: an access hit the wrong region"
    );
    assert_eq!(
        quarantine.verify(),
        0,
        "freed memory was touched after deregister"
    );
    assert_eq!(
        atomics_landed.load(Ordering::SeqCst),
        ok_atomics,
        "every successful atomic landed in a live region"
    );
}

#[test]
fn concurrent_atomics_from_many_threads_are_atomic() {
    let table = Arc::new(MrTable::new(4));
    let pz = table.create_pz();
    let r = table
        .register_alloc(pz, 16, 8, Access::REMOTE_ATOMIC)
        .unwrap();
    let w = MemRef {
        kind: KeyKind::Remote,
        pd: pz.id(),
        key: r.rkey,
        addr: r.addr + 8,
        len: 8,
    };
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let t = table.clone();
            std::thread::spawn(move || {
                for _ in 0..10_000 {
                    t.atomic(&w, AtomicOp::FetchAdd { add: 1 }).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut out = [0u8; 8];
    table.read_local(r.lkey, r.addr + 8, &mut out).unwrap();
    assert_eq!(u64::from_ne_bytes(out), 40_000);
}

#[test]
fn registration_from_many_threads_gives_unique_live_keys() {
    let table = Arc::new(MrTable::new(64));
    let pz = table.create_pz();
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let t = table.clone();
            std::thread::spawn(move || {
                let mut keys = Vec::new();
                for round in 0..500 {
                    let r = t.register_alloc(pz, 32, 8, Access::LOCAL_WRITE).unwrap();
                    keys.push(r.lkey);
                    t.write_local(r.lkey, r.addr, &[round as u8; 32]).unwrap();
                    let mut b = [0u8; 32];
                    t.read_local(r.lkey, r.addr, &mut b).unwrap();
                    assert_eq!(
                        b, [round as u8; 32],
                        "another thread's region shares this key"
                    );
                    t.deregister(r.lkey).unwrap();
                }
                keys
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a key was issued twice");
    assert_eq!(table.live_regions(), 0);
}

/// `MrTable::check` takes no count: it reads the slot's metadata between two reads of its state.
/// One slot is freed and re-registered over and over, alternating two zones, lengths and
/// rights, while another thread checks the key of the registration it last saw (with that
/// registration's own zone, last bytes and rights) and keys already freed: a check is `Ok` or
/// `InvalidKey`, never an error that would come from another registration's metadata, and a
/// freed key is always `InvalidKey`.
#[test]
fn checks_racing_with_reregistration_see_one_registration() {
    let table = Arc::new(MrTable::new(1));
    let (pz_a, pz_b) = (table.create_pz(), table.create_pz());
    let current: Arc<Mutex<Option<(Region, Access)>>> = Arc::new(Mutex::new(None));
    let freed: Arc<Mutex<Vec<Region>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let checker = {
        let (table, current, freed, stop) =
            (table.clone(), current.clone(), freed.clone(), stop.clone());
        std::thread::spawn(move || {
            let (mut ok, mut gone, mut stale) = (0u64, 0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                let seen = *current.lock().unwrap();
                if let Some((r, rights)) = seen {
                    let want = if rights.contains(Access::REMOTE_WRITE) {
                        Access::REMOTE_WRITE
                    } else {
                        Access::REMOTE_READ
                    };
                    let m = MemRef {
                        kind: KeyKind::Remote,
                        pd: r.pz.0,
                        key: r.rkey,
                        addr: r.addr + r.len - 8,
                        len: 8,
                    };
                    for _ in 0..64 {
                        match table.check(&m, want) {
                            Ok(()) => ok += 1,
                            Err(MemError::InvalidKey) => gone += 1,
                            Err(e) => panic!("check of a live registration's own range: {e:?}"),
                        }
                    }
                }
                let old = freed.lock().unwrap().last().copied();
                if let Some(r) = old {
                    let m = MemRef {
                        kind: KeyKind::Local,
                        pd: r.pz.0,
                        key: r.lkey,
                        addr: r.addr,
                        len: 1,
                    };
                    assert_eq!(
                        table.check(&m, Access::LOCAL_READ),
                        Err(MemError::InvalidKey)
                    );
                    stale += 1;
                }
            }
            (ok, gone, stale)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut rounds = 0u32;
    while Instant::now() < deadline || rounds < 2000 {
        let (pz, len, rights) = if rounds.is_multiple_of(2) {
            (pz_a, 64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
        } else {
            (pz_b, 4096, Access::REMOTE_READ)
        };
        let r = table.register_alloc(pz, len, 8, rights).unwrap();
        *current.lock().unwrap() = Some((r, rights));
        std::thread::yield_now();
        table.deregister(r.lkey).unwrap();
        freed.lock().unwrap().push(r);
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let (ok, gone, stale) = checker.join().unwrap();
    assert!(
        ok > 0,
        "no check ever saw a live registration ({gone} saw it freed)"
    );
    assert!(stale > 0, "no freed key was ever checked");
    let keys: std::collections::HashSet<u32> =
        freed.lock().unwrap().iter().map(|r| r.lkey).collect();
    assert_eq!(
        keys.len(),
        rounds as usize,
        "one slot, a new key every time"
    );
}
