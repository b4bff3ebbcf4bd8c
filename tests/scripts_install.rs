//! scripts/install.sh: `install PREFIX` puts the provider library, the profiles and the tools
//! under PREFIX and a block of entries into the DAT registry file; `uninstall` leaves the machine
//! as it was, byte for byte.
//!
//! Most cases run on a registry file, a PREFIX and a state directory of the test's own
//! (`DAT_CONF`, `DPDK_ROCE_STATE_DIR`). One runs the real thing: the entries go into
//! `/etc/dat.conf`, Debian's `dtestsrq` and `dtest` find the provider through them with no
//! DAT_OVERRIDE (servers on `dpdk-roce-af_packet-a`, the dtestsrq client on
//! `dpdk-roce-af_packet-b`: the installed profiles over the veth pair `rocev0a`/`rocev0b` they
//! name), and `uninstall` must give back `/etc/dat.conf` with its bytes and no installed file.
//! The artifacts are those `cargo test` built (`DPDK_ROCE_ARTIFACTS`), so nothing is built here.

#[path = "dpdk_common/mod.rs"]
mod dpdk_common;
mod scripts_common;

use dpdk_common::{Proc, FANOUT_COLLISION};
use scripts_common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

const TOOLS: [(&str, &str); 4] = [
    ("roce-tool", env!("CARGO_BIN_EXE_roce-tool")),
    ("roce-lat", env!("CARGO_BIN_EXE_roce-lat")),
    ("roce-bw", env!("CARGO_BIN_EXE_roce-bw")),
    ("roce-soak", env!("CARGO_BIN_EXE_roce-soak")),
];

/// The IA names install.sh registers (every shipped profile but nic-example).
const IA_NAMES: [&str; 6] = [
    "dpdk-roce-af_packet-a",
    "dpdk-roce-af_packet-b",
    "dpdk-roce-memif-client",
    "dpdk-roce-memif-server",
    "dpdk-roce-tap-a",
    "dpdk-roce-tap-b",
];

const BEGIN: &str =
    "# BEGIN dpdk-roce (scripts/install.sh; `install.sh uninstall` removes this block)";
const END: &str = "# END dpdk-roce";

