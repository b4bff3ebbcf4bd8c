#!/usr/bin/env bash
# Installs everything the build and the tests need on a fresh Debian 12 machine (as root).
# Idempotent: packages already present are not reinstalled, and `apt-get update` runs only
# when something is missing.
#
# Changes made: Debian packages listed in PACKAGES below; the PyPI package hdrhistogram in
# target/python.
set -euo pipefail

PACKAGES=(
  build-essential   # cc for crates that build C
  pkg-config        # finds system libraries (DPDK's libdpdk.pc in the DPDK issue)
  tshark            # the tests check every capture we write decodes without malformed frames
  dpdk              # DPDK 22.11 runtime: EAL, ethdev and the PMDs (net_af_packet, net_tap...)
  dpdk-dev          # DPDK tools (dpdk-testpmd, dpdk-hugepages.py, dpdk-telemetry.py)
  libdpdk-dev       # DPDK headers and libdpdk.pc: dpdk-sys builds against them
  libclang-dev      # bindgen (scripts/bindings.sh, regenerating dpdk-sys/dat-sys bindings) loads libclang
  libdapl-dev       # DAT 2.0 headers (dat-sys: the provider table, types, IB extensions)
  libdapl2          # libdat2, the DAT registry that loads the provider through dat.conf
  dapl2-utils       # dtest, dtestx, dtestcm, dtestsrq, dapltest: the uDAPL programs run on it
  clang             # the C compiler bindgen's libclang pairs with; also builds scripts/bpf/ce_marker.c (-target bpf)
  libbpf-dev        # bpf/bpf_helpers.h for scripts/bpf/ce_marker.c, the ECN marker of scripts/bottleneck.sh
  iproute2          # `ip link` veth/tap set-up in the DPDK port tests
  ethtool           # scripts/veth.sh turns scatter-gather off on the veth ends
  arping            # the net_tap test: the kernel arpings the provider's address
  python3           # tests/roce_bw.rs sends another VLAN's frames through a packet socket
  python3-pip       # installs the PyPI hdrhistogram package (below)
  util-linux        # flock, setsid, mount (scripts/)
  sockperf          # scripts/sockperf-baseline.sh: the kernel UDP busy-poll latency baseline
  fonts-dejavu-core # the TrueType font roce-tool plot and roce-bw --plot draw text with
  qemu-system-x86   # scripts/rxe-guest.sh boots the soft-RoCE guest (TCG) for tests/interop_rxe.rs
  busybox-static    # scripts/rxe-guest.sh: the guest initramfs's shell and tools
  kmod              # depmod/modprobe -d order the guest kernel's modules (scripts/rxe-guest.sh)
  cpio              # scripts/rxe-guest.sh packs the guest initramfs
  rdma-core         # rdma-core, the reference RDMA userspace the rxe guest runs (its libraries below)
  ibverbs-providers # librxe-rdmav34.so and rxe.driver, copied into the rxe guest
  libibverbs1       # libibverbs, copied into the rxe guest
  librdmacm1        # librdmacm (libdaplofa's connection manager), copied into the rxe guest
  ibverbs-utils     # ibv_devinfo in the rxe guest (diagnostics)
  perftest          # ib_write_bw / ib_write_lat: tests/perftest_formats.rs reads their format strings
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  if [[ $EUID -ne 0 ]]; then
    echo "setup: missing packages ${missing[*]} and not root: run as root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture; answer no without a prompt.
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The HdrHistogram reference implementation from PyPI, which tests/hgrm_reference.rs compares
# roce-lat's .hgrm output with, in target/python (not the system's Python).
HDRH_VERSION=0.10.8
cd "$(dirname "$0")/.."
if [[ ! -f target/python/hdrhistogram-$HDRH_VERSION.dist-info/METADATA ]]; then
  echo "setup: installing the PyPI hdrhistogram $HDRH_VERSION into target/python"
  python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --root-user-action=ignore \
    --target target/python "hdrhistogram==$HDRH_VERSION"
fi

command -v cargo >/dev/null || { echo "setup: cargo not found (the machine's Rust toolchain is required)" >&2; exit 1; }
command -v tshark >/dev/null || { echo "setup: tshark still missing after install" >&2; exit 1; }
echo "setup: ok"
