use super::*;
use std::net::Ipv4Addr;

const BASE: &str = r#"
name = "unit"
[eal]
lcores = [0, 1]
[port]
pmd = "af_packet"
iface = "rocev0a"
[roce]
address = "10.77.0.1/24"
[engine]
poll_cores = [1]
"#;

/// BASE with `line` replacing the same key's line of `[section]`, or added at its top.
fn with(section: &str, line: &str) -> String {
    let key = line.split('=').next().unwrap().trim();
    let header = format!("[{section}]");
    let mut lines: Vec<String> = BASE.lines().map(str::to_string).collect();
    let start = lines
        .iter()
        .position(|l| *l == header)
        .unwrap_or_else(|| panic!("section {section} not in BASE"));
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with('['))
        .map_or(lines.len(), |i| start + 1 + i);
    let existing = (start + 1..end).find(|&i| {
        lines[i].contains('=') && lines[i].split('=').next().map(str::trim) == Some(key)
    });
    match existing {
        Some(i) => lines[i] = line.to_string(),
        None => lines.insert(start + 1, line.to_string()),
    }
    lines.join("\n")
}

fn without(key_line_prefix: &str) -> String {
    BASE.lines()
        .filter(|l| !l.starts_with(key_line_prefix))
        .collect::<Vec<_>>()
        .join("\n")
}

fn err(text: &str) -> ConfigError {
    match Profile::from_str(text) {
        Ok(p) => panic!("accepted:\n{text}\n=> {p:?}"),
        Err(e) => e,
    }
}

fn ok(text: &str) -> Profile {
    Profile::from_str(text).unwrap_or_else(|e| panic!("rejected: {e}\n{text}"))
}

#[test]
fn base_defaults() {
    let p = ok(BASE);
    assert_eq!(p.name, "unit");
    assert_eq!(p.eal.lcores, vec![0, 1]);
    assert!(p.eal.hugepages);
    assert_eq!(p.eal.memory_mb, None);
    assert_eq!(p.eal.file_prefix, None);
    assert!(p.eal.extra_args.is_empty());
    assert_eq!(p.eal.log_level, "notice");
    assert_eq!(
        p.port.driver,
        PortDriver::AfPacket {
            iface: "rocev0a".into()
        }
    );
    assert_eq!((p.port.rx_queues, p.port.tx_queues), (1, 1));
    assert_eq!((p.port.rx_descriptors, p.port.tx_descriptors), (1024, 1024));
    assert_eq!(p.port.mbuf_pool_size, 8191);
    assert_eq!(p.port.mtu, 1500);
    assert!(p.port.vdev_extra.is_empty());
    let v4 = p.roce.address.v4.expect("an IPv4 address");
    assert_eq!(v4.addr(), Ipv4Addr::new(10, 77, 0, 1));
    assert_eq!(v4.prefix_len(), 24);
    assert_eq!(p.roce.address.v6, None);
    assert_eq!(p.engine.poll_cores, vec![1]);
    assert_eq!(p.engine.progress, Progress::Core);
    assert_eq!(p.engine.idle_pause_us, 0);
    assert_eq!(p.engine.capture, None);
    assert_eq!(p.engine.away_after_us, DEFAULT_AWAY_AFTER_US);
    assert_eq!(p.roce_pmtu(), Mtu::Mtu1024);
}

#[test]
fn eal_args_af_packet_hugepages() {
    let p = ok(BASE);
    let prefix = format!("unit-{}", std::process::id());
    assert_eq!(p.file_prefix(), prefix);
    assert_eq!(
        p.eal_args(),
        vec![
            "-l".to_string(),
            "0,1".into(),
            "--no-pci".into(),
            format!("--file-prefix={prefix}"),
            "--no-shconf".into(),
            "--huge-unlink".into(),
            "--vdev=net_af_packet0,iface=rocev0a,qpairs=1".into(),
            "--log-level=notice".into(),
        ]
    );
    assert_eq!(p.port.device_name(), "net_af_packet0");
}

#[test]
fn eal_args_no_huge_memory_prefix_extra() {
    let text = with("eal", "hugepages = false");
    let p = ok(&text);
    let args = p.eal_args();
    assert!(!args.contains(&"--huge-unlink".to_string()));
    let i = args.iter().position(|a| a == "--no-huge").unwrap();
    assert_eq!(args[i + 1..i + 3], ["-m".to_string(), "512".to_string()]);

    let text = with("eal", "memory_mb = 256");
    let text = text.replace("[eal]", "[eal]\nhugepages = false\nfile_prefix = \"fixed\"\nextra_args = [\"--in-memory\"]\nlog_level = \"pmd.net.af_packet:debug\"");
    let p = ok(&text);
    assert_eq!(p.eal.memory_mb, Some(256));
    assert_eq!(
        p.eal_args(),
        vec![
            "-l",
            "0,1",
            "--no-pci",
            "--file-prefix=fixed",
            "--no-shconf",
            "--no-huge",
            "-m",
            "256",
            "--vdev=net_af_packet0,iface=rocev0a,qpairs=1",
            "--log-level=pmd.net.af_packet:debug",
            "--in-memory",
        ]
    );

    // With hugepages, -m only when memory_mb is set.
    let p = ok(&with("eal", "memory_mb = 128"));
    let args = p.eal_args();
    let i = args.iter().position(|a| a == "--huge-unlink").unwrap();
    assert_eq!(args[i + 1..i + 3], ["-m".to_string(), "128".to_string()]);
}

