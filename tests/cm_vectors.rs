//! CM codecs against a real Linux rdma_rxe + rdma_cm exchange (`tests/vectors/
//! rxe-rdmacm-write-read.pcap`): every CM MAD parses to the values Wireshark shows and re-emits
//! to the same 256 bytes.

mod cm_common;

use cm_common::QpRecorder;
use dpdk_roce::cm::ip_cm::{port_of_service_id, IpCmHeader, IP_CM_HEADER_LEN};
use dpdk_roce::cm::{AcceptParams, Cm, CmEvent};
use dpdk_roce::time::Instant;
use dpdk_roce::transport::types::{Mtu, QpState};
use dpdk_roce::wire::cm_msg::REP_PRIVATE_LEN;
use dpdk_roce::wire::cm_msg::{CmMessage, ReqRepr};
use dpdk_roce::wire::deth::GSI_QKEY;
use dpdk_roce::wire::mad::{MadHeader, MAD_LEN};
use dpdk_roce::wire::psn::Psn;
use dpdk_roce::wire::{Opcode, RoceFrame};
use pcap_file::pcap::PcapReader;
use std::net::Ipv4Addr;

const PCAP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/vectors/rxe-rdmacm-write-read.pcap"
);

const ACTIVE_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 2, 25);
const PASSIVE_IP: Ipv4Addr = Ipv4Addr::new(192, 168, 2, 24);
const TID: u64 = 0x0000_0002_b908_66ac;

/// All frames of the capture, in order. Panics (fails the test) when the file is missing.
fn frames() -> Vec<Vec<u8>> {
    let f = std::fs::File::open(PCAP).unwrap_or_else(|e| panic!("test vector {PCAP}: {e}"));
    let mut r = PcapReader::new(f).expect("pcap header");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.expect("pcap record").data.into_owned());
    }
    assert_eq!(out.len(), 16, "unexpected capture contents");
    out
}

/// The source IPv4 address and the 256-byte MAD of a valid RoCEv2 UD SEND-only to QP1 with the
/// GSI Q_Key, or `None` for any other frame. Goes through the full frame parser (lengths,
/// checksums, ICRC), so every CM frame of the capture also exercises `RoceFrame::parse`.
fn extract_mad(frame: &[u8]) -> Option<(Ipv4Addr, &[u8])> {
    let f = RoceFrame::parse(frame).ok()?;
    let h = &f.headers;
    if h.bth.opcode != Opcode::UD_SEND_ONLY || h.bth.dest_qp != 1 {
        return None;
    }
    if h.deth?.qkey != GSI_QKEY {
        return None;
    }
    Some((f.ipv4.src_addr, f.payload.get(..MAD_LEN)?))
}

/// The parsed RoCEv2 frame; panics on an invalid one.
fn roce(frame: &[u8]) -> RoceFrame<'_> {
    RoceFrame::parse(frame).expect("valid RoCEv2 frame")
}

fn cm_mads() -> Vec<(usize, Ipv4Addr, Vec<u8>)> {
    frames()
        .iter()
        .enumerate()
        .filter_map(|(i, f)| extract_mad(f).map(|(ip, m)| (i + 1, ip, m.to_vec())))
        .collect()
}

fn parse_frame(n: usize) -> (Ipv4Addr, MadHeader, CmMessage, Vec<u8>) {
    let (_, ip, mad) = cm_mads()
        .into_iter()
        .find(|(i, _, _)| *i == n)
        .expect("frame is a CM MAD");
    let (h, m) = CmMessage::parse(&mad).expect("parses");
    (ip, h, m, mad)
}

/// The capture's REQ, for other tests.
pub fn capture_req() -> ReqRepr {
    match parse_frame(1).2 {
        CmMessage::Req(r) => r,
        other => panic!("frame 1 is not a REQ: {other:?}"),
    }
}

#[test]
fn every_cm_mad_parses_and_reemits_exactly() {
    let mads = cm_mads();
    let numbers: Vec<usize> = mads.iter().map(|m| m.0).collect();
    assert_eq!(numbers, vec![1, 2, 3, 11, 16]);
    let mut kinds = Vec::new();
    for (n, _, mad) in &mads {
        let (h, m) = CmMessage::parse(mad).unwrap_or_else(|e| panic!("frame {n}: {e}"));
        assert_eq!(h, MadHeader::cm(m.attribute_id(), TID), "frame {n} header");
        let mut out = [0u8; MAD_LEN];
        m.emit(&h, &mut out);
        assert_eq!(&out[..], &mad[..], "frame {n} re-emit");
        kinds.push(m.attribute_id());
    }
    assert_eq!(kinds, vec![0x0010, 0x0013, 0x0014, 0x0015, 0x0016]);
}

