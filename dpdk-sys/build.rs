//! Compiles the C shim (DPDK's static inline functions as real symbols) with the cflags that
//! `pkg-config libdpdk` gives (include paths, `-include rte_config.h`, `-march=...`), links the
//! shared DPDK libraries the same way, and checks the committed bindings (`src/bindings.rs`)
//! against the system headers: every named type's size, alignment and field offsets and every
//! constant, as C static assertions compiled beside the shim (crate `sys-layout`). Fails early
//! with one clear message when DPDK is missing or not the version the bindings were made from.
//!
//! With the feature `regenerate` (scripts/bindings.sh) it first runs bindgen over the headers and
//! rewrites `src/bindings.rs`; that needs libclang.

use std::env;
#[cfg(feature = "regenerate")]
use std::path::Path;
use std::path::PathBuf;
use std::process::Command;

const DPDK_MISSING: &str = "DPDK not found via pkg-config libdpdk: install dpdk-dev libdpdk-dev \
                            (apt-get install dpdk-dev libdpdk-dev)";
/// The DPDK release the committed bindings were made from: an LTS keeps its ABI over its point
/// releases; the layout check proves it for what the bindings hold.
const BINDINGS_RELEASE: &str = "22.11";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-changed=src/bindings.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");

    // Link flags (-L, -lrte_*) are emitted by the pkg-config crate.
    let lib = match pkg_config::Config::new()
        .atleast_version(BINDINGS_RELEASE)
        .probe("libdpdk")
    {
        Ok(lib) => lib,
        Err(e) => panic!("{DPDK_MISSING}\n(pkg-config said: {e})"),
    };
    if !(lib.version == BINDINGS_RELEASE
        || lib.version.starts_with(&format!("{BINDINGS_RELEASE}.")))
    {
        panic!(
            "DPDK {} found; the committed bindings (dpdk-sys/src/bindings.rs) are for DPDK \
             {BINDINGS_RELEASE}: regenerate them with scripts/bindings.sh",
            lib.version
        );
    }
    // The raw cflags: the pkg-config crate keeps only -I and -D, but DPDK's headers also need
    // `-include rte_config.h` and the -march it was built for (its vector code paths).
    let cflags = raw_cflags();

    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    // Read when the script runs, not when it was compiled: cargo reuses a build script's
    // binary for a copy of the crate elsewhere.
    let dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let csrc = dir.join("csrc");
    let c = || {
        let mut build = cc::Build::new();
        build.include(&csrc).opt_level(2);
        for path in &lib.include_paths {
            build.include(path);
        }
        for flag in &cflags {
            build.flag(flag);
        }
        build.flag_if_supported("-Wno-unused-parameter");
        build.warnings(true).extra_warnings(false);
        build
    };

    #[cfg(feature = "regenerate")]
    regenerate(&csrc, &cflags, &lib.version, &dir.join("src/bindings.rs"));

    // The layout check: the bindings' facts as static assertions over the real headers.
    let wrapper = out.join("wrapper_tu.c");
    std::fs::write(&wrapper, "#include \"wrapper.h\"\n").expect("write wrapper_tu.c");
    let unit = c().file(&wrapper).expand();
    for header in sys_layout::included_files(&String::from_utf8_lossy(&unit)) {
        println!("cargo:rerun-if-changed={header}");
    }
    let bindings = std::fs::read_to_string(dir.join("src/bindings.rs"))
        .expect("read src/bindings.rs (scripts/bindings.sh makes it)");
    let check = out.join("layout_check.c");
    let asserts = sys_layout::c_assertions(&bindings, &String::from_utf8_lossy(&unit));
    std::fs::write(&check, format!("#include \"wrapper.h\"\n{asserts}"))
        .expect("write layout_check.c");

    // The shim: DPDK's static inline functions as real symbols; the check adds no code.
    c().file(csrc.join("shim.c"))
        .file(&check)
        .compile("dpdk_roce_shim");
}

