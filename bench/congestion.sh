#!/usr/bin/env bash
# Eight flows into one bottleneck, with congestion control off, DCQCN and the delay mode: the
# incast run of bench/README.md ("Congestion"). Root only; sets everything up itself and takes
# it down again, also on failure.
#
#   bench/congestion.sh [--rate 300mbit] [--queue 64kb] [--mark-at 8kb] [--drain 100]
#                       [--duration 10] [--qps 8] [--depth 16] [--size 65536]
#                       [--modes "off dcqcn delay"] [--extra "KEY = VALUE"]...
#                       [--framecnt 4096] [--split]
#
# The link: two veth pairs joined in the kernel (scripts/veth.sh, scripts/veth-join.sh),
#   client [cgxa] <-> [cgxb] ==mirred==> [cgya] -(CE marker, tbf RATE)-> [cgyb] server
# with scripts/bottleneck.sh's tbf (queue QUEUE) and eBPF CE marker (MARK_AT, DRAIN) on cgya.
# The marker's 8 KiB is about 220 us of queue at 300 Mbit/s, a switch's ECN threshold set for
# a latency budget of this order (with 16 KiB DCQCN's queue alone took most of it).
# The client runs `roce-bw --op write -s SIZE -D DURATION -q QPS -t DEPTH --probe` to the
# server (the probe: a 64-byte ping-pong QP beside the QPS flows, timed alone and beside
# them); both profiles are dpdk-config/af_packet-{a,b}.toml on these interfaces with
# `[congestion] mode = MODE` and the --extra lines (e.g. --extra "ai_mbps = 1"), which apply
# to every mode; --framecnt sizes both net_af_packet rings (the PMD's framecnt, 512 frames
# when not given; 4096 here: the kernel's softirq work for the link takes the client's core for
# up to 5 ms at a time, and a 512-frame ring then drops 16 % of what DCQCN sends back). --split captures the probe's frames (64-byte SENDs: 122-byte frames) at the four
# veth ends with dumpcap and prints where its round trips beside the stream go
# (bench/probe-path.py).
#
# Per mode: the client's BW row; `goodput: N Mbit/s = S of RATE` (the row's average MB/s,
# perftest's MiB, as bits); `retransmitted: N of M needed = S` (the client's packets sent
# again, and the packets its completed messages needed at the path MTU); the fairness line
# (Jain's index over the QPs' messages); the probe's round trips, alone and beside the flows;
# the probe QP's own recovery and pacing on each side (`probe QP, client:` / `server:`); the
# congestion line (marks, CNPs, cuts, each QP's rate at the end); the bottleneck's counters
# (frames seen, ECN-capable, marked CE, dropped by the tbf); each core's time over the run
# (user, system, softirq: the kernel's path through the veth pairs, mirred, the marker and the
# tbf runs as softirq on the cores the two processes poll on).
set -euo pipefail
cd "$(dirname "$0")/.."

rate=300mbit queue=64kb mark_at=8kb drain=100 duration=10 qps=8 depth=16 size=65536
modes="off dcqcn delay"
framecnt=4096
split=""
extra=()
while (($#)); do
  case $1 in
    --split)
      split=1
      shift
      continue
      ;;
    --rate) rate=$2 ;;
    --queue) queue=$2 ;;
    --mark-at) mark_at=$2 ;;
    --drain) drain=$2 ;;
    --duration) duration=$2 ;;
    --qps) qps=$2 ;;
    --depth) depth=$2 ;;
    --size) size=$2 ;;
    --modes) modes=$2 ;;
    --extra) extra+=("$2") ;;
    --framecnt) framecnt=$2 ;;
    *)
      sed -n '2,34p' "$0" >&2
      exit 2
      ;;
  esac
  shift 2
done