#[test]
fn req_fields() {
    let (ip, h, _, mad) = parse_frame(1);
    assert_eq!(ip, ACTIVE_IP);
    assert_eq!(h.attribute_id, 0x0010);
    assert_eq!(h.transaction_id, TID);
    let r = capture_req();
    assert_eq!(r.local_comm_id, 0xac66_08b9);
    assert_eq!(r.service_id, 0x0000_0000_0106_1d2f);
    assert_eq!(port_of_service_id(r.service_id), Some(7471));
    assert_eq!(r.local_ca_guid, 0x5054_00ff_feda_f92d);
    assert_eq!(r.local_qkey, 0);
    assert_eq!(r.local_qpn, 0x17);
    assert_eq!(r.responder_resources, 1);
    assert_eq!(r.initiator_depth, 1);
    assert_eq!(r.local_eecn, 0);
    assert_eq!(r.remote_eecn, 0);
    assert_eq!(r.remote_cm_response_timeout, 20);
    assert_eq!(r.transport_type, 0);
    assert!(!r.end_to_end_flow_control);
    assert_eq!(r.starting_psn, Psn::new(0x89bb0e));
    assert_eq!(r.local_cm_response_timeout, 20);
    assert_eq!(r.retry_count, 7);
    assert_eq!(r.pkey, 0xffff);
    assert_eq!(r.path_mtu, 3);
    assert!(!r.rdc_exists);
    assert_eq!(r.rnr_retry_count, 7);
    assert_eq!(r.max_cm_retries, 15);
    assert!(!r.srq);
    assert_eq!(r.extended_transport_type, 0);
    let p = r.primary_path;
    assert_eq!((p.local_lid, p.remote_lid), (0xffff, 0xffff));
    assert_eq!(
        p.local_gid,
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 2, 25]
    );
    assert_eq!(
        p.remote_gid,
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 168, 2, 24]
    );
    // Raw bytes 88..92 are 3a 12 60 00: flow label (bits 31:12) 0x3a126, packet rate (bits 5:0)
    // 0, per the IBTA layout (Linux `CM_REQ_PRIMARY_FLOW_LABEL` is bits 31:12 at offset 88).
    // Wireshark displays other values for these two fields ("0x003a1" / "0x3a").
    assert_eq!(&mad[24 + 88..24 + 92], &[0x3a, 0x12, 0x60, 0x00]);
    assert_eq!(p.flow_label, 0x3a126);
    assert_eq!(p.packet_rate, 0);
    assert_eq!(p.traffic_class, 0);
    assert_eq!(p.hop_limit, 64);
    assert_eq!(p.sl, 0);
    assert!(!p.subnet_local);
    assert_eq!(p.local_ack_timeout, 19);
    assert_eq!(r.alternate_path, Default::default());

    let ip_hdr = IpCmHeader::parse(&r.private_data).unwrap();
    assert_eq!((ip_hdr.major_version, ip_hdr.minor_version), (0, 0));
    assert_eq!(ip_hdr.ip_version, 4);
    assert_eq!(ip_hdr.src_port, 0xa129);
    assert_eq!(ip_hdr.src_ipv4(), ACTIVE_IP);
    assert_eq!(ip_hdr.dst_ipv4(), PASSIVE_IP);
    assert!(r.private_data[IP_CM_HEADER_LEN..].iter().all(|&b| b == 0));
}

