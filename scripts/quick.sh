#!/usr/bin/env bash
# The edit loop's check (under 3 minutes on an incremental build): format, clippy, the unit
# tests of every crate, and one DPDK pair (every operation verified over two net_af_packet
# ports, tests/dpdk_pair.rs). The whole suite is scripts/test.sh. Run as root (veth pair,
# hugepages); it reserves the hugepages the DPDK pair needs and gives back what it added.
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -e ${DPDK_ROCE_RUN_DIR:-/run/dpdk-roce}/hugepages.state ]]; then
  bash scripts/hugepages.sh up 512 >/dev/null
  trap 'bash scripts/hugepages.sh down >/dev/null 2>&1 || true' EXIT
fi

start=$SECONDS
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo test --workspace --lib --bins
cargo build --examples
cargo test --test dpdk_pair
echo "quick: ok in $((SECONDS - start))s"
