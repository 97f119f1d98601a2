#!/usr/bin/env bash
# A home host behind NAT hosts a replica of a stage through relays (Note
# [Relayed members], node/daemon/gossip/gossip_daemon_relay.cc), with real
# `skipswarm node` processes on namespaced hosts:
#   home_replica_trains  4 public hosts (d0: stage 0, s1: stage 1, s2a and
#                        s2b: stage 2; s1 relays for nobody) train; home h1
#                        joins as a second replica of stage 1 with
#                        --relays=2 (two of d0, s2a, s2b) and processes
#                        micro-batches (its progress lines' visits), its
#                        share from its first iteration with a full one,
#                        which comes at most 5 after its entry (it is
#                        routed once its state is loaded).
#   relay_failover       one of its relays that hosts stage 2 is killed
#                        (SIGKILL) mid-run; h1 attaches to the remaining
#                        candidate within 5 s.
#   trains_after_relay_loss  in the 20 s after the kill the data node trains
#                        on and h1 keeps doing stage-1 visits (Note [Relayed
#                        verdicts] in node/daemon/gossip/training_members.cc).
#   bare_join_first_microbatch  then home h2, behind its own NAT, joins
#                        with a volunteer's command line only (--join, its
#                        name, key, listen port and checkpoint folder; no
#                        model flags, no stage): its first useful micro-batch
#                        (its JOIN line) comes within JOIN_LIMIT_S (15) of
#                        the spawn; the steps in between are reported from
#                        its log lines.
# The long run is in tests/netns/README.md. Needs root; skips loudly without
# namespaces (netns_lib.sh).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/netns_lib.sh"

BIN="${SKIPSWARM_BINARY:-bazel-bin/cli/skipswarm}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
# The tiny model's iterations take tens of milliseconds here, while a home
# node needs seconds to check reachability, attach and join; a swarm that
# could finish before it enters would leave it nothing to join. The nodes
# run until the script stops them (or TIMEOUT_S), so the default is large.
ITERATIONS="${NETNS_RELAY_ITERATIONS:-100000}"
RATE="${NETNS_RATE:-50mbit}"
TIMEOUT_S="${NETNS_TIMEOUT_S:-150}"
OUT="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}/netns-relay-$$"
mkdir -p "$OUT"
MODEL=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)
# In-order routes with round-robin replicas (default here): each stage-1
# replica gets half the micro-batches, so the home node's share is known.
# NETNS_PLANNER=skippipe plans from the measured (relay-path) costs instead.
PLANNER="${NETNS_PLANNER:-inorder}"
# A joiner's first useful micro-batch, seconds after its spawn (issue's bound).
JOIN_LIMIT_S="${NETNS_JOIN_LIMIT_S:-15}"
CASES=(home_replica_trains relay_failover trains_after_relay_loss bare_join_first_microbatch)

netns_require "${CASES[@]}" || { nt_finish; exit $?; }
netns_init
for h in p1 p2 p3 p4; do netns_public "$h"; done
netns_home h1
netns_home h2
for h in p1 p2 p3 p4 h1 h2; do netns_cap "$h" "$RATE"; done

# A node on `host`: NAME [flags]; output in $OUT/NAME.{out,err}, pid in LAST_PID.
start_node() {
  local host=$1 name=$2
  shift 2
  nx "$host" timeout "$TIMEOUT_S" "$BIN" node --name="$name" \
    --node_key_file="$OUT/$name.key" --create_key --listen=0.0.0.0:7000 \
    --node_iterations="$ITERATIONS" --control_port=-1 --node_planner="$PLANNER" \
    --checkpoint_dir="$OUT/ckpt-$name" "${MODEL[@]}" "$@" \
    >"$OUT/$name.out" 2>"$OUT/$name.err" &
  LAST_PID=$!
}

