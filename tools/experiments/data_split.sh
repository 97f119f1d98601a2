#!/usr/bin/env bash
# A stalled data node in a swarm with two data nodes (Note [Data node behind]
# in node/daemon/gossip/behind_check.h, Note [Alone after the swarm] in
# node/daemon/gossip/alone_check.h):
# `skipswarm local` with 2 data nodes and one replica of each other stage
# (tiny 3-stage model, ITERS iterations), d0 stopped with SIGSTOP once d1 has
# reported AT iterations. Two cases:
#
#   stall   d0 resumed (SIGCONT) after STOP_S seconds while d1 still trains:
#           d0 must find itself behind, re-enter with d1's stage-0 state and
#           the run must finish. Checks: the launcher exits 0 within
#           TIMEOUT_S of the resume (it checks the last iteration's loss),
#           d0 logged its re-entry, and at most MISSED iterations from AT on
#           have no loss row in loss.csv (an iteration during the stall,
#           whose micro-batches waited for d0's barrier, may have none).
#   after   d0 resumed only once d1 and both relays finished the run and
#           exited: nobody is left to re-enter from or to train with. d0
#           must end, not sit paused (it used to, forever): it runs with
#           --alone_timeout_s=ALONE_S and must exit within LIMIT_S of the
#           resume with one of the two lines of Note [Alone after the
#           swarm] in its log ("the swarm finished its ITERS iterations
#           without this node", exit 0, when d1's LEFT reached it; "every
#           other member of the swarm has been DEAD or LEFT ...; stopping
#           with a checkpoint", a non-zero exit, when it only saw its peers
#           DEAD); d1 must have trained every iteration. The launcher's
#           exit status is reported, not checked: it is 1 ("1 node(s)
#           failed") after the second line, which is the truth: d0's shard
#           was not trained from AT on.
#
# Output: one line per case, "case | d0 exit s | launcher rc | check", every
# swarm folder under OUT/<case>. Exit 1 when a check fails.
#
#   bash tools/experiments/data_split.sh                  # both cases, ~2-3 minutes
#   CASES=after bash tools/experiments/data_split.sh
#
# Environment: BIN (default: a copy of bazel-bin/cli/skipswarm in OUT), OUT
# (default /tmp/skipswarm-data-split), CASES ("stall after"), ITERS (120),
# AT (40), STOP_S (10), MISSED (4), ALONE_S (20), LIMIT_S (60), TIMEOUT_S
# (400: a hang ends with SIGINT to the launcher, then SIGKILL). Keep BIN
# outside OUT, which is emptied first.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-data-split}
CASES=${CASES:-stall after}
ITERS=${ITERS:-120}
AT=${AT:-40}
STOP_S=${STOP_S:-10}
MISSED=${MISSED:-4}
ALONE_S=${ALONE_S:-20}
LIMIT_S=${LIMIT_S:-60}
TIMEOUT_S=${TIMEOUT_S:-400}
rm -rf "$OUT" && mkdir -p "$OUT"
BIN=${BIN:-$OUT/skipswarm}
[ -x "$BIN" ] || cp bazel-bin/cli/skipswarm "$BIN"
MODEL=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)
FAILED=0
ROWS=()

node_pid() {  # DIR NAME -> the pid of that node's process (empty: exited)
  pgrep -f -- "--config=$1/swarm/$2.json" | head -1
}

reported() {  # DIR NAME -> iterations NAME reported in progress.jsonl
  local n
  n=$(grep -c "\"node\":\"$2\"" "$1/swarm/progress.jsonl" 2>/dev/null)
  echo "${n:-0}"
}

