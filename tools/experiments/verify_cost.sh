#!/usr/bin/env bash
# The price of verified compute with no attacker (tests/adversarial/README.md,
# "Verified compute"): tokens/s and tokens per CPU-second of the default local
# swarm with --verify_rate=0 against RATE on every node, PAIRS runs of each,
# alternating (off, on, off, on, ...) so that the shared machine's load drifts
# across both sides alike.
#
#   bash tools/experiments/verify_cost.sh                 # RATE=0.02 PAIRS=3 ITER=20
#   RATE=0.1 PAIRS=5 ITER=30 OUT=/tmp/vc bash tools/experiments/verify_cost.sh
#
# Environment: BIN (default: a copy of bazel-bin/cli/skipswarm in OUT), OUT
# (/tmp/skipswarm-verify-cost), NICE (5), LOCAL_FLAGS (extra `skipswarm local`
# flags; the node names below assume the default layout: 2 data nodes, 2
# replicas of stages 1-5). Output: OUT/table.txt, one line per run:
# "rate tokens wall_s tok_per_s cpu_s tok_per_cpu_s nodes_that_took_the_rate".
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-verify-cost}
RATE=${RATE:-0.02}
PAIRS=${PAIRS:-3}
ITER=${ITER:-20}
NICE=${NICE:-5}
mkdir -p "$OUT"
if [[ -z "${BIN:-}" ]]; then
  bazel build //cli:skipswarm >/dev/null
  cp -f bazel-bin/cli/skipswarm "$OUT/skipswarm.new" && mv -f "$OUT/skipswarm.new" "$OUT/skipswarm"
  BIN="$OUT/skipswarm"
fi
nodes="d0 d1"
for s in 1 2 3 4 5; do nodes="$nodes s${s}r0 s${s}r1"; done
: > "$OUT/table.txt"
for i in $(seq 1 "$PAIRS"); do
  for rate in 0 "$RATE"; do
    spec=""
    for n in $nodes; do spec="${spec:+$spec,}$n:verify_rate=$rate"; done
    dir="$OUT/run-$i-$rate"
    rm -rf "$dir"
    nice -n "$NICE" "$BIN" local --local_iterations="$ITER" --local_dir="$dir" \
      --local_node_config="$spec" ${LOCAL_FLAGS:-} | tr '\r' '\n' | grep -v '^\[' \
      > "$dir.log" || true
    # "throughput: T tokens in W s (R tok/s); nodes used C CPU-s (P tokens per CPU-s)"
    line=$(grep '^throughput:' "$dir.log") || { cat "$dir.log" >&2; exit 1; }
    nums=$(sed -E 's/^throughput: ([0-9.]+) tokens in ([0-9.]+) s \(([0-9.]+) tok\/s\); nodes used ([0-9.]+) CPU-s \(([0-9.]+) tokens.*/\1 \2 \3 \4 \5/' <<<"$line")
    # The nodes that took the rate (each logs "verify_rate R, verify_seed S").
    took=$(grep -l 'verify_rate .*verify_seed' "$dir"/logs/* 2>/dev/null | wc -l || true)
    echo "$rate $nums $took" | tee -a "$OUT/table.txt"
  done
done
