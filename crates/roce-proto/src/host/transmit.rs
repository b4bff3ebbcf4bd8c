//! Frames out: responses and requests of the QPs with work (round robin), MADs, ARP; which
//! frame leaves next and to whom (the frames themselves are built in `frames`).

use super::*;
use crate::io::FrameBuf;

impl<M: Memory> Host<M> {
    /// The next frame to send, if any: ARP first, then CM MADs, then the QPs round robin. A QP
    /// whose peer's MAC is not known yet is skipped (its packets wait in the QP, and ARP
    /// resolution starts); MADs wait in a small queue.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.poll_transmit_into(now, &mut out).then_some(out)
    }

    /// Like [`poll_transmit`](Self::poll_transmit), but into a reused buffer (no allocation on
    /// the fast path): `out` holds the frame when this returns true.
    /// `out` may be a device's own transmit buffer (`FrameIo::tx_build`).
    pub fn poll_transmit_into<B: FrameBuf + ?Sized>(&mut self, now: Instant, out: &mut B) -> bool {
        self.poll_outgoing(now, out, None).is_some()
    }

    /// True when a frame may be waiting for `poll_transmit_*` (ARP, MADs, QPs touched since
    /// they last ran dry); timers aside, which [`poll_timeout`](Self::poll_timeout) reports.
    /// False means a transmit poll would find nothing.
    pub fn has_output(&self) -> bool {
        !self.work.tx_ready.is_empty()
            || !self.work.before_cm.is_empty()
            || !self.held_mads.is_empty()
            || self.cm.has_transmit()
            || self.net.has_transmit()
    }

    /// True once after `poll_transmit_*` returned a frame that ends the WR the consumer's next
    /// completion comes from (`Qp::take_awaited`): the shard sends it at once instead of
    /// behind the rest of its turn's frames.
    pub fn take_awaited(&mut self) -> bool {
        std::mem::take(&mut self.awaited)
    }

    /// True when every frame waiting is a lone ACK ([`Qp::output_is_lone_ack`]): what a turn
    /// of an inline consumer may leave for the next frame it sends (`Shard::poll_holding_acks`).
    /// ARP, MADs and every other packet make it false.
    pub fn output_is_lone_acks(&self) -> bool {
        self.work.before_cm.is_empty()
            && self.held_mads.is_empty()
            && !self.cm.has_transmit()
            && !self.net.has_transmit()
            && self
                .work
                .tx_ready
                .iter()
                .all(|qpn| self.qps.get(qpn).is_none_or(|e| e.qp.output_is_lone_ack()))
    }

    /// Like [`poll_transmit_into`](Self::poll_transmit_into), but a QP packet whose payload
    /// has at least `min_pinned` bytes comes out as a pinned frame when the memory supports it
    /// ([`Memory::pin_table`]): `out` then holds only the Ethernet/IPv4/UDP/BTH/extension
    /// headers, `pinned.segments` the payload ranges pinned in registered memory (in order) and
    /// `pinned.trailer()` the BTH pad and the ICRC, computed over the pinned bytes. The caller
    /// owns the pins (see `io::PinnedFrame`). Everything else (ARP, CM MADs, small
    /// payloads) comes out whole in `out`.
    pub fn poll_transmit_pinned(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        pinned: &mut PinnedTx,
        min_pinned: usize,
    ) -> Option<TxOut> {
        self.poll_outgoing(now, out, Some((pinned, min_pinned)))
    }

    /// The next frame to send, into `out` (or, with `pinned`, a data packet's headers there
    /// and its payload pinned): the neighbour layer's first, then connection management's,
    /// then the QPs' packets round robin, one per QP and turn.
    pub(super) fn poll_outgoing<B: FrameBuf + ?Sized>(
        &mut self,
        now: Instant,
        out: &mut B,
        mut pinned: Option<(&mut PinnedTx, usize)>,
    ) -> Option<TxOut> {
        if self.arp_into(now, out) || self.control_frame_into(now, out) {
            return Some(TxOut::Whole);
        }
        // QPs touched since they last ran dry, round robin: one frame per turn.
        for _ in 0..self.work.tx_ready.len() {
            let Some(qpn) = self.work.tx_ready.pop_front() else {
                break;
            };
            if let Some(kind) = self.qp_frame_into(now, qpn, out, &mut pinned) {
                return Some(kind);
            }
        }
        None
    }

    /// QP `qpn`'s turn on the line: its next packet built into `out` (headers there and the
    /// payload pinned when `pinned` takes it), by header prediction for a new WRITE Only, else
    /// by the general path. `None` when it has nothing to send, waits for its neighbour, or
    /// each packet it had was dropped (counted). The QP goes back to the end of the line when
    /// it has more. One lookup of the QP per turn, again only after a dropped packet.
    #[inline]
    fn qp_frame_into<B: FrameBuf + ?Sized>(
        &mut self,
        now: Instant,
        qpn: u32,
        out: &mut B,
        pinned: &mut Option<(&mut PinnedTx, usize)>,
    ) -> Option<TxOut> {
        let e = self.qps.get_mut(&qpn)?;
        let Some(dst) = e.peer else {
            // Not connected: nothing can be sent; `connect`/`accept` touch it again.
            e.tx_queued = false;
            return None;
        };
        let routed = e
            .route
            .as_ref()
            .is_some_and(|r| r.leads_to(dst, e.qp.attr().dest_qpn) && self.net.route_valid(r, now));
        if !routed && self.net.lookup(dst).is_none() {
            // Start (or keep) resolving; the QP's packets wait for the neighbour layer.
            self.work.arp_wait.push(qpn);
            let _ = self.net.resolve(now, dst);
            if self.arp_into(now, out) {
                return Some(TxOut::Whole);
            }
            return None;
        }
        // The entry looked up above serves the first frame; it is looked up again only
        // after a packet that could not be built. The route checked above stays valid for
        // the first frame (polling the QP changes neither it, the peer nor the neighbour
        // layer); later ones check it again.
        let mut e = e;
        let mut checked_fresh = routed;
        // Header prediction on send: a new WRITE Only (not for the pinned path) is written
        // from its BTH and RETH straight into the frame, along the route checked above.
        let fast_max = match pinned.as_ref() {
            Some((_, min)) => u32::try_from(*min).unwrap_or(u32::MAX).saturating_sub(1),
            None => u32::MAX,
        };
        if self.predict && routed {
            if let Some(w) = e.qp.next_write_only(now, fast_max) {
                // It completes nothing (no `polled`): only its bookkeeping follows.
                let awaited = e.qp.take_awaited();
                let more = e.qp.has_output();
                if !more {
                    e.tx_queued = false;
                }
                self.work.timer_changed(e);
                let mut b = FrameBuilder {
                    mem: &self.mem,
                    net: &mut self.net,
                    stats: &mut self.stats,
                };
                if let Some(route) = e.route.as_ref() {
                    if b.build_write_only(route, &w, out) {
                        if more {
                            self.work.tx_ready.push_back(qpn);
                        }
                        self.awaited = awaited;
                        return Some(TxOut::Whole);
                    }
                }
                // Dropped and counted: its next packet, if any, by the general path.
                checked_fresh = false;
            }
        }
        loop {
            let dest_qpn = e.qp.attr().dest_qpn;
            let polled = e.qp.poll_transmit(now);
            let awaited = e.qp.take_awaited();
            self.work.polled(qpn, e);
            let Some(tx) = polled.as_ref() else {
                e.tx_queued = false;
                // Its pacer may have armed the release timer.
                self.work.timer_changed(e);
                break;
            };
            // A QP with nothing more leaves the line now, so the caller's next
            // `has_output` is false and no empty transmit poll follows this frame.
            let more = e.qp.has_output();
            if !more {
                e.tx_queued = false;
            }
            self.work.timer_changed(e);
            // The QP's cached route, rebuilt when the neighbour layer says it is stale
            // (a failure leaves none: `build_frame` then counts the packet as unroutable).
            let fresh = checked_fresh
                || e.route
                    .as_ref()
                    .is_some_and(|r| r.leads_to(dst, dest_qpn) && self.net.route_valid(r, now));
            checked_fresh = false;
            if !fresh {
                e.route = self.net.route(now, dst, qpn, dest_qpn).ok();
            }
            // Built from the host's other parts while the entry (its route) stays borrowed.
            let mut b = FrameBuilder {
                mem: &self.mem,
                net: &mut self.net,
                stats: &mut self.stats,
            };
            let pinned_built = match pinned.as_mut() {
                Some((p, min))
                    if tx.payload.len() >= *min && tx.payload.len() <= ZERO_PAYLOAD.len() =>
                {
                    b.build_pinned(now, dst, qpn, dest_qpn, tx, out, p)
                }
                _ => None,
            };
            // A CNP leaves with the CNP's DSCP and not ECN-capable (`cc`).
            let cnp_route = (tx.headers.bth.opcode == Opcode::CNP)
                .then(|| {
                    e.route
                        .as_ref()
                        .map(|r| r.with_traffic_class(cnp_traffic_class(&self.cc)))
                })
                .flatten();
            let out_kind = match pinned_built {
                Some(true) => Some(TxOut::Pinned),
                Some(false) => None,
                None => {
                    let body = Body::Gather(&tx.payload);
                    let to = To::Route(dst, cnp_route.as_ref().or(e.route.as_ref()));
                    b.build_frame(now, to, qpn, dest_qpn, &tx.headers, body, out)
                        .then_some(TxOut::Whole)
                }
            };
            if let Some(kind) = out_kind {
                // It may have more: back to the end of the line.
                if more {
                    self.work.tx_ready.push_back(qpn);
                }
                self.awaited = awaited;
                return Some(kind);
            }
            // Dropped and counted: its next packet, if any.
            let Some(again) = self.qps.get_mut(&qpn) else {
                break;
            };
            e = again;
        }
        None
    }

    /// Connection management goes before data: held MADs whose destination got resolved, the
    /// last acknowledgements of QPs the CM moved to ERROR, then the CM's own MADs (held while
    /// their destination resolves). True when a frame is in `out`.
    fn control_frame_into<B: FrameBuf + ?Sized>(&mut self, now: Instant, out: &mut B) -> bool {
        // Held MADs whose destination got resolved (or failed: then they are dropped; the CM
        // retransmits and finally reports the connection unreachable).
        for _ in 0..self.held_mads.len() {
            let Some((dst, mad)) = self.held_mads.pop_front() else {
                break;
            };
            match self.net.resolve(now, dst) {
                Resolve::Ready(_) => {
                    if self.mad_frame(now, dst, &mad, out) {
                        return true;
                    }
                }
                Resolve::Pending => self.held_mads.push_back((dst, mad)),
                Resolve::Failed(_) => self.stats.tx_mads_dropped += 1,
            }
        }
        while let Some(&qpn) = self.work.before_cm.last() {
            if self.qp_frame_before_cm(now, qpn, out) {
                return true;
            }
            self.work.before_cm.pop();
        }
        while let Some(t) = self.cm.poll_transmit(now) {
            match self.net.resolve(now, t.dst) {
                Resolve::Ready(_) => {
                    if self.mad_frame(now, t.dst, &t.mad, out) {
                        return true;
                    }
                }
                Resolve::Pending if self.held_mads.len() < MAX_HELD_MADS => {
                    self.held_mads.push_back((t.dst, t.mad));
                    if self.arp_into(now, out) {
                        return true;
                    }
                }
                Resolve::Pending | Resolve::Failed(_) => self.stats.tx_mads_dropped += 1,
            }
        }
        false
    }

    /// The neighbour layer's next frame (ARP, neighbour discovery) into `out`; false when it
    /// has none, or when `out` cannot hold it (counted).
    fn arp_into<B: FrameBuf + ?Sized>(&mut self, now: Instant, out: &mut B) -> bool {
        let Some(arp) = self.net.poll_transmit(now) else {
            return false;
        };
        self.stats.tx_frames += 1;
        if out.put(arp.padded()) {
            return true;
        }
        self.stats.tx_build_errors += 1;
        false
    }

    /// The next packet of QP `qpn` (moved to ERROR by the CM: only its last acknowledgements
    /// remain) as a whole frame in `out`; false when it has none (or cannot send any).
    pub(super) fn qp_frame_before_cm<B: FrameBuf + ?Sized>(
        &mut self,
        now: Instant,
        qpn: u32,
        out: &mut B,
    ) -> bool {
        let Some(dst) = self.qps.get(&qpn).and_then(|e| e.peer) else {
            return false;
        };
        if self.net.lookup(dst).is_none() {
            return false;
        }
        while let Some((tx, dest_qpn)) = self.qps.get_mut(&qpn).and_then(|e| {
            let polled = e.qp.poll_transmit(now);
            self.work.polled(qpn, e);
            Some((polled?, e.qp.attr().dest_qpn))
        }) {
            let body = Body::Gather(&tx.payload);
            if self.frame_builder().build_frame(
                now,
                To::Ip(dst),
                qpn,
                dest_qpn,
                &tx.headers,
                body,
                out,
            ) {
                return true;
            }
        }
        false
    }

    pub(super) fn mad_frame<B: FrameBuf + ?Sized>(
        &mut self,
        now: Instant,
        dst: IpAddr,
        mad: &[u8],
        out: &mut B,
    ) -> bool {
        let bth = BthRepr::new(Opcode::UD_SEND_ONLY, CM_QPN, self.gsi_psn);
        debug_assert_eq!(bth.pkey, DEFAULT_PKEY);
        self.gsi_psn = self.gsi_psn.next();
        let headers = RoceHeaders::new(bth).with_deth(DethRepr {
            qkey: GSI_QKEY,
            src_qp: CM_QPN,
        });
        self.frame_builder().build_frame(
            now,
            To::Ip(dst),
            CM_QPN,
            CM_QPN,
            &headers,
            Body::Bytes(mad),
            out,
        )
    }

    /// The parts of the host a frame is built from (see [`FrameBuilder`]).
    pub(super) fn frame_builder(&mut self) -> FrameBuilder<'_, M> {
        FrameBuilder {
            mem: &self.mem,
            net: &mut self.net,
            stats: &mut self.stats,
        }
    }
}