#[test]
fn eal_args_tap() {
    let text = BASE.replace("pmd = \"af_packet\"", "pmd = \"tap\"");
    let p = ok(&text.replace("rocev0a", "rocetap0a"));
    assert!(p
        .eal_args()
        .contains(&"--vdev=net_tap0,iface=rocetap0a".to_string()));
    assert_eq!(p.port.device_name(), "net_tap0");
}

#[test]
fn eal_args_memif() {
    let text = BASE.replace(
        "pmd = \"af_packet\"\niface = \"rocev0a\"",
        "pmd = \"memif\"\nsocket = \"/run/dpdk-roce/m.sock\"\nrole = \"client\"\nid = 3",
    );
    let p = ok(&text);
    assert_eq!(
        p.port.driver,
        PortDriver::Memif {
            socket: "/run/dpdk-roce/m.sock".into(),
            role: MemifRole::Client,
            id: 3,
            socket_abstract: false,
        }
    );
    assert!(p.eal_args().contains(
        &"--vdev=net_memif0,role=client,socket=/run/dpdk-roce/m.sock,id=3,socket-abstract=no"
            .to_string()
    ));
    let p = ok(&text.replace("id = 3", "socket_abstract = true"));
    assert!(p
        .eal_args()
        .contains(&"--vdev=net_memif0,role=client,socket=/run/dpdk-roce/m.sock,id=0".to_string()));
    // Role is required and checked.
    let e = err(&text.replace("role = \"client\"\n", ""));
    assert!(
        matches!(
            e,
            ConfigError::MissingField {
                field: "port.role",
                pmd: "memif"
            }
        ),
        "{e}"
    );
    let e = err(&text.replace("\"client\"", "\"master\""));
    assert!(matches!(&e, ConfigError::BadMemifRole { value } if value == "master"));
    assert!(e.to_string().contains("port.role"));
    let e = err(&text.replace("socket = \"/run/dpdk-roce/m.sock\"\n", ""));
    assert!(matches!(
        e,
        ConfigError::MissingField {
            field: "port.socket",
            ..
        }
    ));
}

#[test]
fn eal_args_pci() {
    let text = BASE.replace("iface = \"rocev0a\"", "pci_address = \"03:00.1\"");
    let text = text.replace("\"af_packet\"", "\"pci\"");
    let p = ok(&text);
    let args = p.eal_args();
    assert!(!args.contains(&"--no-pci".to_string()));
    let i = args.iter().position(|a| a == "-a").unwrap();
    assert_eq!(args[i + 1], "0000:03:00.1");
    assert!(!args.iter().any(|a| a.starts_with("--vdev")));
    assert_eq!(p.port.device_name(), "0000:03:00.1");

    let p = ok(&text.replace("[port]", "[port]\nvdev_extra = [\"rxq_cqe_comp_en=0\"]"));
    let args = p.eal_args();
    let i = args.iter().position(|a| a == "-a").unwrap();
    assert_eq!(args[i + 1], "0000:03:00.1,rxq_cqe_comp_en=0");

    for bad in [
        "3:00.1",
        "0000:03:00",
        "0000:03:20.0",
        "0000:03:00.8",
        "00000:03:00.0",
        "0000:0g:00.0",
        "a:b:c:d.0",
    ] {
        let e = err(&text.replace("03:00.1", bad));
        assert!(
            matches!(&e, ConfigError::BadPciAddress { value } if value == bad),
            "{bad}: {e}"
        );
        assert!(e.to_string().contains("port.pci_address"));
    }
}

