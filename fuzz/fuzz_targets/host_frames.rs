//! `cargo +nightly fuzz run host_frames`: frames edited from real ARP, CM and RC traffic into a
//! host with a listener, connected QPs and registered memory (`sim::frame_fuzz`); a panic is a
//! finding (a crash, a changed byte no remote key reaches, a host that can no longer connect
//! and move verified data).
#![no_main]

use roce_sim::frame_fuzz::run_one;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    run_one(data);
});
