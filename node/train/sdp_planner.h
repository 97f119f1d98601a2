// SdpPlanner: routes for a node that trains its own subnetwork (subnetwork
// data parallelism, model/sdp_assignment.h). Every hop of every route is on
// the node itself, so no activation or gradient frame leaves it; only the
// per-stage averaging of the stages it hosts does (NodeTrainer, with every
// other host of the stage, pipeline replicas included).
//
//   SdpPlanner planner(model::SdpMode::kForward);
//   SS_ASSIGN_OR_RETURN(auto routes, planner.Plan({.iteration = it, .self = me,
//                                                  .mbs = 4, .num_stages = 6}, view));
//
// Forward masking: the route visits the stages this node hosts (its
// subnetwork, in order); the others are skipped. Backward masking: the
// route visits every stage on this node; the ones it does not host (not in
// its record) are its frozen copies (node/train/sdp_shadows.h).
//
// Note [SDP worker order]: the data nodes are numbered by (hosted stages,
// ascending, compared lexicographically; then node id), the order in which
// model::AssignSubnetworks numbers its workers, and node w's MB j takes
// data slot w*M + j (Note [Data order]). So a swarm hosting an assignment's
// subnetworks trains on exactly train-ref --sdp's data, whatever the node
// ids, and tests/integration:sdp_exactness_test compares the two.
//
// Thread rule: one caller at a time.
#ifndef SKIPSWARM_NODE_TRAIN_SDP_PLANNER_H_
#define SKIPSWARM_NODE_TRAIN_SDP_PLANNER_H_

#include <string>
#include <vector>

#include "model/sdp_assignment.h"
#include "node/train/route_planner.h"

namespace skipswarm::node {

class SdpPlanner final : public RoutePlanner {
 public:
  explicit SdpPlanner(model::SdpMode mode) : mode_(mode) {}
  std::string name() const override;
  // UNAVAILABLE when this node is not a live, usable data node of the view.
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override;

 private:
  model::SdpMode mode_;
  RefusedRecords refused_;  // Note [Planning members] in route_planner.h
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_SDP_PLANNER_H_
