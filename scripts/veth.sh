#!/usr/bin/env bash
# A veth pair for two DPDK net_af_packet processes (dpdk-config/af_packet-a.toml / -b.toml).
#
# Changes made:
#   up [PREFIX] [MTU]  creates the veth pair PREFIXa <-> PREFIXb (default rocev0a/rocev0b) in the
#                      current network namespace, sets the MTU (default 1500, or $VETH_MTU),
#                      disables IPv6 on both ends (no router solicitations, MLD or DAD frames
#                      mixed into the captures), and sets both up. The kernel gets no IPv4
#                      address: the DPDK processes own 10.77.0.1 and 10.77.0.2. To give the kernel
#                      ends addresses anyway (e.g. to test against a kernel peer), set
#                      KERNEL_ADDR_A / KERNEL_ADDR_B (CIDR) in the environment.
#                      On each end without a kernel address, a clsact ingress filter (a
#                      one-instruction classic BPF program returning TC_ACT_SHOT) ends every
#                      frame's trip through the kernel once the packet sockets (the af_packet
#                      PMD, tcpdump) have their copy: otherwise each RoCEv2 frame also goes up
#                      the kernel's IPv4 layer, to be dropped there as not addressed to it
#                      (IpInAddrErrors), inside the sending process's sendto(), costing latency
#                      that a NIC owned by DPDK never pays. VETH_KERNEL_RX=1 leaves it out.
#                      On both ends, scatter-gather off (ethtool -K END sg off): net_af_packet
#                      sends from its PACKET_MMAP TX ring, and the kernel hands all of a frame
#                      but its Ethernet header over as zero-copy page fragments of the ring;
#                      a veth forwarding such a frame copies them into freshly allocated pages
#                      (skb_copy_ubufs, a page allocation per frame). Without scatter-gather the
#                      kernel pulls the fragments into the frame's own buffer when it is sent
#                      (__pskb_pull_tail), which is cheaper: the 8-byte af_packet ping-pong's
#                      half round trip went down by about 0.15-0.25 us (bench/README.md,
#                      "What moved the figures"). VETH_SG=on leaves scatter-gather on.
#   down [PREFIX]      deletes the pair (deleting one end deletes both).
#   status [PREFIX]    changes nothing; shows the pair.
# Idempotent: `up` on an existing pair only re-applies MTU, IPv6, filter and link state; `down` on a
# missing pair does nothing. A failing `up` deletes the pair if this invocation created it.
set -euo pipefail

usage() {
  echo "usage: $0 up [name-prefix] [mtu] | down [name-prefix] | status [name-prefix]" >&2
  exit 2
}

