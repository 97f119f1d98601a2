#!/usr/bin/env bash
# Lints a running swarm's /metrics with Prometheus' own linter:
# starts two `skipswarm node` daemons (a 2-stage tiny model over loopback,
# plain text), lets them train, scrapes each node's /metrics and runs
# `promtool check metrics` on it. Exits non-zero on any finding.
#   bash tools/check_metrics.sh [path/to/skipswarm]
# promtool: the one on PATH, else Debian's `prometheus` package unpacked
# into a temporary folder (apt-get download; nothing installed, so no
# Prometheus server is set up on this machine).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-bazel-bin/cli/skipswarm}"
[ -x "$bin" ] || bazel build //cli:skipswarm
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

promtool="$(command -v promtool || true)"
if [ -z "$promtool" ]; then
  # A mirror's passing hiccup must not fail CI: three tries, 5 s apart.
  for try in 1 2 3; do
    (cd "$work" && apt-get download prometheus >"$work/apt.log" 2>&1 &&
      dpkg-deb -x prometheus_*.deb pkg) && break
    [ "$try" -lt 3 ] && sleep 5
  done
  [ -x "$work/pkg/usr/bin/promtool" ] ||
    { echo "check_metrics: no promtool (Debian package prometheus) and cannot download it:" >&2
      cat "$work/apt.log" >&2; exit 1; }
  promtool="$work/pkg/usr/bin/promtool"
fi

model=(--stages=2 --layers=2 --d_model=32 --heads=4 --ffn=64 --seq_len=16 --samples_per_mb=2
       --threads=1 --seed=1 --init_seed=1)
# Starts the two daemons on free ports and waits (at most 120 s) until the
# data node reported an iteration. The ports are free when chosen but not
# held: another process may take one before a daemon binds it, so a failed
# start is retried once on new ports.
start_swarm() {
  local ports swarm n
  ports=($(python3 -c "
import socket
s = [socket.socket() for _ in range(4)]
for x in s: x.bind(('127.0.0.1', 0))
print(*[x.getsockname()[1] for x in s])"))
  swarm="a/0/127.0.0.1:${ports[0]}/127.0.0.1:${ports[1]},b/1/127.0.0.1:${ports[2]}/127.0.0.1:${ports[3]}"
  for n in a b; do
    "$bin" node "${model[@]}" --name="$n" --swarm="$swarm" --insecure --node_iterations=1000000 \
      --metrics_listen=127.0.0.1:0 >"$work/$n.out" 2>"$work/$n.err" &
    pids+=($!)
  done
  for _ in $(seq 240); do
    grep -q "loss" "$work/a.out" 2>/dev/null && return 0
    sleep 0.5
  done
  return 1
}
if ! start_swarm; then
  echo "check_metrics: no iteration in 120 s; retrying on new ports. Node a said:" >&2
  tail -20 "$work/a.err" >&2
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  start_swarm || { echo "check_metrics: no iteration in 120 s, twice" >&2; cat "$work/a.err" >&2; exit 1; }
fi
status=0
for n in a b; do
  port="$(grep -o '/metrics on [0-9.]*:[0-9]*' "$work/$n.err" | sed 's/.*://')"
  curl -sf "http://127.0.0.1:$port/metrics" >"$work/$n.metrics"
  families=$(grep -c '^# TYPE' "$work/$n.metrics")
  if "$promtool" check metrics <"$work/$n.metrics"; then
    echo "check_metrics: node $n: $families families, promtool clean"
  else
    echo "check_metrics: node $n: promtool findings above" >&2
    status=1
  fi
done
exit $status
