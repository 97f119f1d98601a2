// Subnetwork data parallelism (SDP): which stages each worker trains.
//
// In SDP every worker trains one structured subnetwork of the model, a set
// of stages, on its own data, and only the stages it shares with others are
// averaged (per stage, over the workers that trained it). The unit of a
// subnetwork is a stage (StageBlocks(s) blocks), the unit the swarm hosts,
// averages and skips.
//
//   SS_ASSIGN_OR_RETURN(SdpAssignment a, AssignSubnetworks(6, 4, 0.5));
//   a.subnetworks[w]   // {0, 1, 5}, {0, 2, 5}, {0, 3, 5}, {0, 4, 5}
//   a.coverage[s]      // {4, 1, 1, 1, 1, 4}: workers owning stage s
//
// Note [SDP assignment]: a subnetwork keeps P = round(keep * S) stages
// (at least min(S, 2)); it always holds stage 0 (embedding, final norm and
// head, which every forward needs) and the last stage S - 1 (the block
// feeding the head; the paper keeps the first and last blocks in every
// subnetwork). The other P - 2 stages come from the S - 2 middle stages in
// cyclic windows: construction worker c takes middle stages
// 1 + ((c * (P - 2) + j) mod (S - 2)) for j < P - 2. Consecutive windows
// tile the middle stages, so every middle stage is owned by exactly
// K (P - 2) / (S - 2) workers when S - 2 divides K (P - 2); otherwise the
// assignment is refused (InvalidArgument naming the worker counts that do
// balance), since an unbalanced one trains some stages on more data.
// Workers are then numbered in ascending lexicographic order of their
// subnetworks (ties keep construction order): a swarm numbers its SDP
// nodes the same way, by hosted stages and then node id (node/train/
// sdp_planner.h), so worker w of train-ref --sdp is the swarm's w-th node.
//
// Note [SDP averaging]: a stage's update is the mean gradient over the
// micro-batches that trained it this iteration, whichever workers (or
// pipeline routes) they came from: each trainer adds one gradient of the
// MB's mean token loss per MB, the sum and the visit count are summed over
// the stage's owners, and the step divides by the visits (Note [Visit
// weighting] in optimizer.h). Every MB holds the same number of tokens
// (samples_per_mb x seq_len), so this is also the token-weighted mean over
// contributors: a worker that trained m MBs of a stage weighs m times one
// MB, and with equal MBs per worker it is the plain mean over the workers
// that own the stage. A worker's frozen stages (backward masking) add
// neither gradient nor visit.
//
// Thread rule: free functions, no shared state.
#ifndef SKIPSWARM_MODEL_SDP_ASSIGNMENT_H_
#define SKIPSWARM_MODEL_SDP_ASSIGNMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::model {

// kForward: a worker's forward and backward skip the stages outside its
// subnetwork (the residual stream passes them). kBackward: a worker runs
// the whole model forward but computes gradients (and keeps optimiser
// state) only for its own stages; the others are frozen copies.
enum class SdpMode { kOff, kForward, kBackward };

// "" or "off", "forward", "backward"; InvalidArgument otherwise.
absl::StatusOr<SdpMode> ParseSdpMode(absl::string_view text);
std::string SdpModeName(SdpMode mode);  // "off", "forward", "backward"

struct SdpAssignment {
  int num_stages = 0;
  int stages_per_worker = 0;                  // P
  std::vector<std::vector<int>> subnetworks;  // per worker, ascending, [0] == 0
  std::vector<int> coverage;                  // per stage: workers owning it
};

// P for `keep` of `num_stages` stages (Note [SDP assignment]).
int SdpStagesPerWorker(int num_stages, double keep);

// The balanced assignment of Note [SDP assignment]. InvalidArgument when
// num_stages < 1, workers < 1, keep outside (0, 1], some middle stage would
// have no owner, or the coverage cannot be equal.
absl::StatusOr<SdpAssignment> AssignSubnetworks(int num_stages, int workers, double keep);

struct SdpOptions {
  SdpMode mode = SdpMode::kOff;
  int workers = 4;    // K
  double keep = 0.5;  // fraction of the stages in each subnetwork
};

// One simulated worker's micro-batch: worker w's MB j of iteration i is the
// sampler's micro-batch i*K*M + w*M + j (M = mbs_per_worker), the order a
// swarm of K data nodes uses (Note [Data order] in node/train/data_source.h).
// Forward masking: the route is the worker's subnetwork. Backward masking:
// the full route, with the stages outside the subnetwork frozen.
struct SdpMicroBatch {
  int worker = 0;
  uint64_t index = 0;
  std::vector<int> route;
  std::vector<int> frozen;
};
std::vector<SdpMicroBatch> SdpIterationPlan(const SdpAssignment& assignment, SdpMode mode,
                                            int64_t iteration, int mbs_per_worker);

// The stages of `num_stages` not in `subnetwork` (ascending).
std::vector<int> StagesOutside(const std::vector<int>& subnetwork, int num_stages);

// "0+2+5", the form --host_stages takes.
std::string FormatStageSet(const std::vector<int>& stages);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_SDP_ASSIGNMENT_H_