#[test]
fn rep_rtu_dreq_drep_fields() {
    let (ip, _, m, _) = parse_frame(2);
    assert_eq!(ip, PASSIVE_IP);
    let CmMessage::Rep(p) = m else {
        panic!("frame 2 {m:?}")
    };
    assert_eq!(p.local_comm_id, 0xc857_7fdb);
    assert_eq!(p.remote_comm_id, 0xac66_08b9);
    assert_eq!(p.local_qkey, 0);
    assert_eq!(p.local_qpn, 0x11);
    assert_eq!(p.local_eecn, 0);
    assert_eq!(p.starting_psn, Psn::new(0xc23298));
    assert_eq!((p.responder_resources, p.initiator_depth), (1, 1));
    assert_eq!(p.target_ack_delay, 15);
    assert_eq!(p.failover_accepted, 0);
    assert!(!p.end_to_end_flow_control);
    assert_eq!(p.rnr_retry_count, 7);
    assert!(!p.srq);
    assert_eq!(p.local_ca_guid, 0x5054_00ff_fe8b_2d12);
    assert_eq!(
        &p.private_data[..12],
        &[0, 0, 0xaa, 0xab, 0x26, 0xb5, 0x80, 0, 0, 0, 0x02, 0x20]
    );

    let (ip, _, m, _) = parse_frame(3);
    assert_eq!(ip, ACTIVE_IP);
    let CmMessage::Rtu(t) = m else {
        panic!("frame 3 {m:?}")
    };
    assert_eq!(
        (t.local_comm_id, t.remote_comm_id),
        (0xac66_08b9, 0xc857_7fdb)
    );

    let (ip, _, m, _) = parse_frame(11);
    assert_eq!(ip, ACTIVE_IP);
    let CmMessage::Dreq(d) = m else {
        panic!("frame 11 {m:?}")
    };
    assert_eq!(
        (d.local_comm_id, d.remote_comm_id),
        (0xac66_08b9, 0xc857_7fdb)
    );
    assert_eq!(d.remote_qpn, 0x11);

    let (ip, _, m, _) = parse_frame(16);
    assert_eq!(ip, PASSIVE_IP);
    let CmMessage::Drep(d) = m else {
        panic!("frame 16 {m:?}")
    };
    assert_eq!(
        (d.local_comm_id, d.remote_comm_id),
        (0xc857_7fdb, 0xac66_08b9)
    );
}

/// Which side's PSN each starting-PSN field carries, settled by the data that follows: the
/// active side's (192.168.2.25, QP 0x17) first RDMA WRITE to QP 0x11 carries REP's starting PSN,
/// not REQ's. So REP's starting PSN is the active side's send PSN (the passive side's rq_psn)
/// and REQ's is the active side's receive PSN (as Linux `ib_send_cm_req` sets `rq_psn` from it).
#[test]
fn starting_psn_semantics_from_capture() {
    let f = frames();
    let write = &f[3];
    let write = roce(write);
    assert_eq!(
        write.headers.bth.opcode,
        Opcode::RC_WRITE_ONLY,
        "frame 4 is RDMA WRITE only"
    );
    assert_eq!(write.ipv4.src_addr, ACTIVE_IP);
    let CmMessage::Rep(rep) = parse_frame(2).2 else {
        panic!()
    };
    let req = capture_req();
    assert_eq!(write.headers.bth.psn, rep.starting_psn);
    assert_ne!(write.headers.bth.psn, req.starting_psn);
}

/// Re-address a captured MAD to our comm ID (the capture's passive side used 0xc8577fdb).
fn readdress(mad: &[u8], our_comm_id: u32) -> [u8; MAD_LEN] {
    let (h, mut m) = CmMessage::parse(mad).unwrap();
    match &mut m {
        CmMessage::Rtu(r) => r.remote_comm_id = our_comm_id,
        CmMessage::Dreq(d) => d.remote_comm_id = our_comm_id,
        other => panic!("{other:?}"),
    }
    let mut out = [0u8; MAD_LEN];
    m.emit(&h, &mut out);
    out
}

