// The git commit this binary was built from, for `skipswarm version` and
// the daemons' skipswarm_build_info metric.
//
//   std::printf("git commit: %s\n", common::GitCommit());
//
// Builds with --stamp take it from tools/workspace_status.sh (HEAD's short
// hash, "-dirty" when tracked files differed); other builds, and stamped
// builds outside a git checkout, say "unknown". Only this library's one
// generated source depends on the commit, so a new commit recompiles that
// file and relinks what links it, and only under --stamp (Note [Stamping]
// in common/stamp/BUILD).
//
// Thread rule: thread-safe (a constant).
#ifndef SKIPSWARM_COMMON_STAMP_GIT_COMMIT_H_
#define SKIPSWARM_COMMON_STAMP_GIT_COMMIT_H_

namespace skipswarm::common {

// Never null, never empty: a short hash, a short hash + "-dirty", or "unknown".
const char* GitCommit();

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_STAMP_GIT_COMMIT_H_
