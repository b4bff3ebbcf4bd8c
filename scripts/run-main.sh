#!/usr/bin/env bash
# The main job: two dpdk-roce processes over DPDK net_af_packet on a veth pair connect through
# the IB CM and measure RDMA WRITE ping-pong latency (perftest table + HdrHistogram report),
# after measuring the raw L2 echo floor of the same ports and loop.
#
# Changes made (undone on exit, also on failure): 512 hugepages reserved and hugetlbfs mounted
# if missing (scripts/hugepages.sh), the veth pair rocev0a/rocev0b (scripts/veth.sh).
# Options via environment: SIZE (default 8), ITERS (10000), WARMUP (1000), OP (write|send|read).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cargo build --release --bin roce-lat --bin roce-tool

export DPDK_ROCE_RUN_DIR=${DPDK_ROCE_RUN_DIR:-/run/dpdk-roce/main-job}
cleanup() {
  rm -rf -- "${hgrm:-}"
  bash scripts/veth.sh down >/dev/null 2>&1 || true
  bash scripts/hugepages.sh down >/dev/null 2>&1 || true
}
trap cleanup EXIT
bash scripts/hugepages.sh up 512
bash scripts/veth.sh up

SIZE=${SIZE:-8} ITERS=${ITERS:-10000} WARMUP=${WARMUP:-1000} OP=${OP:-write}
args=(--server-ip 10.77.0.1 --size "$SIZE" --iters "$ITERS" --warmup "$WARMUP")
lat=./target/release/roce-lat
a=dpdk-config/af_packet-a.toml b=dpdk-config/af_packet-b.toml

hgrm=$(mktemp -d)
client_part() { sed -n '/^== client ==/,/^-- client stderr/p' | grep -v '^== client ==\|^-- client stderr'; }

echo "== raw L2 echo floor (same ports, same loop, no RoCE processing) =="
bash scripts/run-pair.sh "$lat" "$a" "$b" "${args[@]}" --raw \
  --hgrm-dir "$hgrm" | client_part
echo
echo "== RDMA ${OP^^} over RoCEv2 (two processes, net_af_packet, inline progress) =="
bash scripts/run-pair.sh "$lat" "$a" "$b" "${args[@]}" --op "$OP" -H \
  | client_part
