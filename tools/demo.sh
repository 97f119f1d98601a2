#!/usr/bin/env bash
# README command 1: set everything up, build, and run the main job.
#
# The main job grows as modules land. Today it runs, in order, every stage
# of the product that exists in this checkout (see README "Status"):
#   1. the route planner on SkipPipe's published 20-node, 12-region swarm,
#      comparing every planner (skipswarm plan);
#   2. a short training run of the staged model on the default corpus
#      (skipswarm train-ref), with progress shown;
#   3. the local multi-process swarm (skipswarm local), once it exists.
# Extra arguments are passed to the last step.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build //node:skipswarm
bin=bazel-bin/node/skipswarm
has() { "$bin" help | grep -qE "^  $1 "; }

if has local; then
  exec "$bin" local "$@"
fi
ran=0
if has plan; then
  echo "== Planning routes on SkipPipe's 20-node, 12-region swarm =="
  "$bin" plan --scenario=scheduler/testdata/skippipe_gcp20_schedule.json --planner=all
  ran=1
fi
if has train-ref; then
  echo "== Training the default staged model on the fortunes corpus =="
  "$bin" train-ref "$@"
  ran=1
fi
if [ "$ran" -eq 0 ]; then
  echo "demo: no runnable job in this checkout yet" >&2
  exit 1
fi