#[test]
fn af_packet_queues_and_mtu_limits() {
    let text = with("port", "rx_queues = 2");
    let text = text.replace("[port]", "[port]\ntx_queues = 3\nmbuf_pool_size = 16384");
    let p = ok(&text);
    assert!(p
        .eal_args()
        .contains(&"--vdev=net_af_packet0,iface=rocev0a,qpairs=3".to_string()));

    // The vdev PMDs of DPDK 22.11 stop at 1500; a real NIC goes to 9000.
    for pmd_text in [
        BASE.to_string(),
        BASE.replace("\"af_packet\"", "\"tap\""),
        BASE.replace(
            "pmd = \"af_packet\"\niface = \"rocev0a\"",
            "pmd = \"memif\"\nsocket = \"/run/dpdk-roce/m.sock\"\nrole = \"server\"",
        ),
    ] {
        let text = pmd_text.replace("[port]", "[port]\nmtu = 1501");
        let e = err(&text);
        assert!(
            matches!(
                e,
                ConfigError::MtuAbovePmdLimit {
                    mtu: 1501,
                    max: 1500,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().starts_with("port.mtu"));
        ok(&pmd_text.replace("[port]", "[port]\nmtu = 1500"));
    }
    let pci = BASE
        .replace("iface = \"rocev0a\"", "pci_address = \"0000:03:00.0\"")
        .replace("\"af_packet\"", "\"pci\"");
    let p = ok(&pci.replace("[port]", "[port]\nmtu = 9000"));
    assert_eq!(p.roce_pmtu(), Mtu::Mtu4096);

    let p = ok(&with(
        "port",
        "vdev_extra = [\"qdisc_bypass=0\", \"framecnt=1024\"]",
    ));
    assert!(p.eal_args().contains(
        &"--vdev=net_af_packet0,iface=rocev0a,qpairs=1,qdisc_bypass=0,framecnt=1024".to_string()
    ));
    for bad in ["novalue", "=1", "a=", "a=1,b=2", "a= 1"] {
        let e = err(&with("port", &format!("vdev_extra = [\"{bad}\"]")));
        assert!(
            matches!(&e, ConfigError::BadVdevArg { value } if value == bad),
            "{bad}: {e}"
        );
    }
}

#[test]
fn roce_pmtu_boundaries() {
    assert_eq!(ROCE_OVERHEAD, 64);
    assert_eq!(roce_pmtu_for(256), None);
    assert_eq!(roce_pmtu_for(319), None);
    assert_eq!(roce_pmtu_for(320), Some(Mtu::Mtu256));
    assert_eq!(roce_pmtu_for(575), Some(Mtu::Mtu256));
    assert_eq!(roce_pmtu_for(576), Some(Mtu::Mtu512));
    assert_eq!(roce_pmtu_for(1087), Some(Mtu::Mtu512));
    assert_eq!(roce_pmtu_for(1088), Some(Mtu::Mtu1024));
    assert_eq!(roce_pmtu_for(1500), Some(Mtu::Mtu1024));
    assert_eq!(roce_pmtu_for(2111), Some(Mtu::Mtu1024));
    assert_eq!(roce_pmtu_for(2112), Some(Mtu::Mtu2048));
    assert_eq!(roce_pmtu_for(4159), Some(Mtu::Mtu2048));
    assert_eq!(roce_pmtu_for(4160), Some(Mtu::Mtu4096));
    assert_eq!(roce_pmtu_for(9000), Some(Mtu::Mtu4096));
    for mtu in [320u16, 576, 1088, 1500, 2112, 4160, 9000] {
        let pmtu = roce_pmtu_for(mtu).unwrap().bytes();
        // The largest: the payload plus headers fits, the next IB MTU would not.
        assert!(pmtu + u32::from(ROCE_OVERHEAD) <= u32::from(mtu));
        assert!(pmtu == 4096 || 2 * pmtu + u32::from(ROCE_OVERHEAD) > u32::from(mtu));
    }
}

#[test]
fn mtu_errors() {
    for bad in [0u32, 255, 9001, 65535] {
        let e = err(&with("port", &format!("mtu = {bad}")));
        assert!(
            matches!(
                e,
                ConfigError::OutOfRange {
                    field: "port.mtu",
                    min: 256,
                    max: 9000,
                    ..
                }
            ),
            "{bad}: {e}"
        );
        assert!(e.to_string().starts_with("port.mtu:"), "{e}");
    }
    let e = err(&with("port", "mtu = 300"));
    assert!(
        matches!(e, ConfigError::MtuTooSmallForRoce { mtu: 300, min: 320 }),
        "{e}"
    );
    assert!(e.to_string().contains("port.mtu"));
    assert_eq!(ok(&with("port", "mtu = 320")).roce_pmtu(), Mtu::Mtu256);
}

#[test]
fn queue_descriptor_and_pool_errors() {
    for field in ["rx_queues", "tx_queues"] {
        for bad in [0, 17] {
            let e = err(&with("port", &format!("{field} = {bad}")));
            assert!(
                matches!(&e, ConfigError::OutOfRange { field: f, value, .. }
                    if *f == format!("port.{field}") && *value == bad),
                "{field}={bad}: {e}"
            );
        }
    }
    for field in ["rx_descriptors", "tx_descriptors"] {
        let e = err(&with("port", &format!("{field} = 0")));
        assert!(
            matches!(&e, ConfigError::OutOfRange { field: f, .. } if *f == format!("port.{field}")),
            "{e}"
        );
        let e = err(&with("port", &format!("{field} = 1000")));
        assert!(
            matches!(&e, ConfigError::NotPowerOfTwo { field: f, value: 1000 } if *f == format!("port.{field}")),
            "{e}"
        );
    }
    let e = err(&with("port", "mbuf_pool_size = 0"));
    assert!(matches!(
        e,
        ConfigError::OutOfRange {
            field: "port.mbuf_pool_size",
            ..
        }
    ));
    let e = err(&with("port", "mbuf_pool_size = 2047"));
    assert!(
        matches!(
            e,
            ConfigError::PoolTooSmall {
                pool: 2047,
                needed: 2048
            }
        ),
        "{e}"
    );
    assert!(e.to_string().starts_with("port.mbuf_pool_size"));
    ok(&with("port", "mbuf_pool_size = 2048"));
    // Negative numbers are a type error from the parser, which names the key.
    let e = err(&with("port", "rx_queues = -1"));
    assert!(matches!(e, ConfigError::Toml(_)));
    assert!(e.to_string().contains("rx_queues"), "{e}");
}

#[test]
fn pmd_errors() {
    let e = err(&BASE.replace("\"af_packet\"", "\"af_xdp\""));
    assert!(matches!(&e, ConfigError::UnknownPmd { value } if value == "af_xdp"));
    assert!(e.to_string().starts_with("port.pmd:"), "{e}");
    let e = err(&without("iface"));
    assert!(matches!(
        e,
        ConfigError::MissingField {
            field: "port.iface",
            pmd: "af_packet"
        }
    ));
    let e = err(&with("port", "socket = \"/run/x.sock\""));
    assert!(matches!(
        e,
        ConfigError::FieldNotForPmd {
            field: "port.socket",
            pmd: "af_packet"
        }
    ));
    let e = err(&with("port", "pci_address = \"0000:03:00.0\""));
    assert!(matches!(
        e,
        ConfigError::FieldNotForPmd {
            field: "port.pci_address",
            ..
        }
    ));
    let pci = BASE.replace("\"af_packet\"", "\"pci\"");
    let e = err(&pci);
    assert!(matches!(
        e,
        ConfigError::FieldNotForPmd {
            field: "port.iface",
            pmd: "pci"
        }
    ));
    let e = err(&pci.replace("iface = \"rocev0a\"", ""));
    assert!(matches!(
        e,
        ConfigError::MissingField {
            field: "port.pci_address",
            pmd: "pci"
        }
    ));
}

#[test]
fn iface_errors() {
    for bad in [
        "",
        "a-very-long-name",
        "bad/name",
        "a,b",
        "a=b",
        "a b",
        "..",
        "é",
    ] {
        let e = err(&BASE.replace("\"rocev0a\"", &format!("\"{bad}\"")));
        assert!(
            matches!(&e, ConfigError::BadName { field: "port.iface", value, .. } if value == bad),
            "{bad}: {e}"
        );
    }
    ok(&BASE.replace("\"rocev0a\"", "\"fifteen-chars-x\""));
}

#[test]
fn socket_errors() {
    let memif = BASE.replace(
        "pmd = \"af_packet\"\niface = \"rocev0a\"",
        "pmd = \"memif\"\nsocket = \"SOCK\"\nrole = \"server\"",
    );
    ok(&memif.replace("SOCK", "/run/dpdk-roce/memif.sock"));
    let long = format!("/{}", "x".repeat(107));
    for bad in ["relative.sock", "/run/a,b", "/run/a=b", "/", long.as_str()] {
        let e = err(&memif.replace("SOCK", bad));
        assert!(
            matches!(&e, ConfigError::BadSocketPath { value, .. } if value == bad),
            "{bad}: {e}"
        );
        assert!(e.to_string().starts_with("port.socket"));
    }
}

#[test]
fn cidr_errors() {
    for bad in [
        "10.77.0.1",
        "10.77.0.1/33",
        "10.77.0.0/24",
        "fe80::1/64",
        "",
    ] {
        let e = err(&BASE.replace("10.77.0.1/24", bad));
        assert!(
            matches!(&e, ConfigError::BadCidr { field: "roce.address", value, .. } if value == bad),
            "{bad}: {e}"
        );
        assert!(e.to_string().starts_with("roce.address:"), "{e}");
    }
    let p = ok(&BASE.replace("10.77.0.1/24", "192.168.7.9/30"));
    assert_eq!(p.roce.address.to_string(), "192.168.7.9/30");
}

#[test]
fn lcore_and_poll_core_errors() {
    let e = err(&with("eal", "lcores = []"));
    assert!(matches!(
        e,
        ConfigError::EmptyList {
            field: "eal.lcores"
        }
    ));
    let e = err(&with("eal", "lcores = [1, 1]"));
    assert!(matches!(
        e,
        ConfigError::DuplicateCore {
            field: "eal.lcores",
            core: 1
        }
    ));
    let e = err(&with("eal", "lcores = [1, 128]"));
    assert!(matches!(
        e,
        ConfigError::OutOfRange {
            field: "eal.lcores",
            value: 128,
            ..
        }
    ));
    let e = err(&with("engine", "poll_cores = []"));
    assert!(matches!(
        e,
        ConfigError::EmptyList {
            field: "engine.poll_cores"
        }
    ));
    let e = err(&with("engine", "poll_cores = [2]"));
    assert!(matches!(e, ConfigError::PollCoreNotInLcores { core: 2 }));
    assert!(e.to_string().starts_with("engine.poll_cores"));
    let e = err(&with("engine", "poll_cores = [0, 0]"));
    assert!(matches!(
        e,
        ConfigError::DuplicateCore {
            field: "engine.poll_cores",
            core: 0
        }
    ));
    let p = ok(&with("eal", "lcores = [3, 0, 1]"));
    assert_eq!(p.eal_args()[1], "3,0,1");
}

#[test]
fn eal_field_errors() {
    let e = err(&with("eal", "memory_mb = 10"));
    assert!(matches!(
        e,
        ConfigError::OutOfRange {
            field: "eal.memory_mb",
            value: 10,
            ..
        }
    ));
    for bad in ["", "a/b", "-x", ".hidden", "with space"] {
        let e = err(&with("eal", &format!("file_prefix = \"{bad}\"")));
        assert!(
            matches!(&e, ConfigError::BadName { field: "eal.file_prefix", value, .. } if value == bad),
            "{bad}: {e}"
        );
    }
    let e = err(&BASE.replace("name = \"unit\"", "name = \"x y\""));
    assert!(matches!(e, ConfigError::BadName { field: "name", .. }));
    for good in ["debug", "8", "lib.eal:info", "pmd.net.*:warning", "1"] {
        ok(&with("eal", &format!("log_level = \"{good}\"")));
    }
    for bad in ["verbose", "0", "9", ":debug", "eal:", "+3", ""] {
        let e = err(&with("eal", &format!("log_level = \"{bad}\"")));
        assert!(
            matches!(&e, ConfigError::BadLogLevel { value } if value == bad),
            "{bad}: {e}"
        );
        assert!(e.to_string().starts_with("eal.log_level"));
    }
    for (arg, managed_by) in [
        ("--file-prefix=x", "eal.file_prefix"),
        ("-l", "eal.lcores"),
        ("--no-huge", "eal.hugepages"),
        ("-m", "eal.memory_mb"),
        ("--log-level=debug", "eal.log_level"),
        ("--no-telemetry", "eal.telemetry"),
        ("--telemetry", "eal.telemetry"),
        ("--no-pci", "port.pmd"),
    ] {
        let e = err(&with("eal", &format!("extra_args = [\"{arg}\"]")));
        assert!(
            matches!(&e, ConfigError::ConflictingExtraArg { arg: a, managed_by: m } if a == arg && *m == managed_by),
            "{arg}: {e}"
        );
    }
}

#[test]
fn engine_fields_and_errors() {
    let text = BASE.replace(
        "poll_cores = [1]",
        "poll_cores = [0, 1]\nprogress = \"inline\"\nidle_pause_us = 50\ncapture = \"/tmp/cap.pcap\"\naway_after_us = 0",
    );
    let p = ok(&text);
    assert_eq!(p.engine.away_after_us, 0, "0 turns the helper off");
    assert_eq!(p.engine.poll_cores, vec![0, 1]);
    assert_eq!(p.engine.progress, Progress::Inline);
    assert_eq!(p.engine.idle_pause_us, 50);
    assert_eq!(p.engine.capture, Some(PathBuf::from("/tmp/cap.pcap")));
    let e = err(&with("engine", "progress = \"sometimes\""));
    assert!(matches!(
        &e,
        ConfigError::BadProgress { field: "engine.progress", value } if value == "sometimes"
    ));
    assert!(e.to_string().starts_with("engine.progress"));
    let e = err(&with("engine", "idle_pause_us = 2000000"));
    assert!(matches!(
        e,
        ConfigError::OutOfRange {
            field: "engine.idle_pause_us",
            ..
        }
    ));
    let e = err(&with("engine", "away_after_us = 100001"));
    assert!(matches!(
        e,
        ConfigError::OutOfRange {
            field: "engine.away_after_us",
            max: 100_000,
            ..
        }
    ));
    let e = err(&with("engine", "capture = \"\""));
    assert!(matches!(
        e,
        ConfigError::BadPath {
            field: "engine.capture",
            ..
        }
    ));
}

#[test]
fn unknown_keys_and_missing_sections() {
    let e = err(&with("port", "ifcae = \"x\""));
    assert!(matches!(e, ConfigError::Toml(_)));
    assert!(e.to_string().contains("ifcae"), "{e}");
    let e = err(&BASE.replace("[roce]\naddress = \"10.77.0.1/24\"", ""));
    assert!(e.to_string().contains("roce"), "{e}");
    let e = err(&without("address"));
    assert!(e.to_string().contains("address"), "{e}");
    let e = err("this is not toml");
    assert!(matches!(e, ConfigError::Toml(_)));
}

#[test]
fn parse_through_from_str_trait() {
    let p: Profile = BASE.parse().unwrap();
    assert_eq!(p, ok(BASE));
    assert!("[eal]".parse::<Profile>().is_err());
}

#[test]
fn default_name_and_prefix() {
    let p = ok(&without("name ="));
    assert_eq!(p.name, "dpdk-roce");
    assert_eq!(p.file_prefix(), format!("dpdk-roce-{}", std::process::id()));
    let p = ok(&with("eal", "file_prefix = \"mine\""));
    assert_eq!(p.file_prefix(), "mine");
}

#[test]
fn env_overrides() {
    let mut p = ok(BASE);
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| OsString::from(v))
        }
    };
    p.apply_overrides(env(&[
        ("DPDK_ROCE_CAPTURE", "/tmp/x.pcap"),
        ("DPDK_ROCE_PROGRESS", "inline"),
    ]))
    .unwrap();
    assert_eq!(p.engine.capture, Some(PathBuf::from("/tmp/x.pcap")));
    assert_eq!(p.engine.progress, Progress::Inline);
    // Unrelated variables change nothing; an empty capture turns it off.
    p.apply_overrides(env(&[("OTHER", "core")])).unwrap();
    assert_eq!(p.engine.progress, Progress::Inline);
    p.apply_overrides(env(&[("DPDK_ROCE_CAPTURE", "")]))
        .unwrap();
    assert_eq!(p.engine.capture, None);
    let e = p
        .apply_overrides(env(&[("DPDK_ROCE_PROGRESS", "fast")]))
        .unwrap_err();
    assert!(matches!(
        &e,
        ConfigError::BadProgress { field: "DPDK_ROCE_PROGRESS", value } if value == "fast"
    ));
    assert!(e.to_string().starts_with("DPDK_ROCE_PROGRESS"));
    assert_eq!(ENV_CAPTURE, "DPDK_ROCE_CAPTURE");
    assert_eq!(ENV_PROGRESS, "DPDK_ROCE_PROGRESS");
    p.apply_overrides(env(&[("DPDK_ROCE_AWAY_AFTER_US", "0")]))
        .unwrap();
    assert_eq!(p.engine.away_after_us, 0);
    p.apply_overrides(env(&[("DPDK_ROCE_AWAY_AFTER_US", " 20 ")]))
        .unwrap();
    assert_eq!(p.engine.away_after_us, 20);
    let e = p
        .apply_overrides(env(&[("DPDK_ROCE_AWAY_AFTER_US", "soon")]))
        .unwrap_err();
    assert!(matches!(
        &e,
        ConfigError::BadNumber { field: "DPDK_ROCE_AWAY_AFTER_US", value } if value == "soon"
    ));
    let e = p
        .apply_overrides(env(&[("DPDK_ROCE_AWAY_AFTER_US", "200000")]))
        .unwrap_err();
    assert!(matches!(
        e,
        ConfigError::OutOfRange {
            field: "engine.away_after_us",
            ..
        }
    ));
    assert_eq!(ENV_AWAY_AFTER_US, "DPDK_ROCE_AWAY_AFTER_US");
}

