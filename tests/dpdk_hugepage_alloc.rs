//! Provider-allocated regions in DPDK memory: `HugepageAllocator` (rte_zmalloc / rte_free /
//! rte_malloc_virt2iova) behind `MrTable`, under a real EAL (hugepages when the machine has
//! them mounted, else `--no-huge`). Fails loudly when EAL cannot start.

use std::sync::Arc;

use dpdk_roce::dpdk::{Eal, EalArgs, HugepageAllocator};
use dpdk_roce::engine::deregister::Deregister;
use dpdk_roce::mem::access::{Access, KeyKind, MemRef};
use dpdk_roce::mem::{Allocator, BackingKind, MrTable};

/// Removes this process's EAL runtime directory at the end (also on failure).
struct RuntimeDir(String);

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        for base in ["/var/run/dpdk", "/tmp/dpdk"] {
            let _ = std::fs::remove_dir_all(format!("{base}/{}", self.0));
        }
    }
}

fn eal() -> (&'static Eal, RuntimeDir) {
    let prefix = format!("drhp{}", std::process::id());
    let args = EalArgs::new("0")
        .hugepages_or_no_huge(128)
        .file_prefix(&prefix)
        .log_level("warning")
        .to_args();
    let dir = RuntimeDir(prefix);
    let eal = Eal::init(&args).unwrap_or_else(|e| panic!("EAL init {args:?}: {e}"));
    (eal, dir)
}

// One test function: EAL initialises once per process, with one set of arguments.
#[test]
fn hugepage_blocks_register_with_a_known_iova_and_are_freed() {
    let (eal, _dir) = eal();
    let alloc = HugepageAllocator::new(eal);
    assert_eq!(alloc.name(), "hugepage");

    // Raw blocks: aligned, IOVA known when the EAL runs IOVA as VA, and in IOVA-as-PA mode at
    // least for blocks inside one page (a 4 KiB-aligned 4 KiB block cannot straddle pages).
    for (len, align) in [
        (0, 8),
        (1, 64),
        (4096, 4096),
        (1 << 20, 64),
        (3 << 20, 2 << 20),
    ] {
        let a = alloc.alloc(len, align).expect("rte_zmalloc");
        assert!(a.len >= len);
        assert_eq!(a.ptr.as_ptr() as usize % align, 0, "alignment {align}");
        let iova = alloc.iova(&a);
        if alloc.iova_as_va() {
            assert_eq!(iova, Some(a.ptr.as_ptr() as u64), "IOVA as VA");
        } else if align >= len.max(1) {
            assert!(iova.is_some(), "no IOVA for a {len}-byte block in one page");
        }
        // SAFETY: from `alloc.alloc`, not used after.
        unsafe { alloc.free(a) };
    }
    assert!(alloc.alloc(64, 3).is_none(), "non-power-of-two alignment");

    // Regions of a table whose provider memory is DPDK's.
    let table = Arc::new(MrTable::with_allocator(16, Arc::new(alloc)));
    let pz = table.create_pz();
    let rw = Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_WRITE;
    // 64 KiB aligned to 64 KiB: inside one page of any size >= 64 KiB (or VA mode).
    let r = table.register_alloc(pz, 64 * 1024, 64 * 1024, rw).unwrap();
    let mut zeroes = vec![1u8; 64 * 1024];
    table.read_local(r.lkey, r.addr, &mut zeroes).unwrap();
    assert!(zeroes.iter().all(|&b| b == 0), "zeroed");
    let info = table.query(r.lkey).unwrap();
    assert_eq!(info.backing, BackingKind::Allocated);
    let base_iova = info.iova.expect("region IOVA");
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
    table.write_local(r.lkey, r.addr, &data).unwrap();
    let mut back = vec![0u8; data.len()];
    let m = MemRef {
        kind: KeyKind::Remote,
        pd: pz.id(),
        key: r.rkey,
        addr: r.addr,
        len: back.len() as u32,
    };
    table.read(&m, Access::REMOTE_READ, &mut back).unwrap();
    assert_eq!(back, data);

    // A pinned range reports the IOVA of its first byte; deregistration waits for no pin here.
    let off = 12_345u64;
    let pin = table
        .pin(
            &MemRef {
                kind: KeyKind::Local,
                pd: pz.id(),
                key: r.lkey,
                addr: r.addr + off,
                len: 1000,
            },
            Access::empty(),
        )
        .unwrap();
    assert_eq!(pin.iova(), Some(base_iova + off));
    assert_eq!(pin.as_ptr() as u64, r.addr + off);
    assert_eq!(pin.len(), 1000);
    assert_eq!(
        table.try_deregister(r.lkey),
        Err(dpdk_roce::mem::MrError::Busy)
    );
    drop(pin);
    table.deregister(r.lkey).unwrap();
    assert_eq!(table.live_regions(), 0);
    assert!(
        table.query(r.lkey).is_err(),
        "freed key never matches again"
    );
}
