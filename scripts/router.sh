#!/usr/bin/env bash
# A Linux router in a network namespace between two links, for routed RoCEv2: two dpdk-roce
# ports in different subnets reach each other through it (profiles with `[roce] gateway`).
# The kernel forwards, decrements the TTL and answers ARP for its own addresses; nothing in
# the current namespace is touched but the two interfaces it moves.
#
# Changes made:
#   up NAME IF_X CIDR_X IF_Y CIDR_Y
#                   creates namespace NAME, moves interfaces IF_X and IF_Y into it (e.g. one end
#                   of each of two veth pairs made by scripts/veth.sh), gives them CIDR_X and
#                   CIDR_Y (the router's address on each subnet: the gateway the ports name),
#                   turns IPv4 forwarding on and reverse-path filtering off, IPv6 off.
#   down NAME       deletes the namespace (the moved interfaces, and veth peers, go with it).
#   status NAME     changes nothing; shows the namespace's addresses and forwarding counters.
# Idempotent: `up` on an existing namespace re-applies addresses and settings; `down` without it
# does nothing. A failing `up` deletes the namespace if this invocation created it.
# Example (two veth pairs rtx*/rty*, the ports on rtxa and rtyb):
#   bash scripts/veth.sh up rtx; bash scripts/veth.sh up rty
#   bash scripts/router.sh up rtr rtxb 10.77.72.254/24 rtya 10.77.73.254/24
set -euo pipefail

usage() {
  echo "usage: $0 up NAME IF_X CIDR_X IF_Y CIDR_Y | down NAME | status NAME" >&2
  exit 2
}

cmd=${1:-}
name=${2:-}
[[ -n $cmd && -n $name ]] || usage
if [[ ! $name =~ ^[A-Za-z0-9_.-]{1,40}$ ]]; then
  echo "router: bad namespace name '$name'" >&2
  exit 2
fi
if [[ $EUID -ne 0 ]]; then
  echo "router: '$cmd' changes network namespaces: run as root" >&2
  exit 1
fi

exists() { ip netns list | awk '{print $1}' | grep -qx "$name"; }
in_ns() { ip netns exec "$name" "$@"; }

case $cmd in
  up)
    (($# == 6)) || usage
    x=$3 cx=$4 y=$5 cy=$6
    created=0
    if ! exists; then
      ip netns add "$name"
      created=1
    fi
    cleanup() { ((created)) && ip netns del "$name" 2>/dev/null; }
    trap 'cleanup' ERR
    for i in "$x" "$y"; do
      if ! in_ns ip link show dev "$i" >/dev/null 2>&1; then
        ip link set dev "$i" netns "$name"
      fi
    done
    in_ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    in_ns sysctl -qw net.ipv4.ip_forward=1
    in_ns sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0
    in_ns ip link set lo up
    for pair in "$x $cx" "$y $cy"; do
      set -- $pair
      in_ns sysctl -qw "net.ipv4.conf.$1.rp_filter=0"
      in_ns ip addr flush dev "$1"
      in_ns ip addr add "$2" dev "$1"
      in_ns ip link set dev "$1" up
    done
    trap - ERR
    echo "router: $name forwards between $x ($cx) and $y ($cy)"
    ;;
  down)
    if exists; then
      ip netns del "$name"
    fi
    ;;
  status)
    if ! exists; then
      echo "router: $name: no such namespace"
      exit 1
    fi
    in_ns ip -brief addr
    in_ns sysctl net.ipv4.ip_forward
    in_ns cat /proc/net/snmp | awk '/^Ip:/ {print}'
    ;;
  *) usage ;;
esac
