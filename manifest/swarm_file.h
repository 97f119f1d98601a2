// The swarm file (swarm.json) a founder publishes so others can join with
// `--join=swarm.json`: the manifest's hash (pinned: a peer serving another
// manifest is refused) and bootstrap addresses.
//
//   {"format": 1, "manifest_sha256": "<64 hex>", "founder_id": "<64 hex>",
//    "swarm_name": "skipswarm", "bootstrap": ["203.0.113.5:7000"]}
//
//   SS_RETURN_IF_ERROR(WriteSwarmFile("swarm.json", file));
//   SS_ASSIGN_OR_RETURN(SwarmFile f, ReadSwarmFile("swarm.json"));
//
// Reading treats the file as hostile (it travels by mail and chat): size,
// JSON shape, hash format and every address are checked; errors say what is
// wrong, never crash.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MANIFEST_SWARM_FILE_H_
#define SKIPSWARM_MANIFEST_SWARM_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::manifest {

inline constexpr size_t kMaxSwarmFileBytes = 64 * 1024;
inline constexpr size_t kMaxBootstrapAddresses = 64;

struct SwarmFile {
  std::string manifest_sha256;  // 64 lowercase hex
  std::string founder_id;       // hex, informational
  std::string swarm_name;       // informational
  std::vector<std::string> bootstrap;
};

std::string SwarmFileToJson(const SwarmFile& file);
absl::StatusOr<SwarmFile> ParseSwarmFile(absl::string_view json);
absl::StatusOr<SwarmFile> ReadSwarmFile(const std::string& path);
// Atomic write (mode 0644: the file is public).
absl::Status WriteSwarmFile(const std::string& path, const SwarmFile& file);

}  // namespace skipswarm::manifest

#endif  // SKIPSWARM_MANIFEST_SWARM_FILE_H_
