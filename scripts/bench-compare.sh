#!/usr/bin/env bash
# The DPDK issue's latency targets as one measurement: RDMA WRITE ping-pong against the raw L2
# echo floor of the same ports (`roce-lat --raw`), and on af_packet against kernel UDP sockets
# (scripts/sockperf-baseline.sh), run in alternation so that the VM's slow and fast spells
# (docs/REFERENCE-dpdk.md: the VM steals time in bursts; a run's p50 can move by 2x) fall on every
# variant alike. Each variant runs ROUNDS times; the script prints every run's p50/p99, the
# median p50 and p99 of each variant, and the WRITE/raw ratio of the medians.
# Each round also runs `roce-lat --with-raw` (WRITE and the raw echo interleaved iteration by
# iteration in one process pair, so both meet the same spell): variants "write+raw" and
# "raw+write", and the median of the per-run ratios, the steadier figure.
#
#   bash scripts/bench-compare.sh [af_packet|memif]        # default af_packet
#   ROUNDS=7 ITERS=20000 SOCKPERF=1 bash scripts/bench-compare.sh af_packet
#
# Environment: ROUNDS (5), ITERS (10000), WARMUP (1000), SIZE (8), OP (write|send|read; the
# RoCE variant), ROCE_LAT (target/release/roce-lat, built if missing), SOCKPERF=1 adds the
# sockperf variant (af_packet only; 5 s per round, SOCKPERF_TIME to change) and a last line
# counting the rounds whose RoCE p50 (and p99) was below sockperf's, VETH_PREFIX (af_packet:
# the veth pair PREFIXa/PREFIXb the profiles are pointed at; default rocev0, the profiles' own).
#
# Changes made, undone on exit (also on failure or Ctrl-C): af_packet: the veth pair
# PREFIXa/PREFIXb (scripts/veth.sh) if it was not there; memif: the server's socket file if it
# was not there; both: 512 hugepages and the hugetlbfs mount (scripts/hugepages.sh) if none were
# reserved. What was there before is left as it was.
set -euo pipefail
cd "$(dirname "$0")/.."

link=${1:-af_packet}
ROUNDS=${ROUNDS:-5} ITERS=${ITERS:-10000} WARMUP=${WARMUP:-1000} SIZE=${SIZE:-8} OP=${OP:-write}
for n in "$ROUNDS" "$ITERS" "$WARMUP" "$SIZE"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "bench-compare: ROUNDS, ITERS, WARMUP, SIZE must be numbers" >&2; exit 2; }
done
case $link in
  af_packet) a=dpdk-config/af_packet-a.toml b=dpdk-config/af_packet-b.toml ip=10.77.0.1 ;;
  memif) a=dpdk-config/memif-server.toml b=dpdk-config/memif-client.toml ip=10.77.3.1 ;;
  *) echo "usage: $0 [af_packet|memif]" >&2; exit 2 ;;
esac
prefix=${VETH_PREFIX:-rocev0}
# veth.sh owns the rule for a name prefix (`status` changes nothing and exits 2 on a bad one).
if ! veth_err=$(bash scripts/veth.sh status "$prefix" 2>&1 >/dev/null); then
  echo "bench-compare: bad VETH_PREFIX: $veth_err" >&2
  exit 2
fi
if [[ ${SOCKPERF:-0} == 1 && $link != af_packet ]]; then
  echo "bench-compare: the sockperf baseline runs on a veth pair: use it with af_packet" >&2
  exit 2
fi

lat=${ROCE_LAT:-target/release/roce-lat}
if [[ ! -x $lat ]]; then
  cargo build --release --bin roce-lat
fi

