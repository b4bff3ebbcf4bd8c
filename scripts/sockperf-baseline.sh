#!/usr/bin/env bash
# The kernel-socket baseline the af_packet figures are compared with (bench/README.md): UDP
# ping-pong between two network namespaces over a veth pair, with sockperf (Debian package
# `sockperf`, installed by scripts/setup.sh) busy-polling non-blocking sockets on both sides.
#
#   bash scripts/sockperf-baseline.sh            # 14-byte messages, 5 s
#   SOCKPERF_SIZE=64 SOCKPERF_TIME=10 bash scripts/sockperf-baseline.sh
#
# What it runs:
#   server (namespace A, CPU 0):  sockperf sr -i 10.77.4.1 -p 11111 --nonblocked
#   client (namespace B, CPU 1):  sockperf pp -i 10.77.4.1 -p 11111 -m SIZE -t TIME --nonblocked
# SIZE defaults to 14, the smallest message sockperf sends (its own header; `-m 8` is refused):
# a 56-byte frame, against 82 bytes for an 8-byte RDMA WRITE. It prints sockperf's output, then
#   sockperf-baseline: size 14 B, half RTT (sockperf latency = RTT/2): p50 X us, p99 Y us, ...
# sockperf's "latency" is half the round trip (its --full-rtt option shows the full round
# trip instead), the same scale as the af_packet half-RTT rows.
#
# Changes made, all undone on exit (also on failure or Ctrl-C):
#   - network namespaces skp<pid>-a / skp<pid>-b and the veth pair skp<pid>a / skp<pid>b
#     between them (10.77.4.1/24, 10.77.4.2/24, IPv6 off, MTU 1500, scatter-gather as
#     scripts/veth.sh sets it for the DPDK pair: off unless VETH_SG=on; a UDP datagram of this
#     size is one linear buffer, so it makes no difference here, but both pairs are alike);
#   - sysctls net.core.busy_read and net.core.busy_poll set to $BUSY_POLL_US (default 50) and
#     restored. They are global (not per namespace) and only act on sockets whose packets came
#     through NAPI; a veth without GRO or XDP has no NAPI, so on this setup the busy polling is
#     sockperf's own (--nonblocked: the receive loop spins on a non-blocking socket).
set -euo pipefail

SIZE=${SOCKPERF_SIZE:-14}
TIME=${SOCKPERF_TIME:-5}
BUSY=${BUSY_POLL_US:-50}
SG=${VETH_SG:-off}
PORT=11111
TAG=skp$$
NS_A=$TAG-a
NS_B=$TAG-b
IF_A=${TAG}a
IF_B=${TAG}b
IP_A=10.77.4.1
IP_B=10.77.4.2

if [[ $EUID -ne 0 ]]; then
  echo "sockperf-baseline: creates namespaces and sets sysctls: run as root" >&2
  exit 1
fi
command -v sockperf >/dev/null || {
  echo "sockperf-baseline: sockperf missing (scripts/setup.sh installs it)" >&2
  exit 1
}
if [[ ! $SIZE =~ ^[0-9]+$ || ! $TIME =~ ^[0-9]+$ || ! $BUSY =~ ^[0-9]+$ ]]; then
  echo "sockperf-baseline: SOCKPERF_SIZE, SOCKPERF_TIME and BUSY_POLL_US are integers" >&2
  exit 2
fi
if [[ $SG != on && $SG != off ]]; then
  echo "sockperf-baseline: VETH_SG '$SG' is neither on nor off" >&2
  exit 2
fi

# One run at a time: the busy-poll sysctls are global, saved and restored by each run.
exec 9>/run/lock/dpdk-roce-sockperf-baseline.lock
flock 9

old_busy_read=$(sysctl -n net.core.busy_read)
old_busy_poll=$(sysctl -n net.core.busy_poll)
server_pid=
out=$(mktemp)

cleanup() {
  local rc=$?
  if [[ -n $server_pid ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  ip netns del "$NS_A" 2>/dev/null || true
  ip netns del "$NS_B" 2>/dev/null || true
  ip link del "$IF_A" 2>/dev/null || true
  sysctl -q -w net.core.busy_read="$old_busy_read" net.core.busy_poll="$old_busy_poll" || true
  rm -f "$out"
  exit "$rc"
}
trap cleanup EXIT INT TERM

echo "sockperf-baseline: namespaces $NS_A $NS_B, veth $IF_A/$IF_B, scatter-gather $SG"
ip netns add "$NS_A"
ip netns add "$NS_B"
ip link add "$IF_A" type veth peer name "$IF_B"
ip link set "$IF_A" netns "$NS_A"
ip link set "$IF_B" netns "$NS_B"
for x in "$NS_A $IF_A $IP_A" "$NS_B $IF_B $IP_B"; do
  read -r ns ifc ip <<<"$x"
  ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$ifc" mtu 1500
  if ! ip netns exec "$ns" ethtool -K "$ifc" sg "$SG" >/dev/null 2>&1; then
    echo "sockperf-baseline: warning: cannot set scatter-gather $SG on $ifc (ethtool missing?)" >&2
  fi
  ip -n "$ns" addr add "$ip/24" dev "$ifc"
  ip -n "$ns" link set "$ifc" up
done
sysctl -q -w net.core.busy_read="$BUSY" net.core.busy_poll="$BUSY"

# One CPU each when there are two, like the two busy-polling DPDK processes.
pin_a=() pin_b=()
if (($(nproc) >= 2)) && command -v taskset >/dev/null; then
  pin_a=(taskset -c 0)
  pin_b=(taskset -c 1)
fi

ip netns exec "$NS_A" "${pin_a[@]}" sockperf sr -i "$IP_A" -p "$PORT" --nonblocked \
  >/dev/null 2>&1 &
server_pid=$!
for _ in $(seq 100); do
  if ip netns exec "$NS_A" ss -Hluna "sport = :$PORT" | grep -q .; then break; fi
  sleep 0.05
done

ip netns exec "$NS_B" "${pin_b[@]}" sockperf pp -i "$IP_A" -p "$PORT" -m "$SIZE" -t "$TIME" \
  --nonblocked 2>&1 | tee "$out"

pct() { awk -v p="$1" '$0 ~ "percentile " p " =" { print $NF }' "$out"; }
p50=$(pct 50.000)
p99=$(pct 99.000)
p999=$(pct 99.900)
avg=$(sed -n 's/.*avg-lat[a-z]*= *\([0-9.]*\).*/\1/p' "$out" | tail -1)
if [[ -z $p50 || -z $p99 ]]; then
  echo "sockperf-baseline: no percentiles in sockperf's output" >&2
  exit 1
fi
echo "sockperf-baseline: size $SIZE B, half RTT (sockperf latency = RTT/2): p50 $p50 us, p99 $p99 us, p99.9 $p999 us, avg $avg us"
