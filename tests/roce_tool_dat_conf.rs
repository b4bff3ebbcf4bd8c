//! `roce-tool dat-conf`: the dat.conf it writes for the shipped profiles (one entry per profile,
//! every field where libdat2 reads it, absolute paths that exist), the IA name prefix, the
//! library found beside the program or in an installed layout, the errors (a broken profile,
//! a missing library, two profiles of one name) with exit status 1 and nothing on stdout; and
//! the shipped dpdk-config/dat.conf, which has no entry to edit.

use dpdk_roce::config::Profile;
use std::path::{Path, PathBuf};
use std::process::Command;

const TOOL: &str = env!("CARGO_BIN_EXE_roce-tool");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The provider library `cargo test` built beside the test binaries (deps/ is current).
fn provider_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe
        .parent()
        .expect("target/<profile>/deps")
        .join("libdpdk_roce.so");
    assert!(lib.is_file(), "provider library missing: {}", lib.display());
    lib
}

/// The shipped profiles, as relative paths from the repository (dpdk-config/*.toml).
fn shipped_profiles() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo().join("dpdk-config"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".toml"))
        .map(|n| format!("dpdk-config/{n}"))
        .collect();
    names.sort();
    assert!(names.len() >= 6, "shipped profiles missing: {names:?}");
    names
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "status {:?}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `tool dat-conf args...` in the repository.
fn dat_conf(tool: &Path, args: &[&str]) -> Run {
    let out = Command::new(tool)
        .arg("dat-conf")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run roce-tool");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// One dat.conf entry split into libdat2's fields.
#[derive(Debug)]
struct Entry {
    ia_name: String,
    lib: PathBuf,
    profile: PathBuf,
}

/// The entries of a dat.conf text (comment lines skipped); every line must have exactly the
/// eight fields of a DAT 2.0 entry, with the quoted profile and empty platform parameters.
fn entries(text: &str) -> Vec<Entry> {
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 8, "not eight fields: {l}");
            assert_eq!(
                &f[1..4],
                ["u2.0", "nonthreadsafe", "default"],
                "version, thread safety, default: {l}"
            );
            assert_eq!(f[5], "dapl.2.0", "provider version: {l}");
            assert_eq!(f[7], "\"\"", "platform parameters: {l}");
            let profile = f[6]
                .strip_prefix('"')
                .and_then(|p| p.strip_suffix('"'))
                .unwrap_or_else(|| panic!("profile not quoted: {l}"));
            Entry {
                ia_name: f[0].into(),
                lib: f[4].into(),
                profile: profile.into(),
            }
        })
        .collect()
}

#[test]
fn dat_conf_has_one_entry_per_profile_with_absolute_existing_paths() {
    let profiles = shipped_profiles();
    let lib = provider_lib();
    let mut args = vec!["--lib", lib.to_str().unwrap()];
    args.extend(profiles.iter().map(String::as_str));
    let run = dat_conf(Path::new(TOOL), &args);
    assert_eq!(run.code, Some(0), "{run}");
    assert!(run.stderr.is_empty(), "{run}");
    let got = entries(&run.stdout);
    assert_eq!(got.len(), profiles.len(), "one entry per profile:\n{run}");
    for (entry, rel) in got.iter().zip(&profiles) {
        assert!(entry.lib.is_absolute() && entry.lib.is_file(), "{entry:?}");
        assert_eq!(entry.lib, lib.canonicalize().unwrap(), "{entry:?}");
        assert!(entry.profile.is_absolute(), "{entry:?}");
        assert_eq!(
            entry.profile,
            repo().join(rel).canonicalize().unwrap(),
            "{entry:?}"
        );
        let p = Profile::load(&entry.profile).unwrap();
        assert_eq!(entry.ia_name, format!("dpdk-roce-{}", p.name), "{entry:?}");
    }
    let names: Vec<&str> = got.iter().map(|e| e.ia_name.as_str()).collect();
    for want in [
        "dpdk-roce-af_packet-a",
        "dpdk-roce-af_packet-b",
        "dpdk-roce-tap-a",
        "dpdk-roce-tap-b",
        "dpdk-roce-memif-server",
        "dpdk-roce-memif-client",
    ] {
        assert!(names.contains(&want), "no {want} in {names:?}");
    }
}