t0=$SECONDS
JOIN="--join=${NETNS_ADDR[p1]}:7000"
start_node p1 d0 --host_stages=0 --expect_members=4
pid_d0=$LAST_PID
wait_for_line "$OUT/d0.out" "advertised as" 30
start_node p2 s1 --host_stages=1 --expect_members=4 --relay_slots=0 "$JOIN"
pid_s1=$LAST_PID
start_node p3 s2a --host_stages=2 --expect_members=4 "$JOIN"
pid_s2a=$LAST_PID
start_node p4 s2b --host_stages=2 --expect_members=4 "$JOIN"
pid_s2b=$LAST_PID
wait_for_line "$OUT/d0.out" "^\[d0\] it 3 " 60
start_node h1 h1 --host_stages=1 --relays=2 --metrics_port=9401 "$JOIN"
pid_h1=$LAST_PID
wait_for_line "$OUT/h1.out" "outbound-only mode, relayed by" 60
relay_line=$(grep -m1 "outbound-only mode, relayed by" "$OUT/h1.out")
wait_for_line "$OUT/h1.out" "outbound-only mode, relayed by .*, " 30
relay_line=$(grep -m1 "outbound-only mode, relayed by .*, " "$OUT/h1.out")
# The first of its relays that hosts stage 2 (s2a on p3, s2b on p4).
relay_ip=""
for ip in $(grep -o "(10[0-9.]*:" <<<"$relay_line" | tr -d '(:'); do
  if [ "$ip" = "${NETNS_ADDR[p3]}" ] || [ "$ip" = "${NETNS_ADDR[p4]}" ]; then relay_ip=$ip; break; fi
done
echo "[netns] h1: $relay_line"

# relay_failover: once h1 trains, kill its relay (the stage-2 replica on
# that host); the other stage-2 replica keeps the stage.
wait_for_line "$OUT/h1.out" "^\[h1\] it .* s1 visits [1-9]" 90
victim="" other=""
if [ "$relay_ip" = "${NETNS_ADDR[p3]}" ]; then victim=p3; other=s2a; fi
if [ "$relay_ip" = "${NETNS_ADDR[p4]}" ]; then victim=p4; other=s2b; fi
if [ -n "$victim" ]; then
  # Every process in the relay's namespace (its `timeout` and the node),
  # hard: a crashed host.
  ip netns pids "${NETNS_NS[$victim]}" | xargs -r kill -KILL
  echo "[netns] killed h1's relay $other ($relay_ip) at iteration $(grep -c '^\[d0\] it ' "$OUT/d0.out") of d0"
fi
wait_for_line "$OUT/h1.out" "re-attached" 30
reattach_line=$(grep -m1 "re-attached" "$OUT/h1.out")
echo "[netns] h1: $reattach_line"
# Seconds the daemon measured (loss detected -> attached elsewhere).
reattach_s=$(sed -n 's/.*re-attached \([0-9.]*\)\(m\?s\).*/\1 \2/p' <<<"$reattach_line" |
  awk '{ print ($2 == "ms") ? $1 / 1000 : $1 }')

# What d0 trains in the 20 s after the kill (see README: known gap).
d0_at_kill=$(grep -c '^\[d0\] it ' "$OUT/d0.out")
sleep 20
d0_after=$(( $(grep -c '^\[d0\] it ' "$OUT/d0.out") - d0_at_kill ))

# bare_join_first_microbatch: what a volunteer types (docs/OPERATING.md,
# "Join a swarm"): no model flags, no --host_stages (the allocation picks
# the stage), no test knobs; everything else comes from the swarm manifest.
spawn_s=$(date +%s.%N)
nx h2 timeout "$TIMEOUT_S" "$BIN" node --name=h2 --node_key_file="$OUT/h2.key" --create_key \
  "$JOIN" --listen=0.0.0.0:7000 --checkpoint_dir="$OUT/ckpt-h2" >"$OUT/h2.out" 2>"$OUT/h2.err" &
pid_h2=$!
wait_for_line "$OUT/h2.out" "^JOIN " $((JOIN_LIMIT_S + 30))

