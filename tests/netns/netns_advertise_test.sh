#!/usr/bin/env bash
# --advertise=auto on real NAT (Note [Advertise auto] in
# node/daemon/gossip/advertise_auto.h), with real `skipswarm node`
# processes on namespaced hosts: two public founders (p1, p2) wait for a
# swarm that never forms (it only needs them to answer); two home hosts
# join them, each behind its own NAT router:
#   forwarded_home_is_reachable  h1's router forwards TCP 7000 to it (DNAT);
#                        with --advertise=auto it adopts the router's
#                        address both peers see and is dialed back there
#                        (skipswarm_reachable 1).
#   unforwarded_home_is_relayed  h2's router forwards nothing; with no
#                        --advertise (auto is the default for a --join node
#                        on 0.0.0.0) the observed address is not dialed
#                        back, so it goes outbound-only and attaches relays.
# Needs root; skips loudly without namespaces (netns_lib.sh).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$here/netns_lib.sh"

BIN="${SKIPSWARM_BINARY:-bazel-bin/cli/skipswarm}"
BIN="$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")"
TIMEOUT_S="${NETNS_TIMEOUT_S:-90}"
OUT="${TEST_UNDECLARED_OUTPUTS_DIR:-${TEST_TMPDIR:-/tmp}}/netns-advertise-$$"
mkdir -p "$OUT"
MODEL=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --seed=1 --init_seed=1)
CASES=(forwarded_home_is_reachable unforwarded_home_is_relayed)

netns_require "${CASES[@]}" || { nt_finish; exit $?; }
netns_init
netns_public p1
netns_public p2
netns_home h1
netns_home h2
netns_forward h1 7000
r1=$(netns_router_addr h1)
r2=$(netns_router_addr h2)

# NAME on HOST, hosting STAGE, waiting for 5 members (never reached).
start_node() {  # host name stage [flags]
  local host=$1 name=$2 stage=$3
  shift 3
  nx "$host" timeout "$TIMEOUT_S" "$BIN" node --name="$name" --host_stages="$stage" \
    --node_key_file="$OUT/$name.key" --create_key --listen=0.0.0.0:7000 \
    --expect_members=5 --node_iterations=5 --control_port=-1 \
    --checkpoint_dir="$OUT/ckpt-$name" "${MODEL[@]}" "$@" \
    >"$OUT/$name.out" 2>"$OUT/$name.err" &
  LAST_PID=$!
}
scrape() {  # host port: the /metrics text
  nx "$1" python3 -c "import urllib.request
print(urllib.request.urlopen('http://127.0.0.1:$2/metrics', timeout=5).read().decode())" 2>/dev/null
}

JOIN="--join=${NETNS_ADDR[p1]}:7000"
start_node p1 a0 0
pids=($LAST_PID)
wait_for_line "$OUT/a0.out" "advertised as" 30
start_node p2 a1 1 "$JOIN"
pids+=($LAST_PID)
wait_for_line "$OUT/a1.out" "reachable at\|behind NAT\|reachability" 30
t0=$SECONDS
start_node h1 h1 2 "$JOIN" --advertise=auto --metrics_port=9400
pids+=($LAST_PID)
wait_for_line "$OUT/h1.out" "reachable at\|behind NAT\|reachability" 30
h1_s=$((SECONDS - t0))
# h2 after h1 settled: it may ask h1 too (3 observers) if h1's new record
# reached it, or only p1 and p2.
t0=$SECONDS
start_node h2 h2 2 "$JOIN" --metrics_port=9401
pids+=($LAST_PID)
wait_for_line "$OUT/h2.out" "reachable at\|behind NAT\|reachability" 30
wait_for_line "$OUT/h2.out" "outbound-only mode, relayed by" 30
h2_s=$((SECONDS - t0))
h1_metrics=$(scrape h1 9400)
h2_metrics=$(scrape h2 9401)
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for p in "${pids[@]}"; do wait "$p"; done

for h in h1 h2; do
  echo "[netns] $h: $(grep -m1 '^advertise=auto' "$OUT/$h.out")"
  echo "[netns] $h: $(grep -m1 'reachable at\|behind NAT\|reachability' "$OUT/$h.out")"
done
echo "[netns] h2: $(grep -m1 'outbound-only mode, relayed by' "$OUT/h2.out")"
echo "[netns] h1 metrics: $(grep '^skipswarm_reachable \|^skipswarm_advertise_auto' <<<"$h1_metrics" | tr '\n' ' ')"
echo "[netns] h2 metrics: $(grep '^skipswarm_reachable \|^skipswarm_advertise_auto' <<<"$h2_metrics" | tr '\n' ' ')"

auto1=$(grep -m1 '^advertise=auto' "$OUT/h1.out")
line1=$(grep -m1 'reachable at\|behind NAT\|reachability' "$OUT/h1.out")
if [ "$auto1" = "advertise=auto: peers see us as $r1 (2 of 2 agree); advertising $r1:7000" ] &&
   [[ "$line1" == "reachable at $r1:7000 (dialed back by 2 of 2 answering peers)" ]] &&
   grep -q '^skipswarm_reachable 1$' <<<"$h1_metrics" &&
   grep -q '^skipswarm_advertise_auto_agreeing_peers{observers="2"} 2$' <<<"$h1_metrics"; then
  nt_case forwarded_home_is_reachable passed "$line1, settled in ${h1_s} s"
else
  nt_case forwarded_home_is_reachable failed "'$auto1' / '$line1'; logs in $OUT"
  tail -n 20 "$OUT/h1.err"
fi

auto2=$(grep -m1 '^advertise=auto' "$OUT/h2.out")
line2=$(grep -m1 'reachable at\|behind NAT\|reachability' "$OUT/h2.out")
if [[ "$auto2" =~ ^"advertise=auto: peers see us as $r2 ("[23]" of "[23]" agree); advertising $r2:7000"$ ]] &&
   [[ "$line2" =~ ^"behind NAT: outbound-only mode ($r2:7000 could not be dialed by "[23]" of "[23]" peers; they see this node as $r2)"$ ]] &&
   grep -q "outbound-only mode, relayed by" "$OUT/h2.out" &&
   grep -q '^skipswarm_reachable 0$' <<<"$h2_metrics"; then
  nt_case unforwarded_home_is_relayed passed "$line2, relayed in ${h2_s} s"
else
  nt_case unforwarded_home_is_relayed failed "'$auto2' / '$line2'; logs in $OUT"
  tail -n 20 "$OUT/h2.err"
fi

nt_finish
