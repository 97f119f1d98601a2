#!/usr/bin/env bash
# CI-sized run of the real-process attack suite (tools/experiments/
# attack_suite.sh --short): a fault-free `skipswarm local` swarm, then the
# same swarm under far-future frames and a gossip processing-cost flood
# from the hostile client. Every run must finish its iterations with a
# finite loss, every honest node's peak RSS must stay under the memory
# ceiling the nodes stated (Note [Memory ceiling]), and the attacker must
# have been refused.
#   args: attack_suite.sh skipswarm hostile_client_main
set -uo pipefail
suite=$1 bin=$2 hostile=$3
out="${TEST_TMPDIR:-/tmp}/attacks"
bash "$suite" --short --attacks="frames gossip" --binary="$PWD/$bin" \
  --hostile="$PWD/$hostile" --out="$out" || { echo "suite failed"; exit 1; }
fail=0
while read -r attack rc toks rss loss during ceiling; do
  echo "$attack: exit $rc, $toks tok/s ($during during the attack), peak RSS $rss MiB (ceiling $ceiling MiB), final loss $loss"
  [ "$rc" = 0 ] || { echo "FAIL: $attack: the swarm exited $rc"; fail=1; }
  awk -v t="$toks" 'BEGIN {exit !(t > 0)}' || { echo "FAIL: $attack: no tokens"; fail=1; }
  awk -v l="$loss" 'BEGIN {exit !(l > 0 && l < 10)}' || { echo "FAIL: $attack: loss $loss"; fail=1; }
  awk -v c="$ceiling" 'BEGIN {exit !(c > 0)}' || { echo "FAIL: $attack: no node stated its memory ceiling"; fail=1; }
  awk -v r="$rss" -v c="$ceiling" 'BEGIN {exit !(r <= c)}' ||
    { echo "FAIL: $attack: peak RSS $rss MiB over the stated ceiling $ceiling MiB"; fail=1; }
done < "$out/results.txt"
for attack in frames gossip; do
  grep -q '"RESOURCE_EXHAUSTED"' "$out/$attack.hostile.json" ||
    { echo "FAIL: $attack: the attacker was never refused"; cat "$out/$attack.hostile.json"; fail=1; }
done
cat "$out/table.md"
exit $fail
