#!/usr/bin/env bash
# Runs a fuzz target over a copy of its seed corpus (libFuzzer writes new
# inputs into its corpus directory; the checked-in one stays as it is).
#   run_fuzzer.sh TARGET CORPUS_DIR [libFuzzer flags, e.g. -runs=20000 -seed=1]
# The same flags work for the GCC build (tests/fuzz/fuzz_driver.cc).
set -euo pipefail
target="$1"
corpus="$2"
shift 2
work="${TEST_TMPDIR:-$(mktemp -d)}/corpus"
rm -rf "$work"
mkdir -p "$work"
cp "$corpus"/* "$work"/
exec "$target" "$@" "$work"
