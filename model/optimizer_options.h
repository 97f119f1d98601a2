// The optimiser's settings (AdamW, warm-up + cosine learning rate, gradient
// clipping) and its learning-rate schedule, without libtorch: flag parsing
// and the daemons' configuration include this; the optimiser itself is
// model/optimizer.h.
#ifndef SKIPSWARM_MODEL_OPTIMIZER_OPTIONS_H_
#define SKIPSWARM_MODEL_OPTIMIZER_OPTIONS_H_

#include <cstdint>

namespace skipswarm::model {

struct OptimizerOptions {
  double peak_lr = 1e-3;
  double min_lr = 1e-4;          // reached at total_steps, kept after
  int64_t warmup_steps = 100;    // linear from peak_lr / warmup_steps
  int64_t total_steps = 2000;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;     // matrices only; norms and vectors are not decayed
  double grad_clip = 1.0;        // max L2 norm of a stage's gradient; <= 0: off
};

// Learning rate of step `step` (0-based).
double LearningRate(const OptimizerOptions& options, int64_t step);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_OPTIMIZER_OPTIONS_H_
