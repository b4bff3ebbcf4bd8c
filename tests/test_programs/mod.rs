//! The programs the tests run besides the installed tools: examples of this package
//! (Cargo.toml `[[example]]`: test-programs/ and examples/), so `cargo install` never installs
//! them. Plain `cargo test` builds them into target/<profile>/examples/; `cargo test --test X`
//! alone does not, hence the freshness check.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// The example program `name` of this build. Panics when it is missing or older than its
/// sources or the provider library, with the command that builds it.
pub fn test_program(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let bin = profile_dir.join("examples").join(name);
    let build = "cargo build --examples (with --release for a release test run)";
    assert!(
        bin.is_file(),
        "test program missing: {}; build it with {build}",
        bin.display()
    );
    let built = modified(&bin);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut inputs = Vec::new();
    for dir in ["test-programs", "examples"] {
        let file = repo.join(dir).join(format!("{name}.rs"));
        if file.is_file() {
            inputs.push(file);
        }
        let sub = repo.join(dir).join(name);
        if sub.is_dir() {
            inputs.extend(std::fs::read_dir(&sub).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(!inputs.is_empty(), "no source of test program {name}");
    // The provider library the program links (the newest of its builds).
    inputs.extend(
        std::fs::read_dir(profile_dir.join("deps"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| {
                let f = p.file_name().unwrap().to_string_lossy();
                f.starts_with("libdpdk_roce-") && f.ends_with(".rlib")
            })
            .max_by_key(|p| modified(p)),
    );
    for input in inputs {
        assert!(
            built >= modified(&input),
            "{} is older than {}; rebuild it with {build}",
            bin.display(),
            input.display()
        );
    }
    bin
}

fn modified(p: &Path) -> SystemTime {
    std::fs::metadata(p)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