# Done measuring: stop every node (hard; the run's own namespaces only).
for h in p1 p2 p3 p4 h1 h2; do ip netns pids "${NETNS_NS[$h]}" | xargs -r kill -KILL; done
for p in $pid_d0 $pid_s1 $pid_s2a $pid_s2b $pid_h1 $pid_h2; do wait "$p" 2>/dev/null; done
# h1's share before the kill: its progress lines up to d0's kill iteration,
# from its first with a full share (2); the ones before it (`waited`) are
# those the data node planned before h1's ready record came (Note [Routed
# once ready] in node/daemon/gossip/training_members.h).
visits=$(grep -o "^\[h1\] it [0-9]* | s1 visits [0-9]*" "$OUT/h1.out" |
  awk -v k="$d0_at_kill" '$3 < k { if (n == 0 && $NF < 2) { w += 1; next } s += $NF; n += 1 }
    END { print s + 0, n + 0, w + 0 }')
read -r visits home_its waited <<<"$visits"
echo "[netns] h1: ${visits} stage-1 micro-batch visits in its ${home_its} iterations before the kill (in-order routes give each stage-1 replica 2 of 4), ${waited} iterations before its first full share"
# h1's visits after the kill (iterations numbered like d0's).
after=$(grep -o "^\[h1\] it [0-9]* | s1 visits [0-9]*" "$OUT/h1.out" |
  awk -v k="$d0_at_kill" '$3 >= k { s += $NF; n += 1 } END { print s + 0, n + 0 }')
read -r visits_after home_its_after <<<"$after"
echo "[netns] d0: ${d0_after} iterations in the 20 s after the kill; h1: ${visits_after} stage-1 visits in its ${home_its_after} iterations after it; $((SECONDS - t0)) s in all"
if [ "$home_its" -gt 0 ] && [ "$visits" -ge $((2 * home_its - 2)) ] && [ "$waited" -le 5 ]; then
  nt_case home_replica_trains passed "h1 (behind NAT) did ${visits} stage-1 visits in ${home_its} iterations after ${waited} before its full share"
else
  nt_case home_replica_trains failed "visits=$visits in $home_its iterations, $waited before its full share; logs in $OUT"
  for f in "$OUT"/*.err; do echo "== $f"; tail -n 5 "$f"; done
fi
if [ -n "$victim" ] && [ -n "$reattach_s" ] && awk "BEGIN { exit !($reattach_s < 5) }"; then
  nt_case relay_failover passed "re-attached in ${reattach_s} s"
else
  nt_case relay_failover failed "victim '$victim' re-attach '${reattach_s}'; logs in $OUT"
fi
if [ -n "$victim" ] && [ "$d0_after" -ge 5 ] && [ "$visits_after" -gt 0 ]; then
  nt_case trains_after_relay_loss passed "d0 trained ${d0_after} iterations in 20 s after the kill, h1 did ${visits_after} visits"
else
  nt_case trains_after_relay_loss failed "d0 trained ${d0_after} iterations after the kill, h1 did ${visits_after} visits; logs in $OUT"
fi
# h2's steps: seconds after the spawn of the first log line of each (glog's
# local time, like `date`), and the daemon's own JOIN figures.
join_result=$(python3 - "$OUT/h2.err" "$spawn_s" "$JOIN_LIMIT_S" <<'PY'
import datetime, json, re, sys
err, spawn, limit = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
steps = [("manifest fetched", r"swarm manifest \S+ from founder"),
         ("joined", r"joined the swarm through"),
         ("reachability decided", r"behind NAT: outbound-only mode|reachable at"),
         ("relay attached", r"outbound-only mode, relayed by"),
         ("entry announced", r"entering stage \d+ at iteration"),
         ("state fetched", r"state of stage \d+ at iteration"),
         ("first useful micro-batch", r"JOIN \{")]
at, join = {}, None
for line in open(err, errors="replace"):
    m = re.match(r"^[IWE](\d{8} \d\d:\d\d:\d\d\.\d+)", line)
    if not m:
        continue
    t = datetime.datetime.strptime(m.group(1), "%Y%m%d %H:%M:%S.%f").timestamp() - spawn
    for name, pattern in steps:
        if name not in at and re.search(pattern, line):
            at[name] = t
    if join is None and "JOIN {" in line:
        join = json.loads(line[line.index("{"):])
parts = ", ".join("%s %s" % (n, "%.2f s" % at[n] if n in at else "missing") for n, _ in steps)
first = at.get("first useful micro-batch")
if join is None or first is None:
    print("failed|no JOIN line: %s" % parts)
    sys.exit()
daemon = ("daemon: process %.2f s (manifest %.2f s), bootstrap %.2f s, place %.2f s, announce "
          "%.2f s, wait for the source's boundary %.2f s, state transfer %.2f s, first micro-batch "
          "%.2f s; exec -> first micro-batch %.2f s; stage %d, entry %d after %d attempt(s), "
          "digests agree %s" % (
              join["process_s"], join["manifest_s"], join["bootstrap_s"], join["place_build_s"],
              join["announce_s"], join["wait_source_boundary_s"], join["state_transfer_s"],
              join["first_mb_s"], join["from_spawn_s"], join["stage"], join["entry"],
              join["entry_attempts"], join["digests_agree"]))
ok = first <= limit and join["digests_agree"]
print("%s|first useful micro-batch %.2f s after the spawn (limit %.0f s); after the spawn: %s; %s" % (
    "passed" if ok else "failed", first, limit, parts, daemon))
PY
)
[ -n "$join_result" ] || join_result="failed|no figures from $OUT/h2.err"
echo "[netns] h2 (bare --join): ${join_result#*|}"
nt_case bare_join_first_microbatch "${join_result%%|*}" "${join_result#*|}; logs in $OUT"
nt_finish
