//! The frame builder: Ethernet, IP (v4 or v6), UDP and RoCE headers, the payload read from
//! registered memory or pinned for zero-copy transmit, and the ICRC. The BTH follows the IP
//! family's headers: at 42 bytes over IPv4, at 62 over IPv6 (`Route::headers_len`,
//! `Net::headers_len`).

use super::*;
use crate::io::FrameBuf;

/// The parts of a [`Host`] a frame is built from, borrowed apart from its QP table: the
/// transmit path builds a QP's frame while that QP's entry (its cached route) stays borrowed.
pub(super) struct FrameBuilder<'h, M> {
    pub(super) mem: &'h M,
    pub(super) net: &'h mut Net,
    pub(super) stats: &'h mut HostStats,
}

impl<M: Memory> FrameBuilder<'_, M> {
    /// Builds a pinned frame (see `poll_transmit_pinned`); `None` when the memory cannot pin
    /// (build a whole frame instead), `Some(false)` when the packet was dropped and counted.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn build_pinned<B: FrameBuf + ?Sized>(
        &mut self,
        now: Instant,
        dst: IpAddr,
        src_qpn: u32,
        dst_qpn: u32,
        tx: &Transmit,
        out: &mut B,
        pinned: &mut PinnedTx,
    ) -> Option<bool> {
        let table = self.mem.pin_table()?;
        pinned.segments.clear();
        for seg in tx.payload.segments() {
            let access = match seg.kind {
                KeyKind::Local => Access::empty(),
                KeyKind::Remote => Access::REMOTE_READ,
            };
            match table.pin(seg, access) {
                Ok(g) => pinned.segments.push(g.into_token()),
                Err(_) => {
                    for t in pinned.segments.drain(..) {
                        table.unpin(t);
                    }
                    self.stats.tx_payload_errors += 1;
                    return Some(false);
                }
            }
        }
        let unpin = |pinned: &mut PinnedTx| {
            for t in pinned.segments.drain(..) {
                table.unpin(t);
            }
        };
        let len = tx.payload.len();
        let pad = usize::from(pad_for(len));
        let mut headers = tx.headers;
        headers.bth.pad_count = pad as u8;
        // The Ethernet/IP/UDP headers from the destination's template, then the RoCE headers.
        let at_bth = Net::headers_len(dst);
        let at_payload = at_bth + headers.header_len();
        let Some(out) = out.sized(at_payload) else {
            unpin(pinned);
            self.stats.tx_build_errors += 1;
            return Some(false);
        };
        let roce_len = at_payload - at_bth + len + pad + ICRC_LEN;
        let written = self.net.write_headers_any_len(
            now,
            dst,
            src_qpn,
            dst_qpn,
            roce_len,
            &mut out[..at_bth],
        );
        if !self.headers_written(written) {
            unpin(pinned);
            return Some(false);
        }
        if headers.emit_inlined(&mut out[at_bth..]).is_err() {
            unpin(pinned);
            self.stats.tx_build_errors += 1;
            return Some(false);
        }
        let mut h = IcrcHasher::new();
        if h.update_headers(&out[ETH_LEN..]).is_err() {
            unpin(pinned);
            self.stats.tx_build_errors += 1;
            return Some(false);
        }
        for t in &pinned.segments {
            table.for_each_pinned_chunk(t, &mut |c| h.update(c));
        }
        h.update(&[0u8; 3][..pad]);
        pinned.trailer = [0; 7];
        pinned.trailer[pad..pad + 4].copy_from_slice(&h.finalize().to_le_bytes());
        pinned.trailer_len = (pad + 4) as u8;
        self.stats.tx_frames += 1;
        self.stats.tx_pinned += 1;
        Some(true)
    }

    /// Builds the frame of an RC RDMA WRITE Only request (header prediction on send) into
    /// `out` along `route`: the bytes `build_frame` writes for the same packet, in the same
    /// order (payload read first, so a packet dropped for it takes no IP identification).
    /// False (and counted as `build_frame` counts it) when it cannot be built.
    #[inline(always)]
    pub(super) fn build_write_only<B: FrameBuf + ?Sized>(
        &mut self,
        route: &Route,
        w: &WriteOnlyRequest,
        out: &mut B,
    ) -> bool {
        let at_bth = route.headers_len();
        let at_payload = at_bth + BTH_LEN + RETH_LEN;
        let plen = w.payload.len as usize;
        let pad = pad_for(plen);
        let pay_end = at_payload + plen;
        let body_end = pay_end + usize::from(pad);
        let len = body_end + ICRC_LEN;
        // Sized, not cleared: every byte is written below.
        let Some(out) = out.sized(len) else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        out[pay_end..pay_end + ICRC_LEN].copy_from_slice(&[0; ICRC_LEN]);
        if self
            .mem
            .read(&w.payload, Access::empty(), &mut out[at_payload..pay_end])
            .is_err()
        {
            self.stats.tx_payload_errors += 1;
            return false;
        }
        let written = self
            .net
            .write_route_headers(route, len - at_bth, &mut out[..at_bth]);
        if !self.headers_written(written) {
            return false;
        }
        // `out` is `len` bytes long: both chunks are there (a failure would be counted).
        let Some((bth, rest)) = out[at_bth..].split_first_chunk_mut::<BTH_LEN>() else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        let Some((reth, _)) = rest.split_first_chunk_mut::<RETH_LEN>() else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        BthRepr {
            pad_count: pad,
            ..w.bth
        }
        .write_to(bth);
        w.reth.write_to(reth);
        if !self.seal(out, body_end) {
            return false;
        }
        self.stats.tx_predicted += 1;
        true
    }

    /// Counts a failed Ethernet/IP/UDP header write: a packet too long for IPv4 is a build
    /// error, anything else has no peer. True when the headers were written.
    #[inline(always)]
    pub(super) fn headers_written(&mut self, written: Result<usize, crate::net::NetError>) -> bool {
        match written {
            Ok(_) => true,
            Err(crate::net::NetError::TooLong { .. }) => {
                self.stats.tx_build_errors += 1;
                false
            }
            Err(_) => {
                self.stats.tx_no_peer += 1;
                false
            }
        }
    }

    /// Writes the ICRC over `out[ETH_LEN..body_end]` (an IPv4 or IPv6 packet: the ICRC reads
    /// the version) into `out[body_end..]` and counts the frame; false (a build error, counted)
    /// when the headers do not hash.
    #[inline(always)]
    pub(super) fn seal(&mut self, out: &mut [u8], body_end: usize) -> bool {
        let Ok(icrc) = icrc_in_place(&mut out[ETH_LEN..body_end]) else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        out[body_end..].copy_from_slice(&icrc.to_le_bytes());
        self.stats.tx_frames += 1;
        true
    }

    /// Builds the complete frame into `out`, in place: the payload read (or copied) into its
    /// place, the Ethernet/IP/UDP headers from the destination's template, the RoCE headers,
    /// the zero pad and the ICRC over the emitted bytes. The bytes are those of
    /// `RoceFrame::new(..).emit(..)` (`RoceFrame6` over IPv6) from the template's reprs. False (and counted) when it cannot be
    /// built: payload unreadable, no peer MAC, or headers that do not emit.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn build_frame<B: FrameBuf + ?Sized>(
        &mut self,
        now: Instant,
        to: To<'_>,
        src_qpn: u32,
        dst_qpn: u32,
        headers: &RoceHeaders,
        body: Body<'_>,
        out: &mut B,
    ) -> bool {
        let payload_len = match body {
            Body::Bytes(b) => b.len(),
            Body::Gather(p) => p.len(),
        };
        let pad = pad_for(payload_len);
        let at_bth = match to {
            To::Route(_, Some(route)) => route.headers_len(),
            To::Route(dst, None) | To::Ip(dst) => Net::headers_len(dst),
        };
        let at_payload = at_bth + headers.header_len();
        let body_end = at_payload + payload_len + usize::from(pad);
        let len = body_end + ICRC_LEN;
        // Sized, not cleared: every byte is written below (the template's headers, the RoCE
        // headers, whose emit writes each byte of their span, the payload, the zero pad and
        // the ICRC), so the bytes of the previous frame in the reused buffer do not matter.
        let Some(out) = out.sized(len) else {
            self.stats.tx_build_errors += 1;
            return false;
        };
        let pay_end = at_payload + payload_len;
        // The pad (at most 3 bytes) is zero; the ICRC after it is written last.
        out[pay_end..pay_end + ICRC_LEN].copy_from_slice(&[0; ICRC_LEN]);
        let payload = &mut out[at_payload..pay_end];
        match body {
            Body::Bytes(b) => payload.copy_from_slice(b),
            Body::Gather(p) => {
                if p.gather(self.mem, payload).is_err() {
                    self.stats.tx_payload_errors += 1;
                    return false;
                }
            }
        }
        let roce_len = len - at_bth;
        let written = match to {
            To::Route(_, Some(route)) => {
                self.net
                    .write_route_headers(route, roce_len, &mut out[..at_bth])
            }
            To::Route(dst, None) | To::Ip(dst) => self.net.write_headers_any_len(
                now,
                dst,
                src_qpn,
                dst_qpn,
                roce_len,
                &mut out[..at_bth],
            ),
        };
        if !self.headers_written(written) {
            return false;
        }
        // Emitted as the QP made them, then the pad count set in the BTH (no header copy).
        if headers.emit_inlined(&mut out[at_bth..at_payload]).is_err() {
            self.stats.tx_build_errors += 1;
            return false;
        }
        crate::wire::bth::Packet::new_unchecked(&mut out[at_bth..]).set_pad_count(pad);
        self.seal(out, body_end)
    }
}

