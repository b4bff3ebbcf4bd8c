#!/usr/bin/env bash
# A bottleneck that marks ECN before it drops, on a join of two veth pairs (scripts/veth-join.sh),
# for testing the provider's congestion control against something like a switch port:
#
#   provider A [Xa] <-veth-> [Xb] ==tc mirred==> [Ya] -(CE marker, tbf RATE)-> [Yb] provider B
#
# Changes made:
#   up X Y RATE [--queue BYTES] [--mark-at BYTES] [--burst BYTES] [--drain PERCENT]
#                  on Ya, the inner end that sends towards B (the pairs X and Y and their join must
#                  exist: scripts/veth.sh, scripts/veth-join.sh):
#                  - the root qdisc becomes a token bucket filter (tbf, handle ce:) of RATE (tc
#                    syntax: 300mbit, 1gbit, 100MBps; 100kbit..=400gbit) with `limit` QUEUE bytes
#                    (default 64kb) and `burst` BURST bytes (default 16kb): the real queue, which
#                    drops when full. B -> A is not limited.
#                  - an eBPF program on Ya's clsact egress (pref 1; veth-join.sh's filters are on
#                    the ingress side of the same qdisc), scripts/bpf/ce_marker.c compiled by clang
#                    for this RATE and MARK_AT into /run/dpdk-roce/bottleneck/ce_marker-Ya.o (with
#                    Ya.conf, the settings `status` shows). It runs before the tbf on every frame
#                    the join redirects (the tbf's drops included) and keeps a phantom queue of
#                    their bytes that drains at 95 % of RATE (--drain, 50..=100; HULL's choice:
#                    the virtual queue fills up before the real one does, so the real queue stays
#                    short at the price of 5 % of the rate; 100 marks on the real queue's rate);
#                    an ECT(0)/ECT(1) IPv4 or IPv6 frame that finds more than
#                    MARK_AT bytes (--mark-at, default 16kb) ahead of it there gets CE. Not-ECT
#                    frames are never changed. The default MARK_AT equals the default burst (about
#                    11 full 1500-byte-MTU frames, 15 of the provider's frames of 1024-byte
#                    payload): marks start about when the tbf's bucket runs dry and the real queue
#                    starts growing, and the queue's other 48 KiB absorb the senders' reaction
#                    time before it drops. --mark-at above the queue is refused.
#                  Sizes are bytes, or tc's k/kb/m/mb (x 1024). Counters start at zero.
#   down X Y       removes the tbf, the program and its files; the pairs and the join stay.
#   status X Y     changes nothing; one line: `bottleneck Ya: rate=RATE queue=N mark_at=N
#                  packets=N ect=N marked=N dropped=N` (frames the program saw, of them ECT(0)/
#                  ECT(1), of them set to CE; frames the tbf dropped), or `bottleneck Ya: not
#                  present`. The program's counters are read with the bpf system call by the
#                  program's id (tc shows it), from a few lines of Python: no bpftool, no pinned
#                  map.
# Idempotent: `up` replaces an earlier bottleneck on Ya; `down` without one does nothing.
# `veth-join.sh up` and `down` replace Ya's clsact qdisc and with it the marker: `status` then
# fails (exit 1); run `up` again. A failing `up` removes the bottleneck (the join stays). A missing
# pair or join, or a qdisc or egress filter on Ya that is not ours, is refused (exit 1); bad usage,
# a bad rate or size is exit 2; neither changes anything. Needs root, clang and libbpf-dev
# (scripts/setup.sh).
set -euo pipefail

RUN_DIR=/run/dpdk-roce/bottleneck
SOURCE=$(cd "$(dirname "$0")" && pwd)/bpf/ce_marker.c
DRAIN_PERCENT=100 # of RATE: the phantom queue's drain (see above)
FP_SHIFT=24      # ce_marker.c's fixed point: bytes/ns * 2^24

usage() {
  echo "usage: $0 up X Y RATE [--queue BYTES] [--mark-at BYTES] [--burst BYTES]" \
    "[--drain PERCENT] | down X Y |" \
    "status X Y   (X, Y: veth.sh name prefixes joined by veth-join.sh)" >&2
  exit 2
}

die() {
  echo "bottleneck: $1" >&2
  exit "${2:-1}"
}

