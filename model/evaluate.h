// Validation loss, perplexity and bits per byte of the model, whole or with
// any set of non-zero stages removed (SkipPipe's robustness experiment:
// removed stages are bypassed through the residual stream).
//
//   std::vector<MicroBatch> val = ValidationBatches(corpus.validation, 4, 128, 16);
//   SS_ASSIGN_OR_RETURN(EvalResult full, EvaluateRoute(pipe, FullRoute(6), val));
//   SS_ASSIGN_OR_RETURN(DropResult half, EvaluateDropped(pipe, /*num_dropped=*/3, val));
//   // a model trained with skip ratio 0.33, depth-calibrated:
//   EvaluateRoute(pipe, FullRoute(6), val, /*bytes_per_token=*/1.0, /*train_skip_ratio=*/0.33);
//
// Note [Depth calibration]: a model trained on skip routes through r_t of
// the S - 1 non-zero stages (r_t = StagesPerRoute(S, k) - 1) only ever saw
// residual streams with r_t stage updates added; the full model adds S - 1.
// Evaluating a route through r > r_t non-zero stages scales each of their
// updates by r_t / r, so the stream gets the stage-update mass it had in
// training: the test-time rule of stochastic depth (Huang et al. 2016,
// outputs re-scaled by the probability of taking part in training), here
// per stage, the unit that is skipped. Routes through r <= r_t stages
// (removal experiments) and models trained without skipping (r_t = S - 1)
// run unscaled, so the scale is 1 whenever the route is no deeper than the
// training routes; nothing is amplified. Training and the swarm are not
// affected: this is evaluation only. The losses at other scales (the rule
// is not a tuned value) are in model/README.md.
//
// Thread rule: thread-compatible (uses the pipeline).
#ifndef SKIPSWARM_MODEL_EVALUATE_H_
#define SKIPSWARM_MODEL_EVALUATE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "model/dataset.h"
#include "model/local_pipeline.h"

namespace skipswarm::model {

struct EvalResult {
  double loss = 0;           // mean token cross-entropy (nats)
  double perplexity = 0;     // exp(loss)
  double bits_per_byte = 0;  // loss / ln 2 / bytes_per_token
  int64_t tokens = 0;
};

// The residual scale of `route` for a model trained with skip ratio
// `train_skip_ratio` (Note [Depth calibration]): min(1, r_t / r), 1 when the
// route has no non-zero stage.
double DepthCalibrationScale(int num_stages, double train_skip_ratio,
                             const std::vector<int>& route);

// `bytes_per_token` is 1 for the byte tokenizer; `train_skip_ratio` > 0
// evaluates with DepthCalibrationScale (0: the plain model).
absl::StatusOr<EvalResult> EvaluateRoute(LocalPipeline& pipe, const std::vector<int>& route,
                                         const std::vector<MicroBatch>& batches,
                                         double bytes_per_token = 1.0,
                                         double train_skip_ratio = 0.0);

// The in-order route through every stage except `dropped` (non-zero stages).
absl::StatusOr<std::vector<int>> RouteWithout(int num_stages, const std::vector<int>& dropped);

// Every k-subset of the non-zero stages 1..num_stages-1, lexicographic.
std::vector<std::vector<int>> NonZeroStageSubsets(int num_stages, int k);

// Number of stages for a removed fraction of all num_stages stages
// (17% of 6 -> 1), clamped to [0, num_stages - 1].
int StagesForFraction(int num_stages, double fraction);

struct DropResult {
  int num_dropped = 0;
  int subsets = 0;          // how many stage subsets were averaged
  EvalResult mean;          // loss averaged over subsets; ppl/bpb from it
  double worst_perplexity = 0;
};

// Mean over up to `max_subsets` subsets of `num_dropped` non-zero stages
// (all of them when there are no more; else evenly spaced in lexicographic
// order, deterministic).
absl::StatusOr<DropResult> EvaluateDropped(LocalPipeline& pipe, int num_dropped,
                                           const std::vector<MicroBatch>& batches,
                                           int max_subsets = 10, double bytes_per_token = 1.0,
                                           double train_skip_ratio = 0.0);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_EVALUATE_H_
