#!/usr/bin/env bash
# README command 1: set everything up, build, and run the main job: a local
# swarm of real `skipswarm node` processes on loopback (2 data nodes, 2
# replicas of each of the 5 other stages) training the default model on the
# Debian fortunes corpus, with a progress bar. Results (loss.csv, loss.svg,
# per-node logs and checkpoints) land in ./skipswarm-local/.
#
# Extra arguments go to `skipswarm local`, e.g.
#   bash tools/demo.sh --local_iterations=50 --kill=s2r1@20
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build //cli:skipswarm
exec bazel-bin/cli/skipswarm local "$@"