/// Our CM in the place of the capture's passive side (192.168.2.24): the Linux REQ yields a
/// ConnectRequest, `accept` yields the REP a Linux active side expects (byte-identical to the
/// one Linux sent, except for our comm ID), the Linux RTU establishes, the Linux DREQ
/// disconnects.
#[test]
fn linux_req_accepted_by_our_cm() {
    let mads = cm_mads();
    let req_mad = &mads[0].2;
    let (_, CmMessage::Rep(linux_rep)) = CmMessage::parse(&mads[1].2).unwrap() else {
        panic!()
    };
    let req = capture_req();
    let port = port_of_service_id(req.service_id).unwrap();

    let mut cm = Cm::new(PASSIVE_IP, 0x5054_00ff_fe8b_2d12, 7);
    let mut qp = QpRecorder::default();
    let mut now = Instant::from_nanos(5_000_000_000);
    cm.listen(port).unwrap();
    cm.handle_mad(now, ACTIVE_IP, req_mad, &mut qp);
    let Some(CmEvent::ConnectRequest {
        id,
        port: ev_port,
        src_ip,
        src_port,
        dst_ip,
        remote_qpn,
        remote_ca_guid,
        responder_resources,
        initiator_depth,
        pmtu,
        private_data,
    }) = cm.poll_event()
    else {
        panic!("no ConnectRequest")
    };
    assert_eq!(ev_port, 7471);
    assert_eq!(
        (src_ip, src_port, dst_ip),
        (ACTIVE_IP.into(), 0xa129, PASSIVE_IP.into())
    );
    assert_eq!(remote_qpn, 0x17);
    assert_eq!(remote_ca_guid, 0x5054_00ff_feda_f92d);
    assert_eq!((responder_resources, initiator_depth), (1, 1));
    assert_eq!(pmtu, Mtu::Mtu1024);
    assert_eq!(&private_data[..], &req.private_data[IP_CM_HEADER_LEN..]);
    assert!(
        cm.poll_transmit(now).is_none(),
        "nothing sent before accept"
    );

    let mut ap = AcceptParams::new(0x11, linux_rep.starting_psn);
    ap.private_data = linux_rep.private_data.to_vec();
    assert_eq!(ap.private_data.len(), REP_PRIVATE_LEN);
    cm.accept(now, id, ap, &mut qp).unwrap();
    let tx = cm.poll_transmit(now).expect("REP");
    assert_eq!(tx.dst, ACTIVE_IP);
    let (h, m) = CmMessage::parse(&tx.mad).unwrap();
    assert_eq!(
        h,
        MadHeader::cm(0x0013, TID),
        "class 7 v2 Send REP, TID echoed"
    );
    let CmMessage::Rep(rep) = m else {
        panic!("{m:?}")
    };
    assert_eq!(rep.local_comm_id, id.0);
    assert_eq!(rep.remote_comm_id, req.local_comm_id);
    assert_eq!(rep.local_qpn, 0x11);
    assert_eq!(rep.starting_psn, Psn::new(0xc23298));
    assert!(rep.responder_resources <= req.initiator_depth);
    assert!(rep.initiator_depth <= req.responder_resources);
    assert_eq!(rep.target_ack_delay, 15);
    assert_eq!(rep.rnr_retry_count, 7);
    assert!(!rep.srq);
    assert_eq!(rep.local_ca_guid, 0x5054_00ff_fe8b_2d12);
    // Byte for byte what Linux answered, but for the local comm ID.
    let mut expected = [0u8; MAD_LEN];
    let mut linux_rep_ours = linux_rep;
    linux_rep_ours.local_comm_id = id.0;
    CmMessage::Rep(linux_rep_ours).emit(&h, &mut expected);
    assert_eq!(&tx.mad[..], &expected[..]);

    // QP: INIT then RTR with the PSNs the capture's data shows.
    assert_eq!(qp.transitions(0x11), vec![QpState::Init, QpState::Rtr]);
    let rtr = qp.attr(0x11, QpState::Rtr);
    assert_eq!(rtr.rq_psn, Psn::new(0xc23298));
    assert_eq!(rtr.sq_psn, Psn::new(0x89bb0e));
    assert_eq!(rtr.dest_qpn, 0x17);
    assert_eq!(rtr.pmtu, Mtu::Mtu1024);
    assert_eq!((rtr.retry_cnt, rtr.rnr_retry, rtr.timeout), (7, 7, 19));
    assert_eq!((rtr.max_rd_atomic, rtr.max_dest_rd_atomic), (1, 1));
    assert_eq!(rtr.pkey, 0xffff);
    // The REP is retransmitted after the REQ's local CM response timeout (20).
    assert_eq!(
        cm.poll_timeout(),
        Some(now + dpdk_roce::cm::timeout::cm_timeout(20))
    );

    now += core::time::Duration::from_millis(2);
    let rtu = readdress(&mads[2].2, id.0);
    cm.handle_mad(now, ACTIVE_IP, &rtu, &mut qp);
    assert_eq!(
        cm.poll_event(),
        Some(CmEvent::Established {
            id,
            private_data: vec![]
        })
    );
    assert_eq!(qp.state(0x11), QpState::Rts);
    assert_eq!(cm.poll_timeout(), None);

    // The Linux DREQ: DREP back (TID echoed), QP to ERROR, Disconnected.
    let dreq = readdress(&mads[3].2, id.0);
    cm.handle_mad(now, ACTIVE_IP, &dreq, &mut qp);
    assert_eq!(cm.poll_event(), Some(CmEvent::Disconnected { id }));
    assert_eq!(qp.state(0x11), QpState::Error);
    let drep = cm.poll_transmit(now).expect("DREP");
    let (h, m) = CmMessage::parse(&drep.mad).unwrap();
    assert_eq!(h, MadHeader::cm(0x0016, TID));
    let CmMessage::Drep(d) = m else {
        panic!("{m:?}")
    };
    assert_eq!(
        (d.local_comm_id, d.remote_comm_id),
        (id.0, req.local_comm_id)
    );
    assert_eq!(cm.stats().malformed + cm.stats().unmatched, 0);
}

