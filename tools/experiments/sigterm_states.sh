#!/usr/bin/env bash
# SIGTERM in every state of a gossip node, with real processes (Note
# [Stopping] in node/daemon/gossip/gossip_daemon.cc): `skipswarm node` on
# loopback, tiny model, every port chosen by the OS (--listen=127.0.0.1:0;
# joiners learn the founder's port from its "listening on" line). For each
# state it sends one SIGTERM, measures the time until the process exits, and
# checks the exit code (0) and the checkpoint it wrote (the node's
# "checkpoint of step N written" line and the file's time after the signal).
#
#   founding      a founder waiting for a swarm that never forms
#                 (--expect_members=3, nobody else): the wait ends at once
#                 and it saves the state it was built with (step 0: nothing
#                 trained), with the line "stopped by a signal while waiting
#                 for the swarm to form; nothing trained, exiting"
#   training      a replica of stage 1 with two other replicas: a drain
#                 (announces LEFT, finishes its iteration, checkpoints)
#   last replica  stage 2's only replica while the swarm trains: it cannot
#                 leave without losing the stage, so it stops after the
#                 current iteration with a checkpoint
#   paused drain  a replica of stage 1 after stage 2 went: the data node
#                 cannot plan (training paused), no iteration will finish
#   paused last   stage 1's last replica and the data node (stage 0), paused
#   joining       a joiner for stage 2 while the swarm is paused (no replica
#                 of stage 2 to fetch from, no copies): SIGTERM at its
#                 "listening on" line (start-up: bootstrap, model build,
#                 stage choice), and 2 s after it (waiting for a source). It
#                 has trained nothing, so it must exit 0 WITHOUT writing a
#                 checkpoint: the stage file a previous run left in its
#                 directory must be unchanged (Note [Stopping while joining]
#                 in node/daemon/gossip/gossip_daemon_join.cc)
#   second signal a node whose first stop is in progress gets a second
#                 SIGTERM: it exits at once (exit code 143, no checkpoint)
#   local         `skipswarm local` (default 6-node layout, tiny model): a
#                 terminal's Ctrl-C (SIGINT to its process group) and a
#                 SIGTERM to the launcher alone; every node must stop with
#                 its checkpoint (files in LOCAL_DIR/checkpoints newer than
#                 the signal) and the launcher exit 0
#
# The stop bound is 30 s (GossipDaemonOptions.stop_timeout). Output: one
# line per state, "state | exit s | rc | checkpoint step", and a verdict;
# every node's log in OUT. Exit 1 when a state took longer than LIMIT_S, did
# not exit 0 or left no checkpoint.
#
#   bash tools/experiments/sigterm_states.sh                # ~2-4 minutes
#
# Environment: BIN (default: a copy of bazel-bin/cli/skipswarm), OUT (default
# /tmp/skipswarm-sigterm), LIMIT_S (30), WARM_ITERS (iterations trained before
# the first training-state signal; 5).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-sigterm}
LIMIT_S=${LIMIT_S:-30}
WARM_ITERS=${WARM_ITERS:-5}
rm -rf "$OUT" && mkdir -p "$OUT"
BIN=${BIN:-$OUT/skipswarm}
[ -x "$BIN" ] || cp bazel-bin/cli/skipswarm "$BIN"
MODEL=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)
COMMON=(--insecure --swarm_name="sigterm-$$" --listen=127.0.0.1:0 --control_port=-1
        --node_iterations=100000 --node_mbs=2 --memory_slots=2 --startup_timeout_s=120)
declare -A PID
FAILED=0
ROWS=()

start_node() {  # NAME STAGES [flags...]: runs `skipswarm node` in the background
  local name=$1 stages=$2
  shift 2
  "$BIN" node "${MODEL[@]}" "${COMMON[@]}" --name="$name" --host_stages="$stages" \
      --checkpoint_dir="$OUT/ckpt-$name" "$@" > "$OUT/$name.log" 2>&1 &
  PID[$name]=$!
}

