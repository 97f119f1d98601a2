#!/usr/bin/env bash
# A poisoning replica as a real process (tests/adversarial/README.md,
# "Poisoning replica"): a `skipswarm local` swarm of the tiny model with 3
# replicas of stage 1, started from the test-only binary
# `poisoning_skipswarm` (tests/adversarial/poison/), in which node s1r2
# hands its replica group a poisoned gradient every iteration. Per attack
# it reports the final loss against the fault-free run, and whether the
# honest replicas pulled the liar in / banned it (Note [Robust averaging],
# Note [Group bans]). `undefended:` runs the same attack with centered
# clipping and bans turned off on every node (--avg_outlier_factor=0
# --avg_ban_after=0): what the defence is worth.
#
#   bazel build //tests/adversarial/poison:poisoning_skipswarm
#   tools/experiments/poison_swarm.sh                  # 150 iterations, 5 attacks
#   tools/experiments/poison_swarm.sh --short          # CI-sized: the sign flip alone
#   tools/experiments/poison_swarm.sh --attacks="signflip:8 undefended:signflip:8"
#   tools/experiments/poison_swarm.sh --mixed --liar=w0 --attacks=signflip:8
#
# --mixed: the mixed SDP swarm of node/train/README.md ("Robust averaging
# with SDP"): 4 stages, pipeline d0 + s1r0..s3r2 and the SDP workers w0
# {0,1,3}, w1 {0,2,3}; `undefended:` turns the defence off on every node
# but the liar. The refusal and ban counts are over every node's log but
# the liar's.
#
# crash:N (no poison): the liar is SIGKILLed once iteration N is reported
# (`skipswarm local --kill`): the swarm without its data from then on, the
# capacity a ban costs; crash:0 is the swarm without it almost from the
# start.
#
# --eval: every run also checkpoints at its last iteration, and the final
# validation loss (`eval` of the launcher's copy, 200 validation batches)
# and the mean loss of the last 10 iterations of the loss reporters other
# than the liar (loss.csv's figure includes the liar's own loss) go into
# the table and $OUT/figures.txt ("name validation honest_loss"). The
# launcher copies the first node of each stage by name (d0, s1r0, s2r0,
# s3r0), so with --liar=s1r0 stage 1's copy is the liar's.
set -uo pipefail
cd "$(dirname "$0")/../.."

BIN=bazel-bin/tests/adversarial/poison/poisoning_skipswarm
OUT=/tmp/skipswarm-poison
ITERATIONS=150
ATTACKS="signflip:8 scale:1000 nan undefended:signflip:8 undefended:scale:1000"
MIXED=0
LIAR=s1r2
EVAL=0
for arg in "$@"; do
  case "$arg" in
    --short) ITERATIONS=150; ATTACKS="signflip:8 undefended:signflip:8" ;;
    --binary=*) BIN="${arg#*=}" ;;
    --out=*) OUT="${arg#*=}" ;;
    --iterations=*) ITERATIONS="${arg#*=}" ;;
    --attacks=*) ATTACKS="${arg#*=}" ;;
    --mixed) MIXED=1 ;;
    --liar=*) LIAR="${arg#*=}" ;;
    --eval) EVAL=1 ;;
    *) echo "unknown argument $arg" >&2; exit 2 ;;
  esac
done
[ -x "$BIN" ] || { echo "no $BIN (bazel build //tests/adversarial/poison:poisoning_skipswarm)" >&2; exit 2; }
mkdir -p "$OUT"
TINY=(--stages=2 --layers=2 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
      --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1
      --local_replicas=3 --local_iterations="$ITERATIONS" --local_planner=inorder)
HONEST=(s1r0 s1r1 s1r2)
if [ "$MIXED" = 1 ]; then
  TINY=(--stages=4 --layers=4 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
        --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1
        --sdp=forward --local_mixed --sdp_workers=2 --sdp_keep=0.75 --local_data_nodes=1
        --local_replicas=3 --local_mbs=6 --local_planner=inorder --local_iterations="$ITERATIONS")
  HONEST=(d0 s1r0 s1r1 s1r2 s2r0 s2r1 s2r2 s3r0 s3r1 s3r2 w0 w1)
fi

# Mean loss of the last 10 iterations of a run's loss.csv.
final_loss() { tail -n 10 "$1" | awk -F, '{s += $2; n++} END {if (n) printf "%.4f", s / n}'; }

