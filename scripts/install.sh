#!/usr/bin/env bash
# Installs dpdk-roce for the whole machine: the DAT provider library, the profiles, the
# command-line tools, and entries in the DAT registry (/etc/dat.conf), so that any uDAPL program
# opens a shipped profile by name without DAT_OVERRIDE (`dtest -P dpdk-roce-af_packet-a`).
#
# Changes made:
#   install [PREFIX]  (PREFIX default /usr/local, absolute) builds the release artifacts if
#                     needed (`cargo build --release` of the library and the tools, in
#                     $CARGO_TARGET_DIR or target/), or takes them from $DPDK_ROCE_ARTIFACTS
#                     (a directory holding libdpdk_roce.so and the tools; nothing is built), then
#                     copies, creating the directories that are missing:
#                       libdpdk_roce.so                        -> PREFIX/lib/dpdk-roce/
#                       dpdk-config/*.toml and its README.md   -> PREFIX/share/dpdk-roce/
#                       roce-tool, roce-lat, roce-bw, roce-soak -> PREFIX/bin/
#                     and adds one block to the DAT registry file $DAT_CONF (default
#                     /etc/dat.conf; created if missing), between the lines
#                     "# BEGIN dpdk-roce ..." and "# END dpdk-roce": one entry per installed
#                     profile but the examples (nic-example), IA name dpdk-roce-<profile name>,
#                     written by the installed `roce-tool dat-conf` with absolute paths. The rest
#                     of the file keeps its bytes (a newline is added after a last line that had
#                     none, and taken away again by uninstall).
#                     Everything it adds is recorded in a manifest, $DPDK_ROCE_STATE_DIR
#                     (default /var/lib/dpdk-roce)/install.manifest: each file with its SHA-256,
#                     each directory it created, whether it created $DAT_CONF and the state
#                     directory.
#   uninstall         removes exactly what the manifest records: the files (a file changed
#                     since install is kept, and said so), the directories it created (when
#                     empty), its block of $DAT_CONF (and the file itself if install created it
#                     and nothing else is in it), the manifest and the state directory if
#                     install created it. Without a manifest it does nothing.
#   status            changes nothing; shows what is installed and the entries of $DAT_CONF.
# Idempotent: `install` again replaces changed files and the block (never a second block);
# `uninstall` twice removes once. `install` refuses to overwrite a file it did not install, to
# install into a second PREFIX while one is installed, and to touch a $DAT_CONF holding a
# dpdk-roce block it has no manifest of. A failing first `install` undoes what it did.
# Concurrent runs are serialised by a lock on this script.
# Environment: DAT_CONF, DPDK_ROCE_STATE_DIR, DPDK_ROCE_ARTIFACTS, CARGO_TARGET_DIR.
set -euo pipefail

