//! IAs on a real DPDK port (net_af_packet on a veth end created here), in this one process:
//! several open at once share the port, one closing leaves the others working, and after the
//! last close an IA opens again on the same port (EAL and the port live for the process). One
//! test: EAL is initialised once per process, with this profile's device.

mod dpdk_common;

use dpdk_common::Veth;
use dpdk_roce::config::Profile;
use dpdk_roce::dat::{DatError, Ep, Evd, EvdFlags, HandleKind, Ia, Lmr, Pz};
use dpdk_roce::mem::access::Access;

/// Objects that exercise the device: a PZ, an LMR, EVDs and an EP (whose QP the engine creates).
fn use_ia(ia: &Ia) -> (Pz, Lmr, Evd, Evd, Ep) {
    let pz = Pz::create(ia).expect("pz");
    let lmr = Lmr::create(&pz, 4096, Access::LOCAL_WRITE).expect("lmr");
    let dto = Evd::create(ia, 64, EvdFlags::DTO).expect("dto evd");
    let conn = Evd::create(ia, 16, EvdFlags::CONNECTION).expect("conn evd");
    let ep = Ep::create(ia, &pz, Some(&dto), Some(&dto), Some(&conn), None, None).expect("ep");
    assert_ne!(ep.qpn(), 0);
    // A receive is applied by the engine's shard.
    ep.post_recv(&[lmr.triplet(0, 64)], 1).expect("post_recv");
    ia.progress();
    (pz, lmr, dto, conn, ep)
}

#[test]
fn ias_share_a_dpdk_port_and_open_again_after_the_last_close() {
    let veth = Veth::up("ro");
    let dir = std::env::temp_dir().join(format!("dpdk-roce-reopen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = std::fs::read_to_string(dpdk_common::repo().join("dpdk-config/af_packet-a.toml"))
        .unwrap()
        .replace(
            "iface = \"rocev0a\"",
            &format!("iface = \"{}\"", veth.end('a')),
        )
        .replace("name = \"af_packet-a\"", "name = \"reopen-a\"");
    let path = dir.join("a.toml");
    std::fs::write(&path, text).unwrap();
    let profile = Profile::load(&path).expect("profile");

    // Two at once: one device (same address), each with its own async EVD.
    let ia1 = Ia::open(&profile).expect("first open");
    let ia2 = Ia::open(&profile).expect("second open while the first is open");
    assert_eq!(ia1.address(), ia2.address());
    assert_ne!(ia1.async_evd().id(), ia2.async_evd().id());
    let objs1 = use_ia(&ia1);
    let objs2 = use_ia(&ia2);
    // The first closes (its objects first: a graceful close refuses while they are open).
    let ia1 = ia1.close().expect_err("objects of ia1 are open").object;
    drop(objs1);
    ia1.close().map_err(|r| r.error).expect("ia1 closes");
    // The second still works, and a third joins it.
    drop(objs2);
    let objs2 = use_ia(&ia2);
    let ia3 = Ia::open(&profile).expect("third open");
    let objs3 = use_ia(&ia3);
    drop((objs2, objs3));
    // dat_ia_open given ia2's async EVD: shared on the same port; refused (EVD_ASYNC) for a
    // profile of another port (nothing is opened for it) and for an EVD that is not async.
    let ia4 = Ia::open_with_async_evd(&profile, ia2.async_evd()).expect("shared async EVD");
    assert_eq!(ia4.async_evd().id(), ia2.async_evd().id());
    let objs4 = use_ia(&ia4);
    let other = Profile::load(dpdk_common::repo().join("dpdk-config/tap-a.toml")).unwrap();
    let dto = Evd::create(&ia2, 4, EvdFlags::DTO).unwrap();
    for (what, r) in [
        (
            "another port",
            Ia::open_with_async_evd(&other, ia2.async_evd()),
        ),
        ("a DTO EVD", Ia::open_with_async_evd(&profile, &dto)),
    ] {
        match r {
            Err(DatError::InvalidHandleOf {
                kind: HandleKind::EvdAsync,
                ..
            }) => {}
            Err(e) => panic!("{what}: {e}"),
            Ok(_) => panic!("{what}: opened"),
        }
    }
    drop((objs4, dto));
    ia4.close().map_err(|r| r.error).expect("ia4 closes");
    ia2.close().map_err(|r| r.error).expect("ia2 closes");
    ia3.close().map_err(|r| r.error).expect("ia3 closes");

    // All closed: the device is gone, the port stays; opening again works, twice.
    for round in 0..2 {
        let ia = Ia::open(&profile).unwrap_or_else(|e| panic!("reopen {round}: {e}"));
        drop(use_ia(&ia));
        ia.close().map_err(|r| r.error).expect("close after reopen");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
