//! Wire tests on real captures (`tests/vectors`, see its README): every RoCEv2 frame parses,
//! its ICRC verifies, and parse -> emit reproduces it byte for byte; decoded fields match what
//! tshark shows; damaged frames are rejected with the right error and never panic.
//!
//! The captures are part of the repository. They must be present: a missing file fails the
//! test.

use dpdk_roce::wire::aeth::{NakCode, Syndrome};
use dpdk_roce::wire::deth::GSI_QKEY;
use dpdk_roce::wire::frame::{classify, FrameError, FrameKind, RoceFrame};
use dpdk_roce::wire::ipv4;
use dpdk_roce::wire::opcode::Opcode;
use dpdk_roce::wire::psn::Psn;
use dpdk_roce::wire::{AethRepr, DethRepr, RethRepr};
use pcap_file::pcap::PcapReader;
use std::fs::File;
use std::net::Ipv4Addr;

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors");
const HISI: &str = "hw-hisilicon-rc-send.pcap";
const RXE: &str = "rxe-rdmacm-write-read.pcap";

/// All frames of a capture; index 0 is Wireshark's frame 1.
fn load(name: &str) -> Vec<Vec<u8>> {
    let path = format!("{VECTORS}/{name}");
    let file = File::open(&path).unwrap_or_else(|e| panic!("test vector {path} is missing ({e})"));
    let mut reader = PcapReader::new(file).expect("pcap header");
    let mut frames = Vec::new();
    while let Some(pkt) = reader.next_packet() {
        let pkt = pkt.expect("pcap record");
        assert_eq!(
            pkt.orig_len as usize,
            pkt.data.len(),
            "capture is not truncated"
        );
        frames.push(pkt.data.into_owned());
    }
    assert!(!frames.is_empty(), "{path} has no frames");
    frames
}

/// Independent of the code under test: Ethernet/IPv4/UDP with destination port 4791.
fn is_rocev2(f: &[u8]) -> bool {
    if f.len() < 34 || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return false;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    f.get(14 + ihl + 2..14 + ihl + 4) == Some(&[0x12, 0xb7][..])
}

/// Bytes of the IP packet plus the Ethernet header (what emit reproduces).
fn ip_end(f: &[u8]) -> usize {
    14 + usize::from(u16::from_be_bytes([f[16], f[17]]))
}

fn roce_frames(name: &str) -> Vec<(usize, Vec<u8>)> {
    load(name)
        .into_iter()
        .enumerate()
        .filter(|(_, f)| is_rocev2(f))
        .map(|(i, f)| (i + 1, f))
        .collect()
}

fn frame(name: &str, number: usize) -> Vec<u8> {
    let f = load(name).swap_remove(number - 1);
    assert!(is_rocev2(&f), "{name} frame {number} is RoCEv2");
    f
}

fn check_all_round_trip(name: &str) -> usize {
    let frames = roce_frames(name);
    for (n, f) in &frames {
        let parsed = RoceFrame::parse(f).unwrap_or_else(|e| panic!("{name} frame {n}: {e}"));
        let end = ip_end(f);
        let stored = u32::from_le_bytes(f[end - 4..end].try_into().unwrap());
        assert_eq!(parsed.icrc, stored, "{name} frame {n}");
        assert_eq!(parsed.compute_icrc(), Ok(stored), "{name} frame {n}");
        assert_eq!(parsed.buffer_len(), end, "{name} frame {n}");
        let mut out = vec![0u8; end];
        assert_eq!(parsed.emit(&mut out), Ok(end), "{name} frame {n}");
        assert_eq!(&out[..], &f[..end], "{name} frame {n}: re-emit differs");
        assert_eq!(classify(f), FrameKind::RoceV2);
        // Ethernet padding after the IP packet is ignored.
        let mut padded = f[..end].to_vec();
        padded.extend_from_slice(&[0u8; 7]);
        assert_eq!(RoceFrame::parse(&padded), Ok(parsed), "{name} frame {n}");
    }
    frames.len()
}

#[test]
fn hisilicon_all_frames_parse_verify_and_reemit() {
    assert_eq!(check_all_round_trip(HISI), 105);
}

#[test]
fn rxe_all_frames_parse_verify_and_reemit() {
    // tshark -r rxe-rdmacm-write-read.pcap -d udp.port==4791,infiniband: frames 1-11 and 16.
    assert_eq!(check_all_round_trip(RXE), 12);
    let numbers: Vec<usize> = roce_frames(RXE).iter().map(|(n, _)| *n).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 16]);
}

