// RoutesFilePlanner: a RoutePlanner that replays routes planned elsewhere,
// read from a file (`skipswarm node --node_routes=FILE`). `skipswarm local
// --wan=SCENARIO` (launcher/wan_local.h) plans the scenario's iteration with the
// scheduler on the scenario's own topology, exactly as `skipswarm sim` does,
// and hands every daemon the result, so the WAN-emulated real swarm and the
// simulator run the same routes (the daemon's own SchedulerPlanner plans
// from measured links only under gossip membership: a static --swarm list,
// as WAN runs use, carries no link measurements).
//
// File format, one micro-batch per line, `#` starts a comment:
//
//   ORIGIN DATA_SLOT [priority=N] NAME/STAGE ...  # the route, origin first,
//   d0 0 priority=2 d0/0 s1/1 s2/2                 # without the return hop
//
// DATA_SLOT: the MB's position in the iteration's batch (-1: default).
// priority: the plan's (lower is served first; Note [Queue order]), 0 if
// not given.
// Every iteration replays the same routes; a hop on a node that has died is
// repaired by the stage server as for any plan (Note [Route hops]).
//
// Thread rule: immutable after Create; Plan is thread-safe.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_ROUTES_FILE_PLANNER_H_
#define SKIPSWARM_NODE_DAEMON_STACK_ROUTES_FILE_PLANNER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "node/train/route_planner.h"

namespace skipswarm::node {

class RoutesFilePlanner final : public RoutePlanner {
 public:
  // `ids`: node name -> peer id for every name the file may use.
  // InvalidArgument naming the line: unknown node, bad stage or slot, a
  // route that does not start at its origin on stage 0.
  static absl::StatusOr<std::unique_ptr<RoutesFilePlanner>> Parse(
      absl::string_view text, const std::map<std::string, PeerId>& ids);
  static absl::StatusOr<std::unique_ptr<RoutesFilePlanner>> Read(
      const std::string& path, const std::map<std::string, PeerId>& ids);

  std::string name() const override { return "routes-file"; }
  // This data node's routes (however many the file gives it), indices 0..k-1.
  absl::StatusOr<std::vector<PlannedRoute>> Plan(const PlanInput& input,
                                                 const SwarmView& view) override;

 private:
  explicit RoutesFilePlanner(std::map<PeerId, std::vector<PlannedRoute>> routes)
      : routes_(std::move(routes)) {}
  const std::map<PeerId, std::vector<PlannedRoute>> routes_;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_ROUTES_FILE_PLANNER_H_
