#!/usr/bin/env bash
# A QEMU guest running Debian 12's own kernel with soft-RoCE (rdma_rxe) and the reference uDAPL
# stack (rdma-core + libdapl2's libdaplofa + dapl2-utils), joined to this host by a tap: the
# peer that proves dpdk-roce interoperates with RDMA software it did not write
# (tests/interop_rxe.rs, docs/INTEROP-rxe.md). Needs root, and the packages scripts/setup.sh
# installs (qemu-system-x86, busybox-static, kmod, rdma-core, ibverbs-providers, libdapl2,
# dapl2-utils, ...). No KVM is needed: QEMU's TCG boots the guest in about 5-10 s.
#
# Usage (as root):
#   rxe-guest.sh prepare
#       Builds the guest once and caches it under $RXE_GUEST_CACHE (default
#       /var/cache/dpdk-roce/rxe-guest/<kernel package>/): `apt-get download`s the newest
#       linux-image-6.1.*-amd64 apt knows (or $RXE_GUEST_KERNEL), unpacks it with `dpkg -x` (it is
#       never installed), keeps its kernel uncompressed when it has a PVH entry (QEMU starts it
#       directly, no BIOS), takes the modules rdma_rxe, rdma_ucm and virtio-net need in the order
#       `modprobe -d --show-depends` gives, and packs a busybox initramfs with rdma-core's
#       libibverbs/librdmacm/rxe provider, libdat2 + libdaplofa, dtest/dtestx/dtestsrq/dtestcm/
#       dapltest, rdma, iproute2's tc (/usr/sbin/tc; the bare name runs busybox's applet) and
#       ibv_devinfo with every library they need (ldd), the modules of a tc ingress filter
#       (sch_ingress, cls_u32, act_gact), and /etc/dat.conf
#       naming IA `ofa-v2-cma-roe-eth0` (libdaplofa.so.2 on eth0, as Debian's dat.conf does).
#       Idempotent: a cached initramfs is reused while this script and the packages it copies
#       are unchanged. Prints the cache directory.
#   rxe-guest.sh up NAME TAP GUEST_CIDR HOST_CIDR [PCAP]
#       prepare, then: creates tap TAP (IPv6 off, no forwarding) with the host kernel's address
#       HOST_CIDR, boots the guest (qemu-system-x86_64 -accel tcg -cpu max -smp 1, virtio-net on
#       TAP; with PCAP, QEMU's filter-dump writes every frame of the guest's NIC there, and the
#       tap carries no virtio-net headers so the frames start with their Ethernet header), loads
#       the modules, gives eth0 GUEST_CIDR, runs `rdma link add rxe0 type rxe netdev eth0` and
#       waits until rxe0's port is ACTIVE. NAME (letters, digits, - _) names the guest's state
#       directory /run/dpdk-roce/rxe-guest/NAME (console.log, the command channel, QEMU's own
#       messages in qemu.log, its human monitor on monitor.sock). On failure
#       everything is torn down again and the console log is shown.
#       With RXE_GUEST_OWNER set to a process id, a detached watcher runs `down NAME` within a
#       second of that process's end, however it ended (a test binary that shares one guest
#       among its tests, or one killed before its clean-up ran).
#       With RXE_GUEST_EXTRA set to programs of this machine (space-separated paths), those
#       programs, stripped, are in the guest's /usr/local/bin (an initramfs appended to the
#       cached one: the kernel unpacks both); they may need only libraries the guest has.
#   rxe-guest.sh exec NAME [-t SECONDS] -- COMMAND...
#       Runs COMMAND (a /bin/sh command line, the words joined by spaces) in the guest, prints its
#       stdout+stderr and exits with its status; it is killed after SECONDS (default 60, exit
#       137). Exit 255: the guest did not answer in time (or is not up).
#   rxe-guest.sh spawn NAME JOB -- COMMAND...
#       Starts COMMAND in the guest in the background as job JOB (its own session) and returns.
#   rxe-guest.sh collect NAME JOB [-t SECONDS]
#       Waits up to SECONDS (default 60) for job JOB to end, prints its output and exits with its
#       status; a job still running then is killed (its whole session) and the exit is 124.
#   rxe-guest.sh down NAME
#       Stops the guest's QEMU (only the process its pid file names), deletes its tap and its state
#       directory. Idempotent.
#   rxe-guest.sh status NAME
#       Changes nothing; says whether the guest is up.
#
# The command channel is the guest's second serial port (ttyS1) on a pair of FIFOs: the guest's
# /init runs a small agent that takes `RUN <nonce> <timeout> <base64 command>` lines and answers
# `@@BEGIN <nonce>`, the output in base64, `@@END <nonce> <status>`, so any bytes survive and a
# late answer to an earlier command is never taken for the current one. The agent acknowledges a
# line at once (`@@ACK <nonce>`) and runs a nonce once: a line the serial port lost or garbled
# (seen about once per interop run, under TCG on a busy host) is sent again after 3 s without
# its acknowledgement, not waited out. Commands are serialised per guest (flock). The first
# serial port (ttyS0) is the kernel console, in console.log.
#
# Environment: RXE_GUEST_MEM (MiB, default 1536), RXE_GUEST_BOOT_TIMEOUT (s, default 180),
# RXE_GUEST_KERNEL (a linux-image-6.1.*-amd64 package name), RXE_GUEST_CACHE, RXE_GUEST_RUN
# (the state directories' parent, default /run/dpdk-roce/rxe-guest).
set -euo pipefail

