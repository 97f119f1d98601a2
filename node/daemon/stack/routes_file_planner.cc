#include "node/daemon/stack/routes_file_planner.h"


#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "common/text_table.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<RoutesFilePlanner>> RoutesFilePlanner::Parse(
    absl::string_view text, const std::map<std::string, PeerId>& ids) {
  std::map<PeerId, std::vector<PlannedRoute>> routes;
  auto bad = [](absl::string_view why) { return absl::InvalidArgumentError(why); };
  absl::Status parsed = common::ForEachTableRow(text, "routes file", [&](const common::TableRow& f) {
    if (f.size() < 4) return bad("expected: ORIGIN DATA_SLOT NAME/STAGE NAME/STAGE ...");
    auto origin = ids.find(std::string(f[0]));
    if (origin == ids.end()) return bad(absl::StrCat("unknown node ", f[0]));
    PlannedRoute r;
    if (!absl::SimpleAtoi(f[1], &r.data_slot) || r.data_slot < -1) return bad("bad DATA_SLOT");
    size_t first_hop = 2;
    if (absl::StartsWith(f[2], "priority=")) {
      if (!absl::SimpleAtoi(f[2].substr(9), &r.priority)) return bad("bad priority");
      first_hop = 3;
    }
    if (f.size() - first_hop < 2) return bad("a route needs its origin and at least one hop");
    for (size_t i = first_hop; i < f.size(); ++i) {
      std::vector<std::string> hop = absl::StrSplit(f[i], '/');
      int stage = -1;
      auto id = hop.size() == 2 ? ids.find(hop[0]) : ids.end();
      if (id == ids.end() || !absl::SimpleAtoi(hop[1], &stage) || stage < 0) {
        return bad(absl::StrCat("bad hop '", f[i], "' (NAME/STAGE of a known node)"));
      }
      r.hops.push_back({id->second, stage});
    }
    if (r.hops[0].node != origin->second || r.hops[0].stage != 0) {
      return bad("a route starts at its origin on stage 0");
    }
    std::vector<PlannedRoute>& mine = routes[origin->second];
    r.index = static_cast<int>(mine.size());
    mine.push_back(std::move(r));
    return absl::OkStatus();
  });
  if (!parsed.ok()) return parsed;
  return std::unique_ptr<RoutesFilePlanner>(new RoutesFilePlanner(std::move(routes)));
}

absl::StatusOr<std::unique_ptr<RoutesFilePlanner>> RoutesFilePlanner::Read(
    const std::string& path, const std::map<std::string, PeerId>& ids) {
  SS_ASSIGN_OR_RETURN(std::string text, common::ReadTextFile(path, "routes file"));
  auto p = Parse(text, ids);
  if (!p.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", p.status().message()));
  return p;
}

absl::StatusOr<std::vector<PlannedRoute>> RoutesFilePlanner::Plan(const PlanInput& input,
                                                                  const SwarmView&) {
  auto it = routes_.find(input.self);
  if (it == routes_.end()) return std::vector<PlannedRoute>();
  return it->second;
}

}  // namespace skipswarm::node
