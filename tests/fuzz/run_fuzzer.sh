#!/usr/bin/env bash
# Runs a fuzz target over a copy of its corpus folders (libFuzzer writes new
# inputs into its corpus directory; the checked-in ones stay as they are):
# the seeds make_seeds writes and the inputs long runs found (README.md).
#   run_fuzzer.sh TARGET CORPUS_DIR... [libFuzzer flags, e.g. -runs=20000 -seed=1]
# The same flags work for the GCC build (tests/fuzz/fuzz_driver.cc).
set -euo pipefail
target="$1"
shift
work="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
rm -rf "$work"
mkdir -p "$work"
while [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; do
  cp "$1"/* "$work"/
  shift
done
exec "$target" "$@" "$work"
