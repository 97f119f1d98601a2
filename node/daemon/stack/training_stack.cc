#include "node/daemon/stack/training_stack.h"

#include <glog/logging.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "node/daemon/stack/planner_factory.h"

namespace skipswarm::node {

absl::StatusOr<std::unique_ptr<TrainingStack>> TrainingStack::Create(
    const NodeDaemonOptions& o, const TrainingStackInputs& in) {
  // Filled in place, so a failure after Attach still detaches (destructor).
  std::unique_ptr<TrainingStack> stack(new TrainingStack());
  StageServerOptions so;
  so.memory_slots = o.memory_slots;
  so.swarm_id = in.swarm_id;
  // Failed hops are re-routed with the scheduler's RerouteInFlight at the
  // planner's costs (DaemonRepairerOptions); a stage may be skipped only
  // when the plan skips stages anyway.
  so.repairer = in.repairer;
  so.allow_skip = o.path_length > 0 && o.path_length < o.model.model.num_stages;
  std::map<int, StageCompute*> served = in.stages;
  for (const auto& [s, c] : in.frozen) {
    if (served.count(s) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " is both hosted and a frozen SDP copy"));
    }
    served[s] = c;
  }
  stack->server_ =
      std::make_unique<StageServer>(in.transport, in.clock, in.routing, served, so);
  stack->server_->Attach();
  if (in.stages.count(0) > 0) {
    SS_ASSIGN_OR_RETURN(stack->planner_, CreateDataNodePlanner(o, in.names, in.clock));
    DriverOptions d;
    d.mbs_per_iteration = o.mbs_per_iteration;
    d.num_stages = o.model.model.num_stages;
    d.seed = o.model.seed;  // the back-off's jitter (Note [Paused training])
    d.on_pause_change = in.on_pause_change;
    stack->driver_ = std::make_unique<DataNodeDriver>(stack->server_.get(), in.clock, in.routing,
                                                      stack->planner_.get(), in.data, d);
    stack->server_->SetOriginListener(stack->driver_.get());
  }
  stack->trainer_ = std::make_unique<NodeTrainer>(stack->server_.get(), in.stages,
                                                  stack->driver_.get(), in.group, in.clock);
  if (!in.frozen.empty()) {
    stack->shadows_ = std::make_unique<SdpShadowStages>(stack->server_->self(), in.frozen,
                                                        in.routing, in.group);
    SdpShadowStages* shadows = stack->shadows_.get();
    stack->trainer_->SetBeforeIteration([shadows](uint64_t it, NodeTrainer::StepDone done) {
      shadows->Refresh(it, [shadows, it, done = std::move(done)](absl::Status s) mutable {
        // The measured cost of Note [SDP frozen stages], now and then.
        if (it < 3 || it % 100 == 0 || !s.ok()) {
          const ShadowStats st = shadows->stats();
          LOG(INFO) << "iteration " << it << ": frozen SDP stages refreshed, " << st.last_bytes
                    << " bytes this iteration (" << st.bytes << " in all), staleness "
                    << st.staleness << " (max " << st.max_staleness << "), " << st.failures
                    << " failed fetches";
        }
        done(std::move(s));
      });
    });
  }
  return stack;
}

TrainingStack::~TrainingStack() {
  if (server_) {
    server_->Detach();
    // Waits for a driver call in progress on a compute thread: the driver
    // goes before the server.
    if (driver_) server_->SetOriginListener(nullptr);
  }
}

}  // namespace skipswarm::node
