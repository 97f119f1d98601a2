#!/usr/bin/env bash
# Quality vs averaging traffic (Note [Outer steps]): `skipswarm local` with 2
# replicas per stage for every SEEDS x HS x CODECS, then `skipswarm eval` of
# the final checkpoint; one table row per run: validation loss, the
# launcher's averaging bytes per token, the run's wall time.
#
#   bash tools/experiments/avg_quality.sh                       # the README's table
#   ITERS=64 SEEDS=1 HS="1 32" CODECS=int8 bash tools/experiments/avg_quality.sh
#
# Extra arguments are model flags, given to the runs and to eval; without
# any, MODEL (default: the 4-layer, 4-stage model of node/train/README.md's
# quality table; MODEL=default: the default model, far slower) is used.
# Environment:
#   ITERS      iterations per run (default 512); every run evaluates once, at the end
#   SEEDS      (default "1 2"); HS (default "1 32"); CODECS (default "int8 topk:0.01")
#   OUTER      outer-step flags for H > 1 (default "--outer_lr=1 --outer_momentum=0")
#   BIN        the skipswarm binary (default: a copy of bazel-bin/cli/skipswarm in OUT,
#              so a rebuild does not replace it mid-run)
#   OUT        output folder (default /tmp/skipswarm-avg-quality)
#   NICE       nice level of the runs (default 5); EVAL_BATCHES (default 64)
# Output: OUT/run-H<H>-<codec>-s<seed>/ (the swarm's folder), OUT/*.log and the
# table OUT/table.md (appended as runs finish).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-avg-quality}
ITERS=${ITERS:-512}
SEEDS=${SEEDS:-1 2}
HS=${HS:-1 32}
CODECS=${CODECS:-int8 topk:0.01}
OUTER=${OUTER:---outer_lr=1 --outer_momentum=0}
NICE=${NICE:-5}
EVAL_BATCHES=${EVAL_BATCHES:-64}
MODEL=${MODEL:---layers=4 --stages=4 --d_model=64 --heads=4 --ffn=176 --seq_len=64 --samples_per_mb=4 --lr=3e-3 --warmup_steps=10}
[[ "$MODEL" == default ]] && MODEL=""
if [[ $# -gt 0 ]]; then MODEL="$*"; fi
mkdir -p "$OUT"
if [[ -z "${BIN:-}" ]]; then
  bazel build //cli:skipswarm
  cp -f bazel-bin/cli/skipswarm "$OUT/skipswarm.new" && mv -f "$OUT/skipswarm.new" "$OUT/skipswarm"
  BIN="$OUT/skipswarm"
fi
TABLE="$OUT/table.md"
if [[ ! -s "$TABLE" ]]; then
  echo "| seed | H | codec | val loss | averaging bytes / token | wall s |" > "$TABLE"
  echo "|---|---|---|---|---|---|" >> "$TABLE"
fi
echo "avg_quality: $(date -u +%FT%TZ) iterations $ITERS, model flags: ${MODEL:-(default model)}"
for seed in $SEEDS; do
  for h in $HS; do
    for codec in $CODECS; do
      name="H$h-${codec/:/}-s$seed"
      dir="$OUT/run-$name"
      rm -rf "$dir"
      outer=""
      [[ "$h" -gt 1 ]] && outer="$OUTER"
      start=$(date +%s)
      # shellcheck disable=SC2086
      nice -n "$NICE" "$BIN" local --local_data_nodes=2 --local_replicas=2 --local_mbs=2 \
        --local_iterations="$ITERS" --local_eval_every="$ITERS" --local_dir="$dir" \
        --outer_every="$h" --avg_codec="$codec" --seed="$seed" $outer $MODEL 2>&1 | \
        tr '\r' '\n' | grep -v '^\[' > "$OUT/$name.log" || true
      wall=$(( $(date +%s) - start ))
      ckpt=$(ls -d "$dir"/evals/iter-* 2>/dev/null | tail -1 || true)
      bpt=$(sed -n 's/.*(\([0-9.]*\) bytes per token).*/\1/p' "$OUT/$name.log" | tail -1)
      val="failed"
      if [[ -n "$ckpt" ]]; then
        # shellcheck disable=SC2086
        nice -n "$NICE" "$BIN" eval --checkpoint="$ckpt" --drop_stages=1 \
          --final_eval_batches="$EVAL_BATCHES" $MODEL > "$OUT/$name.eval.log" 2>&1 || true
        val=$(sed -n 's/^full model: *val_loss \([0-9.]*\).*/\1/p' "$OUT/$name.eval.log" | head -1)
      fi
      echo "| $seed | $h | $codec | ${val:-failed} | ${bpt:-?} | $wall |" | tee -a "$TABLE"
    done
  done
done
echo "avg_quality: done $(date -u +%FT%TZ); table in $TABLE"
