//! The prediction against the full parse: whatever it accepts, the full parse and the receive
//! filter accept with the same headers and payload; every plain WRITE Only for us is accepted.

use super::*;
use crate::wire::frame::fixtures;
use crate::wire::frame::{ReceivedPacket, RoceFrame};
use crate::wire::psn::Psn;
use crate::wire::roce::RoceHeaders;
use crate::wire::udp::UdpRepr;
use proptest::prelude::*;

const MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn write_only(payload: &[u8], ack_req: bool, psn: u32) -> Vec<u8> {
    let (eth, ip) = fixtures::eth_ip();
    let mut bth = BthRepr::new(Opcode::RC_WRITE_ONLY, 0x11, Psn::new(psn));
    bth.ack_req = ack_req;
    let headers = RoceHeaders::new(bth).with_reth(RethRepr {
        va: 0x5555_0000_1000,
        rkey: 0x1234,
        dma_len: payload.len() as u32,
    });
    let f = RoceFrame::new(eth, ip, UdpRepr::rocev2(0xc000), headers, payload).unwrap();
    let mut buf = vec![0u8; f.buffer_len()];
    f.emit(&mut buf).unwrap();
    buf
}

/// What the receive path concludes from the full parse: the packet if the filter hands it up
/// as an RC WRITE Only with only a RETH.
fn full(frame: &[u8]) -> Option<WriteOnlyFrame<'_>> {
    let p = ReceivedPacket::parse_on_port(frame, ROCEV2_PORT).ok()?;
    let h = p.packet.headers;
    let plain = RoceHeaders {
        reth: None,
        ..RoceHeaders::new(h.bth)
    };
    let only_reth = RoceHeaders { reth: None, ..h } == plain;
    (frame[..6] == MAC.0 && p.dst_ip == IP && h.bth.opcode == Opcode::RC_WRITE_ONLY && only_reth)
        .then_some(WriteOnlyFrame {
            src_ip: match p.src_ip {
                std::net::IpAddr::V4(a) => a,
                std::net::IpAddr::V6(_) => return None,
            },
            bth: h.bth,
            reth: h.reth?,
            payload: p.packet.payload,
        })
}

/// Frames the prediction leaves to the full parse on purpose although it accepts them.
fn out_of_scope(frame: &[u8]) -> bool {
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    frame[14] != 0x45 || total + 14 != frame.len() || frame[40..42] != [0, 0]
}

#[test]
fn write_only_frames_of_every_pad_are_read_as_the_full_parse_reads_them() {
    for n in 0..=9 {
        let payload: Vec<u8> = (0..n as u8).collect();
        let f = write_only(&payload, n % 2 == 0, 0xff_fffe);
        let got = WriteOnlyFrame::predict(&f, MAC, IP).expect("predicted");
        assert_eq!(Some(got), full(&f));
        assert_eq!(got.payload, &payload[..]);
        assert_eq!(got.reth.dma_len, n as u32);
        assert_eq!(got.bth.ack_req, n % 2 == 0);
        assert_eq!(got.src_ip, Ipv4Addr::new(10, 0, 0, 1));
    }
}

#[test]
fn other_frames_are_left_to_the_full_parse() {
    let f = write_only(b"12345678", true, 7);
    // Another MAC or address: the filter drops it, the full path counts why.
    assert_eq!(
        WriteOnlyFrame::predict(&f, EthernetAddress([2, 0, 0, 0, 0, 9]), IP),
        None
    );
    assert_eq!(
        WriteOnlyFrame::predict(&f, MAC, Ipv4Addr::new(10, 0, 0, 9)),
        None
    );
    // Ethernet padding, a wrong ICRC, a wrong IPv4 checksum, another opcode, truncation.
    let mut padded = f.clone();
    padded.extend_from_slice(&[0; 6]);
    assert_eq!(WriteOnlyFrame::predict(&padded, MAC, IP), None);
    assert!(full(&padded).is_some());
    let mut bad = f.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(WriteOnlyFrame::predict(&bad, MAC, IP), None);
    let mut bad = f.clone();
    bad[24] ^= 1;
    assert_eq!(WriteOnlyFrame::predict(&bad, MAC, IP), None);
    let mut send = f.clone();
    send[42] = Opcode::RC_WRITE_ONLY_IMM.0;
    assert_eq!(WriteOnlyFrame::predict(&send, MAC, IP), None);
    for len in 0..f.len() {
        assert_eq!(
            WriteOnlyFrame::predict(&f[..len], MAC, IP),
            None,
            "{len} bytes"
        );
    }
}

