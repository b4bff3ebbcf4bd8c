//! The ARP frames we send, as tshark decodes them (tshark is required: scripts/setup.sh installs it).

use super::*;
use crate::capture::PcapCapture;
use std::process::Command;

#[test]
fn tshark_decodes_our_arp_frames() {
    let mut net = net();
    net.handle_frame(ms(0), &linux_request(LINUX_MAC, LINUX_IP, OUR_IP, false));
    net.resolve(ms(0), Ipv4Addr::new(192, 168, 2, 30).into());
    let frames = drain(&mut net, ms(0));
    assert_eq!(frames.len(), 2, "a reply and a request");

    let path = std::env::temp_dir().join(format!("dpdk-roce-net-arp-{}.pcap", std::process::id()));
    let mut cap = PcapCapture::create(&path).unwrap();
    for (i, f) in frames.iter().enumerate() {
        cap.write(ms(i as u64), &f.padded()).unwrap();
    }
    cap.finish().unwrap();

    let out = Command::new("tshark")
        .arg("-r")
        .arg(&path)
        .args(["-T", "fields", "-E", "separator=,"])
        .args(["-e", "eth.dst", "-e", "arp.opcode", "-e", "arp.src.hw_mac"])
        .args([
            "-e",
            "arp.src.proto_ipv4",
            "-e",
            "arp.dst.hw_mac",
            "-e",
            "arp.dst.proto_ipv4",
        ])
        .args(["-e", "_ws.malformed"])
        .output();
    let _ = std::fs::remove_file(&path);
    let out = out.expect("tshark must be installed (bash scripts/setup.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            "52:54:00:8b:2d:12,2,02:00:00:00:00:01,192.168.2.25,52:54:00:8b:2d:12,192.168.2.24,",
            "ff:ff:ff:ff:ff:ff,1,02:00:00:00:00:01,192.168.2.25,00:00:00:00:00:00,192.168.2.30,",
        ]
    );
}