wait_for() {  # FILE REGEX SECONDS: 0 once a line of FILE matches
  local deadline=$(( $(date +%s) + $3 ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  echo "timed out after $3 s waiting for /$2/ in $1" >&2
  return 1
}

last_iteration() {  # NAME -> the last "[NAME] it N" the node printed (-1: none)
  grep -oE "\[$1\] it [0-9]+" "$OUT/$1.log" | tail -1 | awk '{ print $3 + 0 } END { if (NR == 0) print -1 }'
}

# SIGTERM NAME, wait for its exit; record STATE | seconds | rc | checkpoint step.
sigterm() {  # NAME STATE
  local name=$1 state=$2 pid=${PID[$1]} rc=0
  local mark="$OUT/.before-$name"
  touch "$mark"
  local t0 t1
  t0=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  t1=$(date +%s.%N)
  local secs step ckpt="-"
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  step=$(grep -oE "checkpoint of step [0-9]+ written" "$OUT/$name.log" | tail -1 | awk '{ print $4 }')
  if [ -n "$step" ] && [ -n "$(find "$OUT/ckpt-$name" -name '*.ckpt' -newer "$mark" 2>/dev/null)" ]; then
    ckpt=$step
  fi
  local verdict=ok
  if [ "$rc" -ne 0 ] || [ "$ckpt" = "-" ] ||
     awk -v s="$secs" -v l="$LIMIT_S" 'BEGIN { exit !(s > l) }'; then
    verdict=FAIL
    FAILED=1
  fi
  ROWS+=("$state | $name | $secs s | $rc | $ckpt | $verdict")
  echo "$state ($name): exit $rc after $secs s, checkpoint step $ckpt: $verdict"
}

# SIGTERM a joiner; record STATE | seconds | rc | its checkpoint directory
# untouched (a previous run's stage file unchanged, no other file).
sigterm_joiner() {  # NAME STATE
  local name=$1 state=$2 pid=${PID[$1]} rc=0 dir="$OUT/ckpt-$1"
  local before t0 t1 secs after files verdict=ok
  before=$(sha256sum "$dir/$name-stage-2.ckpt" | awk '{ print $1 }')
  t0=$(date +%s.%N)
  kill -TERM "$pid"
  wait "$pid" || rc=$?
  t1=$(date +%s.%N)
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  after=$(sha256sum "$dir/$name-stage-2.ckpt" 2>/dev/null | awk '{ print $1 }')
  files=$(find "$dir" -type f | wc -l)
  local kept="untouched"
  if [ "$before" != "$after" ] || [ "$files" -ne 1 ]; then kept="CHANGED ($files files)"; fi
  if [ "$rc" -ne 0 ] || [ "$kept" != untouched ] ||
     awk -v s="$secs" -v l="$LIMIT_S" 'BEGIN { exit !(s > l) }'; then
    verdict=FAIL
    FAILED=1
  fi
  ROWS+=("$state | $name | $secs s | $rc | none; directory $kept | $verdict")
  echo "$state ($name): exit $rc after $secs s, checkpoint directory $kept: $verdict"
}

start_joiner() {  # NAME: a joiner for stage 2 with a previous run's stage file
  mkdir -p "$OUT/ckpt-$1"
  head -c 4096 /dev/urandom > "$OUT/ckpt-$1/$1-stage-2.ckpt"
  start_node "$1" 2 --join="$addr"
  wait_for "$OUT/$1.log" "listening on" 120
}

cleanup() {
  for p in "${PID[@]}"; do kill -KILL "$p" 2>/dev/null; done
}
trap cleanup EXIT

founder_address() {  # NAME -> the HOST:PORT it advertises
  wait_for "$OUT/$1.log" "advertised as" 60 || return 1
  grep -m1 -oE "advertised as [^ ]+" "$OUT/$1.log" | awk '{ print $3 }'
}

echo "load: $(uptime | sed 's/.*load average: //')"

# 1. Founding: a founder alone, expecting 3 members.
start_node f0 0 --expect_members=3
founder_address f0 > /dev/null || exit 1
sleep 1  # inside the wait for the swarm (it polls every 50 ms)
sigterm f0 founding
grep -m1 -oE "stopped by a signal while waiting for the swarm to form[^\"]*" "$OUT/f0.log" || {
  echo "founding: no line saying why it exited"; FAILED=1; }

# 2.-5. One swarm: d0 (stage 0, the data node), a, a2, a3 (stage 1), b (stage 2).
start_node d0 0 --expect_members=5
addr=$(founder_address d0) || exit 1
for n in a a2 a3; do start_node "$n" 1 --expect_members=5 --join="$addr"; done
start_node b 2 --expect_members=5 --join="$addr"
wait_for "$OUT/a3.log" "\[a3\] it $WARM_ITERS( |$)" 300 || exit 1
sigterm a3 "training (drain)"
sigterm b "last replica (training)"
# Training pauses: d0 cannot plan without stage 2 (one line when it pauses).
wait_for "$OUT/d0.log" "pause" 60 || echo "note: no pause line from d0"
at=$(last_iteration d0)
sleep 3
[ "$(last_iteration d0)" -le $(( at + 1 )) ] || { echo "d0 did not pause"; FAILED=1; }
# Joiners of the lost stage: nothing to fetch from, so they stay in the join.
start_joiner j1 && sigterm_joiner j1 "joining, start-up (at its 'listening on' line)"
start_joiner j2 && sleep 2 && sigterm_joiner j2 "joining, waiting for a source (2 s later)"
sigterm a2 "paused (drain)"
sigterm a "paused, last replica"
sigterm d0 "paused, data node"

# 6. A second signal while the first stop is in progress: a 3-node swarm,
# e2 (stage 2) stalled with SIGSTOP so e1's iteration cannot finish, then
# SIGTERM e1 twice, 0.3 s apart.
start_node e0 0 --expect_members=3
addr=$(founder_address e0) || exit 1
start_node e1 1 --expect_members=3 --join="$addr"
start_node e2 2 --expect_members=3 --join="$addr"
wait_for "$OUT/e1.log" "\[e1\] it $WARM_ITERS( |$)" 300 || exit 1
kill -STOP "${PID[e2]}"
sleep 0.5
kill -TERM "${PID[e1]}"
# 0.3 s: a stalled hop fails its ack deadline after 1 s and ends e1's
# iteration, so a second signal 1 s later found the first stop done.
sleep 0.3
t0=$(date +%s.%N)
kill -TERM "${PID[e1]}"
rc=0
wait "${PID[e1]}" || rc=$?
t1=$(date +%s.%N)
secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
verdict=ok
if [ "$rc" -eq 0 ]; then
  verdict="not exercised: the first stop ended before the second signal"
elif [ "$rc" -ne 143 ] || ! awk -v s="$secs" 'BEGIN { exit !(s < 1) }'; then
  verdict=FAIL
  FAILED=1
fi
ROWS+=("second SIGTERM 0.3 s after the first | e1 | $secs s (from the second) | $rc | - | $verdict")
echo "second signal (e1): exit $rc $secs s after the second SIGTERM: $verdict"
kill -CONT "${PID[e2]}"
for n in e0 e2; do kill -INT "${PID[$n]}"; done
for n in e0 e2; do wait "${PID[$n]}" 2>/dev/null; done

# 7. `skipswarm local`: a terminal's Ctrl-C (SIGINT to the launcher's whole
# process group) and a service manager's SIGTERM to the launcher alone. Each
# node must stop with a checkpoint; a checkpoint here is the set of every
# node's stage files in LOCAL_DIR/checkpoints written after the signal.
local_stop() {  # STATE SIGNAL TARGET(group|launcher)
  local state=$1 sig=$2 target=$3 dir="$OUT/local-$3" rc=0
  setsid "$BIN" local "${MODEL[@]}" --local_dir="$dir" --local_iterations=100000 \
      > "$OUT/local-$target.log" 2>&1 &
  local pid=$!
  PID[local-$target]=$pid
  wait_for "$dir/progress.jsonl" "\"iteration\":$WARM_ITERS[,}]" 300 || return 1
  touch "$OUT/.before-local-$target"
  local t0 t1
  t0=$(date +%s.%N)
  if [ "$target" = group ]; then kill -"$sig" -- "-$pid"; else kill -"$sig" "$pid"; fi
  wait "$pid" || rc=$?
  t1=$(date +%s.%N)
  local secs files total verdict=ok
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
  files=$(find "$dir/checkpoints" -maxdepth 1 -name '*.ckpt' -newer "$OUT/.before-local-$target" | wc -l)
  total=$(find "$dir/checkpoints" -maxdepth 1 -name '*.ckpt' | wc -l)
  if [ "$rc" -ne 0 ] || [ "$files" -eq 0 ] || [ "$files" -ne "$total" ] ||
     awk -v s="$secs" -v l="$LIMIT_S" 'BEGIN { exit !(s > l) }'; then
    verdict=FAIL
    FAILED=1
  fi
  ROWS+=("$state | local | $secs s | $rc | $files of $total stage files written after the signal | $verdict")
  echo "$state: exit $rc after $secs s, $files of $total stage checkpoint files written after it: $verdict"
}
local_stop "local, Ctrl-C (SIGINT to the process group)" INT group
local_stop "local, SIGTERM to the launcher" TERM launcher

echo
echo "state | node | exit | rc | checkpoint step | verdict"
printf '%s\n' "${ROWS[@]}"
echo "load: $(uptime | sed 's/.*load average: //')"
exit $FAILED
