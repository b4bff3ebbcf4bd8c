//! scripts/veth.sh, scripts/veth-join.sh, scripts/netns.sh and scripts/tap-mirred.sh: each creates what it says, is
//! idempotent, refuses to touch what is not its own, and `down` removes everything. Every test
//! uses names unique to the test process, and a guard runs `down` even when an assertion fails.

mod scripts_common;
use scripts_common::*;

fn sysctl_ipv6_disabled(dev: &str) -> bool {
    std::fs::read_to_string(format!("/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"))
        .map(|s| s.trim() == "1")
        .unwrap_or(false)
}

/// `on` or `off`: the device's scatter-gather, as ethtool reports it.
fn scatter_gather(dev: &str) -> String {
    let out = cmd("ethtool", &["-k", dev]);
    assert!(out.status.success(), "ethtool -k {dev}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("scatter-gather: "))
        .and_then(|v| v.split_whitespace().next())
        .unwrap_or_else(|| panic!("no scatter-gather line for {dev}"))
        .to_string()
}

#[test]
fn veth_up_down() {
    require_root();
    let prefix = format!("rv{}", pid_tag());
    let (a, b) = (format!("{prefix}a"), format!("{prefix}b"));
    let _guard = Guard(|| {
        run("veth.sh", &["down", &prefix], &[]);
    });
    assert!(
        !link_exists(&a) && !link_exists(&b),
        "{a}/{b} exist before the test"
    );

    run_ok("veth.sh", &["up", &prefix, "1400"], &[]);
    for (dev, peer) in [(&a, &b), (&b, &a)] {
        let out = cmd("ip", &["-o", "-d", "link", "show", "dev", dev]);
        assert!(out.status.success(), "{dev} missing after up");
        let line = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(line.contains(&format!("{dev}@{peer}:")), "{line}");
        assert!(line.contains(" veth "), "not a veth: {line}");
        assert!(line.contains("mtu 1400"), "{line}");
        assert!(line.contains("state UP") || line.contains(",UP"), "{line}");
        assert!(sysctl_ipv6_disabled(dev), "IPv6 still on {dev}");
        // net_af_packet's TX-ring fragments are pulled into the frame, not copied into pages.
        assert_eq!(scatter_gather(dev), "off", "{dev}");
        let addrs = cmd("ip", &["-o", "-4", "addr", "show", "dev", dev]);
        assert!(
            addrs.stdout.is_empty(),
            "kernel IPv4 address on {dev}: {}",
            String::from_utf8_lossy(&addrs.stdout)
        );
    }

    // Idempotent: a second up succeeds and re-applies the MTU.
    run_ok("veth.sh", &["up", &prefix, "1500"], &[]);
    let line =
        String::from_utf8_lossy(&cmd("ip", &["-o", "link", "show", "dev", &a]).stdout).into_owned();
    assert!(line.contains("mtu 1500"), "{line}");
    let status = run_ok("veth.sh", &["status", &prefix], &[]);
    assert!(status.contains(&a), "{status}");
    assert_eq!(status.matches("scatter-gather: off").count(), 2, "{status}");
    // VETH_SG=on leaves scatter-gather on; a value that is neither is refused.
    run_ok("veth.sh", &["up", &prefix], &[("VETH_SG", "on")]);
    assert_eq!(scatter_gather(&a), "on");
    assert_eq!(scatter_gather(&b), "on");
    let out = run("veth.sh", &["up", &prefix], &[("VETH_SG", "maybe")]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_eq!(scatter_gather(&a), "on", "a refused up changed nothing");

    run_ok("veth.sh", &["down", &prefix], &[]);
    assert!(
        !link_exists(&a) && !link_exists(&b),
        "{a}/{b} left after down"
    );
    // Idempotent down.
    let out = run_ok("veth.sh", &["down", &prefix], &[]);
    assert!(out.contains("not present"), "{out}");
}

#[test]
fn veth_refuses_foreign_interfaces_and_bad_input() {
    require_root();
    let prefix = format!("rf{}", pid_tag());
    let a = format!("{prefix}a");
    let _guard = Guard(|| {
        cmd("ip", &["tuntap", "del", "dev", &a, "mode", "tap"]);
    });
    // Something else (a tap interface) named like side A.
    let out = cmd("ip", &["tuntap", "add", "dev", &a, "mode", "tap"]);
    assert!(out.status.success(), "cannot create a tap: {}", text(&out));
    let out = run("veth.sh", &["up", &prefix], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(link_exists(&a), "up deleted an interface it does not own");
    let out = run("veth.sh", &["down", &prefix], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(link_exists(&a), "down deleted an interface it does not own");

    for args in [
        vec!["up", "name-far-too-long"],
        vec!["up", "bad/name"],
        vec!["up", "rx0", "100"],
        vec!["up", "rx0", "9001"],
        vec!["sideways"],
        vec![],
    ] {
        let out = run("veth.sh", &args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    assert!(!link_exists("rx0a"), "a rejected up created an interface");
}

fn netns_list() -> String {
    String::from_utf8_lossy(&cmd("ip", &["netns", "list"]).stdout).into_owned()
}

fn has_ns(list: &str, ns: &str) -> bool {
    list.lines()
        .any(|l| l.split_whitespace().next() == Some(ns))
}

#[test]
fn netns_up_down() {
    require_root();
    let prefix = format!("rn{}", pid_tag());
    let (na, nb) = (format!("{prefix}-a"), format!("{prefix}-b"));
    let _guard = Guard(|| {
        run("netns.sh", &["down", &prefix], &[]);
    });
    let before = netns_list();
    assert!(!has_ns(&before, &na) && !has_ns(&before, &nb), "{before}");

    run_ok("netns.sh", &["up", &prefix], &[]);
    run_ok("netns.sh", &["up", &prefix], &[]); // idempotent
    let list = netns_list();
    assert!(has_ns(&list, &na) && has_ns(&list, &nb), "{list}");
    for (ns, dev, addr) in [
        (&na, "veth-a", "10.77.1.1/24"),
        (&nb, "veth-b", "10.77.1.2/24"),
    ] {
        let out = cmd("ip", &["-n", ns, "-o", "-4", "addr", "show", "dev", dev]);
        let s = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(s.contains(addr), "{ns} {dev}: {s} {}", text(&out));
        assert_eq!(s.lines().count(), 1, "{s}");
    }
    // The link works: a datagram from A makes A resolve B's MAC address over the veth.
    let out = cmd(
        "ip",
        &[
            "netns",
            "exec",
            &na,
            "bash",
            "-c",
            "echo x > /dev/udp/10.77.1.2/9",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    let mut resolved = String::new();
    for _ in 0..50 {
        resolved =
            String::from_utf8_lossy(&cmd("ip", &["-n", &na, "neigh", "show", "10.77.1.2"]).stdout)
                .into_owned();
        if resolved.contains("lladdr") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(
        resolved.contains("lladdr"),
        "B never answered ARP: {resolved:?}"
    );
    // Nothing was added to the current namespace.
    assert!(!link_exists("veth-a") && !link_exists("veth-b"));

    run_ok("netns.sh", &["down", &prefix], &[]);
    let list = netns_list();
    assert!(!has_ns(&list, &na) && !has_ns(&list, &nb), "{list}");
    assert!(run_ok("netns.sh", &["down", &prefix], &[]).contains("not present"));
}

/// The ingress filters of `dev` (`tc filter show dev DEV parent ffff:`), empty without them.
fn ingress_filters(dev: &str) -> String {
    String::from_utf8_lossy(&cmd("tc", &["filter", "show", "dev", dev, "parent", "ffff:"]).stdout)
        .into_owned()
}

fn has_ingress_qdisc(dev: &str) -> bool {
    String::from_utf8_lossy(&cmd("tc", &["qdisc", "show", "dev", dev]).stdout)
        .contains("qdisc ingress")
}

#[test]
fn tap_mirred_attach_down() {
    require_root();
    let tag = pid_tag();
    let taps = [format!("rt{tag}x"), format!("rt{tag}y")];
    let env = [("TAP_WAIT", "1")];
    let _guard = Guard(|| {
        run("tap-mirred.sh", &["down", &taps[0], &taps[1]], &env);
        for t in &taps {
            cmd("ip", &["tuntap", "del", "dev", t, "mode", "tap"]);
        }
    });

    // A tap that never appears (its DPDK process did not start): attach fails, naming it, and
    // leaves no qdisc behind.
    let out = run("tap-mirred.sh", &["attach", &taps[0], &taps[1]], &env);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&taps[0]),
        "{}",
        text(&out)
    );

    // The taps DPDK's net_tap would create: made here by the test itself.
    for t in &taps {
        let out = cmd("ip", &["tuntap", "add", "dev", t, "mode", "tap"]);
        assert!(out.status.success(), "{}", text(&out));
    }
    run_ok("tap-mirred.sh", &["attach", &taps[0], &taps[1]], &env);
    run_ok("tap-mirred.sh", &["attach", &taps[0], &taps[1]], &env); // idempotent
    for (dev, peer) in [(&taps[0], &taps[1]), (&taps[1], &taps[0])] {
        let filters = ingress_filters(dev);
        // One redirect to the peer's egress, not one per attach.
        assert_eq!(filters.matches("mirred").count(), 1, "{dev}: {filters}");
        assert!(
            filters.contains(&format!("Redirect to device {peer}")),
            "{dev}: {filters}"
        );
        assert!(sysctl_ipv6_disabled(dev), "IPv6 still on {dev}");
        let link = cmd("ip", &["-o", "link", "show", "dev", dev]);
        assert!(
            String::from_utf8_lossy(&link.stdout).contains(",UP"),
            "{dev} not up: {}",
            text(&link)
        );
    }
    let status = run_ok("tap-mirred.sh", &["status", &taps[0], &taps[1]], &env);
    assert!(status.contains("mirred"), "{status}");

    run_ok("tap-mirred.sh", &["down", &taps[0], &taps[1]], &env);
    for t in &taps {
        assert!(
            !has_ingress_qdisc(t),
            "ingress qdisc left on {t} after down"
        );
        assert!(
            link_exists(t),
            "down must not delete the taps (DPDK owns them)"
        );
    }
    run_ok("tap-mirred.sh", &["down", &taps[0], &taps[1]], &env); // idempotent
}

/// The `dropped` count of the clsact qdisc on `dev` (`tc -s qdisc show`), if there is one.
fn clsact_dropped(dev: &str) -> Option<u64> {
    let out = cmd("tc", &["-s", "qdisc", "show", "dev", dev]);
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    let at = t.find("qdisc clsact")?;
    let rest = &t[at..];
    let d = rest.find("dropped ")? + "dropped ".len();
    rest[d..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[test]
fn veth_ends_without_a_kernel_address_stop_kernel_rx_after_the_packet_taps() {
    require_root();
    let prefix = format!("rk{}", pid_tag());
    let (a, b) = (format!("{prefix}a"), format!("{prefix}b"));
    let _guard = Guard(|| {
        run("veth.sh", &["down", &prefix], &[]);
    });
    // B gets a kernel address (and keeps the kernel's receive path); A is a DPDK-owned end.
    let subnet = format!("10.79.{}", std::process::id() % 250);
    let b_addr = format!("{subnet}.2/24");
    run_ok("veth.sh", &["up", &prefix], &[("KERNEL_ADDR_B", &b_addr)]);
    let status = run_ok("veth.sh", &["status", &prefix], &[]);
    let line = |dev: &str| {
        status
            .lines()
            .find(|l| l.starts_with(&format!("{dev}@")))
            .unwrap_or_else(|| panic!("no status line for {dev}:\n{status}"))
            .to_string()
    };
    assert!(
        line(&a).contains("kernel rx: off (after the packet taps)  "),
        "{status}"
    );
    assert!(line(&b).contains("kernel rx: on  "), "{status}");
    assert_eq!(clsact_dropped(&a), Some(0), "a fresh filter on {a}");
    assert_eq!(
        clsact_dropped(&b),
        None,
        "a filter on {b}, which has a kernel address"
    );

    // A packet socket on A (tshark) still sees the frames the kernel then drops: the kernel on B
    // sends ARP requests for an address in A's subnet.
    let mut tshark = std::process::Command::new("tshark")
        .args([
            "-i",
            &a,
            "-f",
            "arp",
            "-c",
            "3",
            "-a",
            "duration:30",
            "-T",
            "fields",
        ])
        .args(["-e", "arp.dst.proto_ipv4"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("tshark must be installed (scripts/setup.sh installs it)");
    // tshark says "Capturing on '<dev>'" once its socket is bound.
    let mut err = std::io::BufReader::new(tshark.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut l = String::new();
        if std::io::BufRead::read_line(&mut err, &mut l).unwrap_or(0) == 0 {
            let _ = tshark.kill();
            panic!("tshark ended before capturing:\n{seen}");
        }
        seen.push_str(&l);
        if l.contains("Capturing on") {
            break;
        }
    }
    // "Capturing on" can come a moment before dumpcap's socket sees frames: more requests
    // than tshark waits for (it stops at its third).
    let target = format!("{subnet}.1");
    let arping = cmd("arping", &["-I", &b, "-c", "6", "-w", "8", &target]);
    let out = tshark.wait_with_output().expect("tshark");
    let captured = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        captured.lines().filter(|l| l.trim() == target).count(),
        3,
        "the packet socket on {a} saw:\n{captured}\narping: {}",
        text(&arping)
    );
    let dropped = clsact_dropped(&a).expect("the filter on A");
    assert!(
        dropped >= 3,
        "the kernel on {a} dropped {dropped} frames, not the 3 requests"
    );

    // An `up` with a kernel address for A gives it the kernel's receive path back.
    let a_addr = format!("{subnet}.1/24");
    run_ok("veth.sh", &["up", &prefix], &[("KERNEL_ADDR_A", &a_addr)]);
    assert_eq!(clsact_dropped(&a), None, "the filter stayed on {a}");
}

/// The filters of the clsact ingress hook of `dev` (`tc filter show dev DEV ingress`).
fn clsact_ingress(dev: &str) -> String {
    String::from_utf8_lossy(&cmd("tc", &["filter", "show", "dev", dev, "ingress"]).stdout)
        .into_owned()
}

/// `veth-join: Xb->Ya: forwarded=N lost=N` of `veth-join.sh status`, as (forwarded, lost).
fn join_counts(status: &str, from: &str) -> (u64, u64) {
    let line = status
        .lines()
        .find(|l| l.starts_with(&format!("veth-join {from}->")))
        .unwrap_or_else(|| panic!("no line for {from}:\n{status}"));
    let n = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} in {line}"))
    };
    (n("forwarded="), n("lost="))
}

#[test]
fn veth_join_links_two_pairs_losing_its_share_and_down_restores_the_pairs_filter() {
    require_root();
    let tag = pid_tag();
    let (x, y) = (format!("jx{tag}"), format!("jy{tag}"));
    let (xa, xb, ya) = (format!("{x}a"), format!("{x}b"), format!("{y}a"));
    let _guard = Guard(|| {
        run("veth.sh", &["down", &x], &[]);
        run("veth.sh", &["down", &y], &[]);
    });
    run_ok("veth.sh", &["up", &x], &[]);
    run_ok("veth.sh", &["up", &y], &[]);
    let pair_filter = clsact_ingress(&xb);
    assert!(
        pair_filter.contains("bytecode '1,6 0 0 2'"),
        "{pair_filter}"
    );

    // Refused: a chance outside 0..=1, a pair that does not exist, usage; nothing changes.
    for (args, code) in [
        (vec!["up", &x, &y, "1.5"], 2),
        (vec!["up", &x, &y, "half"], 2),
        (vec!["up", &x, "nosuchpair", "0.1"], 1),
        (vec!["up", &x, &x, "0.1"], 2),
        (vec!["sideways", &x, &y], 2),
    ] {
        let out = run("veth-join.sh", &args, &[]);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", text(&out));
        assert_eq!(clsact_ingress(&xb), pair_filter, "{args:?} changed {xb}");
    }

    run_ok("veth-join.sh", &["up", &x, &y, "0.5"], &[]);
    for (end, other) in [(&xb, &ya), (&ya, &xb)] {
        let f = clsact_ingress(end);
        assert!(
            f.contains(&format!("Egress Redirect to device {other}")),
            "{f}"
        );
        assert!(f.contains("bytecode '1,6 0 0 2'"), "the drop stays: {f}");
    }
    // 2 000 frames into X (ARP requests from a packet socket on Xa): half of them cross to
    // Y, the others are lost. arping's exit status says no reply came (none can).
    let arping = |n: &str| {
        cmd(
            "arping",
            &[
                "-q",
                "-c",
                n,
                "-W",
                "0.0002",
                "-I",
                &xa,
                "-S",
                "10.78.0.1",
                "10.78.0.2",
            ],
        )
    };
    arping("2000");
    let status = run_ok("veth-join.sh", &["status", &x, &y], &[]);
    let (forwarded, lost) = join_counts(&status, &xb);
    assert_eq!(forwarded + lost, 2000, "{status}");
    assert!((800..=1200).contains(&lost), "{status}");
    assert_eq!(join_counts(&status, &ya), (0, 0), "{status}");
    // Lossless: everything crosses (a new `up` starts the counts again).
    run_ok("veth-join.sh", &["up", &x, &y, "0"], &[]);
    arping("200");
    let status = run_ok("veth-join.sh", &["status", &x, &y], &[]);
    assert_eq!(join_counts(&status, &xb), (200, 0), "{status}");

    run_ok("veth-join.sh", &["down", &x, &y], &[]);
    assert_eq!(clsact_ingress(&xb), pair_filter, "down restores {xb}");
    assert_eq!(
        clsact_ingress(&ya),
        pair_filter.replace(&xb, &ya),
        "down restores {ya}"
    );
    run_ok("veth-join.sh", &["down", &x, &y], &[]); // idempotent
}
