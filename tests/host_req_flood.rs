//! A flood of connection requests from spoofed addresses at a host, with a legitimate
//! connection made in the middle of it (issue: hostile networks, bounded connection
//! management). A REQ waits until its source answers ARP (`host::req_gate`): the
//! spoofed ones never reach the CM or the consumer, the state they cost stays bounded, and the
//! legitimate client, which resolved the host's address first, connects at once.

use dpdk_roce::cm::{AcceptParams, CmEvent, ConnectParams};
use dpdk_roce::host::QpOptions;
use dpdk_roce::wire::frame::RoceFrame;
use dpdk_roce::wire::psn::Psn;
use dpdk_roce::wire::reseal::reseal;
use roce_sim::link::{LinkConfig, Side};
use roce_sim::pair::{ConnSpec, Pair, IP_A, IP_B};
use std::net::Ipv4Addr;

/// A REQ frame A really sent (through ARP and the CM of a pair of its own).
fn req_frame() -> Vec<u8> {
    let mut p = Pair::with_arp(LinkConfig::clean());
    p.record(true);
    p.connect(&ConnSpec::default())
        .expect("the template connection");
    p.take_recorded()
        .into_iter()
        .find(|(side, f)| {
            *side == Side::A
                && RoceFrame::parse(f).is_ok_and(|r| {
                    r.headers.bth.dest_qp == 1 && r.payload.get(16..18) == Some(&[0x00, 0x10])
                })
        })
        .expect("A sent a REQ")
        .1
}

/// The REQ from `ip` with comm ID `k`, resealed.
fn spoofed(template: &[u8], ip: Ipv4Addr, k: u32) -> Vec<u8> {
    let mut f = template.to_vec();
    f[26..30].copy_from_slice(&ip.octets());
    // The REQ's local comm ID: MAD data (24 bytes into the payload behind BTH and DETH).
    let comm_id = 14 + 20 + 8 + 12 + 8 + 24;
    f[comm_id..comm_id + 4].copy_from_slice(&(0x4000_0000 + k).to_be_bytes());
    assert!(reseal(&mut f));
    assert!(RoceFrame::parse(&f).is_ok());
    f
}

#[test]
fn a_legitimate_connection_made_during_a_flood_of_spoofed_requests_succeeds() {
    const FLOOD: u32 = 100_000;
    const LEGIT_AT: u32 = 30_000;
    let template = req_frame();
    let mut p = Pair::with_arp(LinkConfig::clean());
    p.b.listen(7471).unwrap();
    let now = p.now();
    let qa = p.a.create_qp(now, QpOptions::default()).unwrap();
    let qb = p.b.create_qp(now, QpOptions::default()).unwrap();
    let (mut requests_seen, mut established_at) = (Vec::new(), None);
    let mut most_held = 0;
    for k in 0..FLOOD {
        // Half the sources on B's subnet (ARP asks, nobody answers), half off it.
        let ip = if k % 2 == 0 {
            Ipv4Addr::new(192, 0, 2, 3 + (k / 2 % 250) as u8)
        } else {
            Ipv4Addr::new(10, 200, (k >> 8) as u8, k as u8)
        };
        let now = p.now();
        p.b.handle_frame(now, &spoofed(&template, ip, k));
        if k == LEGIT_AT {
            p.a.connect(now, ConnectParams::new(IP_B, 7471, qa, Psn::new(5)))
                .unwrap();
        }
        if k % 50 == 0 {
            for _ in 0..20 {
                p.step().unwrap();
            }
            while let Some(ev) = p.b.poll_event() {
                if let CmEvent::ConnectRequest { id, src_ip, .. } = ev {
                    requests_seen.push(src_ip);
                    if src_ip == IP_A {
                        let now = p.now();
                        p.b.accept(now, id, AcceptParams::new(qb, Psn::new(9)))
                            .unwrap();
                    }
                }
            }
            while let Some(ev) = p.a.poll_event() {
                if matches!(ev, CmEvent::Established { .. }) {
                    established_at.get_or_insert(k);
                }
            }
            most_held = most_held.max(p.b.requests_held());
        }
    }
    let s = p.b.stats().clone();
    println!(
        "established after {established_at:?} of {FLOOD} spoofed REQs; held at most {most_held}; \
         {s:?}; ARP cache {} entries",
        p.b.net().cache_len()
    );
    // The legitimate connection came up during the flood, and was the only request the
    // consumer saw.
    let at = established_at.expect("the legitimate connection never came up");
    assert!(at < LEGIT_AT + 1_000, "established only after {at}");
    assert_eq!(requests_seen, vec![IP_A]);
    assert_eq!(p.b.cm().unanswered_requests(), 0);
    // Bounded state: the held REQs, the CM's connections, the neighbour table.
    assert!(most_held <= 256, "{most_held}");
    assert!(
        p.b.cm().connection_count() <= 1,
        "{}",
        p.b.cm().connection_count()
    );
    assert!(p.b.net().cache_len() <= 1024, "{}", p.b.net().cache_len());
    // Every spoofed REQ was held or dropped unheard, counted.
    assert!(
        s.rx_requests_held > 0 && s.rx_requests_unverified > u64::from(FLOOD) / 3,
        "{s:?}"
    );
}
