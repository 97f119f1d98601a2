// Where a private swarm's secret comes from (membership/record.h
// DeriveSwarmId): a file (--swarm_secret_file) or the environment
// (SKIPSWARM_SWARM_SECRET). A secret on the command line is readable by
// every local user (ps, /proc/PID/cmdline) and lands in shell history, so
// --swarm_secret still works but warns, naming the two alternatives.
//
//   std::string warning;
//   SS_ASSIGN_OR_RETURN(std::string secret,
//                       ResolveSwarmSecret({flag, flag_given, file, env}, &warning));
//   if (!warning.empty()) LOG(WARNING) << warning;
//
// Thread rule: free functions (ResolveSwarmSecret reads the file).
#ifndef SKIPSWARM_CLI_SWARM_SECRET_H_
#define SKIPSWARM_CLI_SWARM_SECRET_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace skipswarm::cli {

inline constexpr char kSwarmSecretEnv[] = "SKIPSWARM_SWARM_SECRET";
// A secret file longer than this is not a secret file.
inline constexpr size_t kMaxSwarmSecretFileBytes = 4096;

struct SwarmSecretSources {
  std::string flag;          // --swarm_secret
  std::string file;          // --swarm_secret_file (empty: none)
  std::optional<std::string> env;  // SKIPSWARM_SWARM_SECRET, when set
};

// The secret (empty: not a private swarm). A file's content is taken with
// surrounding whitespace (a trailing newline) removed. InvalidArgument when
// more than one source is given, or the file is unreadable, empty or too
// long. `warning` (may be null) is set for a secret on the command line, or
// a file that other users can read.
absl::StatusOr<std::string> ResolveSwarmSecret(const SwarmSecretSources& sources,
                                               std::string* warning);

}  // namespace skipswarm::cli

#endif  // SKIPSWARM_CLI_SWARM_SECRET_H_
