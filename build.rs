//! Build script. The protocol core is pure Rust; the DPDK binding (`dpdk-sys`) and the C
//! provider shim arrive with their issues and hook in here.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
}