undo=()
cleanup() {
  for c in "${undo[@]}"; do bash -c "$c" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [[ $link == af_packet && $prefix != rocev0 ]]; then
  # Copies of the profiles pointed at the other pair (the only key that names it).
  dir=$(mktemp -d)
  undo+=("rm -rf '$dir'")
  for side in a b; do
    src=dpdk-config/af_packet-$side.toml
    sed "s/^iface = \"rocev0$side\"/iface = \"$prefix$side\"/" "$src" >"$dir/af_packet-$side.toml"
    grep -q "^iface = \"$prefix$side\"" "$dir/af_packet-$side.toml" ||
      { echo "bench-compare: $src has no 'iface = \"rocev0$side\"' line" >&2; exit 1; }
  done
  a=$dir/af_packet-a.toml b=$dir/af_packet-b.toml
fi
if [[ $link == af_packet ]] && ! ip link show dev "${prefix}a" >/dev/null 2>&1; then
  bash scripts/veth.sh up "$prefix" >/dev/null
  undo+=("bash scripts/veth.sh down '$prefix'")
fi
# The memif server's socket file outlives its process (the port stays open until exit, and EAL
# does not unlink it): remove it afterwards unless it was there before.
if [[ $link == memif ]]; then
  sock=$(sed -n 's/^socket *= *"\(.*\)"/\1/p' "$a" | head -1)
  if [[ -n $sock && ! -e $sock ]]; then
    undo+=("rm -f '$sock'")
  fi
fi
if [[ $(cat /proc/sys/vm/nr_hugepages) -eq 0 ]]; then
  bash scripts/hugepages.sh up 512 >/dev/null
  undo+=("bash scripts/hugepages.sh down")
fi

# One run of a variant: prints "p50 p99" (microseconds) or fails.
run_lat() {
  local out line
  out=$(bash scripts/run-pair.sh "$lat" "$a" "$b" --server-ip "$ip" --size "$SIZE" \
    --iters "$ITERS" --warmup "$WARMUP" "$@" 2>&1) || { echo "$out" >&2; return 1; }
  # perftest row: #bytes #iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
  line=$(echo "$out" | grep -A1 '#bytes' | tail -1)
  awk '{ if (NF < 9) exit 1; print $5, $8 }' <<<"$line" || { echo "$out" >&2; return 1; }
}
# One `--with-raw` run: RDMA and raw echo interleaved in one process pair; prints
# "p50 p99 raw_p50 raw_p99 ratio_p50" from its ratio line.
run_with_raw() {
  local out
  out=$(bash scripts/run-pair.sh "$lat" "$a" "$b" --server-ip "$ip" --size "$SIZE" \
    --iters "$ITERS" --warmup "$WARMUP" --op "$OP" --with-raw 2>&1) || { echo "$out" >&2; return 1; }
  # ratio <Test>/Raw_L2_Echo 8 B: p50 1.62x (1.13 / 0.70 us), p99 1.73x (1.82 / 1.06 us)
  grep '^ratio ' <<<"$out" | tr -d '()x,' |
    awk '{ print $7, $13, $9, $15, $6; found = 1 } END { if (!found) exit 1 }' ||
    { echo "$out" >&2; return 1; }
}
run_sockperf() {
  local out
  out=$(bash scripts/sockperf-baseline.sh 2>&1) || { echo "$out" >&2; return 1; }
  sed -n 's/.*half RTT.*p50 \([0-9.]*\) us, p99 \([0-9.]*\) us.*/\1 \2/p' <<<"$out" | tail -1
}

variants=(raw "$OP")
[[ ${SOCKPERF:-0} == 1 ]] && variants+=(sockperf)
declare -A p50s p99s
ratios=""
below50=0 below99=0
for ((r = 1; r <= ROUNDS; r++)); do
  for v in "${variants[@]}"; do
    case $v in
      raw) res=$(run_lat --raw) ;;
      sockperf) res=$(run_sockperf) ;;
      *) res=$(run_lat --op "$v") ;;
    esac
    read -r p50 p99 <<<"$res"
    [[ -n ${p99:-} ]] || { echo "bench-compare: no result from the $v run" >&2; exit 1; }
    p50s[$v]+="$p50 " p99s[$v]+="$p99 "
    echo "round $r $v: p50 $p50 us, p99 $p99 us"
    [[ $v == "$OP" ]] && op50=$p50 op99=$p99
    if [[ $v == sockperf ]]; then
      below50=$((below50 + $(awk -v a="$op50" -v b="$p50" 'BEGIN { print (a < b) }')))
      below99=$((below99 + $(awk -v a="$op99" -v b="$p99" 'BEGIN { print (a < b) }')))
    fi
  done
  res=$(run_with_raw)
  read -r p50 p99 rp50 rp99 ratio <<<"$res"
  [[ -n ${ratio:-} ]] || { echo "bench-compare: no result from the --with-raw run" >&2; exit 1; }
  p50s[$OP+raw]+="$p50 " p99s[$OP+raw]+="$p99 " p50s[raw+$OP]+="$rp50 " p99s[raw+$OP]+="$rp99 "
  ratios+="$ratio "
  echo "round $r $OP+raw (one run, interleaved): $OP p50 $p50 us, p99 $p99 us; raw p50 $rp50 us, p99 $rp99 us; ratio ${ratio}x"
done
variants+=("$OP+raw" "raw+$OP")

median() { tr ' ' '\n' | grep . | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo
echo "bench-compare: $link, $SIZE B, $ROUNDS rounds of $ITERS iterations (half round trip, us)"
for v in "${variants[@]}"; do
  m50=$(median <<<"${p50s[$v]}") m99=$(median <<<"${p99s[$v]}")
  printf '  %-9s median p50 %6s  median p99 %6s   (p50s: %s)\n' "$v" "$m50" "$m99" "${p50s[$v]}"
done
ratio=$(awk -v w="$(median <<<"${p50s[$OP]}")" -v r="$(median <<<"${p50s[raw]}")" \
  'BEGIN { printf "%.2f", w / r }')
echo "  ratio ${OP}/raw of the median p50s: ${ratio}x (separate runs)"
echo "  ratio ${OP}/raw of the p50s in one run (--with-raw; $OP+raw / raw+$OP above): median $(median <<<"$ratios")x (each round: $ratios)"
if [[ ${SOCKPERF:-0} == 1 ]]; then
  echo "  ${OP} below sockperf in the same round: p50 in $below50 of $ROUNDS rounds, p99 in $below99 of $ROUNDS"
fi
