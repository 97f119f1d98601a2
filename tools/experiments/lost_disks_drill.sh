#!/usr/bin/env bash
# Stage-loss drill with lost disks (Note [Lost disks], launcher/peer_copies.h;
# Note [Checkpoint copies], node/daemon/gossip/checkpoint_copies.h): both
# replicas of stage 1 are SIGKILLed at iteration 60, their checkpoints (and the
# stage's files in every generation the launcher kept) are deleted, a joiner
# arrives at 70. The stage must come back from a checkpoint copy a live peer
# holds. Compared with a fault-free run of the same model and seed.
#
#   bash tools/experiments/lost_disks_drill.sh
#
# Environment: BIN (default: a copy of bazel-bin/cli/skipswarm), OUT (default
# /tmp/skipswarm-lost-disks), ITERS (120). Prints the restore line
# (recovery.jsonl: pause, iterations re-done, the holder of the copy) and the
# final validation loss of both runs (`skipswarm eval` of d0/s1r0/s2r0's final
# checkpoints) with their difference.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-lost-disks}
ITERS=${ITERS:-120}
rm -rf "$OUT" && mkdir -p "$OUT"
BIN=${BIN:-$OUT/skipswarm}
[ -x "$BIN" ] || cp bazel-bin/cli/skipswarm "$BIN"
MODEL=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)

final_val() {  # LOCAL_DIR -> validation loss of its final checkpoints
  local run=$1 ev=$1/final-eval
  mkdir -p "$ev"
  cp "$run/checkpoints/d0-stage-0.ckpt" "$ev/stage-0.ckpt"
  cp "$run/checkpoints/s1r0-stage-1.ckpt" "$ev/stage-1.ckpt"
  cp "$run/checkpoints/s2r0-stage-2.ckpt" "$ev/stage-2.ckpt"
  "$BIN" eval "${MODEL[@]}" --checkpoint="$ev" 2>/dev/null |
    awk '$1 == "0%" { print $4; exit }'
}

"$BIN" local "${MODEL[@]}" --local_dir="$OUT/fault-free" --local_iterations="$ITERS" \
    > "$OUT/fault-free.log" 2>&1
"$BIN" local "${MODEL[@]}" --local_dir="$OUT/drill" --local_iterations="$ITERS" \
    --kill=s1r0@60,s1r1@60 --local_join_at=70 --local_lose_disks > "$OUT/drill.log" 2>&1
grep -E "lost disks|comes from the checkpoint copy|restored from" "$OUT/drill.log" || true
echo "recovery: $(cat "$OUT/drill/recovery.jsonl")"
ff=$(final_val "$OUT/fault-free")
dr=$(final_val "$OUT/drill")
echo "final validation loss: drill $dr, fault-free $ff"
awk -v a="$dr" -v b="$ff" 'BEGIN { printf "difference: %+.2f%%\n", 100 * (a - b) / b }'