# Mean loss of the last 10 iterations of the loss reporters but the liar,
# from a run's progress.jsonl.
honest_loss() {
  grep '"loss":' "$1" | grep -v "\"node\":\"$LIAR\"" |
    sed 's/.*"iteration":\([0-9]*\).*"loss":\([0-9.e+-]*\).*/\1 \2/' |
    awk -v from=$((ITERATIONS - 10)) '$1 >= from {s += $2; n++} END {if (n) printf "%.4f", s / n}'
}

# Final validation loss of a run's last checkpoint (the launcher's copy).
validation_loss() {
  "$BIN" eval --checkpoint="$1/evals/iter-$(printf %06d "$ITERATIONS")" --samples_per_mb=2 \
    --final_eval_batches=200 --keep_fraction=1 2>/dev/null | awk '$1 == "0%" {print $4}'
}

run_one() {
  local name=$1 poison=$2 undefended=$3 dir="$OUT/$1" crash=${4:-}
  local config="" extra=()
  [ -n "$poison" ] && config="$LIAR:poison=$poison"
  [ -n "$crash" ] && extra+=(--kill="$LIAR@$crash")
  [ "$EVAL" = 1 ] && extra+=(--local_eval_every="$ITERATIONS")
  local judges=() n
  for n in "${HONEST[@]}"; do [ "$n" != "$LIAR" ] && judges+=("$n"); done
  if [ "$undefended" = 1 ]; then
    for n in "${judges[@]}"; do
      config="$config,$n:avg_outlier_factor=0,$n:avg_ban_after=0"
    done
  fi
  rm -rf "$dir"
  "$BIN" local "${TINY[@]}" "${extra[@]}" --local_dir="$dir" \
    --local_node_config="${config#,}" > "$OUT/$name.out" 2>&1
  local rc=$?
  local loss pulled banned
  loss=$(final_loss "$dir/loss.csv")
  local logs=()
  for n in "${judges[@]}"; do logs+=("$dir/logs/$n.err"); done
  pulled=$(cat "${logs[@]}" 2>/dev/null | grep -c "pulled in\|left out\|was clipped")
  banned=$(cat "${logs[@]}" 2>/dev/null | grep -c "banning ")
  echo "$name $rc ${loss:-nan} $pulled $banned" >> "$OUT/results.txt"
  if [ "$EVAL" = 1 ]; then
    local val honest
    val=$(validation_loss "$dir")
    honest=$(honest_loss "$dir/progress.jsonl")
    echo "$name ${val:-nan} ${honest:-nan}" >> "$OUT/figures.txt"
  fi
}

rm -f "$OUT/results.txt" "$OUT/figures.txt"
echo "== none"
run_one none "" 0
for attack in $ATTACKS; do
  echo "== $attack"
  case "$attack" in
    undefended:*) run_one "$(echo "$attack" | tr ':' '_')" "${attack#undefended:}" 1 ;;
    crash:*) run_one "$(echo "$attack" | tr ':' '_')" "" 0 "${attack#crash:}" ;;
    *) run_one "$(echo "$attack" | tr ':' '_')" "$attack" 0 ;;
  esac
done

read -r _ _ base_loss _ _ < <(grep '^none ' "$OUT/results.txt")
base_val="" base_honest=""
[ "$EVAL" = 1 ] && read -r _ base_val base_honest < <(grep '^none ' "$OUT/figures.txt")
# "x (+y%)" against the fault-free figure b.
versus() { awk -v l="$1" -v b="$2" 'BEGIN {printf "%s", l; if (b ~ /^[0-9.]+$/ && l ~ /^[0-9.]+$/ && b > 0) printf " (%+.1f%%)", 100 * (l - b) / b}'; }
{
  if [ "$EVAL" = 1 ]; then
    echo "| run | exit | final loss (vs fault-free) | validation loss | honest reporters' loss | honest replicas' refusal log lines | bans |"
    echo "|---|---|---|---|---|---|---|"
  else
    echo "| run | exit | final loss (vs fault-free) | honest replicas' refusal log lines | bans |"
    echo "|---|---|---|---|---|"
  fi
  while read -r name rc loss pulled banned; do
    if [ "$EVAL" = 1 ]; then
      read -r _ val honest < <(grep "^$name " "$OUT/figures.txt")
      echo "| $name | $rc | $(versus "$loss" "$base_loss") | $(versus "$val" "$base_val") | $(versus "$honest" "$base_honest") | $pulled | $banned |"
    else
      echo "| $name | $rc | $(versus "$loss" "$base_loss") | $pulled | $banned |"
    fi
  done < "$OUT/results.txt"
} | tee "$OUT/table.md"
