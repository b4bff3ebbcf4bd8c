//! The shipped profiles in dpdk-config/: every file loads, validates, round-trips through TOML,
//! and gives the EAL arguments its topology needs.

use dpdk_roce::config::{ConfigError, MemifRole, PortDriver, Profile, Progress};
use dpdk_roce::transport::types::Mtu;
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("dpdk-config")
}

fn load(name: &str) -> Profile {
    Profile::load(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

const SHIPPED: [&str; 7] = [
    "af_packet-a.toml",
    "af_packet-b.toml",
    "memif-client.toml",
    "memif-server.toml",
    "nic-example.toml",
    "tap-a.toml",
    "tap-b.toml",
];

/// The EAL arguments with the pid-dependent file prefix replaced by `PREFIX`.
fn args(p: &Profile) -> Vec<String> {
    let prefix = format!("--file-prefix={}", p.file_prefix());
    p.eal_args()
        .into_iter()
        .map(|a| {
            if a == prefix {
                "--file-prefix=PREFIX".into()
            } else {
                a
            }
        })
        .collect()
}

#[test]
fn every_shipped_profile_is_listed_loads_and_round_trips() {
    let mut found: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .collect();
    found.sort();
    assert_eq!(
        found, SHIPPED,
        "profiles added or removed: update this test and the README"
    );
    let readme = std::fs::read_to_string(dir().join("README.md")).unwrap();
    for name in SHIPPED {
        let p = load(name);
        assert_eq!(
            format!("{}.toml", p.name),
            name,
            "name key differs from the file name"
        );
        let back = Profile::from_str(&p.to_toml()).unwrap();
        assert_eq!(back, p, "{name} does not round-trip");
        assert!(readme.contains(name), "README.md does not mention {name}");
        // Default file prefix: the name and this process's pid.
        assert_eq!(
            p.file_prefix(),
            format!("{}-{}", p.name, std::process::id())
        );
        assert!(
            p.eal.file_prefix.is_none(),
            "{name}: shipped profiles must not fix the prefix"
        );
        // Documented: a comment in the file for every key it sets.
        let text = std::fs::read_to_string(dir().join(name)).unwrap();
        let mut prev_comment = false;
        for line in text.lines() {
            let t = line.trim();
            if t.contains('=') && !t.starts_with('#') && !t.starts_with('[') {
                assert!(prev_comment, "{name}: key without a comment above it: {t}");
            }
            prev_comment =
                t.starts_with('#') || (prev_comment && t.contains('=') && !t.starts_with('['));
        }
    }
}

#[test]
fn af_packet_pair() {
    let a = load("af_packet-a.toml");
    let b = load("af_packet-b.toml");
    assert_eq!(
        args(&a),
        [
            "-l",
            "0",
            "--no-pci",
            "--file-prefix=PREFIX",
            "--no-shconf",
            "--huge-unlink",
            "--vdev=net_af_packet0,iface=rocev0a,qpairs=1",
            "--log-level=notice",
        ]
    );
    assert_eq!(
        args(&b),
        [
            "-l",
            "1",
            "--no-pci",
            "--file-prefix=PREFIX",
            "--no-shconf",
            "--huge-unlink",
            "--vdev=net_af_packet0,iface=rocev0b,qpairs=1",
            "--log-level=notice",
        ]
    );
    assert_eq!(a.roce.address.to_string(), "10.77.0.1/24");
    assert_eq!(b.roce.address.to_string(), "10.77.0.2/24");
    assert!(a
        .roce
        .address
        .v4
        .unwrap()
        .contains(b.roce.address.v4.unwrap().addr()));
    assert_eq!(a.roce_pmtu(), Mtu::Mtu1024);
    // Two processes on two vCPUs: one lcore each, disjoint, inline progress.
    assert_eq!(a.engine.progress, Progress::Inline);
    assert_eq!(b.engine.progress, Progress::Inline);
    assert!(a.eal.lcores.iter().all(|c| !b.eal.lcores.contains(c)));
}

#[test]
fn tap_pair() {
    let a = load("tap-a.toml");
    let b = load("tap-b.toml");
    assert_eq!(
        args(&a),
        [
            "-l",
            "0",
            "--no-pci",
            "--file-prefix=PREFIX",
            "--no-shconf",
            "--no-huge",
            "-m",
            "512",
            "--vdev=net_tap0,iface=rocetap0a",
            "--log-level=notice",
        ]
    );
    assert!(args(&b).contains(&"--vdev=net_tap0,iface=rocetap0b".to_string()));
    assert!(a
        .roce
        .address
        .v4
        .unwrap()
        .contains(b.roce.address.v4.unwrap().addr()));
    assert_ne!(a.roce.address.primary(), b.roce.address.primary());
}

#[test]
fn memif_pair() {
    let s = load("memif-server.toml");
    let c = load("memif-client.toml");
    assert_eq!(
        args(&s),
        [
            "-l",
            "0",
            "--no-pci",
            "--file-prefix=PREFIX",
            "--no-shconf",
            "--huge-unlink",
            "--vdev=net_memif0,role=server,socket=/run/dpdk-roce/memif0.sock,id=0,socket-abstract=no",
            "--log-level=notice",
        ]
    );
    assert!(args(&c).contains(
        &"--vdev=net_memif0,role=client,socket=/run/dpdk-roce/memif0.sock,id=0,socket-abstract=no"
            .to_string()
    ));
    match (&s.port.driver, &c.port.driver) {
        (
            PortDriver::Memif {
                socket: s1,
                role: MemifRole::Server,
                id: i1,
                ..
            },
            PortDriver::Memif {
                socket: s2,
                role: MemifRole::Client,
                id: i2,
                ..
            },
        ) => {
            assert_eq!(s1, s2, "the two sides must share the socket");
            assert_eq!(i1, i2, "the two sides must share the id");
            assert!(s1.starts_with("/run/dpdk-roce/"));
        }
        other => panic!("not a memif server/client pair: {other:?}"),
    }
    assert!(s
        .roce
        .address
        .v4
        .unwrap()
        .contains(c.roce.address.v4.unwrap().addr()));
}

#[test]
fn nic_example() {
    let p = load("nic-example.toml");
    let a = args(&p);
    assert!(!a.contains(&"--no-pci".to_string()), "{a:?}");
    assert_eq!(
        a,
        [
            "-l",
            "0,2,3",
            "--file-prefix=PREFIX",
            "--no-shconf",
            "--huge-unlink",
            "-m",
            "1024",
            "-a",
            "0000:03:00.0",
            "--log-level=notice",
        ]
    );
    assert_eq!(p.roce_pmtu(), Mtu::Mtu4096);
    assert_eq!(p.engine.progress, Progress::Core);
    assert_eq!(p.engine.poll_cores.len(), usize::from(p.port.rx_queues));
}

#[test]
fn env_overrides_on_a_shipped_profile() {
    let mut p = load("af_packet-a.toml");
    p.apply_overrides(|k| match k {
        "DPDK_ROCE_CAPTURE" => Some("/tmp/cap.pcap".into()),
        "DPDK_ROCE_PROGRESS" => Some("core".into()),
        _ => None,
    })
    .unwrap();
    assert_eq!(p.engine.capture, Some(PathBuf::from("/tmp/cap.pcap")));
    assert_eq!(p.engine.progress, Progress::Core);
    let err = p
        .apply_overrides(|k| (k == "DPDK_ROCE_PROGRESS").then(|| "spin".into()))
        .unwrap_err();
    assert!(matches!(err, ConfigError::BadProgress { .. }), "{err}");
}

#[test]
fn load_errors_name_the_file_and_the_key() {
    let tmp = std::env::temp_dir().join(format!("dpdk-roce-config-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let text = std::fs::read_to_string(dir().join("af_packet-a.toml"))
        .unwrap()
        .replace("mtu = 1500", "mtu = 9500");
    let path = tmp.join("broken.toml");
    std::fs::write(&path, text).unwrap();
    let err = Profile::load(&path).unwrap_err();
    let msg = err.to_string();
    std::fs::remove_dir_all(&tmp).unwrap();
    assert!(
        msg.contains("broken.toml") && msg.contains("port.mtu"),
        "{msg}"
    );
    assert!(matches!(
        err.root(),
        ConfigError::OutOfRange {
            field: "port.mtu",
            value: 9500,
            ..
        }
    ));
}
