#!/usr/bin/env bash
# The real-process attack suite (tests/adversarial/README.md, "Real-process
# suite"): for each attack, a `skipswarm local` swarm of real node processes
# on loopback trains the tiny test model while the hostile client
# (tests/adversarial/hostile, built from the protos alone) attacks every
# member from outside; a fault-free run of the same swarm is the baseline.
# Per attack it reports the honest swarm's tokens/s while the attack runs
# (the data nodes' tokens in the attack's window of their clock; the
# fault-free run's same window is the baseline) and over the whole run, the
# final loss against the baseline, the largest peak RSS of an honest node
# against the smallest memory ceiling the nodes stated at start (Note
# [Memory ceiling] in node/daemon/reporting/memory_ceiling.h: "memory
# ceiling: N MiB" in each node's log; 0 when none did, e.g. an older
# binary), the attacker's first refusal and the answers it got.
# results.txt: attack exit tokens/s peak-RSS-MiB loss tokens/s-during ceiling-MiB
#
#   bazel build //cli:skipswarm //tests/adversarial/hostile:hostile_client_main
#   tools/experiments/attack_suite.sh                 # full: 400 iterations, 30 s attacks
#   tools/experiments/attack_suite.sh --short         # CI-sized: 60 iterations, 4 s attacks
#   tools/experiments/attack_suite.sh --binary=/path/to/older/skipswarm --out=/tmp/before
#   tools/experiments/attack_suite.sh --repeat=3      # each run 3 times, interleaved; medians
#   tools/experiments/attack_suite.sh --pin=0:1       # swarm on CPU 0, attacker on CPU 1
#
# Attacks: frames pushes gossip suspicion state manifest model (a node of
# another model joins: --stages=10 --host_stages=9). The attacker runs at
# nice 19 on the same machine, so part of what it costs the swarm is CPU.
# --pin=SWARM:ATTACKER (taskset CPU lists) keeps the attacker's own work off
# the swarm's CPUs, as an attacker on another machine would be: what is left
# of the tokens/s loss is what serving and refusing its requests costs the
# honest nodes. The fault-free run is pinned the same way (its attacker
# CPUs idle), so both sides of the ratio have the same CPUs.
set -uo pipefail
cd "$(dirname "$0")/../.."

BIN=bazel-bin/cli/skipswarm
HOSTILE=bazel-bin/tests/adversarial/hostile/hostile_client_main
OUT=/tmp/skipswarm-attacks
ITERATIONS=400
SECONDS_ATTACK=30
ATTACKS="none frames pushes gossip suspicion state manifest model"
REPEAT=1
PIN=""
for arg in "$@"; do
  case "$arg" in
    --short) ITERATIONS=60; SECONDS_ATTACK=4 ;;
    --binary=*) BIN="${arg#*=}" ;;
    --hostile=*) HOSTILE="${arg#*=}" ;;
    --out=*) OUT="${arg#*=}" ;;
    --iterations=*) ITERATIONS="${arg#*=}" ;;
    --seconds=*) SECONDS_ATTACK="${arg#*=}" ;;
    --attacks=*) ATTACKS="none ${arg#*=}" ;;
    --repeat=*) REPEAT="${arg#*=}" ;;
    --pin=*) PIN="${arg#*=}" ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "no $BIN (bazel build //cli:skipswarm)" >&2; exit 2; }
[ -x "$HOSTILE" ] || { echo "no $HOSTILE (bazel build //tests/adversarial/hostile:hostile_client_main)" >&2; exit 2; }
SWARM_CPUS=(); ATTACKER_CPUS=()
if [ -n "$PIN" ]; then
  [[ "$PIN" == *:* ]] || { echo "--pin wants SWARM:ATTACKER CPU lists, e.g. 0:1" >&2; exit 2; }
  SWARM_CPUS=(taskset -c "${PIN%%:*}")
  ATTACKER_CPUS=(taskset -c "${PIN#*:}")
  "${SWARM_CPUS[@]}" true && "${ATTACKER_CPUS[@]}" true || { echo "bad --pin=$PIN" >&2; exit 2; }
fi
mkdir -p "$OUT"
TINY=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
      --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)

