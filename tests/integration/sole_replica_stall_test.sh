#!/usr/bin/env bash
# Note [Sole replica behind] (node/daemon/gossip/behind_check.h) with real
# processes: a `skipswarm local` swarm of one data node and one replica of
# each of stages 1 and 2. Once d0 reported 40 iterations, s1r0 (its
# stage's only replica) is stopped with SIGSTOP for 8 s and resumed. It
# comes back stuck in its iteration (the data node's barrier message of
# that iteration was pushed while it was stopped) while d0 goes on; with
# no replica of its stage ahead, it must move ahead with its own state to
# d0's iteration. Checked: the run exits 0 (every iteration trained, a
# finite last loss), s1r0 logged the move, and iterations after it have a
# loss. The old check only compared s1r0 with replicas of its own stage
# (none): s1r0 stayed stuck, every later iteration dropped all its
# micro-batches, and the launcher failed on the non-finite last loss
# (exit 1; node/daemon/chaos_soak.md).
#   args: skipswarm
set -uo pipefail
bin=$1
out="${TEST_TMPDIR:-/tmp}/sole-replica-stall"
iterations=120
rm -rf "$out"
mkdir -p "$out"
model=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)
"$PWD/$bin" local "${model[@]}" --local_dir="$out/swarm" --local_iterations=$iterations \
  --local_data_nodes=1 --local_replicas=1 > "$out/local.log" 2>&1 &
launcher=$!
progress="$out/swarm/progress.jsonl"
d0_lines() {
  local n
  n=$(grep -c '"node":"d0"' "$progress" 2>/dev/null)
  echo "${n:-0}"
}
# Polls the launcher's progress file (real processes: no injected clock).
for _ in $(seq 1 1500); do
  [ "$(d0_lines)" -ge 40 ] && break
  kill -0 "$launcher" 2>/dev/null || break
  sleep 0.2
done
pid=$(pgrep -f -- "--config=$out/swarm/s1r0.json" | head -1)
if [ -z "$pid" ] || [ "$(d0_lines)" -lt 40 ]; then
  echo "FAIL: the swarm did not reach iteration 40 with s1r0 running"
  kill "$launcher" 2>/dev/null
  tail -20 "$out/local.log"
  exit 1
fi
echo "stopping s1r0 (pid $pid) after $(d0_lines) iterations of d0"
kill -STOP "$pid"
sleep 8
kill -CONT "$pid"
echo "resumed s1r0 after $(d0_lines) iterations of d0"
wait "$launcher"
rc=$?
tail -4 "$out/local.log"
fail=0
[ "$rc" = 0 ] || { echo "FAIL: skipswarm local exited $rc"; fail=1; }
moved=$(grep -h "moving ahead with this replica's own" "$out/swarm/logs/s1r0.out")
echo "${moved:-s1r0: no move ahead}"
[ -n "$moved" ] || { echo "FAIL: s1r0 never moved ahead"; fail=1; }
at=$(sed -n 's/.* to iteration \([0-9]*\) (.*/\1/p' <<<"$moved" | tail -1)
after=$(awk -F, -v at="${at:-$iterations}" 'NR > 1 && $1 >= at { n++ } END { print n + 0 }' \
  "$out/swarm/loss.csv")
echo "iterations with a loss from the move on: $after"
[ "$after" -ge 20 ] || { echo "FAIL: training did not go on after the move"; fail=1; }
exit $fail