#[test]
fn dat_conf_names_the_ias_with_the_prefix_or_the_name_given() {
    let lib = provider_lib();
    for (prefix, want) in [("dr-", "dr-af_packet-a"), ("", "af_packet-a")] {
        let run = dat_conf(
            Path::new(TOOL),
            &[
                "--lib",
                lib.to_str().unwrap(),
                "--name-prefix",
                prefix,
                "dpdk-config/af_packet-a.toml",
            ],
        );
        assert_eq!(run.code, Some(0), "prefix {prefix:?}: {run}");
        let got = entries(&run.stdout);
        assert_eq!(got.len(), 1, "prefix {prefix:?}: {run}");
        assert_eq!(got[0].ia_name, want, "prefix {prefix:?}");
    }
    // --ia-name: one profile under a name of its own (a per-side file for dtest).
    let lib = lib.to_str().unwrap();
    let run = dat_conf(
        Path::new(TOOL),
        &[
            "--lib",
            lib,
            "--ia-name",
            "dr",
            "dpdk-config/af_packet-b.toml",
        ],
    );
    assert_eq!(run.code, Some(0), "{run}");
    let got = entries(&run.stdout);
    assert_eq!(got.len(), 1, "{run}");
    assert_eq!(got[0].ia_name, "dr");
    assert!(got[0].profile.ends_with("dpdk-config/af_packet-b.toml"));
    let two = [
        "--lib",
        lib,
        "--ia-name",
        "dr",
        "dpdk-config/af_packet-a.toml",
        "dpdk-config/af_packet-b.toml",
    ];
    let run = dat_conf(Path::new(TOOL), &two);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(
        run.stdout.is_empty() && run.stderr.contains("exactly one profile"),
        "{run}"
    );
    let both = [
        "--lib",
        lib,
        "--ia-name",
        "dr",
        "--name-prefix",
        "x-",
        "dpdk-config/af_packet-a.toml",
    ];
    let run = dat_conf(Path::new(TOOL), &both);
    assert_eq!(run.code, Some(2), "--ia-name with --name-prefix: {run}");
}

/// A temp dir removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("dpdk-roce-datconf-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Hard-links (or copies) `from` to `to`.
fn place(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).unwrap();
    }
}

/// Without --lib: the library beside the program (target/release/ of a build), else the
/// installed one (<prefix>/lib/dpdk-roce/ for <prefix>/bin/roce-tool), else an error that asks
/// for --lib.
#[test]
fn dat_conf_finds_the_library_beside_itself_or_installed() {
    let tmp = TempDir::new("lib");
    let tool = tmp.0.join("bin/roce-tool");
    place(Path::new(TOOL), &tool);
    let profile = ["dpdk-config/tap-a.toml"];

    let run = dat_conf(&tool, &profile);
    assert_eq!(run.code, Some(1), "{run}");
    assert!(run.stdout.is_empty(), "{run}");
    assert!(
        run.stderr.contains("--lib") && run.stderr.contains("libdpdk_roce.so"),
        "{run}"
    );

    let installed = tmp.0.join("lib/dpdk-roce/libdpdk_roce.so");
    place(&provider_lib(), &installed);
    let run = dat_conf(&tool, &profile);
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(
        entries(&run.stdout)[0].lib,
        installed.canonicalize().unwrap()
    );

    let beside = tmp.0.join("bin/libdpdk_roce.so");
    place(&provider_lib(), &beside);
    let run = dat_conf(&tool, &profile);
    assert_eq!(run.code, Some(0), "{run}");
    assert_eq!(entries(&run.stdout)[0].lib, beside.canonicalize().unwrap());
}

