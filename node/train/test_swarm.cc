#include "node/train/test_swarm.h"

#include <glog/logging.h>

#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "node/compute/timed_stage_compute.h"
#include "node/train/forwarding_group.h"

namespace skipswarm::node {
namespace {

// TestSwarmOptions::reduce_delay: the hub, with AllReduce calls held back;
// TestSwarmOptions::barrier_delay: with Barrier calls held back.
class DelayedReduceGroup final : public ForwardingGroup {
 public:
  DelayedReduceGroup(GroupComm* hub, common::Clock* clock, absl::Duration delay,
                     std::set<uint64_t> iterations, absl::Duration barrier_delay,
                     std::set<uint64_t> barrier_iterations)
      : ForwardingGroup(hub),
        clock_(clock),
        delay_(delay),
        iterations_(std::move(iterations)),
        barrier_delay_(barrier_delay),
        barrier_iterations_(std::move(barrier_iterations)) {}
  void Barrier(uint64_t iteration, const common::NodeId& self, bool data_node,
               BarrierDone done) override {
    if (barrier_delay_ <= absl::ZeroDuration() || barrier_iterations_.count(iteration) == 0) {
      return ForwardingGroup::Barrier(iteration, self, data_node, std::move(done));
    }
    auto call = std::make_shared<BarrierDone>(std::move(done));
    GroupComm* hub = inner();
    clock_->RunAfter(barrier_delay_, [hub, iteration, self, data_node, call] {
      hub->Barrier(iteration, self, data_node, std::move(*call));
    });
  }
  // A held round is never skipped as a group of one (Note [Group of one]
  // in node_trainer.cc): holding it back is the case's point.
  bool SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) override {
    return !Held(iteration) && ForwardingGroup::SoleReplica(iteration, stage, self);
  }
  void AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                 ReduceDone done) override {
    if (!Held(iteration)) {
      return ForwardingGroup::AllReduce(iteration, stage, std::move(contribution),
                                        std::move(done));
    }
    auto call = std::make_shared<std::pair<GradientContribution, ReduceDone>>(
        std::move(contribution), std::move(done));
    GroupComm* hub = inner();
    clock_->RunAfter(delay_, [hub, iteration, stage, call] {
      hub->AllReduce(iteration, stage, std::move(call->first), std::move(call->second));
    });
  }

 private:
  bool Held(uint64_t iteration) const {
    return delay_ > absl::ZeroDuration() &&
           (iterations_.empty() || iterations_.count(iteration) > 0);
  }

  common::Clock* const clock_;
  const absl::Duration delay_;
  const std::set<uint64_t> iterations_;  // empty: all
  const absl::Duration barrier_delay_;
  const std::set<uint64_t> barrier_iterations_;
};

// TestSwarmOptions::failed_reduces: `inner`, with the listed rounds failed;
// TestSwarmOptions::always_round: no replica is ever alone.
class FailingReduceGroup final : public ForwardingGroup {
 public:
  FailingReduceGroup(GroupComm* inner, std::set<std::pair<uint64_t, int>> failed,
                     bool always_round)
      : ForwardingGroup(inner), failed_(std::move(failed)), always_round_(always_round) {}
  bool SoleReplica(uint64_t iteration, int stage, const common::NodeId& self) override {
    return !always_round_ && ForwardingGroup::SoleReplica(iteration, stage, self);
  }
  void AllReduce(uint64_t iteration, int stage, GradientContribution contribution,
                 ReduceDone done) override {
    if (failed_.count({iteration, stage}) > 0) {
      return done(absl::UnavailableError(
          absl::StrCat("iteration ", iteration, " stage ", stage, ": the round failed (test)")));
    }
    ForwardingGroup::AllReduce(iteration, stage, std::move(contribution), std::move(done));
  }

 private:
  const std::set<std::pair<uint64_t, int>> failed_;
  const bool always_round_;
};

}  // namespace

