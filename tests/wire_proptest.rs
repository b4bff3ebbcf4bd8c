//! Property tests: random headers for every opcode survive emit -> parse unchanged; random
//! bytes and random damage to valid frames never panic any parser.

use dpdk_roce::wire::aeth::{AethRepr, Syndrome};
use dpdk_roce::wire::ethernet::{EtherType, EthernetAddress, EthernetRepr};
use dpdk_roce::wire::frame::{classify, ReceivedPacket, RoceFrame};
use dpdk_roce::wire::opcode::{OpFlags, Opcode, OPCODE_TABLE};
use dpdk_roce::wire::{
    aeth, arp, atomic_ack_eth, atomic_eth, bth, deth, ethernet, icrc_frame, ieth, immdt, ipv4,
    reth, udp, ArpRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, IethRepr, ImmDtRepr,
    Ipv4Repr, Psn, RethRepr, RoceHeaders, UdpRepr, IPPROTO_UDP,
};
use proptest::prelude::*;
use std::net::Ipv4Addr;

fn known_opcodes() -> Vec<Opcode> {
    (0..=255u8)
        .filter(|v| OPCODE_TABLE[usize::from(*v)].is_some())
        .map(Opcode)
        .collect()
}

prop_compose! {
    fn bth_for(op: Opcode)(
        solicited: bool, mig_req: bool, pkey: u16, fecn: bool, becn: bool,
        dest_qp in 0u32..1 << 24, ack_req: bool, psn in 0u32..1 << 24,
    ) -> BthRepr {
        BthRepr {
            opcode: op, solicited, mig_req, pad_count: 0, tver: 0, pkey, fecn, becn, dest_qp,
            ack_req, psn: Psn::new(psn),
        }
    }
}

type Exts = (
    (u64, u32, u32),
    (u8, u32),
    (u32, u32),
    (u32, u32),
    (u64, u32, u64, u64),
    u64,
);

fn exts() -> impl Strategy<Value = Exts> {
    (
        (any::<u64>(), any::<u32>(), any::<u32>()),
        (any::<u8>(), 0u32..1 << 24),
        (any::<u32>(), 0u32..1 << 24),
        (any::<u32>(), any::<u32>()),
        (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()),
        any::<u64>(),
    )
}

fn build_headers(bth: BthRepr, e: Exts) -> RoceHeaders {
    let (reth, aeth, deth, (imm, ieth), atomic, orig) = e;
    let f = bth.opcode.flags();
    let mut h = RoceHeaders::new(bth);
    if f.contains(OpFlags::RETH) {
        h = h.with_reth(RethRepr {
            va: reth.0,
            rkey: reth.1,
            dma_len: reth.2,
        });
    }
    if f.contains(OpFlags::AETH) {
        h = h.with_aeth(AethRepr {
            syndrome: Syndrome::from_byte(aeth.0),
            msn: aeth.1,
        });
    }
    if f.contains(OpFlags::DETH) {
        h = h.with_deth(DethRepr {
            qkey: deth.0,
            src_qp: deth.1,
        });
    }
    if f.contains(OpFlags::IMMDT) {
        h = h.with_imm(imm);
    }
    if f.contains(OpFlags::IETH) {
        h = h.with_ieth(ieth);
    }
    if f.contains(OpFlags::ATOMIC_ETH) {
        h = h.with_atomic_eth(AtomicEthRepr {
            va: atomic.0,
            rkey: atomic.1,
            swap_add: atomic.2,
            compare: atomic.3,
        });
    }
    if f.contains(OpFlags::ATOMIC_ACK_ETH) {
        h = h.with_atomic_ack_eth(AtomicAckEthRepr { orig_data: orig });
    }
    h
}

fn headers() -> impl Strategy<Value = RoceHeaders> {
    proptest::sample::select(known_opcodes())
        .prop_flat_map(|op| (bth_for(op), exts()))
        .prop_map(|(bth, e)| build_headers(bth, e))
}

prop_compose! {
    fn frame_parts()(
        headers in headers(),
        payload in proptest::collection::vec(any::<u8>(), 0..=300),
        macs in (any::<[u8; 6]>(), any::<[u8; 6]>()),
        ips in (any::<u32>(), any::<u32>()),
        dscp in 0u8..64, ecn in 0u8..4, ident: u16, dont_frag: bool, ttl: u8,
        src_port: u16, bth_resv in 0u8..64,
    ) -> (RoceHeaders, Vec<u8>, EthernetRepr, Ipv4Repr, UdpRepr, u8) {
        let payload = if headers.bth.opcode.flags().contains(OpFlags::PAYLOAD) {
            payload
        } else {
            Vec::new()
        };
        let eth = EthernetRepr {
            src_addr: EthernetAddress(macs.0),
            dst_addr: EthernetAddress(macs.1),
            ethertype: EtherType::IPV4,
        };
        let ip = Ipv4Repr {
            src_addr: Ipv4Addr::from(ips.0),
            dst_addr: Ipv4Addr::from(ips.1),
            protocol: IPPROTO_UDP,
            dscp, ecn, ident, dont_frag, ttl,
        };
        (headers, payload, eth, ip, UdpRepr::rocev2(src_port), bth_resv)
    }
}