cmd=${1:-}
x=${2:-}
y=${3:-}
[[ -n $cmd && -n $x && -n $y && $x != "$y" ]] || usage
for p in "$x" "$y"; do
  if ((${#p} > 14)) || [[ ! $p =~ ^[A-Za-z0-9_.-]+$ ]]; then
    die "bad name prefix '$p' (1..14 characters of A-Z a-z 0-9 _ . -)" 2
  fi
done
xb=${x}b
ya=${y}a
obj=$RUN_DIR/ce_marker-$ya.o
conf=$RUN_DIR/$ya.conf

# Bits per second of a tc rate (300mbit, 1.5gbit, 100MBps), or exit 2.
rate_bits() {
  local r=${1,,} n unit
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([a-z]*)$ ]] || die "rate '$1' is not a tc rate like 300mbit" 2
  n=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]:-bit}
  local -A factor=(
    [bit]=1 [kbit]=1e3 [mbit]=1e6 [gbit]=1e9 [tbit]=1e12
    [kibit]=1024 [mibit]=1048576 [gibit]=1073741824 [tibit]=1099511627776
    [bps]=8 [kbps]=8e3 [mbps]=8e6 [gbps]=8e9 [tbps]=8e12
    [kibps]=8192 [mibps]=8388608 [gibps]=8589934592 [tibps]=8796093022208
  )
  [[ -v factor[$unit] ]] || die "rate '$1': unknown unit '$unit' (bit, kbit, mbit, gbit, bps, mbps...)" 2
  awk -v n="$n" -v f="${factor[$unit]}" 'BEGIN {
    b = n * f; if (b < 1e5 || b > 4e11) exit 1; printf "%.0f", b }' ||
    die "rate '$1' is not in 100kbit..=400gbit" 2
}

# Bytes of a tc size (65536, 64k, 64kb, 1mb), or exit 2.
size_bytes() {
  local s=${2,,}
  [[ $s =~ ^([0-9]{1,10})(b|k|kb|m|mb)?$ ]] || die "$1 '$2' is not a size like 65536 or 64kb" 2
  local n=$((10#${BASH_REMATCH[1]}))
  case ${BASH_REMATCH[2]} in
    k | kb) n=$((n * 1024)) ;;
    m | mb) n=$((n * 1048576)) ;;
  esac
  ((n <= 1 << 30)) || die "$1 '$2' is above 1 GiB" 2
  echo "$n"
}

need_root() {
  [[ $EUID -eq 0 ]] || die "'$cmd' needs root (tc, and the bpf system call for the counters)"
}

need_veth() {
  local link
  link=$(ip -o -d link show dev "$1" 2>/dev/null) ||
    die "no interface $1 (make the pair with scripts/veth.sh up ${1%?})"
  [[ $link == *" veth "* ]] || die "$1 is not a veth end: not touching it"
}

# The join veth-join.sh makes: each inner end's ingress redirects to the other's egress.
need_join() {
  local from to filters
  for from in "$xb" "$ya"; do
    to=$ya
    [[ $from == "$ya" ]] && to=$xb
    filters=$(tc filter show dev "$from" ingress 2>/dev/null || true)
    [[ $filters == *"(Egress Redirect to device $to)"* ]] ||
      die "$xb and $ya are not joined (scripts/veth-join.sh up $x $y)"
  done
}

# Ya's root qdisc: "ours" (our tbf), "none" (veth's default noqueue) or "other".
root_qdisc() {
  local line
  line=$(tc qdisc show dev "$ya" root 2>/dev/null | head -n 1)
  case $line in
    "qdisc tbf ce: root"*) echo ours ;;
    "" | "qdisc noqueue 0: root"*) echo none ;;
    *) echo other ;;
  esac
}

# Ya's egress filters: "ours" (the marker alone), "none" or "other".
egress_filters() {
  local out
  out=$(tc filter show dev "$ya" egress 2>/dev/null | grep handle || true)
  if [[ -z $out ]]; then
    echo none
  elif [[ $(wc -l <<<"$out") -eq 1 && $out == *"pref 1 bpf "*" ce_marker-$ya.o:["* ]]; then
    echo ours
  else
    echo other
  fi
}

# Removes what `up` installs on Ya, if it is ours, and the files.
remove() {
  if ip link show dev "$ya" >/dev/null 2>&1; then
    if [[ $(egress_filters) == ours ]]; then
      tc filter del dev "$ya" egress pref 1 2>/dev/null || true
    fi
    if [[ $(root_qdisc) == ours ]]; then
      tc qdisc del dev "$ya" root 2>/dev/null || true
    fi
  fi
  rm -f "$obj" "$conf" "$RUN_DIR/.ce_marker-$ya.o.tmp"
  rmdir "$RUN_DIR" 2>/dev/null || true
}

