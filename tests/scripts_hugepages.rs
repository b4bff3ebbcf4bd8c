//! scripts/hugepages.sh: `up N` reserves 2 MiB pages and mounts hugetlbfs, `down` gives back
//! exactly what `up` took. The test keeps its state in a run directory of its own, so it cannot
//! undo a set-up made by someone else (scripts/setup.sh) through the shared state file.

mod scripts_common;
use scripts_common::*;

const NR: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";

fn nr() -> u64 {
    std::fs::read_to_string(NR)
        .expect("2 MiB hugepages in sysfs")
        .trim()
        .parse()
        .unwrap()
}

fn mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&"/dev/hugepages") && f.get(2) == Some(&"hugetlbfs")
        })
}

#[test]
fn hugepages_up_down_restores_prior_state() {
    require_root();
    let run_dir = format!("/run/dpdk-roce-test-hugepages-{}", std::process::id());
    let env = [("DPDK_ROCE_RUN_DIR", run_dir.as_str())];
    let _guard = Guard(|| {
        run("hugepages.sh", &["down"], &env);
        let _ = std::fs::remove_dir_all(&run_dir);
    });
    let (before, was_mounted) = (nr(), mounted());
    // Ask for 64 more pages than there are, so that `up` really reserves some.
    let want = before + 64;
    let out = run_ok("hugepages.sh", &["up", &want.to_string()], &env);
    assert!(out.contains("64 added"), "{out}");
    assert_eq!(nr(), want);
    assert!(
        mounted(),
        "hugetlbfs not mounted at /dev/hugepages after up"
    );
    let state = std::fs::read_to_string(format!("{run_dir}/hugepages.state")).unwrap();
    assert!(state.contains(&format!("prior={before}")), "{state}");
    assert!(state.contains("reserved=64"), "{state}");

    // Idempotent: the same request changes nothing.
    run_ok("hugepages.sh", &["up", &want.to_string()], &env);
    assert_eq!(nr(), want);
    assert!(run_ok("hugepages.sh", &["status"], &env).contains("64 pages added"));

    run_ok("hugepages.sh", &["down"], &env);
    assert_eq!(
        nr(),
        before,
        "down did not give back exactly the reserved pages"
    );
    assert_eq!(mounted(), was_mounted, "down changed the mount it found");
    assert!(!std::path::Path::new(&format!("{run_dir}/hugepages.state")).exists());
    // Idempotent down.
    assert!(run_ok("hugepages.sh", &["down"], &env).contains("nothing to undo"));
    assert_eq!(nr(), before);
}

#[test]
fn hugepages_rejects_bad_arguments() {
    require_root();
    let run_dir = format!("/run/dpdk-roce-test-hugeargs-{}", std::process::id());
    let env = [("DPDK_ROCE_RUN_DIR", run_dir.as_str())];
    let _guard = Guard(|| {
        let _ = std::fs::remove_dir_all(&run_dir);
    });
    for args in [
        vec!["up", "many"],
        vec!["up", "-1"],
        vec!["sideways"],
        vec![],
    ] {
        let out = run("hugepages.sh", &args, &env);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    assert!(
        !std::path::Path::new(&format!("{run_dir}/hugepages.state")).exists(),
        "a rejected call left state"
    );
}