/// The capture's REQ to a port nobody listens on: REJ "invalid service ID" (8), REQ rejected,
/// remote comm ID = the REQ's, TID echoed.
#[test]
fn linux_req_without_listener_is_rejected() {
    let mads = cm_mads();
    let mut cm = Cm::new(PASSIVE_IP, 1, 7);
    let mut qp = QpRecorder::default();
    cm.handle_mad(Instant::ZERO, ACTIVE_IP, &mads[0].2, &mut qp);
    assert_eq!(cm.poll_event(), None);
    let tx = cm.poll_transmit(Instant::ZERO).expect("REJ");
    assert_eq!(tx.dst, ACTIVE_IP);
    let (h, m) = CmMessage::parse(&tx.mad).unwrap();
    assert_eq!(h.transaction_id, TID);
    let CmMessage::Rej(r) = m else {
        panic!("{m:?}")
    };
    assert_eq!(r.reason.code(), 8);
    assert_eq!(r.msg_rejected, dpdk_roce::wire::cm_msg::MsgRef::Req);
    assert_eq!(r.remote_comm_id, 0xac66_08b9);
    assert_eq!(r.local_comm_id, 0);
    assert!(qp.log.is_empty());
}

/// Our CM in the place of the capture's active side (192.168.2.25): with the parameters Linux
/// used, our REQ matches Linux's byte for byte except the comm ID and the flow label (Linux
/// hashes the UDP ports into it; we send 0, "unspecified"); the Linux REP then moves our QP
/// through INIT/RTR/RTS with the PSNs the capture's data packets show, and our RTU matches.
#[test]
fn our_active_cm_against_linux_rep() {
    use dpdk_roce::cm::ConnectParams;
    let mads = cm_mads();
    let linux_req = capture_req();
    let mut cm = Cm::new(ACTIVE_IP, linux_req.local_ca_guid, 3);
    let mut qp = QpRecorder::default();
    let now = Instant::from_nanos(1);
    let mut cp = ConnectParams::new(PASSIVE_IP, 7471, 0x17, linux_req.starting_psn);
    cp.src_port = 0xa129;
    let id = cm.connect(now, cp).unwrap();
    let tx = cm.poll_transmit(now).unwrap();
    assert_eq!(tx.dst, PASSIVE_IP);
    let (h, CmMessage::Req(ours)) = CmMessage::parse(&tx.mad).unwrap() else {
        panic!()
    };
    assert_eq!(h.attribute_id, 0x0010);
    assert_eq!(ours.local_comm_id, id.0);
    let mut expected = linux_req;
    expected.local_comm_id = id.0;
    expected.primary_path.flow_label = 0;
    assert_eq!(ours, expected);

    // The Linux REP, addressed to our comm ID and TID.
    let (mut rh, CmMessage::Rep(mut rep)) = CmMessage::parse(&mads[1].2).unwrap() else {
        panic!()
    };
    rep.remote_comm_id = id.0;
    rh.transaction_id = h.transaction_id;
    let mut rep_mad = [0u8; MAD_LEN];
    CmMessage::Rep(rep).emit(&rh, &mut rep_mad);
    cm.handle_mad(now, PASSIVE_IP, &rep_mad, &mut qp);
    assert!(matches!(cm.poll_event(), Some(CmEvent::Established { id: i, .. }) if i == id));
    assert_eq!(
        qp.transitions(0x17),
        vec![QpState::Init, QpState::Rtr, QpState::Rts]
    );
    let rts = qp.attr(0x17, QpState::Rts);
    // Frame 4 (our side's RDMA WRITE) carries PSN 0xc23298, the REP's starting PSN.
    assert_eq!(rts.sq_psn, Psn::new(0xc23298));
    assert_eq!(rts.rq_psn, Psn::new(0x89bb0e));
    assert_eq!(rts.dest_qpn, 0x11);
    assert_eq!((rts.retry_cnt, rts.rnr_retry, rts.timeout), (7, 7, 19));
    assert_eq!((rts.max_rd_atomic, rts.max_dest_rd_atomic), (1, 1));
    assert_eq!(rts.pmtu, Mtu::Mtu1024);

    let rtu = cm.poll_transmit(now).expect("RTU");
    let mut linux_rtu = [0u8; MAD_LEN];
    let (mut th, m) = CmMessage::parse(&mads[2].2).unwrap();
    let CmMessage::Rtu(mut t) = m else { panic!() };
    t.local_comm_id = id.0;
    th.transaction_id = h.transaction_id;
    CmMessage::Rtu(t).emit(&th, &mut linux_rtu);
    assert_eq!(&rtu.mad[..], &linux_rtu[..]);
    assert_eq!(cm.poll_timeout(), None);
}