CACHE_ROOT=${RXE_GUEST_CACHE:-/var/cache/dpdk-roce/rxe-guest}
RUN_ROOT=${RXE_GUEST_RUN:-/run/dpdk-roce/rxe-guest}
MEM=${RXE_GUEST_MEM:-1536}
BOOT_TIMEOUT=${RXE_GUEST_BOOT_TIMEOUT:-180}
IA_NAME=ofa-v2-cma-roe-eth0
SELF=$(readlink -f "${BASH_SOURCE[0]}")

# The modules the guest loads, with their dependencies (modprobe --show-depends) first.
# crc32_generic: rdma_rxe computes the ICRC with the kernel's "crc32" shash.
# 8021q: VLAN devices (eth0.VID) for the tests of tagged RoCEv2.
# sch_ingress, cls_u32, act_gact: a tc filter that holds RoCEv2 off rxe until a server listens
# (tests/interop_rxe.rs, dtestx).
MODULES=(virtio_pci virtio_net crc32_generic configfs rdma_rxe ib_cm iw_cm rdma_cm rdma_ucm 8021q
  sch_ingress cls_u32 act_gact)
# Programs copied into the guest (with their libraries); the first five are dapl2-utils.
PROGRAMS=(dtest dtestx dtestsrq dtestcm dapltest rdma tc ibv_devinfo)
# Libraries loaded with dlopen (so not named by ldd of the programs): the uDAPL provider, the
# rxe verbs provider, and libgcc_s, which glibc loads for pthread_exit (dapltest's threads).
MULTIARCH=/usr/lib/x86_64-linux-gnu
DLOPENED=("$MULTIARCH/libdaplofa.so.2" "$MULTIARCH/libibverbs/librxe-rdmav34.so"
  "$MULTIARCH/libgcc_s.so.1")
# The Debian packages whose files go into the initramfs: their versions key the cache.
USER_PACKAGES=(busybox-static libibverbs1 ibverbs-providers librdmacm1 libdapl2 dapl2-utils
  iproute2 ibverbs-utils libc6 libgcc-s1 libbpf1 libelf1 libmnl0 libbsd0 libmd0 libcap2
  libxtables12 zlib1g)

log() { echo "rxe-guest: $*" >&2; }
die() {
  log "$*"
  exit 1
}