TestSwarm::TestSwarm(TestSwarmOptions options, ComputeFactory factory, const DataSource* data)
    : options_(std::move(options)),
      data_(data),
      board_(&clock_, [this] {
        SwitchboardOptions o;
        o.latency = options_.latency;
        return o;
      }()) {
  options_.driver.num_stages = options_.num_stages;
  std::vector<PeerInfo> members;
  for (size_t i = 0; i < options_.node_stages.size(); ++i) {
    auto node = std::make_unique<Node>();
    node->id = common::NodeId::ForName("node" + std::to_string(i));
    members.push_back({node->id, options_.node_stages[i], options_.memory_slots, "", ""});
    members.back().on_probation = options_.on_probation.count(static_cast<int>(i)) > 0;
    nodes_.push_back(std::move(node));
  }
  // Note [Stated pace]: the data nodes' own driver options.
  hub_ = std::make_unique<InProcessGroupHub>(
      &clock_, members, RobustOptions{}, SilentDeadlineOptions{},
      StatedPaceFor(options_.driver.min_deadline, options_.driver.deadline_factor,
                    options_.driver.mbs_per_iteration));
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = *nodes_[i];
    std::map<int, StageCompute*> stages;
    for (int s : options_.node_stages[i]) {
      n.computes[s] = factory(static_cast<int>(i), s, &clock_, &runner_);
      stages[s] = n.computes[s].get();
    }
    std::map<int, StageCompute*> served_only;  // frozen copies (Note [SDP frozen stages])
    if (i < options_.shadow_stages.size()) {
      for (int s : options_.shadow_stages[i]) {
        n.shadow_computes[s] = options_.shadow_factory(static_cast<int>(i), s, &clock_, &runner_);
        served_only[s] = n.shadow_computes[s].get();
      }
    }
    n.view = std::make_unique<StaticSwarmView>(members);
    auto endpoint = board_.Attach(n.id);
    CHECK(endpoint.ok()) << endpoint.status();
    auto faulty = std::make_unique<FaultInjectingTransport>(*std::move(endpoint), &clock_,
                                                            /*seed=*/i + 1);
    n.faults = faulty.get();
    n.transport = std::move(faulty);
    if (options_.wrap_transport) {
      n.transport = options_.wrap_transport(static_cast<int>(i), std::move(n.transport));
    }
    NodeStackOptions so;
    so.server.memory_slots = options_.memory_slots;
    so.server.max_queued_forwards = options_.max_queued_forwards;
    so.server.allow_skip = options_.allow_skip;
    so.driver = options_.driver;
    if (options_.server_options) options_.server_options(static_cast<int>(i), so.server);
    NodeStackInputs in;
    in.transport = n.transport.get();
    in.clock = &clock_;
    in.routing = options_.routing ? options_.routing(static_cast<int>(i), n.view.get())
                                  : n.view.get();
    in.group = hub_.get();
    const auto delay = options_.reduce_delay.find(static_cast<int>(i));
    const auto barrier_delay = options_.barrier_delay.find(static_cast<int>(i));
    if (delay != options_.reduce_delay.end() || barrier_delay != options_.barrier_delay.end()) {
      n.slow_group = std::make_unique<DelayedReduceGroup>(
          hub_.get(), &clock_,
          delay != options_.reduce_delay.end() ? delay->second : absl::ZeroDuration(),
          options_.reduce_delay_iterations,
          barrier_delay != options_.barrier_delay.end() ? barrier_delay->second
                                                        : absl::ZeroDuration(),
          options_.barrier_delay_iterations);
      in.group = n.slow_group.get();
    }
    if (!options_.failed_reduces.empty() || options_.always_round) {
      n.failing_group = std::make_unique<FailingReduceGroup>(in.group, options_.failed_reduces,
                                                             options_.always_round);
      in.group = n.failing_group.get();
    }
    if (options_.repairer) {
      n.repairer = options_.repairer();
      in.repairer = n.repairer.get();
    }
    in.stages = stages;
    in.frozen = served_only;
    in.data = data_;
    if (stages.count(0)) {
      in.planner = options_.planner ? options_.planner() : std::make_unique<InOrderPlanner>();
    }
    n.stack = NodeStack::Create(so, std::move(in));
    if (!n.shadow_computes.empty()) {
      n.shadows = std::make_unique<SdpShadowStages>(n.id, served_only, n.view.get(), hub_.get());
      SdpShadowStages* shadows = n.shadows.get();
      n.stack->trainer()->SetBeforeIteration([shadows](uint64_t it, NodeTrainer::StepDone done) {
        shadows->Refresh(it, std::move(done));
      });
    }
  }
}

TestSwarm::~TestSwarm() {
  for (int i = 0; i < size(); ++i) {
    if (alive(i)) Kill(i);
  }
  // Let timers that reference computes run out before the computes go.
  while (clock_.RunNext()) {
  }
}

StageCompute* TestSwarm::compute(int node, int stage) {
  auto it = nodes_[node]->computes.find(stage);
  return it == nodes_[node]->computes.end() ? nullptr : it->second.get();
}

bool TestSwarm::Run(uint64_t count, absl::Duration limit) {
  const uint64_t first = next_iteration_;
  next_iteration_ += count;
  for (auto& node : nodes_) {
    Node* n = node.get();
    if (n->stack == nullptr) continue;
    n->done = false;
    n->stack->trainer()->Run(
        first, count, [n](const NodeIterationReport& r) { n->reports.push_back(r); },
        [n](absl::Status s) {
          n->done = true;
          n->done_status = s;
        });
  }
  const absl::Duration deadline = clock_.SteadyNow() + limit;
  for (;;) {
    bool all_done = true;
    for (auto& n : nodes_) all_done &= (n->stack == nullptr || n->done);
    if (all_done) return true;
    if (clock_.next_deadline_or(deadline) >= deadline) return false;
    if (!clock_.RunNext()) return false;
  }
}

void TestSwarm::Kill(int node) {
  Node& n = *nodes_[node];
  if (n.stack == nullptr) return;
  LOG(INFO) << "killing node " << node << " (" << n.id << ") at "
            << clock_.SteadyNow();
  n.stack.reset();
  n.shadows.reset();
  n.transport.reset();  // leaves the switchboard
  n.faults = nullptr;
  hub_->MarkDead(n.id);
}

void TestSwarm::SetPaused(int node, bool paused) {
  SetServerPaused(node, paused);
  for (int v = 0; v < size(); ++v) SetPausedInView(v, node, paused);
}

void TestSwarm::SetPausedInView(int viewer, int node, bool paused) {
  nodes_[viewer]->view->SetPaused(nodes_[node]->id, paused);
}

void TestSwarm::SetStoppingInView(int viewer, int node, std::optional<uint64_t> stop_after) {
  nodes_[viewer]->view->SetStopping(nodes_[node]->id, stop_after);
}

void TestSwarm::NewRecordInView(int viewer, int node) {
  nodes_[viewer]->view->NewRecord(nodes_[node]->id);
}

void TestSwarm::SetServerPaused(int node, bool paused) {
  if (StageServer* s = server(node)) s->SetPaused(paused);
}

void TestSwarm::KillAt(int node, absl::Duration at) {
  clock_.RunAt(at, [this, node] { Kill(node); });
}

ComputeFactory TimedComputes(absl::Duration forward) {
  return [forward](int, int stage, common::Clock* clock, TaskRunner*) {
    return std::make_unique<TimedStageCompute>(
        clock, TimedStageCompute::Options{.stage = stage, .forward = forward});
  };
}

}  // namespace skipswarm::node