# The marker's counters "packets ect marked", read through the bpf system call: the program's id
# (from tc) -> its maps -> the one named ce_state -> element 0 (struct state in ce_marker.c).
counters() {
  local id
  id=$(tc filter show dev "$ya" egress pref 1 | sed -n 's/.* id \([0-9]\+\) .*/\1/p' | head -n 1)
  [[ -n $id ]] || die "cannot find the marker's program id on $ya"
  python3 - "$id" <<'PY'
import ctypes, os, platform, struct, sys

NR_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine()) or sys.exit(
    f"bottleneck: the bpf system call's number on {platform.machine()} is not known here")
MAP_LOOKUP_ELEM, PROG_GET_FD_BY_ID, MAP_GET_FD_BY_ID, OBJ_GET_INFO_BY_FD = 1, 13, 14, 15
libc = ctypes.CDLL(None, use_errno=True)

def bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 64)
    r = libc.syscall(NR_BPF, cmd, buf, 64)
    if r < 0:
        sys.exit(f"bottleneck: bpf({cmd}): {os.strerror(ctypes.get_errno())}")
    return r

def info(fd, size):
    out = ctypes.create_string_buffer(size)
    bpf(OBJ_GET_INFO_BY_FD, struct.pack("=IIQ", fd, size, ctypes.addressof(out)))
    return out

prog = bpf(PROG_GET_FD_BY_ID, struct.pack("=I", int(sys.argv[1])))
ids = (ctypes.c_uint32 * 8)()
pinfo = ctypes.create_string_buffer(232)  # struct bpf_prog_info
struct.pack_into("=IQ", pinfo, 52, 8, ctypes.addressof(ids))  # nr_map_ids, map_ids
bpf(OBJ_GET_INFO_BY_FD, struct.pack("=IIQ", prog, 232, ctypes.addressof(pinfo)))
for map_id in ids[: struct.unpack_from("=I", pinfo, 52)[0]]:
    fd = bpf(MAP_GET_FD_BY_ID, struct.pack("=I", map_id))
    minfo = info(fd, 40)  # struct bpf_map_info up to its name
    value_size = struct.unpack_from("=I", minfo, 12)[0]
    if minfo.raw[24:40].rstrip(b"\0") != b"ce_state":
        continue
    if value_size != 48:
        sys.exit(f"bottleneck: ce_state has {value_size}-byte values, not ce_marker.c's 48")
    key, value = ctypes.c_uint32(0), ctypes.create_string_buffer(value_size)
    bpf(MAP_LOOKUP_ELEM, struct.pack("=IIQQQ", fd, 0, ctypes.addressof(key),
                                     ctypes.addressof(value), 0))
    packets, ect, marked = struct.unpack_from("=QQQ", value, 24)
    print(packets, ect, marked)
    break
else:
    sys.exit("bottleneck: the marker's program has no ce_state map")
PY
}

# Frames the tbf dropped.
dropped() {
  tc -s qdisc show dev "$ya" root |
    awk '/dropped/ {sub(",", "", $7); print $7; exit}' | grep . || echo 0
}

# up's EXIT trap: a failing `up` leaves no half-made bottleneck.
up_failed() {
  local rc=$?
  if ((rc != 0 && installing)); then
    echo "bottleneck: up failed, removing the bottleneck on $ya" >&2
    remove
  fi
  exit "$rc"
}