usage() {
  sed -n '/^# Usage/,/^# Environment/p' "$SELF" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

need_root() { [[ $EUID -eq 0 ]] || die "'$1' needs root"; }

check_name() {
  [[ $1 =~ ^[A-Za-z0-9_-]{1,40}$ ]] || die "bad guest name '$1' (1..40 of A-Z a-z 0-9 _ -)"
}

# ---------------------------------------------------------------------------------------------
# prepare

kernel_package() {
  if [[ -n ${RXE_GUEST_KERNEL:-} ]]; then
    echo "$RXE_GUEST_KERNEL"
    return
  fi
  local k
  k=$(apt-cache search --names-only '^linux-image-6\.1\.[0-9]+-[0-9]+-amd64$' 2>/dev/null |
    awk '{print $1}' | sort -V | tail -n 1)
  if [[ -z $k ]]; then
    # No apt lists: the newest guest already cached.
    k=$(find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -type d -name 'linux-image-6.1.*-amd64' \
      -printf '%f\n' 2>/dev/null | sort -V | tail -n 1)
  fi
  [[ -n $k ]] || die "apt-cache knows no linux-image-6.1.*-amd64 package (apt-get update?)"
  echo "$k"
}

# The cache key of the initramfs: this script and the versions of what it copies.
recipe_key() {
  {
    cat "$SELF"
    dpkg-query -W -f='${Package} ${Version}\n' "${USER_PACKAGES[@]}" 2>/dev/null || true
  } | sha256sum | cut -c1-16
}

# Copies file $1 (as the host has it) into root $2 at its real path, with a symlink at the
# path it was named by when that differs (sonames, /lib64/ld-linux-x86-64.so.2).
copy_file() {
  local src=$1 root=$2 real
  real=$(readlink -f "$src")
  [[ -f $real ]] || die "missing $src"
  if [[ ! -e $root$real ]]; then
    mkdir -p "$root$(dirname "$real")"
    cp -p "$real" "$root$real"
  fi
  if [[ $src != "$real" && ! -e $root$src && ! -L $root$src ]]; then
    mkdir -p "$root$(dirname "$src")"
    ln -s "$real" "$root$src"
  fi
}

# Copies $1 and every shared library ldd says it needs.
copy_with_libs() {
  local f=$1 root=$2 lib
  copy_file "$f" "$root"
  while read -r lib; do
    copy_file "$lib" "$root"
  done < <(ldd "$f" 2>/dev/null | awk '/=> \//{print $3} /^\t\/[^ ]+ \(/{print $1}')
}

write_init() {
  cat >"$1" <<'INIT'
#!/usr/bin/busybox sh
# The rxe guest's init: mounts, modules, then the command agent on ttyS1 (scripts/rxe-guest.sh).
/usr/bin/busybox --install -s
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp /var/tmp
mount -t devpts devpts /dev/pts
while read -r m; do
  insmod "/lib/modules/rxe-guest/$m" || echo "rxe-guest init: insmod $m failed"
done </lib/modules/rxe-guest/order
mount -t configfs configfs /sys/kernel/config 2>/dev/null
hostname rxe-guest
ip link set lo up
ulimit -l unlimited
echo "rxe-guest init: modules loaded, agent on ttyS1"
mkdir -p /run/agent /run/jobs
stty -F /dev/ttyS1 raw -echo -echoe -echok -echoctl -echoke -icrnl -onlcr -opost 2>/dev/null
exec 0</dev/ttyS1 1>/dev/ttyS1 2>&1
echo "@@READY"
last=""
while IFS= read -r line; do
  case "$line" in
    "RUN "*) ;;
    *) continue ;;
  esac
  set -- $line
  nonce=$2 t=$3
  echo "@@ACK $nonce"
  # A line sent again because its acknowledgement was late: it runs (and answers) once.
  [ "$nonce" = "$last" ] && continue
  last=$nonce
  echo "$4" | base64 -d >/run/agent/cmd.sh 2>/dev/null
  timeout -s KILL "$t" sh /run/agent/cmd.sh </dev/null >/run/agent/out 2>&1
  rc=$?
  echo "@@BEGIN $nonce"
  base64 /run/agent/out
  echo "@@END $nonce $rc"
done
echo "rxe-guest init: agent ended" >/dev/ttyS0
poweroff -f
INIT
  chmod 755 "$1"
}

