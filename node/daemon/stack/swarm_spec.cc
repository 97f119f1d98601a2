#include "node/daemon/stack/swarm_spec.h"

#include <algorithm>
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
  std::set<int> hosted;      // by pipeline members
  std::set<int> sdp_hosted;  // by subnetwork members
  std::set<common::NodeId> ids;
  for (absl::string_view entry : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::vector<std::string> f = absl::StrSplit(entry, '/');
    if ((f.size() != 4 && f.size() != 5) || f[0].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "swarm entry '", entry, "' must be NAME/STAGES/PIPELINE_ADDR/GROUP_ADDR[/NODE_ID]"));
    }
    if (!names.insert(f[0]).second) {
      return absl::InvalidArgumentError(absl::StrCat("swarm entry '", entry, "': duplicate name"));
    }
    SwarmMember m;
    m.name = f[0];
    m.info.id = common::NodeId::ForName(f[0]);
    if (f.size() == 5) {
      absl::StatusOr<common::NodeId> id = common::NodeId::FromHex(f[4]);
      if (f[4].size() != 64 || !id.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "swarm entry '", entry, "': node id '", f[4],
            "' must be 64 hex digits (the id `skipswarm keygen` prints for the node's key)"));
      }
      m.info.id = *id;
      m.pinned = true;
    }
    if (!ids.insert(m.info.id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("swarm entry '", entry, "': node id already used by another entry"));
    }
    m.info.memory_slots = memory_slots;
    m.info.address = f[2];
    m.info.group_address = f[3];
    absl::string_view stages = f[1];
    m.info.subnetwork = absl::ConsumePrefix(&stages, "sdp:");
    for (absl::string_view s : absl::StrSplit(stages, '+')) {
      int stage;
      if (!absl::SimpleAtoi(s, &stage) || stage < 0 || stage >= num_stages) {
        return absl::InvalidArgumentError(absl::StrCat("swarm entry '", entry, "': stage '", s,
                                                       "' is not in [0, ", num_stages, ")"));
      }
      if (std::find(m.info.stages.begin(), m.info.stages.end(), stage) != m.info.stages.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("swarm entry '", entry, "': stage ", stage, " listed twice"));
      }
      m.info.stages.push_back(stage);
      (m.info.subnetwork ? sdp_hosted : hosted).insert(stage);
    }
    if (m.info.subnetwork) {
      std::sort(m.info.stages.begin(), m.info.stages.end());
      if (m.info.stages.front() != 0 || m.info.stages.back() != num_stages - 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "swarm entry '", entry, "': a subnetwork (sdp:) must hold stage 0 and the last stage ",
            num_stages - 1, " (the embedding/head and the block feeding the head)"));
      }
    }
    out.push_back(std::move(m));
  }
  if (out.empty()) return absl::InvalidArgumentError("--swarm lists no node");
  // Pipeline routes never pass through a subnetwork member: with pipeline
  // members, they alone must host every stage.
  const bool pure_sdp = hosted.empty();
  for (int s = 0; s < num_stages; ++s) {
    if (!(pure_sdp ? sdp_hosted : hosted).count(s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--swarm: no ", pure_sdp ? "" : "pipeline ", "node hosts stage ", s,
          s == 0 ? " (no data node)" : "",
          pure_sdp || !sdp_hosted.count(s)
              ? ""
              : " (subnetwork members, marked sdp:, are never a pipeline hop)"));
    }
  }
  return out;
}

std::string FormatSwarmEntry(const std::string& name, const std::vector<int>& stages,
                             const std::string& address, const std::string& group_address,
                             const std::string& node_id_hex, bool subnetwork) {
  return absl::StrCat(name, "/", subnetwork ? "sdp:" : "", absl::StrJoin(stages, "+"), "/",
                      address, "/", group_address, node_id_hex.empty() ? "" : "/", node_id_hex);
}

}  // namespace skipswarm::node
