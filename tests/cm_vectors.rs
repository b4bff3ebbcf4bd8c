//! CM codecs against a real Linux rdma_rxe + rdma_cm exchange (`shared/vectors/
//! rxe-rdmacm-write-read.pcap`): every CM MAD parses to the values Wireshark shows and re-emits
//! to the same 256 bytes.

use dpdk_roce::cm::ip_cm::{port_of_service_id, IpCmHeader, IP_CM_HEADER_LEN};
use dpdk_roce::wire::cm_msg::{CmMessage, ReqRepr};
use dpdk_roce::wire::mad::{MadHeader, MAD_LEN};
use dpdk_roce::wire::psn::Psn;
use pcap_file::pcap::PcapReader;
use std::net::Ipv4Addr;

const PCAP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../shared/vectors/rxe-rdmacm-write-read.pcap"
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

/// Fixed offsets into an untagged Ethernet / IPv4 (no options) / UDP / BTH frame.
const BTH_OFF: usize = 14 + 20 + 8;
const MAD_OFF: usize = BTH_OFF + 12 + 8;

/// The source IPv4 address and the 256-byte MAD of a RoCEv2 UD SEND-only to QP1, or `None` for
/// any other frame. The one place that knows frame layout: swap for `RoceFrame::parse` once the
/// wire parser is merged.
fn extract_mad(frame: &[u8]) -> Option<(Ipv4Addr, &[u8])> {
    if frame.len() < MAD_OFF + MAD_LEN || frame[12..14] != [0x08, 0x00] || frame[23] != 17 {
        return None;
    }
    if frame[36..38] != 4791u16.to_be_bytes() {
        return None;
    }
    let bth = &frame[BTH_OFF..];
    let dest_qp = u32::from_be_bytes([0, bth[5], bth[6], bth[7]]);
    if bth[0] != 0x64 || dest_qp != 1 {
        return None;
    }
    let src = Ipv4Addr::new(frame[26], frame[27], frame[28], frame[29]);
    Some((src, &frame[MAD_OFF..MAD_OFF + MAD_LEN]))
}

/// BTH PSN of any RoCEv2 frame.
fn bth_psn(frame: &[u8]) -> Psn {
    Psn::new(u32::from_be_bytes([
        0,
        frame[BTH_OFF + 9],
        frame[BTH_OFF + 10],
        frame[BTH_OFF + 11],
    ]))
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
    assert_eq!(write[BTH_OFF], 0x0a, "frame 4 is RDMA WRITE only");
    assert_eq!(&write[26..30], &ACTIVE_IP.octets());
    let CmMessage::Rep(rep) = parse_frame(2).2 else {
        panic!()
    };
    let req = capture_req();
    assert_eq!(bth_psn(write), rep.starting_psn);
    assert_ne!(bth_psn(write), req.starting_psn);
}
