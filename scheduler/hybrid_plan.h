// Hybrid scheduling: per node, subnetwork data parallelism (SDP: the node
// trains a subnetwork of stages on its own data, no activation traffic,
// only per-stage averaging) or pipeline hosting (the node serves one stage
// of the skip-pipeline routes), chosen from each node's memory, compute
// speed, uplink and links, with both costed by one model.
//
//   HybridSwarm swarm = ...;              // nodes, links, model, workload
//   SS_ASSIGN_OR_RETURN(HybridPlan mixed,
//                       AllocateHybrid(swarm, {.mode = HybridMode::kMixed}));
//   mixed.roles[v];                       // kPipeline, kSdp or kIdle
//   mixed.tokens_per_s, mixed.bytes_per_token;
//
// Note [Hybrid cost]: one synchronous iteration. The pipeline nodes form a
// TopologyView (each keeps the stage it was given; stage 0 = data nodes);
// their M micro-batches per data node are planned by a route planner
// (skippipe by default) and timed by the evaluator (evaluator.h): T_pipe.
// Every SDP node is its own data node and trains M micro-batches through
// its subnetwork (P stages, SdpWindows) one after another on its own
// compute, with the evaluator's task costs (c_v = forward_s, backward
// 1.5 c_v, loss 0.25 c_v): forward masking (2.5 P + 0.25) c_v per MB;
// backward masking S forwards, 1.5 c_v backward on owned stages and
// 0.75 c_v (input gradients only, an assumption: half a full backward) on
// the S - P frozen ones. Averaging follows: every stage is averaged over
// all its owners (pipeline replicas, data nodes for stage 0, SDP nodes)
// with the sharded reduce of averaging_cost.h, 2 (R-1)/R x B_s uploaded
// per owner and stage, B_s = AveragedBytes(codec, params per stage); a
// node's sends to each peer run in parallel, bounded by its uplink and by
// each link's bandwidth, so its time is max(total / uplink, max over peers
// of bytes to the peer / link bandwidth); the sync takes the slowest node,
// and an iteration pays sync / H. Iteration = max(T_pipe, slowest SDP
// node's compute) + sync / H (averaging is not overlapped, as today).
// Tokens per iteration = all micro-batches x samples_per_mb x
// tokens_per_sample. Pipeline routes visit P = path_length stages and SDP
// subnetworks default to the same P, so a token trains as many stages in
// either mode. Bytes per token = (activation bytes: forward and backward
// on every hop between distinct nodes, bytes_per_mb each; plus averaging
// bytes per iteration) / tokens per iteration.
//
// Memory (GiB; <= 0 means unlimited): a trained stage holds fp32 weights,
// gradients and both AdamW moments (16 bytes per parameter, Note [Memory
// estimate] in model/model_flags.h), a frozen copy 4 bytes per parameter,
// and each MB in flight activation_gib per stage. A pipeline host needs its
// stage and one MB slot (its slots are capped by what fits); an SDP node
// with forward masking P trained stages and one MB through P stages; with
// backward masking P trained, S - P frozen and one MB through S stages.
//
// Search (kMixed): from three starts (pipeline-only, SDP-only, and SDP
// wherever it fits with the pipeline elsewhere), move one node at a time
// between roles (pipeline, SDP, idle), taking the move that raises tokens/s
// most, until none raises it by more than min_gain; the best result is
// compared with both pure plans at full planner effort, so the mixed plan
// is never worse than either. A node goes idle when its averaging costs
// the swarm more time than its micro-batches add.
// Deterministic: the planner runs without a clock on evaluation limits.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_SCHEDULER_HYBRID_PLAN_H_
#define SKIPSWARM_SCHEDULER_HYBRID_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/averaging_options.h"
#include "scheduler/route.h"
#include "scheduler/topology.h"