up() {
  local rate=${1:-}
  [[ -n $rate ]] || usage
  shift
  local queue=64kb mark_at=16kb burst=16kb drain=$DRAIN_PERCENT
  while (($#)); do
    (($# >= 2)) || usage
    case $1 in
      --queue) queue=$2 ;;
      --mark-at) mark_at=$2 ;;
      --burst) burst=$2 ;;
      --drain) drain=$2 ;;
      *) usage ;;
    esac
    shift 2
  done
  local bits
  bits=$(rate_bits "$rate") || exit
  queue=$(size_bytes queue "$queue") || exit
  mark_at=$(size_bytes mark-at "$mark_at") || exit
  burst=$(size_bytes burst "$burst") || exit
  [[ $drain =~ ^[0-9]+$ ]] && ((drain >= 50 && drain <= 100)) ||
    die "drain must be a percentage of the rate in 50..=100, not '$drain'" 2
  ((mark_at <= queue)) ||
    die "mark-at $mark_at is above the queue ($queue): frames would be dropped before marked" 2

  need_root
  need_veth "$xb"
  need_veth "$ya"
  need_join
  [[ $(root_qdisc) != other ]] ||
    die "$ya has a root qdisc that is not this script's: not touching it ($(tc qdisc show dev "$ya" root))"
  [[ $(egress_filters) != other ]] ||
    die "$ya has egress filters that are not this script's: not touching them"
  local mtu frame
  mtu=$(<"/sys/class/net/$ya/mtu")
  frame=$((mtu + 18)) # Ethernet header and a VLAN tag
  ((burst >= frame)) || die "burst $burst is below a full frame ($frame bytes at MTU $mtu)" 2
  ((queue >= frame)) || die "queue $queue is below a full frame ($frame bytes at MTU $mtu)" 2

  command -v clang >/dev/null || die "clang not found (scripts/setup.sh installs it)"
  [[ -f /usr/include/bpf/bpf_helpers.h ]] || die "no bpf/bpf_helpers.h (scripts/setup.sh installs libbpf-dev)"
  # bytes/ns * 2^FP_SHIFT at DRAIN_PERCENT of the rate
  local drain_fp
  drain_fp=$(awk -v b="$bits" -v p="$drain" -v s="$FP_SHIFT" \
    'BEGIN { printf "%.0f", b / 8 * p / 100 * 2 ^ s / 1e9 }')
  # <linux/bpf.h> needs <asm/types.h>, which -target bpf does not find on its own.
  local tmp=$RUN_DIR/.ce_marker-$ya.o.tmp multiarch
  multiarch=/usr/include/$(uname -m)-linux-gnu
  [[ -d $multiarch ]] || multiarch=
  mkdir -p "$RUN_DIR"
  if ! clang -O2 -g -target bpf ${multiarch:+-I"$multiarch"} -DDRAIN_FP="${drain_fp}ULL" \
    -DMARK_AT="${mark_at}ULL" -c "$SOURCE" -o "$tmp"; then
    rm -f "$tmp"
    rmdir "$RUN_DIR" 2>/dev/null || true
    die "cannot compile $SOURCE"
  fi

  # Global, not local: the EXIT trap runs after the function's locals are gone (veth.sh).
  installing=1
  trap up_failed EXIT
  mv -f "$tmp" "$obj"
  # A fresh tbf (its drop count at zero, like the new program's counters).
  if [[ $(root_qdisc) == ours ]]; then
    tc qdisc del dev "$ya" root
  fi
  tc qdisc add dev "$ya" root handle ce: tbf rate "${bits}bit" burst "$burst" limit "$queue"
  tc filter replace dev "$ya" egress pref 1 handle 1 bpf da obj "$obj" sec tc
  echo "rate=$rate queue=$queue mark_at=$mark_at burst=$burst drain_fp=$drain_fp" >"$conf"
  installing=0
  trap - EXIT
  echo "bottleneck: up: $ya rate $rate (marker drains at $drain %), queue $queue," \
    "burst $burst, mark at $mark_at"
}

down() {
  need_root
  if ip link show dev "$ya" >/dev/null 2>&1; then
    need_veth "$ya"
  fi
  remove
  echo "bottleneck: down: $ya"
}

status() {
  need_veth "$xb"
  need_veth "$ya"
  local qdisc filter
  qdisc=$(root_qdisc) filter=$(egress_filters)
  if [[ $qdisc != ours && $filter != ours && ! -f $conf ]]; then
    echo "bottleneck $ya: not present"
    return
  fi
  if [[ $qdisc != ours || $filter != ours || ! -f $conf ]]; then
    local files=missing
    [[ -f $conf ]] && files=present
    die "$ya's bottleneck is incomplete (tbf: $qdisc, marker: $filter, $conf: $files);
  veth-join.sh up/down replaces the marker's clsact qdisc: run bottleneck.sh up again"
  fi
  need_root
  local rate queue mark_at c
  read -r rate queue mark_at _ < <(sed -n 's/^rate=\([^ ]*\) queue=\([0-9]*\) mark_at=\([0-9]*\) .*/\1 \2 \3 x/p' "$conf")
  [[ -n ${mark_at:-} ]] || die "cannot read $conf"
  c=$(counters)
  read -r packets ect marked <<<"$c"
  echo "bottleneck $ya: rate=$rate queue=$queue mark_at=$mark_at packets=$packets ect=$ect" \
    "marked=$marked dropped=$(dropped)"
}

case $cmd in
  up)
    shift 3
    up "$@"
    ;;
  down)
    (($# == 3)) || usage
    down
    ;;
  status)
    (($# == 3)) || usage
    status
    ;;
  *) usage ;;
esac
