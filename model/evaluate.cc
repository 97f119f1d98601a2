#include "model/evaluate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/route.h"

namespace skipswarm::model {
namespace {

EvalResult FromLoss(double loss, int64_t tokens, double bytes_per_token) {
  EvalResult r;
  r.loss = loss;
  r.perplexity = std::exp(loss);
  r.bits_per_byte = loss / std::log(2.0) / bytes_per_token;
  r.tokens = tokens;
  return r;
}

void Subsets(int first, int last, int k, std::vector<int>& cur,
             std::vector<std::vector<int>>& out) {
  if (static_cast<int>(cur.size()) == k) {
    out.push_back(cur);
    return;
  }
  for (int s = first; s <= last; ++s) {
    cur.push_back(s);
    Subsets(s + 1, last, k, cur, out);
    cur.pop_back();
  }
}

}  // namespace

double DepthCalibrationScale(int num_stages, double train_skip_ratio,
                             const std::vector<int>& route) {
  const int trained = StagesPerRoute(num_stages, train_skip_ratio) - 1;
  const int visited = static_cast<int>(route.size()) - 1;
  if (visited <= trained || visited <= 0) return 1.0;
  return static_cast<double>(trained) / visited;
}

absl::StatusOr<EvalResult> EvaluateRoute(LocalPipeline& pipe, const std::vector<int>& route,
                                         const std::vector<MicroBatch>& batches,
                                         double bytes_per_token, double train_skip_ratio) {
  if (batches.empty()) return absl::InvalidArgumentError("evaluation: no validation batches");
  const double scale = DepthCalibrationScale(pipe.num_stages(), train_skip_ratio, route);
  double sum = 0;
  int64_t tokens = 0;
  for (const MicroBatch& b : batches) {
    SS_ASSIGN_OR_RETURN(double loss, pipe.EvalMicroBatch(route, b.tokens, b.targets, scale));
    sum += loss * b.tokens.numel();
    tokens += b.tokens.numel();
  }
  return FromLoss(sum / tokens, tokens, bytes_per_token);
}

absl::StatusOr<std::vector<int>> RouteWithout(int num_stages, const std::vector<int>& dropped) {
  std::vector<bool> drop(num_stages, false);
  for (int s : dropped) {
    if (s <= 0 || s >= num_stages) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot drop stage ", s, ": only stages 1..", num_stages - 1,
                       " can be removed"));
    }
    drop[s] = true;
  }
  std::vector<int> route;
  for (int s = 0; s < num_stages; ++s) {
    if (!drop[s]) route.push_back(s);
  }
  return route;
}

std::vector<std::vector<int>> NonZeroStageSubsets(int num_stages, int k) {
  std::vector<std::vector<int>> out;
  std::vector<int> cur;
  if (k >= 0 && k <= num_stages - 1) Subsets(1, num_stages - 1, k, cur, out);
  return out;
}

int StagesForFraction(int num_stages, double fraction) {
  const int k = static_cast<int>(std::lround(fraction * num_stages));
  return std::clamp(k, 0, num_stages - 1);
}

absl::StatusOr<DropResult> EvaluateDropped(LocalPipeline& pipe, int num_dropped,
                                           const std::vector<MicroBatch>& batches,
                                           int max_subsets, double bytes_per_token,
                                           double train_skip_ratio) {
  std::vector<std::vector<int>> all = NonZeroStageSubsets(pipe.num_stages(), num_dropped);
  if (all.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot drop ", num_dropped, " of ",
                                                   pipe.num_stages() - 1, " non-zero stages"));
  }
  std::vector<std::vector<int>> chosen;
  const size_t n = std::min<size_t>(all.size(), std::max(1, max_subsets));
  for (size_t i = 0; i < n; ++i) chosen.push_back(all[i * all.size() / n]);
  DropResult r;
  r.num_dropped = num_dropped;
  r.subsets = static_cast<int>(chosen.size());
  double sum = 0;
  int64_t tokens = 0;
  for (const auto& dropped : chosen) {
    SS_ASSIGN_OR_RETURN(std::vector<int> route, RouteWithout(pipe.num_stages(), dropped));
    SS_ASSIGN_OR_RETURN(EvalResult e,
                        EvaluateRoute(pipe, route, batches, bytes_per_token, train_skip_ratio));
    sum += e.loss;
    tokens = e.tokens;
    r.worst_perplexity = std::max(r.worst_perplexity, e.perplexity);
  }
  r.mean = FromLoss(sum / chosen.size(), tokens, bytes_per_token);
  return r;
}

}  // namespace skipswarm::model