run_case() {  # CASE
  local c=$1 dir="$OUT/$1" rc=0 verdict=ok why=""
  mkdir -p "$dir"
  "$BIN" local "${MODEL[@]}" --local_dir="$dir/swarm" --local_iterations="$ITERS" \
    --local_data_nodes=2 --local_replicas=1 --local_node_config="d0:alone_timeout_s=$ALONE_S" \
    > "$dir/local.log" 2>&1 &
  local launcher=$!
  for _ in $(seq 1 1500); do
    [ "$(reported "$dir" d1)" -ge "$AT" ] && break
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.2
  done
  local d0
  d0=$(node_pid "$dir" d0)
  if [ -z "$d0" ]; then
    echo "$c: d0 is not running after $(reported "$dir" d1) iterations of d1" >&2
    kill -INT "$launcher" 2>/dev/null
    wait "$launcher"
    ROWS+=("$c | - | - | FAIL (no d0 to stop)")
    FAILED=1
    return
  fi
  kill -STOP "$d0"
  echo "$c: stopped d0 (pid $d0) after $(reported "$dir" d1) iterations of d1"
  if [ "$c" = stall ]; then
    sleep "$STOP_S"
  else
    # Until d1 and the relays have exited (each finishes all ITERS).
    local deadline=$(( $(date +%s) + TIMEOUT_S ))
    while [ "$(date +%s)" -lt "$deadline" ]; do
      [ -z "$(node_pid "$dir" d1)$(node_pid "$dir" s1r0)$(node_pid "$dir" s2r0)" ] && break
      sleep 0.5
    done
  fi
  kill -CONT "$d0"
  local t0 t1 secs="-"
  t0=$(date +%s.%N)
  echo "$c: resumed d0 after $(reported "$dir" d1) iterations of d1"
  local d0_done=""
  while kill -0 "$launcher" 2>/dev/null; do
    if [ -z "$d0_done" ] && ! kill -0 "$d0" 2>/dev/null; then
      d0_done=$(date +%s.%N)
    fi
    if awk -v a="$t0" -v b="$(date +%s.%N)" -v l="$TIMEOUT_S" 'BEGIN { exit !(b - a > l) }'; then
      echo "$c: TIMEOUT after $TIMEOUT_S s: stopping the launcher" >&2
      why="$why hung;"
      kill -INT "$launcher"
      sleep 20
      kill -9 "$launcher" 2>/dev/null
      local n p
      for n in d0 d1 s1r0 s2r0; do
        p=$(node_pid "$dir" "$n")
        [ -n "$p" ] && kill -9 "$p"
      done
      break
    fi
    sleep 0.2
  done
  wait "$launcher" || rc=$?
  t1=${d0_done:-$(date +%s.%N)}
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  local logs=("$dir/swarm/logs/d0.out" "$dir/swarm/logs/d0.err")
  if [ "$c" = stall ]; then
    [ "$rc" -eq 0 ] || why="$why launcher exit $rc;"
    grep -q "re-entered stage 0" "${logs[@]}" 2>/dev/null || why="$why no re-entry logged;"
    local rows
    rows=$(awk -F, -v at="$AT" 'NR > 1 && $1 >= at && $2 != "" && $2 != "nan" { n[$1] = 1 }
                               END { print length(n) }' "$dir/swarm/loss.csv" 2>/dev/null)
    echo "$c: ${rows:-0} of $(( ITERS - AT )) iterations from $AT with a loss"
    [ "${rows:-0}" -ge $(( ITERS - AT - MISSED )) ] || why="$why ${rows:-0} of $(( ITERS - AT )) iterations from $AT with a loss;"
  else
    grep -qE "the swarm finished its $ITERS iterations without this node|every other member of the swarm has been DEAD or LEFT" \
      "${logs[@]}" 2>/dev/null || why="$why no 'alone after the swarm' line;"
    local d1_rows
    d1_rows=$(grep -c '"node":"d1"' "$dir/swarm/progress.jsonl" 2>/dev/null)
    [ "${d1_rows:-0}" -ge "$ITERS" ] || why="$why d1 reported ${d1_rows:-0} of $ITERS iterations;"
    awk -v s="$secs" -v l="$LIMIT_S" 'BEGIN { exit !(s > l) }' && why="$why d0 took $secs s;"
  fi
  if [ -n "$why" ]; then
    verdict="FAIL ($why )"
    FAILED=1
  fi
  ROWS+=("$c | $secs s | $rc | $verdict")
  echo "$c: d0 exited $secs s after its resume, launcher exit $rc: $verdict"
  tail -3 "$dir/local.log"
  grep -h "behind the swarm\|re-entered\|finished its\|DEAD or LEFT\|training paused\|training resumed" \
    "${logs[@]}" 2>/dev/null | head -8
}

for c in $CASES; do run_case "$c"; done
echo
echo "case | d0 exit after resume | launcher rc | check"
for r in "${ROWS[@]}"; do echo "$r"; done
exit "$FAILED"
