#!/usr/bin/env bash
# Kill -9 soak of checkpoint generations (Note [Checkpoint generations],
# model/checkpoint_generation.h): `skipswarm train-ref --checkpoint_every=1
# --resume` is SIGKILLed KILLS times at random moments (seeded) and restarted
# each time; every restart must resume from a complete generation, and the
# run's steps must never go back further than one generation.
#
#   bash tools/experiments/checkpoint_kill_soak.sh            # 12 kills, tiny model
#   KILLS=50 SEED=7 bash tools/experiments/checkpoint_kill_soak.sh
#
# Environment: BIN (default: a copy of bazel-bin/cli/skipswarm), OUT (default
# /tmp/skipswarm-ckpt-soak), KILLS (12), SEED (1), MAX_MS (longest training time
# before a kill, 3000). Output: one line per kill and the totals
#   kills K, resumed R, refused F, torn generations skipped T, steps lost L
# (a refusal is a restart that ended by itself without resuming: the old
# code's inconsistent set; steps lost: checkpoints a run printed that the
# next one did not resume from), then `skipswarm checkpoints` over what the
# last kill left. Exit 1 when any restart was refused or the generations are
# not consistent.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-ckpt-soak}
KILLS=${KILLS:-12}
SEED=${SEED:-1}
MAX_MS=${MAX_MS:-3000}
rm -rf "$OUT" && mkdir -p "$OUT"
BIN=${BIN:-$OUT/skipswarm}
[ -x "$BIN" ] || cp bazel-bin/cli/skipswarm "$BIN"
MODEL=(--stages=6 --layers=6 --d_model=32 --heads=2 --ffn=64 --seq_len=32 --samples_per_mb=2
       --threads=1 --seed=1 --init_seed=1 --eval_every=0 --log_every=1 --eval_batches=1
       --final_eval_batches=1)
RANDOM=$SEED
resumed=0 refused=0 skipped=0 lost=0 last_step=0
for k in $(seq 1 "$KILLS"); do
  # Line-buffered: a SIGKILL must not eat the lines already printed.
  stdbuf -oL "$BIN" train-ref "${MODEL[@]}" --iterations=100000 --checkpoint_every=1 \
      --keep_checkpoints=3 --checkpoint_dir="$OUT/ckpt" --resume > "$OUT/run-$k.log" 2>&1 &
  pid=$!
  # The random moment is counted from the first training line (start-up,
  # corpus and resume take seconds on a loaded machine).
  for _ in $(seq 1 300); do
    grep -q "^eval  iter" "$OUT/run-$k.log" 2>/dev/null && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  ms=$(( (RANDOM % MAX_MS) + 50 ))
  sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
  status=0
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  else
    wait "$pid" || status=$?   # it ended by itself: a refused resume
  fi
  if [ "$status" -ne 0 ]; then
    refused=$((refused + 1)); step=-1
    echo "kill $k: restart refused (exit $status): $(grep -v '^[IW][0-9]' "$OUT/run-$k.log" | tail -1)"
  elif grep -q "resumed from" "$OUT/run-$k.log"; then
    step=$(sed -n 's/.*resumed from .* at iteration \([0-9]*\).*/\1/p' "$OUT/run-$k.log")
    resumed=$((resumed + 1))
    # Steps the previous run reached that this one did not resume from.
    if [ "$last_step" -gt "$step" ]; then lost=$((lost + last_step - step)); fi
  elif grep -q "no checkpoint in" "$OUT/run-$k.log"; then
    step=0
  else
    step="(killed while starting)"
  fi
  n=$(grep -c "^generation .* skipped:" "$OUT/run-$k.log" || true)
  skipped=$((skipped + n))
  printed=$(sed -n 's/^checkpoint  iter \([0-9]*\).*/\1/p' "$OUT/run-$k.log" | tail -1)
  last_step=${printed:-$last_step}
  echo "kill $k after ${ms} ms: resumed at $step, last checkpoint $last_step, torn skipped $n"
done
echo "kills $KILLS, resumed $resumed, refused $refused, torn generations skipped $skipped," \
     "steps lost $lost"
# What is left on disk after the last kill (Note [Generation audit]): only
# the newest folder may be torn.
audit=0
"$BIN" checkpoints --dir="$OUT/ckpt/generations" || audit=$?
[ "$refused" -eq 0 ] && [ "$audit" -eq 0 ]
