// TestSwarm: an in-process swarm of real nodes (StageServer, DataNodeDriver,
// NodeTrainer) on a SimClock, connected by the in-process transport with a
// fault wrapper per node, averaging through an InProcessGroupHub. Compute is
// whatever the factory makes (timed or libtorch). For tests and benchmarks.
//
//   TestSwarm swarm(options, factory, &data);
//   swarm.KillAt(3, absl::Milliseconds(250));
//   ASSERT_TRUE(swarm.Run(/*iterations=*/5));
//   swarm.reports(0)[4].data->dropped ...
//
// Thread rule: single-threaded (everything runs on the SimClock's thread).
#ifndef SKIPSWARM_NODE_TRAIN_TEST_SWARM_H_
#define SKIPSWARM_NODE_TRAIN_TEST_SWARM_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "common/sim_clock.h"
#include "node/compute/stage_compute.h"
#include "node/compute/task_runner.h"
#include "node/stage/stage_server.h"
#include "node/train/data_node_driver.h"
#include "node/train/inproc_group.h"
#include "node/train/node_stack.h"
#include "node/train/node_trainer.h"
#include "node/train/sdp_shadows.h"
#include "node/transport/fault_transport.h"
#include "node/transport/inproc_transport.h"

namespace skipswarm::node {

struct TestSwarmOptions {
  std::vector<std::vector<int>> node_stages;  // stages hosted by node i
  int num_stages = 1;
  int memory_slots = 4;
  int max_queued_forwards = 8;
  bool allow_skip = false;
  absl::Duration latency = absl::Milliseconds(1);
  DriverOptions driver;  // num_stages is filled in
  // Makes each data node's planner; empty: InOrderPlanner.
  std::function<std::unique_ptr<RoutePlanner>()> planner;
  // Makes each node's route repairer; empty: the server's default.
  std::function<std::unique_ptr<RouteRepairer>()> repairer;
  // SDP backward masking: node i's frozen stage copies (not in its record,
  // refreshed before each iteration, Note [SDP frozen stages] in
  // sdp_shadows.h), made by `shadow_factory`. Empty: none.
  std::vector<std::vector<int>> shadow_stages;
  std::function<std::unique_ptr<StageCompute>(int node, int stage, common::Clock* clock,
                                              TaskRunner* runner)>
      shadow_factory;
  // Node i's AllReduce calls reach the hub this much later (simulated
  // time): a member slow to upload (Note [Late members] in
  // sharded_reduce.h). Its result comes back at once.
  std::map<int, absl::Duration> reduce_delay;
  // Only these iterations' calls are held back (empty: every one).
  std::set<uint64_t> reduce_delay_iterations;
  // Node i's Barrier call of these iterations reaches the hub this much
  // later (simulated time): a data node stuck between its iteration and
  // the barrier (Note [Stated bounds] in inproc_group.h).
  std::map<int, absl::Duration> barrier_delay;
  std::set<uint64_t> barrier_delay_iterations;
  // Averaging rounds (iteration, stage) that fail on every replica: each
  // AllReduce of them answers UNAVAILABLE at once and never reaches the hub
  // (a round every replica lost, e.g. to the group's deadline).
  std::set<std::pair<uint64_t, int>> failed_reduces;
  // The group never says a replica is alone (GroupComm::SoleReplica), so
  // every stage runs its rounds, as before Note [Group of one] in
  // node_trainer.cc: exactness tests compare the two paths.
  bool always_round = false;
  // Verified compute (Note [Sending checks] in node/stage/
  // stage_server_verify_send.cc): nodes every view marks on probation
  // (PeerInfo::on_probation), a hook that adjusts node i's server options
  // (the rate, the judge, the verdicts' listener), and node i's routing
  // view made from its own (e.g. an ExcludingView; borrowed, it must
  // outlive the swarm). Empty: none, none, the node's view.
  std::set<int> on_probation;
  std::function<void(int node, StageServerOptions& options)> server_options;
  std::function<SwarmView*(int node, StaticSwarmView* view)> routing;
  // Wraps node i's transport (over its fault wrapper): a hostile peer's
  // sends in adversarial tests. Empty: none.
  std::function<std::unique_ptr<Transport>(int node, std::unique_ptr<Transport> inner)>
      wrap_transport;
};

using ComputeFactory = std::function<std::unique_ptr<StageCompute>(
    int node, int stage, common::Clock* clock, TaskRunner* runner)>;

// Every stage a TimedStageCompute whose forward takes `forward` of
// simulated time: the swarm tests that time routes, not numbers.
ComputeFactory TimedComputes(absl::Duration forward = absl::Milliseconds(10));

class TestSwarm {
 public:
  TestSwarm(TestSwarmOptions options, ComputeFactory factory, const DataSource* data);
  ~TestSwarm();

