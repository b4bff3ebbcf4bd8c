#!/usr/bin/env bash
# Joins two veth pairs (scripts/veth.sh) into one lossy link inside the kernel, for testing the
# provider under loss with an impairment that is neither its own code nor a third process:
#
#   provider A [Xa] <-veth-> [Xb] ==tc mirred==> [Ya] <-veth-> [Yb] provider B
#
# The frames are forwarded in the sending process's own system call (the veth transmit runs the
# receiving end's ingress filter at once), so the link needs no CPU of its own; `roce-tool
# relay`, which also reorders, duplicates and corrupts, needs a busy-polling process.
#
# Changes made:
#   up X Y [LOSS]  on the inner ends Xb and Ya (the pairs X and Y must exist, made by veth.sh):
#                  replaces veth.sh's ingress filter (and the counters of its clsact qdisc)
#                  with two filters: pref 1, a classic BPF program
#                  (`ld rand`, the kernel's pseudo-random number, SKF_AD_RANDOM) that matches a
#                  frame with chance 1 - LOSS and then redirects it to the other inner end's
#                  egress (tc mirred); pref 2, veth.sh's own filter (TC_ACT_SHOT), which ends the
#                  trip of an unmatched frame: that frame is lost. LOSS is a chance in 0..=1
#                  (default 0). The draws are the kernel's and cannot be seeded.
#   down X Y       puts veth.sh's single filter back on Xb and Ya (the pairs stay).
#   status X Y     changes nothing; per direction since the `up`, the frames redirected
#                  (`forwarded`, the mirred action's count) and those dropped (`lost`, the
#                  clsact qdisc's drops): `veth-join Xb->Ya: forwarded=N lost=N`.
# Idempotent: `up` replaces what an earlier `up` installed; `down` without a join does nothing.
# A failing `up` puts veth.sh's filters back; an end that is not a veth is refused (exit 1), a bad
# loss or usage is exit 2, and neither changes anything.
set -euo pipefail

usage() {
  echo "usage: $0 up X Y [loss] | down X Y | status X Y   (X, Y: veth.sh name prefixes)" >&2
  exit 2
}

cmd=${1:-}
x=${2:-}
y=${3:-}
loss=${4:-0}
[[ -n $cmd && -n $x && -n $y && $x != "$y" ]] || usage
xb=${x}b
ya=${y}a

# veth.sh's filter: `ret #2` (TC_ACT_SHOT) in direct-action mode.
SHOT="1,6 0 0 2,"

# The cBPF program matching with chance 1 - loss: A = rand; A >= T ? match (ret -1) : no (ret 0).
# T = loss * 2^32 (ld rand is uniform over u32), at most 2^32 - 1.
lossy_program() {
  local t
  t=$(awk -v p="$1" 'BEGIN {
    if (p !~ /^([0-9]+\.?[0-9]*|\.[0-9]+)$/ || p + 0 > 1) exit 1
    t = int(p * 4294967296 + 0.5); if (t > 4294967295) t = 4294967295; printf "%d", t }') || {
    echo "veth-join: loss must be a chance in 0..=1, not '$1'" >&2
    exit 2
  }
  # ld [SKF_AD_OFF + SKF_AD_RANDOM] = 0x20 k=0xfffff038; jge #T jt 0 jf 1; ret #-1; ret #0.
  echo "4,32 0 0 4294963256,53 0 1 $t,6 0 0 4294967295,6 0 0 0,"
}

need_end() {
  local link
  if ! link=$(ip -o -d link show dev "$1" 2>/dev/null); then
    echo "veth-join: no interface $1 (make the pair with scripts/veth.sh up ${1%?})" >&2
    exit 1
  fi
  if [[ $link != *" veth "* ]]; then
    echo "veth-join: $1 is not a veth end: not touching it" >&2
    exit 1
  fi
}

# A new clsact qdisc on end $1 (no filters, counters at zero).
fresh_clsact() {
  tc qdisc del dev "$1" clsact 2>/dev/null || true
  tc qdisc add dev "$1" clsact
}

# veth.sh's filter alone on end $1.
restore() {
  fresh_clsact "$1" 2>/dev/null || true
  tc filter replace dev "$1" ingress pref 1 handle 1 bpf da bytecode "$SHOT" 2>/dev/null || true
}

# Frames dropped on end $1's ingress (the clsact qdisc's count).
lost() {
  tc -s qdisc show dev "$1" 2>/dev/null |
    awk '/qdisc clsact/ {m = 1} m && /dropped/ {sub(",", "", $7); print $7; exit}' | grep . || echo 0
}

# Frames redirected by the mirred action of end $1's pref 1 filter.
forwarded() {
  tc -s filter show dev "$1" ingress pref 1 2>/dev/null |
    awk '/Egress Redirect/ {m = 1} m && /Sent [0-9]+ bytes/ {print $4; exit}' | grep . || echo 0
}

case "$cmd" in
  up)
    [[ $EUID -eq 0 ]] || { echo "veth-join: run as root" >&2; exit 1; }
    program=$(lossy_program "$loss")
    need_end "$xb"
    need_end "$ya"
    trap 'restore "$xb"; restore "$ya"' ERR
    for pair in "$xb $ya" "$ya $xb"; do
      set -- $pair
      fresh_clsact "$1"
      tc filter add dev "$1" ingress pref 1 handle 1 bpf bytecode "$program" \
        action mirred egress redirect dev "$2"
      tc filter add dev "$1" ingress pref 2 handle 2 bpf da bytecode "$SHOT"
    done
    echo "veth-join: up: $xb <-> $ya, loss $loss each way"
    ;;
  down)
    for end in "$xb" "$ya"; do
      if ip link show dev "$end" >/dev/null 2>&1; then
        need_end "$end"
        restore "$end"
      fi
    done
    echo "veth-join: down: $xb $ya"
    ;;
  status)
    for pair in "$xb $ya" "$ya $xb"; do
      set -- $pair
      need_end "$1"
      echo "veth-join $1->$2: forwarded=$(forwarded "$1") lost=$(lost "$1")"
    done
    ;;
  *) usage ;;
esac
