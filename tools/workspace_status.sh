#!/usr/bin/env bash
# Bazel's --workspace_status_command (.bazelrc): prints "KEY value" lines
# that stamped actions read from bazel-out/stable-status.txt. Bazel runs it
# on every build, stamped or not, from the workspace root, and a failure
# fails the build, so it is quick and never fails: outside a git checkout
# (a tarball, a copy without .git, no git installed) the commit is
# "unknown". Only //common/stamp reads it, and only under --stamp.
#
# STABLE_GIT_COMMIT: HEAD's short hash, "-dirty" appended when tracked
# files differ from HEAD (untracked files do not count).
commit=unknown
if hash=$(git rev-parse --short HEAD 2>/dev/null) && [[ -n "${hash}" ]]; then
  commit="${hash}"
  if ! git diff --quiet HEAD -- 2>/dev/null; then
    commit="${commit}-dirty"
  fi
fi
echo "STABLE_GIT_COMMIT ${commit}"
