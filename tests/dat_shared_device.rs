//! Several IAs on one device (what concurrent dat_ia_open calls of one IA name get, as with the
//! OFA providers): each has its own async EVD, consumer context and object accounting, they share
//! the port, engine, memory and CM, and the device outlives any one of them. In memory (two
//! devices on a ChannelIo cable), inline progress; tests/dat_reopen.rs does it on a DPDK port.

mod dat_common;

use dat_common::*;
use dpdk_roce::dat::{DatEvent, Ep, Evd, EvdFlags, Ia, Lmr, WATERMARK_INFINITE};
use dpdk_roce::engine::runtime::AsyncEvent;

/// Soft-watermark events of QP `qpn` on `evd`, driving both devices meanwhile.
fn watermark_events(evd: &Evd, a: &Ia, b: &Ia, qpn: u32) -> usize {
    drain(evd, a, b, 50)
        .into_iter()
        .filter(|e| {
            matches!(e, DatEvent::Async(AsyncEvent::EpWatermark { qpn: q, soft: true, .. }) if *q == qpn)
        })
        .count()
}

#[test]
fn a_second_ia_on_the_device_has_its_own_accounting_and_outlives_the_first() {
    let (a, b, _psp) = pair();
    let a2 = side(a.ia.open_on_same_device());
    assert_eq!(a2.ia.address(), a.ia.address());
    assert_eq!(a2.ia.shards(), a.ia.shards());
    // Own consumer contexts.
    a.ia.context().set(1);
    a2.ia.context().set(2);
    assert_eq!((a.ia.context().get(), a2.ia.context().get()), (1, 2));
    // Objects of one IA do not hold the other: a's PZ and EVDs refuse a's graceful close only.
    let Side {
        ia: a_ia,
        pz,
        dto: a_dto,
        conn,
        cr,
    } = a;
    let a_ia = a_ia
        .close()
        .expect_err("a still has its PZ and EVDs")
        .object;
    drop((pz, a_dto, conn, cr));
    let third = a2.ia.open_on_same_device();
    third
        .close()
        .map_err(|r| r.error)
        .expect("an IA without objects closes");
    a_ia.close()
        .map_err(|r| r.error)
        .expect("a closes although a2 has objects on the same device");
    // The device lives on with a2: connect, move data, disconnect.
    let (ea, eb) = (ep(&a2), ep(&b));
    connect(&a2, &b, &ea, &eb);
    let la = Lmr::create(&a2.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    la.write(0, b"shared device").unwrap();
    eb.post_recv(&[lb.triplet(0, 64)], 7).unwrap();
    ea.post_send(&[la.triplet(0, 13)], 8).unwrap();
    assert_eq!(dto(&a2.dto, &b.ia).cookie, 8);
    let d = dto(&b.dto, &a2.ia);
    assert_eq!((d.cookie, d.transferred_length), (7, 13));
    assert_eq!(lb.read(0, 13).unwrap(), b"shared device");
}

#[test]
fn async_events_of_an_ep_go_to_the_async_evd_of_its_own_ia() {
    let (a, b, _psp) = pair();
    let a2 = side(a.ia.open_on_same_device());
    let (e1, e2) = (ep(&a), ep(&a2));
    let (l1, l2) = (
        Lmr::create(&a.pz, 4096, RW).unwrap(),
        Lmr::create(&a2.pz, 4096, RW).unwrap(),
    );
    e2.set_watermark(1, WATERMARK_INFINITE).unwrap();
    for i in 0..2 {
        e2.post_recv(&[l2.triplet(0, 8)], i).unwrap();
    }
    // The shard reports e2's soft watermark on a2's async EVD, not on a's.
    assert_eq!(
        watermark_events(a2.ia.async_evd(), &a2.ia, &b.ia, e2.qpn()),
        1
    );
    assert_eq!(
        watermark_events(a.ia.async_evd(), &a.ia, &b.ia, e2.qpn()),
        0
    );
    e1.set_watermark(1, WATERMARK_INFINITE).unwrap();
    for i in 0..2 {
        e1.post_recv(&[l1.triplet(0, 8)], i).unwrap();
    }
    assert_eq!(
        watermark_events(a.ia.async_evd(), &a.ia, &b.ia, e1.qpn()),
        1
    );
    assert_eq!(
        watermark_events(a2.ia.async_evd(), &a2.ia, &b.ia, e1.qpn()),
        0
    );
}

#[test]
fn an_evd_overflow_is_reported_on_the_async_evd_of_the_evds_ia() {
    let (a, b, _psp) = pair();
    let a2 = side(a.ia.open_on_same_device());
    // A one-event receive EVD on a2 gets two completions: the second overflows.
    let small = Evd::create(&a2.ia, 1, EvdFlags::DTO).unwrap();
    let e = Ep::create(
        &a2.ia,
        &a2.pz,
        Some(&small),
        Some(&a2.dto),
        Some(&a2.conn),
        None,
        None,
    )
    .unwrap();
    let eb = ep(&b);
    connect(&a2, &b, &e, &eb);
    let l = Lmr::create(&a2.pz, 4096, RW).unwrap();
    let lb = Lmr::create(&b.pz, 4096, RW).unwrap();
    for i in 0..2 {
        e.post_recv(&[l.triplet(0, 8)], i).unwrap();
    }
    for i in 0..2 {
        eb.post_send(&[lb.triplet(0, 8)], i).unwrap();
        assert_eq!(dto(&b.dto, &a2.ia).cookie, i);
    }
    let overflow = |evd: &Evd, ia: &Ia| {
        drain(evd, ia, &b.ia, 50)
            .into_iter()
            .filter(|ev| matches!(ev, DatEvent::Async(AsyncEvent::EvdOverflow { .. })))
            .count()
    };
    assert_eq!(overflow(a2.ia.async_evd(), &a2.ia), 1);
    assert_eq!(overflow(a.ia.async_evd(), &a.ia), 0);
}

/// An ARP request from another station (02:00:00:00:00:99) that claims `ip`.
fn arp_claiming(ip: std::net::Ipv4Addr) -> Vec<u8> {
    let station = [2, 0, 0, 0, 0, 0x99];
    let mut f = vec![0xff; 6]; // broadcast
    f.extend(station);
    f.extend([0x08, 0x06]); // ARP
    f.extend([0, 1, 0x08, 0x00, 6, 4, 0, 1]); // Ethernet/IPv4, request
    f.extend(station);
    f.extend(ip.octets());
    f.extend([0; 6]);
    f.extend(ip.octets());
    f
}

/// Address-conflict events on the async EVD of `ia`, driving it meanwhile.
fn conflicts(ia: &Ia) -> usize {
    let mut n = 0;
    for _ in 0..50 {
        ia.progress();
        while let Ok(ev) = ia.async_evd().dequeue() {
            if matches!(
                ev,
                DatEvent::Async(AsyncEvent::Net(
                    dpdk_roce::net::NetEvent::AddressConflict { .. }
                ))
            ) {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn an_event_of_the_device_itself_reaches_every_open_ia() {
    use dpdk_roce::engine::channel_io::ChannelIo;
    use dpdk_roce::io::FrameIo;
    let (io, mut station) = ChannelIo::pair(64);
    let ia1 = Ia::open_with(
        dpdk_roce::dat::IaConfig {
            mac: dpdk_roce::wire::ethernet::EthernetAddress([2, 0, 0, 0, 1, 0xa]),
            address: dpdk_roce::config::PortAddresses::v4(IP_A, 24)
                .expect("a host address on its prefix"),
            routes: Default::default(),
            dscp: 0,
            cm: Default::default(),
            congestion: Default::default(),
            mtu: 1500,
            shards: 2,
            engine: dpdk_roce::engine::runtime::EngineConfig {
                progress: dpdk_roce::config::Progress::Inline,
                ..Default::default()
            },
        },
        vec![Box::new(io)],
    )
    .unwrap();
    let ia2 = ia1.open_on_same_device();
    let ia3 = ia1.open_on_same_device();
    ia3.close().map_err(|r| r.error).unwrap();
    assert!(station.tx(&arp_claiming(IP_A)));
    assert_eq!((conflicts(&ia1), conflicts(&ia2)), (1, 1));
    // The IA that opened the device closes: the other still hears from the device.
    ia1.close().map_err(|r| r.error).unwrap();
    assert!(station.tx(&arp_claiming(IP_A)));
    assert_eq!(conflicts(&ia2), 1);
}

/// dat_ia_open given an existing async EVD (as the OFA provider allows: one async handler per
/// channel adapter): the new IA's EPs report there, a device event arrives once, the EVD's own
/// IA cannot close gracefully while it is shared, and only an IA's async EVD can be given.
#[test]
fn an_ia_opened_with_another_ias_async_evd_reports_there_and_holds_it() {
    use dpdk_roce::dat::{DatError, HandleKind, StateKind};
    let (a, b, _psp) = pair();
    let shared = a.ia.async_evd();
    let a2 = side(Ia::open_sharing_async_evd(shared).expect("an IA's async EVD is shared"));
    assert!(a2.ia.shares_async_evd() && !a.ia.shares_async_evd());
    assert_eq!(a2.ia.async_evd().id(), shared.id());
    assert_eq!(a2.ia.address(), a.ia.address(), "the EVD's device");
    // a2's EP reports its soft watermark on a's async EVD.
    let e2 = ep(&a2);
    let l2 = Lmr::create(&a2.pz, 4096, RW).unwrap();
    e2.set_watermark(1, WATERMARK_INFINITE).unwrap();
    for i in 0..2 {
        e2.post_recv(&[l2.triplet(0, 8)], i).unwrap();
    }
    assert_eq!(watermark_events(shared, &a2.ia, &b.ia, e2.qpn()), 1);
    // A DTO EVD, or an EVD of a consumer, is not an async EVD.
    for wrong in [&a.dto, &a2.conn] {
        match Ia::open_sharing_async_evd(wrong) {
            Err(e @ DatError::InvalidHandleOf { kind, .. }) => {
                assert_eq!(kind, HandleKind::EvdAsync);
                assert_eq!(
                    (e.code() & 0x3fff_0000, e.code() & 0xffff),
                    (
                        dat_sys::DAT_INVALID_HANDLE,
                        dat_sys::DAT_INVALID_HANDLE_EVD_ASYNC
                    )
                );
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
    }
    // a's objects gone, a still cannot close: a2 uses its async EVD. a2 closes (its own
    // objects first) without taking the EVD with it; then a closes.
    let Side {
        ia: a_ia,
        pz,
        dto,
        conn,
        cr,
    } = a;
    drop((pz, dto, conn, cr));
    let a_ia = match a_ia.close() {
        Err(r) => {
            assert!(
                matches!(
                    r.error,
                    DatError::InvalidStateOf {
                        kind: StateKind::IaInUse,
                        ..
                    }
                ),
                "{:?}",
                r.error
            );
            r.object
        }
        Ok(()) => panic!("closed while a2 shares its async EVD"),
    };
    let Side {
        ia: a2_ia,
        pz,
        dto,
        conn,
        cr,
    } = a2;
    drop((e2, l2, pz, dto, conn, cr));
    a2_ia.close().map_err(|r| r.error).expect("a2 closes");
    a_ia.close()
        .map_err(|r| r.error)
        .expect("a closes once a2 is gone");
}
