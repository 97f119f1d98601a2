#include "model/optimizer_options.h"

#include <algorithm>
#include <cmath>

namespace skipswarm::model {

double LearningRate(const OptimizerOptions& o, int64_t step) {
  if (o.warmup_steps > 0 && step < o.warmup_steps) {
    return o.peak_lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup_steps);
  }
  if (step >= o.total_steps) return o.min_lr;
  const double span = std::max<int64_t>(1, o.total_steps - o.warmup_steps);
  const double progress = static_cast<double>(step - o.warmup_steps) / span;
  return o.min_lr + 0.5 * (o.peak_lr - o.min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace skipswarm::model