/// A RoCEv2/IPv6 WRITE Only to our MAC is never predicted, even with our IPv4 address where
/// the IPv4 destination would be (bytes 8..12 of the IPv6 source address): the general path
/// takes it.
#[test]
fn ipv6_frames_are_never_predicted() {
    use crate::wire::frame6::RoceFrame6;
    use crate::wire::ipv6::Ipv6Repr;
    let (mut eth, _) = fixtures::eth_ip();
    eth.ethertype = EtherType::IPV6;
    let src: std::net::Ipv6Addr = "fd00:77::a00:2:0:1".parse().unwrap();
    let ip = Ipv6Repr::rocev2(src, "fd00:77::2".parse().unwrap(), 64);
    let mut bth = BthRepr::new(Opcode::RC_WRITE_ONLY, 0x11, Psn::new(7));
    bth.ack_req = true;
    let headers = RoceHeaders::new(bth).with_reth(RethRepr {
        va: 0x5555_0000_1000,
        rkey: 0x1234,
        dma_len: 8,
    });
    let f = RoceFrame6::new(eth, ip, UdpRepr::rocev2(0xc000), headers, b"12345678").unwrap();
    let mut buf = vec![0u8; f.buffer_len()];
    f.emit(&mut buf).unwrap();
    assert_eq!(&buf[30..34], &IP.octets(), "our IPv4 address at its offset");
    assert!(ReceivedPacket::parse_on_port(&buf, ROCEV2_PORT).is_ok());
    assert_eq!(WriteOnlyFrame::predict(&buf, MAC, IP), None);
}

/// Recomputes the IPv4 header checksum and the ICRC of a (possibly mutated) frame where its
/// lengths allow.
fn reseal_checksums(f: &mut [u8]) {
    if f.len() < 34 || f[14] & 0x0f != 5 {
        return;
    }
    f[24..26].copy_from_slice(&[0, 0]);
    let sum = !crate::wire::ipv4::ones_complement_sum(&f[14..34], 0);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    if let Ok((icrc, _)) = crate::wire::icrc::icrc_frame(f) {
        f[14 + total - 4..14 + total].copy_from_slice(&icrc.to_le_bytes());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Any mutation of a WRITE Only frame: what the prediction accepts, the full parse accepts
    /// identically; what the full parse accepts as a plain WRITE Only for us, the prediction
    /// accepts too.
    #[test]
    fn prediction_agrees_with_the_full_parse(
        n in 0usize..40,
        ack_req: bool,
        psn in 0u32..0x100_0000,
        flips in proptest::collection::vec((0usize..128, any::<u8>()), 0..3),
        cut in 0usize..8,
        extra in 0usize..4,
        reseal: bool,
    ) {
        let payload: Vec<u8> = (0..n as u8).collect();
        let mut f = write_only(&payload, ack_req, psn);
        for (at, x) in flips {
            let at = at % f.len();
            f[at] ^= x;
        }
        let keep = f.len().saturating_sub(cut);
        f.truncate(keep);
        f.extend(std::iter::repeat_n(0u8, extra));
        if reseal {
            // Checksums made right again, so the checks behind them are reached.
            reseal_checksums(&mut f);
        }
        let predicted = WriteOnlyFrame::predict(&f, MAC, IP);
        let parsed = full(&f);
        if predicted.is_some() {
            prop_assert_eq!(predicted, parsed);
        } else if parsed.is_some() {
            prop_assert!(out_of_scope(&f), "a plain WRITE Only the prediction refused");
        }
    }
}
