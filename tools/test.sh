#!/usr/bin/env bash
# README command 2: set everything up, build, and run the whole test suite.
#   bash tools/test.sh [extra bazel flags, e.g. --config=asan]
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec bazel test //... "$@"
