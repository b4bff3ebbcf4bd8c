//! Interoperability with RDMA software dpdk-roce did not write: Debian 12's own kernel soft-RoCE
//! (rdma_rxe) and the reference uDAPL provider (libdapl2's libdaplofa over rdma-core) in a QEMU
//! guest that `scripts/rxe-guest.sh` builds from Debian's packages and boots (TCG, one vCPU),
//! joined to this host by a tap. dpdk-roce's provider runs on the host over net_af_packet bound
//! to that same tap, loaded by libdat2 through a dat.conf of the test's own; the guest's
//! dat.conf names libdaplofa on eth0 under the same IA name (`ofa-v2-cma-roe-eth0`: dtest's
//! client opens the IA name its server publishes).
//!
//! Addresses (10.77.60.0/24 and the other nets' of [`RdmaNet`], no other test's): on the shared
//! guest's tap the host kernel 10.77.60.1 (dtest and dtestx publish the server's IA address
//! over kernel TCP 15828, so the guest needs a kernel address of the host), dpdk-roce's RoCE
//! port 10.77.60.2, the guest's eth0 (and rxe0's GID) 10.77.60.3.
//!
//! Every program runs both ways: dpdk-roce as the server with the guest as client, and the
//! other way round. Each case's capture (the provider's own, DPDK_ROCE_CAPTURE) must pass
//! tshark without malformed frames and `roce-tool decode` with every ICRC valid. The test prints
//! what each case cost and the retransmissions seen: rxe's counters in the guest
//! (duplicate_request, out_of_seq_request, ...) and RC packets sent twice in the capture; they
//! are printed, not asserted (yet).
//!
//! The dtest and dapltest tests share one guest (booted by the first, torn down when the test
//! process ends, however it ends); the dtestx, dtestsrq, VLAN, IPv6 and routed tests boot
//! their own (about 5-10 s each) and remove it, and its tap, also when they fail. Needs root
//! and the packages `scripts/setup.sh` installs; fails loudly without them.
//! `cargo test --release --test interop_rxe -- --nocapture` shows the figures.

mod dpdk_common;
mod test_programs;
use test_programs::test_program;

use dpdk_common::{output_text, Proc, FANOUT_COLLISION};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The IA name on both sides.
const IA: &str = "ofa-v2-cma-roe-eth0";

/// iproute2's tc in the guest, by its path: the guest's busybox shell would run its own `tc`
/// applet (no clsact, no u32) for the bare name.
const TC: &str = "/usr/sbin/tc";

/// Where the RDMA traffic of a guest goes: the IA name on both sides, dpdk-roce's port and the
/// guest's interface for it; and the tap's own subnet. Each guest's tap has a subnet of its
/// own: the shared guest's tap stays up while the others run.
#[derive(Clone, Copy)]
struct RdmaNet {
    ia: &'static str,
    provider: &'static str,
    guest: &'static str,
    /// The host kernel's address on the tap (/24; where a host dtest server publishes its IA
    /// address; a routed guest's gateway), the guest's eth0 address, and dpdk-roce's IPv4
    /// address (where it differs from `provider`: a VLAN's or IPv6's RDMA).
    kernel: &'static str,
    eth0: &'static str,
    provider_v4: &'static str,
    /// An 802.1Q VLAN both sides are on (the profile's `[roce] vlan`, the guest's eth0.VID).
    vlan: Option<u16>,
    /// Routed: dpdk-roce's port on a veth pair of its own, a Linux router (scripts/router.sh)
    /// between that subnet and the tap's, and these two gateways (dpdk-roce's, the guest's).
    gateways: Option<(&'static str, &'static str)>,
    /// `provider` and `guest` are IPv6 addresses (/64) beside the IPv4 ones of the tap.
    ipv6: bool,
}

impl RdmaNet {
    /// RDMA untagged on the tap's own subnet: the host kernel, dpdk-roce and the guest (.1,
    /// .2 and .3 of a /24).
    const fn untagged(kernel: &'static str, provider: &'static str, guest: &'static str) -> Self {
        RdmaNet {
            ia: IA,
            provider,
            guest,
            kernel,
            eth0: guest,
            provider_v4: provider,
            vlan: None,
            gateways: None,
            ipv6: false,
        }
    }
}

/// RDMA on the tap's own subnet, untagged: the shared guest's.
const PLAIN: RdmaNet = RdmaNet::untagged("10.77.60.1", "10.77.60.2", "10.77.60.3");

/// [`PLAIN`] on a tap of its own, for the dtestx test's own guest.
const DTESTX_NET: RdmaNet = RdmaNet::untagged("10.77.67.1", "10.77.67.2", "10.77.67.3");

/// [`PLAIN`] on a tap of its own, for the dtestsrq test's own guest.
const SRQ_NET: RdmaNet = RdmaNet::untagged("10.77.66.1", "10.77.66.2", "10.77.66.3");

/// RDMA on VLAN 77 (10.77.61.0/24): dpdk-roce with `vlan = 77` and DSCP 26 (priority 3), the
/// guest's rxe0 through eth0.77 (its GID of that address; libdaplofa on eth0.77). The
/// programs' own TCP exchange stays on the untagged 10.77.64.0/24.
const VLAN_77: RdmaNet = RdmaNet {
    ia: "ofa-v2-cma-roe-eth0.77",
    provider: "10.77.61.2",
    guest: "10.77.61.3",
    kernel: "10.77.64.1",
    eth0: "10.77.64.3",
    provider_v4: "10.77.64.2",
    vlan: Some(77),
    gateways: None,
    ipv6: false,
};

/// RDMA over IPv6 on the tap (fd00:77:60::/64): dpdk-roce's port has both families
/// (`address = ["10.77.65.2/24", "fd00:77:60::2/64"]`), the guest's eth0 gets fd00:77:60::3
/// (rxe0 adds its GID) and libdaplofa an IA on that address (its dat.conf names the address,
/// which libdaplofa resolves with getaddrinfo).
const IPV6: RdmaNet = RdmaNet {
    ia: "ofa-v2-cma-roe-v6",
    provider: "fd00:77:60::2",
    guest: "fd00:77:60::3",
    kernel: "10.77.65.1",
    eth0: "10.77.65.3",
    provider_v4: "10.77.65.2",
    vlan: None,
    gateways: None,
    ipv6: true,
};

/// dpdk-roce on 10.77.62.0/24 and the guest on 10.77.63.0/24, a Linux router between them:
/// dpdk-roce [veth a] <-> [veth b] router [tap] <-> guest eth0. Only programs that need no
/// kernel TCP between the hosts (dapltest, dtestsrq) run this way.
const ROUTED: RdmaNet = RdmaNet {
    ia: IA,
    provider: "10.77.62.1",
    guest: "10.77.63.3",
    kernel: "10.77.63.254",
    eth0: "10.77.63.3",
    provider_v4: "10.77.62.1",
    vlan: None,
    gateways: Some(("10.77.62.254", "10.77.63.254")),
    ipv6: false,
};
/// Watchdog of every program run.
const LIMIT: Duration = Duration::from_secs(120);

/// One guest at work at a time: dtest servers use kernel TCP 15828, and the VM has two cores.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The guest on [`PLAIN`] that the dtest and dapltest tests share (a boot
/// costs 5-10 s under TCG): the first of them boots it, and it goes down once this process
/// ends (`RXE_GUEST_OWNER`). A test that panicked on it leaves it poisoned: the next one
/// takes it down and boots another (a program of the failed test may still run in it).
static PLAIN_GUEST: Mutex<Option<Guest>> = Mutex::new(None);

/// Runs `test` on the shared [`PLAIN_GUEST`], one test at a time.
fn on_plain_guest(test: impl FnOnce(&mut Guest)) {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut slot = PLAIN_GUEST.lock().unwrap_or_else(|poisoned| {
        PLAIN_GUEST.clear_poison();
        let mut slot = poisoned.into_inner();
        *slot = None;
        slot
    });
    let g = match slot.as_mut() {
        Some(g) => {
            g.boot = Duration::ZERO;
            g
        }
        None => slot.insert(Guest::up("pl")),
    };
    test(g);
    if let Err(left) = g.settled(Duration::from_secs(10)) {
        println!(
            "guest {}: not settled after the test, taken down for a new one:\n{left}",
            g.name
        );
        *slot = None;
    }
}

