#include "launcher/local_layout.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace skipswarm::launcher {

absl::StatusOr<LocalSwarmLayout> MakeLocalLayout(const LayoutOptions& o) {
  if (o.data_nodes < 1 || o.replicas < 1) {
    return absl::InvalidArgumentError("--data_nodes and --replicas must be >= 1");
  }
  LocalSwarmLayout l;
  if (o.sdp.mode == model::SdpMode::kOff && o.mixed) {
    return absl::InvalidArgumentError("--mixed needs --sdp=forward|backward");
  }
  if (o.sdp.mode == model::SdpMode::kOff || o.mixed) {
    for (int d = 0; d < o.data_nodes; ++d) l.nodes.push_back({absl::StrCat("d", d), {0}});
    for (int s = 1; s < o.num_stages; ++s) {
      for (int r = 0; r < o.replicas; ++r) {
        l.nodes.push_back({absl::StrCat("s", s, "r", r), {s}});
      }
    }
    l.pipeline_data_nodes = o.data_nodes;
  }
  if (o.sdp.mode != model::SdpMode::kOff) {
    // One data node per subnetwork, named by worker (Note [SDP worker
    // order] numbers them the same way by their stages).
    absl::StatusOr<model::SdpAssignment> a =
        model::AssignSubnetworks(o.num_stages, o.sdp.workers, o.sdp.keep);
    if (!a.ok()) return a.status();
    l.assignment = *std::move(a);
    for (size_t w = 0; w < l.assignment.subnetworks.size(); ++w) {
      const std::string name = absl::StrCat("w", w);
      l.nodes.push_back({name, l.assignment.subnetworks[w]});
      l.sdp.insert(name);
    }
  }
  return l;
}

absl::Status AddLinkCaps(const std::string& spec, const std::string& flag,
                         const std::vector<std::string>& keys, const LocalLayout& nodes,
                         std::map<std::string, std::string>* extra_config) {
  for (absl::string_view c : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(c, '@');
    double mbit;
    if (p.size() != 2 || !absl::SimpleAtod(p[1], &mbit) || mbit <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", flag, " entry '", c, "' is not NAME@MBIT (MBIT > 0)"));
    }
    if (std::none_of(nodes.begin(), nodes.end(), [&](const auto& n) { return n.first == p[0]; })) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " names no node: ", p[0]));
    }
    std::string& extra = (*extra_config)[p[0]];
    for (const std::string& key : keys) {
      absl::StrAppend(&extra, extra.empty() ? "" : ",\n  ", "\"", key, "\": ", mbit);
    }
  }
  return absl::OkStatus();
}

absl::Status AddNodeConfig(const std::string& spec, const LocalLayout& nodes,
                           std::map<std::string, std::string>* extra_config) {
  for (absl::string_view c : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(c, absl::MaxSplits(':', 1));
    std::vector<std::string> kv;
    if (p.size() == 2) kv = absl::StrSplit(p[1], absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || absl::StrContains(c, "\"") ||
        absl::StrContains(c, "\\")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--node_config entry '", c, "' is not NAME:KEY=VALUE (no quotes, backslashes)"));
    }
    if (std::none_of(nodes.begin(), nodes.end(), [&](const auto& n) { return n.first == p[0]; })) {
      return absl::InvalidArgumentError(absl::StrCat("--node_config names no node: ", p[0]));
    }
    std::string& extra = (*extra_config)[p[0]];
    absl::StrAppend(&extra, extra.empty() ? "" : ",\n  ", "\"", kv[0], "\": \"", kv[1], "\"");
  }
  return absl::OkStatus();
}

absl::Status CheckLayoutFitsInMemory(const model::ModelFlags& flags, const LocalLayout& nodes,
                                     int mbs) {
  // Note [Memory estimate] (model/model_flags.h): every node of the layout
  // runs on this machine.
  const int stages = flags.model.num_stages;
  int64_t params = 0, blocks = 0;
  for (const auto& [name, st] : nodes) {
    for (int s : st) {
      if (s < 0 || s >= stages) continue;
      params += flags.model.StageParameterCount(s);
      auto [first, end] = flags.model.StageBlocks(s);
      blocks += end - first;
    }
  }
  const int64_t needed = model::EstimateTrainingBytes(flags, params, blocks, mbs) +
                         static_cast<int64_t>(nodes.size()) * (int64_t{200} << 20);  // per process
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return model::CheckFitsInMemory(
      needed, pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * page : 0,
      absl::StrCat("skipswarm local (", nodes.size(), " node processes)"));
}

}  // namespace skipswarm::launcher
