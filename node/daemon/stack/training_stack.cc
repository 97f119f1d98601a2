#include "node/daemon/stack/training_stack.h"

#include <glog/logging.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "node/compute/sketch_wire.h"
#include "node/daemon/stack/planner_factory.h"
#include "node/train/silent_deadline.h"

namespace skipswarm::node {

NodeStackOptions TrainingStack::StackOptions(const NodeDaemonOptions& o,
                                             const std::string& swarm_id) {
  NodeStackOptions so;
  so.server.memory_slots = o.memory_slots;
  so.server.swarm_id = swarm_id;
  // Failed hops are re-routed with the scheduler's RerouteInFlight at the
  // planner's costs (DaemonRepairerOptions); a stage may be skipped only
  // when the plan skips stages anyway.
  so.server.allow_skip = o.path_length > 0 && o.path_length < o.model.model.num_stages;
  so.driver.mbs_per_iteration = o.mbs_per_iteration;
  so.driver.num_stages = o.model.model.num_stages;
  so.driver.seed = o.model.seed;  // the back-off's jitter (Note [Paused training])
  return so;
}

absl::Duration TrainingStack::MaxStatedBound(const NodeDaemonOptions& o) {
  const DriverOptions d = StackOptions(o, /*swarm_id=*/"").driver;
  return MaxHonestIterationBound(d.initial_deadline, d.min_deadline, d.deadline_factor,
                                 d.mbs_per_iteration);
}

StatedPaceOptions TrainingStack::StatedPace(const NodeDaemonOptions& o) {
  const DriverOptions d = StackOptions(o, /*swarm_id=*/"").driver;
  return StatedPaceFor(d.min_deadline, d.deadline_factor, d.mbs_per_iteration);
}

absl::StatusOr<std::unique_ptr<TrainingStack>> TrainingStack::Create(
    const NodeDaemonOptions& o, const TrainingStackInputs& in) {
  for (const auto& [s, c] : in.frozen) {
    if (in.stages.count(s) > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("stage ", s, " is both hosted and a frozen SDP copy"));
    }
  }
  NodeStackOptions so = StackOptions(o, in.swarm_id);
  so.driver.on_pause_change = in.on_pause_change;
  if (in.origin_on_probation) {  // Note [Newcomer micro-batches]
    so.server.origin_on_probation = in.origin_on_probation;
    so.server.newcomer_in_flight =
        std::max(1, (so.server.memory_slots + so.server.max_queued_forwards) / 2);
  }
  so.server.verify_rate = o.verify_rate;  // Note [Sending checks]
  if (o.sign_frames) {  // Note [Checkable evidence]
    if (in.signer == nullptr || !in.public_key_of || !in.signs_frames) {
      return absl::InvalidArgumentError(
          "sign_frames needs this node's key and its members' records (a gossip swarm)");
    }
    so.server.signer = in.signer;
    so.server.public_key_of = in.public_key_of;
    so.server.commitments_required_from = in.signs_frames;
    so.server.on_false_input = in.on_false_input;
    // "Signed swarms": from every member, whatever its record says.
    so.server.require_commitments = o.swarm_signs_frames;
  } else if (o.swarm_signs_frames) {
    return absl::InvalidArgumentError("a swarm that signs its frames needs sign_frames");
  }
  so.server.verify_seed = o.verify_seed;
  if (in.judge && in.member_on_probation) {
    so.server.output_checks.judge = in.judge;
    so.server.member_on_probation = in.member_on_probation;
    so.server.on_check_verdict = in.on_check_verdict;
    if (in.on_trusted_verdict) {  // Note [Trusted disputes]
      so.server.on_trusted_verdict = in.on_trusted_verdict;
      so.server.verify_trusted_rate = kTrustedVerifyShare * o.verify_rate;
    }
    so.server.sketch_limits =
        ActivationSketchLimits(o.model.model, std::max(1, o.model.samples_per_mb));
  }
  NodeStackInputs ni;
  ni.transport = in.transport;
  ni.clock = in.clock;
  ni.routing = in.routing;
  ni.group = in.group;
  ni.repairer = in.repairer;
  ni.stages = in.stages;
  ni.frozen = in.frozen;
  ni.data = in.data;
  if (in.stages.count(0) > 0) {
    SS_ASSIGN_OR_RETURN(ni.planner, CreateDataNodePlanner(o, in.names, in.clock));
  }
  std::unique_ptr<TrainingStack> stack(new TrainingStack());
  stack->stack_ = NodeStack::Create(so, std::move(ni));
  if (!in.frozen.empty()) {
    // Declared before stack_, so it outlives the trainer whose hook borrows it.
    stack->shadows_ = std::make_unique<SdpShadowStages>(stack->stack_->server()->self(),
                                                        in.frozen, in.routing, in.group);
    SdpShadowStages* shadows = stack->shadows_.get();
    stack->stack_->trainer()->SetBeforeIteration([shadows](uint64_t it,
                                                           NodeTrainer::StepDone done) {
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

TrainingStack::~TrainingStack() = default;

}  // namespace skipswarm::node