#[test]
fn non_roce_frames_are_classified_and_rejected() {
    let rxe = load(RXE);
    // Frames 12-15 are ARP.
    for f in &rxe[11..15] {
        assert_eq!(classify(f), FrameKind::Arp);
        assert_eq!(RoceFrame::parse(f), Err(FrameError::NotIpv4(0x0806)));
    }
    // hisilicon frames 10-14 are TCP.
    let hisi = load(HISI);
    for f in &hisi[9..14] {
        assert_eq!(classify(f), FrameKind::OtherIpv4);
        assert_eq!(RoceFrame::parse(f), Err(FrameError::NotUdp(6)));
    }
}

// ---- Field values as tshark -V shows them ----

#[test]
fn rxe_trace_cm_req() {
    // 1  LID: 65535 -> 192.168.2.24  CM: ConnectRequest
    let f = frame(RXE, 1);
    let p = RoceFrame::parse(&f).unwrap();
    assert_eq!(p.ipv4.dst_addr, Ipv4Addr::new(192, 168, 2, 24));
    assert_eq!(p.udp.src_port, 55410);
    assert_eq!(p.headers.bth.opcode, Opcode::UD_SEND_ONLY);
    assert_eq!(p.headers.bth.dest_qp, 1);
    assert_eq!(p.headers.bth.psn, Psn::new(82));
    assert_eq!(
        p.headers.deth,
        Some(DethRepr {
            qkey: GSI_QKEY,
            src_qp: 1
        })
    );
    assert_eq!(p.payload.len(), 256, "one MAD");
    assert_eq!(
        &p.payload[..4],
        &[0x01, 0x07, 0x02, 0x03],
        "MAD: base 1, CM, v2, Send"
    );
    assert_eq!(&p.payload[16..18], &[0x00, 0x10], "attribute REQ");
}

#[test]
fn rxe_trace_write_ack_read() {
    // 4  RC RDMA Write Only QP=0x000011, PSN 12726936, PadCnt 2, AckReq,
    //    RETH va 0x0000aaab26b58000 r_key 0x220 len 18, data "client-wrote-this\0"
    let f = frame(RXE, 4);
    let w = RoceFrame::parse(&f).unwrap();
    assert_eq!(w.headers.bth.opcode, Opcode::RC_WRITE_ONLY);
    assert_eq!(w.headers.bth.dest_qp, 0x11);
    assert_eq!(w.headers.bth.psn, Psn::new(12726936));
    assert!(w.headers.bth.ack_req);
    assert_eq!(w.headers.bth.pad_count, 2);
    assert_eq!(w.pad, 2);
    assert_eq!(
        w.headers.reth,
        Some(RethRepr {
            va: 0x0000_aaab_26b5_8000,
            rkey: 0x220,
            dma_len: 18
        })
    );
    assert_eq!(w.payload, b"client-wrote-this\0");
    // tshark prints the ICRC's wire bytes as a big-endian number: 0x403964ee.
    assert_eq!(w.icrc.to_le_bytes(), 0x403964ee_u32.to_be_bytes());

    // 5  RC Acknowledge QP=0x000017, same PSN, syndrome 31 (ACK, unlimited credits), MSN 1
    let f5 = frame(RXE, 5);
    let a = RoceFrame::parse(&f5).unwrap();
    assert_eq!(a.headers.bth.opcode, Opcode::RC_ACK);
    assert_eq!(a.headers.bth.dest_qp, 0x17);
    assert_eq!(a.headers.bth.psn, Psn::new(12726936));
    assert_eq!(a.headers.aeth, Some(AethRepr::ack(1)));
    assert!(a.payload.is_empty());

    // 6  RC RDMA Read Request, PSN 12726937, RETH len 4096
    let f6 = frame(RXE, 6);
    let r = RoceFrame::parse(&f6).unwrap();
    assert_eq!(r.headers.bth.opcode, Opcode::RC_READ_REQUEST);
    assert_eq!(r.headers.bth.psn, Psn::new(12726937));
    assert_eq!(
        r.headers.reth.map(|h| (h.va, h.dma_len)),
        Some((0xaaab_26b5_8000, 4096))
    );
    assert!(r.payload.is_empty());

    // 7-10  Read Response First / Middle / Middle / Last, PSNs 12726937..=12726940, 1024 bytes
    //       each (MTU 1024); first and last carry AETH syndrome 31, MSN 2.
    let expect = [
        (7, Opcode::RC_READ_RESPONSE_FIRST, true),
        (8, Opcode::RC_READ_RESPONSE_MIDDLE, false),
        (9, Opcode::RC_READ_RESPONSE_MIDDLE, false),
        (10, Opcode::RC_READ_RESPONSE_LAST, true),
    ];
    for (i, (n, op, has_aeth)) in expect.into_iter().enumerate() {
        let fr = frame(RXE, n);
        let p = RoceFrame::parse(&fr).unwrap();
        assert_eq!(p.headers.bth.opcode, op, "frame {n}");
        assert_eq!(
            p.headers.bth.psn,
            Psn::new(12726937 + i as u32),
            "frame {n}"
        );
        assert_eq!(p.payload.len(), 1024, "frame {n}");
        assert_eq!(p.headers.aeth.is_some(), has_aeth, "frame {n}");
        if let Some(aeth) = p.headers.aeth {
            assert_eq!(aeth.syndrome, Syndrome::Ack { credits: 31 });
            assert_eq!(aeth.msn, 2);
        }
    }
}