/// Where a frame being built goes.
#[derive(Clone, Copy)]
pub(super) enum To<'a> {
    /// To this address, looked up in the neighbour layer for this frame.
    Ip(IpAddr),
    /// To this address along the sending QP's route, checked fresh by the caller (`None`: no
    /// route could be built; the lookup then reports why).
    Route(IpAddr, Option<&'a Route>),
}

/// Where the payload of a frame being built comes from.
#[derive(Clone, Copy)]
pub(super) enum Body<'a> {
    /// These bytes (a CM MAD).
    Bytes(&'a [u8]),
    /// A QP packet's segments in registered memory, read through the checked accessor.
    Gather(&'a crate::transport::transmit::Payload),
}

/// Largest payload of one packet (the largest path MTU, IBTA vol. 1 §9.6.1.1: 4096).
pub(super) static ZERO_PAYLOAD: [u8; 4096] = [0; 4096];

/// Ethernet header length.
pub(super) const ETH_LEN: usize = crate::wire::ethernet::HEADER_LEN;

/// What `Host::poll_transmit_pinned` produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxOut {
    /// A whole frame in `out`.
    Whole,
    /// Headers in `out`, payload pins and trailer in the [`PinnedTx`].
    Pinned,
}

/// The pinned part of a frame from `Host::poll_transmit_pinned` (reused between calls).
#[derive(Debug, Default)]
pub struct PinnedTx {
    /// Pins of the payload segments, in order; the caller must unpin each exactly once.
    pub segments: Vec<PinToken>,
    trailer: [u8; 7],
    trailer_len: u8,
}

