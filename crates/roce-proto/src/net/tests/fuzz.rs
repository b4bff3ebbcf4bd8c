//! `handle_frame` never panics, and every frame is accounted for exactly once: IPv4, ARP, IPv6
//! and Neighbor Discovery, on ports with and without an IPv6 address.

use super::*;
use proptest::prelude::*;

/// Feeds `frame` and checks the accounting invariant: delivered + consumed + dropped = frames.
fn feed(net: &mut Net, consumed: &mut u64, now: Instant, frame: &[u8]) {
    if let Inbound::Consumed = net.handle_frame(now, frame) {
        *consumed += 1;
    }
    let s = net.stats();
    assert_eq!(s.rx_roce + *consumed + s.dropped_total(), s.rx_frames);
    while net.poll_transmit(now).is_some() {}
    while net.poll_event().is_some() {}
}

fn seeds() -> Vec<Vec<u8>> {
    vec![
        roce_frame(OUR_MAC, OUR_IP),
        linux_request(LINUX_MAC, LINUX_IP, OUR_IP, true),
        linux_reply(),
        roce_frame6(OUR_MAC, super::ndp::OUR_IP6),
        super::ndp::linux_ns(LINUX_MAC, super::ndp::LINUX_IP6, super::ndp::OUR_IP6, 255),
        super::ndp::linux_na(
            LINUX_MAC,
            super::ndp::LINUX_IP6,
            LINUX_MAC,
            super::ndp::OUR_IP6,
            super::ndp::SOLICITED_OVERRIDE,
        ),
    ]
}

proptest! {
    #[test]
    fn random_bytes_never_panic(frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 1..20), ipv6 in any::<bool>()) {
        let mut net = if ipv6 { dual_net() } else { net() };
        let mut consumed = 0;
        for (i, f) in frames.iter().enumerate() {
            feed(&mut net, &mut consumed, ms(i as u64 * 300), f);
        }
        prop_assert_eq!(net.stats().rx_frames, frames.len() as u64);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        seed in 0usize..6,
        ipv6 in any::<bool>(),
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        ip_fix in any::<bool>(),
    ) {
        // IPv6 frames to a port without IPv6, too (EtherType drops).
        let mut net = if ipv6 { dual_net() } else { net() };
        net.resolve(ms(0), LINUX_IP.into());
        net.resolve(ms(0), super::ndp::LINUX_IP6.into());
        let mut f = seeds().swap_remove(seed);
        for (at, v) in &edits {
            let i = at.index(f.len());
            f[i] = v.wrapping_add(f[i]);
        }
        if ip_fix && seed == 0 {
            fix_ip_checksum(&mut f);
        }
        if truncate {
            f.truncate(cut.index(f.len() + 1));
        }
        let mut consumed = 0;
        feed(&mut net, &mut consumed, ms(1), &f);
        feed(&mut net, &mut consumed, ms(5000), &f);
        prop_assert_eq!(net.stats().rx_frames, 2);
    }

    #[test]
    fn source_port_always_in_range(src in any::<u32>(), dst in any::<u32>()) {
        let p = udp_source_port(src, dst);
        prop_assert!(p >= 0xc000);
        prop_assert_eq!(p, udp_source_port(src, dst));
    }
}