#[test]
fn hisilicon_trace_send_imm_and_ack() {
    // 15  RC Send Only Immediate QP=0x000048, PSN 0, PadCnt 3, ImmDt 0x00000001
    let f15 = frame(HISI, 15);
    let s = RoceFrame::parse(&f15).unwrap();
    assert_eq!(s.headers.bth.opcode, Opcode::RC_SEND_ONLY_IMM);
    assert_eq!(s.headers.bth.dest_qp, 0x48);
    assert_eq!(s.headers.bth.psn, Psn::new(0));
    assert_eq!(s.pad, 3);
    assert_eq!(s.headers.imm_dt, Some(1));
    assert_eq!(s.udp.src_port, 69);
    // HiSilicon sets a reserved bit in BTH byte 4 (masked in the ICRC); it is kept.
    assert_eq!(s.bth_resv, 0x10);
    // 192 = 20 + 8 + 16 + payload + 3 + 4
    assert_eq!(s.payload.len(), 192 - 20 - 8 - 16 - 3 - 4);

    // 16  RC Acknowledge QP=0x000045, syndrome 6 (ACK, 6 credits), MSN 1; ICRC 0x16c29c25
    let f16 = frame(HISI, 16);
    let a = RoceFrame::parse(&f16).unwrap();
    assert_eq!(a.headers.bth.opcode, Opcode::RC_ACK);
    assert_eq!(a.headers.bth.dest_qp, 0x45);
    assert_eq!(
        a.headers.aeth,
        Some(AethRepr {
            syndrome: Syndrome::Ack { credits: 6 },
            msn: 1
        })
    );
    assert_eq!(a.ipv4.ecn, 2);
    assert_eq!(a.ipv4.ttl, 64);
    assert!(a.ipv4.dont_frag);
    assert_eq!(a.icrc, 0x16c2_9c25);
}

// ---- Damaged frames ----

/// Recomputes the IPv4 header checksum of a frame in place.
fn fix_ip_checksum(f: &mut [u8]) {
    let hl = usize::from(f[14] & 0x0f) * 4;
    let mut p = ipv4::Packet::new_unchecked(&mut f[14..14 + hl.max(20)]);
    p.fill_checksum();
}

/// Recomputes the ICRC of a frame in place (IP total length as in the header).
fn fix_icrc(f: &mut [u8]) {
    let end = ip_end(f);
    let c = dpdk_roce::wire::icrc_parts(&f[14..end - 4], &[]).unwrap();
    f[end - 4..end].copy_from_slice(&c.to_le_bytes());
}

#[test]
fn every_truncation_is_rejected() {
    for name in [HISI, RXE] {
        for (n, f) in roce_frames(name) {
            let end = ip_end(&f);
            let ihl = usize::from(f[14] & 0x0f) * 4;
            for len in 0..end {
                let err = RoceFrame::parse(&f[..len]).expect_err("truncated frame accepted");
                let ok = match len {
                    0..=13 => err == FrameError::Truncated { what: "Ethernet" },
                    l if l < 14 + ihl => matches!(err, FrameError::Truncated { .. }),
                    _ => matches!(err, FrameError::BadIpTotalLen(t) if usize::from(t) == end - 14),
                };
                assert!(ok, "{name} frame {n} cut to {len}: {err:?}");
            }
        }
    }
}

