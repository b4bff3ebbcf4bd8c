//! The stateful frame fuzzer (`sim::frame_fuzz`, the `host_frames` target of `fuzz/`) run with
//! seeded random inputs: edits of A's real ARP, CM and RC frames injected at B, which has a
//! listener, connected QPs and registered memory. Every input must leave the regions no remote
//! key reaches unchanged and a new connection able to move verified data (the harness panics
//! otherwise).

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roce_sim::frame_fuzz::FrameFuzz;

#[test]
fn seeded_inputs_of_edited_frames_break_no_invariant_of_a_connected_host() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
    let (mut injected, mut resealed, mut requests) = (0, 0, 0);
    for _ in 0..1000 {
        let mut input = vec![0u8; rng.gen_range(0..1200)];
        rng.fill_bytes(&mut input);
        let r = FrameFuzz::new().feed(&input);
        injected += r.injected;
        resealed += r.resealed;
        requests += r.requests;
    }
    println!("{injected} frames injected, {resealed} resealed, {requests} requests raised");
    assert!(injected > 40_000, "{injected}");
    assert!(resealed > injected / 3, "{resealed} of {injected}");
    // Edited REQs reached the CM as new requests.
    assert!(requests > 0);
}
