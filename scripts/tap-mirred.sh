#!/usr/bin/env bash
# Joins the taps of two DPDK net_tap processes (dpdk-config/tap-a.toml / tap-b.toml) with tc
# mirred redirects, like DPDK's testpmd recipes for two taps. A Linux bridge cannot do this
# job: net_tap gives the DPDK port the same MAC as its kernel tap, so a bridge takes frames for
# that MAC as its own and never forwards them.
#
# Changes made:
#   attach [TAP_A TAP_B]  waits up to $TAP_WAIT seconds (default 10) for both taps (default
#                         rocetap0a rocetap0b; net_tap creates them when DPDK starts), sets them
#                         up, disables IPv6 on them, and adds an ingress qdisc on each whose
#                         filter redirects every frame to the other tap's egress.
#   down [TAP_A TAP_B]    removes those ingress qdiscs (the taps vanish with their processes).
#   status [TAP_A TAP_B]  changes nothing; shows the qdiscs and filters.
# Idempotent: attach replaces existing ingress qdiscs; down on missing taps does nothing.
set -euo pipefail

cmd=${1:-}
a=${2:-rocetap0a}
b=${3:-rocetap0b}
wait_s=${TAP_WAIT:-10}

case "$cmd" in
  attach)
    for ((i = 0; i < wait_s * 10; i++)); do
      ip link show "$a" >/dev/null 2>&1 && ip link show "$b" >/dev/null 2>&1 && break
      sleep 0.1
    done
    for t in "$a" "$b"; do
      ip link show "$t" >/dev/null 2>&1 || { echo "tap-mirred: $t did not appear within ${wait_s}s" >&2; exit 1; }
    done
    trap 'tc qdisc del dev "$a" ingress 2>/dev/null || true; tc qdisc del dev "$b" ingress 2>/dev/null || true' ERR
    for pair in "$a $b" "$b $a"; do
      set -- $pair
      sysctl -qw "net.ipv6.conf.$1.disable_ipv6=1" 2>/dev/null || true
      ip link set "$1" up
      tc qdisc del dev "$1" ingress 2>/dev/null || true
      tc qdisc add dev "$1" ingress
      tc filter add dev "$1" parent ffff: protocol all u32 match u32 0 0 \
        action mirred egress redirect dev "$2"
    done
    echo "tap-mirred: attach: $a <-> $b"
    ;;
  down)
    for t in "$a" "$b"; do
      tc qdisc del dev "$t" ingress 2>/dev/null || true
    done
    echo "tap-mirred: down: $a $b"
    ;;
  status)
    for t in "$a" "$b"; do
      echo "== $t"
      tc filter show dev "$t" parent ffff: 2>/dev/null || echo "(no such tap)"
    done
    ;;
  *)
    echo "usage: $0 attach|down|status [TAP_A TAP_B]" >&2
    exit 2
    ;;
esac
