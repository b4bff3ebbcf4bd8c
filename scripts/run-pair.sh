#!/usr/bin/env bash
# Runs a two-process benchmark or test: a server and a client of the same program, each with its
# own profile (e.g. dpdk-config/af_packet-a.toml and af_packet-b.toml).
#
#   run-pair.sh <binary> <profile-server> <profile-client> [args...]
#
# 1. Starts `<binary> --profile <profile-server> --server [args...]` in the background, in its
#    own process group, with DPDK_ROCE_READY_FILE set to a file it may create when ready.
# 2. Waits until the server is ready: it printed a line matching $RUN_PAIR_READY (default
#    `^READY`) on stdout, or created the ready file. Fails if the server exits first or after
#    $RUN_PAIR_READY_TIMEOUT seconds (default 30).
# 3. Runs `<binary> --profile <profile-client> --client [args...]`, for at most
#    $RUN_PAIR_TIMEOUT seconds (default 300).
# 4. Waits up to $RUN_PAIR_SERVER_GRACE seconds (default 10) for the server to exit by itself;
#    with RUN_PAIR_STOP_SERVER=1 the server is sent SIGTERM as soon as the client is done (for
#    servers that run until stopped), and its exit by that signal counts as success.
# 5. Prints both outputs (stdout and stderr of each, headed `== server ==` / `== client ==`).
#
# Exit status: 0 if both succeeded; else the client's status if it failed, else the server's;
# 3 if the server never became ready; 124 if the client or the server had to be stopped after its
# time limit. On any exit (failure, Ctrl-C, SIGTERM) every process it started is killed (SIGTERM,
# then SIGKILL after 2 s, whole process groups) and nothing is left running.
# Outputs stay in $RUN_PAIR_OUT when it is given; otherwise they go to a new directory under
# ${TMPDIR:-/tmp}, which is removed after a run that succeeded (both outputs were printed) and
# kept, and named, after one that failed.
# Changes made: none beyond the processes it starts and the output directory, except that a
# process it had to stop loses its EAL runtime directory: a DPDK process killed by a signal
# cannot remove `/var/run/dpdk/<name>-<pid>` itself (the default file prefix ends with the
# pid), so the script removes `$RUN_PAIR_DPDK_RUNTIME_DIR/*-<pid>` (default /var/run/dpdk)
# once that process is gone.
set -euo pipefail

