#include "node/train/robust_sum.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace skipswarm::node {

const char* PartVerdictName(PartVerdict::Kind kind) {
  return kind == PartVerdict::Kind::kNonFinite ? "non_finite" : "clipped";
}

std::string DescribeVerdict(const PartVerdict& v) {
  if (v.kind == PartVerdict::Kind::kNonFinite) {
    return absl::StrFormat("the gradient part of %s was left out: not finite",
                           v.from.ShortString());
  }
  return absl::StrFormat("the gradient part of %s was clipped: norm %.4g above the bound %.4g",
                         v.from.ShortString(), v.norm, v.bound);
}

double L2Norm(const std::vector<float>& v) {
  double sum = 0;
  for (float x : v) {
    if (!std::isfinite(x)) return std::nan("");
    sum += static_cast<double>(x) * x;
  }
  return std::sqrt(sum);
}

std::vector<float> RobustSum(const std::vector<PartInput>& parts, const RobustOptions& options,
                             std::vector<PartVerdict>* verdicts) {
  const size_t r = parts.size();
  std::vector<double> size(r, 0);
  std::vector<bool> finite(r, true);
  size_t finite_count = 0;
  for (size_t i = 0; i < r; ++i) {
    const double own = L2Norm(*parts[i].data);
    finite[i] = std::isfinite(own);
    if (!finite[i]) continue;
    ++finite_count;
    const double claimed = parts[i].claimed_norm;
    size[i] = std::isfinite(claimed) && claimed > own ? claimed : own;
  }
  std::vector<float> sum;
  if (finite_count == 0) {
    // A shared divergence (Note [Non-finite steps]): the plain sum.
    sum = *parts[0].data;
    for (size_t i = 1; i < r; ++i) {
      const std::vector<float>& p = *parts[i].data;
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += p[k];
    }
    return sum;
  }

  // The clip scale of each part (1: added as it is).
  std::vector<double> scale(r, 1.0);
  if (options.clip_factor > 0) {
    std::vector<double> per_visit;
    for (size_t i = 0; i < r; ++i) {
      if (finite[i] && parts[i].visits > 0) {
        per_visit.push_back(size[i] / std::sqrt(static_cast<double>(parts[i].visits)));
      }
    }
    double reference = -1;  // unknown: nothing to compare a part with
    if (per_visit.size() >= 2) {
      std::sort(per_visit.begin(), per_visit.end());
      reference = per_visit[(per_visit.size() - 1) / 2];
    }
    for (size_t i = 0; i < r; ++i) {
      if (!finite[i] || size[i] == 0) continue;
      double bound;
      if (parts[i].visits <= 0) {
        bound = 0;  // a replica without visits contributes zeros
      } else if (reference > 0) {
        bound = options.clip_factor * reference * std::sqrt(static_cast<double>(parts[i].visits));
      } else {
        continue;
      }
      if (size[i] > bound) {
        scale[i] = bound / size[i];
        verdicts->push_back({parts[i].from, PartVerdict::Kind::kClipped, size[i], bound});
      }
    }
  }

  int64_t kept_visits = 0, dropped_visits = 0;
  bool first = true;
  for (size_t i = 0; i < r; ++i) {
    if (!finite[i]) {
      dropped_visits += std::max<int64_t>(0, parts[i].visits);
      verdicts->push_back({parts[i].from, PartVerdict::Kind::kNonFinite, std::nan(""), 0});
      continue;
    }
    kept_visits += std::max<int64_t>(0, parts[i].visits);
    const std::vector<float>& p = *parts[i].data;
    if (first) {
      sum = p;
      if (scale[i] != 1.0) {
        for (float& x : sum) x = static_cast<float>(x * scale[i]);
      }
      first = false;
    } else if (scale[i] == 1.0) {
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += p[k];
    } else {
      for (size_t k = 0; k < sum.size(); ++k) sum[k] += static_cast<float>(p[k] * scale[i]);
    }
  }
  if (dropped_visits > 0 && kept_visits > 0) {
    // The left-out sender's visits stay in the round's total: its share
    // becomes the kept parts' mean.
    const double up =
        static_cast<double>(kept_visits + dropped_visits) / static_cast<double>(kept_visits);
    for (float& x : sum) x = static_cast<float>(x * up);
  }
  return sum;
}

}  // namespace skipswarm::node
