// NodeBackend: the maths a daemon trains with, chosen by the binary's main
// (cli/) and handed to NodeDaemon::Create / GossipDaemon::Create, so the
// daemons themselves link no libtorch. The libtorch one is
// TorchNodeBackend() (torch_backend.h); tests may pass computes with
// modelled time and synthetic data instead.
//
//   SS_ASSIGN_OR_RETURN(auto daemon, NodeDaemon::Create(o, TorchNodeBackend()));
//
//   NodeBackend b;                       // a test's own
//   b.prepare = [](const NodeDaemonOptions&) { return std::string("timed"); };
//   b.create_compute = [](const NodeDaemonOptions&, int stage, TaskRunner*,
//                         common::Clock* clock) -> absl::StatusOr<...> {
//     return std::make_unique<TimedStageCompute>(clock, ...);
//   };
//   b.create_data = ...;
//
// Thread rule: the daemons call the four functions on their main thread,
// in Create (and GossipDaemon again on a stage move); each must be set.
// output_judge is optional and called on transport threads (it is pure).
#ifndef SKIPSWARM_NODE_DAEMON_STACK_NODE_BACKEND_H_
#define SKIPSWARM_NODE_DAEMON_STACK_NODE_BACKEND_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "node/compute/stage_compute.h"
#include "node/compute/task_runner.h"
#include "node/daemon/stack/node_daemon_options.h"
#include "node/stage/output_checks.h"
#include "node/train/data_source.h"

namespace skipswarm::node {

struct NodeBackend {
  // Once per process, before any compute: applies o.model.runtime (threads,
  // device) and returns the device's name for the start-up line.
  std::function<absl::StatusOr<std::string>(const NodeDaemonOptions& o)> prepare;
  // Stage `stage`'s compute. `runner` and `clock` are borrowed and outlive
  // the compute (the daemon joins the runner before its computes go).
  std::function<absl::StatusOr<std::unique_ptr<StageCompute>>(
      const NodeDaemonOptions& o, int stage, TaskRunner* runner, common::Clock* clock)>
      create_compute;
  // SDP backward masking's frozen copies of the stages not in `hosted`
  // (Note [SDP frozen stages]); none unless o.sdp asks for them.
  std::function<absl::StatusOr<std::map<int, std::unique_ptr<StageCompute>>>(
      const NodeDaemonOptions& o, const std::vector<int>& hosted, TaskRunner* runner)>
      create_frozen;
  // A data node's micro-batches; the source owns whatever it reads from.
  std::function<absl::StatusOr<std::unique_ptr<DataSource>>(const NodeDaemonOptions& o)>
      create_data;
  // Optional: verified compute's judge (CheckOutputAgainstSketch in
  // node/compute/output_check.h). Unset, the node judges no outputs and
  // refuses sketch frames (a backend with modelled compute).
  OutputJudge output_judge;
};

// The computes by stage, borrowed (what the server, trainer and
// checkpoints take).
template <typename Compute>
std::map<int, StageCompute*> BorrowComputes(
    const std::map<int, std::unique_ptr<Compute>>& computes) {
  std::map<int, StageCompute*> borrowed;
  for (const auto& [s, c] : computes) borrowed[s] = c.get();
  return borrowed;
}

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_NODE_BACKEND_H_