  // Runs `count` more iterations on every live node; false if `limit` of
  // simulated time passes first (a hang).
  bool Run(uint64_t count, absl::Duration limit = absl::Hours(1));

  // Kills node i now / at simulated time `at`: its endpoint leaves the
  // switchboard (peers that talk to it see failures) and the hub drops it.
  void Kill(int node);
  void KillAt(int node, absl::Duration at);
  bool alive(int node) const { return nodes_[node]->stack != nullptr; }

  // A volunteer's pause or resume of node i (Note [Paused members] in
  // node/daemon/gossip/training_members.h): its StageServer refuses later
  // forwards and every view routes around it (SetPausedInView: one view,
  // a record that reaches that node later). It keeps averaging.
  void SetPaused(int node, bool paused);
  void SetPausedInView(int viewer, int node, bool paused);
  void SetServerPaused(int node, bool paused);
  // Node `node`'s stopping record (SwarmView::StopAfter) reaches viewer's
  // view; nullopt: it has none.
  void SetStoppingInView(int viewer, int node, std::optional<uint64_t> stop_after);
  // A newer record of node `node` that says nothing else new (a restart
  // under the same key: SwarmView::Incarnation) reaches viewer's view.
  void NewRecordInView(int viewer, int node);

  int size() const { return static_cast<int>(nodes_.size()); }
  common::NodeId id(int node) const { return nodes_[node]->id; }
  const std::vector<NodeIterationReport>& reports(int node) const { return nodes_[node]->reports; }
  // What node i's trainer ended its last Run with.
  const absl::Status& done_status(int node) const { return nodes_[node]->done_status; }
  StageCompute* compute(int node, int stage);
  StageServer* server(int node) { return alive(node) ? nodes_[node]->stack->server() : nullptr; }
  DataNodeDriver* driver(int node) {
    return alive(node) ? nodes_[node]->stack->driver() : nullptr;
  }
  NodeTrainer* trainer(int node) {
    return alive(node) ? nodes_[node]->stack->trainer() : nullptr;
  }
  FaultInjectingTransport* faults(int node) { return nodes_[node]->faults; }
  // Node i's frozen copies (null without shadow_stages).
  const SdpShadowStages* shadows(int node) const { return nodes_[node]->shadows.get(); }
  common::SimClock& clock() { return clock_; }

 private:
  struct Node {
    common::NodeId id;
    std::map<int, std::unique_ptr<StageCompute>> computes;  // kept after a kill
    std::map<int, std::unique_ptr<StageCompute>> shadow_computes;
    std::unique_ptr<SdpShadowStages> shadows;
    std::unique_ptr<StaticSwarmView> view;
    std::unique_ptr<Transport> transport;
    FaultInjectingTransport* faults = nullptr;
    std::unique_ptr<RouteRepairer> repairer;
    std::unique_ptr<GroupComm> slow_group;     // reduce_delay
    std::unique_ptr<GroupComm> failing_group;  // failed_reduces
    std::unique_ptr<NodeStack> stack;  // node/'s recipe; null once killed
    std::vector<NodeIterationReport> reports;
    bool done = false;
    absl::Status done_status;
  };

  TestSwarmOptions options_;
  const DataSource* data_;
  common::SimClock clock_;
  ClockTaskRunner runner_{&clock_};
  Switchboard board_;
  std::unique_ptr<InProcessGroupHub> hub_;
  std::vector<std::unique_ptr<Node>> nodes_;
  uint64_t next_iteration_ = 0;
};

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRAIN_TEST_SWARM_H_
