#!/usr/bin/env bash
# The main job. At this stage: two endpoints in memory over a simulated wire (connect through
# the IB CM, then SEND / RDMA WRITE / RDMA READ / atomics), with a capture checked by tshark.
# The DPDK issue replaces this with two processes over a DPDK virtual device pair.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo build --release --bin roce-tool
out=${1:-target/simulate-demo.pcap}
./target/release/roce-tool simulate --workload mixed --count 200 --size 4096 --loss 0.05 --pcap "$out"
./target/release/roce-tool decode "$out" | tail -n 5
