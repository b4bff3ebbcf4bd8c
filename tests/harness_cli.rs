//! The DPDK test programs parse their command lines with clap: `--help` prints the usage and
//! exits 0, a misspelt flag or a missing argument is refused (exit 2) before DPDK starts.

use std::process::Command;

const BINS: [&str; 5] = [
    env!("CARGO_BIN_EXE_dpdk-port-check"),
    env!("CARGO_BIN_EXE_roce-dpdk-pair"),
    env!("CARGO_BIN_EXE_roce-engine-pair"),
    env!("CARGO_BIN_EXE_roce-dat-pair"),
    env!("CARGO_BIN_EXE_roce-dpdk-bad-input"),
];

#[test]
fn help_works_and_misspelt_flags_and_missing_arguments_are_refused() {
    for bin in BINS {
        let help = Command::new(bin).arg("--help").output().unwrap();
        assert!(help.status.success(), "{bin} --help");
        assert!(
            String::from_utf8_lossy(&help.stdout).contains("Usage:"),
            "{bin}"
        );
        for args in [&["--qpss", "4"][..], &[][..]] {
            let out = Command::new(bin).args(args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{bin} {args:?}: {err}");
            assert!(
                (err.contains("error:") || err.contains("Usage:")) && !err.contains("EAL"),
                "{bin} {args:?}: {err}"
            );
        }
    }
    // A subcommand's own flag is checked too.
    let out = Command::new(BINS[0])
        .args(["af-packet", "a", "b", "--mem", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
