//! SEND with Invalidate on the wire (IBTA vol. 1 §9.2 table 38, §9.3.9): opcodes 0x16 (RC
//! SEND Last with Invalidate) and 0x17 (RC SEND Only with Invalidate) carry a 4-byte IETH —
//! the R_Key to invalidate, big endian — right after the 12-byte BTH. The bytes below are
//! written out by hand from the spec's layout, not produced by the code under test.

use dpdk_roce::wire::opcode::Opcode;
use dpdk_roce::wire::psn::Psn;
use dpdk_roce::wire::roce::{RoceHeaders, RocePacket};
use dpdk_roce::wire::BthRepr;

/// BTH: opcode 0x17, SE=1 M=0 Pad=0 TVer=0, P_Key 0xffff, reserved 0, DestQP 0x000123,
/// AckReq=1, PSN 0x00abcd; IETH: R_Key 0x8000_2a01; payload "hi!!".
const SEND_ONLY_INV: [u8; 20] = [
    0x17, 0x80, 0xff, 0xff, // opcode, SE|M|Pad|TVer, P_Key
    0x00, 0x00, 0x01, 0x23, // reserved (FECN/BECN 0), DestQP
    0x80, 0x00, 0xab, 0xcd, // AckReq, reserved, PSN
    0x80, 0x00, 0x2a, 0x01, // IETH: R_Key
    b'h', b'i', b'!', b'!', // payload
];

#[test]
fn send_only_with_invalidate_parses_the_ieth_r_key_and_re_emits_the_same_bytes() {
    let p = RocePacket::parse(&SEND_ONLY_INV).unwrap();
    let h = p.headers;
    assert_eq!(h.bth.opcode, Opcode::RC_SEND_ONLY_INV);
    assert_eq!(h.bth.opcode.0, 0x17);
    assert!(h.bth.solicited);
    assert!(h.bth.ack_req);
    assert_eq!(h.bth.dest_qp, 0x123);
    assert_eq!(h.bth.psn, Psn::new(0xabcd));
    assert_eq!(h.ieth, Some(0x8000_2a01));
    assert_eq!((h.reth, h.imm_dt, h.aeth), (None, None, None));
    assert_eq!(h.header_len(), 16, "BTH 12 + IETH 4");
    assert_eq!(p.payload, b"hi!!");
    let mut out = [0u8; 16];
    assert_eq!(h.emit(&mut out).unwrap(), 16);
    assert_eq!(out[..], SEND_ONLY_INV[..16]);
}

#[test]
fn send_last_with_invalidate_is_opcode_0x16_with_the_same_ieth() {
    let mut bytes = SEND_ONLY_INV;
    bytes[0] = 0x16;
    let (h, n) = RoceHeaders::parse(&bytes).unwrap();
    assert_eq!(n, 16);
    assert_eq!(h.bth.opcode, Opcode::RC_SEND_LAST_INV);
    assert_eq!(h.ieth, Some(0x8000_2a01));
    // Built from fields, the header is the same bytes.
    let mut bth = BthRepr::new(Opcode::RC_SEND_LAST_INV, 0x123, Psn::new(0xabcd));
    bth.solicited = true;
    bth.ack_req = true;
    bth.pkey = 0xffff;
    let built = RoceHeaders::for_opcode(bth).with_ieth(0x8000_2a01);
    let mut out = [0u8; 16];
    built.emit(&mut out).unwrap();
    assert_eq!(out[..], bytes[..16]);
}

#[test]
fn an_ieth_cut_short_is_rejected_and_other_sends_carry_none() {
    for cut in 12..16 {
        assert!(
            RoceHeaders::parse(&SEND_ONLY_INV[..cut]).is_err(),
            "{cut} bytes: IETH incomplete"
        );
    }
    // The same bytes as a plain SEND Only (0x04): no IETH, the 4 bytes are payload.
    let mut plain = SEND_ONLY_INV;
    plain[0] = 0x04;
    let p = RocePacket::parse(&plain).unwrap();
    assert_eq!(p.headers.ieth, None);
    assert_eq!(p.payload.len(), 8);
    // An IETH on an opcode without one cannot be emitted.
    let bth = BthRepr::new(Opcode::RC_SEND_ONLY, 1, Psn::new(1));
    let wrong = RoceHeaders::for_opcode(bth).with_ieth(5);
    assert!(wrong.emit(&mut [0u8; 32]).is_err());
}