/// Every refusal: exit status 1, nothing on stdout (no half-written dat.conf), the reason on
/// stderr naming what to fix.
#[test]
fn dat_conf_refuses_a_broken_profile_a_missing_library_and_a_name_twice() {
    let tmp = TempDir::new("bad");
    let broken = tmp.0.join("broken.toml");
    let text = std::fs::read_to_string(repo().join("dpdk-config/af_packet-a.toml"))
        .unwrap()
        .replace("mtu = 1500", "mtu = 9001");
    std::fs::write(&broken, text).unwrap();
    let not_toml = tmp.0.join("not-toml.toml");
    std::fs::write(&not_toml, "name = \n[eal\n").unwrap();
    let missing = tmp.0.join("missing.toml");
    let twin = tmp.0.join("twin.toml");
    std::fs::copy(repo().join("dpdk-config/tap-a.toml"), &twin).unwrap();
    let spaced = tmp.0.join("with space");
    std::fs::create_dir_all(&spaced).unwrap();
    let spaced_profile = spaced.join("tap-b.toml");
    std::fs::copy(repo().join("dpdk-config/tap-b.toml"), &spaced_profile).unwrap();

    let lib = provider_lib();
    let lib = lib.to_str().unwrap();
    let path = |p: &Path| p.to_str().unwrap().to_string();
    let cases: Vec<(&str, Vec<String>, Vec<String>)> = vec![
        (
            "a value out of range",
            vec!["--lib".into(), lib.into(), path(&broken)],
            vec![path(&broken), "port.mtu".into()],
        ),
        (
            "not TOML, after a good profile",
            vec![
                "--lib".into(),
                lib.into(),
                "dpdk-config/tap-a.toml".into(),
                path(&not_toml),
            ],
            vec![path(&not_toml)],
        ),
        (
            "a missing profile",
            vec!["--lib".into(), lib.into(), path(&missing)],
            vec![path(&missing)],
        ),
        (
            "a missing library",
            vec![
                "--lib".into(),
                path(&tmp.0.join("nolib.so")),
                "dpdk-config/tap-a.toml".into(),
            ],
            vec!["library".into(), path(&tmp.0.join("nolib.so"))],
        ),
        (
            "a directory as library",
            vec![
                "--lib".into(),
                path(&tmp.0),
                "dpdk-config/tap-a.toml".into(),
            ],
            vec!["not a regular file".into()],
        ),
        (
            "one IA name twice",
            vec![
                "--lib".into(),
                lib.into(),
                "dpdk-config/tap-a.toml".into(),
                path(&twin),
            ],
            vec!["dpdk-roce-tap-a".into(), "twice".into()],
        ),
        (
            "a path with a space",
            vec!["--lib".into(), lib.into(), path(&spaced_profile)],
            vec!["white space".into()],
        ),
        (
            "a prefix with a space",
            vec![
                "--lib".into(),
                lib.into(),
                "--name-prefix".into(),
                "a b".into(),
                "dpdk-config/tap-a.toml".into(),
            ],
            vec!["--name-prefix".into(), "white space".into()],
        ),
    ];
    for (case, args, said) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = dat_conf(Path::new(TOOL), &args);
        assert_eq!(run.code, Some(1), "{case}: {run}");
        assert!(
            run.stdout.is_empty(),
            "{case}: output despite the error: {run}"
        );
        assert!(
            run.stderr.starts_with("roce-tool dat-conf: "),
            "{case}: {run}"
        );
        for s in said {
            assert!(run.stderr.contains(&s), "{case}: {s:?} not said: {run}");
        }
    }
    // No profile at all is a usage error (clap's status 2).
    let run = dat_conf(Path::new(TOOL), &["--lib", lib]);
    assert_eq!(run.code, Some(2), "{run}");
}

/// The shipped dpdk-config/dat.conf has no entry and no placeholder path to edit: it says how
/// to make the entries (roce-tool dat-conf, scripts/install.sh), and the commands it shows are
/// those that exist.
#[test]
fn shipped_dat_conf_has_no_entry_to_edit() {
    let text = std::fs::read_to_string(repo().join("dpdk-config/dat.conf")).unwrap();
    for l in text.lines() {
        assert!(
            l.is_empty() || l.starts_with('#'),
            "an entry in the shipped dat.conf: {l}"
        );
    }
    assert!(!text.contains("/opt/"), "a placeholder path:\n{text}");
    for command in [
        "target/release/roce-tool dat-conf dpdk-config/*.toml",
        "bash scripts/install.sh install",
    ] {
        assert!(text.contains(command), "{command:?} not shown:\n{text}");
    }
    assert!(repo().join("scripts/install.sh").is_file());
}
