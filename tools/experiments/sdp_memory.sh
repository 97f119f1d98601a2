#!/usr/bin/env bash
# Subnetwork data parallelism, memory per node: `skipswarm local --sdp` with
# 4 SDP nodes for keep 0.5 and 0.75, forward and backward masking, and the
# same swarm with keep 1.0 (every node holds and trains the whole model: a
# full-model node, i.e. data parallelism), each node one micro-batch per
# iteration (so every node holds one micro-batch's activations). Prints peak
# RSS per node (wait4's ru_maxrss, as `skipswarm local` reports it), the
# RSS of a process that only loads libtorch (`skipswarm --version`), and the
# reduction against the full-model node, both of the whole process and of
# what training adds above that baseline.
#
#   bash tools/experiments/sdp_memory.sh                       # default model (9.56 M params)
#   ITERS=3 bash tools/experiments/sdp_memory.sh --layers=6 --stages=6 --d_model=64
#
# Extra arguments are model flags given to every run. Environment: BIN (the
# skipswarm binary; default a copy of bazel-bin/cli/skipswarm in OUT), OUT
# (default /tmp/skipswarm-sdp-memory), ITERS (default 6), WORKERS (default 4),
# NICE (default 5). Output: OUT/<run>/ (each swarm's folder), OUT/table.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-sdp-memory}
ITERS=${ITERS:-6}
WORKERS=${WORKERS:-4}
NICE=${NICE:-5}
mkdir -p "$OUT"
if [[ -z "${BIN:-}" ]]; then
  cp -f bazel-bin/cli/skipswarm "$OUT/skipswarm"
  cp -f bazel-bin/model/libskipswarm_sentencepiece.so "$OUT/" 2>/dev/null || true
  BIN="$OUT/skipswarm"
fi
base_kib=$(/usr/bin/time -f %M "$BIN" --version 2>&1 >/dev/null | tail -1)
declare -A rss
for run in full:forward:1.0 fwd50:forward:0.5 fwd75:forward:0.75 bwd50:backward:0.5 \
           bwd75:backward:0.75; do
  IFS=: read -r name mode keep <<<"$run"
  nice -n "$NICE" "$BIN" local --sdp="$mode" --sdp_keep="$keep" --sdp_workers="$WORKERS" \
    --local_iterations="$ITERS" --local_mbs=1 --local_dir="$OUT/$name" "$@" \
    >"$OUT/$name.log" 2>&1
  # "peak RSS per node (MiB): w0 412 w1 410 ..." -> the largest node.
  rss[$name]=$(grep '^peak RSS per node' "$OUT/$name.log" |
               awk '{m=0; for (i=7; i<=NF; i+=2) if ($i>m) m=$i; print m}')
  echo "$name: $(grep '^skipswarm local:' "$OUT/$name.log" | head -1)"
done
base=$(awk -v k="$base_kib" 'BEGIN{printf "%.0f", k/1024}')
{
  echo "libtorch-only process (skipswarm --version): ${base} MiB"
  printf '%-22s %14s %12s %20s %16s\n' run "peak RSS MiB" "vs full" "above baseline MiB" "vs full (above)"
  for name in full fwd50 fwd75 bwd50 bwd75; do
    awk -v n="$name" -v r="${rss[$name]}" -v f="${rss[full]}" -v b="$base" 'BEGIN{
      printf "%-22s %14d %11.1f%% %20d %15.1f%%\n", n, r, 100*(r-f)/f, r-b, 100*((r-b)-(f-b))/(f-b)}'
  done
} | tee "$OUT/table.txt"
