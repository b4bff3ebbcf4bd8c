//! The DPDK test programs parse their command lines with clap: `--help` prints the usage and
//! exits 0, a misspelt flag or a missing argument is refused (exit 2) before DPDK starts.

mod test_programs;
use test_programs::test_program;

use std::process::Command;

const BINS: [&str; 5] = [
    "dpdk-port-check",
    "roce-dpdk-pair",
    "roce-engine-pair",
    "roce-dat-pair",
    "roce-dpdk-bad-input",
];

#[test]
fn help_works_and_misspelt_flags_and_missing_arguments_are_refused() {
    for name in BINS {
        let bin = test_program(name);
        let help = Command::new(&bin).arg("--help").output().unwrap();
        assert!(help.status.success(), "{name} --help");
        assert!(
            String::from_utf8_lossy(&help.stdout).contains("Usage:"),
            "{name}"
        );
        for args in [&["--qpss", "4"][..], &[][..]] {
            let out = Command::new(&bin).args(args).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{name} {args:?}: {err}");
            assert!(
                (err.contains("error:") || err.contains("Usage:")) && !err.contains("EAL"),
                "{name} {args:?}: {err}"
            );
        }
    }
    // A subcommand's own flag is checked too.
    let out = Command::new(test_program(BINS[0]))
        .args(["af-packet", "a", "b", "--mem", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