# The uncompressed kernel (vmlinux) inside bzImage $1, written to $2, if it has a PVH entry
# point (ELF note XEN_ELFNOTE_PHYS32_ENTRY, 18; Debian's kernels have one): QEMU then starts it
# directly in 32-bit mode. Under TCG that skips about 3.3 s of SeaBIOS, real-mode setup and
# the kernel decompressing itself (its first message 0.9 s after QEMU starts instead of 4.2 s).
# The compressed payload starts payload_offset (boot protocol header, 0x248) bytes into the
# protected-mode code, which follows the setup sectors ((setup_sects at 0x1f1) + 1) * 512).
# Whatever follows the compressed stream is ignored; the ELF note is the proof.
pvh_vmlinux() {
  local bz=$1 out=$2 sects off at decompress
  sects=$(od -An -tu1 -j $((0x1f1)) -N1 "$bz" | tr -d ' ')
  off=$(od -An -tu4 -j $((0x248)) -N4 "$bz" | tr -d ' ')
  [[ $sects =~ ^[0-9]+$ && $off =~ ^[0-9]+$ ]] || return 1
  at=$(((sects + 1) * 512 + off + 1))
  case $(tail -c +"$at" "$bz" | head -c 6 | od -An -tx1 | tr -d ' \n') in
    fd377a585a00) decompress=(xz -dc --single-stream) ;;
    1f8b*) decompress=(gzip -dc) ;;
    28b52ffd*) decompress=(zstd -dcq) ;;
    *) return 1 ;;
  esac
  command -v "${decompress[0]}" >/dev/null || return 1
  tail -c +"$at" "$bz" | "${decompress[@]}" >"$out" 2>/dev/null || true
  readelf -n "$out" 2>/dev/null | grep -qE 'note type: \(0x00000012\)|PHYS32_ENTRY'
}

