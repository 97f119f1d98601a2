#!/usr/bin/env bash
# Acceptance experiment "Training" (issue 5): `skipswarm local` with default
# settings trains ITERS iterations (default 200) while its data nodes record
# the routes they run; then `skipswarm train-ref` replays those routes (same
# micro-batches, same stages, same global batch, same schedule length), and
# the validation loss of both is compared at every EVAL_EVERY iterations.
#
#   bash tools/experiments/local_vs_ref.sh     # 2026-12-02, shared 2 cores: swarm 11-17 min, train-ref 22-52 min
#   ITERS=20 EVAL_EVERY=10 OUT=/tmp/lvr bash tools/experiments/local_vs_ref.sh --stages=3 --layers=3
#
# Extra arguments are model flags, given to both runs (and to eval).
# Environment:
#   LOCAL_FLAGS `skipswarm local` flags only, e.g. LOCAL_FLAGS="--local_path_length=4" (skip
#               routes of the default skippipe planner, swaps allowed; train-ref replays them
#               all the same), or "--local_planner=inorder"
#   BIN         the skipswarm binary (default: a copy of bazel-bin/cli/skipswarm in OUT,
#               so a rebuild does not replace it mid-run)
#   OUT         output folder (default /tmp/skipswarm-local-vs-ref)
#   ITERS       iterations (default 200); EVAL_EVERY (default 25)
#   SKIP_LOCAL=1  reuse OUT/local from an earlier run (only train-ref and the table)
#   SKIP_REF=1    also reuse OUT/ref.jsonl (only the evaluations and the table)
#   NICE        nice level for both runs (default 5)
#   EVAL_BATCHES validation micro-batches of every comparison point (default 32, spread over the
#               split; 0 = the whole split): train-ref and eval get the same sample
# Output: OUT/local (the swarm's folder: routes/, evals/, progress.jsonl, logs/),
# OUT/ref.log, OUT/ref.jsonl, OUT/eval-*.log, and the table OUT/table.txt:
#   iteration  swarm_val_loss  ref_val_loss  rel_diff
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-local-vs-ref}
ITERS=${ITERS:-200}
EVAL_EVERY=${EVAL_EVERY:-25}
NICE=${NICE:-5}
EVAL_BATCHES=${EVAL_BATCHES:-32}
mkdir -p "$OUT"
if [[ -z "${BIN:-}" ]]; then
  bazel build //cli:skipswarm
  cp -f bazel-bin/cli/skipswarm "$OUT/skipswarm.new" && mv -f "$OUT/skipswarm.new" "$OUT/skipswarm"
  BIN="$OUT/skipswarm"
fi
echo "local_vs_ref: $(date -u +%FT%TZ) iterations $ITERS, eval every $EVAL_EVERY, model flags: $*," \
  "local flags: ${LOCAL_FLAGS:-}"

if [[ "${SKIP_LOCAL:-0}" != 1 ]]; then
  # Default settings; only the record, the eval snapshots and the folder are added.
  nice -n "$NICE" "$BIN" local --local_iterations="$ITERS" --local_record_routes \
    --local_eval_every="$EVAL_EVERY" --local_dir="$OUT/local" ${LOCAL_FLAGS:-} "$@" | tr '\r' '\n' | \
    grep -v '^\[' | tee "$OUT/local.log" || true
  echo "local: done $(date -u +%FT%TZ)"
fi
test -s "$OUT/local/progress.jsonl" || { echo "no swarm run in $OUT/local" >&2; exit 1; }