#[test]
fn single_bit_flips_are_rejected() {
    // The Ethernet addresses are not covered by anything (the FCS is gone); BTH byte 4
    // (FECN/BECN/reserved) is masked out of the ICRC on purpose because switches may set
    // FECN/BECN. Every other bit from the EtherType to the ICRC is protected: by the EtherType
    // check, the IP header checksum (TOS and TTL are masked in the ICRC but checksummed) or the
    // ICRC. A flip in the UDP checksum turns 0 into a wrong non-zero checksum.
    let picks = [
        (RXE, 1),
        (RXE, 4),
        (RXE, 5),
        (RXE, 6),
        (RXE, 7),
        (HISI, 15),
        (HISI, 16),
    ];
    for (name, n) in picks {
        let f = frame(name, n);
        let end = ip_end(&f);
        let ihl = usize::from(f[14] & 0x0f) * 4;
        let bth_byte4 = 14 + ihl + 8 + 4;
        let mut checked = 0;
        for byte in 12..end {
            if byte == bth_byte4 {
                continue;
            }
            for bit in 0..8 {
                let mut g = f.clone();
                g[byte] ^= 1 << bit;
                let r = RoceFrame::parse(&g);
                assert!(
                    r.is_err(),
                    "{name} frame {n}: flip byte {byte} bit {bit} accepted"
                );
                if byte >= 14 + ihl + 8 + 12 {
                    // BTH PSN, extension headers, payload, pad, ICRC: only the ICRC catches it.
                    assert!(
                        matches!(r, Err(FrameError::BadIcrc { .. })),
                        "{name} frame {n}: byte {byte} bit {bit}: {r:?}"
                    );
                }
                if byte == 14 + 8 || byte == 14 + 1 {
                    // TTL and TOS are masked in the ICRC; the IP checksum catches them.
                    assert_eq!(r, Err(FrameError::BadIpChecksum));
                }
                checked += 1;
            }
        }
        assert!(checked >= (end - 13) * 8 - 16);
        // The masked BTH byte 4: FECN/BECN changes are legal and survive parsing.
        let mut g = f.clone();
        g[bth_byte4] |= 0xc0;
        let p = RoceFrame::parse(&g).unwrap();
        assert!(p.headers.bth.fecn && p.headers.bth.becn);
    }
}

#[test]
fn wrong_icrc() {
    let mut f = frame(HISI, 16);
    f[61] ^= 0x80;
    assert_eq!(
        RoceFrame::parse(&f),
        Err(FrameError::BadIcrc {
            expected: 0x16c2_9c25,
            found: 0x96c2_9c25
        })
    );
}

#[test]
fn pad_count_larger_than_payload() {
    // The ACK has no payload; PadCnt 2 (with a matching ICRC) cannot be satisfied.
    let mut f = frame(HISI, 16);
    let bth = 14 + 20 + 8;
    f[bth + 1] |= 2 << 4;
    fix_icrc(&mut f);
    assert_eq!(
        RoceFrame::parse(&f),
        Err(FrameError::BadPadCnt {
            pad: 2,
            available: 0
        })
    );
    // WRITE only with 18 bytes + 2 pad: PadCnt 3 fits (payload shrinks), and the ICRC is fixed,
    // so it parses: the pad is only a count.
    let mut w = frame(RXE, 4);
    w[bth + 1] = (w[bth + 1] & !0x30) | (3 << 4);
    fix_icrc(&mut w);
    assert_eq!(RoceFrame::parse(&w).unwrap().payload.len(), 17);
}

#[test]
fn payload_on_ack_rejected() {
    // Append 4 bytes to the ACK, fix lengths, IP checksum and ICRC: still not an ACK.
    let f = frame(HISI, 16);
    let mut g = f[..58].to_vec();
    g.extend_from_slice(&[1, 2, 3, 4, 0, 0, 0, 0]);
    g[16..18].copy_from_slice(&(0x30u16 + 4).to_be_bytes());
    g[38..40].copy_from_slice(&(0x1cu16 + 4).to_be_bytes());
    fix_ip_checksum(&mut g);
    fix_icrc(&mut g);
    assert_eq!(
        RoceFrame::parse(&g),
        Err(FrameError::UnexpectedPayload {
            opcode: 0x11,
            len: 4
        })
    );
}

