#!/usr/bin/env bash
# CI-sized run of tools/experiments/poison_swarm.sh --short: a real
# `skipswarm local` swarm (test binary poisoning_skipswarm) whose replica
# s1r2 of 3 sends its gradient sign-flipped x8 every iteration. With the
# defences (Note [Robust averaging], Note [Group bans]) the final loss
# stays within the run-to-run noise band of the fault-free run (below +5%:
# the band and why, tests/adversarial/README.md "Poisoning replica") and
# both honest replicas ban the liar; with centered clipping and bans off
# on every node (what main had before them: the norm bound alone) the same
# run ends > 4% worse, beyond that band too (the attack works, so the
# first check means something). The fault-free run bans nobody.
#   args: poison_swarm.sh poisoning_skipswarm
set -uo pipefail
script=$1 bin=$2
out="${TEST_TMPDIR:-/tmp}/poison"
bash "$script" --short --binary="$PWD/$bin" --out="$out" || { echo "script failed"; exit 1; }
cat "$out/table.md"
fail=0
read -r _ rc0 base _ banned_none < <(grep '^none ' "$out/results.txt")
read -r _ rc1 defended pulled banned < <(grep '^signflip_8 ' "$out/results.txt")
read -r _ rc2 undefended _ banned_off < <(grep '^undefended_signflip_8 ' "$out/results.txt")
for rc in "$rc0" "$rc1" "$rc2"; do
  [ "$rc" = 0 ] || { echo "FAIL: a swarm exited $rc"; fail=1; }
done
awk -v l="$defended" -v b="$base" 'BEGIN {exit !(b > 0 && l > 0 && (l - b) / b < 0.05)}' ||
  { echo "FAIL: defended final loss $defended vs fault-free $base (> +5%)"; fail=1; }
[ "$banned_none" = 0 ] || { echo "FAIL: the fault-free run banned an honest replica"; fail=1; }
[ "$banned" -ge 2 ] || { echo "FAIL: $banned honest replicas banned the liar (want 2)"; fail=1; }
[ "$banned_off" = 0 ] || { echo "FAIL: bans with --avg_ban_after=0"; fail=1; }
awk -v l="$undefended" -v b="$base" 'BEGIN {exit !(b > 0 && (l - b) / b > 0.04)}' ||
  { echo "FAIL: undefended final loss $undefended vs $base: the attack did nothing"; fail=1; }
exit $fail