/// A temp dir of the test (removed on drop) holding the artifacts to install and, for most
/// tests, the PREFIX, the registry file and the state directory.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let dir =
            std::env::temp_dir().join(format!("dpdk-roce-install-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Dir(dir)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel)
    }

    /// `artifacts/`: the provider library and the tools `cargo test` built, linked (the
    /// script copies their contents).
    fn artifacts(&self) -> PathBuf {
        let dir = self.path("artifacts");
        std::fs::create_dir_all(&dir).unwrap();
        let mut links = vec![("libdpdk_roce.so", dpdk_common::provider_lib())];
        links.extend(TOOLS.iter().map(|(n, p)| (*n, PathBuf::from(p))));
        for (name, target) in links {
            let link = dir.join(name);
            if !link.exists() {
                std::os::unix::fs::symlink(target, link).unwrap();
            }
        }
        dir
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How the script is run: its environment (unset when None, so that the caller's own
/// DAT_CONF / DPDK_ROCE_STATE_DIR never leak in).
struct Install {
    dat_conf: Option<PathBuf>,
    state_dir: Option<PathBuf>,
    artifacts: PathBuf,
}

impl Install {
    /// A registry file and state directory in `dir`.
    fn in_dir(dir: &Dir) -> Install {
        Install {
            dat_conf: Some(dir.path("dat.conf")),
            state_dir: Some(dir.path("state")),
            artifacts: dir.artifacts(),
        }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new("bash");
        cmd.arg(script("install.sh"))
            .args(args)
            .env("DPDK_ROCE_ARTIFACTS", &self.artifacts);
        for (key, value) in [
            ("DAT_CONF", &self.dat_conf),
            ("DPDK_ROCE_STATE_DIR", &self.state_dir),
        ] {
            match value {
                Some(v) => cmd.env(key, v),
                None => cmd.env_remove(key),
            };
        }
        cmd.output().expect("run scripts/install.sh")
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "install.sh {args:?} failed: {}",
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn conf(&self) -> PathBuf {
        self.dat_conf
            .clone()
            .unwrap_or_else(|| "/etc/dat.conf".into())
    }

    fn manifest(&self) -> PathBuf {
        self.state_dir
            .clone()
            .unwrap_or_else(|| "/var/lib/dpdk-roce".into())
            .join("install.manifest")
    }
}

/// The bytes of a file, None when it does not exist.
fn bytes(path: &Path) -> Option<Vec<u8>> {
    match std::fs::read(path) {
        Ok(b) => Some(b),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => panic!("read {}: {e}", path.display()),
    }
}

/// `got` has the bytes of `want` (None: no file); a failure shows both as text.
#[track_caller]
fn assert_same_bytes(got: Option<&[u8]>, want: Option<&[u8]>, what: &str) {
    if got != want {
        let show = |b: Option<&[u8]>| match b {
            Some(b) => format!("{} bytes:\n{}", b.len(), String::from_utf8_lossy(b)),
            None => "no file".into(),
        };
        panic!(
            "{what}: not the bytes expected\n== got {}\n== want {}",
            show(got),
            show(want)
        );
    }
}

/// The files under `dir`, recursively, as paths relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// The files install.sh puts under PREFIX.
fn expected_files() -> Vec<String> {
    let mut want = vec![
        "lib/dpdk-roce/libdpdk_roce.so".to_string(),
        "share/dpdk-roce/README.md".to_string(),
    ];
    for e in std::fs::read_dir(dpdk_common::repo().join("dpdk-config")).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().into_owned();
        if name.ends_with(".toml") {
            want.push(format!("share/dpdk-roce/{name}"));
        }
    }
    want.extend(TOOLS.iter().map(|(n, _)| format!("bin/{n}")));
    want.sort();
    want
}

/// Checks the registry file after an install into `prefix`: exactly one block, holding one
/// entry per registered IA name, each naming the installed library and profile; and the file
/// without the block is `before` (plus the newline install puts after a last line without one).
fn assert_block(conf: &Path, before: Option<&[u8]>, prefix: &Path) {
    let text = String::from_utf8(bytes(conf).expect("registry file after install")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.iter().filter(|l| **l == BEGIN).count(),
        1,
        "one block:\n{text}"
    );
    let b = lines.iter().position(|l| *l == BEGIN).unwrap();
    let e = lines.iter().position(|l| *l == END).expect("end marker");
    assert_eq!(e, lines.len() - 1, "the block is last:\n{text}");
    let mut names = Vec::new();
    for l in &lines[b + 1..e] {
        if l.starts_with('#') {
            continue;
        }
        let f: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(f.len(), 8, "{l}");
        assert_eq!(&f[1..4], ["u2.0", "nonthreadsafe", "default"], "{l}");
        let prefix = prefix.canonicalize().unwrap();
        assert_eq!(
            Path::new(f[4]),
            prefix.join("lib/dpdk-roce/libdpdk_roce.so"),
            "{l}"
        );
        let profile = f[6].trim_matches('"');
        let short = f[0].strip_prefix("dpdk-roce-").expect("IA name prefix");
        assert_eq!(
            Path::new(profile),
            prefix.join(format!("share/dpdk-roce/{short}.toml")),
            "{l}"
        );
        assert!(Path::new(profile).is_file(), "{l}");
        names.push(f[0]);
    }
    names.sort();
    assert_eq!(names, IA_NAMES, "entries:\n{text}");
    // Everything before the block is the file as it was.
    let head = text.split(BEGIN).next().unwrap().as_bytes();
    let mut want = before.unwrap_or_default().to_vec();
    if !want.is_empty() && want.last() != Some(&b'\n') {
        want.push(b'\n');
    }
    assert_same_bytes(
        Some(head),
        Some(&want),
        "the registry file before the block",
    );
}

/// install, install again, status, uninstall, uninstall again, on a registry file of the test
/// in each state the real one may be in: the file it restores must have the bytes it had (or
/// be gone again), and nothing may remain under PREFIX or of the state directory.
#[test]
fn install_twice_then_uninstall_restores_the_registry_file_and_prefix() {
    require_root();
    let debian_like = "# DAT v2.0\nofa-v2-ib0 u2.0 nonthreadsafe default libdaploscm.so.2 dapl.2.0 \"ib0 0\" \"\"\n";
    let cases: [(&str, Option<&[u8]>); 4] = [
        ("missing", None),
        ("empty", Some(b"")),
        ("ending in a newline", Some(debian_like.as_bytes())),
        (
            "without a last newline",
            Some(debian_like.trim_end().as_bytes()),
        ),
    ];
    for (i, (case, before)) in cases.into_iter().enumerate() {
        let dir = Dir::new(&format!("twice{i}"));
        let install = Install::in_dir(&dir);
        let conf = install.conf();
        if let Some(b) = before {
            std::fs::write(&conf, b).unwrap();
        }
        let prefix = dir.path("prefix");
        let p = prefix.to_str().unwrap();

        let out = install.ok(&["install", p]);
        assert!(out.contains("6 entries"), "{case}: {out}");
        assert_eq!(
            files_under(&prefix),
            expected_files(),
            "{case}: installed files"
        );
        assert_block(&conf, before, &prefix);
        let installed = bytes(&conf);
        let manifest = bytes(&install.manifest()).expect("manifest");

        // Again: the same files, the same registry file, the same manifest.
        install.ok(&["install", p]);
        assert_same_bytes(
            bytes(&conf).as_deref(),
            installed.as_deref(),
            &format!("{case}: after a second install"),
        );
        assert_same_bytes(
            bytes(&install.manifest()).as_deref(),
            Some(&manifest),
            &format!("{case}: manifest after a second install"),
        );
        let status = install.ok(&["status"]);
        for name in IA_NAMES {
            assert!(
                status.contains(name),
                "{case}: {name} not in status: {status}"
            );
        }
        assert!(
            !status.contains("missing") && !status.contains("changed"),
            "{case}: {status}"
        );

        let out = install.ok(&["uninstall"]);
        assert_same_bytes(
            bytes(&conf).as_deref(),
            before,
            &format!("{case}: registry file after uninstall ({out})"),
        );
        assert!(!prefix.exists(), "{case}: {:?} left", files_under(&prefix));
        assert!(!dir.path("state").exists(), "{case}: state directory left");
        assert!(
            install.ok(&["uninstall"]).contains("nothing to undo"),
            "{case}"
        );
        assert!(install.ok(&["status"]).contains("not installed"), "{case}");
        assert_same_bytes(
            bytes(&conf).as_deref(),
            before,
            &format!("{case}: after a second uninstall"),
        );
        // No temporary file of the script beside the registry file.
        let mut left = files_under(&dir.0);
        left.retain(|f| !f.starts_with("artifacts/"));
        let want: Vec<String> = before.iter().map(|_| "dat.conf".to_string()).collect();
        assert_eq!(left, want, "{case}: files left in the test directory");
    }
}

/// install refuses, before changing anything, to overwrite a file it did not install, to
/// install into a second PREFIX, and to touch a registry file that has a block it has no
/// record of; a file changed since install is kept by uninstall.
#[test]
fn install_refuses_what_it_does_not_own_and_uninstall_keeps_a_changed_file() {
    require_root();
    let dir = Dir::new("refuse");
    let install = Install::in_dir(&dir);
    let conf = install.conf();
    std::fs::write(&conf, "# mine\n").unwrap();
    let prefix = dir.path("prefix");
    let p = prefix.to_str().unwrap();

    // Somebody else's roce-tool in PREFIX/bin.
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::write(prefix.join("bin/roce-tool"), "#!/bin/sh\n").unwrap();
    let out = install.run(&["install", p]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("bin/roce-tool exists and was not installed by this script"),
        "{}",
        text(&out)
    );
    assert_eq!(std::fs::read(&conf).unwrap(), b"# mine\n");
    assert_eq!(files_under(&prefix), ["bin/roce-tool"]);
    assert!(
        !install.manifest().exists(),
        "a refused install left a manifest"
    );
    std::fs::remove_dir_all(&prefix).unwrap();

    // Bad arguments.
    for args in [
        vec!["install", "relative/prefix"],
        vec!["install", "/tmp/a b"],
    ] {
        let out = install.run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", text(&out));
    }
    for args in [
        vec![],
        vec!["sideways"],
        vec!["uninstall", "x"],
        vec!["install", "/a", "/b"],
    ] {
        let out = install.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
    }
    assert!(!install.manifest().exists() && !prefix.exists());

    // A first install that fails half-way (here its roce-tool cannot write the entries)
    // undoes what it did.
    let broken = dir.path("broken");
    std::fs::create_dir_all(&broken).unwrap();
    for entry in std::fs::read_dir(install.artifacts.clone()).unwrap() {
        let entry = entry.unwrap();
        std::os::unix::fs::symlink(
            std::fs::read_link(entry.path()).unwrap(),
            broken.join(entry.file_name()),
        )
        .unwrap();
    }
    std::fs::remove_file(broken.join("roce-tool")).unwrap();
    std::fs::write(broken.join("roce-tool"), "#!/bin/sh\nexit 3\n").unwrap();
    std::fs::set_permissions(
        broken.join("roce-tool"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let failing = Install {
        artifacts: broken.clone(),
        ..Install::in_dir(&dir)
    };
    let out = failing.run(&["install", p]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("undoing"), "{}", text(&out));
    assert_eq!(std::fs::read(&conf).unwrap(), b"# mine\n");
    assert!(!prefix.exists(), "left: {:?}", files_under(&prefix));
    assert!(!dir.path("state").exists(), "state directory left");
    let mut left = files_under(&dir.0);
    left.retain(|f| !f.starts_with("artifacts/") && !f.starts_with("broken/"));
    assert_eq!(left, ["dat.conf"], "temporary files left");

    install.ok(&["install", p]);
    // A second PREFIX while one is installed.
    let other = dir.path("other");
    let out = install.run(&["install", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("already installed in"),
        "{}",
        text(&out)
    );
    assert!(!other.exists());

    // A block without a manifest (another state directory): not touched.
    let stranger = Install {
        state_dir: Some(dir.path("state2")),
        ..Install::in_dir(&dir)
    };
    let before = std::fs::read(&conf).unwrap();
    let out = stranger.run(&["install", other.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no manifest"), "{}", text(&out));
    assert_eq!(std::fs::read(&conf).unwrap(), before);
    assert!(!other.exists() && !dir.path("state2").exists());

    // An installed profile edited since: uninstall keeps it (and its directory), removes the
    // rest.
    let edited = prefix.join("share/dpdk-roce/tap-a.toml");
    let mut text_ = std::fs::read_to_string(&edited).unwrap();
    text_.push_str("# my edit\n");
    std::fs::write(&edited, &text_).unwrap();
    assert!(install.ok(&["status"]).contains("changed since install"));
    let out = install.run(&["uninstall"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("tap-a.toml changed since install: kept"),
        "{}",
        text(&out)
    );
    assert_eq!(files_under(&prefix), ["share/dpdk-roce/tap-a.toml"]);
    assert_eq!(std::fs::read(&conf).unwrap(), b"# mine\n");
    assert!(!install.manifest().exists());
}

/// A DAT program's server and client, both outputs with their exit status. The server finds
/// its IA through /etc/dat.conf alone (no DAT_OVERRIDE); the client too unless `client_conf`
/// names a file of its own. Retried with fresh processes on the net_af_packet fanout collision
/// (tests/dpdk_common).
fn pair(
    program: &str,
    server_args: &[&str],
    client_args: &[&str],
    client_conf: Option<&Path>,
) -> (String, String) {
    let start = |args: &[&str], conf: Option<&Path>| {
        let mut c = Command::new(program);
        match conf {
            Some(conf) => c.env("DAT_OVERRIDE", conf),
            None => c.env_remove("DAT_OVERRIDE"),
        };
        Proc::spawn(c.env("DPDK_ROCE_LOG", dpdk_common::LISTEN_LOG).args(args))
    };
    // dtest's client finds the server through its TCP 15828; the others connect once the
    // server's listener is up.
    let publishes = client_args.contains(&"127.0.0.1");
    let _port = publishes.then(dpdk_common::lock_dtest_port);
    dpdk_common::retry_fanout(|_| {
        let mut server = start(server_args, None);
        let ready = server.wait_server_ready(publishes, Duration::from_secs(30));
        if let Err(why) = ready {
            let server = server.kill();
            assert!(
                server.contains(FANOUT_COLLISION),
                "{program} server: {why}:\n{server}"
            );
            return None;
        }
        // Neither side may hang the suite: each is killed after its limit.
        let client = start(client_args, client_conf).finish(Duration::from_secs(120));
        let connected =
            client.ends_with("[exit status: 0]\n") && !client.contains(FANOUT_COLLISION);
        // A client that never connected leaves the server waiting for it: stop it.
        let server = server.finish(if connected {
            Duration::from_secs(120)
        } else {
            Duration::ZERO
        });
        (!server.contains(FANOUT_COLLISION) && !client.contains(FANOUT_COLLISION))
            .then_some((server, client))
    })
}

/// The run printed `pass`, exited with 0 (dtest exits 0 also when it failed) and printed no
/// error line.
fn assert_passed(what: &str, out: &str, pass: &str) {
    assert!(out.contains(pass), "{what}: no {pass:?}:\n{out}");
    assert!(
        out.ends_with("[exit status: 0]\n"),
        "{what}: exit status:\n{out}"
    );
    let bad: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("ERR") || l.contains("FAILED") || l.contains("Error"))
        .collect();
    assert!(bad.is_empty(), "{what}: error lines {bad:?}:\n{out}");
}

/// The real installation: /etc/dat.conf, the default state directory, a PREFIX of the test,
/// the installed af_packet profiles on the veth pair they name (rocev0a/rocev0b). Through
/// /etc/dat.conf alone, Debian's dtestsrq serves on `dpdk-roce-af_packet-a` and connects from
/// `dpdk-roce-af_packet-b`; `dtest -P dpdk-roce-af_packet-a` serves too, its client (which
/// opens the IA name its server publishes) on a per-side file that the installed roce-tool
/// writes for the installed af_packet-b profile. Uninstall gives /etc/dat.conf back with its
/// bytes and leaves no installed file.
#[test]
fn installed_provider_serves_dat_programs_through_etc_dat_conf_and_uninstall_restores_it() {
    require_root();
    let etc = Path::new("/etc/dat.conf");
    let state = Path::new("/var/lib/dpdk-roce");
    let before = bytes(etc);
    let state_before = state.exists();
    if let Some(b) = &before {
        assert!(
            !String::from_utf8_lossy(b).contains(BEGIN),
            "/etc/dat.conf already has a dpdk-roce block: `bash scripts/install.sh uninstall` first"
        );
    }
    assert!(
        !state.join("install.manifest").exists(),
        "dpdk-roce is installed on this machine: `bash scripts/install.sh uninstall` first"
    );
    for dev in ["rocev0a", "rocev0b"] {
        assert!(
            !link_exists(dev),
            "interface {dev} exists already: the installed af_packet profiles name it, so this \
             test needs it free (`bash scripts/veth.sh down rocev0` if it is that pair)"
        );
    }

    let dir = Dir::new("etc");
    let install = Install {
        dat_conf: None,
        state_dir: None,
        artifacts: dir.artifacts(),
    };
    let prefix = dir.path("prefix");
    // Whatever happens below: uninstall, the veth pair down, /etc/dat.conf as it was.
    let _guard = Guard(|| {
        install.run(&["uninstall"]);
        run("veth.sh", &["down", "rocev0"], &[]);
        if bytes(etc) != before {
            match &before {
                Some(b) => std::fs::write(etc, b).unwrap(),
                None => std::fs::remove_file(etc).unwrap(),
            }
            eprintln!("the test restored /etc/dat.conf itself");
        }
    });

    install.ok(&["install", prefix.to_str().unwrap()]);
    assert_block(etc, before.as_deref(), &prefix);
    run_ok("veth.sh", &["up", "rocev0"], &[]);

    // dtestsrq: each side opens its own IA name through /etc/dat.conf; the client takes the
    // server's IA address.
    let (srv, cli) = pair(
        "dtestsrq",
        &["-P", "dpdk-roce-af_packet-a"],
        &["-P", "dpdk-roce-af_packet-b", "-h", "10.77.0.1"],
        None,
    );
    assert_passed("dtestsrq server", &srv, "RC SRQ Test Complete");
    assert_passed("dtestsrq client", &cli, "RC SRQ Test Complete");
    assert!(srv.contains("SERVER: on dpdk-roce-af_packet-a"), "{srv}");
    assert!(cli.contains("CLIENT: on dpdk-roce-af_packet-b"), "{cli}");
    // Each opened its installed profile: the server has af_packet-a's address, the client b's.
    assert!(srv.contains("Local Address AF_INET - 10.77.0.1"), "{srv}");
    assert!(cli.contains("Local Address AF_INET - 10.77.0.2"), "{cli}");

    // dtest: the server through /etc/dat.conf; the client's own file names the server's IA
    // with the installed af_packet-b profile (the installed roce-tool finds the installed
    // library by itself).
    let b_conf = dir.path("b.conf");
    let out = Command::new(prefix.join("bin/roce-tool"))
        .args(["dat-conf", "--ia-name", "dpdk-roce-af_packet-a"])
        .arg(prefix.join("share/dpdk-roce/af_packet-b.toml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(&b_conf, &out.stdout).unwrap();
    let (srv, cli) = pair(
        "dtest",
        &["-P", "dpdk-roce-af_packet-a", "-b", "4096"],
        &[
            "-P",
            "dpdk-roce-af_packet-a",
            "-b",
            "4096",
            "-h",
            "127.0.0.1",
        ],
        Some(&b_conf),
    );
    assert_passed("dtest server", &srv, "PASSED");
    assert_passed("dtest client", &cli, "PASSED");
    assert!(srv.contains("Local Address AF_INET - 10.77.0.1"), "{srv}");
    assert!(cli.contains("Local Address AF_INET - 10.77.0.2"), "{cli}");
    std::fs::remove_file(&b_conf).unwrap();

    let out = install.ok(&["uninstall"]);
    assert_same_bytes(
        bytes(etc).as_deref(),
        before.as_deref(),
        &format!("/etc/dat.conf after uninstall ({out})"),
    );
    assert_eq!(
        state.exists(),
        state_before,
        "/var/lib/dpdk-roce after uninstall"
    );
    assert!(
        !prefix.exists(),
        "installed files left: {:?}",
        files_under(&prefix)
    );
}
