//! Where an engine writes its capture (issue 3 "Capture": every frame the port sends and
//! receives, to a pcap file, set by `engine.capture` or `DPDK_ROCE_CAPTURE`, like ibdump).
//!
//! Each shard writes its own file from its own poll loop (no lock, no shared writer on the
//! data path). With one shard the file is the configured path itself; with N > 1 shards shard
//! `i` writes `<stem>.shard<i>.<ext>` next to it (`/tmp/a.pcap` -> `/tmp/a.shard0.pcap`,
//! `/tmp/a.shard1.pcap`; a path without extension just gets `.shard<i>`). `mergecap -w all.pcap
//! /tmp/a.shard*.pcap` merges them in time order: timestamps are wall-clock time.
//!
//! A shard's file holds the frames its `Host` received (from its queue or forwarded by another
//! shard) and the frames it sent (on its queue or relayed through shard 0), so every frame of
//! the port is in exactly one file — except ARP replies, which every shard learns from and so
//! appear in every file. Files are complete once the engine is dropped (the IA closed).

use std::path::{Path, PathBuf};

/// The capture file of shard `shard` among `shards` for the configured path `base`.
pub fn capture_path(base: &Path, shard: usize, shards: usize) -> PathBuf {
    if shards <= 1 {
        return base.to_path_buf();
    }
    let stem = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match base.extension() {
        Some(ext) => format!("{stem}.shard{shard}.{}", ext.to_string_lossy()),
        None => format!("{stem}.shard{shard}"),
    };
    base.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_shard_uses_the_path_and_several_get_a_suffix_each() {
        let p = Path::new("/tmp/x/cap.pcap");
        assert_eq!(capture_path(p, 0, 1), PathBuf::from("/tmp/x/cap.pcap"));
        assert_eq!(
            capture_path(p, 0, 2),
            PathBuf::from("/tmp/x/cap.shard0.pcap")
        );
        assert_eq!(
            capture_path(p, 1, 2),
            PathBuf::from("/tmp/x/cap.shard1.pcap")
        );
        assert_eq!(
            capture_path(Path::new("dump"), 3, 4),
            PathBuf::from("dump.shard3")
        );
        assert_eq!(
            capture_path(Path::new("a.b.pcap"), 1, 2),
            PathBuf::from("a.b.shard1.pcap")
        );
    }

    #[test]
    fn the_engine_takes_the_profile_capture_and_the_environment_overrides_it() {
        use crate::config::{Profile, ENV_CAPTURE};
        use crate::engine::runtime::EngineConfig;
        let text = r#"
            [eal]
            lcores = [0]
            [port]
            pmd = "af_packet"
            iface = "veth0"
            [roce]
            address = "10.0.0.1/24"
            [engine]
            poll_cores = [0]
            capture = "/tmp/from-profile.pcap"
        "#;
        let mut p = Profile::from_str(text).unwrap();
        assert_eq!(
            EngineConfig::from_profile(&p).capture,
            Some(PathBuf::from("/tmp/from-profile.pcap"))
        );
        p.apply_overrides(|v| (v == ENV_CAPTURE).then(|| "/tmp/env.pcap".into()))
            .unwrap();
        assert_eq!(
            EngineConfig::from_profile(&p).capture,
            Some(PathBuf::from("/tmp/env.pcap"))
        );
        p.apply_overrides(|v| (v == ENV_CAPTURE).then(|| "".into()))
            .unwrap();
        assert_eq!(EngineConfig::from_profile(&p).capture, None);
    }
}
