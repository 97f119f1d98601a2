// The scheduler's picture of the swarm: who hosts which stage, how fast each
// node computes, how many micro-batches it can hold, and what one hop of one
// micro-batch costs between any two nodes. Planners and the evaluator read
// only this; the daemon builds it from gossip, the simulator and the CLI from
// scenario files (scenario.h).
//
//   ModelShape model{.num_stages = 3, .layers_per_stage = 4, .samples_per_mb = 2};
//   std::vector<NodeSpec> nodes = {{.name = "d0", .stage = 0, ...}, ...};
//   std::vector<double> hops(n * n, 0.05);      // seconds per micro-batch hop
//   SS_ASSIGN_OR_RETURN(TopologyView view,
//                       TopologyView::Create(model, nodes, hops));
//   double c = view.forward_s(3);                // c_v of docs/DESIGN.md §5
//
// Nodes are addressed by their dense index 0..num_nodes()-1 everywhere in
// scheduler/ (routes, evaluations); NodeSpec::id maps back to the swarm.
// Each node hosts exactly one stage (a node hosting several stages, as in
// subnetwork data parallelism, is not modelled yet). A missing link is +infinity: no route may use it.
//
// Thread rule: immutable after Create; safe to share between threads.
#ifndef SKIPSWARM_SCHEDULER_TOPOLOGY_H_
#define SKIPSWARM_SCHEDULER_TOPOLOGY_H_

#include <limits>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/node_id.h"

namespace skipswarm::scheduler {

inline constexpr double kNoLink = std::numeric_limits<double>::infinity();

struct ModelShape {
  int num_stages = 0;        // S, including the data stage 0
  int layers_per_stage = 1;  // transformer blocks per stage
  int samples_per_mb = 1;    // sequences per micro-batch
  double bytes_per_mb = 0;   // activation bytes carried by one hop
};

struct NodeSpec {
  std::string name;                 // unique, human readable ("n7", "eu-3")
  common::NodeId id;                // the swarm identity (zero in scenarios)
  int stage = -1;                   // hosted stage; 0 = data node
  double sec_per_layer_sample = 0;  // t_v, measured
  int memory_slots = 0;             // MBs admitted between forward and backward
  std::string region;               // informational; scenario link lookup
};

// A network link; the hop cost of one micro-batch is
// latency_s + bytes_per_mb / bandwidth_bytes_per_s + overhead_s.
struct LinkSpec {
  double latency_s = 0;
  double bandwidth_bytes_per_s = 0;
};
double HopSeconds(const LinkSpec& link, double bytes_per_mb, double overhead_s);

class TopologyView {
 public:
  // An empty view (no stages, no nodes); real views come from Create.
  TopologyView() = default;

  // `hop_s` is row-major num_nodes x num_nodes: seconds to move one
  // micro-batch's activations (or gradients) from u to v. kNoLink for "no
  // link". The diagonal is ignored. Fails with InvalidArgument naming the
  // problem: bad model shape, duplicate name, stage out of range, missing or
  // negative speed, zero memory slots, negative/NaN hop, asymmetric hop, a
  // stage with no node, or a stage with no link path to a data node.
  static absl::StatusOr<TopologyView> Create(ModelShape model,
                                             std::vector<NodeSpec> nodes,
                                             std::vector<double> hop_s);

  const ModelShape& model() const { return model_; }
  int num_stages() const { return model_.num_stages; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const NodeSpec& node(int v) const { return nodes_[v]; }
  int stage(int v) const { return nodes_[v].stage; }
  int memory_slots(int v) const { return nodes_[v].memory_slots; }
  bool alive(int v) const { return alive_[v]; }
  // c_v = t_v x layers_per_stage x samples_per_mb: one forward, in seconds.
  double forward_s(int v) const { return forward_s_[v]; }
  double hop_s(int u, int v) const { return hop_s_[u * nodes_.size() + v]; }
  // Alive nodes hosting `stage`, ascending index.
  const std::vector<int>& stage_nodes(int stage) const {
    return stage_nodes_[stage];
  }
  const std::vector<int>& data_nodes() const { return stage_nodes_[0]; }
  // Index of the node with this name, or -1.
  int FindNode(const std::string& name) const;
  int FindNode(const common::NodeId& id) const;

  // A copy where node `v` is dead: it leaves stage_nodes() and no planner
  // routes through it. Indices do not change. Fails if `v` is out of range or
  // its stage would be left with no node.
  absl::StatusOr<TopologyView> WithoutNode(int v) const;

 private:
  void RebuildStageNodes();
  absl::Status CheckConnected() const;

  ModelShape model_;
  std::vector<NodeSpec> nodes_;
  std::vector<bool> alive_;
  std::vector<double> forward_s_;
  std::vector<double> hop_s_;
  std::vector<std::vector<int>> stage_nodes_;
};

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_TOPOLOGY_H_
