#!/usr/bin/env bash
# A Linux bridge joining the tap interfaces of two DPDK net_tap processes
# (dpdk-config/tap-a.toml / tap-b.toml). The net_tap PMD creates its tap when DPDK starts and
# deletes it when the process exits, so the taps can only be enslaved once both processes run.
#
# Changes made:
#   up                 creates the bridge (default rocebr0, or $TAP_BRIDGE) with STP off and
#                      forwarding delay 0, IPv6 disabled and no IPv4 address, and sets it up.
#   attach [TAP...]    waits up to $TAP_WAIT seconds (default 10) for each tap (default rocetap0a
#                      rocetap0b), disables IPv6 on it, enslaves it to the bridge and sets it up.
#                      On failure, releases the taps this invocation enslaved.
#   down               deletes the bridge (enslaved taps are released, not deleted).
#   status             changes nothing; shows the bridge and its ports.
# Idempotent: `up` on an existing bridge re-applies its settings, `attach` of an enslaved tap does
# nothing new, `down` without the bridge does nothing. A failing `up` deletes the bridge if this
# invocation created it.
set -euo pipefail

usage() {
  echo "usage: $0 up | attach [tap...] | down | status" >&2
  exit 2
}

BRIDGE=${TAP_BRIDGE:-rocebr0}
WAIT=${TAP_WAIT:-10}
cmd=${1:-}
[[ -n $cmd ]] || usage
shift

need_root() {
  if [[ $EUID -ne 0 ]]; then
    echo "tap-bridge: '$cmd' changes network interfaces: run as root" >&2
    exit 1
  fi
}

exists() { ip link show dev "$1" >/dev/null 2>&1; }
is_bridge() { [[ -d /sys/class/net/$1/bridge ]]; }
master_of() {
  local m=/sys/class/net/$1/master
  if [[ -L $m ]]; then basename "$(readlink "$m")"; fi
}
disable_ipv6() {
  local knob=/proc/sys/net/ipv6/conf/$1/disable_ipv6
  if [[ -w $knob ]]; then echo 1 >"$knob"; fi
}

up() {
  need_root
  local created=0
  cleanup() {
    local rc=$?
    if ((rc != 0 && created)); then
      echo "tap-bridge: up failed, deleting $BRIDGE" >&2
      ip link del dev "$BRIDGE" 2>/dev/null || true
    fi
    exit "$rc"
  }
  trap cleanup EXIT
  if exists "$BRIDGE"; then
    if ! is_bridge "$BRIDGE"; then
      echo "tap-bridge: $BRIDGE exists and is not a bridge; not touching it" >&2
      exit 1
    fi
  else
    ip link add name "$BRIDGE" type bridge
    created=1
  fi
  ip link set dev "$BRIDGE" type bridge stp_state 0 forward_delay 0
  disable_ipv6 "$BRIDGE"
  ip link set dev "$BRIDGE" up
  trap - EXIT
  echo "tap-bridge: up: $BRIDGE (attach the taps once the DPDK processes run)"
}

attach() {
  need_root
  local taps=("$@")
  ((${#taps[@]})) || taps=(rocetap0a rocetap0b)
  if ! exists "$BRIDGE" || ! is_bridge "$BRIDGE"; then
    echo "tap-bridge: no bridge $BRIDGE: run '$0 up' first" >&2
    exit 1
  fi
  local enslaved=()
  cleanup() {
    local rc=$?
    if ((rc != 0)); then
      local t
      for t in "${enslaved[@]}"; do
        ip link set dev "$t" nomaster 2>/dev/null || true
      done
    fi
    exit "$rc"
  }
  trap cleanup EXIT
  local tap deadline
  for tap in "${taps[@]}"; do
    deadline=$((SECONDS + WAIT))
    until exists "$tap"; do
      if ((SECONDS >= deadline)); then
        echo "tap-bridge: $tap did not appear within ${WAIT}s (is its DPDK process running?)" >&2
        exit 1
      fi
      sleep 0.1
    done
    if [[ $(master_of "$tap") == "$BRIDGE" ]]; then
      continue
    fi
    disable_ipv6 "$tap"
    ip link set dev "$tap" master "$BRIDGE"
    enslaved+=("$tap")
    ip link set dev "$tap" up
  done
  trap - EXIT
  echo "tap-bridge: attach: ${taps[*]} on $BRIDGE"
}

down() {
  need_root
  if ! exists "$BRIDGE"; then
    echo "tap-bridge: down: $BRIDGE not present"
    return 0
  fi
  if ! is_bridge "$BRIDGE"; then
    echo "tap-bridge: $BRIDGE is not a bridge; not deleting it" >&2
    exit 1
  fi
  ip link del dev "$BRIDGE"
  echo "tap-bridge: down: deleted $BRIDGE"
}

status() {
  if exists "$BRIDGE"; then
    ip -br link show dev "$BRIDGE"
    ip -br link show master "$BRIDGE"
  else
    echo "tap-bridge: $BRIDGE not present"
  fi
}

case $cmd in
  up) up ;;
  attach) attach "$@" ;;
  down) down ;;
  status) status ;;
  *) usage ;;
esac
