#!/usr/bin/env bash
# README command 1: set everything up, build, and run a first swarm: real
# `skipswarm node` processes on loopback (2 data nodes, 2 replicas of each
# of 2 more stages) train a small model (3 blocks, d_model 64) on the Debian
# fortunes corpus for 300 iterations; one replica (s1r1) is SIGKILLed after
# iteration 100 and the others route around it (loss about 5.5 -> 2.5).
# About 30 s after the build on 2 cores (measured under load 13).
# Results (loss.svg with the kill and re-routes marked, loss.csv, per-node
# logs and checkpoints) land in ./skipswarm-local/.
#
#   bash tools/demo.sh           # the small first run
#   bash tools/demo.sh --full    # the default model (12 blocks, 6 stages),
#                                # 200 iterations: about 8-35 min on 2 cores
# Further arguments go to `skipswarm local`, e.g.
#   bash tools/demo.sh --local_iterations=100 --kill=s2r1@40
set -euo pipefail
cd "$(dirname "$0")/.."
small=(--stages=3 --layers=3 --d_model=64 --heads=4 --ffn=128 --seq_len=32 --samples_per_mb=2
       --threads=1 --warmup_steps=2 --lr=0.003 --local_iterations=300 --kill=s1r1@100)
if [ "${1:-}" = "--full" ]; then
  shift
  small=()
fi
bash tools/setup.sh
bazel build //cli:skipswarm
start=$(date +%s)
status=0
bazel-bin/cli/skipswarm local "${small[@]}" "$@" || status=$?
echo "demo: the swarm ran $(( $(date +%s) - start )) s; open skipswarm-local/loss.svg in a browser"
exit $status
