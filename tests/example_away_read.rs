//! The away helper over real DPDK ports, through `examples/away_read.rs`: a peer reads from an
//! application that makes no call, every 20 ms, so that the target's helper has gone to its
//! long sleep before each READ. Every READ must complete; over net_tap the helper must have
//! slept on the receive interrupt and been woken by frames, over net_af_packet (no interrupt)
//! it must have backed off on its timer and never armed one (docs/DESIGN.md "Progress").
//! Needs root (veth pair, taps) and DPDK; the example is the program `cargo build --examples`
//! puts beside the test binary (see tests/example_rdma_write.rs).

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::{output_text, repo, retry_fanout_collision, Veth};
use std::process::{Command, Output};

/// The target helper's counters the example prints last.
#[derive(Debug)]
struct Sleeps {
    idle: u64,
    irq: u64,
    irq_wakes: u64,
}

#[track_caller]
fn sleeps(out: &Output) -> Sleeps {
    let text = output_text(out);
    assert!(out.status.success(), "away_read failed:\n{text}");
    assert!(
        text.contains("READ 64 B to an away application") && text.contains("20 READs"),
        "not every READ completed:\n{text}"
    );
    let line = text
        .lines()
        .find(|l| l.starts_with("target helper:"))
        .unwrap_or_else(|| panic!("no counters:\n{text}"));
    let field = |key: &str| -> u64 {
        let at = line.find(key).unwrap_or_else(|| panic!("no {key}: {line}")) + key.len();
        line[at..]
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("bad {key}: {line}"))
    };
    Sleeps {
        idle: field("away_idle_sleeps "),
        irq: field("away_irq_sleeps "),
        irq_wakes: field("away_irq_wakes "),
    }
}

const ARGS: [&str; 6] = ["--reads", "20", "--gap-us", "20000", "--idle-s", "1"];

#[test]
fn over_net_tap_the_idle_helper_sleeps_on_the_receive_interrupt_and_reads_wake_it() {
    let bin = test_program("away_read");
    let n = std::process::id() % 100_000;
    let (ta, tb) = (format!("awt{n}a"), format!("awt{n}b"));
    // The taps appear when the process starts; the script waits for them, then joins them.
    let mut attach = Command::new("bash")
        .arg(repo().join("scripts/tap-mirred.sh"))
        .args(["attach", &ta, &tb])
        .env("TAP_WAIT", "30")
        .spawn()
        .unwrap();
    let out = Command::new(&bin)
        .args(["--pmd", "tap", &ta, &tb])
        .args(ARGS)
        .output()
        .expect("start the example");
    assert!(attach.wait().unwrap().success(), "tap-mirred attach failed");
    let s = sleeps(&out);
    assert!(s.irq > 0, "the helper never slept on the interrupt: {s:?}");
    assert!(
        s.irq_wakes > 0,
        "no READ woke the helper from its sleep on the interrupt: {s:?}"
    );
    assert!(s.idle >= s.irq, "{s:?}");
}

#[test]
fn over_net_af_packet_the_idle_helper_backs_off_on_its_timer() {
    let bin = test_program("away_read");
    let prefix = format!("awv{}", std::process::id() % 100_000);
    let up = Command::new("bash")
        .arg(repo().join("scripts/veth.sh"))
        .args(["up", &prefix])
        .output()
        .expect("run scripts/veth.sh");
    assert!(
        up.status.success(),
        "cannot create the veth pair (root needed)"
    );
    let veth = Veth { prefix };
    let out = retry_fanout_collision(|| {
        Command::new(&bin)
            .args([veth.end('a'), veth.end('b')])
            .args(ARGS)
            .output()
            .expect("start the example")
    });
    let s = sleeps(&out);
    assert!(s.idle > 0, "the helper never backed off: {s:?}");
    assert_eq!(
        (s.irq, s.irq_wakes),
        (0, 0),
        "net_af_packet has no receive interrupt"
    );
}
