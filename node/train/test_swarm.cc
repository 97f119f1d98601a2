#include "node/train/test_swarm.h"

#include <glog/logging.h>

#include <string>
#include <utility>

namespace skipswarm::node {

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
    nodes_.push_back(std::move(node));
  }
  hub_ = std::make_unique<InProcessGroupHub>(&clock_, members);
  for (size_t i = 0; i < nodes_.size(); ++i) {
    Node& n = *nodes_[i];
    std::map<int, StageCompute*> stages;
    for (int s : options_.node_stages[i]) {
      n.computes[s] = factory(static_cast<int>(i), s, &clock_, &runner_);
      stages[s] = n.computes[s].get();
    }
    std::map<int, StageCompute*> served = stages;
    if (i < options_.shadow_stages.size()) {
      for (int s : options_.shadow_stages[i]) {
        n.shadow_computes[s] = options_.shadow_factory(static_cast<int>(i), s, &clock_, &runner_);
        served[s] = n.shadow_computes[s].get();
      }
    }
    n.view = std::make_unique<StaticSwarmView>(members);
    auto endpoint = board_.Attach(n.id);
    CHECK(endpoint.ok()) << endpoint.status();
    auto faulty = std::make_unique<FaultInjectingTransport>(*std::move(endpoint), &clock_,
                                                            /*seed=*/i + 1);
    n.faults = faulty.get();
    n.transport = std::move(faulty);
    StageServerOptions so;
    so.memory_slots = options_.memory_slots;
    so.max_queued_forwards = options_.max_queued_forwards;
    so.allow_skip = options_.allow_skip;
    if (options_.repairer) {
      n.repairer = options_.repairer();
      so.repairer = n.repairer.get();
    }
    n.server = std::make_unique<StageServer>(n.transport.get(), &clock_, n.view.get(), served, so);
    n.server->Attach();
    if (stages.count(0)) {
      n.planner = options_.planner ? options_.planner() : std::make_unique<InOrderPlanner>();
      n.driver = std::make_unique<DataNodeDriver>(n.server.get(), &clock_, n.view.get(),
                                                  n.planner.get(), data_, options_.driver);
      n.server->SetOriginListener(n.driver.get());
    }
    n.trainer = std::make_unique<NodeTrainer>(n.server.get(), stages, n.driver.get(), hub_.get(),
                                              &clock_);
    if (!n.shadow_computes.empty()) {
      std::map<int, StageCompute*> frozen;
      for (auto& [s, c] : n.shadow_computes) frozen[s] = c.get();
      n.shadows = std::make_unique<SdpShadowStages>(n.id, frozen, n.view.get(), hub_.get());
      SdpShadowStages* shadows = n.shadows.get();
      n.trainer->SetBeforeIteration([shadows](uint64_t it, NodeTrainer::StepDone done) {
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
    if (n->server == nullptr) continue;
    n->done = false;
    n->trainer->Run(
        first, count, [n](const NodeIterationReport& r) { n->reports.push_back(r); },
        [n](absl::Status s) {
          n->done = true;
          n->done_status = s;
        });
  }
  const absl::Duration deadline = clock_.SteadyNow() + limit;
  for (;;) {
    bool all_done = true;
    for (auto& n : nodes_) all_done &= (n->server == nullptr || n->done);
    if (all_done) return true;
    if (clock_.next_deadline_or(deadline) >= deadline) return false;
    if (!clock_.RunNext()) return false;
  }
}

void TestSwarm::Kill(int node) {
  Node& n = *nodes_[node];
  if (n.server == nullptr) return;
  LOG(INFO) << "killing node " << node << " (" << n.id << ") at "
            << clock_.SteadyNow();
  n.trainer.reset();
  n.shadows.reset();
  n.server->Detach();
  n.server.reset();
  n.driver.reset();
  n.transport.reset();  // leaves the switchboard
  n.faults = nullptr;
  hub_->MarkDead(n.id);
}

void TestSwarm::KillAt(int node, absl::Duration at) {
  clock_.RunAt(at, [this, node] { Kill(node); });
}

}  // namespace skipswarm::node
