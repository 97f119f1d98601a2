// Node -> stage allocation (docs/DESIGN.md §5): on formation, on every join, and
// when a stage becomes the bottleneck.
//
// Throughput model. Every non-zero stage must serve an equal share of the
// MB visits (the balance rule), so the swarm runs at the pace of its
// weakest stage: capacity(s) = sum over its nodes of 1 / (2.5 c_v) visits
// per second, throughput ~ min_s capacity(s). A node goes where it raises
// that minimum most (the weakest stage first); among stages it would raise
// equally (within 1%), it picks the one whose nodes, and the data nodes,
// it reaches fastest (mean hop time), so routes through it stay short.
//
//   std::vector<NodeSpec> nodes = ...;   // data nodes have stage 0,
//                                        // the others stage -1
//   SS_ASSIGN_OR_RETURN(std::vector<int> stages,
//                       AllocateStages(model, nodes, hops));
//   // later, a node joins:
//   SS_ASSIGN_OR_RETURN(int s, ChooseStageForJoiner(view, joiner, hop_row));
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_SCHEDULER_ALLOCATION_H_
#define SKIPSWARM_SCHEDULER_ALLOCATION_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

// Formation. `nodes[i].stage` is 0 for data nodes (kept) and -1 for nodes
// to place; `hop_s` is row-major as for TopologyView::Create. Returns the
// stage of every node. Fails if there are fewer free nodes than non-zero
// stages or a node has a non-positive speed. Deterministic: nodes are
// placed fastest first, ties by index.
absl::StatusOr<std::vector<int>> AllocateStages(
    const ModelShape& model, const std::vector<NodeSpec>& nodes,
    const std::vector<double>& hop_s);

// One joiner: the non-zero stage it should host. `hop_to` is its hop time
// to every node of `view` (index order), kNoLink where unknown.
absl::StatusOr<int> ChooseStageForJoiner(const TopologyView& view,
                                         const NodeSpec& joiner,
                                         const std::vector<double>& hop_to);

// The same, with the data stage as a candidate when `allow_data_stage`:
// stage 0 (the joiner becomes a data node, with its own data shard, Note
// [Data order] in node/train/data_source.h) only when its capacity is
// below every other stage's by more than the 1% tie band. A data node
// also raises the global batch and loads the corpus, so it is never the
// tie-break choice.
struct JoinChoiceOptions {
  bool allow_data_stage = false;
};
absl::StatusOr<int> ChooseStageForJoiner(const TopologyView& view,
                                         const NodeSpec& joiner,
                                         const std::vector<double>& hop_to,
                                         const JoinChoiceOptions& options);

// Capacity (visits per second) of every stage of the view; index 0 is the
// data stage's (informational).
std::vector<double> StageCapacities(const TopologyView& view);

// When the weakest stage is below `ratio` x the mean capacity, the move of
// one node (from the strongest stage with more than one node) that raises
// the minimum most, or nullopt.
struct StageMove {
  int node = -1;
  int from = -1;
  int to = -1;
};
std::optional<StageMove> SuggestRebalance(const TopologyView& view,
                                          double ratio = 0.8);

// Note [Stage rebalancing] (a Petals-like balance rule): every
// non-data stage's throughput is the sum of its replicas' measured speeds
// (StageCapacities); the swarm runs at its bottleneck, the minimum. A
// replica of another stage moves to a new stage only if, after the move,
// the bottleneck throughput is at least (1 + min_gain) times what it is
// now; the move chosen is the one that raises it most (ties: the fastest
// node, then the lowest index). Because the gain must be a strict margin,
// the move back can never qualify (it lowers the minimum), and speed
// noise below the margin moves nobody: no flapping. The last replica of a
// stage never moves, data nodes (stage 0) never move, and nodes listed in
// `pinned` (e.g. still entering) stay. Every node evaluates the same rule
// on its own view; only the chosen node acts.
struct RebalanceOptions {
  double min_gain = 0.2;
  std::vector<int> pinned;  // node indices that may not move
};
struct RebalanceMove {
  int node = -1;
  int from = -1;
  int to = -1;
  double bottleneck_before = 0;  // visits per second
  double bottleneck_after = 0;
};
std::optional<RebalanceMove> ChooseRebalanceMove(const TopologyView& view,
                                                 const RebalanceOptions& options);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_ALLOCATION_H_
