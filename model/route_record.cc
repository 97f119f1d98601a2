#include "model/route_record.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/text_table.h"

namespace skipswarm::model {

std::string FormatRecordedRoute(const RecordedRoute& r) {
  std::string line = absl::StrCat(r.iteration, " ", r.global_mb, " ", r.origin);
  for (size_t i = 0; i < r.stages.size() && i < r.nodes.size(); ++i) {
    absl::StrAppend(&line, " ", r.nodes[i], "/", r.stages[i]);
  }
  return line + "\n";
}

absl::Status ParseRouteRecord(absl::string_view text, RouteRecord* record) {
  auto bad = [](absl::string_view why) { return absl::InvalidArgumentError(why); };
  return common::ForEachTableRow(text, "route record", [&](const common::TableRow& f) {
    if (f.size() < 4) return bad("expected: ITERATION GLOBAL_MB ORIGIN NODE/STAGE ...");
    RecordedRoute r;
    if (!absl::SimpleAtoi(f[0], &r.iteration) || r.iteration < 0) return bad("bad ITERATION");
    if (!absl::SimpleAtoi(f[1], &r.global_mb)) return bad("bad GLOBAL_MB");
    r.origin = std::string(f[2]);
    for (size_t i = 3; i < f.size(); ++i) {
      const size_t slash = f[i].rfind('/');
      int stage = -1;
      if (slash == absl::string_view::npos || slash == 0 ||
          !absl::SimpleAtoi(f[i].substr(slash + 1), &stage) || stage < 0) {
        return bad(absl::StrCat("bad hop '", f[i], "' (NODE/STAGE)"));
      }
      r.nodes.emplace_back(f[i].substr(0, slash));
      r.stages.push_back(stage);
    }
    if (r.stages[0] != 0) return bad("a route starts on stage 0");
    std::vector<RecordedRoute>& mbs = (*record)[r.iteration];
    auto at = std::lower_bound(
        mbs.begin(), mbs.end(), r.global_mb,
        [](const RecordedRoute& a, uint64_t mb) { return a.global_mb < mb; });
    if (at != mbs.end() && at->global_mb == r.global_mb) {
      *at = std::move(r);  // planned again (a restart): the later line wins
    } else {
      mbs.insert(at, std::move(r));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<RouteRecord> ReadRouteRecord(const std::vector<std::string>& paths) {
  RouteRecord record;
  for (const std::string& path : paths) {
    SS_ASSIGN_OR_RETURN(std::string text, common::ReadTextFile(path, "route record"));
    absl::Status s = ParseRouteRecord(text, &record);
    if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return record;
}

}  // namespace skipswarm::model