#[test]
fn telemetry_is_on_by_default_and_off_by_key_or_environment() {
    let p = ok(BASE);
    assert!(p.eal.telemetry);
    assert!(!p.eal_args().iter().any(|a| a.contains("telemetry")));
    let mut off = ok(&with("eal", "telemetry = false"));
    assert!(!off.eal.telemetry);
    assert!(off.eal_args().contains(&"--no-telemetry".to_string()));
    let back = Profile::from_str(&off.to_toml()).unwrap();
    assert_eq!(back, off, "{}", off.to_toml());
    let env = |v: &'static str| move |k: &str| (k == ENV_TELEMETRY).then(|| OsString::from(v));
    off.apply_overrides(env("1")).unwrap();
    assert!(off.eal.telemetry);
    for v in ["0", "off", "False"] {
        let mut p = ok(BASE);
        p.apply_overrides(env(v)).unwrap();
        assert!(!p.eal.telemetry, "{v}");
    }
    let e = off.apply_overrides(env("maybe")).unwrap_err();
    assert!(matches!(
        &e,
        ConfigError::BadSwitch { field: "DPDK_ROCE_TELEMETRY", value } if value == "maybe"
    ));
    assert_eq!(ENV_TELEMETRY, "DPDK_ROCE_TELEMETRY");
}