bin=target/release/roce-bw
[[ -x $bin ]] || cargo build --release --bin roce-bw
X=cgx Y=cgy
dir=$(mktemp -d)
captures=()
cleanup() {
  ((${#captures[@]} == 0)) || kill "${captures[@]}" 2>/dev/null || true
  bash scripts/bottleneck.sh down $X $Y >/dev/null 2>&1 || true
  bash scripts/veth-join.sh down $X $Y >/dev/null 2>&1 || true
  bash scripts/veth.sh down $X >/dev/null 2>&1 || true
  bash scripts/veth.sh down $Y >/dev/null 2>&1 || true
  [[ -n ${added_hugepages:-} ]] && bash scripts/hugepages.sh down >/dev/null 2>&1
  rm -rf "$dir"
}
trap cleanup EXIT
if [[ ! -e ${DPDK_ROCE_RUN_DIR:-/run/dpdk-roce}/hugepages.state ]]; then
  bash scripts/hugepages.sh up 512 >/dev/null
  added_hugepages=1
fi
bash scripts/veth.sh up $X >/dev/null
bash scripts/veth.sh up $Y >/dev/null
bash scripts/veth-join.sh up $X $Y >/dev/null
bash scripts/bottleneck.sh up $X $Y "$rate" --queue "$queue" --mark-at "$mark_at" --drain "$drain" >/dev/null

# profile SIDE IFACE MODE: af_packet-SIDE.toml on IFACE with [congestion] mode = MODE.
profile() {
  local f=$dir/$1-$3.toml
  sed -e "s/^iface = .*/iface = \"$2\"/" "dpdk-config/af_packet-$1.toml" >"$f"
  if [[ -n $framecnt ]]; then
    sed -i "s/^\[port\]/[port]\nvdev_extra = [\"framecnt=$framecnt\"]/" "$f"
  fi
  {
    echo "[congestion]"
    echo "mode = \"$3\""
    printf '%s\n' "${extra[@]}"
  } >>"$f"
  echo "$f"
}

printf 'bottleneck %s, queue %s, marks above %s; %s QPs x %s x %s B WRITEs for %s s\n' \
  "$rate" "$queue" "$mark_at" "$qps" "$depth" "$size" "$duration"
for mode in $modes; do
  server=$(profile a ${Y}b "$mode")
  client=$(profile b ${X}a "$mode")
  bash scripts/bottleneck.sh up $X $Y "$rate" --queue "$queue" --mark-at "$mark_at" --drain "$drain" >/dev/null
  out=$dir/$mode.out
  rx_before=$(cat /sys/class/net/${X}a/statistics/rx_packets)
  captures=()
  if [[ -n $split ]]; then
    for end in ${X}a ${X}b ${Y}a ${Y}b; do
      dumpcap -q -i "$end" -f "len == 122" -w "$dir/$mode-$end.pcapng" 2>/dev/null &
      captures+=($!)
    done
  fi
  cores_before=$(grep -E '^cpu[0-9]+ ' /proc/stat)
  RUN_PAIR_TIMEOUT=$((duration + 120)) bash scripts/run-pair.sh "$bin" "$server" "$client" \
    --server-ip 10.77.0.1 --op write -s "$size" -D "$duration" -q "$qps" -t "$depth" --probe \
    >"$out" 2>&1 || {
    echo "== $mode: roce-bw failed =="
    cat "$out"
    exit 1
  }
  cores_after=$(grep -E '^cpu[0-9]+ ' /proc/stat)
  if ((${#captures[@]})); then
    kill "${captures[@]}" 2>/dev/null || true
    wait "${captures[@]}" 2>/dev/null || true
  fi
  status=$(bash scripts/bottleneck.sh status $X $Y)
  client_part=$(sed -n '/^== client ==/,$p' "$out")
  echo "== congestion mode: $mode =="
  row=$(echo "$client_part" | grep -E "^ *$size " | head -1)
  echo "$row"
  mtu=$(echo "$client_part" | sed -n 's/^ Mtu *: \([0-9]*\)\[B\].*/\1/p' | head -1)
  per_qp=$(echo "$client_part" | sed -n 's/^fairness: messages per QP: \([0-9,]*\) .*/\1/p')
  rtx=$(echo "$client_part" | sed -n 's/^summary: [0-9]* QP(s):.* retransmits: \([0-9]*\) .*/\1/p')
  echo "$row" | awk -v r="$rate" '{
    bits = r; sub(/[a-zA-Z]+$/, "", bits); unit = tolower(r); sub(/^[0-9.]+/, "", unit)
    m = (unit == "gbit") ? bits * 1000 : (unit == "kbit") ? bits / 1000 : bits
    g = $4 * 1.048576 * 8
    printf "goodput: %.1f Mbit/s = %.3f of %s\n", g, g / m, r }'
  awk -v list="$per_qp" -v size="$size" -v mtu="${mtu:-1024}" -v rtx="${rtx:-0}" 'BEGIN {
    n = split(list, a, ","); msgs = 0; for (i = 1; i <= n; i++) msgs += a[i]
    need = msgs * int((size + mtu - 1) / mtu)
    printf "retransmitted: %d of %d needed = %.4f\n", rtx, need, need ? rtx / need : 0 }'
  echo "$client_part" | grep -E "^fairness:|^probe:|^summary: [0-9]+ QP|^summary: congestion" || true
  # The probe QP's own recovery and pacing, each side (its echo is the server's to send).
  echo "$client_part" | sed -n 's/^probe QP:/probe QP, client:/p'
  sed -n '/^== server ==/,/^== client ==/s/^probe QP:/probe QP, server:/p' "$out"
  echo "$status"
  # Frames the kernel delivered to the client's interface that its socket ring had no room for
  # (net_af_packet in DPDK 22.11 does not count them): the interface's RX count against the
  # PMD's.
  kernel_rx=$(($(cat /sys/class/net/${X}a/statistics/rx_packets) - rx_before))
  pmd_rx=$(echo "$client_part" | sed -n 's/^summary: port: rx_packets: \([0-9]*\) .*/\1/p')
  echo "client receive ring: ${kernel_rx} frames in, ${pmd_rx:-?} taken by the PMD"
  # /proc/stat: user nice system idle iowait irq softirq steal (ticks).
  paste <(echo "$cores_before") <(echo "$cores_after") | awk '{
    t = 0; for (i = 2; i <= 9; i++) { d[i] = $(i + 11) - $i; t += d[i] }
    if (t > 0) printf "%s: user %.0f%%, system %.0f%%, softirq %.0f%%, idle %.0f%%, stolen %.0f%%\n",
      $1, 100 * (d[2] + d[3]) / t, 100 * d[4] / t, 100 * d[8] / t, 100 * (d[5] + d[6]) / t, 100 * d[9] / t }'
  if [[ -n $split ]]; then
    window=$(echo "$client_part" | sed -n 's/^probe: the stream ran from \([0-9]*\) to \([0-9]*\) .*/\1 \2/p')
    for end in ${X}a ${X}b ${Y}a ${Y}b; do
      tshark -r "$dir/$mode-$end.pcapng" -T fields -e frame.time_epoch -e ip.src \
        -e infiniband.bth.psn 2>/dev/null >"$dir/$mode-$end.txt"
    done
    # shellcheck disable=SC2086 # the window is two numbers
    python3 bench/probe-path.py $window "$dir/$mode-${X}a.txt" "$dir/$mode-${X}b.txt" \
      "$dir/$mode-${Y}b.txt" "$dir/$mode-${Y}a.txt" || true
  fi
done
