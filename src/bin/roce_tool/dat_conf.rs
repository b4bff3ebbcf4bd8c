//! `roce-tool dat-conf [--lib PATH] [--name-prefix P | --ia-name NAME] PROFILE...`: a DAT 2.0
//! registry file (`dat.conf`) for dpdk-roce profiles on standard output, one entry per profile:
//!
//! ```text
//! dpdk-roce-af_packet-a u2.0 nonthreadsafe default /abs/libdpdk_roce.so dapl.2.0 "/abs/af_packet-a.toml" ""
//! ```
//!
//! The IA name is the prefix and the profile's `name`, or `--ia-name` for a single profile (a
//! per-side file for dtest, whose client opens the IA name its server publishes). The library
//! and the profiles are given by their absolute canonical paths: libdat2 `dlopen`s the library
//! as written, and the provider opens the profile from whatever directory the program runs in.
//! Each profile is loaded and validated first, so a broken one is an error naming its file, not
//! an IA that fails to open later. Nothing is printed unless every profile is good. Exit status
//! 0, or 1 with the reason on standard error.
//!
//! Without `--lib`, the library is the `libdpdk_roce.so` beside this program (a cargo build's
//! `target/<profile>/`), else the installed one (`<prefix>/lib/dpdk-roce/` for
//! `<prefix>/bin/roce-tool`, `scripts/install.sh`).

use clap::Args;
use dpdk_roce::config::Profile;
use std::collections::HashSet;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The provider library's file name.
const LIB_NAME: &str = "libdpdk_roce.so";

#[derive(Args, Debug)]
pub struct DatConfArgs {
    /// The provider library (libdpdk_roce.so). Default: the one beside this program, else
    /// <prefix>/lib/dpdk-roce/libdpdk_roce.so for <prefix>/bin/roce-tool.
    #[arg(long, value_name = "PATH")]
    lib: Option<PathBuf>,
    /// Put before each profile's `name` to make its IA name.
    #[arg(long, value_name = "PREFIX", default_value = "dpdk-roce-")]
    name_prefix: String,
    /// The IA name of the one profile given, instead of prefix and profile name (a per-side
    /// file for dtest, whose client opens the IA name its server publishes).
    #[arg(long, value_name = "NAME", conflicts_with = "name_prefix")]
    ia_name: Option<String>,
    /// Profile files (dpdk-config/*.toml); one dat.conf entry each.
    #[arg(required = true, value_name = "PROFILE")]
    profiles: Vec<PathBuf>,
}

pub fn run(args: &DatConfArgs) -> ExitCode {
    match dat_conf(args) {
        Ok(text) => {
            let mut out = std::io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("roce-tool dat-conf: cannot write the output: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Err(e) => {
            eprintln!("roce-tool dat-conf: {e}");
            ExitCode::from(1)
        }
    }
}

/// The whole file, or why it cannot be written.
fn dat_conf(args: &DatConfArgs) -> Result<String, String> {
    check_word("--name-prefix", &args.name_prefix)?;
    if let Some(name) = &args.ia_name {
        check_word("--ia-name", name)?;
        if name.is_empty() || args.profiles.len() != 1 {
            return Err("--ia-name NAME takes exactly one profile".into());
        }
    }
    let lib = match &args.lib {
        Some(lib) => lib.clone(),
        None => default_lib()?,
    };
    let lib = absolute_file("library", &lib)?;
    let mut text = String::from(
        "# DAT 2.0 registry entries for dpdk-roce, written by `roce-tool dat-conf`.\n\
         # <ia_name> u2.0 nonthreadsafe default <provider library> dapl.2.0 \"<profile>\" \"\"\n",
    );
    let mut names = HashSet::new();
    for path in &args.profiles {
        let profile = Profile::load(path).map_err(|e| format!("bad profile: {e}"))?;
        let name = match &args.ia_name {
            Some(name) => name.clone(),
            None => format!("{}{}", args.name_prefix, profile.name),
        };
        if !names.insert(name.clone()) {
            // libdat2 would take the first entry of a name and ignore the others.
            return Err(format!(
                "{}: IA name {name} given twice (two profiles with the name `{}`)",
                path.display(),
                profile.name
            ));
        }
        let path = absolute_file("profile", path)?;
        writeln!(
            text,
            "{name} u2.0 nonthreadsafe default {} dapl.2.0 \"{}\" \"\"",
            lib.display(),
            path.display()
        )
        .expect("writing to a String");
    }
    Ok(text)
}

/// `libdpdk_roce.so` beside the running program, else in `../lib/dpdk-roce/` from it.
fn default_lib() -> Result<PathBuf, String> {
    let exe = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map_err(|e| format!("cannot find this program's path ({e}): give --lib PATH"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let candidates = [
        dir.join(LIB_NAME),
        dir.join("../lib/dpdk-roce").join(LIB_NAME),
    ];
    candidates
        .iter()
        .find(|c| c.is_file())
        .cloned()
        .ok_or_else(|| {
            format!(
                "no provider library at {} or {}: give --lib PATH (`cargo build --release` \
                 builds target/release/{LIB_NAME})",
                candidates[0].display(),
                candidates[1].display()
            )
        })
}

/// The canonical absolute path of the regular file `path`, usable as one dat.conf field.
fn absolute_file(what: &str, path: &Path) -> Result<PathBuf, String> {
    let abs = std::fs::canonicalize(path).map_err(|e| format!("{what} {}: {e}", path.display()))?;
    if !abs.is_file() {
        return Err(format!("{what} {}: not a regular file", path.display()));
    }
    let text = abs
        .to_str()
        .ok_or_else(|| format!("{what} {}: the path is not UTF-8", path.display()))?;
    check_word(what, text)?;
    Ok(abs)
}

/// libdat2 splits a dat.conf line at white space and ends a quoted field at `"`: neither may
/// appear in a name or a path.
fn check_word(what: &str, text: &str) -> Result<(), String> {
    if text.chars().any(|c| c.is_whitespace() || c == '"') {
        return Err(format!(
            "{what} {text:?}: a dat.conf field cannot hold white space or '\"'"
        ));
    }
    Ok(())
}
