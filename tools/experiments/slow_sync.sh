#!/usr/bin/env bash
# A member slow to sync (Note [Late members], Note [Overlapped sync]): the
# same `skipswarm local` swarm (2 data nodes, REPLICAS replicas of every other
# stage, H > 1 outer steps) twice, back to back: every node's averaging upload
# capped at CAP Mbit/s (--local_sync_caps, the real token-bucket cap on the
# replica-averaging pushes), then the same with SLOW_NODE's capped SLOWDOWN
# times lower. Per MODE, one table row: tokens/s of both runs over the
# iterations after the first WARM, their ratio, and the outer syncs that left
# a member out / that a member missed (counted from the node logs).
#
#   bash tools/experiments/slow_sync.sh                      # node/train/README.md's figures
#   MODES=overlap ITERS=80 bash tools/experiments/slow_sync.sh
#
# Environment:
#   MODES     space-separated; each a name and its extra flags:
#             wait     (the sync waits, closing a member out at the default deadline)
#             overlap  (--outer_overlap: round k is applied at step (k+1)H)
#             tight    (waits, deadline --outer_deadline_min_s=0.25 --outer_deadline_factor=1)
#             overlap_tight (both)
#             wait_all, overlap_all (as wait, overlap with --outer_upload_floor=1:
#                      every member sends all its blocks, Note [Thinned uploads])
#             (default "wait overlap tight")
#   ITERS     iterations per run (default 160); WARM (default 32) iterations not timed
#   H         outer steps (default 8); CODEC (default int8); REPLICAS (default 2)
#   CAP       every node's averaging uplink, Mbit/s (default 2); SLOWDOWN (default 5)
#   SLOW_NODE (default s2r1)
#   OUTER     (default "--outer_lr=1 --outer_momentum=0")
#   MODEL     model flags (default: the 4-stage 0.22 M model of the quality table)
#   BIN       the skipswarm binary (default: a copy of bazel-bin/cli/skipswarm in OUT)
#   OUT       (default /tmp/skipswarm-slow-sync); NICE (default 5)
# Output: OUT/<mode>-<even|slow>/ (the swarms' folders), OUT/*.log, and the
# table OUT/table.md (appended as pairs finish); the loss column is the data
# nodes' training loss over the last 16 iterations (loss.csv), the
# averaging share is rate()'s (below).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-slow-sync}
MODES=${MODES:-wait overlap tight}
ITERS=${ITERS:-160}
WARM=${WARM:-32}
H=${H:-8}
CODEC=${CODEC:-int8}
REPLICAS=${REPLICAS:-2}
CAP=${CAP:-2}
SLOWDOWN=${SLOWDOWN:-5}
SLOW_NODE=${SLOW_NODE:-s2r1}
OUTER=${OUTER:---outer_lr=1 --outer_momentum=0}
NICE=${NICE:-5}
MODEL=${MODEL:---layers=4 --stages=4 --d_model=64 --heads=4 --ffn=176 --seq_len=64 --samples_per_mb=4 --lr=3e-3 --warmup_steps=10}
mkdir -p "$OUT"
if [[ -z "${BIN:-}" ]]; then
  bazel build //cli:skipswarm
  cp -f bazel-bin/cli/skipswarm "$OUT/skipswarm.new" && mv -f "$OUT/skipswarm.new" "$OUT/skipswarm"
  BIN="$OUT/skipswarm"
fi

# The layout's node names: d0 d1, then sXrY for stages 1.. (the model's --stages).
stages=$(sed -n 's/.*--stages=\([0-9]*\).*/\1/p' <<< "$MODEL")
stages=${stages:-4}
names="d0 d1"
for ((s = 1; s < stages; ++s)); do
  for ((r = 0; r < REPLICAS; ++r)); do names="$names s${s}r$r"; done
done
slow_cap=$(awk -v c="$CAP" -v k="$SLOWDOWN" 'BEGIN { printf "%g", c / k }')
even_caps="" slow_caps=""
for n in $names; do
  even_caps="$even_caps,$n@$CAP"
  if [[ "$n" == "$SLOW_NODE" ]]; then slow_caps="$slow_caps,$n@$slow_cap"; else slow_caps="$slow_caps,$n@$CAP"; fi
done
even_caps=${even_caps#,} slow_caps=${slow_caps#,}
[[ "$slow_caps" == *"$SLOW_NODE@"* ]] || { echo "no node $SLOW_NODE in: $names" >&2; exit 2; }

mode_flags() {
  case "$1" in
    wait) echo "" ;;
    overlap) echo "--outer_overlap" ;;
    tight) echo "--outer_deadline_min_s=0.25 --outer_deadline_factor=1" ;;
    overlap_tight) echo "--outer_overlap --outer_deadline_min_s=0.25 --outer_deadline_factor=1" ;;
    wait_all) echo "--outer_upload_floor=1" ;;
    overlap_all) echo "--outer_overlap --outer_upload_floor=1" ;;
    *) echo "unknown mode $1" >&2; exit 2 ;;
  esac
}

