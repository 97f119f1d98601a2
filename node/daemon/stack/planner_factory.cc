#include "node/daemon/stack/planner_factory.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "common/status_macros.h"
#include "model/codec_options.h"
#include "node/daemon/stack/route_recorder.h"
#include "node/daemon/stack/routes_file_planner.h"
#include "node/train/sdp_planner.h"

namespace skipswarm::node {
double ActivationBytesPerMicroBatch(const NodeDaemonOptions& o) {
  if (o.wan.timed_forward_s > 0) return static_cast<double>(o.wan.timed_payload_bytes);
  const double elements = static_cast<double>(o.model.samples_per_mb) * o.model.model.seq_len *
                          o.model.model.d_model;
  return model::EncodedFloatBytes(o.activation_encode, elements);
}

SchedulerPlannerOptions DataNodeSchedulerOptions(const NodeDaemonOptions& o,
                                                 common::Clock* clock) {
  SchedulerPlannerOptions po;
  po.planner = o.planner;
  po.path_length = o.path_length;
  po.costs.samples_per_mb = o.model.samples_per_mb;
  po.costs.layers_per_stage =
      std::max(1, o.model.model.num_layers / std::max(1, o.model.model.num_stages));
  po.seed = o.model.seed;
  po.costs.bytes_per_mb = ActivationBytesPerMicroBatch(o);
  po.costs.link_costs = o.planner_link_costs;
  po.costs.clock = clock;
  return po;
}

SchedulerRepairerOptions DaemonRepairerOptions(const NodeDaemonOptions& o,
                                               common::Clock* clock) {
  SchedulerRepairerOptions ro;
  ro.costs = DataNodeSchedulerOptions(o, clock).costs;
  ro.num_stages = o.model.model.num_stages;  // Note [Planning members]
  return ro;
}

absl::StatusOr<std::unique_ptr<RoutePlanner>> CreateDataNodePlanner(
    const NodeDaemonOptions& o, const std::map<std::string, PeerId>& names,
    common::Clock* clock) {
  std::unique_ptr<RoutePlanner> planner;
  if (!o.wan.routes_file.empty()) {
    if (names.empty()) {
      return absl::InvalidArgumentError(
          "a routes file names nodes: it needs a static --swarm list, not gossip membership");
    }
    SS_ASSIGN_OR_RETURN(planner, RoutesFilePlanner::Read(o.wan.routes_file, names));
  } else if (o.sdp != model::SdpMode::kOff) {
    planner = std::make_unique<SdpPlanner>(o.sdp);
  } else if (o.planner == "inorder") {
    planner = std::make_unique<InOrderPlanner>();
  } else {
    SS_ASSIGN_OR_RETURN(planner, SchedulerPlanner::Create(DataNodeSchedulerOptions(o, clock)));
  }
  if (!o.record_routes.empty()) {
    SS_ASSIGN_OR_RETURN(planner, RecordingPlanner::Create(std::move(planner), o.name,
                                                          o.record_routes, o.mbs_per_iteration));
  }
  return planner;
}

}  // namespace skipswarm::node
