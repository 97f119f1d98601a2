#!/usr/bin/env bash
# Subnetwork data parallelism, perplexity with stages removed: `train-ref`
# trains the same model with data parallelism (every MB through the whole
# model), SDP forward masking and SDP backward masking (keep 0.5, 4
# workers, equal tokens), then `skipswarm eval` measures each checkpoint's
# validation loss whole and with each non-zero stage removed in turn
# (--drop_stages=S; the residual stream passes the removed stage; depth
# calibration from the checkpoint's recorded skip ratio, Note [Depth
# calibration] in model/evaluate.h). Prints one row per run and seed.
#
#   bash tools/experiments/sdp_drop_stages.sh                  # 400 iterations, seeds 1 2
#   ITERS=20 SEEDS=1 EVAL_BATCHES=4 bash tools/experiments/sdp_drop_stages.sh   # a smoke run
#
# Environment: BIN (the skipswarm binary; default a copy of
# bazel-bin/cli/skipswarm in OUT), OUT (default /tmp/skipswarm-sdp-drop),
# ITERS (default 400), SEEDS (default "1 2"), RUNS (default "dp fwd bwd"),
# EVAL_BATCHES (validation batches per evaluation; default 0 = the whole
# split), NICE (default 5). Model: model/README's SDP quality model (6
# blocks, 6 stages, d_model 64); extra arguments are model flags given to
# every command. Output: OUT/<run>-s<seed>/ (train and eval logs,
# checkpoint), OUT/table.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-sdp-drop}
ITERS=${ITERS:-400}
SEEDS=${SEEDS:-"1 2"}
RUNS=${RUNS:-"dp fwd bwd"}
EVAL_BATCHES=${EVAL_BATCHES:-0}
NICE=${NICE:-5}
STAGES=6
mkdir -p "$OUT"
if [[ -z "${BIN:-}" ]]; then
  cp -f bazel-bin/cli/skipswarm "$OUT/skipswarm"
  cp -f bazel-bin/model/libskipswarm_sentencepiece.so "$OUT/" 2>/dev/null || true
  BIN="$OUT/skipswarm"
fi
M=(--layers=6 --d_model=64 --heads=4 --ffn=128 --stages=$STAGES --seq_len=64 --samples_per_mb=4)

header="| run | seed | full val loss (ppl) |"
rule="|---|---|---|"
for ((s = 1; s < STAGES; ++s)); do
  header+=" stage $s removed: val loss (ppl rise) |"
  rule+="---|"
done
header+=" mean rise |"
rule+="---|"
{
  echo "$ITERS iterations, equal tokens (4 MBs of 4 x 64 tokens per iteration), eval batches" \
       "$EVAL_BATCHES (0: whole split)"
  echo
  echo "$header"
  echo "$rule"
} >"$OUT/table.md"

for seed in $SEEDS; do
  for run in $RUNS; do
    case "$run" in
      dp) train=(--mbs_per_iteration=4) ;;
      fwd) train=(--sdp=forward --sdp_keep=0.5 --sdp_workers=4 --mbs_per_iteration=1) ;;
      bwd) train=(--sdp=backward --sdp_keep=0.5 --sdp_workers=4 --mbs_per_iteration=1) ;;
      *) echo "unknown run $run (dp, fwd, bwd)" >&2; exit 2 ;;
    esac
    dir="$OUT/$run-s$seed"
    rm -rf "$dir"
    mkdir -p "$dir"
    nice -n "$NICE" "$BIN" train-ref --iterations="$ITERS" --threads=1 --eval_every=0 \
      --final_eval_batches=1 --seed="$seed" --init_seed="$seed" "${M[@]}" "${train[@]}" \
      --checkpoint_dir="$dir/ckpt" "$@" >"$dir/train.log" 2>&1
    row="| $run | $seed |"
    full_ppl=""
    rises=()
    for ((s = 1; s < STAGES; ++s)); do
      nice -n "$NICE" "$BIN" eval --checkpoint="$dir/ckpt" --drop_stages="$s" --threads=1 \
        --final_eval_batches="$EVAL_BATCHES" "${M[@]}" "$@" >"$dir/eval-drop$s.log" 2>&1
      # "full model:          val_loss 2.3533  ppl 10.521  ..."
      if [[ -z "$full_ppl" ]]; then
        read -r full_loss full_ppl < <(awk '/^full model:/ {print $4, $6}' "$dir/eval-drop$s.log")
        row+=" $full_loss ($full_ppl) |"
      fi
      # "without stages 2     val_loss 2.4001  ppl 11.02  bits/byte 1.2  (ppl +4.7%)"
      read -r loss rise < <(awk '/^without stages/ {print $5, $11}' "$dir/eval-drop$s.log" |
                            tr -d '()%')
      row+=" $loss (${rise}%) |"
      rises+=("$rise")
    done
    mean=$(printf '%s\n' "${rises[@]}" | awk '{s += $1} END {printf "%+.1f%%", s / NR}')
    echo "$row $mean |" >>"$OUT/table.md"
    echo "$run seed $seed done: $row $mean"
  done
done
cat "$OUT/table.md"
