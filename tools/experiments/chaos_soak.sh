#!/usr/bin/env bash
# Chaos soak of `skipswarm local` (launcher/local_chaos.h): a fault-free run and
# a chaos run of the same model and seed. During the chaos run the launcher
# SIGKILLs random non-data nodes (at most half of them dead at once, never a
# stage's last serving replica: Note [Survivable chaos] in
# launcher/local_chaos.h; 5 s after each kill either a replacement joiner for
# the same stage starts or, every RESTART_EVERY-th kill, the killed node
# itself restarts on its own config and checkpoints: Note [Restart on own
# disk]), stalls a
# random member with SIGSTOP for STALL_S seconds every ~STALL_EVERY_S, and one
# replica runs behind a bandwidth cap (--local_caps). A stage that loses every
# replica is restored from the newest checkpoint generation (Note [Local stage
# restore]). Checks: the run ends (exit 0: every iteration trained, finite last
# loss), no non-finite loss line, the longest wait for an iteration, and the
# final validation loss within 2% of the fault-free run's, and the launcher's
# checkpoint generations (every CKPT_EVERY iterations, written while nodes
# are killed) consistent by `skipswarm checkpoints` (Note [Generation audit]).
#
#   bash tools/experiments/chaos_soak.sh                    # ~5 minutes
#   ITERS=12000 bash tools/experiments/chaos_soak.sh        # the 30-minute soak
#
# Environment: BIN (default: a copy of bazel-bin/cli/skipswarm), OUT (default
# /tmp/skipswarm-chaos), ITERS (2000), SEED (1), KILL_EVERY_S (20),
# STALL_EVERY_S (30), STALL_S (5), RESTART_EVERY (2; 0: joiners only), CAP (s2r1@20: NAME@MBIT), CKPT_EVERY (10:
# iterations between checkpoint generations), FAULT_FREE (the
# local dir of a finished fault-free run of the same ITERS and SEED, e.g. an
# earlier OUT/fault-free: reused instead of running it again). Exit 1 when a
# check fails.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-chaos}
ITERS=${ITERS:-2000}
SEED=${SEED:-1}
KILL_EVERY_S=${KILL_EVERY_S:-20}
STALL_EVERY_S=${STALL_EVERY_S:-30}
STALL_S=${STALL_S:-5}
CAP=${CAP:-s2r1@20}
CKPT_EVERY=${CKPT_EVERY:-10}
RESTART_EVERY=${RESTART_EVERY:-2}
FAULT_FREE=${FAULT_FREE:-}
rm -rf "$OUT" && mkdir -p "$OUT"
BIN=${BIN:-$OUT/skipswarm}
[ -x "$BIN" ] || cp bazel-bin/cli/skipswarm "$BIN"
MODEL=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)

final_val() {  # LOCAL_DIR -> validation loss of each stage's newest final checkpoint
  local run=$1 ev=$1/final-eval
  mkdir -p "$ev"
  for s in 0 1 2; do
    cp "$(ls -t "$run"/checkpoints/*-stage-$s.ckpt | head -1)" "$ev/stage-$s.ckpt"
  done
  "$BIN" eval "${MODEL[@]}" --checkpoint="$ev" 2>/dev/null | awk '$1 == "0%" { print $4; exit }'
}

if [ -z "$FAULT_FREE" ]; then
  FAULT_FREE=$OUT/fault-free
  "$BIN" local "${MODEL[@]}" --local_dir="$FAULT_FREE" --local_iterations="$ITERS" \
      --local_caps="$CAP" > "$OUT/fault-free.log" 2>&1
fi
start=$(date +%s)
rc=0
"$BIN" local "${MODEL[@]}" --local_dir="$OUT/chaos" --local_iterations="$ITERS" \
    --local_caps="$CAP" --local_checkpoint_every="$CKPT_EVERY" \
    --local_chaos_seed="$SEED" --local_chaos_kill_every_s="$KILL_EVERY_S" \
    --local_chaos_stall_every_s="$STALL_EVERY_S" --local_chaos_stall_s="$STALL_S" \
    --local_chaos_restart_every="$RESTART_EVERY" > "$OUT/chaos.log" 2>&1 || rc=$?
echo "chaos run: exit $rc after $(( $(date +%s) - start )) s"
grep -E "^chaos: [0-9]+ kills|longest wait|restored from" "$OUT/chaos.log" || true
# Note [Restart on own disk]: each restarted node's first iteration after its
# restart, from its new log (a restart that never trained again shows none).
grep -E "^chaos: restarting" "$OUT/chaos.log" | while read -r _ _ name _; do
  first=$(grep -m1 -oE "^\[$name\] it [0-9]+" "$OUT/chaos/logs/$name.out" 2>/dev/null |
          awk '{print $3}' || true)
  echo "restart of $name: first iteration after it ${first:-none}"
done
# A data node's line has loss -1 when none of its micro-batches finished in
# that iteration (every route lost a node) or the loss was not finite; the
# run's loss (loss.csv, the mean of the finite ones) must be finite always.
empty=$(grep -c '"loss":-1' "$OUT/chaos/progress.jsonl" || true)
nonfinite=$(awk -F, 'NR > 1 && ($2 == "nan" || $2 == "inf" || $2 == "-nan") { n++ } END { print n + 0 }' \
    "$OUT/chaos/loss.csv")
trained=$(( $(wc -l < "$OUT/chaos/loss.csv") - 1 ))
echo "iterations with a loss: $trained of $ITERS; non-finite: $nonfinite; data-node lines" \
     "without a finished micro-batch: $empty"
audit=0
"$BIN" checkpoints --dir="$OUT/chaos/generations" > "$OUT/checkpoints.txt" 2>&1 || audit=$?
tail -1 "$OUT/checkpoints.txt"
ff=$(final_val "$FAULT_FREE")
ch=$(final_val "$OUT/chaos")
echo "final validation loss: chaos $ch, fault-free $ff"
awk -v a="$ch" -v b="$ff" -v rc="$rc" -v nf="$nonfinite" -v au="$audit" 'BEGIN {
  d = 100 * (a - b) / b; printf "difference: %+.2f%% (target within 2%%)\n", d;
  exit (rc != 0 || nf > 0 || au != 0 || d > 2 || d < -2) ? 1 : 0 }'