prepare() {
  need_root prepare
  local kpkg dir key initrd
  kpkg=$(kernel_package)
  dir=$CACHE_ROOT/$kpkg
  mkdir -p "$dir"
  exec 8>"$dir/.lock"
  flock -w 600 8 || die "cache $dir locked for 10 minutes"
  key=$(recipe_key)
  initrd=$dir/initramfs-$key.cpio.gz
  if [[ -s $dir/vmlinuz && -s $initrd ]]; then
    echo "$dir"
    return
  fi
  for p in "${PROGRAMS[@]}"; do
    command -v "$p" >/dev/null || die "$p missing (bash scripts/setup.sh installs it)"
  done
  for t in qemu-system-x86_64 depmod modprobe cpio busybox; do
    command -v "$t" >/dev/null || [[ -x /usr/sbin/$t || -x /sbin/$t ]] ||
      die "$t missing (bash scripts/setup.sh installs it)"
  done
  local deb
  deb=$(find "$dir" -maxdepth 1 -name "${kpkg}_*.deb" | head -n 1)
  if [[ -z $deb ]]; then
    log "downloading $kpkg"
    (cd "$dir" && apt-get download -q "$kpkg" 2>&1 | grep -v '^W: Download is performed unsandboxed' >&2) ||
      true
    deb=$(find "$dir" -maxdepth 1 -name "${kpkg}_*.deb" | head -n 1)
    [[ -n $deb ]] || die "apt-get download $kpkg failed"
  fi
  local work kroot kver root
  work=$(mktemp -d "$dir/build.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  kroot=$work/kernel
  log "unpacking $(basename "$deb") (dpkg -x; not installed)"
  dpkg -x "$deb" "$kroot"
  kver=$(ls "$kroot/lib/modules")
  [[ -n $kver && -f $kroot/boot/vmlinuz-$kver ]] || die "no kernel in $deb"
  depmod -b "$kroot" "$kver"
  root=$work/root
  mkdir -p "$root"/{usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,run,tmp}
  for d in bin sbin lib lib64; do ln -s "usr/$d" "$root/$d"; done
  local mdir=$root/lib/modules/rxe-guest
  mkdir -p "$mdir"
  : >"$mdir/order"
  local m ko
  for m in "${MODULES[@]}"; do
    while read -r ko; do
      local base
      base=$(basename "$ko")
      grep -qx "$base" "$mdir/order" && continue
      cp "$ko" "$mdir/$base"
      echo "$base" >>"$mdir/order"
    done < <(modprobe -d "$kroot" -S "$kver" --show-depends "$m" | awk '$1 == "insmod" {print $2}')
  done
  grep -qx rdma_rxe.ko "$mdir/order" || die "rdma_rxe.ko not found in $kpkg"
  cp /bin/busybox "$root/usr/bin/busybox"
  ln -s busybox "$root/usr/bin/sh"
  for p in "${PROGRAMS[@]}"; do copy_with_libs "$(command -v "$p")" "$root"; done
  for l in "${DLOPENED[@]}"; do copy_with_libs "$l" "$root"; done
  copy_file /etc/libibverbs.d/rxe.driver "$root"
  printf '%s u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "eth0 0" ""\n' "$IA_NAME" \
    >"$root/etc/dat.conf"
  printf '/usr/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu/libibverbs\n' >"$root/etc/ld.so.conf"
  echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
  echo 'root:x:0:' >"$root/etc/group"
  printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
  ldconfig -r "$root"
  write_init "$root/init"
  log "packing the initramfs ($kver, modules: $(tr '\n' ' ' <"$mdir/order"))"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$work/initramfs"
  cp "$kroot/boot/vmlinuz-$kver" "$dir/vmlinuz.new"
  mv "$dir/vmlinuz.new" "$dir/vmlinuz"
  rm -f "$dir/vmlinux"
  if pvh_vmlinux "$dir/vmlinuz" "$work/vmlinux"; then
    mv "$work/vmlinux" "$dir/vmlinux"
  else
    log "no PVH entry in the kernel: it boots compressed, through the BIOS (about 3 s more)"
  fi
  rm -f "$dir"/initramfs-*.cpio.gz
  mv "$work/initramfs" "$initrd"
  rm -rf "$work"
  trap - EXIT
  echo "$dir"
}

# ---------------------------------------------------------------------------------------------
# the command channel

state_dir() { echo "$RUN_ROOT/$1"; }

qemu_pid() {
  local d pid
  d=$(state_dir "$1")
  [[ -s $d/qemu.pid ]] || return 1
  pid=$(cat "$d/qemu.pid")
  [[ -r /proc/$pid/cmdline ]] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "rxe-guest-$1 " || return 1
  echo "$pid"
}

# agent_run NAME TIMEOUT SCRIPT: runs SCRIPT in the guest; prints its output, returns its status
# (255 when the guest does not answer within TIMEOUT + 30 s).
agent_run() {
  local name=$1 t=$2 script=$3 d nonce b64 line rc=255 deadline got=""
  d=$(state_dir "$name")
  qemu_pid "$name" >/dev/null || {
    log "guest $name is not up"
    return 255
  }
  exec 9>"$d/agent.lock"
  flock -w $((t + 30)) 9 || {
    exec 9>&-
    log "guest $name: command channel busy"
    return 255
  }
  exec 3<>"$d/agent.out" 4>"$d/agent.in"
  # Whatever an earlier, abandoned command left in the channel.
  while IFS= read -r -t 0.05 -u 3 line; do :; done
  nonce=$$-$RANDOM-$RANDOM
  b64=$(printf '%s\n' "$script" | base64 -w0)
  local request
  request=$(printf 'RUN %s %s %s' "$nonce" "$t" "$b64")
  # RXE_GUEST_TEST_FIRST_SEND (tests of the channel only): `lose` the first sending of the
  # command, or send it `twice` at once.
  case ${RXE_GUEST_TEST_FIRST_SEND:-} in
    lose) ;;
    twice) printf '%s\n%s\n' "$request" "$request" >&4 ;;
    *) printf '%s\n' "$request" >&4 ;;
  esac
  deadline=$((SECONDS + t + 30))
  # Sent again (same nonce: the agent runs it once) while no acknowledgement came.
  local acked="" resend=$((SECONDS + 3)) sends=1
  local out
  out=$(mktemp)
  # `read -t` that times out in the middle of a line (the guest's serial port is slow under
  # TCG on a busy host) returns what it got so far: keep it for the rest of the line.
  local part=""
  while ((SECONDS < deadline)); do
    if [[ -z $acked ]] && ((SECONDS >= resend && sends < 5)); then
      log "guest $name: no acknowledgement of command $nonce, sending it again"
      printf '%s\n' "$request" >&4
      resend=$((SECONDS + 3))
      sends=$((sends + 1))
    fi
    if ! IFS= read -r -t 1 -u 3 line; then
      part+=$line
      qemu_pid "$name" >/dev/null || break
      continue
    fi
    line=$part$line
    part=""
    case "$line" in
      "@@ACK $nonce") acked=1 ;;
      "@@BEGIN $nonce") got=1 acked=1 ;;
      "@@END $nonce "*)
        rc=${line##* }
        break
        ;;
      *) [[ -n $got ]] && printf '%s\n' "$line" >>"$out" ;;
    esac
  done
  # The lock goes with its descriptor: closed here, so no process started later (the owner's
  # watcher) inherits the lock.
  exec 3<&- 4>&- 9>&-
  base64 -d <"$out" 2>/dev/null || true
  rm -f "$out"
  if [[ $rc == 255 && -z $got ]]; then
    log "guest $name did not answer within $((t + 30)) s"
  fi
  return "$rc"
}

