#!/usr/bin/env bash
# CPU time per token of the default local swarm vs `train-ref` with the same
# model, global batch and iterations (issue "CPU data path"): every process's
# user + system CPU (the launcher's wait4 of each node; bash `time` for
# train-ref), divided by the tokens trained. Both sides run at --threads=1
# (the launcher gives every node one intra-op thread).
#
# Two lengths are run (SHORT and LONG iterations) so that the start-up cost
# (12 libtorch loads, model init, the first plans) cancels out: the steady
# figure is (CPU(LONG) - CPU(SHORT)) / (tokens(LONG) - tokens(SHORT)).
#
#   bash tools/experiments/cpu_per_token.sh                  # SHORT=5 LONG=25
#   SHORT=5 LONG=45 OUT=/tmp/cpt bash tools/experiments/cpu_per_token.sh
#
# Extra arguments are model flags given to both sides. Environment: BIN (default:
# a copy of bazel-bin/cli/skipswarm in OUT), OUT (/tmp/skipswarm-cpu-per-token),
# LOCAL_FLAGS (extra `skipswarm local` flags), NICE (default 5).
# Output: OUT/table.txt with one line per run and the steady ratio.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/skipswarm-cpu-per-token}
SHORT=${SHORT:-5}
LONG=${LONG:-25}
NICE=${NICE:-5}
mkdir -p "$OUT"
if [[ -z "${BIN:-}" ]]; then
  bazel build //cli:skipswarm >/dev/null
  cp -f bazel-bin/cli/skipswarm "$OUT/skipswarm.new" && mv -f "$OUT/skipswarm.new" "$OUT/skipswarm"
  BIN="$OUT/skipswarm"
fi
: > "$OUT/table.txt"
for n in "$SHORT" "$LONG"; do
  rm -rf "$OUT/local-$n"
  nice -n "$NICE" "$BIN" local --local_iterations="$n" --local_dir="$OUT/local-$n" \
    ${LOCAL_FLAGS:-} "$@" | tr '\r' '\n' | grep -v '^\[' > "$OUT/local-$n.log" || true
  # "throughput: T tokens in W s (...); nodes used C CPU-s (...)"
  line=$(grep '^throughput:' "$OUT/local-$n.log") || { cat "$OUT/local-$n.log" >&2; exit 1; }
  tokens=$(sed -E 's/^throughput: ([0-9.]+) tokens.*/\1/' <<<"$line")
  cpu=$(sed -E 's/.*nodes used ([0-9.]+) CPU-s.*/\1/' <<<"$line")
  echo "local $n $tokens $cpu" >> "$OUT/table.txt"
  TIMEFORMAT='%U %S'
  # Global batch of the default swarm: 2 data nodes x 4 MBs.
  gb=$(( ${LOCAL_DATA_NODES:-2} * ${LOCAL_MBS:-4} ))
  { time nice -n "$NICE" "$BIN" train-ref --iterations="$n" --threads=1 --mbs_per_iteration="$gb" \
      --eval_every=0 --checkpoint_every=0 --eval_batches=1 --final_eval_batches=1 \
      --checkpoint_dir="$OUT/ref-$n" "$@" > "$OUT/ref-$n.log" 2>&1 ; } 2> "$OUT/ref-$n.time"
  ref_cpu=$(awk '{print $1 + $2}' "$OUT/ref-$n.time")
  # train-ref's own token count ("8 MBs x 4 x 128 tokens per iteration"): a
  # swarm that dropped micro-batches trained fewer, and the run says so.
  per_it=$(grep -oE '[0-9]+ MBs x [0-9]+ x [0-9]+ tokens per iteration' "$OUT/ref-$n.log" |
           awk '{print $1 * $4 * $6}')
  ref_tokens=$(( per_it * n ))
  if [[ "${tokens%.*}" -lt "$ref_tokens" ]]; then
    echo "WARNING: the swarm trained $tokens of $ref_tokens tokens in $n iterations" \
         "(dropped micro-batches): this run is not comparable" >&2
  fi
  echo "ref $n $ref_tokens $ref_cpu" >> "$OUT/table.txt"
done
python3 - "$OUT/table.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
d = {(r[0], int(r[1])): (float(r[2]), float(r[3])) for r in rows}
ns = sorted({k[1] for k in d})
for side in ("local", "ref"):
    for n in ns:
        t, c = d[(side, n)]
        print(f"{side:5s} {n:4d} it: {t:9.0f} tokens {c:8.1f} CPU-s {t / c:7.1f} tokens/CPU-s")
s, l = ns[0], ns[-1]
steady = {}
for side in ("local", "ref"):
    (t0, c0), (t1, c1) = d[(side, s)], d[(side, l)]
    steady[side] = (c1 - c0) / (t1 - t0)
    print(f"{side:5s} steady ({s}->{l} it): {1e3 * steady[side]:.3f} CPU-ms/token")
t, c = d[("local", l)]; tr, cr = d[("ref", l)]
print(f"local/ref CPU per token: whole {l}-it runs {c / t / (cr / tr):.3f}, steady {steady['local'] / steady['ref']:.3f}")
PY
