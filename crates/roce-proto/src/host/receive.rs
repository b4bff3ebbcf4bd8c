//! Frames in: the neighbour layer first, then RoCEv2 by destination QP (QP1 to the CM), with
//! header prediction for in-sequence RC RDMA WRITE Only frames (`wire::write_only`).

use super::*;

impl<M: Memory> Host<M> {
    /// Turns header prediction on or off (on by default). On receive, an in-sequence RC RDMA
    /// WRITE Only for a QP in RTS skips the general parse and dispatch (`wire::write_only`,
    /// `Qp::handle_write_only`); on send, a new WRITE Only is written from its BTH and RETH
    /// without the general header set (`Qp::next_write_only`). Both have the general paths'
    /// effects and bytes. Off, every frame takes the general paths (for A/B measurements and
    /// the equivalence tests).
    pub fn set_header_prediction(&mut self, on: bool) {
        self.predict = on;
    }

    /// A frame received from the wire. ARP is answered and learnt from, RoCEv2 for us goes to
    /// the CM (QP1) or the destination QP, everything else is counted and dropped.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.clock = self.clock.max(now);
        if self.predict && self.handle_predicted(now, frame) {
            return;
        }
        // Matched in place: the parsed frame is not moved out of the `Inbound`.
        let inbound = self.net.handle_frame(now, frame);
        let f = match &inbound {
            Inbound::Roce(f) => f,
            Inbound::Consumed => {
                // ARP: a MAC may have become known.
                self.work.neighbours_changed();
                self.release_requests(now);
                self.collect();
                return;
            }
            Inbound::Dropped(_) => return,
        };
        self.handle_roce(now, f);
        self.collect();
    }

    /// Header prediction (`wire::write_only`): an in-sequence RC RDMA WRITE Only for a QP in
    /// RTS is checked and executed without the general parse and dispatch, with the same
    /// effects and counts (`Qp::handle_write_only`). False, with nothing changed, for every
    /// other frame: `handle_frame` then takes the general path.
    #[inline(always)]
    pub(super) fn handle_predicted(&mut self, now: Instant, frame: &[u8]) -> bool {
        let c = self.net.config();
        // A CE-marked frame takes the general path (the notification point's CNP): the
        // predicted frame is untagged IPv4 (`WriteOnlyFrame::predict`), its TOS at byte 15.
        if frame
            .get(super::frames::ETH_LEN + 1)
            .is_some_and(|tos| tos & 0b11 == ECN_CE)
        {
            return false;
        }
        let Some(w) = c
            .ipv4_addr()
            .and_then(|ip| WriteOnlyFrame::predict(frame, c.mac, ip))
        else {
            return false;
        };
        let dest = w.bth.dest_qp;
        if dest == CM_QPN {
            return false;
        }
        let Some(e) = self.qps.get_mut(&dest) else {
            return false;
        };
        if e.peer != Some(IpAddr::V4(w.src_ip)) {
            // Not from the QP's peer: the general path counts and drops it.
            return false;
        }
        if !e
            .qp
            .handle_write_only(now, &w.bth, &w.reth, w.payload, &mut self.mem)
        {
            return false;
        }
        self.net.count_predicted_roce();
        self.stats.rx_predicted += 1;
        self.work.ran(dest, e);
        self.collect();
        true
    }

    /// The held REQs whose source answered ARP go to the CM.
    fn release_requests(&mut self, now: Instant) {
        if self.request_gate.is_empty() {
            return;
        }
        let net = &self.net;
        for (ip, mad) in self.request_gate.take_known(|ip| net.lookup(ip).is_some()) {
            self.cm.handle_mad(
                now,
                ip,
                &mad,
                &mut QpTable {
                    qps: &mut self.qps,
                    work: &mut self.work,
                },
            );
            self.cm_ran();
        }
    }

    pub(super) fn handle_roce(&mut self, now: Instant, f: &ReceivedPacket<'_>) {
        let dest = f.packet.headers.bth.dest_qp;
        if dest == CM_QPN {
            // QP1 takes MADs of any partition in the port's table (IBTA vol. 1 §10.9.3).
            let gsi = f.packet.headers.bth.opcode == Opcode::UD_SEND_ONLY
                && f.packet.headers.deth.is_some_and(|d| d.qkey == GSI_QKEY)
                && crate::wire::bth::port_pkey_ok(f.packet.headers.bth.pkey);
            if !gsi {
                self.stats.rx_bad_gsi += 1;
                return;
            }
            let src_ip = f.src_ip;
            if is_req(f.packet.payload)
                && !self.net.is_own_address(src_ip)
                && self.net.lookup(src_ip).is_none()
            {
                // The source must answer ARP first (`req_gate`).
                match self.net.resolve(now, src_ip) {
                    crate::net::Resolve::Ready(_) => {}
                    crate::net::Resolve::Pending => {
                        self.stats.rx_requests_held += 1;
                        if self.request_gate.hold(src_ip, f.packet.payload) {
                            self.stats.rx_requests_unverified += 1;
                        }
                        return;
                    }
                    crate::net::Resolve::Failed(_) => {
                        // No way back to it (another subnet, ARP gave up on it lately).
                        self.stats.rx_requests_unverified += 1;
                        return;
                    }
                }
            }
            self.cm.handle_mad(
                now,
                src_ip,
                f.packet.payload,
                &mut QpTable {
                    qps: &mut self.qps,
                    work: &mut self.work,
                },
            );
            self.cm_ran();
            return;
        }
        let Some(e) = self.qps.get_mut(&dest) else {
            self.stats.rx_unknown_qp += 1;
            return;
        };
        // Origin: a QP with a peer takes packets from that address only (its path); a QP
        // without one (RESET, INIT) takes none anyway.
        if e.peer.is_some_and(|peer| peer != f.src_ip) {
            self.stats.rx_wrong_origin += 1;
            return;
        }
        let e = if e.qp.state() == QpState::Rtr {
            // A data packet before the RTU: the implicit RTU of IBTA §12.9.6.
            self.cm.implicit_rtu(
                now,
                dest,
                &mut QpTable {
                    qps: &mut self.qps,
                    work: &mut self.work,
                },
            );
            self.cm_ran();
            let Some(e) = self.qps.get_mut(&dest) else {
                return;
            };
            e
        } else {
            e
        };
        if f.ecn == ECN_CE {
            e.qp.on_congestion_experienced(now);
        }
        let srq: Option<&mut dyn RecvSource> = match &mut e.recv {
            RecvAcct::Srq(p) => Some(p),
            RecvAcct::Own(_) => None,
        };
        e.qp.handle_packet(now, &f.packet, &mut self.mem, srq);
        self.work.ran(dest, e);
    }
}

/// ECN congestion experienced (RFC 3168 §5).
const ECN_CE: u8 = 0b11;

/// Whether a GSI payload is a CM REQ (management class 7, attribute REQ).
fn is_req(mad: &[u8]) -> bool {
    crate::wire::mad::Packet::new_checked(mad).is_ok_and(|p| {
        p.mgmt_class() == crate::wire::mad::MGMT_CLASS_CM
            && p.attribute_id() == crate::wire::cm_msg::attr::REQ
    })
}
