#include "node/daemon/swarm_spec.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace skipswarm::node {

absl::StatusOr<std::vector<SwarmMember>> ParseSwarmSpec(const std::string& spec, int num_stages,
                                                        int memory_slots) {
  std::vector<SwarmMember> out;
  std::set<std::string> names;
  std::set<int> hosted;
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::vector<std::string> f = absl::StrSplit(entry, '/');
    if (f.size() != 4 || f[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "swarm entry '", entry, "' must be NAME/STAGES/PIPELINE_ADDR/GROUP_ADDR"));
    }
    if (!names.insert(f[0]).second) {
      return absl::InvalidArgumentError(absl::StrCat("swarm entry '", entry, "': duplicate name"));
    }
    SwarmMember m;
    m.name = f[0];
    m.info.id = common::NodeId::ForName(f[0]);
    m.info.memory_slots = memory_slots;
    m.info.address = f[2];
    m.info.group_address = f[3];
    for (absl::string_view s : absl::StrSplit(f[1], '+')) {
      int stage;
      if (!absl::SimpleAtoi(s, &stage) || stage < 0 || stage >= num_stages) {
        return absl::InvalidArgumentError(absl::StrCat("swarm entry '", entry, "': stage '", s,
                                                       "' is not in [0, ", num_stages, ")"));
      }
      m.info.stages.push_back(stage);
      hosted.insert(stage);
    }
    out.push_back(std::move(m));
  }
  if (out.empty()) return absl::InvalidArgumentError("--swarm lists no node");
  for (int s = 0; s < num_stages; ++s) {
    if (!hosted.count(s)) {
      return absl::InvalidArgumentError(absl::StrCat("--swarm: no node hosts stage ", s,
                                                     s == 0 ? " (no data node)" : ""));
    }
  }
  return out;
}

std::string FormatSwarmEntry(const std::string& name, const std::vector<int>& stages,
                             const std::string& address, const std::string& group_address) {
  return absl::StrCat(name, "/", absl::StrJoin(stages, "+"), "/", address, "/", group_address);
}

}  // namespace skipswarm::node
