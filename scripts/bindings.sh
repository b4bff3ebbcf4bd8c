#!/usr/bin/env bash
# Regenerates the committed bindgen output of dpdk-sys and dat-sys (their src/bindings.rs) from
# the system headers: run it after changing an allow-list in a build.rs, csrc/wrapper.h or the
# system DPDK / libdapl-dev. Needs libclang (apt-get install libclang-dev). Every ordinary build
# checks the committed bindings against the headers (sizes, alignments, field offsets,
# constants: crate sys-layout), so a stale file fails the build rather than the program.
#
#   bash scripts/bindings.sh          rewrite both files, show what changed
#   bash scripts/bindings.sh --check  fail when regenerating would change them
set -euo pipefail
cd "$(dirname "$0")/.."
files=(dpdk-sys/src/bindings.rs dat-sys/src/bindings.rs)
# Its own target directory: the feature changes the crates' fingerprints.
CARGO_TARGET_DIR=target/bindgen cargo build -q -p dpdk-sys -p dat-sys \
  --features dpdk-sys/regenerate,dat-sys/regenerate
if [[ ${1:-} == --check ]]; then
  git diff --exit-code --stat -- "${files[@]}"
  echo "bindings up to date"
else
  git diff --stat -- "${files[@]}"
fi
