#!/usr/bin/env bash
# Real `skipswarm node` processes on real (namespaced) hosts: a swarm of
# public hosts trains; a home host behind NAT can dial out but not be
# dialed. CI runs a short version (tiny model, NETNS_ITERATIONS=5); the
# long one is in tests/netns/README.md. Needs root; skips loudly without
# namespaces (netns_lib.sh).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/netns_lib.sh"

BIN="${SKIPSWARM_BINARY:-bazel-bin/cli/skipswarm}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
ITERATIONS="${NETNS_ITERATIONS:-5}"
RATE="${NETNS_RATE:-50mbit}"
TIMEOUT_S="${NETNS_TIMEOUT_S:-120}"
OUT="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}/netns-swarm-$$"
mkdir -p "$OUT"
MODEL=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)
CASES=(public_swarm_trains nat_blocks_inbound_only reachability_at_join nat_member_no_false_verdicts)
FLAP_WINDOW_S="${NETNS_FLAP_WINDOW_S:-20}"

netns_require "${CASES[@]}" || { nt_finish; exit $?; }
netns_init
netns_public p1
netns_public p2
netns_public p3
netns_home h1
for h in p1 p2 p3 h1; do netns_cap "$h" "$RATE"; done

# A node on `host`: NAME STAGE [extra flags]; output in $OUT/NAME.{out,err},
# its pid in LAST_PID. EXPECT: founders to wait for (default 3).
start_node() {
  local host=$1 name=$2 stage=$3
  shift 3
  nx "$host" timeout "$TIMEOUT_S" "$BIN" node --name="$name" --host_stages="$stage" \
    --node_key_file="$OUT/$name.key" --create_key --listen=0.0.0.0:7000 \
    --expect_members="${EXPECT:-3}" --node_iterations="$ITERATIONS" --control_port=-1 \
    --checkpoint_dir="$OUT/ckpt-$name" "${MODEL[@]}" "$@" \
    >"$OUT/$name.out" 2>"$OUT/$name.err" &
  LAST_PID=$!
}

# --- public_swarm_trains: three public hosts, one stage each.
t0=$SECONDS
start_node p1 d0 0 --progress_file="$OUT/progress.jsonl"
pid_d0=$LAST_PID
ok=1
# No --advertise and no --join: 0.0.0.0 resolves to the host's interface.
wait_for_line "$OUT/d0.out" "advertised as ${NETNS_ADDR[p1]}:7000" 30 || ok=0
start_node p2 s1 1 --join="${NETNS_ADDR[p1]}:7000"
pid_s1=$LAST_PID
start_node p3 s2 2 --join="${NETNS_ADDR[p1]}:7000"
pid_s2=$LAST_PID
for p in $pid_d0 $pid_s1 $pid_s2; do wait "$p" || ok=0; done
lines=$(wc -l <"$OUT/progress.jsonl" 2>/dev/null || echo 0)
grep -q "advertised as ${NETNS_ADDR[p2]}:7000" "$OUT/s1.out" || ok=0
if [ "$ok" -eq 1 ] && [ "$lines" -eq "$ITERATIONS" ]; then
  nt_case public_swarm_trains passed "$ITERATIONS iterations in $((SECONDS - t0)) s at $RATE"
