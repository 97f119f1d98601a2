# Real hosts on one machine (sourced by the tests in this folder): network
# namespaces joined by veth pairs and a bridge, public hosts on the bridge,
# home hosts each behind their own NAT router namespace (iptables
# MASQUERADE, inbound connections dropped), bandwidth caps with `tc tbf`
# (the kernel here has no netem). Real `skipswarm node` processes run in
# them with `nx HOST command...`.
#
#   source tests/netns/netns_lib.sh
#   netns_require || exit 0       # prints why and records a skip
#   netns_init                    # the bridge ("wan") namespace; cleanup on exit
#   netns_public p1               # 10.231.0.11
#   netns_home h1                 # 10.232.1.2 behind router 10.231.0.101
#   netns_cap p1 20mbit           # egress cap of p1
#   nx p1 skipswarm node ...      # run in p1's namespace
#
# Addresses: the bridge subnet 10.231.0.0/24 is "the internet"; public
# host k gets 10.231.0.(10+k), home host k's router 10.231.0.(100+k) and
# the home host 10.232.k.2 behind it. Every namespace and link a run makes
# carries the run's prefix and goes at exit (netns_cleanup, a trap), so
# concurrent runs do not collide.
#
# Tests report through nt_case / nt_skip / nt_finish, which write the
# gtest-style XML Bazel reads ($XML_OUTPUT_FILE) with skipped cases
# counted, so .ci/run's summary shows them.

NETNS_PREFIX="ss$$"
NETNS_WAN="${NETNS_PREFIX}w"
NETNS_PUBLIC_COUNT=0
NETNS_HOME_COUNT=0
declare -A NETNS_NS=()     # host -> namespace
declare -A NETNS_ADDR=()   # host -> its own address
declare -A NETNS_ROUTER=() # home host -> its router's namespace
NT_CASES=()                # "name|result|message", result: passed failed skipped

nt_case() {  # name passed|failed [message]
  NT_CASES+=("$1|$2|${3:-}")
  echo "[netns] $1: $2${3:+ ($3)}"
}

nt_skip() {  # name message
  NT_CASES+=("$1|skipped|$2")
  echo "[netns] SKIPPED $1: $2"
}