#[test]
fn round_trip() {
    let texts = [
        BASE.to_string(),
        with("engine", "capture = \"/tmp/c.pcap\""),
        BASE.replace(
            "pmd = \"af_packet\"\niface = \"rocev0a\"",
            "pmd = \"memif\"\nsocket = \"/run/dpdk-roce/m.sock\"\nrole = \"server\"\nid = 7",
        ),
        BASE.replace("iface = \"rocev0a\"", "pci_address = \"0000:03:00.0\"")
            .replace("\"af_packet\"", "\"pci\""),
    ];
    for text in texts {
        let p = ok(&text);
        let back = Profile::from_str(&p.to_toml()).unwrap();
        assert_eq!(back, p, "{}", p.to_toml());
    }
}

#[test]
fn load_reports_file_and_names_after_it() {
    let dir = std::env::temp_dir().join(format!("dpdk-roce-config-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("from-file.toml");
    std::fs::write(&path, without("name =")).unwrap();
    let p = Profile::load(&path).unwrap();
    assert_eq!(p.name, "from-file");
    std::fs::write(&path, with("port", "mtu = 10")).unwrap();
    let e = Profile::load(&path).unwrap_err();
    assert!(e.to_string().contains("from-file.toml"), "{e}");
    assert!(matches!(
        e.root(),
        ConfigError::OutOfRange {
            field: "port.mtu",
            ..
        }
    ));
    let e = Profile::load(dir.join("missing.toml")).unwrap_err();
    assert!(matches!(e, ConfigError::Io { .. }));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn multi_process_keeps_the_shared_config_and_hugepage_files_and_needs_hugepages() {
    let p = ok(BASE);
    assert!(!p.eal.multi_process);
    let mut on = ok(&with("eal", "multi_process = true"));
    assert!(on.eal.multi_process);
    let args = on.eal_args();
    for gone in ["--no-shconf", "--huge-unlink", "--in-memory"] {
        assert!(!args.iter().any(|a| a == gone), "{gone} in {args:?}");
    }
    assert!(args.contains(&format!("--file-prefix={}", on.file_prefix())));
    let back = Profile::from_str(&on.to_toml()).unwrap();
    assert_eq!(back, on, "{}", on.to_toml());

    // A secondary process maps the primary's hugepage files: none without hugepages.
    let e = Profile::from_str(&with("eal", "multi_process = true\nhugepages = false")).unwrap_err();
    assert!(
        matches!(e, ConfigError::MultiProcessWithoutHugepages),
        "{e}"
    );
    // Extra arguments that would take the shared config away, or make a secondary.
    for arg in ["--in-memory", "--no-shconf", "--proc-type=secondary"] {
        let text = with(
            "eal",
            &format!("multi_process = true\nextra_args = [\"{arg}\"]"),
        );
        let e = Profile::from_str(&text).unwrap_err();
        assert!(
            matches!(
                &e,
                ConfigError::ConflictingExtraArg {
                    managed_by: "eal.multi_process",
                    ..
                }
            ),
            "{arg}: {e}"
        );
    }

    let env = |v: &'static str| move |k: &str| (k == ENV_MULTI_PROCESS).then(|| OsString::from(v));
    let mut p = ok(BASE);
    p.apply_overrides(env("on")).unwrap();
    assert!(p.eal.multi_process);
    assert!(!p.eal_args().contains(&"--no-shconf".to_string()));
    on.apply_overrides(env("0")).unwrap();
    assert!(!on.eal.multi_process);
    let e = p.apply_overrides(env("both")).unwrap_err();
    assert!(matches!(
        &e,
        ConfigError::BadSwitch { field: "DPDK_ROCE_MULTI_PROCESS", value } if value == "both"
    ));
    let mut no_huge = ok(&with("eal", "hugepages = false"));
    let e = no_huge.apply_overrides(env("1")).unwrap_err();
    assert!(
        matches!(e, ConfigError::MultiProcessWithoutHugepages),
        "{e}"
    );
}

#[test]
fn a_gateway_and_routes_reach_the_port_and_survive_a_round_trip() {
    let text = BASE.replace(
        "address = \"10.77.0.1/24\"",
        "address = \"10.77.0.1/24\"\ngateway = \"10.77.0.254\"\nroutes = [\"10.9.0.0/16 via 10.77.0.253\"]",
    );
    let p = ok(&text);
    let t = p.roce.route_table();
    assert_eq!(
        t.next_hop("10.9.1.1".parse().unwrap()),
        Some("10.77.0.253".parse().unwrap())
    );
    assert_eq!(
        t.next_hop("8.8.4.4".parse().unwrap()),
        Some("10.77.0.254".parse().unwrap())
    );
    let again = ok(&p.to_toml());
    assert_eq!(again.roce, p.roce);
}

#[test]
fn bad_gateways_and_routes_name_their_key_and_the_reason() {
    let roce = |extra: &str| {
        BASE.replace(
            "address = \"10.77.0.1/24\"",
            &format!("address = \"10.77.0.1/24\"\n{extra}"),
        )
    };
    for (extra, field, reason) in [
        ("gateway = \"10.78.0.1\"", "roce.gateway", "next hop"),
        ("gateway = \"10.77.0.1\"", "roce.gateway", "next hop"),
        ("gateway = \"router\"", "roce.gateway", "dotted IPv4"),
        (
            "routes = [\"10.9.0.0/16\"]",
            "roce.routes[0]",
            "of the form",
        ),
        (
            "routes = [\"10.9.1.0/16 via 10.77.0.2\"]",
            "roce.routes[0]",
            "host bits",
        ),
        (
            "routes = [\"10.9.0.0/16 via 10.77.0.2\", \"10.9.8.0/24 via 10.77.0.3\"]",
            "roce.routes[1]",
            "overlaps 10.9.0.0/16 via 10.77.0.2",
        ),
        (
            "routes = [\"10.0.0.0/8 via 10.77.0.2\"]",
            "roce.routes[0]",
            "own subnet",
        ),
    ] {
        let e = err(&roce(extra));
        let text = e.to_string();
        assert!(
            matches!(&e, ConfigError::BadRoute { field: f, .. } if f == field)
                && text.contains(reason),
            "{extra}: {text}"
        );
    }
}

#[test]
fn a_vlan_priority_and_dscp_reach_the_port_and_survive_a_round_trip() {
    use crate::net::{Pcp, Vlan};
    let cases = [
        ("", None, 0),
        ("vlan = 77", Some(Vlan::new(Some(77), Pcp::FromDscp)), 0),
        (
            "vlan = 4094\npcp = 5",
            Some(Vlan::new(Some(4094), Pcp::Fixed(5))),
            0,
        ),
        ("pcp = 3", Some(Vlan::new(None, Pcp::Fixed(3))), 0),
        (
            "pcp = \"dscp\"\ndscp = 26",
            Some(Vlan::new(None, Pcp::FromDscp)),
            26,
        ),
        (
            "vlan = 1\npcp = \"dscp\"\ndscp = 63",
            Some(Vlan::new(Some(1), Pcp::FromDscp)),
            63,
        ),
    ];
    for (keys, vlan, dscp) in cases {
        let p = ok(&with("roce", keys));
        assert_eq!(p.roce.vlan, vlan.map(Result::unwrap), "{keys}");
        assert_eq!(p.roce.dscp, dscp, "{keys}");
        let again = ok(&p.to_toml());
        assert_eq!(again.roce, p.roce, "{keys}: round trip");
    }
}

#[test]
fn bad_vlans_priorities_and_dscps_name_their_key() {
    for (keys, want) in [
        ("vlan = 0", "roce.vlan: 0 is outside 1..=4094"),
        ("vlan = 4095", "roce.vlan: 4095 is outside 1..=4094"),
        ("pcp = 8", "roce.pcp: 8 is outside 0..=7"),
        (
            "pcp = \"high\"",
            "roce.pcp: `high` is neither a priority 0..=7 nor \"dscp\"",
        ),
        ("dscp = 64", "roce.dscp: 64 is outside 0..=63"),
    ] {
        assert_eq!(err(&with("roce", keys)).to_string(), want, "{keys}");
    }
}

#[test]
fn ipv6_and_dual_stack_addresses_reach_the_port_and_survive_a_round_trip() {
    for line in [
        "address = \"fd00:77::1/64\"",
        "address = [\"10.77.0.1/24\", \"fd00:77::1/64\"]",
    ] {
        let p = ok(&with("roce", line));
        assert_eq!(
            p.roce.address.v6.map(|c| c.to_string()),
            Some("fd00:77::1/64".into()),
            "{line}"
        );
        assert_eq!(
            p.roce.address.v4.is_some(),
            line.contains("10.77"),
            "{line}"
        );
        let again = ok(&p.to_toml());
        assert_eq!(again.roce, p.roce, "{}", p.to_toml());
    }
}

#[test]
fn routes_without_an_ipv4_address_and_bad_ipv6_addresses_name_their_key() {
    let e = err(&with(
        "roce",
        "address = \"fd00:77::1/64\"\ngateway = \"10.77.0.254\"",
    ));
    assert!(
        matches!(&e, ConfigError::BadRoute { field, .. } if field == "roce.gateway")
            && e.to_string().contains("need an IPv4 roce.address"),
        "{e}"
    );
    for (line, reason) in [
        ("address = \"fe80::1/64\"", "link-local"),
        ("address = \"fd00:77::1/129\"", "prefix length"),
        (
            "address = [\"fd00:77::1/64\", \"fd00:78::1/64\"]",
            "one address of each family",
        ),
        ("address = []", "no address"),
    ] {
        let e = err(&with("roce", line));
        let text = e.to_string();
        assert!(
            matches!(
                &e,
                ConfigError::BadCidr {
                    field: "roce.address",
                    ..
                }
            ) && text.contains(reason),
            "{line}: {text}"
        );
    }
}

#[test]
fn cm_timers_reach_the_cm_config_survive_a_round_trip_and_name_their_key_when_bad() {
    let p = ok(&with("roce", ""));
    assert_eq!(p.roce.cm, crate::cm::CmConfig::default());
    let p = ok(&with(
        "roce",
        "cm_response_timeout = 14\ncm_max_retries = 2",
    ));
    assert_eq!(
        (p.roce.cm.cm_response_timeout, p.roce.cm.max_cm_retries),
        (14, 2)
    );
    assert_eq!(ok(&p.to_toml()).roce, p.roce, "round trip");
    for (keys, want) in [
        (
            "cm_response_timeout = 7",
            "roce.cm_response_timeout: 7 is outside 8..=24",
        ),
        (
            "cm_response_timeout = 25",
            "roce.cm_response_timeout: 25 is outside 8..=24",
        ),
        (
            "cm_max_retries = 16",
            "roce.cm_max_retries: 16 is outside 0..=15",
        ),
    ] {
        assert_eq!(err(&with("roce", keys)).to_string(), want, "{keys}");
    }
}
