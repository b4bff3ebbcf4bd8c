#!/usr/bin/env bash
# Two network namespaces joined by a veth pair, for kernel-socket baselines (sockperf, iperf)
# that the DPDK numbers are compared with. Nothing in the current namespace is touched.
#
# Changes made:
#   up [PREFIX]     creates namespaces PREFIX-a and PREFIX-b (default rocens-a / rocens-b), a veth
#                   pair veth-a (in PREFIX-a, 10.77.1.1/24) <-> veth-b (in PREFIX-b, 10.77.1.2/24),
#                   MTU $NETNS_MTU (default 1500), IPv6 disabled, loopback and veth up.
#   down [PREFIX]   deletes both namespaces (their veth ends go with them).
#   status [PREFIX] changes nothing; shows the namespaces and their addresses.
# Idempotent: `up` on complete namespaces re-applies addresses and link state; `down` without them
# does nothing. A failing `up` deletes the namespaces this invocation created.
# Run a baseline with e.g.:
#   ip netns exec rocens-a sockperf server -i 10.77.1.1 &
#   ip netns exec rocens-b sockperf ping-pong -i 10.77.1.1 --nonblocked
set -euo pipefail

usage() {
  echo "usage: $0 up [prefix] | down [prefix] | status [prefix]" >&2
  exit 2
}

cmd=${1:-}
prefix=${2:-rocens}
[[ -n $cmd ]] || usage
if [[ ! $prefix =~ ^[A-Za-z0-9_.-]{1,40}$ ]]; then
  echo "netns: bad prefix '$prefix'" >&2
  exit 2
fi
NS_A=$prefix-a
NS_B=$prefix-b
ADDR_A=10.77.1.1/24
ADDR_B=10.77.1.2/24

need_root() {
  if [[ $EUID -ne 0 ]]; then
    echo "netns: '$cmd' changes network namespaces: run as root" >&2
    exit 1
  fi
}

ns_exists() { [[ -e /run/netns/$1 ]]; }
in_ns() {
  local ns=$1
  shift
  ip -n "$ns" "$@"
}

up() {
  local mtu=${NETNS_MTU:-1500}
  if [[ ! $mtu =~ ^[0-9]+$ ]] || ((mtu < 256 || mtu > 9000)); then
    echo "netns: NETNS_MTU '$mtu' is not in 256..=9000" >&2
    exit 2
  fi
  need_root
  local made=()
  cleanup() {
    local rc=$?
    if ((rc != 0)); then
      echo "netns: up failed, deleting the namespaces it created" >&2
      local ns
      for ns in "${made[@]}"; do
        ip netns del "$ns" 2>/dev/null || true
      done
    fi
    exit "$rc"
  }
  trap cleanup EXIT
  local ns
  for ns in "$NS_A" "$NS_B"; do
    if ! ns_exists "$ns"; then
      ip netns add "$ns"
      made+=("$ns")
    fi
  done
  if ! in_ns "$NS_A" link show dev veth-a >/dev/null 2>&1; then
    if in_ns "$NS_B" link show dev veth-b >/dev/null 2>&1; then
      echo "netns: veth-b exists in $NS_B without veth-a in $NS_A; run '$0 down' first" >&2
      exit 1
    fi
    ip link add name veth-a netns "$NS_A" type veth peer name veth-b netns "$NS_B"
  fi
  local pair
  for pair in "$NS_A veth-a $ADDR_A" "$NS_B veth-b $ADDR_B"; do
    read -r ns dev addr <<<"$pair"
    ip netns exec "$ns" sh -c "echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6"
    in_ns "$ns" link set dev lo up
    in_ns "$ns" link set dev "$dev" mtu "$mtu"
    in_ns "$ns" addr replace "$addr" dev "$dev"
    in_ns "$ns" link set dev "$dev" up
  done
  trap - EXIT
  echo "netns: up: $NS_A (veth-a $ADDR_A) <-> $NS_B (veth-b $ADDR_B), MTU $mtu"
}

down() {
  need_root
  local ns any=0
  for ns in "$NS_A" "$NS_B"; do
    if ns_exists "$ns"; then
      ip netns del "$ns"
      any=1
    fi
  done
  if ((any)); then
    echo "netns: down: deleted $NS_A / $NS_B"
  else
    echo "netns: down: $NS_A / $NS_B not present"
  fi
}

status() {
  local ns
  for ns in "$NS_A" "$NS_B"; do
    if ns_exists "$ns"; then
      echo "netns: $ns:"
      in_ns "$ns" -br addr show
    else
      echo "netns: $ns not present"
    fi
  done
}

case $cmd in
  up) up ;;
  down) down ;;
  status) status ;;
  *) usage ;;
esac
