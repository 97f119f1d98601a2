// RecordingPlanner: a RoutePlanner decorator that appends every route its
// planner hands the data node to a route record (model/route_record.h), so
// that `skipswarm train-ref --routes_file=...` can replay the swarm's
// micro-batches along the same stages (`skipswarm node
// --node_record_routes=FILE`; `skipswarm local --local_record_routes`).
//
//   SS_ASSIGN_OR_RETURN(planner, RecordingPlanner::Create(std::move(planner),
//                                                         "d0", "/tmp/d0.routes", mbs));
//
// What is recorded is the plan: the global micro-batch number the driver
// gives each route (Note [Data order]: DataNodeDriver's rank among every
// configured data node, or the plan's data slot) and its hops. A hop the
// stage server later repairs (Note [Route hops]) is not seen here: with
// full routes (the default --node_path_length=0, either planner) a repair
// picks another replica of the same stage (no skip without a skip budget,
// no swap: Note [Full routes stay in order]), so the stages are the ones
// run; a dropped micro-batch is not marked (progress.jsonl counts
// drops and re-routes per iteration). Each Plan's lines go out in one
// append and are flushed, so a killed node leaves whole lines.
//
// Thread rule: as RoutePlanner (one caller at a time).
#ifndef SKIPSWARM_NODE_DAEMON_STACK_ROUTE_RECORDER_H_
#define SKIPSWARM_NODE_DAEMON_STACK_ROUTE_RECORDER_H_

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/train/route_planner.h"

namespace skipswarm::node {

class RecordingPlanner final : public RoutePlanner {
 public:
  // Appends to `path` (created if missing). `origin`: this node's name in
  // the record; `mbs_per_iteration`: the driver's M.
  static absl::StatusOr<std::unique_ptr<RecordingPlanner>> Create(
      std::unique_ptr<RoutePlanner> inner, std::string origin, const std::string& path,
      int mbs_per_iteration);
  ~RecordingPlanner() override;

  std::string name() const override { return inner_->name(); }
  // The inner plan, unchanged; a failed write is logged, never fails the plan
  // (training goes on; the record is then incomplete).
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override;

 private:
  RecordingPlanner(std::unique_ptr<RoutePlanner> inner, std::string origin, std::FILE* out,
                   int mbs)
      : inner_(std::move(inner)), origin_(std::move(origin)), out_(out), mbs_(mbs) {}

  const std::unique_ptr<RoutePlanner> inner_;
  const std::string origin_;
  std::FILE* const out_;
  const int mbs_;
};

// The global micro-batch number DataNodeDriver reads for `route` (Note
// [Data order]); exposed for the recorder's test.
uint64_t PlannedGlobalMicroBatch(const PlannedRoute& route, uint64_t iteration,
                                 const SwarmView& view, const PeerId& self, int mbs);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_ROUTE_RECORDER_H_