fn script() -> PathBuf {
    dpdk_common::repo().join("scripts/rxe-guest.sh")
}

/// Which side serves.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Server {
    /// dpdk-roce serves, the guest's libdaplofa/rxe is the client.
    DpdkRoce,
    /// The guest serves, dpdk-roce is the client.
    Rxe,
}

impl Server {
    fn label(self) -> &'static str {
        match self {
            Server::DpdkRoce => "dpdk-roce server <- rxe client",
            Server::Rxe => "rxe server <- dpdk-roce client",
        }
    }
}

/// The guest's state directory (scripts/rxe-guest.sh: console.log, the command channel).
fn state_dir(name: &str) -> PathBuf {
    Path::new("/run/dpdk-roce/rxe-guest").join(name)
}

/// The guest (scripts/rxe-guest.sh `up`), with the host side's profile, dat.conf and a copy of
/// the provider library (the build may replace target/ while the test runs) in `host/` of its
/// state directory. Dropping it runs `down` (QEMU, tap, state), also when the test failed; a
/// guest never dropped (the shared [`PLAIN_GUEST`], a test process killed) goes down within
/// a second of this process's end (`RXE_GUEST_OWNER`).
struct Guest {
    name: String,
    net: RdmaNet,
    /// QEMU's dump of every frame of the guest's NIC (the wire, tags included), kept for a
    /// guest on a VLAN.
    wire: Option<PathBuf>,
    dir: PathBuf,
    conf: PathBuf,
    profile_name: String,
    /// rxe's hw_counters at the end of the previous case.
    counters: BTreeMap<String, u64>,
    boot: Duration,
    /// A routed guest's router and dpdk-roce's veth pair (dropped after the guest).
    routed: Option<(dpdk_common::Router, dpdk_common::Veth)>,
}

impl Guest {
    fn up(tag: &str) -> Guest {
        Self::up_on(tag, PLAIN)
    }

    /// A guest whose RDMA traffic goes over `net`.
    fn up_on(tag: &str, net: RdmaNet) -> Guest {
        assert!(tag.len() <= 4, "tag {tag} too long for an interface name");
        let pid = std::process::id() % 100_000;
        // `rxg<tag><pid>`: at most 12 characters, the guest's name and its tap's.
        let name = format!("rxg{tag}{pid}");
        let dir = state_dir(&name).join("host");
        let profile_name = format!("{name}-host");
        let mut g = Guest {
            wire: net.vlan.map(|_| state_dir(&name).join("wire.pcap")),
            name,
            net,
            conf: dir.join("dat.conf"),
            dir,
            profile_name,
            counters: BTreeMap::new(),
            boot: Duration::ZERO,
            routed: None,
        };
        // Routed: dpdk-roce's port is end a of a veth pair whose end b the router takes.
        let veth = net.gateways.map(|_| dpdk_common::Veth::up(tag));
        let iface = veth.as_ref().map_or(g.name.clone(), |v| v.end('a'));
        // The profile: side a of the shipped af_packet pair, on the tap, with its own address.
        let template =
            std::fs::read_to_string(dpdk_common::repo().join("dpdk-config/af_packet-a.toml"))
                .unwrap();
        let mut text = template.clone();
        for (from, to) in [
            (
                "name = \"af_packet-a\"",
                format!("name = \"{}\"", g.profile_name),
            ),
            ("iface = \"rocev0a\"", format!("iface = \"{iface}\"")),
            (
                "address = \"10.77.0.1/24\"",
                match (net.vlan, net.gateways) {
                    _ if net.ipv6 => {
                        format!(
                            "address = [\"{}/24\", \"{}/64\"]",
                            net.provider_v4, net.provider
                        )
                    }
                    (Some(v), _) => {
                        format!("address = \"{}/24\"\nvlan = {v}\ndscp = 26", net.provider)
                    }
                    (None, Some((gw, _))) => {
                        format!("address = \"{}/24\"\ngateway = \"{gw}\"", net.provider)
                    }
                    (None, None) => format!("address = \"{}/24\"", net.provider),
                },
            ),
            (
                "hugepages = true",
                "hugepages = false\nmemory_mb = 512".into(),
            ),
        ] {
            assert!(text.contains(from), "af_packet-a.toml changed: no {from}");
            text = text.replace(from, &to);
        }
        let t0 = Instant::now();
        let (guest_cidr, tap_cidr) = (format!("{}/24", net.eth0), format!("{}/24", net.kernel));
        // An IPv6 guest runs roce-dat-consumer (the reference DAT programs cannot connect over
        // IPv6: see `the_reference_udapl_on_rxe_serves_dpdk_roce_over_ipv6`).
        let extra = if net.ipv6 {
            test_program("roce-dat-consumer").display().to_string()
        } else {
            String::new()
        };
        let out = Command::new("bash")
            .arg(script())
            .env("RXE_GUEST_EXTRA", extra)
            .env("RXE_GUEST_OWNER", std::process::id().to_string())
            .args(["up", &g.name, &g.name, &guest_cidr, &tap_cidr])
            .args(g.wire.iter())
            .output()
            .expect("run scripts/rxe-guest.sh");
        g.boot = t0.elapsed();
        assert!(
            out.status.success(),
            "the rxe guest did not come up (root and `bash scripts/setup.sh` needed):\n{}",
            output_text(&out)
        );
        std::fs::create_dir_all(&g.dir).unwrap();
        let profile = g.dir.join("host.toml");
        std::fs::write(&profile, text).unwrap();
        let lib = g.dir.join("libdpdk_roce.so");
        copy_provider_lib(&lib);
        std::fs::write(
            &g.conf,
            format!(
                "{} u2.0 nonthreadsafe default {} dapl.2.0 \"{}\" \"\"\n",
                net.ia,
                lib.display(),
                profile.display()
            ),
        )
        .unwrap();
        println!(
            "guest {}: booted, rxe0 ACTIVE in {:.1} s",
            g.name,
            g.boot.as_secs_f64()
        );
        if let Some(vid) = net.vlan {
            g.add_vlan(vid);
        }
        if net.ipv6 {
            g.add_ipv6();
        }
        if let (Some((ours, theirs)), Some(veth)) = (net.gateways, veth) {
            // The router takes veth end b and the tap (QEMU keeps its descriptor).
            let router = dpdk_common::Router::up(
                tag,
                &veth.end('b'),
                &format!("{ours}/24"),
                &g.name,
                &format!("{theirs}/24"),
            );
            let (rc, out) = g.exec(30, &format!("ip route add default via {theirs}"));
            assert_eq!(rc, 0, "the guest's default route:\n{out}");
            g.routed = Some((router, veth));
        }
        g.counters = g.rxe_counters();
        g
    }