nt_finish() {  # writes the XML; exit status: 1 if a case failed
  local tests=${#NT_CASES[@]} failures=0 skipped=0 c name result msg
  for c in "${NT_CASES[@]}"; do
    IFS='|' read -r name result msg <<<"$c"
    [ "$result" = failed ] && failures=$((failures + 1))
    [ "$result" = skipped ] && skipped=$((skipped + 1))
  done
  if [ -n "${XML_OUTPUT_FILE:-}" ]; then
    {
      echo '<?xml version="1.0" encoding="UTF-8"?>'
      echo "<testsuites tests=\"$tests\" failures=\"$failures\" disabled=\"0\" skipped=\"$skipped\" errors=\"0\" name=\"netns\">"
      echo "<testsuite name=\"netns\" tests=\"$tests\" failures=\"$failures\" skipped=\"$skipped\" errors=\"0\">"
      for c in "${NT_CASES[@]}"; do
        IFS='|' read -r name result msg <<<"$c"
        msg=$(sed 's/&/\&amp;/g; s/</\&lt;/g; s/>/\&gt;/g; s/"/\&quot;/g' <<<"$msg")
        echo "<testcase name=\"$name\" classname=\"netns\">"
        [ "$result" = failed ] && echo "<failure message=\"$msg\"/>"
        [ "$result" = skipped ] && echo "<skipped message=\"$msg\"/>"
        echo "</testcase>"
      done
      echo "</testsuite></testsuites>"
    } >"$XML_OUTPUT_FILE"
  fi
  echo "[netns] $((tests - failures - skipped)) passed, $failures failed, $skipped skipped"
  [ "$failures" -eq 0 ]
}

# Why namespaces cannot be used here, or nothing (status 0) when they can.
netns_unavailable_reason() {
  [ "$(id -u)" -eq 0 ] || { echo "not root (network namespaces need root)"; return; }
  command -v ip >/dev/null || { echo "no 'ip' (apt-get install iproute2)"; return; }
  command -v iptables >/dev/null || { echo "no 'iptables' (tools/setup.sh installs it)"; return; }
  command -v tc >/dev/null || { echo "no 'tc' (apt-get install iproute2)"; return; }
  local probe="${NETNS_PREFIX}probe"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "'ip netns add' is not permitted here (a sandbox or container without CAP_SYS_ADMIN)"
    return
  fi
  if ! ip netns exec "$probe" iptables -t nat -L >/dev/null 2>&1; then
    ip netns del "$probe" 2>/dev/null
    echo "iptables NAT does not work in a namespace here"
    return
  fi
  ip netns del "$probe" 2>/dev/null
}

# REQUIRES: called first. Status 1 (with every case in $@ recorded as
# skipped, loudly) when namespaces are unavailable.
netns_require() {
  local why
  why=$(netns_unavailable_reason)
  [ -z "$why" ] && return 0
  echo "======================================================================"
  echo "[netns] SKIPPING the network-namespace tests: $why"
  echo "======================================================================"
  local c
  for c in "$@"; do nt_skip "$c" "$why"; done
  return 1
}

netns_cleanup() {
  local pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${NETNS_PREFIX}"); do
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -9 $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
}

netns_init() {
  trap netns_cleanup EXIT
  ip netns add "$NETNS_WAN"
  ip -n "$NETNS_WAN" link set lo up
  ip -n "$NETNS_WAN" link add br0 type bridge
  ip -n "$NETNS_WAN" link set br0 up
}

nx() {  # host command... : runs it in the host's namespace
  local host=$1
  shift
  ip netns exec "${NETNS_NS[$host]}" "$@"
}

# A veth pair from namespace $1 (named $2 there) to the bridge.
_netns_to_bridge() {
  local ns=$1 ifname=$2 tag=$3
  local a="${NETNS_PREFIX}${tag}a" b="${NETNS_PREFIX}${tag}b"
  ip link add "$a" type veth peer name "$b"
  ip link set "$a" netns "$ns"
  ip -n "$ns" link set "$a" name "$ifname"
  ip link set "$b" netns "$NETNS_WAN"
  ip -n "$NETNS_WAN" link set "$b" master br0
  ip -n "$NETNS_WAN" link set "$b" up
  ip -n "$ns" link set "$ifname" up
}

netns_public() {  # host
  local host=$1
  NETNS_PUBLIC_COUNT=$((NETNS_PUBLIC_COUNT + 1))
  local k=$NETNS_PUBLIC_COUNT
  local ns="${NETNS_PREFIX}p${k}"
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  _netns_to_bridge "$ns" eth0 "p${k}"
  ip -n "$ns" addr add "10.231.0.$((10 + k))/24" dev eth0
  NETNS_NS[$host]=$ns
  NETNS_ADDR[$host]="10.231.0.$((10 + k))"
}

# A home host behind its own NAT router: outbound connections work
# (masqueraded as the router's address), inbound ones are dropped.
netns_home() {  # host
  local host=$1
  NETNS_HOME_COUNT=$((NETNS_HOME_COUNT + 1))
  local k=$NETNS_HOME_COUNT
  local rt="${NETNS_PREFIX}r${k}" ns="${NETNS_PREFIX}h${k}"
  ip netns add "$rt"
  ip netns add "$ns"
  ip -n "$rt" link set lo up
  ip -n "$ns" link set lo up
  _netns_to_bridge "$rt" eth0 "r${k}"
  ip -n "$rt" addr add "10.231.0.$((100 + k))/24" dev eth0
  local a="${NETNS_PREFIX}h${k}a" b="${NETNS_PREFIX}h${k}b"
  ip link add "$a" type veth peer name "$b"
  ip link set "$a" netns "$ns"
  ip -n "$ns" link set "$a" name eth0
  ip link set "$b" netns "$rt"
  ip -n "$rt" link set "$b" name eth1
  ip -n "$rt" link set eth1 up
  ip -n "$ns" link set eth0 up
  ip -n "$rt" addr add "10.232.${k}.1/24" dev eth1
  ip -n "$ns" addr add "10.232.${k}.2/24" dev eth0
  ip -n "$ns" route add default via "10.232.${k}.1"
  ip netns exec "$rt" sysctl -qw net.ipv4.ip_forward=1
  ip netns exec "$rt" iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE
  ip netns exec "$rt" iptables -A FORWARD -i eth0 -o eth1 -m state --state RELATED,ESTABLISHED -j ACCEPT
  ip netns exec "$rt" iptables -A FORWARD -i eth0 -o eth1 -j DROP
  NETNS_NS[$host]=$ns
  NETNS_ADDR[$host]="10.232.${k}.2"
  NETNS_ROUTER[$host]=$rt
}

# Egress bandwidth cap of a host (its uplink); for a home host also its
# router's LAN side (its downlink). RATE in tc units, e.g. 20mbit.
netns_cap() {  # host rate
  local host=$1 rate=$2
  nx "$host" tc qdisc add dev eth0 root tbf rate "$rate" burst 64kb latency 200ms
  if [ -n "${NETNS_ROUTER[$host]:-}" ]; then
    ip netns exec "${NETNS_ROUTER[$host]}" tc qdisc add dev eth1 root tbf rate "$rate" \
      burst 64kb latency 200ms
  fi
}

# Waits (bounded) until FILE contains PATTERN; status 1 on timeout.
wait_for_line() {  # file pattern seconds
  local file=$1 pattern=$2 deadline=$((SECONDS + $3))
  while [ $SECONDS -lt $deadline ]; do
    grep -q -- "$pattern" "$file" 2>/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# The public ("internet" side) address of a home host's router.
netns_router_addr() {  # home host
  ip -n "${NETNS_ROUTER[$1]}" -4 -o addr show dev eth0 | awk '{print $4}' | cut -d/ -f1
}

# A port forward on a home host's router (what a volunteer sets up in the
# router's admin page): inbound TCP to the router's PORT goes to the home
# host's PORT; everything else inbound stays dropped.
netns_forward() {  # home host, port
  local host=$1 port=$2 rt="${NETNS_ROUTER[$1]}"
  ip netns exec "$rt" iptables -t nat -A PREROUTING -i eth0 -p tcp --dport "$port" \
    -j DNAT --to-destination "${NETNS_ADDR[$host]}:$port"
  ip netns exec "$rt" iptables -I FORWARD 1 -i eth0 -o eth1 -p tcp -d "${NETNS_ADDR[$host]}" \
    --dport "$port" -j ACCEPT
}