if (($# < 3)); then
  echo "usage: $0 <binary> <profile-server> <profile-client> [args...]" >&2
  exit 2
fi
bin=$1 server_profile=$2 client_profile=$3
shift 3

READY_RE=${RUN_PAIR_READY:-^READY}
READY_TIMEOUT=${RUN_PAIR_READY_TIMEOUT:-30}
CLIENT_TIMEOUT=${RUN_PAIR_TIMEOUT:-300}
GRACE=${RUN_PAIR_SERVER_GRACE:-10}
STOP_SERVER=${RUN_PAIR_STOP_SERVER:-0}
for n in "$READY_TIMEOUT" "$CLIENT_TIMEOUT" "$GRACE"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "run-pair: timeouts must be whole seconds, got '$n'" >&2; exit 2; }
done
for f in "$server_profile" "$client_profile"; do
  [[ -r $f ]] || { echo "run-pair: profile $f not readable" >&2; exit 2; }
done
if [[ $bin != */* ]]; then
  bin=$(command -v "$bin") || { echo "run-pair: $1 not found" >&2; exit 2; }
fi
[[ -x $bin ]] || { echo "run-pair: $bin is not executable" >&2; exit 2; }

own_out=""
if [[ -z ${RUN_PAIR_OUT:-} ]]; then
  own_out=1
fi
out=${RUN_PAIR_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/run-pair.XXXXXX")}
mkdir -p "$out"
ready_file=$out/server.ready
rm -f "$ready_file"

# Process ids of the two runs; each leads its own process group (setsid), and the group ids are
# kept after the leader exits so children it left behind are killed too.
server_pid="" client_pid="" server_pgid="" client_pgid=""
# wait_child's timer while it waits (the cleanup ends it).
timer=""

# The EAL runtime directories of process `pid`, which was just stopped (see "Changes made"; a
# zombie not yet reaped still answers `kill -0`, so the caller's stopping is what counts).
remove_runtime_dirs() {
  local pid=$1 d
  for d in "${RUN_PAIR_DPDK_RUNTIME_DIR:-/var/run/dpdk}"/*-"$pid"; do
    [[ -d $d ]] && rm -rf -- "$d"
  done
  return 0
}

# wait_child PID SECONDS: waits for this shell's child PID to exit, for at most SECONDS; sets
# child_rc to its exit status, or to "" when the time ran out (PID still running). It blocks in
# `wait` until the child or a timer child ends instead of polling: a poll loop's fork and exec
# of `sleep` every 50 ms took about 2 ms of a poll core each time (`perf sched timehist` during
# bench/congestion.sh), a stall in the tail of every latency measured beside it.
wait_child() {
  local pid=$1 done_pid rc
  child_rc=""
  sleep "$2" &
  timer=$!
  while :; do
    done_pid="" rc=0
    wait -n -p done_pid "$pid" "$timer" || rc=$?
    if [[ ${done_pid:-} == "$pid" ]]; then
      child_rc=$rc
      break
    fi
    # The timer ended, or no child is left to wait for; a trapped signal (no pid) waits again.
    [[ -z ${done_pid:-} ]] && kill -0 "$timer" 2>/dev/null && kill -0 "$pid" 2>/dev/null && continue
    break
  done
  kill "$timer" 2>/dev/null || true
  wait "$timer" 2>/dev/null || true
  timer=""
}

# Kill a process group started by this script: TERM, then KILL after 2 s.
stop_group() {
  local pid=$1
  [[ -n $pid ]] || return 0
  kill -TERM -- "-$pid" 2>/dev/null || return 0
  local i
  for ((i = 0; i < 20; i++)); do
    if ! kill -0 -- "-$pid" 2>/dev/null; then
      remove_runtime_dirs "$pid"
      return 0
    fi
    sleep 0.1
  done
  kill -KILL -- "-$pid" 2>/dev/null || true
  sleep 0.1
  remove_runtime_dirs "$pid"
}

print_outputs() {
  local who
  for who in server client; do
    [[ -e $out/$who.out ]] || continue
    echo "== $who =="
    cat "$out/$who.out"
    if [[ -s $out/$who.err ]]; then
      echo "-- $who stderr --"
      cat "$out/$who.err"
    fi
  done
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -z $timer ]] || kill "$timer" 2>/dev/null || true
  stop_group "$client_pgid"
  stop_group "$server_pgid"
  # Reap what we started so no zombie outlives us.
  wait 2>/dev/null || true
  print_outputs
  if [[ $rc -eq 0 && -n $own_out ]]; then
    rm -rf -- "$out"
  else
    echo "run-pair: outputs in $out" >&2
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Start the server in its own process group (setsid) so the whole tree can be killed.
DPDK_ROCE_READY_FILE=$ready_file setsid "$bin" --profile "$server_profile" --server "$@" \
  >"$out/server.out" 2>"$out/server.err" </dev/null &
server_pid=$!
server_pgid=$server_pid

deadline=$((SECONDS + READY_TIMEOUT))
until [[ -e $ready_file ]] || grep -qE -- "$READY_RE" "$out/server.out"; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    rc=0
    wait "$server_pid" || rc=$?
    server_pid=""
    echo "run-pair: the server exited (status $rc) before it was ready" >&2
    exit 3
  fi
  if ((SECONDS >= deadline)); then
    echo "run-pair: the server was not ready within ${READY_TIMEOUT}s" >&2
    exit 3
  fi
  sleep 0.05
done
echo "run-pair: server ready, starting the client" >&2

setsid "$bin" --profile "$client_profile" --client "$@" \
  >"$out/client.out" 2>"$out/client.err" </dev/null &
client_pid=$!
client_pgid=$client_pid

# Wait for the client, stopping it after its time limit.
wait_child "$client_pid" "$CLIENT_TIMEOUT"
client_rc=$child_rc
if [[ -z $client_rc ]]; then
  echo "run-pair: the client did not finish within ${CLIENT_TIMEOUT}s; stopping it" >&2
  stop_group "$client_pid"
  wait "$client_pid" 2>/dev/null || true
  client_rc=124
fi
client_pid=""

# Then the server.
server_rc=0
if [[ $STOP_SERVER == 1 ]]; then
  stop_group "$server_pid"
  wait "$server_pid" || server_rc=$?
  # Stopped on request: SIGTERM (143) is the expected end.
  ((server_rc == 143)) && server_rc=0
else
  wait_child "$server_pid" "$GRACE"
  server_rc=$child_rc
  if [[ -z $server_rc ]]; then
    echo "run-pair: the server did not exit within ${GRACE}s after the client; stopping it" >&2
    stop_group "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_rc=124
  fi
fi
server_pid=""

if ((client_rc != 0)); then
  echo "run-pair: client failed (status $client_rc)" >&2
  exit "$client_rc"
fi
if ((server_rc != 0)); then
  echo "run-pair: server failed (status $server_rc)" >&2
  exit "$server_rc"
fi
echo "run-pair: both succeeded" >&2
exit 0
