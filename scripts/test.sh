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
  awk '/^ *Running (unittests|tests\/)/{bin=($2=="unittests") ? $2" "$3 : $2} /^test result:/{t=$NF; sub(/s$/,"",t); printf "%8.1fs  %s\n", t, bin}' "$log" | sort -rn
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
# Two lanes. interop_rxe waits on a QEMU guest most of its time (about 45 % of the two cores
# busy, 140 s): it runs beside the other binaries, which run one after another as cargo runs
# them. Its guests, taps and subnets are its own; the host's TCP 15828, where dtest servers
# publish, is taken under a lock (tests/dpdk_common `lock_dtest_port`). The other lane is
# `cargo test --workspace`'s own set without interop_rxe: every library's and test-harnessed
# program's unit tests, every integration test.
others=(--lib)
while read -r bin; do others+=(--bin "$bin"); done < <(
  cargo metadata --no-deps --format-version 1 | python3 -c '
import json, sys
for p in json.load(sys.stdin)["packages"]:
    for t in p["targets"]:
        if "bin" in t["kind"] and t.get("test", True):
            print(t["name"])')
for t in tests/*.rs; do
  name=$(basename "$t" .rs)
  [[ $name == interop_rxe ]] || others+=(--test "$name")
done
interop_log=$(mktemp)
set +e
start=$SECONDS
cargo test --workspace --test interop_rxe >"$interop_log" 2>&1 &
interop=$!
cargo test --workspace "${others[@]}" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
wait "$interop"
interop_status=$?
tee -a "$log" <"$interop_log"
rm -f "$interop_log"
((status)) || status=$interop_status
steps+=("$(printf '%5ds  %s' $((SECONDS - start)) "cargo test --workspace (interop_rxe beside the others)")")
set -e
times
exit "$status"