#[test]
fn wrong_udp_length() {
    let f = frame(RXE, 4);
    for delta in [-1i32, 1, -8, 100] {
        let mut g = f.clone();
        let len = u16::from_be_bytes([g[38], g[39]]) as i32 + delta;
        g[38..40].copy_from_slice(&(len as u16).to_be_bytes());
        fix_icrc(&mut g);
        assert_eq!(
            RoceFrame::parse(&g),
            Err(FrameError::BadUdpLength(len as u16))
        );
    }
}

#[test]
fn wrong_ip_total_length() {
    let f = frame(RXE, 5);
    let total = u16::from_be_bytes([f[16], f[17]]);
    // Beyond the frame, or shorter than the IP header: bad total length.
    for bad in [total + 1, total + 1000, 19, 0] {
        let mut g = f.clone();
        g[16..18].copy_from_slice(&bad.to_be_bytes());
        fix_ip_checksum(&mut g);
        assert_eq!(RoceFrame::parse(&g), Err(FrameError::BadIpTotalLen(bad)));
    }
    // Shorter but plausible: the UDP length no longer matches.
    let mut g = f.clone();
    g[16..18].copy_from_slice(&(total - 4).to_be_bytes());
    fix_ip_checksum(&mut g);
    assert_eq!(
        RoceFrame::parse(&g),
        Err(FrameError::BadUdpLength(total - 20))
    );
    // Without fixing the IP checksum, the checksum catches it.
    let mut g = f.clone();
    g[17] ^= 0x10;
    assert_eq!(RoceFrame::parse(&g), Err(FrameError::BadIpChecksum));
}

#[test]
fn other_header_checks() {
    let f = frame(HISI, 16);
    let with = |i: usize, v: u8, fix: bool| {
        let mut g = f.clone();
        g[i] = v;
        if fix {
            fix_ip_checksum(&mut g);
        }
        RoceFrame::parse(&g).map(|_| ())
    };
    assert_eq!(with(14, 0x65, true), Err(FrameError::BadIpVersion(6)));
    assert_eq!(with(14, 0x44, true), Err(FrameError::BadIpHeaderLen(16)));
    assert_eq!(with(23, 6, true), Err(FrameError::NotUdp(6)));
    assert_eq!(with(20, 0x20, true), Err(FrameError::IpFragment));
    assert_eq!(with(37, 0xb8, false), Err(FrameError::NotRoce(4792)));
    assert_eq!(with(43, 0x41, false), Err(FrameError::BadTver(1)));
    assert_eq!(with(42, 0x15, false), Err(FrameError::UnknownOpcode(0x15)));
    assert_eq!(with(12, 0x86, false), Err(FrameError::NotIpv4(0x8600)));
    // A correct non-zero UDP checksum is accepted (and kept for re-emit); a wrong one is not.
    let mut g = f.clone();
    let mut u = dpdk_roce::wire::udp::Packet::new_unchecked(&mut g[34..62]);
    u.fill_checksum(
        Ipv4Addr::new(192, 168, 70, 6),
        Ipv4Addr::new(192, 168, 70, 4),
    );
    let cks = u.checksum();
    let p = RoceFrame::parse(&g).unwrap();
    assert_eq!(p.udp.checksum, cks);
    let mut out = [0u8; 62];
    p.emit(&mut out).unwrap();
    assert_eq!(out[..], g[..]);
    g[40] ^= 1;
    assert_eq!(RoceFrame::parse(&g), Err(FrameError::BadUdpChecksum));
}

#[test]
fn nak_syndromes_survive_a_frame_round_trip() {
    // Take the real ACK and turn it into each NAK and an RNR NAK.
    let f = frame(HISI, 16);
    let base = RoceFrame::parse(&f).unwrap();
    for aeth in [
        AethRepr::nak(NakCode::PsnSequenceError, 7),
        AethRepr::nak(NakCode::InvalidRequest, 7),
        AethRepr::nak(NakCode::RemoteAccessError, 7),
        AethRepr::nak(NakCode::RemoteOperationalError, 7),
        AethRepr::rnr_nak(12, 7),
    ] {
        let frame = RoceFrame::new(
            base.eth,
            base.ipv4,
            base.udp,
            base.headers.with_aeth(aeth),
            base.payload,
        )
        .unwrap();
        let mut out = [0u8; 62];
        frame.emit(&mut out).unwrap();
        assert_eq!(out[54], aeth.syndrome.to_byte());
        assert_eq!(RoceFrame::parse(&out), Ok(frame));
    }
}
