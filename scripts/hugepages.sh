#!/usr/bin/env bash
# Hugepages for DPDK (2 MiB pages).
#
# Changes made:
#   up [N]   raises the number of 2 MiB hugepages to at least N (default 512 = 1 GiB), mounts
#            hugetlbfs at /dev/hugepages if nothing is mounted there (creating the directory if
#            needed), creates /run/dpdk-roce/ and records what it changed in
#            /run/dpdk-roce/hugepages.state.
#   down     undoes only what `up` recorded: gives back the pages it added (never below the
#            count found before the first `up`), unmounts /dev/hugepages only if `up` mounted
#            it, removes the directory only if `up` created it, then removes the state file.
#   status   changes nothing; prints pages, mount and state.
# Idempotent: `up` twice reserves once (a larger N raises further); `down` without state does
# nothing. A failing `up` undoes what that invocation changed. Concurrent calls are serialised by
# a lock on /run/dpdk-roce/hugepages.lock.
# Environment: DPDK_ROCE_RUN_DIR (default /run/dpdk-roce), HUGEPAGES_MOUNT (default /dev/hugepages).
set -euo pipefail

usage() {
  echo "usage: $0 up [N] | down | status" >&2
  exit 2
}

RUN_DIR=${DPDK_ROCE_RUN_DIR:-/run/dpdk-roce}
MOUNT=${HUGEPAGES_MOUNT:-/dev/hugepages}
NR=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
FREE=/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages
STATE=$RUN_DIR/hugepages.state

cmd=${1:-}
[[ -n $cmd ]] || usage

need_root() {
  if [[ $EUID -ne 0 ]]; then
    echo "hugepages: '$cmd' changes kernel settings: run as root" >&2
    exit 1
  fi
}

is_mounted() {
  # A hugetlbfs mounted exactly at $MOUNT.
  awk -v m="$MOUNT" '$2 == m && $3 == "hugetlbfs" { found = 1 } END { exit !found }' /proc/mounts
}

set_pages() {
  echo "$1" >"$NR"
}

lock() {
  mkdir -p "$RUN_DIR"
  exec 9>"$RUN_DIR/hugepages.lock"
  flock 9
}

# State: prior (pages before the first up), reserved (pages added by up), mounted (1 if up
# mounted), made_dir (1 if up created the mount point).
prior=0 reserved=0 mounted=0 made_dir=0
load_state() {
  if [[ -f $STATE ]]; then
    # shellcheck disable=SC1090
    source "$STATE"
  fi
}
save_state() {
  printf 'prior=%d\nreserved=%d\nmounted=%d\nmade_dir=%d\n' \
    "$prior" "$reserved" "$mounted" "$made_dir" >"$STATE.tmp"
  mv "$STATE.tmp" "$STATE"
}

status() {
  echo "hugepages: 2 MiB pages total $(cat "$NR"), free $(cat "$FREE")"
  if is_mounted; then
    echo "hugepages: hugetlbfs mounted at $MOUNT"
  else
    echo "hugepages: nothing mounted at $MOUNT"
  fi
  if [[ -f $STATE ]]; then
    load_state
    echo "hugepages: set up by this script: $reserved pages added (over $prior), mounted=$mounted"
  else
    echo "hugepages: no state (not set up by this script)"
  fi
}

up() {
  local want=${1:-512}
  [[ $want =~ ^[0-9]+$ ]] || usage
  need_root
  lock
  load_state
  # Globals, not locals: when `set -e` or `exit` ends the script inside this function, bash
  # runs the EXIT trap after the function's locals are gone, and the rollback needs these.
  had_state=0
  [[ -f $STATE ]] && had_state=1
  before=$(cat "$NR")
  ((had_state)) || prior=$before

  # What this invocation did, for the rollback on failure.
  did_pages=0 did_mount=0 did_dir=0
  rollback() {
    local rc=$?
    if ((rc != 0)); then
      echo "hugepages: up failed, undoing this invocation's changes" >&2
      ((did_mount)) && umount "$MOUNT" 2>/dev/null || true
      ((did_dir)) && rmdir "$MOUNT" 2>/dev/null || true
      ((did_pages)) && set_pages "$before" 2>/dev/null || true
      ((had_state)) || rm -f "$STATE"
    fi
    exit "$rc"
  }
  trap rollback EXIT

  if ((before < want)); then
    did_pages=1
    set_pages "$want"
    local got
    got=$(cat "$NR")
    if ((got < want)); then
      echo "hugepages: the kernel gave $got of $want pages (not enough free contiguous memory)" >&2
      exit 1
    fi
    reserved=$((reserved + got - before))
  fi
  if ! is_mounted; then
    if [[ ! -d $MOUNT ]]; then
      mkdir -p "$MOUNT"
      did_dir=1
      made_dir=1
    fi
    mount -t hugetlbfs nodev "$MOUNT"
    did_mount=1
    mounted=1
  fi
  save_state
  trap - EXIT
  echo "hugepages: up: $(cat "$NR") pages of 2 MiB ($reserved added by this script), hugetlbfs at $MOUNT"
}

down() {
  need_root
  lock
  if [[ ! -f $STATE ]]; then
    echo "hugepages: down: nothing to undo"
    return 0
  fi
  load_state
  if ((mounted)) && is_mounted; then
    if ! umount "$MOUNT"; then
      echo "hugepages: cannot unmount $MOUNT (a DPDK process still uses it?); state kept" >&2
      exit 1
    fi
  fi
  mounted=0
  if ((made_dir)); then
    rmdir "$MOUNT" 2>/dev/null || true
  fi
  made_dir=0
  if ((reserved > 0)); then
    local now target
    now=$(cat "$NR")
    target=$((now - reserved))
    ((target < prior)) && target=$prior
    set_pages "$target"
  fi
  rm -f "$STATE"
  echo "hugepages: down: $(cat "$NR") pages of 2 MiB remain"
}

case $cmd in
  up) up "${2:-}" ;;
  down) down ;;
  status) status ;;
  *) usage ;;
esac