/// Every header view and repr parser over the same bytes: none may panic.
fn parse_everything(data: &[u8]) {
    let _ = RoceFrame::parse(data);
    let _ = classify(data);
    let _ = icrc_frame(data);
    let _ = RoceHeaders::parse(data);
    let _ = ethernet::Packet::new_checked(data).and_then(|p| EthernetRepr::parse(&p));
    let _ = arp::Packet::new_checked(data).and_then(|p| ArpRepr::parse(&p));
    let _ = ipv4::Packet::new_checked(data).and_then(|p| {
        let _ = (p.verify_checksum(), p.payload());
        Ipv4Repr::parse(&p)
    });
    let _ = udp::Packet::new_checked(data).and_then(|p| {
        let _ = p.verify_checksum(Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST);
        let _ = p.payload();
        UdpRepr::parse(&p)
    });
    let _ = bth::Packet::new_checked(data).and_then(|p| BthRepr::parse(&p));
    let _ = reth::Packet::new_checked(data).and_then(|p| RethRepr::parse(&p));
    let _ = aeth::Packet::new_checked(data).and_then(|p| AethRepr::parse(&p));
    let _ = deth::Packet::new_checked(data).and_then(|p| DethRepr::parse(&p));
    let _ = immdt::Packet::new_checked(data).and_then(|p| ImmDtRepr::parse(&p));
    let _ = ieth::Packet::new_checked(data).and_then(|p| IethRepr::parse(&p));
    let _ = atomic_eth::Packet::new_checked(data).and_then(|p| AtomicEthRepr::parse(&p));
    let _ = atomic_ack_eth::Packet::new_checked(data).and_then(|p| AtomicAckEthRepr::parse(&p));
}

/// The receive path's parse agrees with `RoceFrame::parse` on any bytes: the same error, or the
/// addresses and transport packet of the same frame.
fn received_agrees(data: &[u8]) -> Result<(), TestCaseError> {
    let full = RoceFrame::parse(data).map(|f| ReceivedPacket {
        src_ip: f.ipv4.src_addr.into(),
        dst_ip: f.ipv4.dst_addr.into(),
        ecn: f.ipv4.ecn,
        packet: f.packet(),
    });
    prop_assert_eq!(ReceivedPacket::parse_on_port(data, udp::ROCEV2_PORT), full);
    Ok(())
}

/// If a (possibly damaged) frame parses, emitting it and parsing again gives the same frame.
fn reemit_if_valid(data: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(f) = RoceFrame::parse(data) {
        let mut out = vec![0u8; f.buffer_len()];
        prop_assert_eq!(f.emit(&mut out), Ok(out.len()));
        prop_assert_eq!(RoceFrame::parse(&out), Ok(f));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn frame_emit_parse_round_trip(parts in frame_parts()) {
        let (headers, payload, eth, ip, udp, bth_resv) = parts;
        let mut frame = RoceFrame::new(eth, ip, udp, headers, &payload).unwrap();
        frame.bth_resv = bth_resv;
        let mut buf = vec![0u8; frame.buffer_len()];
        let n = frame.emit(&mut buf).unwrap();
        prop_assert_eq!(n, buf.len());
        prop_assert_eq!((n - 14) % 4, 0);
        let parsed = RoceFrame::parse(&buf).unwrap();
        prop_assert_eq!(parsed, frame);
        received_agrees(&buf)?;
        // The transport-level headers alone round-trip too.
        let ib = &buf[14 + 20 + 8..];
        let (h, len) = RoceHeaders::parse(ib).unwrap();
        prop_assert_eq!(h, frame.headers);
        prop_assert_eq!(len, headers.header_len());
        // And every truncation fails without panic.
        for cut in [0, 13, 14, 33, 34, 41, 42, 53, n - 5, n - 1] {
            prop_assert!(RoceFrame::parse(&buf[..cut.min(n - 1)]).is_err());
            received_agrees(&buf[..cut.min(n - 1)])?;
        }
    }

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        parse_everything(&data);
        received_agrees(&data)?;
        reemit_if_valid(&data)?;
    }

    #[test]
    fn random_bytes_behind_valid_headers_never_panic(
        op in proptest::sample::select(known_opcodes()),
        tail in proptest::collection::vec(any::<u8>(), 0..80),
        ihl in 0u8..16,
    ) {
        // Ethernet + IPv4 + UDP to 4791 + a known opcode, then garbage: gets deep into parse.
        let mut data = vec![0u8; 14 + 20 + 8 + 1];
        data[12] = 0x08;
        data[14] = 0x40 | ihl;
        let total = (20 + 8 + 1 + tail.len()) as u16;
        data[16..18].copy_from_slice(&total.to_be_bytes());
        data[23] = 17;
        data[36..38].copy_from_slice(&4791u16.to_be_bytes());
        data[38..40].copy_from_slice(&(total - 20).to_be_bytes());
        data[42] = op.0;
        data.extend_from_slice(&tail);
        ipv4::Packet::new_unchecked(&mut data[14..34]).fill_checksum();
        parse_everything(&data);
        parse_everything(&data[14..]);
        parse_everything(&data[42..]);
        received_agrees(&data)?;
        reemit_if_valid(&data)?;
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        parts in frame_parts(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        cut in any::<prop::sample::Index>(),
        truncate: bool,
    ) {
        let (headers, payload, eth, ip, udp, _) = parts;
        let frame = RoceFrame::new(eth, ip, udp, headers, &payload).unwrap();
        let mut buf = vec![0u8; frame.buffer_len()];
        frame.emit(&mut buf).unwrap();
        for (at, x) in flips {
            let i = at.index(buf.len());
            buf[i] ^= x;
        }
        let data = if truncate { &buf[..cut.index(buf.len())] } else { &buf[..] };
        parse_everything(data);
        parse_everything(data.get(14..).unwrap_or(&[]));
        received_agrees(data)?;
        reemit_if_valid(data)?;
    }
}
