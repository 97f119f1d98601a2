#!/usr/bin/env bash
# Note [Late members] with real processes: a `skipswarm local` swarm of a
# 2-stage model (data nodes d0 d1 host stage 0; s1r0 s1r1 replicate stage
# 1), H = 4 outer steps with int8, and s1r1's averaging upload capped at
# 0.1 Mbit/s (--local_sync_caps: its half of a round, ~33 KB, takes ~2.6 s),
# the others' at 2. With a deadline of
# max(1 s, the expected upload time) (--outer_deadline_min_s=1, factor 1)
# the sync does not wait for s1r1: s1r0 closes it out and s1r1 applies the
# average it missed. Checked: the run trains every iteration, s1r0 left
# s1r1 out at least once and s1r1 knew it missed a round, and both stage-1
# replicas end on the same parameters (digests of the last iteration).
# With the deadline off (--outer_deadline_factor=0, every member waited
# for) the same run leaves nobody out: the second check fails there, so it
# tests the deadline, not the swarm.
#   args: skipswarm [deadline factor, default 1]
set -uo pipefail
bin=$1
factor=${2:-1}
out="${TEST_TMPDIR:-/tmp}/outer-deadline"
iterations=32
rm -rf "$out"
mkdir -p "$out"
model="--layers=2 --stages=2 --d_model=64 --heads=4 --ffn=176 --seq_len=32 --samples_per_mb=2 --lr=3e-3 --warmup_steps=4"
"$PWD/$bin" local --local_data_nodes=2 --local_replicas=2 --local_mbs=2 \
  --local_iterations=$iterations --local_eval_every=0 --local_checkpoint_every=0 \
  --local_dir="$out/swarm" --seed=1 --outer_every=4 --avg_codec=int8 --outer_lr=1 \
  --outer_momentum=0 --outer_deadline_min_s=1 --outer_deadline_factor="$factor" \
  --local_sync_caps=d0@2,d1@2,s1r0@2,s1r1@0.1 $model > "$out/local.log" 2>&1
rc=$?
tail -5 "$out/local.log"
fail=0
[ "$rc" = 0 ] || { echo "FAIL: skipswarm local exited $rc"; fail=1; }
trained=$(grep -c '^[0-9]' "$out/swarm/loss.csv" 2>/dev/null || echo 0)
[ "$trained" -ge "$iterations" ] || { echo "FAIL: $trained of $iterations iterations trained"; fail=1; }
left=$(grep -c "late replica(s) left out of the outer sync" "$out/swarm/logs/s1r0.err" 2>/dev/null)
missed=$(grep -c "pseudo-gradient missed its round's deadline" "$out/swarm/logs/s1r1.err" 2>/dev/null)
left=${left:-0} missed=${missed:-0}
echo "s1r0 left a replica out of $left sync(s); s1r1 missed $missed"
[ "$left" -ge 1 ] || { echo "FAIL: s1r0 never closed the slow replica out"; fail=1; }
[ "$missed" -ge 1 ] || { echo "FAIL: s1r1 never applied an average it missed"; fail=1; }
# The last iteration's stage-1 digest on each replica (progress lines
# "[node] it N ... | s1 visits ... digest X").
digests=$(cat "$out/swarm/logs/s1r0.out" "$out/swarm/logs/s1r1.out" 2>/dev/null | python3 -c '
import re, sys
last = int(sys.argv[1]) - 1
seen = {}
for line in sys.stdin:
    m = re.match(r"\[(\S+)\] it (\d+) (.*)", line)
    if not m or int(m.group(2)) != last:
        continue
    for s, d in re.findall(r"\| s(\d+) visits .*? digest ([0-9a-f]+)", m.group(3)):
        if s == "1":
            seen[m.group(1)] = d
print(" ".join(sorted(seen.values())), len(set(seen.values())), len(seen))
' "$iterations")
echo "stage 1 digests after the last iteration: $digests"
read -r -a d <<< "$digests"
n=${#d[@]}
if [ "$n" -lt 2 ] || [ "${d[$((n - 1))]}" != 2 ] || [ "${d[$((n - 2))]}" != 1 ]; then
  echo "FAIL: the stage-1 replicas do not end on one digest"
  fail=1
fi
exit $fail