# ---------------------------------------------------------------------------------------------
# up / down

down() {
  local name=$1 d pid tap watch
  d=$(state_dir "$name")
  # The owner's watcher, unless this is it (it execs `down` once its owner is gone).
  if [[ -s $d/watch.pid ]]; then
    watch=$(cat "$d/watch.pid")
    if [[ $watch != "$$" ]] && grep -qs rxe-guest-watch "/proc/$watch/cmdline"; then
      kill "$watch" 2>/dev/null || true
    fi
  fi
  if pid=$(qemu_pid "$name"); then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
      [[ -e /proc/$pid ]] || break
      sleep 0.1
    done
    [[ -e /proc/$pid ]] && kill -9 "$pid" 2>/dev/null || true
  fi
  if [[ -s $d/tap ]]; then
    tap=$(cat "$d/tap")
    ip link del "$tap" 2>/dev/null || true
  fi
  rm -rf "$d"
}

up() {
  need_root up
  local name=$1 tap=$2 guest=$3 host=$4 pcap=${5:-}
  check_name "$name"
  [[ -z ${RXE_GUEST_OWNER:-} || $RXE_GUEST_OWNER =~ ^[0-9]+$ ]] ||
    die "RXE_GUEST_OWNER is not a process id: '$RXE_GUEST_OWNER'"
  [[ ${#tap} -le 15 && $tap =~ ^[A-Za-z0-9_.-]+$ ]] || die "bad tap name '$tap'"
  [[ $guest =~ ^[0-9.]+/[0-9]+$ && $host =~ ^[0-9.]+/[0-9]+$ ]] ||
    die "addresses are a.b.c.d/len: '$guest' '$host'"
  local d cache initrd
  d=$(state_dir "$name")
  if qemu_pid "$name" >/dev/null; then die "guest $name is already up"; fi
  ip link show "$tap" >/dev/null 2>&1 && die "interface $tap already exists"
  cache=$(prepare)
  initrd=$(find "$cache" -maxdepth 1 -name 'initramfs-*.cpio.gz' | head -n 1)
  local kernel=$cache/vmlinuz
  [[ -s $cache/vmlinux ]] && kernel=$cache/vmlinux
  rm -rf "$d"
  mkdir -p "$d"
  if [[ -n ${RXE_GUEST_EXTRA:-} ]]; then
    local extra=$d/extra f
    mkdir -p "$extra/usr/local/bin"
    for f in $RXE_GUEST_EXTRA; do
      [[ -x $f ]] || die "RXE_GUEST_EXTRA: $f is not a program"
      strip -o "$extra/usr/local/bin/$(basename "$f")" "$f" || die "strip $f"
    done
    cp "$initrd" "$d/initrd"
    (cd "$extra" && find . | cpio -o -H newc --quiet | gzip -1) >>"$d/initrd"
    rm -rf "$extra"
    initrd=$d/initrd
  fi
  # From here on a failure tears everything down.
  trap 'rc=$?; if ((rc)); then log "up failed; console:"; tail -n 40 "'"$d"'/console.log" >&2 2>/dev/null; [[ -z ${qemu:-} ]] || kill "$qemu" 2>/dev/null; down "'"$name"'"; fi' EXIT
  ip tuntap add dev "$tap" mode tap
  echo "$tap" >"$d/tap"
  sysctl -qw "net.ipv6.conf.$tap.disable_ipv6=1"
  sysctl -qw "net.ipv4.conf.$tap.forwarding=0"
  ip addr add "$host" dev "$tap"
  ip link set "$tap" up
  mkfifo "$d/agent.in" "$d/agent.out"
  local dump=() vnet=""
  if [[ -n $pcap ]]; then
    dump=(-object "filter-dump,id=dump0,netdev=net0,file=$pcap")
    # Without virtio-net headers on the tap: the dump would start each frame with them.
    vnet=",vnet_hdr=off"
  fi
  local t0=$SECONDS
  # virtio-net without VIRTIO_RING_F_EVENT_IDX: with it, this QEMU (7.2, TCG) and guest kernel
  # lost a transmit kick now and then under RoCE load (the guest's avail index 194 entries
  # ahead of the avail event QEMU waited for, QEMU polling the tap for nothing), and the guest
  # never sent again: 2 of 5 interop runs. Without it, 72 dtest runs in a row passed.
  # The monitor (monitor.sock) shows such a queue: `info virtio-queue-status`.
  # In the background rather than -daemonize, which sends QEMU's own errors (a virtio device
  # it stopped, say) to /dev/null: they go to qemu.log beside the console's.
  setsid qemu-system-x86_64 -name "rxe-guest-$name" -accel tcg -cpu max -smp 1 -m "$MEM" \
    -nodefaults -no-user-config -display none -no-reboot \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 panic=-1 loglevel=7 printk.time=1 ${RXE_GUEST_APPEND:-} rxe-guest=$name" \
    -serial "file:$d/console.log" \
    -chardev "pipe,id=agent,path=$d/agent" -serial chardev:agent \
    -monitor "unix:$d/monitor.sock,server=on,wait=off" \
    -netdev "tap,id=net0,ifname=$tap,script=no,downscript=no$vnet" \
    -device virtio-net-pci,netdev=net0,mac=52:54:00:77:60:03,romfile=,event_idx=off \
    "${dump[@]}" \
    -pidfile "$d/qemu.pid" </dev/null >"$d/qemu.log" 2>&1 &
  local qemu=$!
  # Boot: until the agent says it is ready.
  local line ready=""
  exec 3<>"$d/agent.out"
  local part=""
  while ((SECONDS - t0 < BOOT_TIMEOUT)); do
    if IFS= read -r -t 1 -u 3 line; then
      [[ $part$line == "@@READY" ]] && ready=1 && break
      part=""
    else
      part+=$line
      kill -0 "$qemu" 2>/dev/null || die "qemu exited during boot: $(tail -n 5 "$d/qemu.log")"
    fi
  done
  exec 3<&-
  [[ -n $ready ]] || die "guest did not boot within ${BOOT_TIMEOUT}s"
  log "guest $name booted in $((SECONDS - t0)) s"
  agent_run "$name" 120 "
set -e
for i in \$(seq 100); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
# No IPv6 (router solicitations, MLD and DAD in the captures, GID changes on rxe0).
echo 1 > /proc/sys/net/ipv6/conf/eth0/disable_ipv6
ip link set eth0 up
ip addr add $guest dev eth0
# rxe0 only once the kernel's link watch reported eth0's carrier: that late NETDEV_CHANGE
# would otherwise reach the programs as a second IBV_EVENT_PORT_ACTIVE (libdaplofa logs
# \"dapl async_event: DEV ERR 9\").
for i in \$(seq 100); do [ \"\$(cat /sys/class/net/eth0/operstate)\" = up ] && break; sleep 0.1; done
cat /sys/class/net/eth0/operstate
rdma link add rxe0 type rxe netdev eth0
for i in \$(seq 300); do
  grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state 2>/dev/null && break
  sleep 0.1
done
cat /sys/class/infiniband/rxe0/ports/1/state
grep -q ACTIVE /sys/class/infiniband/rxe0/ports/1/state
" >&2 || die "setting up rxe0 in the guest failed"
  log "guest $name up in $((SECONDS - t0)) s: eth0 $guest, rxe0 ACTIVE, host $host on $tap"
  if [[ -n ${RXE_GUEST_OWNER:-} ]]; then
    # Detached (its own session): it outlives this script and the owner's process group.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec bash "$2" down "$3"' \
      rxe-guest-watch "$RXE_GUEST_OWNER" "$SELF" "$name" </dev/null >/dev/null 2>&1 9>&- &
    echo $! >"$d/watch.pid"
  fi
  trap - EXIT
}

# ---------------------------------------------------------------------------------------------

cmd=${1:-}
[[ -n $cmd ]] || usage
shift
case "$cmd" in
  prepare) prepare ;;
  up)
    (($# >= 4)) || usage
    up "$@"
    ;;
  down)
    (($# == 1)) || usage
    check_name "$1"
    down "$1"
    ;;
  status)
    (($# == 1)) || usage
    check_name "$1"
    if pid=$(qemu_pid "$1"); then
      echo "guest $1 up (qemu pid $pid, tap $(cat "$(state_dir "$1")/tap"))"
    else
      echo "guest $1 not up"
      exit 1
    fi
    ;;
  exec)
    name=${1:-}
    check_name "$name"
    shift
    t=60
    if [[ ${1:-} == -t ]]; then
      t=$2
      shift 2
    fi
    [[ ${1:-} == -- ]] && shift
    (($#)) || usage
    [[ $t =~ ^[0-9]+$ ]] || die "bad timeout '$t'"
    rc=0
    agent_run "$name" "$t" "$*" || rc=$?
    exit "$rc"
    ;;
  spawn)
    name=${1:-}
    job=${2:-}
    check_name "$name"
    [[ $job =~ ^[A-Za-z0-9_-]+$ ]] || die "bad job name '$job'"
    shift 2
    [[ ${1:-} == -- ]] && shift
    (($#)) || usage
    b64=$(printf '%s\n' "$*" | base64 -w0)
    agent_run "$name" 30 "
j=/run/jobs/$job
rm -f \$j.*
echo $b64 | base64 -d > \$j.sh
setsid sh -c 'sh "\$1.sh" </dev/null >"\$1.out" 2>&1; echo \$? >"\$1.rc"' job \$j >/dev/null 2>&1 </dev/null &
echo \$! > \$j.pid
"
    ;;
  collect)
    name=${1:-}
    job=${2:-}
    check_name "$name"
    [[ $job =~ ^[A-Za-z0-9_-]+$ ]] || die "bad job name '$job'"
    shift 2
    t=60
    if [[ ${1:-} == -t ]]; then t=$2; fi
    [[ $t =~ ^[0-9]+$ ]] || die "bad timeout '$t'"
    rc=0
    agent_run "$name" $((t + 10)) "
j=/run/jobs/$job
[ -e \$j.pid ] || { echo 'no job $job'; exit 127; }
i=0
while [ ! -e \$j.rc ] && [ \$i -lt $((t * 10)) ]; do usleep 100000; i=\$((i + 1)); done
if [ ! -e \$j.rc ]; then
  kill -KILL -- -\$(cat \$j.pid) 2>/dev/null
  sleep 0.2
  cat \$j.out
  echo '[job $job killed after ${t}s]'
  exit 124
fi
cat \$j.out
exit \$(cat \$j.rc)
" || rc=$?
    exit "$rc"
    ;;
  *) usage ;;
esac