# Micro-batches per iteration and drops, from the record and the progress file.
routes=$(ls "$OUT"/local/routes/*.routes | paste -sd, -)
global_batch=$(awk '$1 == 0' "$OUT"/local/routes/*.routes | wc -l)
python3 - "$OUT/local/progress.jsonl" <<'PY'
import json, sys
dropped = rerouted = 0
for line in open(sys.argv[1]):
    p = json.loads(line)
    dropped += p.get("dropped", 0)
    # Every node's own re-routes per iteration, relays included (iteration_report.h).
    rerouted += p.get("rerouted_here", 0)
print(f"swarm: {dropped} micro-batches dropped, {rerouted} hops re-routed by all nodes")
PY
# Cross-check: every re-route is also logged (stage_server_send.cc "re-routed (REASON)").
echo "swarm: $(cat "$OUT"/local/logs/*.err | grep -c 're-routed (' || true) hops re-routed in all nodes' logs"

# --threads=1 as the launcher gives every node: the same summation order, and on a
# busy machine intra-op threads mostly wait for each other.
if [[ "${SKIP_REF:-0}" != 1 ]]; then
  rm -f "$OUT/ref.jsonl.new"
  TIMEFORMAT='train-ref: %U s user + %S s system CPU, %R s wall (incl. its validation passes)'
  { time nice -n "$NICE" "$BIN" train-ref --iterations="$ITERS" --routes_file="$routes" --threads=1 \
    --mbs_per_iteration="$global_batch" --eval_every="$EVAL_EVERY" --checkpoint_every=0 \
    --eval_batches="$EVAL_BATCHES" --final_eval_batches="$EVAL_BATCHES" \
    --metrics_out="$OUT/ref.jsonl.new" "$@" > "$OUT/ref.log" 2>&1 ; } 2> "$OUT/ref.time"
  cat "$OUT/ref.time"
  mv -f "$OUT/ref.jsonl.new" "$OUT/ref.jsonl"
  echo "train-ref: done $(date -u +%FT%TZ) ($(grep -c '^iter' "$OUT/ref.log") progress lines)"
fi
test -s "$OUT/ref.jsonl" || { echo "no train-ref run in $OUT/ref.jsonl" >&2; exit 1; }

: > "$OUT/swarm-val.txt"
for d in "$OUT"/local/evals/iter-*; do
  it=$((10#${d##*iter-}))
  nice -n "$NICE" "$BIN" eval --checkpoint="$d" --keep_fraction=1 --threads=1 \
    --final_eval_batches="$EVAL_BATCHES" "$@" > "$OUT/eval-$it.log" 2>&1
  # The row "0% 0 1 VAL_LOSS ...": the full model (no stage removed) on the validation split,
  # the batches train-ref evaluates.
  loss=$(awk '$1 == "0%" {print $4}' "$OUT/eval-$it.log")
  echo "$it $loss" >> "$OUT/swarm-val.txt"
done

python3 - "$OUT/swarm-val.txt" "$OUT/ref.jsonl" "$OUT/local/progress.jsonl" <<'PY' | tee "$OUT/table.txt"
import json, sys
swarm = {int(a): float(b) for a, b in (l.split() for l in open(sys.argv[1]) if l.strip())}
ref = {}
for line in open(sys.argv[2]):
    p = json.loads(line)
    if "val_loss" in p:
        ref[p["iteration"]] = p["val_loss"]
print(f"{'iteration':>9}  {'swarm_val_loss':>14}  {'ref_val_loss':>12}  {'rel_diff':>9}")
worst = 0.0
for it in sorted(set(swarm) | set(ref)):
    s, r = swarm.get(it), ref.get(it)
    if s is None or r is None:
        print(f"{it:>9}  {s if s is not None else '-':>14}  {r if r is not None else '-':>12}")
        continue
    rel = abs(s - r) / abs(r)
    worst = max(worst, rel)
    print(f"{it:>9}  {s:>14.4f}  {r:>12.4f}  {100 * rel:>8.3f}%")
print(f"max relative difference {100 * worst:.3f}% (target 2%)")

# Training loss: train-ref's logged window means (the iterations since its
# previous line) against the swarm's (mean over its data nodes per iteration).
swarm_it = {}
for line in open(sys.argv[3]):
    p = json.loads(line)
    swarm_it.setdefault(p["iteration"], []).append(p["loss"])
worst, prev = 0.0, 0
for line in open(sys.argv[2]):
    p = json.loads(line)
    if "loss" not in p:
        continue
    its = range(prev, p["iteration"])
    prev = p["iteration"]
    if not all(i in swarm_it for i in its):
        continue
    s = sum(sum(swarm_it[i]) / len(swarm_it[i]) for i in its) / len(its)
    worst = max(worst, abs(s - p["loss"]) / abs(p["loss"]))
print(f"training loss (window means at train-ref's log lines): max relative difference {worst:.2e}")
PY
