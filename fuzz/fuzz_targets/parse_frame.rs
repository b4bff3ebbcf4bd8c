//! `cargo +nightly fuzz run parse_frame`: `RoceFrame::parse` never panics on any input, and a
//! frame it accepts re-emits to bytes that parse back to the same frame.
#![no_main]

use roce_proto::wire::frame::RoceFrame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = RoceFrame::parse(data) {
        let mut out = vec![0u8; frame.buffer_len()];
        let n = frame.emit(&mut out).expect("a parsed frame emits");
        assert_eq!(n, out.len());
        assert_eq!(RoceFrame::parse(&out), Ok(frame));
    }
});