usage() {
  echo "usage: $0 install [PREFIX] | uninstall | status" >&2
  exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DAT_CONF=${DAT_CONF:-/etc/dat.conf}
STATE_DIR=${DPDK_ROCE_STATE_DIR:-/var/lib/dpdk-roce}
MANIFEST=$STATE_DIR/install.manifest
LIB=libdpdk_roce.so
TOOLS=(roce-tool roce-lat roce-bw roce-soak)
# Profiles installed as examples to copy, without a registry entry (no usable port here).
EXAMPLES=(nic-example)
BEGIN="# BEGIN dpdk-roce (scripts/install.sh; \`install.sh uninstall\` removes this block)"
END="# END dpdk-roce"

cmd=${1:-}
[[ -n $cmd ]] || usage

say() { echo "install: $*"; }
die() {
  echo "install: $*" >&2
  exit 1
}

# Fails unless this user may change $1 (the path, or the nearest directory above it that exists).
need_write() {
  local p=$1
  while [[ ! -e $p ]]; do p=$(dirname "$p"); done
  if [[ ! -w $p ]]; then
    if [[ $EUID -ne 0 ]]; then
      die "'$cmd' changes $1: run as root"
    fi
    die "cannot write $1"
  fi
}

lock() {
  exec 9<"${BASH_SOURCE[0]}"
  flock 9
}

# The manifest: one record a line, "<kind> <value>" or "file <sha256> <path>"; paths hold no
# white space (install refuses such a PREFIX: dat.conf could not name it).
record() {
  if ! grep -Fxq -- "$*" "$MANIFEST" 2>/dev/null; then
    echo "$*" >>"$MANIFEST"
  fi
}
# Records the file $1 with its SHA-256 (a file recorded before keeps its place).
record_file() {
  local sum
  sum=$(sha256sum "$1" | cut -d' ' -f1)
  if [[ -z $(recorded_file_sum "$1") ]]; then
    record "file $sum $1"
    return
  fi
  local tmp
  tmp=$(mktemp "$MANIFEST.XXXXXX")
  awk -v p="$1" -v s="$sum" '$1 == "file" && $3 == p { $2 = s } { print }' "$MANIFEST" >"$tmp"
  mv -f "$tmp" "$MANIFEST"
}
recorded() { grep -E "^$1 " "$MANIFEST" 2>/dev/null | cut -d' ' -f2- || true; }
recorded_file_sum() { awk -v p="$1" '$1 == "file" && $3 == p { print $2 }' "$MANIFEST"; }

# mkdir -p that records each directory it creates, outermost first.
make_dir() {
  local d=$1 missing=()
  while [[ ! -d $d ]]; do
    missing=("$d" "${missing[@]}")
    d=$(dirname "$d")
  done
  for d in "${missing[@]}"; do
    mkdir "$d"
    record "dir $d"
  done
}

# The real file behind $DAT_CONF (it may be a symbolic link).
conf_file() { readlink -m -- "$DAT_CONF"; }

has_block() { [[ -f $1 ]] && grep -Fxq -- "$BEGIN" "$1"; }

# Whether the file $1 is empty or ends with a newline.
ends_in_newline() { [[ ! -s $1 || -z $(tail -c1 "$1") ]]; }

# $1 without the lines from $BEGIN to $END, to stdout (every line ends with a newline).
without_block() {
  awk -v b="$BEGIN" -v e="$END" '$0 == b { skip = 1 } !skip { print } skip && $0 == e { skip = 0 }' "$1"
}

# Replaces the file $2 by $1, keeping $2's mode and owner (a new file gets 0644).
replace_file() {
  if [[ -e $2 ]]; then
    chmod --reference="$2" "$1"
    chown --reference="$2" "$1"
  else
    chmod 0644 "$1"
  fi
  mv -f "$1" "$2"
}

artifacts() {
  if [[ -n ${DPDK_ROCE_ARTIFACTS:-} ]]; then
    echo "$DPDK_ROCE_ARTIFACTS"
    return
  fi
  command -v cargo >/dev/null ||
    die "cargo not found: build first (cargo build --release) and set DPDK_ROCE_ARTIFACTS=target/release"
  local bins=()
  local t
  for t in "${TOOLS[@]}"; do bins+=(--bin "$t"); done
  echo "install: cargo build --release (nothing to do when up to date)" >&2
  (cd "$REPO" && cargo build --release --lib "${bins[@]}" >&2)
  local target=${CARGO_TARGET_DIR:-target}
  [[ $target == /* ]] || target=$REPO/$target
  echo "$target/release"
}

# Copies $1 to $2 with mode $3 and records it; an identical file is left alone.
put() {
  local src=$1 dst=$2 mode=$3
  if [[ -e $dst ]] && cmp -s "$src" "$dst"; then
    chmod "$mode" "$dst"
  else
    install -m "$mode" "$src" "$dst"
  fi
  record_file "$dst"
}

# Of install_, global for its EXIT trap: whether a manifest existed before, its temporary files.
had_manifest=0 block_tmp="" conf_tmp=""
install_() {
  local prefix=${1:-/usr/local}
  [[ $prefix == /* ]] || die "PREFIX '$prefix' is not an absolute path"
  [[ ! $prefix =~ [[:space:]\"] ]] || die "PREFIX '$prefix' holds white space or '\"' (dat.conf cannot name it)"
  prefix=${prefix%/}
  [[ -n $prefix ]] || die "PREFIX / is not supported: use /usr or /usr/local"
  local conf
  conf=$(conf_file)
  need_write "$prefix"
  need_write "$conf"
  need_write "$STATE_DIR"
  lock

  if [[ -f $MANIFEST ]]; then
    had_manifest=1
    local old
    old=$(recorded prefix)
    [[ $old == "$prefix" ]] || die "already installed in $old: uninstall that first"
    old=$(recorded datconf)
    [[ -z $old || $old == "$conf" ]] || die "installed with DAT_CONF=$old: uninstall that first"
  elif has_block "$conf"; then
    die "$conf has a dpdk-roce block but there is no manifest ($MANIFEST): remove the block by hand"
  fi

  local src
  src=$(artifacts)
  local f
  for f in "$LIB" "${TOOLS[@]}"; do
    [[ -f $src/$f ]] || die "$src/$f missing (build: cargo build --release)"
  done
  local libdir=$prefix/lib/dpdk-roce share=$prefix/share/dpdk-roce bindir=$prefix/bin
  local profiles=() p
  for p in "$REPO"/dpdk-config/*.toml; do profiles+=("$(basename "$p")"); done
  ((${#profiles[@]})) || die "no profiles in $REPO/dpdk-config"

  # Every destination is new or ours: checked before anything changes.
  local dsts=("$libdir/$LIB" "$share/README.md")
  for p in "${profiles[@]}"; do dsts+=("$share/$p"); done
  for f in "${TOOLS[@]}"; do dsts+=("$bindir/$f"); done
  for f in "${dsts[@]}"; do
    if [[ -e $f || -L $f ]] && [[ -z $(recorded_file_sum "$f") ]]; then
      die "$f exists and was not installed by this script: not overwriting it"
    fi
  done

  rollback() {
    local rc=$?
    rm -f "$block_tmp" "$conf_tmp"
    if ((rc != 0)); then
      if ((had_manifest)); then
        echo "install: failed; what it changed is recorded: \`$0 uninstall\` removes it" >&2
      else
        echo "install: failed, undoing this invocation's changes" >&2
        uninstall_ >&2 || true
      fi
    fi
    exit "$rc"
  }
  trap rollback EXIT

  if [[ ! -d $STATE_DIR ]]; then
    mkdir -p "$STATE_DIR"
    : >"$MANIFEST"
    record "statedir created"
  fi
  [[ -f $MANIFEST ]] || : >"$MANIFEST"
  record "prefix $prefix"

  make_dir "$libdir"
  make_dir "$share"
  make_dir "$bindir"
  put "$src/$LIB" "$libdir/$LIB" 0755
  for p in "${profiles[@]}"; do put "$REPO/dpdk-config/$p" "$share/$p" 0644; done
  put "$REPO/dpdk-config/README.md" "$share/README.md" 0644
  for f in "${TOOLS[@]}"; do put "$src/$f" "$bindir/$f" 0755; done

  # The registry entries, written by the installed tool from the installed files.
  local entries=() name
  for p in "${profiles[@]}"; do
    name=${p%.toml}
    if [[ " ${EXAMPLES[*]} " != *" $name "* ]]; then entries+=("$share/$p"); fi
  done
  block_tmp=$(mktemp)
  {
    echo "$BEGIN"
    "$bindir/roce-tool" dat-conf --lib "$libdir/$LIB" "${entries[@]}"
    echo "$END"
  } >"$block_tmp"

  record "datconf $conf"
  conf_tmp=$(mktemp "$conf.dpdk-roce.XXXXXX")
  if [[ -f $conf ]]; then
    [[ -n $(recorded conf) ]] || record "conf existed"
    # A last line without a newline gets one before the block (uninstall takes it away);
    # awk ends every line it prints with one.
    if ! ends_in_newline "$conf"; then record "newline added"; fi
    without_block "$conf" >"$conf_tmp"
  else
    # Missing (again, if someone removed it since): install creates it.
    sed -i '/^conf /d' "$MANIFEST"
    record "conf created"
  fi
  cat "$block_tmp" >>"$conf_tmp"
  rm -f "$block_tmp"
  if [[ -f $conf ]] && cmp -s "$conf_tmp" "$conf"; then
    rm -f "$conf_tmp"
  else
    replace_file "$conf_tmp" "$conf"
  fi
  trap - EXIT
  say "installed in $prefix: $libdir/$LIB, ${#profiles[@]} profiles in $share, ${TOOLS[*]} in $bindir"
  say "$conf: ${#entries[@]} entries (dpdk-roce-<profile>), e.g. dtest -P dpdk-roce-af_packet-a"
}

uninstall_() {
  if [[ ! -f $MANIFEST ]]; then
    say "uninstall: nothing to undo (no manifest at $MANIFEST)"
    return 0
  fi
  local conf
  conf=$(recorded datconf)
  [[ -n $conf ]] || conf=$(conf_file)
  need_write "$conf"
  need_write "$MANIFEST"

  # Files.
  local sum path now kept=0
  while read -r sum path; do
    if [[ ! -e $path ]]; then
      continue
    fi
    now=$(sha256sum "$path" | cut -d' ' -f1)
    if [[ $now != "$sum" ]]; then
      echo "install: $path changed since install: kept" >&2
      kept=1
      continue
    fi
    rm -f "$path"
  done < <(awk '$1 == "file" { print $2, $3 }' "$MANIFEST")

  # Directories, innermost (last created) first, each only when empty.
  local d
  while read -r d; do
    [[ -d $d ]] || continue
    if ! rmdir "$d" 2>/dev/null; then
      echo "install: $d is not empty: kept" >&2
      kept=1
    fi
  done < <(recorded dir | tac)

  # The block of the registry file.
  if [[ -f $conf ]] && has_block "$conf"; then
    local tmp
    tmp=$(mktemp "$conf.dpdk-roce.XXXXXX")
    without_block "$conf" >"$tmp"
    if [[ -n $(recorded newline) ]] && [[ -s $tmp ]] && ends_in_newline "$tmp"; then
      truncate -s -1 "$tmp"
    fi
    if [[ $(recorded conf) == created && ! -s $tmp ]]; then
      rm -f "$tmp" "$conf"
      say "uninstall: removed $conf (install created it)"
    else
      replace_file "$tmp" "$conf"
      say "uninstall: removed the dpdk-roce block of $conf"
    fi
  fi

  local made_state
  made_state=$(recorded statedir)
  rm -f "$MANIFEST"
  if [[ $made_state == created ]]; then
    rmdir "$STATE_DIR" 2>/dev/null || echo "install: $STATE_DIR is not empty: kept" >&2
  fi
  if ((kept)); then
    say "uninstall: done, keeping what changed since install (above)"
  else
    say "uninstall: done"
  fi
}

status() {
  local conf
  conf=$(conf_file)
  if [[ -f $MANIFEST ]]; then
    say "installed in $(recorded prefix) (manifest $MANIFEST)"
    local sum path state
    while read -r sum path; do
      if [[ ! -e $path ]]; then
        state=missing
      elif [[ $(sha256sum "$path" | cut -d' ' -f1) == "$sum" ]]; then
        state=ok
      else
        state="changed since install"
      fi
      echo "  $path: $state"
    done < <(awk '$1 == "file" { print $2, $3 }' "$MANIFEST")
    conf=$(recorded datconf)
  else
    say "not installed (no manifest at $MANIFEST)"
  fi
  if has_block "$conf"; then
    say "$conf: dpdk-roce entries:"
    awk -v b="$BEGIN" -v e="$END" '$0 == e { inside = 0 } inside && !/^#/ { print "  " $1 } $0 == b { inside = 1 }' "$conf"
  else
    say "$conf: no dpdk-roce entries"
  fi
}

case $cmd in
  install)
    (($# <= 2)) || usage
    install_ "${2:-}"
    ;;
  uninstall)
    (($# == 1)) || usage
    lock
    uninstall_
    ;;
  status)
    (($# == 1)) || usage
    status
    ;;
  *) usage ;;
esac
