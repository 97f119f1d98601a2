#!/usr/bin/env bash
# clang's thread-safety analysis (-Werror=thread-safety, --config=tsa) over
# every C++ compile action of //..., without building (.ci/run runs it):
#
#   bash tools/thread_safety_check.sh [--jobs=N] [--only=a.cc,b.cc] [--all]
#
# Note [Thread-safety check]: the analysis is part of clang's semantic
# checks, so each compile action run with -fsyntax-only reports exactly what
# `bazel build --config=tsa //...` would, and costs a fraction of it: no
# code generation, no links, no second copy of every object in the cache.
# The command lines are Bazel's own (`bazel aquery --config=tsa`), run from
# its exec root after the generated headers (protos) are built. The same
# check as a real build, for comparison: bazel build --config=tsa //...
# A unit is skipped when neither its source nor any repository header it
# includes, at any depth, names a capability, a lock or an annotation
# (Mutex, *Lock(, GUARDED_BY, *_LOCKS_*, *_HELD, LOCKABLE, Await,
# Condition, ...): the analysis only reads those, and what it would check
# in absl's or gRPC's own headers is not ours (system headers: no
# diagnostics). Most tests name none; --all checks
# them too, --only checks exactly the units named.
set -euo pipefail
cd "$(dirname "$0")/.."

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# Generated headers (protos) and the exec root's links to every package.
bazel build --config=tsa --output_groups=compilation_prerequisites_INTERNAL_ //...
bazel aquery --config=tsa 'mnemonic("CppCompile", //...)' --output=jsonproto \
  > "$out/actions.json"
exec_root="$(bazel info --config=tsa execution_root)"
python3 tools/thread_safety_check.py "$out/actions.json" "$exec_root" "$@"
