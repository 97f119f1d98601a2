#include "node/daemon/stack/route_recorder.h"

#include <glog/logging.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "model/route_record.h"
#include "node/train/data_source.h"

namespace skipswarm::node {

uint64_t PlannedGlobalMicroBatch(const PlannedRoute& route, uint64_t iteration,
                                 const SwarmView& view, const PeerId& self, int mbs) {
  // As DataNodeDriver::TryStart (Note [Mixed data order]).
  const DataOrder order = DataOrderOf(view, self);
  const int rank = order.rank;
  const int num_data = std::max(1, order.num_data);
  if (route.data_slot >= 0) {
    return iteration * static_cast<uint64_t>(num_data) * mbs + route.data_slot;
  }
  return GlobalMicroBatchIndex(iteration, rank, num_data, mbs, route.index);
}

absl::StatusOr<std::unique_ptr<RecordingPlanner>> RecordingPlanner::Create(
    std::unique_ptr<RoutePlanner> inner, std::string origin, const std::string& path,
    int mbs_per_iteration) {
  if (!inner) return absl::InvalidArgumentError("RecordingPlanner needs a planner");
  if (mbs_per_iteration < 1) return absl::InvalidArgumentError("mbs_per_iteration must be >= 1");
  std::FILE* out = std::fopen(path.c_str(), "a");
  if (out == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot open route record '", path, "': ", std::strerror(errno)));
  }
  return std::unique_ptr<RecordingPlanner>(
      new RecordingPlanner(std::move(inner), std::move(origin), out, mbs_per_iteration));
}

RecordingPlanner::~RecordingPlanner() { std::fclose(out_); }

absl::StatusOr<std::vector<PlannedRoute>> RecordingPlanner::Plan(const PlanInput& input,
                                                                 const SwarmView& view) {
  absl::StatusOr<std::vector<PlannedRoute>> routes = inner_->Plan(input, view);
  if (!routes.ok()) return routes;
  std::string lines;
  for (const PlannedRoute& r : *routes) {
    model::RecordedRoute rec;
    rec.iteration = static_cast<int64_t>(input.iteration);
    rec.global_mb = PlannedGlobalMicroBatch(r, input.iteration, view, input.self, mbs_);
    rec.origin = origin_;
    for (const RouteHop& h : r.hops) {
      rec.nodes.push_back(h.node.Hex().substr(0, 8));
      rec.stages.push_back(h.stage);
    }
    if (!rec.stages.empty()) lines += model::FormatRecordedRoute(rec);
  }
  if (std::fwrite(lines.data(), 1, lines.size(), out_) != lines.size() ||
      std::fflush(out_) != 0) {
    LOG(ERROR) << "route record: write failed for iteration " << input.iteration << ": "
               << std::strerror(errno);
  }
  return routes;
}

}  // namespace skipswarm::node
