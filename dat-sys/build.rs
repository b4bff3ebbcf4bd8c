//! Generates the DAT 2.0 provider bindings with bindgen from the system headers
//! (`/usr/include/dat2`, Debian package libdapl-dev) and compiles the C shim that unpacks the IB
//! extension va_lists. Links `libdat2` (the registry the provider registers itself with). Fails
//! early with one clear message when the headers are missing (libclang is checked by `dpdk-sys`,
//! which every build of the workspace compiles first).

use std::env;
use std::path::PathBuf;

const DAT_MISSING: &str = "DAT 2.0 headers not found (/usr/include/dat2/udat.h): install \
                           libdapl-dev (apt-get install libdapl-dev libdapl2)";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=csrc/wrapper.h");
    println!("cargo:rerun-if-changed=csrc/shim.h");
    println!("cargo:rerun-if-changed=csrc/shim.c");
    println!("cargo:rerun-if-env-changed=LIBCLANG_PATH");
    println!("cargo:rerun-if-env-changed=DAT_INCLUDE_DIR");

    let include = env::var_os("DAT_INCLUDE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/include"));
    if !include.join("dat2/udat.h").is_file() {
        panic!("{DAT_MISSING}");
    }
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    // Read when the script runs, not when it was compiled: cargo reuses a build script's
    // binary for a copy of the crate elsewhere.
    let csrc =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR")).join("csrc");

    cc::Build::new()
        .file(csrc.join("shim.c"))
        .include(&csrc)
        .include(&include)
        .opt_level(2)
        .warnings(true)
        .extra_warnings(false)
        .compile("dat_roce_shim");
    // dat_registry_add_provider / remove_provider live in libdat2.
    println!("cargo:rustc-link-lib=dylib=dat2");

    let bindings = bindgen::Builder::default()
        .header(csrc.join("wrapper.h").to_string_lossy())
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg(format!("-I{}", csrc.display()))
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .allowlist_type("DAT_.*|dat_.*")
        .allowlist_function("dat_registry_(add|remove)_provider")
        // The consumer API a DAT program calls (libdat2 dispatches it to the provider).
        .allowlist_function(
            "dat_(ia_openv|ia_close|ia_query|pz_(create|free)|lmr_(create|free|query)\
             |rmr_(create|free|bind|query)|evd_(create|free|wait|dequeue|enable|disable)\
             |ep_(create|free|connect|disconnect|reset|query|modify|get_status|recv_query\
             |set_watermark|post_send\
             |post_recv|post_rdma_write|post_rdma_read)|psp_(create|free)|rsp_(create|free)\
             |cr_(accept|reject|query)|get_handle_type|strerror|extension_op)",
        )
        .allowlist_function("shim_dat_.*")
        .allowlist_var("DAT_.*")
        .allowlist_type("shim_dat_.*")
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(true)
        .generate_comments(false)
        .prepend_enum_name(false)
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "bindgen failed on the DAT headers: {e} (libclang: apt-get install libclang-dev)"
            )
        });
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}