    /// Gives the guest eth0.`vid` with the RDMA address, and libdaplofa an IA on it; waits
    /// until rxe0 has the address's GID (the kernel adds the GIDs of eth0's VLAN devices).
    fn add_vlan(&self, vid: u16) {
        let dev = format!("eth0.{vid}");
        let gid_tail = {
            let o: Vec<u8> = self
                .net
                .guest
                .split('.')
                .map(|b| b.parse().unwrap())
                .collect();
            format!("{:02x}{:02x}:{:02x}{:02x}", o[0], o[1], o[2], o[3])
        };
        let line = format!(
            "{} u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"{dev} 0\" \"\"",
            self.net.ia
        );
        let (rc, out) = self.exec(
            60,
            &format!(
                "set -e
                 echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
                 ip link add link eth0 name {dev} type vlan id {vid}
                 ip addr add {}/24 dev {dev}
                 ip link set {dev} up
                 echo '{line}' >> /etc/dat.conf
                 i=0
                 until grep -q {gid_tail} /sys/class/infiniband/rxe0/ports/1/gids/*; do
                   i=$((i+1)); [ $i -gt 100 ] && exit 1; usleep 100000
                 done
                 cat /proc/net/vlan/config",
                self.net.guest
            ),
        );
        assert_eq!(rc, 0, "VLAN {vid} in the guest:\n{out}");
        assert!(
            out.contains(&format!("{dev} ")) && out.contains(&format!("| {vid} ")),
            "{out}"
        );
    }

    /// Gives the guest's eth0 the IPv6 RDMA address (no duplicate address detection: the
    /// tap's only other end is dpdk-roce) and libdaplofa an IA on it; waits until rxe0 has the
    /// address's GID.
    fn add_ipv6(&self) {
        let ip: std::net::Ipv6Addr = self.net.guest.parse().unwrap();
        let gid = ip
            .segments()
            .iter()
            .map(|s| format!("{s:04x}"))
            .collect::<Vec<_>>()
            .join(":");
        let line = format!(
            "{} u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"{} 0\" \"\"",
            self.net.ia, self.net.guest
        );
        let (rc, out) = self.exec(
            60,
            &format!(
                "set -e
                 echo 0 > /proc/sys/net/ipv6/conf/eth0/accept_dad
                 echo 0 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6
                 ip -6 addr add {}/64 dev eth0
                 echo '{line}' >> /etc/dat.conf
                 i=0
                 until grep -q {gid} /sys/class/infiniband/rxe0/ports/1/gids/*; do
                   i=$((i+1)); [ $i -gt 100 ] && exit 1; usleep 100000
                 done
                 ip -6 addr show dev eth0",
                self.net.guest
            ),
        );
        assert_eq!(rc, 0, "IPv6 in the guest:\n{out}");
        assert!(out.contains(&format!("{}/64", self.net.guest)), "{out}");
    }

    fn run_script(&self, args: &[&str]) -> (i32, String) {
        self.run_script_with(&[], args)
    }

    /// [`run_script`](Self::run_script) with more environment variables.
    fn run_script_with(&self, env: &[(&str, &str)], args: &[&str]) -> (i32, String) {
        let out = Command::new("bash")
            .arg(script())
            .envs(env.iter().copied())
            .args(args)
            .output()
            .expect("run scripts/rxe-guest.sh");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code().unwrap_or(-1), text)
    }

    /// Runs `cmd` in the guest (killed after `limit_s`): its exit status and output. When the
    /// guest's command channel gave no answer at all (exit 255: the serial agent stalled
    /// under the host's load, seen once in a fresh-clone run), the command goes once more; a
    /// late answer to the first is never taken for the second (each carries its nonce).
    fn exec(&self, limit_s: u32, cmd: &str) -> (i32, String) {
        let args = ["exec", &self.name, "-t", &limit_s.to_string(), "--", cmd];
        let first = self.run_script(&args);
        if first.0 != 255 {
            return first;
        }
        println!(
            "guest {}: no answer on the command channel, asking again",
            self.name
        );
        self.run_script(&args)
    }

    /// Starts `cmd` in the guest as background job `job`. When the command channel gave no
    /// answer (exit 255, as `exec` retries it), the guest is asked whether the job runs (a pid
    /// file and no exit status: an earlier job of the name has both) before it is started
    /// again: never two of one job.
    fn spawn(&self, job: &str, cmd: &str) {
        let args = ["spawn", &self.name, job, "--", cmd];
        let (rc, out) = self.run_script(&args);
        if rc == 255 {
            println!(
                "guest {}: no answer to the start of {job}, asking whether it started",
                self.name
            );
            let (_, seen) = self.exec(
                60,
                &format!("j=/run/jobs/{job}; test -s $j.pid && test ! -e $j.rc && echo STARTED"),
            );
            if seen.contains("STARTED") {
                return;
            }
            let (rc, out) = self.run_script(&args);
            assert_eq!(rc, 0, "spawn {cmd} in the guest (asked twice):\n{out}");
            return;
        }
        assert_eq!(rc, 0, "spawn {cmd} in the guest:\n{out}");
    }

    /// Waits up to `limit_s` for job `job` (killed then, status 124): status and output. When
    /// the command channel gave no answer (exit 255, as `exec` retries it; seen in a
    /// fresh-clone run where the job had ended and the guest's agent was late under the host's
    /// load), it asks once more: a job's status and output stay in the guest until the next job
    /// of its name, so the second answer is the job's.
    fn collect(&self, job: &str, limit_s: u32) -> (i32, String) {
        let args = ["collect", &self.name, job, "-t", &limit_s.to_string()];
        let first = self.run_script(&args);
        if first.0 != 255 {
            return first;
        }
        println!(
            "guest {}: no answer to the collection of {job}, asking again",
            self.name
        );
        self.run_script(&args)
    }

    /// Waits until a program in the guest is ready for its client: with `publishes` (dtest,
    /// dtestx), until it listens on TCP 15828 (it creates its RDMA listener only once its
    /// client fetched the address there); else until it listens for RDMA CM connections (an
    /// rdma_cm id in state LISTEN).
    fn wait_guest_listening(&self, publishes: bool) {
        let check = if publishes {
            "netstat -ltn | grep -q ':15828 '"
        } else {
            "rdma res show cm_id | grep -q 'state LISTEN'"
        };
        let (rc, out) = self.exec(
            100,
            &format!(
                "i=0; until {check}; do \
                 i=$((i+1)); [ $i -gt 900 ] && exit 1; usleep 100000; done"
            ),
        );
        assert_eq!(rc, 0, "the guest's server never listened:\n{out}");
    }

    /// Holds RoCEv2 (UDP 4791) off the guest's rxe until an rdma_cm id listens: a tc filter on
    /// eth0's ingress drops it, and job `gate` deletes the filter once `rdma res show cm_id`
    /// shows a listener. A REQ that came before is lost on the way, as on a lossy link, and
    /// dpdk-roce's CM sends it again after its response timeout (4.3 s). Closed with
    /// [`Guest::lift_roce_gate`].
    fn hold_roce_until_listening(&self) {
        let (rc, out) = self.exec(
            30,
            &format!(
                "{TC} qdisc add dev eth0 clsact && \
                 {TC} filter add dev eth0 ingress pref 1 protocol ip u32 \
                 match ip protocol 17 0xff match ip dport 4791 0xffff action drop"
            ),
        );
        assert_eq!(rc, 0, "the guest's RoCEv2 gate (tc):\n{out}");
        self.spawn(
            "gate",
            &format!(
                "until rdma res show cm_id | grep -q 'state LISTEN'; do usleep 20000; done; \
                 {TC} -s filter show dev eth0 ingress; {TC} qdisc del dev eth0 clsact && echo LIFTED"
            ),
        );
    }

    /// Ends [`Guest::hold_roce_until_listening`]: waits up to 10 s for job `gate` (it ends
    /// when the server listened) and returns how many frames the filter dropped. Err: the
    /// job's output when it had not lifted the gate (the filter is removed then).
    fn lift_roce_gate(&self) -> Result<u64, String> {
        let (_, out) = self.collect("gate", 10);
        if !out.contains("LIFTED") {
            let (rc, rest) = self.exec(
                30,
                &format!("{TC} qdisc del dev eth0 clsact 2>/dev/null; true"),
            );
            assert_eq!(rc, 0, "remove the guest's RoCEv2 gate:\n{rest}");
            return Err(out);
        }
        // `tc -s` prints the drop action's count as " Sent B bytes P pkt".
        let dropped = out
            .lines()
            .find_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (w.first() == Some(&"Sent") && w.get(4) == Some(&"pkt"))
                    .then(|| w[3].parse().ok())
                    .flatten()
            })
            .ok_or_else(|| format!("no drop count in the gate's output:\n{out}"))?;
        Ok(dropped)
    }

    /// Waits up to `limit` until no program of a test runs in the guest and rdma_cm holds no
    /// id: the next test finds it as booted (a program killed in the middle of rxe's work can
    /// take seconds to go). Err: what is left.
    fn settled(&self, limit: Duration) -> Result<(), String> {
        let (rc, out) = self.exec(
            limit.as_secs() as u32 + 5,
            &format!(
                "i=0; while ps -o comm | grep -qE '^(dtest|dtestx|dtestsrq|dtestcm|dapltest)$' \
                 || rdma res show cm_id | grep -q .; do \
                 i=$((i+1)); if [ $i -gt {} ]; then ps -o pid,stat,comm; rdma res show cm_id; \
                 exit 1; fi; usleep 100000; done",
                limit.as_millis() / 100
            ),
        );
        if rc == 0 {
            Ok(())
        } else {
            Err(out)
        }
    }

    /// rxe0 port 1's hw_counters.
    fn rxe_counters(&self) -> BTreeMap<String, u64> {
        let (rc, out) = self.exec(
            30,
            "cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep . *",
        );
        assert_eq!(rc, 0, "read rxe0's counters:\n{out}");
        out.lines()
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.to_string(), v.trim().parse().ok()?))
            })
            .collect()
    }

    /// The counters that say something was sent again or arrived out of order, as they moved
    /// since the previous call.
    fn retransmission_counters(&mut self) -> String {
        let now = self.rxe_counters();
        let moved = |k: &str| {
            now.get(k).copied().unwrap_or(0) as i64
                - self.counters.get(k).copied().unwrap_or(0) as i64
        };
        let text = [
            "duplicate_request",
            "out_of_seq_request",
            "rcvd_seq_err",
            "completer_retry_err",
            "retry_exceeded_err",
            "rcvd_rnr_err",
            "send_rnr_err",
        ]
        .iter()
        .map(|k| format!("{k} +{}", moved(k)))
        .collect::<Vec<_>>()
        .join(", ");
        self.counters = now;
        text
    }

    /// A host process of `program args` on dpdk-roce with inline progress and its away helper
    /// (`engine.away_after_us`), as the shipped profiles run it, its capture written to `pcap`.
    /// The helper answers the guest while the program is away from DAT: dtestx's atomics'
    /// target, dtest `-W`'s ping-pong spinning on memory, dapltest's threads between calls.
    fn host(&self, program: &str, args: &[&str], pcap: &Path) -> Proc {
        Proc::spawn(
            Command::new(program)
                .args(args)
                .env("DAT_OVERRIDE", &self.conf)
                .env("DPDK_ROCE_PROGRESS", "inline")
                .env("DPDK_ROCE_LOG", dpdk_common::LISTEN_LOG)
                .env_remove("DPDK_ROCE_AWAY_AFTER_US")
                .env("DPDK_ROCE_CAPTURE", pcap)
                .stdin(Stdio::null()),
        )
    }

    /// A fresh capture path for `case`.
    fn pcap(&self, case: &str) -> PathBuf {
        let file: String = case
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let p = self.dir.join(format!("{file}.pcap"));
        let _ = std::fs::remove_file(&p);
        p
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["down", &self.name])
            .output();
    }
}

/// Copies the provider library cargo built next to the test binaries (deps/, or the copy in
/// target/<profile>/) to `to`. A concurrent `cargo build` replaces it: this waits up to five
/// minutes for one to be there.
fn copy_provider_lib(to: &Path) {
    let exe = std::env::current_exe().expect("test binary path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf();
    let t0 = Instant::now();
    loop {
        for lib in [
            profile.join("deps/libdpdk_roce.so"),
            profile.join("libdpdk_roce.so"),
        ] {
            if lib.is_file() && std::fs::copy(&lib, to).is_ok() {
                return;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(300),
            "provider library missing in {}",
            profile.display()
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The lines of a program's output that report a failure.
fn error_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| {
            l.contains("FAIL")
                || l.contains(" failed")
                || l.contains("ERR")
                || l.to_lowercase().contains("error")
                || l.contains("Segmentation")
                || l.contains("Aborted")
                || l.contains("panicked")
                || l.contains("bad connection event")
                || l.starts_with("[killed after")
                || l.starts_with("[job ")
                || (l.starts_with("[exit status") && *l != "[exit status: 0]")
                || l.starts_with("[signal")
        })
        .collect()
}

/// `what` passed: `out` has every line of `pass` and no error line.
fn check_passed(what: &str, out: &str, pass: &[&str]) -> Result<(), String> {
    let missing: Vec<&&str> = pass.iter().filter(|p| !out.contains(**p)).collect();
    let bad = error_lines(out);
    if missing.is_empty() && bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{what}: missing {missing:?}, error lines {bad:?}:\n{out}"
        ))
    }
}

/// Payload heuristics that misfire on arbitrary SEND payloads (docs/REFERENCE-rocev2.md); and
/// `eth_over_ib`, which takes a payload starting `06 00` (dapltest's SEND messages) for
/// Ethertype 0x0600 and decodes it as a malformed XNS IDP packet.
const HEURISTICS_OFF: [&str; 5] = [
    "rpcrdma_infiniband",
    "iser_infiniband",
    "nvme_rdma",
    "smb_direct_infiniband",
    "eth_over_ib",
];

/// What a capture holds: `roce-tool decode`'s lines.
struct Capture {
    decoded: String,
    rocev2: u64,
}

impl Capture {
    /// tshark finds no malformed frame, error-level expert note or bad IPv4 checksum, and every
    /// RoCEv2 frame has a valid ICRC (`roce-tool decode`).
    fn check(pcap: &Path) -> Result<Capture, String> {
        if !pcap.is_file() {
            return Err(format!("no capture {}", pcap.display()));
        }
        let mut tshark = Command::new("tshark");
        tshark
            .arg("-r")
            .arg(pcap)
            .args(["-o", "ip.check_checksum:TRUE"])
            // RoCEv2 over IPv6 sends UDP checksum 0, as rxe does (docs/DESIGN.md "IPv6").
            .args(["-o", "udp.ignore_ipv6_zero_checksum:TRUE"]);
        for h in HEURISTICS_OFF {
            tshark.args(["--disable-heuristic", h]);
        }
        let out = tshark
            .args([
                "-Y",
                "_ws.malformed || _ws.expert.severity >= 8388608 || ip.checksum.status == 0",
            ])
            .output()
            .expect("tshark (scripts/setup.sh installs it)");
        if !out.status.success() {
            return Err(format!("tshark failed: {}", output_text(&out)));
        }
        let flagged = String::from_utf8_lossy(&out.stdout);
        if !flagged.trim().is_empty() {
            return Err(format!(
                "tshark flags frames in {}:\n{flagged}",
                pcap.display()
            ));
        }
        let out = Command::new(env!("CARGO_BIN_EXE_roce-tool"))
            .arg("decode")
            .arg(pcap)
            .output()
            .unwrap();
        let decoded = String::from_utf8_lossy(&out.stdout).into_owned();
        let summary = decoded.lines().last().unwrap_or_default().to_string();
        let rocev2: u64 = summary
            .split("rocev2: ")
            .nth(1)
            .and_then(|s| s.split(',').next())
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("no decode summary: {summary}"))?;
        if !out.status.success()
            || !summary.contains(&format!("rocev2: {rocev2}, valid: {rocev2}, bad icrc: 0"))
        {
            let bad: Vec<&str> = decoded
                .lines()
                .filter(|l| l.contains("!!"))
                .take(10)
                .collect();
            return Err(format!("decode: {summary}\n{}", bad.join("\n")));
        }
        if rocev2 == 0 {
            return Err(format!("no RoCEv2 frame captured: {summary}"));
        }
        Ok(Capture { decoded, rocev2 })
    }

    /// RC packets other than ACKs seen more than once (same QP, PSN, opcode): sent again by
    /// dpdk-roce, by rxe.
    fn repeated(&self) -> (usize, usize) {
        let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
        for l in self.decoded.lines() {
            // `NNNN  t=SECS  SRC:PORT > DST RC ...`
            let Some(rest) = l.splitn(3, "  ").nth(2) else {
                continue;
            };
            if rest.contains(" RC ") && !rest.contains("Acknowledge") {
                *seen.entry(rest).or_default() += 1;
            }
        }
        let mut by = (0, 0);
        for (k, n) in seen {
            let ours = [PLAIN, SRQ_NET, DTESTX_NET, VLAN_77, IPV6, ROUTED]
                .iter()
                .any(|n| {
                    [n.provider, n.provider_v4].iter().any(|a| {
                        k.starts_with(&format!("{a}:")) || k.starts_with(&format!("[{a}]"))
                    })
                });
            if ours {
                by.0 += n - 1;
            } else {
                by.1 += n - 1;
            }
        }
        by
    }

    /// Lines of the decode containing `what`, sent by `src`.
    fn count(&self, src: &str, what: &str) -> usize {
        self.decoded
            .lines()
            .filter(|l| l.contains(&format!("  {src}:")) && l.contains(what))
            .count()
    }
}

/// The outcome of one case, printed as it ends and collected for the test's verdict.
struct Cases {
    failures: Vec<String>,
    start: Instant,
}

impl Cases {
    fn new() -> Cases {
        Cases {
            failures: Vec::new(),
            start: Instant::now(),
        }
    }

    fn record(
        &mut self,
        g: &mut Guest,
        what: &str,
        t0: Instant,
        result: Result<Vec<Capture>, String>,
    ) {
        let secs = t0.elapsed().as_secs_f64();
        let counters = g.retransmission_counters();
        match result {
            Ok(caps) if caps.is_empty() => println!(
                "CASE {what}: PASSED in {secs:.1} s (its frames are in the server session's \
                 capture); rxe counters: {counters}"
            ),
            Ok(caps) => {
                let frames: u64 = caps.iter().map(|c| c.rocev2).sum();
                let (ours, theirs) = caps.iter().fold((0, 0), |acc, c| {
                    let r = c.repeated();
                    (acc.0 + r.0, acc.1 + r.1)
                });
                println!(
                    "CASE {what}: PASSED in {secs:.1} s; {frames} RoCEv2 frames, ICRCs valid, \
                     tshark clean; RC packets repeated in the capture: dpdk-roce {ours}, rxe \
                     {theirs}; rxe counters: {counters}"
                );
            }
            Err(e) => {
                // The guest kernel's own view (a NIC watchdog, rxe's warnings) for the record.
                let console = std::fs::read_to_string(state_dir(&g.name).join("console.log"))
                    .unwrap_or_default();
                let tail: Vec<&str> = console.lines().rev().take(20).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                println!(
                    "CASE {what}: FAILED in {secs:.1} s; rxe counters: {counters}\n{e}\n\
                     the guest's console, last lines:\n{}",
                    tail.join("\n")
                );
                self.failures
                    .push(format!("{what}: {}", e.lines().next().unwrap_or("")));
            }
        }
    }

    /// Also on the test process's own stderr, past libtest's capture: a suite run shows where
    /// this binary's time went.
    fn verdict(self, g: &Guest) {
        let boot = if g.boot.is_zero() {
            "guest shared, booted by an earlier test".to_string()
        } else {
            format!("guest boot {:.1} s", g.boot.as_secs_f64())
        };
        let line = format!(
            "interop_rxe {}: {boot}, all cases {:.1} s, {} failed",
            g.name,
            self.start.elapsed().as_secs_f64(),
            self.failures.len()
        );
        println!("{line}");
        let _ = writeln!(std::io::stderr().lock(), "{line}");
        assert!(
            self.failures.is_empty(),
            "{} case(s) failed:\n{}",
            self.failures.len(),
            self.failures.join("\n")
        );
    }
}

/// Runs `program -P IA args` as server on `server`'s side and as client on the other, the
/// client's `-h` being `host` (dtest/dtestx: the server's kernel address; dtestsrq: its IA
/// address). Returns (dpdk-roce's output, the guest's output, dpdk-roce's capture). A host
/// start that hit net_af_packet's PACKET_FANOUT collision is retried with a new process.
fn pair(
    g: &Guest,
    case: &str,
    program: &str,
    args: &[&str],
    server: Server,
    guest_limit_s: u32,
) -> (String, String, PathBuf) {
    let publishes = matches!(program, "dtest" | "dtestx");
    let host_h = match (server, publishes) {
        (Server::DpdkRoce, true) => g.net.kernel,
        (Server::DpdkRoce, false) => g.net.provider,
        (Server::Rxe, true) => g.net.eth0,
        (Server::Rxe, false) => g.net.guest,
    };
    let ia = g.net.ia;
    let guest_cmd = |client: bool| {
        let mut c = format!("{program} -P {ia} {}", args.join(" "));
        if client {
            c.push_str(&format!(" -h {host_h}"));
        }
        c
    };
    for attempt in 0..4 {
        let pcap = g.pcap(case);
        let (ours, theirs) = match server {
            Server::Rxe => {
                g.spawn("srv", &guest_cmd(false));
                g.wait_guest_listening(publishes);
                let mut a: Vec<&str> = vec!["-P", ia];
                a.extend_from_slice(args);
                a.extend_from_slice(&["-h", host_h]);
                let ours = g.host(program, &a, &pcap).finish(LIMIT);
                // A server whose client failed may wait for ever: not long then.
                let limit = if error_lines(&ours).is_empty() {
                    guest_limit_s
                } else {
                    10
                };
                let (_, theirs) = g.collect("srv", limit);
                (ours, theirs)
            }
            Server::DpdkRoce => {
                // Our server publishes on the host's TCP 15828: not beside another test
                // binary's dtest server.
                let _port = publishes.then(dpdk_common::lock_dtest_port);
                let mut a: Vec<&str> = vec!["-P", ia];
                a.extend_from_slice(args);
                let mut srv = g.host(program, &a, &pcap);
                // The server is up once it publishes on TCP 15828 (dtest, dtestx), or once
                // its listener is (the others publish nothing).
                let ready = srv.wait_server_ready(publishes, Duration::from_secs(30));
                if ready.is_err() {
                    (srv.finish(LIMIT), String::new())
                } else {
                    g.spawn("cli", &guest_cmd(true));
                    let ours = srv.finish(LIMIT);
                    let limit = if error_lines(&ours).is_empty() {
                        guest_limit_s
                    } else {
                        10
                    };
                    let (_, theirs) = g.collect("cli", limit);
                    (ours, theirs)
                }
            }
        };
        if ours.contains(FANOUT_COLLISION) && attempt < 3 {
            eprintln!("{case}: net_af_packet PACKET_FANOUT collision, again with a new process");
            let _ = g.collect(if server == Server::Rxe { "srv" } else { "cli" }, 0);
            dpdk_common::fanout_retry_wait();
            continue;
        }
        return (ours, theirs, pcap);
    }
    unreachable!("the loop returns on its last attempt");
}

/// The last `n` frames of a capture as `roce-tool decode` prints them (or why there are none).
fn capture_tail(pcap: &Path, n: usize) -> String {
    let Ok(out) = Command::new(env!("CARGO_BIN_EXE_roce-tool"))
        .arg("decode")
        .arg(pcap)
        .output()
    else {
        return "roce-tool decode did not run".into();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(n);
    format!(
        "the last {} frames of {}:\n{}",
        lines.len() - from,
        pcap.display(),
        lines[from..].join("\n")
    )
}

/// dtest both ways: the guest's client and server both pass, every phase ran, capture clean.
fn dtest_case(g: &mut Guest, cases: &mut Cases, args: &[&str], server: Server) {
    let what = format!("dtest {} ({})", args.join(" "), server.label());
    let t0 = Instant::now();
    let (ours, theirs, pcap) = pair(g, &what, "dtest", args, server, LIMIT.as_secs() as u32);
    let pass = ["PASSED"];
    let result = check_passed("dpdk-roce's dtest", &ours, &pass)
        .and_then(|_| check_passed("the guest's dtest", &theirs, &pass))
        .and_then(|_| {
            // Its RDMA read and message ping-pong phases ran on the client.
            let cli = if server == Server::Rxe {
                &ours
            } else {
                &theirs
            };
            let phases: &[&str] = if args.contains(&"-W") {
                &["RDMA write PingPong"]
            } else {
                &["RDMA READ DATA", "Message PingPong"]
            };
            if phases.iter().all(|p| cli.contains(p)) {
                Ok(())
            } else {
                Err(format!("the client skipped phases:\n{cli}"))
            }
        })
        .and_then(|_| Capture::check(&pcap).map(|c| vec![c]));
    // A failed case shows how its connection ended on the wire (a retry budget spent, a NAK).
    let result = result.map_err(|e| format!("{e}\n{}", capture_tail(&pcap, 40)));
    for l in ours
        .lines()
        .chain(theirs.lines())
        .filter(|l| l.contains("latency") || l.contains("MB/s"))
    {
        println!("  {}", l.trim());
    }
    cases.record(g, &what, t0, result);
}

/// The command channel of scripts/rxe-guest.sh gives a command's output byte for byte and its
/// exit status, and kills a command that runs too long.
fn check_command_channel(g: &Guest) {
    let (rc, out) = g.exec(
        30,
        "printf 'a b\\n\\001\\377 end'; echo '@@END x 0'; exit 3",
    );
    assert_eq!(rc, 3, "{out}");
    assert!(out.starts_with("a b\n\u{1}"), "{out:?}");
    assert!(out.contains(" end@@END x 0\n"), "{out:?}");
    // Timed per attempt: like `exec`, one command the channel lost (exit 255) is asked again.
    let args = ["exec", &g.name, "-t", "2", "--", "sleep 30"];
    let (mut rc, mut out, mut took) = (255, String::new(), Duration::ZERO);
    for _ in 0..2 {
        let t0 = Instant::now();
        (rc, out) = g.run_script(&args);
        took = t0.elapsed();
        if rc != 255 {
            break;
        }
        println!(
            "guest {}: no answer on the command channel, asking again",
            g.name
        );
    }
    assert_eq!(rc, 137, "{out}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    // A command line the serial port lost is sent again after 3 s without its
    // acknowledgement (not after the 32 s its answer may take); one that arrives twice runs
    // once.
    let count_run = |first_send| {
        let args = [
            "exec",
            &g.name,
            "-t",
            "2",
            "--",
            "echo once >> /tmp/ran-cc; wc -l < /tmp/ran-cc",
        ];
        g.run_script_with(&[("RXE_GUEST_TEST_FIRST_SEND", first_send)], &args)
    };
    let (rc, out) = g.exec(30, "rm -f /tmp/ran-cc");
    assert_eq!(rc, 0, "{out}");
    let t0 = Instant::now();
    let (rc, out) = count_run("lose");
    assert_eq!((rc, out.lines().next()), (0, Some("1")), "{out}");
    assert!(out.contains("sending it again"), "{out}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    let (rc, out) = count_run("twice");
    assert_eq!((rc, out.trim_end()), (0, "2"), "{out}");
    let (rc, out) = g.exec(30, "wc -l < /tmp/ran-cc");
    assert_eq!(
        (rc, out.trim_end()),
        (0, "2"),
        "the command sent twice ran twice: {out}"
    );
    let (rc, out) = g.exec(30, "cat /sys/class/infiniband/rxe0/ports/1/state; uname -r");
    assert_eq!(rc, 0, "{out}");
    assert!(out.contains("ACTIVE") && out.contains("6.1."), "{out}");
}

/// dtest with 4 KiB buffers (single-packet messages) and 64 KiB buffers (64 packets each),
/// both ways: RDMA WRITE, RDMA READ, SEND ping-pong and the bi-directional RDMA WRITE phase
/// (2000 buffers each way). Not its defaults: a 4 MiB buffer makes that last phase 8 GiB each
/// way, and this guest moves about 20-25 MB/s (1.1 GB had crossed after 50 s, unfinished).
/// Then `-W`: its RDMA write ping-pong spins on memory with no DAT call, so dpdk-roce's side
/// sees the guest's writes only through its away helper.
#[test]
fn dtest_interoperates_with_rxe_both_ways() {
    on_plain_guest(|g| {
        check_command_channel(g);
        let mut cases = Cases::new();
        for args in [
            &["-b", "4096"][..],
            &["-b", "65536"][..],
            &["-b", "4096", "-W"][..],
        ] {
            for server in [Server::Rxe, Server::DpdkRoce] {
                dtest_case(g, &mut cases, args, server);
            }
        }
        cases.verdict(g);
    });
}

/// 802.1Q against the reference stack: dtest both ways on VLAN 77, dpdk-roce tagging at its
/// port (`[roce] vlan = 77`, DSCP 26) and the guest's rxe0 sending through eth0.77. On the
/// wire (QEMU's dump of the guest's NIC) every RoCEv2 frame is tagged 77, dpdk-roce's with
/// priority 3 (its DSCP >> 3), rxe's with Linux's default priority 0.
#[test]
fn dtest_interoperates_with_rxe_on_a_vlan_both_ways() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut g = Guest::up_on("vl", VLAN_77);
    let mut cases = Cases::new();
    for server in [Server::Rxe, Server::DpdkRoce] {
        dtest_case(&mut g, &mut cases, &["-b", "4096"], server);
    }
    cases.verdict(&g);
    let count = |filter: &str| -> usize {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(g.wire.as_ref().expect("a VLAN guest's wire is dumped"))
            .args(["-Y", filter])
            .output()
            .expect("tshark (scripts/setup.sh installs it)");
        assert!(
            out.status.success(),
            "tshark -Y {filter}: {}",
            output_text(&out)
        );
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    let (ours, theirs) = (
        format!("ip.src == {}", VLAN_77.provider),
        format!("ip.src == {}", VLAN_77.guest),
    );
    let roce = |from: &str| count(&format!("udp.dstport == 4791 && {from}"));
    let tagged = |from: &str, pcp: u8| {
        count(&format!(
            "udp.dstport == 4791 && {from} && vlan.id == 77 && vlan.priority == {pcp}"
        ))
    };
    let (sent, received) = (roce(&ours), roce(&theirs));
    println!("wire: {sent} RoCEv2 frames from dpdk-roce, {received} from rxe");
    assert!(sent > 1000 && received > 1000, "{sent} / {received}");
    assert_eq!(
        tagged(&ours, 3),
        sent,
        "dpdk-roce's frames on VLAN 77, priority 3"
    );
    assert_eq!(tagged(&theirs, 0), received, "rxe's frames on VLAN 77");
    assert_eq!(count("udp.dstport == 4791 && !vlan"), 0, "untagged RoCEv2");
}

/// dtestx: RDMA WRITE with immediate, compare-and-swap and fetch-and-add, both ways. The
/// atomics' target makes no DAT call while its peer works: with inline progress (the shipped
/// profile's) dpdk-roce's away helper answers them.
#[test]
fn dtestx_extensions_interoperate_with_rxe_both_ways() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut g = Guest::up_on("dx", DTESTX_NET);
    dtestx_both_ways(&mut g);
}

/// dtestx's server (Debian's) sends its address to the client over TCP, reads the client's
/// back, and only then listens; a client as quick as dpdk-roce's connects in between (its REQ
/// follows the TCP exchange by about a millisecond; the TCG guest's dtestx needs longer, and
/// under the suite's load its packets come in bursts), and rdma_cm rejects that as an invalid
/// service ID (a NON_PEER_REJECTED event, 0x4003; libdaplofa does not retry that either). In
/// one CI run it happened four times in a row. So the guest holds RoCEv2 off rxe until its
/// dtestx listens ([`Guest::hold_roce_until_listening`]): the early REQ is lost instead of
/// rejected, and dpdk-roce's CM sends it again.
fn dtestx_both_ways(g: &mut Guest) {
    let mut cases = Cases::new();
    for server in [Server::Rxe, Server::DpdkRoce] {
        let what = format!("dtestx ({})", server.label());
        let t0 = Instant::now();
        let gated = server == Server::Rxe;
        let mut attempt = 0;
        let (ours, theirs, pcap, gate) = loop {
            if gated {
                g.hold_roce_until_listening();
            }
            let (ours, theirs, pcap) =
                pair(g, &what, "dtestx", &[], server, LIMIT.as_secs() as u32);
            let gate = gated.then(|| g.lift_roce_gate());
            attempt += 1;
            let raced = dpdk_common::dtestx_fetch_add_raced(&ours)
                || dpdk_common::dtestx_fetch_add_raced(&theirs);
            if attempt < 3 && raced {
                println!("{what}: dtestx's fetch-and-add phase raced (its sleeps); again");
                continue;
            }
            break (ours, theirs, pcap, gate);
        };
        if let Some(Ok(dropped)) = &gate {
            println!(
                "{what}: the guest dropped {dropped} RoCEv2 frame(s) before its dtestx listened"
            );
        }
        let result = match gate {
            Some(Err(out)) => Err(format!("the guest's RoCEv2 gate was never lifted:\n{out}")),
            _ => Ok(()),
        }
        .and_then(|_| check_passed("dpdk-roce's dtestx", &ours, &["PASSED"]))
        .and_then(|_| check_passed("the guest's dtestx", &theirs, &["PASSED"]))
        .and_then(|_| {
            for op in ["CMP_SWAP", "FETCH_ADD", "IMMED"] {
                let passed = |o: &str| o.lines().any(|l| l.contains(op) && l.contains("PASSED"));
                if !passed(&ours) && !passed(&theirs) {
                    return Err(format!("no {op} PASSED line:\n{ours}\n{theirs}"));
                }
            }
            Ok(())
        })
        .and_then(|_| Capture::check(&pcap).map(|c| vec![c]))
        .map_err(|e| {
            format!(
                "{e}\nthe guest's dtestx:\n{theirs}\n{}",
                capture_tail(&pcap, 20)
            )
        });
        for l in ours
            .lines()
            .chain(theirs.lines())
            .filter(|l| l.contains("PASSED"))
        {
            println!("  {}", l.trim());
        }
        cases.record(g, &what, t0, result);
    }
    cases.verdict(g);
}

/// dtestsrq: receives through a shared receive queue, both ways. dpdk-roce's side must pass.
/// libdaplofa on the guest's rdma_rxe (kernel 6.1) never ends this program, not even against
/// itself in the guest (its SRQ EP waits for a "last WQE reached" event rxe does not raise):
/// its side is stopped a second after dpdk-roce's side ended (which it does only after the
/// DREQ/DREP), and the wire must show the whole exchange instead (three SENDs each way, each
/// acknowledged, and the CM's DREQ/DREP). Waiting longer showed nothing more: 10 s more per
/// direction, in every run, for a job that was then killed.
///
/// On a guest of its own: a dtestx server in a guest where these killed servers had run
/// listened too late for a quick client again and again (rdma_cm's REJ, invalid service ID),
/// though no program and no rdma_cm id of theirs was left.
#[test]
fn dtestsrq_interoperates_with_rxe_both_ways() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut g = Guest::up_on("dq", SRQ_NET);
    dtestsrq_both_ways(&mut g);
}

fn dtestsrq_both_ways(g: &mut Guest) {
    const GUEST_SRQ_GRACE_S: u32 = 1;
    let mut cases = Cases::new();
    for server in [Server::Rxe, Server::DpdkRoce] {
        let what = format!("dtestsrq ({})", server.label());
        let t0 = Instant::now();
        let (ours, theirs, pcap) = pair(g, &what, "dtestsrq", &[], server, GUEST_SRQ_GRACE_S);
        let connected = if server == Server::Rxe {
            "ALL 1 CONNECTED on client"
        } else {
            "ALL 1 CONNECTED on server"
        };
        let result = check_passed(
            "dpdk-roce's dtestsrq",
            &ours,
            &[connected, "RC SRQ Test Complete"],
        )
        .and_then(|_| Capture::check(&pcap))
        .and_then(|c| {
            let (ours, theirs) = (g.net.provider, g.net.guest);
            let sends = (c.count(ours, "RC SEND"), c.count(theirs, "RC SEND"));
            let acks = (c.count(ours, "Acknowledge"), c.count(theirs, "Acknowledge"));
            let cm = c.count(ours, "CM DREQ") + c.count(theirs, "CM DREQ");
            let drep = c.count(ours, "CM DREP") + c.count(theirs, "CM DREP");
            if sends.0 >= 3 && sends.1 >= 3 && acks.0 >= 3 && acks.1 >= 3 && cm >= 1 && drep >= 1 {
                Ok(vec![c])
            } else {
                Err(format!(
                    "incomplete exchange: SENDs {sends:?}, ACKs {acks:?}, DREQ {cm}, DREP {drep}\n{}",
                    c.decoded
                ))
            }
        });
        println!(
            "  the guest's dtestsrq (stopped {GUEST_SRQ_GRACE_S} s after ours): {}",
            theirs.lines().last().unwrap_or("")
        );
        cases.record(g, &what, t0, result);
    }
    cases.verdict(g);
}

/// The dapltest transactions of one size: (name, ops). Every transaction has both sides
/// initiate RDMA (`client RW` and `server RW`), data validated (`-V`).
fn dapltest_transactions() -> Vec<(String, Vec<String>)> {
    let mut t = Vec::new();
    let ops = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
    for n in [256, 4096, 65536] {
        t.push((
            format!("SR {n}"),
            ops(&format!("client SR {n} server SR {n}")),
        ));
    }
    for n in [4096, 65536] {
        t.push((
            format!("RW {n}"),
            ops(&format!(
                "client SR 256 client RW {n} server RW {n} server SR 256"
            )),
        ));
        t.push((
            format!("RR {n}"),
            ops(&format!(
                "client SR 256 client RR {n} server RR {n} server SR 256"
            )),
        ));
    }
    t
}

/// A dapltest transaction client's output passed, with bytes moved of each kind it used.
fn check_dapltest_client(what: &str, name: &str, out: &str) -> Result<(), String> {
    check_passed(what, out, &["Total Send", "End of Work -- Client Exiting"])?;
    let moved = |kind: &str| {
        out.lines()
            .find(|l| l.starts_with(kind))
            .and_then(|l| l.split(':').nth(1))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let need: &[&str] = match &name[..2] {
        "RW" => &["Total Send", "Total Recv", "Total RDMA Write"],
        "RR" => &["Total Send", "Total Recv", "Total RDMA Read"],
        _ => &["Total Send", "Total Recv"],
    };
    for k in need {
        if moved(k) <= 0.0 {
            return Err(format!("{what}: nothing moved for {k:?}:\n{out}"));
        }
    }
    for l in out
        .lines()
        .filter(|l| l.contains("MB/Sec") || l.contains("WQE/Sec"))
    {
        println!("  {what}: {}", l.trim());
    }
    Ok(())
}

/// dapltest's transaction test (`-T T -V`, 100 iterations, one thread, one EP) with SEND/RECV,
/// RDMA WRITE and RDMA READ at 256 B to 64 KiB, both ways: the server (`-T S`) on one side,
/// each transaction a client on the other, then `-T Q` stops the server, which must exit
/// cleanly.
#[test]
fn dapltest_transactions_interoperate_with_rxe_both_ways() {
    on_plain_guest(|g| {
        let mut cases = Cases::new();
        dapltest_both_ways(g, &mut cases, &dapltest_transactions());
        cases.verdict(g);
    });
}

/// dapltest transactions on `g` (its RDMA addresses and IA), each both ways: the guest's
/// server with dpdk-roce's clients, then dpdk-roce's server with the guest's clients, each
/// session ended by `-T Q`.
fn dapltest_both_ways(g: &mut Guest, cases: &mut Cases, transactions: &[(String, Vec<String>)]) {
    let (ia, provider, guest) = (g.net.ia, g.net.provider, g.net.guest);
    let base = |server_ip: &str| format!("-T T -s {server_ip} -D {ia} -i 100 -t 1 -w 1 -V");
    // The guest serves, dpdk-roce's clients.
    {
        g.spawn("dts", &format!("dapltest -T S -D {ia}"));
        g.wait_guest_listening(false);
        for (name, ops) in transactions {
            let what = format!("dapltest -T T {name} (rxe server <- dpdk-roce client)");
            let t0 = Instant::now();
            let mut out = String::new();
            let mut pcap = PathBuf::new();
            for attempt in 0..4 {
                pcap = g.pcap(&what);
                let mut args: Vec<String> =
                    base(guest).split_whitespace().map(String::from).collect();
                args.extend(ops.iter().cloned());
                let a: Vec<&str> = args.iter().map(String::as_str).collect();
                out = g.host("dapltest", &a, &pcap).finish(LIMIT);
                if !out.contains(FANOUT_COLLISION) || attempt == 3 {
                    break;
                }
                dpdk_common::fanout_retry_wait();
            }
            let result = check_dapltest_client(&what, name, &out)
                .and_then(|_| Capture::check(&pcap).map(|c| vec![c]));
            cases.record(g, &what, t0, result);
        }
        let t0 = Instant::now();
        let pcap = g.pcap("dapltest quit");
        let quit = g
            .host("dapltest", &["-T", "Q", "-s", guest, "-D", ia], &pcap)
            .finish(LIMIT);
        let (_, server) = g.collect("dts", 30);
        let result = check_passed("dapltest -T Q", &quit, &["End of Work -- Client Exiting"])
            .and_then(|_| check_passed("the guest's dapltest server", &server, &["Exiting."]))
            .and_then(|_| Capture::check(&pcap).map(|c| vec![c]));
        cases.record(g, "dapltest -T Q (rxe server exits)", t0, result);
    }
    // dpdk-roce serves, the guest's clients.
    {
        let mut server = None;
        let pcap = g.pcap("dapltest server");
        for attempt in 0..4 {
            let srv = g.host("dapltest", &["-T", "S", "-D", ia], &pcap);
            if srv
                .wait_for_stderr(dpdk_common::LISTENING, Duration::from_secs(30))
                .is_ok()
            {
                server = Some(srv);
                break;
            }
            let out = srv.finish(LIMIT);
            assert!(
                out.contains(FANOUT_COLLISION) && attempt < 3,
                "dpdk-roce's dapltest server died:\n{out}"
            );
            dpdk_common::fanout_retry_wait();
        }
        let server = server.expect("dapltest server started");
        for (name, ops) in transactions {
            let what = format!("dapltest -T T {name} (dpdk-roce server <- rxe client)");
            let t0 = Instant::now();
            let (rc, out) = g.exec(
                LIMIT.as_secs() as u32,
                &format!("dapltest {} {}", base(provider), ops.join(" ")),
            );
            let out = format!("{out}[exit status: {rc}]\n");
            let result = check_dapltest_client(&what, name, &out).map(|_| Vec::new());
            cases.record(g, &what, t0, result);
        }
        let t0 = Instant::now();
        let (rc, quit) = g.exec(60, &format!("dapltest -T Q -s {provider} -D {ia}"));
        let out = server.finish(Duration::from_secs(30));
        let result = if rc != 0 {
            Err(format!("the guest's dapltest -T Q exited {rc}:\n{quit}"))
        } else {
            Ok(())
        }
        .and_then(|_| check_passed("dapltest -T Q", &quit, &["End of Work -- Client Exiting"]))
        .and_then(|_| {
            check_passed(
                "dpdk-roce's dapltest server",
                &out,
                &["Service Point Ready", "Exiting."],
            )
        })
        // The server's capture holds every transaction of this direction.
        .and_then(|_| Capture::check(&pcap).map(|c| vec![c]));
        cases.record(
            g,
            "dapltest server session (dpdk-roce server <- rxe clients), -T Q",
            t0,
            result,
        );
    }
}

/// Routed RoCEv2 against the reference stack: dpdk-roce and the guest in two subnets with a
/// Linux router between them (each names its gateway), dapltest's validated SEND, RDMA WRITE
/// and RDMA READ transactions both ways; the router forwarded them.
#[test]
fn dapltest_transactions_interoperate_with_rxe_through_a_linux_router() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut g = Guest::up_on("rt", ROUTED);
    let before = g.routed.as_ref().unwrap().0.forwarded();
    let mut cases = Cases::new();
    let some: Vec<_> = dapltest_transactions()
        .into_iter()
        .filter(|(name, _)| ["SR 4096", "RW 65536", "RR 65536"].contains(&name.as_str()))
        .collect();
    assert_eq!(some.len(), 3);
    dapltest_both_ways(&mut g, &mut cases, &some);
    cases.verdict(&g);
    let forwarded = g.routed.as_ref().unwrap().0.forwarded() - before;
    println!("the router forwarded {forwarded} datagrams");
    assert!(
        forwarded > 1000,
        "the router forwarded {forwarded} datagrams"
    );
}

/// `roce-dat-consumer` passed: its `case` line and every other ends in PASS, and it says
/// `RESULT 0 failed`.
fn consumer_passed(what: &str, out: &str, case: &str) -> Result<(), String> {
    let cases: Vec<&str> = out.lines().filter(|l| l.starts_with("CASE ")).collect();
    let ok = cases.iter().any(|l| l.starts_with(case))
        && cases.iter().all(|l| l.ends_with(" PASS"))
        && out.lines().any(|l| l == "RESULT 0 failed");
    if ok {
        Ok(())
    } else {
        Err(format!("{what}: no {case} or a case failed:\n{out}"))
    }
}

/// The guest's `roce-dat-consumer server` listened and no case of it failed. Its check after
/// the connection (no byte outside its registered memory changed) needs libdaplofa to report
/// the disconnection and flush its 64 receives; once in three runs that never came within
/// 60 s (the DREQ answered on the wire), and the check is then printed as not reached.
fn guest_server_served(theirs: &str) -> Result<(), String> {
    let failed = theirs
        .lines()
        .any(|l| l.starts_with("CASE ") && !l.ends_with(" PASS"));
    if !theirs.contains("READY") || failed {
        return Err(format!("the guest's server:\n{theirs}"));
    }
    if !theirs.contains("RESULT 0 failed") {
        println!(
            "note: the guest's server did not see its connection end within 8 s (no \
             disconnection or flush from libdaplofa); its memory check did not run:\n{theirs}"
        );
    }
    Ok(())
}

/// RoCEv2 over IPv6 against rxe and the reference uDAPL provider: the guest's libdaplofa
/// listens on its IPv6 IA (fd00:77:60::3) and dpdk-roce connects to it with a `sockaddr_in6`
/// (`roce-dat-consumer`: a DAT program of this project, through libdat2 on both sides; the
/// guest runs the same binary on libdaplofa), then RDMA WRITE, RDMA READ and SEND move
/// verified data and the server checks that no byte outside its registered memory changed.
/// Every RoCEv2 frame of the capture is IPv6, tshark flags nothing, every ICRC is valid.
///
/// What the reference stack does not do over IPv6, found with this guest (rxe to rxe in one
/// guest, no dpdk-roce): Debian's dapltest and dtestsrq copy only a `struct sockaddr` (16
/// bytes) of the server's `sockaddr_in6`, and libdaplofa's rdma_resolve_addr refuses what is
/// left (EINVAL); dtest's server-information exchange fails ("No valid data was received from
/// the server"); and libdaplofa as the connecting side refuses even a whole `sockaddr_in6`
/// (rdma_resolve_addr: EINVAL), so the guest is the server here.
#[test]
fn the_reference_udapl_on_rxe_serves_dpdk_roce_over_ipv6() {
    let _serial = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let mut g = Guest::up_on("v6", IPV6);
    check_command_channel(&g);
    let mut cases = Cases::new();
    let what = "roce-dat-consumer verify over IPv6 (rxe server)";
    let t0 = Instant::now();
    let mut result = Err(String::from("not run"));
    for attempt in 0..4 {
        let pcap = g.pcap(what);
        g.spawn(
            "srv",
            &format!(
                "/usr/local/bin/roce-dat-consumer --ia {} server --qual 4100 --connections 1",
                IPV6.ia
            ),
        );
        g.wait_guest_listening(false);
        let ours = g
            .host(
                &test_program("roce-dat-consumer").display().to_string(),
                &[
                    "--ia", IPV6.ia, "verify", "--server", IPV6.guest, "--qual", "4100",
                ],
                &pcap,
            )
            .finish(LIMIT);
        if ours.contains(FANOUT_COLLISION) && attempt < 3 {
            let _ = g.collect("srv", 0);
            dpdk_common::fanout_retry_wait();
            continue;
        }
        // libdaplofa over IPv6 delivers the guest's server no end of its connection (the
        // capture shows its DREP): waiting longer than a few seconds shows nothing more.
        let (_, theirs) = g.collect("srv", 8);
        result = consumer_passed("dpdk-roce's client", &ours, "CASE verify.traffic")
            .and_then(|_| guest_server_served(&theirs))
            .and_then(|_| Capture::check(&pcap))
            .and_then(|c| {
                if c.count(&format!("[{}]", IPV6.guest), "CM DREP") == 0 {
                    return Err("the guest never answered the DREQ".into());
                }
                let v4 = c
                    .decoded
                    .lines()
                    .filter(|l| l.contains(&format!("{}:", IPV6.provider_v4)))
                    .count();
                if v4 > 0 {
                    return Err(format!("{v4} RoCEv2 frames from dpdk-roce's IPv4 address"));
                }
                Ok(vec![c])
            })
            .map_err(|e| format!("{e}\n{}", capture_tail(&pcap, 40)));
        break;
    }
    cases.record(&mut g, what, t0, result);
    cases.verdict(&g);
}