/// Runs bindgen over `csrc/wrapper.h` and writes `to` (feature `regenerate`).
#[cfg(feature = "regenerate")]
fn regenerate(csrc: &Path, cflags: &[String], version: &str, to: &Path) {
    const LIBCLANG_MISSING: &str = "libclang not found (bindgen needs it): install \
                                    libclang-dev (apt-get install libclang-dev), or set LIBCLANG_PATH";
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");
    if let Some(dir) = find_libclang() {
        // Let clang-sys (inside bindgen) use exactly what was found.
        if env::var_os("LIBCLANG_PATH").is_none() {
            env::set_var("LIBCLANG_PATH", &dir);
        }
    } else {
        panic!("{LIBCLANG_MISSING}");
    }
    let bindings = bindgen::Builder::default()
        .raw_line(format!(
            "// Generated by scripts/bindings.sh (bindgen over DPDK {version}, csrc/wrapper.h): do not edit."
        ))
        .header(csrc.join("wrapper.h").to_string_lossy())
        .clang_args(cflags.iter())
        .clang_arg(format!("-I{}", csrc.display()))
        // EAL
        .allowlist_function("rte_eal_(init|cleanup|iova_mode|has_hugepages|process_type)")
        .allowlist_function("rte_eal_hotplug_(add|remove)")
        .allowlist_function("rte_dev_(probe|remove)")
        .allowlist_function("rte_vdev_(init|uninit)")
        .allowlist_function("rte_strerror")
        .allowlist_function("rte_log_set_global_level")
        .allowlist_function("rte_(socket_id|lcore_count|get_main_lcore|lcore_to_socket_id)")
        .allowlist_function("rte_get_tsc_hz")
        // memory
        .allowlist_function("rte_(malloc|zmalloc|malloc_socket|zmalloc_socket|free)")
        .allowlist_function("rte_memzone_(reserve|reserve_aligned|free|lookup)")
        .allowlist_function("rte_mem_virt2iova|rte_malloc_virt2iova")
        .allowlist_function("rte_mempool_(free|avail_count|in_use_count|lookup)")
        .allowlist_function("rte_pktmbuf_pool_create")
        .allowlist_function("rte_pktmbuf_free_bulk")
        // ethdev
        .allowlist_function("rte_eth_dev_(configure|start|stop|close|info_get|set_mtu|get_mtu)")
        .allowlist_function("rte_eth_dev_(get_port_by_name|get_name_by_port|count_avail)")
        .allowlist_function("rte_eth_dev_(socket_id|is_valid_port|adjust_nb_rx_tx_desc)")
        .allowlist_function("rte_eth_(rx|tx)_queue_setup")
        .allowlist_function("rte_eth_link_get(_nowait)?")
        .allowlist_function("rte_eth_macaddr_get")
        .allowlist_function("rte_eth_(promiscuous|allmulticast)_(enable|disable|get)")
        .allowlist_function("rte_eth_stats_(get|reset)")
        // receive interrupts (the away helper's sleep)
        .allowlist_function("rte_eth_dev_rx_intr_(enable|disable|ctl_q)")
        .allowlist_function("rte_epoll_wait")
        .allowlist_type("rte_epoll_event")
        .allowlist_var("RTE_INTR_EVENT_(ADD|DEL)")
        // telemetry: commands answered on the EAL runtime directory's dpdk_telemetry.v2 socket
        .allowlist_function("rte_telemetry_register_cmd")
        // packet capture by a secondary process (dpdk-dumpcap, dpdk-pdump)
        .allowlist_function("rte_pdump_(init|uninit)")
        .allowlist_function("rte_tel_data_(alloc|free|start_dict|start_array|string)")
        .allowlist_function("rte_tel_data_add_(dict|array)_(u64|int|string|container)")
        .allowlist_type("rte_tel_value_type")
        .allowlist_var("RTE_TEL_MAX_(STRING_LEN|SINGLE_STRING_LEN|DICT_ENTRIES|ARRAY_ENTRIES)")
        // the shim
        .allowlist_function("shim_.*")
        .allowlist_type("rte_mbuf")
        .allowlist_type("rte_mbuf_ext_shared_info")
        .allowlist_type("rte_ether_addr")
        .allowlist_type("rte_eth_(conf|dev_info|link|stats|rxconf|txconf)")
        .allowlist_var("RTE_ETH_LINK_(UP|DOWN|FULL_DUPLEX|HALF_DUPLEX)")
        .allowlist_var("RTE_ETHER_(ADDR_LEN|MIN_LEN|MAX_LEN|MTU|HDR_LEN|CRC_LEN)")
        .allowlist_var("RTE_(MEMPOOL|MEMZONE|ETH)_NAME(SIZE|_MAX_LEN)")
        .allowlist_var("RTE_ETH_NAME_MAX_LEN|RTE_MAX_ETHPORTS|RTE_MBUF_MAX_NB_SEGS")
        .allowlist_var("RTE_MBUF_F_(EXTERNAL|INDIRECT)|RTE_PKTMBUF_HEADROOM")
        .allowlist_var("SOCKET_ID_ANY|RTE_MAX_LCORE|RTE_LOG_.*")
        // The pool is only ever handled by pointer; its body drags in rings and locks.
        .opaque_type("rte_mempool")
        .opaque_type("rte_device")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(true)
        .generate_comments(false)
        .prepend_enum_name(false)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on the DPDK headers: {e}"));
    bindings.write_to_file(to).expect("write src/bindings.rs");
}

/// `pkg-config --cflags libdpdk`, split into words.
fn raw_cflags() -> Vec<String> {
    let pc = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into());
    let output = Command::new(&pc)
        .args(["--cflags", "libdpdk"])
        .output()
        .unwrap_or_else(|e| panic!("{DPDK_MISSING}\n(running {pc}: {e})"));
    if !output.status.success() {
        panic!(
            "{DPDK_MISSING}\n(pkg-config said: {})",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[cfg(feature = "regenerate")]
/// A directory holding libclang, looked up where clang-sys would look: `LIBCLANG_PATH`,
/// `llvm-config --libdir`, then Debian's `/usr/lib/llvm-*/lib` and the multiarch lib directory.
fn find_libclang() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(p) = env::var_os("LIBCLANG_PATH") {
        // An explicit setting is what clang-sys will use: it must be right, not just anything.
        let p = PathBuf::from(p);
        return (p.is_file() || has_libclang(&p)).then_some(p);
    }
    if let Ok(out) = Command::new("llvm-config").arg("--libdir").output() {
        if out.status.success() {
            dirs.push(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
        }
    }
    if let Ok(entries) = std::fs::read_dir("/usr/lib") {
        let mut llvm: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("llvm-"))
            })
            .map(|p| p.join("lib"))
            .collect();
        llvm.sort();
        llvm.reverse(); // newest first
        dirs.extend(llvm);
    }
    dirs.push(PathBuf::from("/usr/lib/x86_64-linux-gnu"));
    dirs.push(PathBuf::from("/usr/lib64"));
    dirs.push(PathBuf::from("/usr/lib"));
    dirs.into_iter().find(|d| has_libclang(d))
}

#[cfg(feature = "regenerate")]
fn has_libclang(dir: &Path) -> bool {
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            e.file_name().to_str().is_some_and(|n| {
                n.starts_with("libclang") && !n.starts_with("libclang-cpp") && n.contains(".so")
            })
        })
    })
}