impl PinnedTx {
    /// Room for the most segments a packet can have (no allocation later).
    pub fn new() -> PinnedTx {
        PinnedTx {
            segments: Vec::with_capacity(crate::transport::transmit::MAX_TX_SEGS),
            trailer: [0; 7],
            trailer_len: 0,
        }
    }

    /// BTH pad bytes and the ICRC (little-endian), which follow the payload.
    pub fn trailer(&self) -> &[u8] {
        &self.trailer[..usize::from(self.trailer_len)]
    }

    /// The trailer by value (array and length), to use while `segments` is borrowed mutably.
    pub fn trailer_bytes(&self) -> ([u8; 7], usize) {
        (self.trailer, usize::from(self.trailer_len))
    }
}

/// The builders over IPv6 (and IPv4 beside it): two dual-stack ports resolve each other by
/// Neighbor Discovery, then every builder's frame from one is RoCEv2 to the other, the ICRC
/// included, with the BTH after the family's headers.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::access::MemRef;
    use crate::mem::MrTable;
    use crate::transport::transmit::Payload;
    use crate::wire::frame6::RoceFrame6;
    use crate::wire::reth::RethRepr;
    use crate::wire::udp::ROCEV2_PORT;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::sync::Arc;

    const A_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 1]);
    const B_MAC: EthernetAddress = EthernetAddress([2, 0, 0, 0, 0, 2]);
    const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 1);
    const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x77, 0, 0, 0, 0, 0, 2);
    const B4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const PAYLOAD: &[u8] = b"RoCEv2 over IPv6, 33 bytes long!!";

    fn net(mac: EthernetAddress, v4: Ipv4Addr, v6: Ipv6Addr) -> Net {
        Net::new(NetConfig::new(mac, v4, 24).with_ipv6(v6, 64)).unwrap()
    }

    /// A (fd00:77::1) after resolving B (fd00:77::2) by ND, and B; both know each other's
    /// IPv4 address statically.
    fn pair() -> (Net, Net) {
        let mut a = net(A_MAC, Ipv4Addr::new(10, 0, 0, 1), A6);
        let mut b = net(B_MAC, B4, B6);
        assert_eq!(a.resolve(Instant::ZERO, B6.into()), Resolve::Pending);
        let ns = a.poll_transmit(Instant::ZERO).unwrap();
        assert_eq!(
            b.handle_frame(Instant::ZERO, ns.padded()),
            Inbound::Consumed
        );
        let na = b.poll_transmit(Instant::ZERO).unwrap();
        assert_eq!(
            a.handle_frame(Instant::ZERO, na.padded()),
            Inbound::Consumed
        );
        assert_eq!(a.lookup(B6.into()), Some(B_MAC));
        a.add_static(B4.into(), B_MAC).unwrap();
        b.add_static(Ipv4Addr::new(10, 0, 0, 1).into(), A_MAC)
            .unwrap();
        (a, b)
    }

    /// `frame` as B receives it: RoCEv2 from A with these headers and payload.
    #[track_caller]
    fn accepted(b: &mut Net, frame: &[u8], src: IpAddr, headers: &RoceHeaders, payload: &[u8]) {
        match b.handle_frame(Instant::ZERO, frame) {
            Inbound::Roce(p) => {
                assert_eq!(p.src_ip, src);
                assert_eq!(p.packet.headers.bth.opcode, headers.bth.opcode);
                assert_eq!(p.packet.headers.reth, headers.reth);
                assert_eq!(p.packet.payload, payload);
            }
            other => panic!("B dropped the frame: {other:?}"),
        }
    }

    #[test]
    fn every_builder_writes_roce_over_ipv6_the_peer_accepts() {
        let (mut a, mut b) = pair();
        let table = Arc::new(MrTable::new(16));
        let pz = table.create_pz();
        let region = table
            .register_bytes(pz, PAYLOAD, Access::LOCAL_WRITE)
            .unwrap();
        let seg = MemRef {
            kind: KeyKind::Local,
            pd: pz.id(),
            key: region.lkey,
            addr: region.addr,
            len: PAYLOAD.len() as u32,
        };
        let mut stats = HostStats::default();
        let mut out = Vec::new();
        let route = a.route(Instant::ZERO, B6.into(), 0x11, 0x22).unwrap();
        let route4 = a.route(Instant::ZERO, B4.into(), 0x11, 0x22).unwrap();
        let send = RoceHeaders::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x22, Psn::new(3)));
        let reth = RethRepr {
            va: 0x1000,
            rkey: 0x77,
            dma_len: PAYLOAD.len() as u32,
        };
        let write = RoceHeaders::new(BthRepr::new(Opcode::RC_WRITE_ONLY, 0x22, Psn::new(4)))
            .with_reth(reth);
        let mut b_ = FrameBuilder {
            mem: &table,
            net: &mut a,
            stats: &mut stats,
        };

        // build_frame along the route and by address: the same bytes (IPv6 has no
        // identification), the BTH at 62, RoceFrame6's bytes for these reprs.
        let to_route = To::Route(B6.into(), Some(&route));
        let body = Body::Bytes(PAYLOAD);
        assert!(b_.build_frame(Instant::ZERO, to_route, 0x11, 0x22, &send, body, &mut out));
        let by_route = out.clone();
        assert!(b_.build_frame(
            Instant::ZERO,
            To::Ip(B6.into()),
            0x11,
            0x22,
            &send,
            body,
            &mut out
        ));
        assert_eq!(out, by_route);
        assert_eq!(out[62], Opcode::RC_SEND_ONLY.0, "BTH after 62 header bytes");
        let f = RoceFrame6::parse(&out).unwrap();
        assert_eq!(
            (f.ipv6.src_addr, f.ipv6.dst_addr, f.ipv6.hop_limit),
            (A6, B6, 64)
        );
        let mut want = vec![0u8; f.buffer_len()];
        RoceFrame6::new(f.eth, f.ipv6, f.udp, send, PAYLOAD)
            .unwrap()
            .emit(&mut want)
            .unwrap();
        assert_eq!(out, want);
        accepted(&mut b, &out, A6.into(), &send, PAYLOAD);

        // From registered memory (gather), and the WRITE Only of header prediction on send.
        let payload = Payload::one(seg);
        assert!(b_.build_frame(
            Instant::ZERO,
            To::Route(B6.into(), Some(&route)),
            0x11,
            0x22,
            &write,
            Body::Gather(&payload),
            &mut out
        ));
        let gathered = out.clone();
        accepted(&mut b, &out, A6.into(), &write, PAYLOAD);
        let w = WriteOnlyRequest {
            bth: write.bth,
            reth,
            payload: seg,
        };
        assert!(b_.build_write_only(&route, &w, &mut out));
        assert_eq!(
            out, gathered,
            "prediction on send writes the general path's bytes"
        );
        // Never predicted on receive: IPv6 takes the general path.
        assert_eq!(
            WriteOnlyFrame::predict(&out, B_MAC, B4),
            None,
            "header prediction is IPv4's"
        );

        // Pinned: headers in `out`, the payload from the pins, the pad and ICRC trailer.
        let mut pinned = PinnedTx::new();
        let tx = Transmit {
            headers: write,
            payload,
        };
        assert_eq!(
            b_.build_pinned(
                Instant::ZERO,
                B6.into(),
                0x11,
                0x22,
                &tx,
                &mut out,
                &mut pinned
            ),
            Some(true)
        );
        assert_eq!(out.len(), 62 + 12 + 16, "headers only");
        let mut whole = out.clone();
        for t in pinned.segments.drain(..) {
            table.for_each_pinned_chunk(&t, &mut |c| whole.extend_from_slice(c));
            table.unpin(t);
        }
        whole.extend_from_slice(pinned.trailer());
        assert_eq!(whole, gathered, "the pinned frame is the gathered one");

        // IPv4 beside it: the BTH at 42, accepted too.
        let to4 = To::Route(B4.into(), Some(&route4));
        assert!(b_.build_frame(Instant::ZERO, to4, 0x11, 0x22, &send, body, &mut out));
        assert_eq!(out[42], Opcode::RC_SEND_ONLY.0);
        assert!(ReceivedPacket::parse_on_port(&out, ROCEV2_PORT).is_ok());
        accepted(
            &mut b,
            &out,
            Ipv4Addr::new(10, 0, 0, 1).into(),
            &send,
            PAYLOAD,
        );
        assert_eq!(
            (stats.tx_frames, stats.tx_pinned, stats.tx_predicted),
            (6, 1, 1)
        );
        assert_eq!(b.stats().rx_roce, 3);
    }

    /// A port without IPv6 counts a frame to an IPv6 peer as one it has no peer for.
    #[test]
    fn an_ipv6_destination_of_an_ipv4_port_has_no_peer() {
        let mut net = Net::new(NetConfig::new(A_MAC, Ipv4Addr::new(10, 0, 0, 1), 24)).unwrap();
        let table = Arc::new(MrTable::new(4));
        let mut stats = HostStats::default();
        let mut b = FrameBuilder {
            mem: &table,
            net: &mut net,
            stats: &mut stats,
        };
        let send = RoceHeaders::new(BthRepr::new(Opcode::RC_SEND_ONLY, 0x22, Psn::new(3)));
        let mut out = Vec::new();
        let to = To::Ip(B6.into());
        assert!(!b.build_frame(Instant::ZERO, to, 1, 2, &send, Body::Bytes(b"x"), &mut out));
        assert_eq!((stats.tx_no_peer, stats.tx_frames), (1, 0));
    }
}
