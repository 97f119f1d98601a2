#!/usr/bin/env bash
# Note [Revocation] with real processes: four `skipswarm node` daemons on
# loopback (ports 0) form an allow-list swarm of a 3-stage tiny model: the
# founder f (data node, stage 0), a and b (stage 1 replicas), c (stage 2).
# Once f has trained a few iterations the operator revokes b with
# `skipswarm revoke` into the founder's --revocations_file. Checked:
#  - every other member (f, a, c) evicts b (log line "evicted <b>: revoked");
#  - b learns it is revoked (Note [Revocation notice]) and stops with the
#    cause, exit 1 ("the swarm's founder revoked this node");
#  - f, a and c train on: at least AFTER more iterations once b is out,
#    then a SIGTERM stops them cleanly (exit 0).
# The run has no fixed length: the founder re-reads the file every 5 s, so
# a swarm faster than that (a quiet machine trains 150 tiny iterations in a
# few seconds) finished before anyone evicted b, and the test failed on
# speed alone. It waits for the events instead (bounded), then stops.
# Prints the times from the revocation file's write to each of those, from
# the daemons' log timestamps. Before the notice, b never learnt: it ran on,
# refused by everyone, until killed.
#   args: skipswarm [AFTER, default 30]
set -uo pipefail
bin=$1
case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
after=${2:-30}
iterations=1000000  # stopped by SIGTERM below
out="${TEST_TMPDIR:-/tmp}/revocation-swarm"
rm -rf "$out"
mkdir -p "$out"
name=revocation-test
model=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)
cleanup() {
  local f
  for f in "$out"/*.pid; do [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null; done
  wait 2>/dev/null
}
trap cleanup EXIT

for n in f a b c; do
  "$bin" keygen --key_file="$out/$n.key" > /dev/null 2>&1 || { echo "FAIL: keygen $n"; exit 1; }
done
id() { "$bin" keygen --key_file="$out/$1.key" --show_key 2>&1 | sed -n 's/^node id //p'; }
id_a=$(id a) id_b=$(id b) id_c=$(id c)

# start NAME STAGE [flags]: output in $out/NAME.{out,err}; exit status in $out/NAME.rc.
start() {
  local n=$1 stage=$2
  shift 2
  ( timeout 600 "$bin" node --name="$n" --host_stages="$stage" --node_key_file="$out/$n.key" \
      --listen=127.0.0.1:0 --expect_members=4 --node_iterations="$iterations" \
      --control_port=-1 --checkpoint_dir="$out/ckpt-$n" --swarm_name="$name" \
      "${model[@]}" "$@" > "$out/$n.out" 2> "$out/$n.err" &
    echo $! > "$out/$n.pid"
    wait $!
    echo $? > "$out/$n.rc" ) &
}

start f 0 --admission=allowlist --allow_node_ids="$id_a,$id_b,$id_c" \
  --revocations_file="$out/revoked.txt" --write_swarm_file="$out/swarm.json" \
  --progress_file="$out/progress.jsonl"
# Waits (at most $2 s) until the command in $1 succeeds.
wait_for() {
  local deadline=$((SECONDS + $2))
  until eval "$1"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.2
  done
}
wait_for '[ -s "$out/swarm.json" ]' 120 || { echo "FAIL: the founder wrote no swarm file"; exit 1; }
for n in a b; do start "$n" 1 --join="$out/swarm.json"; done
start c 2 --join="$out/swarm.json"

# Revoke b once the swarm trains (10 iterations in).
wait_for '[ "$( (wc -l < "$out/progress.jsonl") 2>/dev/null || echo 0)" -ge 10 ]' 300 ||
  { echo "FAIL: the swarm did not train 10 iterations"; tail -3 "$out"/*.err; exit 1; }
"$bin" revoke --key_file="$out/f.key" --swarm_name="$name" \
  --revocations_file="$out/revoked.tmp" "$id_b" > "$out/revoke.log" 2>&1 ||
  { echo "FAIL: skipswarm revoke"; cat "$out/revoke.log"; exit 1; }
revoked_at=$(date +%s.%N)
revoked_iteration=$(wc -l < "$out/progress.jsonl")
mv "$out/revoked.tmp" "$out/revoked.txt"

# Every other member evicts b, and b stops on its own (at most 120 s).
evicted() { grep -q "evicted ${id_b:0:8}.*: revoked" "$out/$1.err" 2>/dev/null; }
wait_for 'evicted f && evicted a && evicted c && [ -e "$out/b.rc" ]' 120 ||
  echo "b was not evicted everywhere or did not stop within 120 s (checked below)"
[ -e "$out/b.rc" ] || { kill "$(cat "$out/b.pid")"; wait_for '[ -e "$out/b.rc" ]' 30; }
# The rest trains on without b, then stops cleanly on SIGTERM.
out_at=$(wc -l < "$out/progress.jsonl")
wait_for '[ "$(wc -l < "$out/progress.jsonl")" -ge $((out_at + after)) ]' 300 ||
  echo "the swarm did not train $after iterations after b was out (checked below)"
# To the daemon itself, not its `timeout`: timeout passes a SIGTERM on to
# the daemon and to its own process group, so the daemon got two, and a
# second signal ends it at once (exit 143, no checkpoint; Note [Stopping]).
for n in f a c; do pkill -TERM -P "$(cat "$out/$n.pid")"; done
wait_for '[ -e "$out/f.rc" ] && [ -e "$out/a.rc" ] && [ -e "$out/c.rc" ]' 120
fail=0
for n in f a c; do
  rc=$(cat "$out/$n.rc" 2>/dev/null || echo none)
  [ "$rc" = 0 ] || { echo "FAIL: $n exited $rc"; tail -3 "$out/$n.err"; fail=1; }
done
trained=$(wc -l < "$out/progress.jsonl")
[ "$trained" -ge $((out_at + after)) ] ||
  { echo "FAIL: $((trained - out_at)) of $after iterations trained after b was out"; fail=1; }
rc_b=$(cat "$out/b.rc" 2>/dev/null || echo none)
grep -q "revoked this node" "$out/b.err" && [ "$rc_b" = 1 ] ||
  { echo "FAIL: b did not stop on its revocation (exit $rc_b)"; fail=1; }

# Seconds from the revocation to each event (glog timestamps, local time).
python3 - "$revoked_at" "$out" "${id_b:0:8}" <<'EOF' || fail=1
import datetime, os, re, sys
t0, out, short_b = float(sys.argv[1]), sys.argv[2], sys.argv[3]
year = datetime.datetime.fromtimestamp(t0).year
def first(path, pattern):
    try:
        lines = open(path, errors="replace").read().splitlines()
    except OSError:
        return None
    for line in lines:
        # glog: "W20261204 23:59:22.998446 ..." (older glog: no year).
        m = re.match(r"[IWEF](\d{4})?(\d\d)(\d\d) (\d\d):(\d\d):(\d\d\.\d+)", line)
        if m and re.search(pattern, line):
            y, mo, d, h, mi, s = m.groups()
            t = datetime.datetime(int(y or year), int(mo), int(d), int(h),
                                  int(mi)).timestamp() + float(s)
            return t - t0
    return None
ok = True
for n in ("f", "a", "c"):
    t = first(os.path.join(out, n + ".err"), r"evicted %s.*: revoked" % short_b)
    print("%s evicted b after %s s" % (n, "%.2f" % t if t is not None else "never"))
    ok &= t is not None
t = first(os.path.join(out, "b.err"), r"revoked this node")
print("b learnt it is revoked after %s s" % ("%.2f" % t if t is not None else "never"))
ok &= t is not None
sys.exit(0 if ok else 1)
EOF
python3 - "$out/progress.jsonl" "$revoked_iteration" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
after = [r for r in rows if r["iteration"] >= int(sys.argv[2])]
print("after the revocation: %d iterations, %d of %d micro-batches dropped; final loss %.4f"
      % (len(after), sum(r["dropped"] for r in after),
         sum(r["dropped"] + r["completed"] for r in after),
         [r for r in rows if r["loss"] >= 0][-1]["loss"]))
PY
echo "revoked at founder iteration $revoked_iteration ($(date -d @"${revoked_at%.*}" +%T)); b out by $out_at; the swarm trained $trained; b exited $rc_b"
exit $fail
