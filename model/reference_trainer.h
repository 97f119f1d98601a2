// ReferenceTrainer: single-process training of the staged model with the
// swarm's semantics (docs/DESIGN.md §6), the yardstick a distributed run must
// match. Each iteration injects mbs_per_iteration micro-batches, each along
// its own route (the full pipeline, or a random skip route with ratio k,
// the iteration's routes balanced over the stages),
// then every stage takes one visit-weighted, clipped AdamW step
// (Note [Visit weighting] in optimizer.h).
//
//   SS_ASSIGN_OR_RETURN(auto trainer, ReferenceTrainer::Create(options, corpus));
//   while (trainer->iteration() < 2000) {
//     SS_ASSIGN_OR_RETURN(IterationStats s, trainer->RunIteration());
//   }
//   SS_RETURN_IF_ERROR(trainer->SaveCheckpoint(dir));
//
// Everything random (init, data, routes) derives from the options' seeds and
// the iteration number, so a resumed run continues exactly as an
// uninterrupted one would.
//
// Thread rule: thread-compatible. Borrows `corpus`, which must outlive it.
#ifndef SKIPSWARM_MODEL_REFERENCE_TRAINER_H_
#define SKIPSWARM_MODEL_REFERENCE_TRAINER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/dataset.h"
#include "model/evaluate.h"
#include "model/local_pipeline.h"
#include "model/optimizer.h"
#include "model/sdp_assignment.h"

namespace skipswarm::model {

struct TrainerOptions {
  ModelConfig model;
  RuntimeOptions runtime;
  OptimizerOptions optimizer;
  int mbs_per_iteration = 2;
  int samples_per_mb = 4;
  double skip_ratio = 0;   // 0: every MB visits every stage
  // true (default): the skip routes of an iteration are drawn together with
  // balanced visit counts (BalancedSkipRoutes, Note [Balanced skip routes]),
  // as the swarm's planner balances them; false: each MB's route is drawn on
  // its own (RandomSkipRoute), the former behaviour, kept for comparisons.
  bool balanced_routes = true;
  uint64_t seed = 1;       // data order and routes
  // Subnetwork data parallelism (model/sdp_assignment.h): when on, each
  // iteration simulates sdp.workers workers, each training
  // mbs_per_iteration micro-batches (per worker) on its own subnetwork,
  // instead of the skip routes above; a stage's step is the mean over the
  // micro-batches that trained it (Note [SDP averaging] in sdp_assignment.h).
  SdpOptions sdp;
};

struct IterationStats {
  int64_t iteration = 0;   // the iteration just finished (0-based)
  double loss = 0;         // mean MB training loss
  double lr = 0;
  double max_grad_norm = 0;  // over stages, before clipping
  int64_t tokens = 0;      // tokens injected this iteration
  std::vector<int64_t> visits;  // per stage
};

// One micro-batch of a replayed iteration (`train-ref --routes_file`,
// model/route_record.h): the sampler's global micro-batch number (Note
// [Data order] in node/train/data_source.h) and the stages it visits.
struct RoutedMicroBatch {
  uint64_t index = 0;
  std::vector<int> route;
  // Stages run forward without parameter gradients (SDP backward masking).
  std::vector<int> frozen = {};  // (= {}: two-member brace inits stay warning-free)
};

class ReferenceTrainer {
 public:
  static absl::StatusOr<std::unique_ptr<ReferenceTrainer>> Create(const TrainerOptions& options,
                                                                  const Corpus& corpus);

  absl::StatusOr<IterationStats> RunIteration();
  // One iteration over exactly `mbs` (a swarm's recorded routes) instead of
  // the options' data order and routes; the same visit-weighted step
  // (reference_trainer_replay.cc). InvalidArgument for an empty list or a
  // route ValidateRoute refuses.
  absl::StatusOr<IterationStats> RunIteration(const std::vector<RoutedMicroBatch>& mbs);
  int64_t iteration() const { return iteration_; }  // completed iterations

  // A checkpoint generation "<dir>/generations/gen-N/" (Note [Checkpoint
  // generations]; the newest `keep` kept), then one file per stage,
  // "<dir>/stage-<s>.ckpt" (what `skipswarm eval --checkpoint` reads); the
  // iteration is the step.
  absl::Status SaveCheckpoint(const std::string& dir, int keep = 3);
  // Loads the newest complete generation under <dir>/generations (a torn
  // one is skipped, logged and listed in `skipped`); without any generation
  // folder, the per-stage files. FailedPrecondition with no complete
  // generation of this model, or when the per-stage files disagree on the
  // step or were written for another model.
  absl::Status LoadCheckpoint(const std::string& dir,
                              std::vector<std::string>* skipped = nullptr);
  // Whether `dir` holds something LoadCheckpoint can try.
  static bool HasCheckpoint(const std::string& dir);

  // `bytes_per_token` converts to bits per byte (Corpus::BytesPerToken()).
  // Depth-calibrated for the trainer's skip ratio (Note [Depth calibration]
  // in evaluate.h; the plain model when skip_ratio is 0).
  absl::StatusOr<EvalResult> Evaluate(const std::vector<int>& route,
                                      const std::vector<MicroBatch>& batches,
                                      double bytes_per_token = 1.0);

  LocalPipeline& pipeline() { return *pipe_; }
  // The SDP assignment (empty subnetworks when SDP is off).
  const SdpAssignment& sdp_assignment() const { return sdp_; }
  // The skip ratio the training routes amount to, for depth calibration:
  // options().skip_ratio, or 1 - P/S under SDP forward masking.
  double effective_skip_ratio() const;
  const TrainerOptions& options() const { return options_; }

 private:
  ReferenceTrainer(const TrainerOptions& options, std::unique_ptr<LocalPipeline> pipe,
                   std::unique_ptr<MicroBatchSampler> sampler);

  TrainerOptions options_;
  std::unique_ptr<LocalPipeline> pipe_;
  std::unique_ptr<MicroBatchSampler> sampler_;
  std::vector<std::unique_ptr<StageOptimizer>> optimizers_;
  SdpAssignment sdp_;
  int64_t iteration_ = 0;
};

std::string StageCheckpointPath(const std::string& dir, int stage);
// <dir>/generations: the trainer's checkpoint generations.
std::string GenerationsRoot(const std::string& dir);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_REFERENCE_TRAINER_H_