else
  nt_case public_swarm_trains failed "progress lines $lines of $ITERATIONS; logs in $OUT"
  for f in "$OUT"/*.err; do echo "== $f"; tail -n 5 "$f"; done
fi

# --- nat_blocks_inbound_only: h1 dials p1; p1 cannot dial h1 (nor its router).
nx p1 timeout 10 python3 -c '
import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7100)); s.listen(1); c,a=s.accept(); print(a[0])' >"$OUT/peer_seen" &
listener=$!
out_ok=0; in_ok=0
for _ in $(seq 1 25); do  # until the listener is up (bounded)
  nx h1 timeout 5 bash -c "exec 3<>/dev/tcp/${NETNS_ADDR[p1]}/7100" 2>/dev/null && { out_ok=1; break; }
  sleep 0.2
done
wait "$listener"
nx h1 timeout 10 python3 -c '
import socket; s=socket.socket(); s.bind(("0.0.0.0", 7101)); s.listen(1); s.accept()' &
home_listener=$!
sleep 1  # the home listener is up (inbound must fail even so)
nx p1 timeout 3 bash -c "exec 3<>/dev/tcp/${NETNS_ADDR[h1]}/7101" 2>/dev/null && in_ok=1
nx p1 timeout 3 bash -c "exec 3<>/dev/tcp/10.231.0.101/7101" 2>/dev/null && in_ok=1
kill "$home_listener" 2>/dev/null
seen=$(cat "$OUT/peer_seen")
if [ "$out_ok" -eq 1 ] && [ "$in_ok" -eq 0 ] && [ "$seen" = "10.231.0.101" ]; then
  nt_case nat_blocks_inbound_only passed "outbound seen from the router 10.231.0.101"
else
  nt_case nat_blocks_inbound_only failed "outbound=$out_ok inbound=$in_ok seen=$seen"
fi

# --- reachability_at_join: founders waiting for a 4th member; a public
# joiner is dialed back, the home one (behind its NAT router) is not, at
# the router's address both founders see it as (--advertise=auto, the
# default for a --join node on 0.0.0.0; netns_advertise_test).
EXPECT=4
start_node p1 r0 0
pid_r0=$LAST_PID
wait_for_line "$OUT/r0.out" "advertised as" 30
start_node p2 r1 1 --join="${NETNS_ADDR[p1]}:7000"
pid_r1=$LAST_PID
wait_for_line "$OUT/r1.out" "reachable at\|behind NAT\|reachability" 30
start_node h1 r2 2 --join="${NETNS_ADDR[p1]}:7000" --metrics_port=9400
pid_r2=$LAST_PID
wait_for_line "$OUT/r2.out" "reachable at\|behind NAT\|reachability" 30
metric=$(nx h1 python3 -c 'import urllib.request
print(urllib.request.urlopen("http://127.0.0.1:9400/metrics", timeout=5).read().decode())' \
  2>/dev/null | grep '^skipswarm_reachable ')
# nat_member_no_false_verdicts: the home member stays in the swarm for the
# window; count the public members' SUSPECT / DEAD verdicts about it once
# its record says outbound-only (it marks it right after the check).
home_id=$(sed -n 's/.*node id \([0-9a-f]*\),.*/\1/p' "$OUT/r2.err" | head -1)
sleep 2
skip0=$(wc -l <"$OUT/r0.err")
skip1=$(wc -l <"$OUT/r1.err")
sleep "$FLAP_WINDOW_S"
verdicts() {  # state: count over both public members' logs in the window
  { tail -n +"$((skip0 + 1))" "$OUT/r0.err"; tail -n +"$((skip1 + 1))" "$OUT/r1.err"; } |
    grep -c "member ${home_id} MEMBER_STATE_[A-Z]* -> MEMBER_STATE_$1"
}
suspects=$(verdicts SUSPECT)
deads=$(verdicts DEAD)
echo "[netns] home member ${home_id}: ${suspects} SUSPECT, ${deads} DEAD verdicts by 2 public members in ${FLAP_WINDOW_S} s"
if [ -n "$home_id" ] && [ "$suspects" -eq 0 ] && [ "$deads" -eq 0 ]; then
  nt_case nat_member_no_false_verdicts passed "0 SUSPECT, 0 DEAD in ${FLAP_WINDOW_S} s"
else
  nt_case nat_member_no_false_verdicts failed "id '${home_id}': ${suspects} SUSPECT, ${deads} DEAD in ${FLAP_WINDOW_S} s"
fi
# SIGTERM: background jobs of a script ignore SIGINT.
for p in $pid_r0 $pid_r1 $pid_r2; do kill -TERM "$p" 2>/dev/null; done
for p in $pid_r0 $pid_r1 $pid_r2; do wait "$p"; done
public_line=$(grep -m1 "reachable at\|behind NAT\|reachability" "$OUT/r1.out")
home_line=$(grep -m1 "reachable at\|behind NAT\|reachability" "$OUT/r2.out")
echo "[netns] public joiner: $public_line"
echo "[netns] home joiner:   $home_line"
echo "[netns] home metric:   $metric"
if [[ "$public_line" == "reachable at ${NETNS_ADDR[p2]}:7000 "* ]] &&
   [[ "$home_line" == "behind NAT: outbound-only mode (10.231.0.101:7000 could not be dialed by 2 of 2 peers; they see this node as 10.231.0.101)" ]] &&
   [ "$metric" = "skipswarm_reachable 0" ]; then
  nt_case reachability_at_join passed "$home_line"
else
  nt_case reachability_at_join failed "public: '$public_line'; home: '$home_line'; metric: '$metric'"
fi

nt_finish
