#!/usr/bin/env bash
# Instructions per message of a one-way RDMA WRITE stream, stage by stage, both sides, no I/O
# (examples/stream_cost.rs under callgrind). Deterministic: compare builds with it.
#
#     bash scripts/stream-cost.sh [messages (200000)] [size (64)]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-200000}
size=${2:-64}
cargo build --release --example stream_cost >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" \
    target/release/examples/stream_cost "$n" "$size" >&2 2>/dev/null
callgrind_annotate --inclusive=yes "$out" 2>/dev/null |
    awk -v n="$n" '/stream_cost::stage_/ {
        gsub(",", "", $1); name = $0; sub(/.*stream_cost::stage_/, "", name); sub(/[ (].*/, "", name)
        if (!(name in seen)) { seen[name] = 1; total += $1; printf "%-22s %8.1f instructions per message\n", name, $1 / n }
    } END { printf "%-22s %8.1f\n", "total", total / n }'
