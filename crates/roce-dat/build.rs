//! Build script. The protocol core is pure Rust; the DPDK binding (`dpdk-sys`) and the DAT
//! bindings (`dat-sys`) are their own crates.
//!
//! The cdylib is the uDAPL provider that libdat2 `dlopen`s. libdat2 `dlclose`s a provider when
//! its last IA is closed and loads it again at the next open, but DPDK's EAL can be initialised
//! only once per process: the library is linked `-z nodelete` so it is never unloaded
//! (docs/REFERENCE-dat.md, "How libdat2 loads a provider").
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-z,nodelete");
}