namespace skipswarm::scheduler {

struct HybridModel {
  ModelShape shape;               // S, layers, samples per MB, bytes per MB
  int tokens_per_sample = 1024;   // sequence length
  double params = 0;              // whole model; each stage params / S
  double activation_gib = 0;      // one MB's saved activations at one stage
  int sdp_stages = 0;             // P of a subnetwork; 0: workload.path_length
  bool backward_masking = false;  // false: forward masking
};

struct HybridNode {
  NodeSpec spec;                  // stage = the stage it hosts in a pipeline
  double memory_gib = 0;          // <= 0: unlimited
  double uplink_bytes_per_s = 0;  // <= 0: unlimited
  // > 0: the most stages the node can hold (whatever memory_gib says):
  // SDP needs P with forward masking, S with backward (frozen copies too).
  int max_stages = 0;
};

struct HybridSwarm {
  HybridModel model;
  std::vector<HybridNode> nodes;
  std::vector<double> hop_s;            // n x n, as TopologyView::Create
  std::vector<double> link_bytes_per_s; // n x n for averaging; empty or <= 0: unlimited
  Workload workload;
  model::AveragingOptions averaging;
};

enum class NodeRole { kIdle, kPipeline, kSdp };
const char* NodeRoleName(NodeRole role);  // "idle", "pipeline", "sdp"

enum class HybridMode { kPipelineOnly, kSdpOnly, kMixed };

struct HybridOptions {
  HybridMode mode = HybridMode::kMixed;
  std::string planner = "skippipe";
  uint64_t seed = 1;
  int max_evaluations = 400;     // planner effort per candidate (search)
  int final_evaluations = 3000;  // planner effort for the chosen plan
  double min_gain = 0.001;       // a move must raise tokens/s by this fraction
  int max_moves = 64;
};

struct HybridPlan {
  std::vector<NodeRole> roles;              // per swarm node
  std::vector<std::vector<int>> subnetwork; // per node: its stages if kSdp
  std::vector<int> pipeline_nodes;          // swarm indices of the sub-view
  Plan pipeline_plan;                       // routes over pipeline_nodes' view
  std::vector<int> stage_owners;            // per stage: nodes that average it
  int pipeline_mbs = 0;
  int sdp_mbs = 0;
  double pipeline_s = 0;       // T_pipe (0 without a pipeline)
  double sdp_s = 0;            // the slowest SDP node's compute
  double averaging_sync_s = 0; // one sync (slowest node)
  double averaging_s = 0;      // per iteration (sync / H)
  double iteration_s = 0;
  double tokens_per_iteration = 0;
  double tokens_per_s = 0;
  double activation_bytes = 0;  // per iteration
  double averaging_bytes = 0;   // per iteration
  double bytes_per_token = 0;
};

// P of the swarm's subnetworks (model.sdp_stages, else the path length).
int SdpStages(const HybridSwarm& swarm);

// The subnetworks of k SDP workers: stage 0, the last stage, and P - 2
// middle stages in consecutive cyclic windows (the construction of Note
// [SDP assignment] in model/sdp_assignment.h, here for any k: stage
// coverage differs by at most one when (S - 2) does not divide k (P - 2)).
std::vector<std::vector<int>> SdpWindows(int num_stages, int stages_per_worker, int k);

// Whether node v can take `role` (memory), and its MB slots as a pipeline
// host (min of its spec and what fits; 0: cannot host).
bool FitsSdp(const HybridSwarm& swarm, int v);
int PipelineSlots(const HybridSwarm& swarm, int v);

// Seconds for one MB through node v's subnetwork (Note [Hybrid cost]).
double SdpMicroBatchSeconds(const HybridSwarm& swarm, int v);

// The pipeline part's view: `nodes` (swarm indices, ascending) with their
// stages, PipelineSlots and hops. InvalidArgument (from TopologyView::
// Create) when they cannot form a pipeline.
absl::StatusOr<TopologyView> PipelineView(const HybridSwarm& swarm, const std::vector<int>& nodes);

// Costs one role assignment. FailedPrecondition when it cannot train: no
// node at all, a pipeline missing a stage or a data node, an SDP node that
// does not fit, or no route plan.
absl::StatusOr<HybridPlan> CostRoles(const HybridSwarm& swarm,
                                     const std::vector<NodeRole>& roles,
                                     const HybridOptions& options);

// The plan of `options.mode`. Pipeline-only: every node that can host its
// stage. SDP-only: every node that fits a subnetwork (FailedPrecondition if
// none does). Mixed: the search of Note [Hybrid cost].
absl::StatusOr<HybridPlan> AllocateHybrid(const HybridSwarm& swarm,
                                          const HybridOptions& options);

}  // namespace skipswarm::scheduler

#endif  // SKIPSWARM_SCHEDULER_HYBRID_PLAN_H_
