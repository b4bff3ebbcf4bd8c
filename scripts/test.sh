#!/usr/bin/env bash
# The whole test suite (the README's test command; .ci/run calls exactly this).
# Installs what it needs (packages, hugepages), then: format check, clippy with warnings as
# errors, every test.
# Must run as root: the DPDK tests create veth pairs and taps, the script tests hugepages.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

# Every DPDK test runs EAL on hugepages (profiles with `hugepages = true`, `--huge-unlink`): a
# fresh machine has none. Reserve them (scripts/hugepages.sh, idempotent) unless an earlier
# `hugepages.sh up` already holds them, and give back what this run added when it ends, also on
# failure.
if [[ ! -e ${DPDK_ROCE_RUN_DIR:-/run/dpdk-roce}/hugepages.state ]]; then
  bash scripts/hugepages.sh up 512
  trap 'bash scripts/hugepages.sh down >/dev/null 2>&1 || true' EXIT
fi

# Each step's wall time, and at the end each test binary's (slowest first), also on failure.
log=$(mktemp)
steps=()
step() {
  local start=$SECONDS
  "$@"
  steps+=("$(printf '%5ds  %s' $((SECONDS - start)) "$*")")
}
times() {
  echo
  echo "== time per step =="
  printf '%s\n' "${steps[@]}"
  echo "== time per test binary (cargo test's own figure, slowest first) =="
  awk '/^ *Running /{bin=($2=="unittests") ? $2" "$3 : $2} /^test result:/{t=$NF; sub(/s$/,"",t); printf "%8.1fs  %s\n", t, bin}' "$log" | sort -rn
  echo "total: $((SECONDS))s"
  rm -f "$log"
}

# A build from nothing (a fresh clone, CI) gains nothing from incremental caches and takes
# about 10 % longer writing them (test build: 146 s against 160-165 s, alternated); a tree that
# has them keeps them (switching the setting rebuilds everything once).
if [[ -z ${CARGO_INCREMENTAL:-} && ! -d ${CARGO_TARGET_DIR:-target}/debug/incremental ]]; then
  export CARGO_INCREMENTAL=0
fi

step cargo fmt --all -- --check
# clippy with -D warnings also denies every rustc warning, so the build is warning-free.
step cargo clippy --workspace --all-targets -- -D warnings
# `cargo test` with no target flags builds the examples as programs too
# (target/debug/examples/NAME, which tests/example_*.rs run; `--all-targets` would build them
# as test harnesses instead); the libraries have no doctests (`doctest = false`).
step cargo test --workspace --no-run
set +e
start=$SECONDS
cargo test --workspace 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
steps+=("$(printf '%5ds  %s' $((SECONDS - start)) "cargo test --workspace")")
set -e
times
exit "$status"