# The data nodes' newest elapsed_s in a run's progress.jsonl (their clock).
newest_elapsed() {
  python3 -c 'import json,sys
e=[json.loads(l).get("elapsed_s",0) for l in open(sys.argv[1]) if "\"completed\"" in l]
print(max(e) if e else 0)' "$1"
}
# Tokens/s the data nodes trained in (FROM, FROM + SECONDS] of their clock,
# the window ending early if the run did.
window_tokens_per_s() {
  python3 -c 'import json,sys
start,length=float(sys.argv[2]),float(sys.argv[3])
rows=[json.loads(l) for l in open(sys.argv[1]) if "\"completed\"" in l]
end=min(start+length,max(r["elapsed_s"] for r in rows))
tok=sum(r.get("tokens",0) for r in rows if start<r["elapsed_s"]<=end)
print("%.0f" % (tok/(end-start)) if end>start else 0)' "$1" "$2" "$3"
}

# Mean loss of the last 10 iterations of a run's loss.csv.
final_loss() { tail -n 10 "$1" | awk -F, '{s += $2; n++} END {if (n) printf "%.4f", s / n}'; }

run_one() {
  local attack=$1 dir="$OUT/$1"
  rm -rf "$dir"
  "${SWARM_CPUS[@]}" "$BIN" local "${TINY[@]}" --local_dir="$dir" --local_iterations="$ITERATIONS" \
    > "$OUT/$attack.out" 2>&1 &
  local swarm=$!
  # Training has started once a few iterations are reported.
  for _ in $(seq 600); do
    [ -f "$dir/progress.jsonl" ] && [ "$(grep -c '"completed"' "$dir/progress.jsonl")" -ge 6 ] && break
    sleep 0.1
  done
  local bootstrap
  bootstrap=$(sed -n 's/.*"listen": "\(.*\)".*/\1/p' "$dir/d0.json")
  # Each local run names its own swarm (Note [One swarm per run]); the
  # attacker knows it, as anyone who can read a public swarm's records does.
  local swarm_id
  swarm_id=$(sed -n 's/.*"swarm_name": "\(.*\)".*/\1/p' "$dir/d0.json")
  local started=$(date +%s.%N)
  local window_from
  window_from=$(newest_elapsed "$dir/progress.jsonl")
  case "$attack" in
    none) sleep "$SECONDS_ATTACK" ;;
    model)
      # A validly configured node of another model tries to join.
      mkdir -p "$dir/intruder"
      "${ATTACKER_CPUS[@]}" timeout "$SECONDS_ATTACK" "$BIN" node --join="$bootstrap" --insecure --name=intruder --swarm_name="${swarm_id:-skipswarm}" \
        --stages=10 --layers=10 --host_stages=9 --checkpoint_dir="$dir/intruder" \
        > "$OUT/model.intruder.log" 2>&1
      echo "{\"attack\": \"model\", \"intruder_exit\": $?, \"intruder_s\": $(echo "$(date +%s.%N) - $started" | bc)}" \
        > "$OUT/model.hostile.json" ;;
    *)
      "${ATTACKER_CPUS[@]}" nice -n 19 "$HOSTILE" --bootstrap="$bootstrap" --swarm_id="${swarm_id:-skipswarm}" --attack="$attack" \
        --seconds="$SECONDS_ATTACK" > "$OUT/$attack.hostile.json" 2> "$OUT/$attack.hostile.err" ;;
  esac
  wait "$swarm"
  local rc=$?
  local toks rss loss ceiling
  toks=$(sed -n 's/^throughput: .*(\([0-9.]*\) tok\/s).*/\1/p' "$OUT/$attack.out")
  rss=$(sed -n 's/^peak RSS per node (MiB): //p' "$OUT/$attack.out" |
        tr ' ' '\n' | grep -E '^[0-9]+$' | sort -n | tail -1)
  loss=$(final_loss "$dir/loss.csv")
  ceiling=$(cat "$dir"/logs/*.err 2>/dev/null | sed -n 's/.*memory ceiling: \([0-9]*\) MiB.*/\1/p' |
            sort -n | head -1)
  local during
  during=$(window_tokens_per_s "$dir/progress.jsonl" "$window_from" "$SECONDS_ATTACK")
  echo "$attack $rc ${toks:-0} ${rss:-0} ${loss:-nan} ${during:-0} ${ceiling:-0}" >> "$OUT/results.txt"
}