# tokens/s over iterations WARM.. of a run (every data node's tokens; the
# time of an iteration: the slowest data node's elapsed_s, as the launcher),
# the iterations run, and the share of that time the node that waited most
# spent waiting for averaging (Note [Sync wait]: sync_wait_s; "-" from a
# binary without it).
rate() {
  python3 - "$1/progress.jsonl" "$WARM" <<'EOF'
import json, sys
tokens, elapsed, wait = {}, {}, {}
for line in open(sys.argv[1]):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if "sync_wait_s" in j:
        wait.setdefault(j["node"], {})[j["iteration"]] = j["sync_wait_s"]
    if "tokens" not in j:
        continue
    it = j["iteration"]
    tokens[it] = tokens.get(it, 0) + j["tokens"]
    elapsed[it] = max(elapsed.get(it, 0), j["elapsed_s"])
warm = int(sys.argv[2])
its = sorted(i for i in elapsed if i >= warm)
if len(its) < 2:
    print("failed")
else:
    t = sum(tokens[i] for i in its[1:])
    span = max(1e-9, elapsed[its[-1]] - elapsed[its[0]])
    share = "-"
    if wait:
        share = "%.0f%%" % (100 * max(sum(w.get(i, 0) for i in its[1:]) for w in wait.values()) / span)
    print("%.0f %d %s" % (t / span, its[-1] + 1, share))
EOF
}
# The training loss: the mean of loss.csv's last 16 iterations.
last_loss() {
  tail -n 16 "$1/loss.csv" | awk -F, '$2 + 0 > 0 { s += $2; n++ } END { if (n) printf "%.3f", s / n; else print "?" }'
}
# Outer syncs that closed a member out (counted by each survivor) / that a
# member missed (node_trainer.cc's warnings) / re-syncs after a digest
# disagreement; without overlap, the (sync, stage) pairs whose replicas
# left the sync with different parameter digests (the nodes' progress
# lines); and the times a replica started thinning its uploads (Note
# [Thinned uploads]), with the last fraction logged ("-" if none).
counts() {
  local l o r t k
  l=$(cat "$1"/logs/*.err 2>/dev/null | grep -c "late replica(s) left out of the outer sync" || true)
  o=$(cat "$1"/logs/*.err 2>/dev/null | grep -c "pseudo-gradient missed its round's deadline" || true)
  r=$(cat "$1"/logs/*.err 2>/dev/null | grep -c "re-synced from" || true)
  t=$(cat "$1"/logs/*.err 2>/dev/null | grep -c "sends its largest int8 blocks" || true)
  k=$(cat "$1"/logs/*.err 2>/dev/null | sed -n 's/.*sends its largest int8 blocks, \([0-9.e-]*\) of them.*/\1/p' | tail -n 1)
  echo "$l $o $r $(apart "$1") $t@${k:--}"
}
apart() {
  [[ "$mode" == overlap* ]] && { echo "-"; return; }
  cat "$1"/logs/*.out 2>/dev/null | python3 -c '
import re, sys
h = int(sys.argv[1])
seen = {}
for line in sys.stdin:
    m = re.match(r"\[(\S+)\] it (\d+) (.*)", line)
    if not m or int(m.group(2)) % h != h - 1:
        continue
    for s, d in re.findall(r"\| s(\d+) visits .*? digest ([0-9a-f]+)", m.group(3)):
        seen.setdefault((int(m.group(2)), int(s)), set()).add(d)
print(sum(1 for v in seen.values() if len(v) > 1))
' "$H"
}

TABLE="$OUT/table.md"
if [[ ! -s "$TABLE" ]]; then
  echo "| mode | H | codec | caps Mbit/s | tokens/s even | tokens/s $SLOW_NODE /$SLOWDOWN | ratio | train loss even / slow | averaging share even / slow | slow run: left out / late / re-synced / syncs apart / thinning started@last fraction | even run: the same | iterations |" > "$TABLE"
  echo "|---|---|---|---|---|---|---|---|---|---|---|---|" >> "$TABLE"
fi
echo "slow_sync: $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); $ITERS iterations, H=$H $CODEC, caps $CAP, $SLOW_NODE at $slow_cap"
for mode in $MODES; do
  flags=$(mode_flags "$mode")
  declare -A tps=() cnt=() done_its=() loss=() share=()
  for variant in even slow; do
    dir="$OUT/$mode-$variant"
    rm -rf "$dir"
    caps=$even_caps
    [[ "$variant" == slow ]] && caps=$slow_caps
    # shellcheck disable=SC2086
    nice -n "$NICE" "$BIN" local --local_data_nodes=2 --local_replicas="$REPLICAS" --local_mbs=2 \
      --local_iterations="$ITERS" --local_eval_every=0 --local_checkpoint_every=0 \
      --local_dir="$dir" --seed=1 --outer_every="$H" --avg_codec="$CODEC" $OUTER $flags \
      --local_sync_caps="$caps" $MODEL 2>&1 | tr '\r' '\n' | grep -v '^\[' > "$OUT/$mode-$variant.log" || true
    read -r tps[$variant] done_its[$variant] share[$variant] <<< "$(rate "$dir" 2>/dev/null || echo failed 0 -)"
    cnt[$variant]=$(counts "$dir")
    loss[$variant]=$(last_loss "$dir" 2>/dev/null || echo "?")
    echo "  $mode $variant: ${tps[$variant]} tokens/s (${done_its[$variant]:-0} iterations), loss ${loss[$variant]}, waiting ${share[$variant]}, left out / late / re-synced / syncs apart: ${cnt[$variant]}"
  done
  ratio=$(awk -v a="${tps[even]}" -v b="${tps[slow]}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3f", b / a; else print "?" }')
  echo "| $mode | $H | $CODEC | $CAP | ${tps[even]} | ${tps[slow]} | $ratio | ${loss[even]} / ${loss[slow]} | ${share[even]} / ${share[slow]} | ${cnt[slow]// / \/ } | ${cnt[even]// / \/ } | ${done_its[even]:-0} / ${done_its[slow]:-0} |" | tee -a "$TABLE"
done
echo "slow_sync: done $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg); table in $TABLE"