cmd=${1:-}
prefix=${2:-rocev0}
[[ -n $cmd ]] || usage
# Interface names have at most 15 characters; the prefix gets one more.
if ((${#prefix} < 1 || ${#prefix} > 14)) || [[ ! $prefix =~ ^[A-Za-z0-9_.-]+$ ]]; then
  echo "veth: bad name prefix '$prefix' (1..14 characters of A-Z a-z 0-9 _ . -)" >&2
  exit 2
fi
a=${prefix}a
b=${prefix}b

need_root() {
  if [[ $EUID -ne 0 ]]; then
    echo "veth: '$cmd' changes network interfaces: run as root" >&2
    exit 1
  fi
}

exists() { ip link show dev "$1" >/dev/null 2>&1; }

# The name of the peer of veth $1, or nothing if $1 is not a veth.
peer_of() {
  local link
  link=$(ip -o -d link show dev "$1" 2>/dev/null) || return 0
  [[ $link == *" veth "* ]] || return 0
  # "NN: name@peer: <...>"
  local head=${link#*: }
  head=${head%%:*}
  if [[ $head == *@* ]]; then
    echo "${head#*@}"
  fi
}

disable_ipv6() {
  local knob=/proc/sys/net/ipv6/conf/$1/disable_ipv6
  if [[ -w $knob ]]; then
    echo 1 >"$knob"
  fi
}

# The kernel's receive path on end $1 stops after the packet taps (see `up`).
KERNEL_RX_DROP="1,6 0 0 2," # cBPF: ret #2 (TC_ACT_SHOT), run in direct-action mode
kernel_rx_off() {
  if ! { tc qdisc replace dev "$1" clsact &&
    tc filter replace dev "$1" ingress pref 1 handle 1 bpf da bytecode "$KERNEL_RX_DROP"; }; then
    echo "veth: warning: no clsact/cls_bpf in this kernel: the kernel's IPv4 layer on $1 will" \
      "also take every RoCE frame (slower, otherwise harmless)" >&2
  fi
}

# Scatter-gather on end $1 to $2 (on|off; see `up`). ethtool comes with scripts/setup.sh.
set_sg() {
  if ! command -v ethtool >/dev/null || ! ethtool -K "$1" sg "$2" >/dev/null 2>&1; then
    echo "veth: warning: cannot set scatter-gather $2 on $1 (ethtool missing? scripts/setup.sh" \
      "installs it): frames from net_af_packet are copied into new pages (slower, otherwise" \
      "harmless)" >&2
  fi
}

# Undoes kernel_rx_off on end $1 (an `up` with a kernel address on an existing pair).
kernel_rx_on() {
  tc qdisc del dev "$1" clsact 2>/dev/null || true
}

up() {
  local mtu=${1:-${VETH_MTU:-1500}}
  if [[ ! $mtu =~ ^[0-9]+$ ]] || ((mtu < 256 || mtu > 9000)); then
    echo "veth: MTU '$mtu' is not in 256..=9000" >&2
    exit 2
  fi
  local sg=${VETH_SG:-off}
  if [[ $sg != on && $sg != off ]]; then
    echo "veth: VETH_SG '$sg' is neither on nor off" >&2
    exit 2
  fi
  need_root
  # Global, not local: when `set -e` or `exit` ends the script inside this function, bash runs
  # the EXIT trap after the function's locals are gone.
  created=0
  cleanup() {
    local rc=$?
    if ((rc != 0 && created)); then
      echo "veth: up failed, deleting $a/$b" >&2
      ip link del dev "$a" 2>/dev/null || true
    fi
    exit "$rc"
  }
  trap cleanup EXIT

  if exists "$a" || exists "$b"; then
    if [[ $(peer_of "$a") != "$b" ]]; then
      echo "veth: $a or $b exists but they are not a veth pair with each other; not touching them" >&2
      exit 1
    fi
  else
    ip link add dev "$a" type veth peer name "$b"
    created=1
  fi
  local end
  for end in "$a" "$b"; do
    ip link set dev "$end" mtu "$mtu"
    disable_ipv6 "$end"
    set_sg "$end" "$sg"
    ip link set dev "$end" up
  done
  if [[ -n ${KERNEL_ADDR_A:-} ]]; then ip addr replace "$KERNEL_ADDR_A" dev "$a"; fi
  if [[ -n ${KERNEL_ADDR_B:-} ]]; then ip addr replace "$KERNEL_ADDR_B" dev "$b"; fi
  local kernel_rx_a=${KERNEL_ADDR_A:+1} kernel_rx_b=${KERNEL_ADDR_B:+1}
  if [[ ${VETH_KERNEL_RX:-0} == 1 ]]; then kernel_rx_a=1 kernel_rx_b=1; fi
  if [[ -n $kernel_rx_a ]]; then kernel_rx_on "$a"; else kernel_rx_off "$a"; fi
  if [[ -n $kernel_rx_b ]]; then kernel_rx_on "$b"; else kernel_rx_off "$b"; fi
  trap - EXIT
  echo "veth: up: $a <-> $b, MTU $mtu, scatter-gather $sg"
}

down() {
  need_root
  if exists "$a"; then
    if [[ $(peer_of "$a") != "$b" ]]; then
      echo "veth: $a is not the veth peer of $b; not deleting it" >&2
      exit 1
    fi
    ip link del dev "$a"
    echo "veth: down: deleted $a/$b"
  elif exists "$b"; then
    echo "veth: $b exists without $a; not deleting it" >&2
    exit 1
  else
    echo "veth: down: $a/$b not present"
  fi
}

status() {
  if exists "$a"; then
    local end rx sg
    for end in "$a" "$b"; do
      rx="on"
      if tc filter show dev "$end" ingress 2>/dev/null | grep -q "bytecode '${KERNEL_RX_DROP%,}'"; then
        rx="off (after the packet taps)"
      fi
      sg=$(ethtool -k "$end" 2>/dev/null | sed -n 's/^scatter-gather: \([a-z]*\).*/\1/p')
      echo "$(ip -br link show dev "$end")  kernel rx: $rx  scatter-gather: ${sg:-unknown}"
    done
  else
    echo "veth: $a/$b not present"
  fi
}

case $cmd in
  up) up "${3:-}" ;;
  down) down ;;
  status) status ;;
  *) usage ;;
esac