rm -f "$OUT/results.txt" "$OUT/loads.txt"
# Repetitions interleave (none, attacks, none, attacks, ...) so that the
# machine's load drifts over all of them alike; results.txt has a line per
# run, loads.txt the 1-minute load average at each run's start.
for rep in $(seq "$REPEAT"); do
  for attack in $ATTACKS; do
    echo "== $attack (run $rep of $REPEAT)"
    echo "$attack $rep $(cut -d' ' -f1 /proc/loadavg)" >> "$OUT/loads.txt"
    run_one "$attack"
  done
done

# The table: each attack against the fault-free run; with --repeat, the
# median of the runs (tokens/s and loss), the largest peak RSS, and every
# run's tokens/s.
median() { sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
column_of() { awk -v a="$1" -v c="$2" '$1 == a {print $c}' "$OUT/results.txt"; }
base_toks=$(column_of none 3 | median)
base_loss=$(column_of none 5 | median)
base_during=$(column_of none 6 | median)
{
  echo "| attack | exit | tokens/s during the attack (vs fault-free) | tokens/s, whole run (vs fault-free) | final loss (vs fault-free) | max honest peak RSS MiB | memory ceiling MiB (under?) | attacker's first refusal | answers |"
  echo "|---|---|---|---|---|---|---|---|---|"
  for attack in $ATTACKS; do
    rc=$(column_of "$attack" 2 | sort -u | tr '\n' ' ' | sed 's/ $//')
    toks=$(column_of "$attack" 3 | median)
    loss=$(column_of "$attack" 5 | median)
    rss=$(column_of "$attack" 4 | sort -n | tail -1)
    during=$(column_of "$attack" 6 | median)
    # The smallest ceiling any run's nodes stated, against the largest peak.
    ceiling=$(column_of "$attack" 7 | sort -n | head -1)
    under=$(awk -v r="$rss" -v c="${ceiling:-0}" 'BEGIN {if (c <= 0) print "not stated"; else if (r <= c) print "under"; else print "OVER"}')
    during_rel=$(awk -v t="$during" -v b="$base_during" 'BEGIN {if (b > 0) printf "%.0f%%", 100 * t / b}')
    [ "$REPEAT" -gt 1 ] && during="median $during of $(column_of "$attack" 6 | tr '\n' ' ' | sed 's/ $//' | tr ' ' '/')"
    rel=$(awk -v t="$toks" -v b="$base_toks" 'BEGIN {if (b > 0) printf "%.0f%%", 100 * t / b}')
    dl=$(awk -v l="$loss" -v b="$base_loss" 'BEGIN {if (b > 0) printf "%+.1f%%", 100 * (l - b) / b}')
    [ "$REPEAT" -gt 1 ] && toks="median $toks of $(column_of "$attack" 3 | tr '\n' ' ' | sed 's/ $//' | tr ' ' '/')"
    refusal="-"; answers="-"
    if [ -f "$OUT/$attack.hostile.json" ]; then
      refusal=$(sed -n 's/.*"first_refusal_s": \([-0-9.e]*\).*/\1 s/p' "$OUT/$attack.hostile.json")
      answers=$(sed -n 's/.*"answers": {\([^}]*\)}.*/\1/p' "$OUT/$attack.hostile.json" | tr -d '"')
      [ "$attack" = model ] && refusal=$(sed -n 's/.*"intruder_exit": \([0-9]*\), "intruder_s": \([0-9.]*\).*/exit \1 after \2 s/p' "$OUT/model.hostile.json")
    fi
    echo "| $attack | $rc | $during ($during_rel) | $toks ($rel) | $loss ($dl) | $rss | ${ceiling:-0} ($under) | ${refusal:--} | ${answers:--} |"
  done
  echo
  echo "load average (1 min) at each run's start: $(awk '{print $3}' "$OUT/loads.txt" | tr '\n' ' ')"
  if [ -n "$PIN" ]; then
    echo "pinned: swarm on CPUs ${PIN%%:*}, attacker on CPUs ${PIN#*:} (taskset)"
  fi
} | tee "$OUT/table.md"
