#include "node/train/robust_sum.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/str_format.h"

namespace skipswarm::node {

const char* PartVerdictName(PartVerdict::Kind kind) {
  switch (kind) {
    case PartVerdict::Kind::kNonFinite:
      return "non_finite";
    case PartVerdict::Kind::kClipped:
      return "clipped";
    case PartVerdict::Kind::kOutlier:
      return "outlier";
    case PartVerdict::Kind::kBanned:
      return "banned";
  }
  return "unknown";
}

std::string DescribeVerdict(const PartVerdict& v) {
  if (v.kind == PartVerdict::Kind::kNonFinite) {
    return absl::StrFormat("the gradient part of %s was left out: not finite",
                           v.from.ShortString());
  }
  if (v.kind == PartVerdict::Kind::kBanned) {
    return absl::StrFormat("the gradient part of %s was left out: it is banned",
                           v.from.ShortString());
  }
  if (v.kind == PartVerdict::Kind::kOutlier) {
    return absl::StrFormat(
        "the gradient part of %s was pulled in: %.4g from the group's median, the others %.4g",
        v.from.ShortString(), v.norm, v.bound);
  }
  return absl::StrFormat("the gradient part of %s was clipped: norm %.4g above the bound %.4g",
                         v.from.ShortString(), v.norm, v.bound);
}

double L2Norm(const std::vector<float>& v) {
  // Four partial sums and no test per element: one dependent chain of double
  // additions ran at a quarter of this speed (a node takes the norm of its
  // whole gradient every iteration, and of every part it reduces). A float
  // squared in double never overflows, so the sum is finite exactly when
  // every element is.
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  const float* p = v.data();
  const size_t n = v.size();
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += static_cast<double>(p[i]) * p[i];
    s1 += static_cast<double>(p[i + 1]) * p[i + 1];
    s2 += static_cast<double>(p[i + 2]) * p[i + 2];
    s3 += static_cast<double>(p[i + 3]) * p[i + 3];
  }
  for (; i < n; ++i) s0 += static_cast<double>(p[i]) * p[i];
  const double sum = (s0 + s1) + (s2 + s3);
  if (!std::isfinite(sum)) return std::nan("");
  return std::sqrt(sum);
}

namespace {

// A part's value as the clipping steps before this one left it: the
// pulled-in copy if there is one, else the part as sent times its scale.
struct Values {
  const std::vector<PartInput>& parts;
  const std::vector<double>& scale;
  const std::vector<std::vector<float>>& pulled;
  double operator()(size_t i, size_t k) const {
    return pulled[i].empty() ? (*parts[i].data)[k] * scale[i] : pulled[i][k];
  }
};

// The centre (coordinate-wise median of the per-visit means) of the parts
// `set`, and each one's distance from it (Note [Robust averaging]).
struct Spread {
  std::vector<float> centre;
  std::vector<double> distance;  // per entry of `set`
};

Spread Measure(const std::vector<PartInput>& parts, const std::vector<size_t>& set,
               const Values& value) {
  const size_t n = parts[set[0]].data->size();
  const size_t r = set.size();
  Spread s;
  s.centre.resize(n);
  std::vector<double> column(r);
  for (size_t k = 0; k < n; ++k) {
    for (size_t j = 0; j < r; ++j) {
      column[j] = value(set[j], k) / static_cast<double>(parts[set[j]].visits);
    }
    std::nth_element(column.begin(), column.begin() + r / 2, column.end());
    double m = column[r / 2];
    if (r % 2 == 0) m = (m + *std::max_element(column.begin(), column.begin() + r / 2)) / 2;
    s.centre[k] = static_cast<float>(m);
  }
  s.distance.resize(r);
  for (size_t j = 0; j < r; ++j) {
    const size_t i = set[j];
    const double v = static_cast<double>(parts[i].visits);
    double sum = 0;
    for (size_t k = 0; k < n; ++k) {
      const double d = value(i, k) - v * s.centre[k];
      sum += d * d;
    }
    s.distance[j] = std::sqrt(sum / v);
  }
  return s;
}

// Pulls every entry of `set` farther than factor x `reference` from the
// centre in to `reference` (scale becomes 1) and names it.
void PullIn(const std::vector<PartInput>& parts, const std::vector<size_t>& set,
            const Spread& spread, double factor, double reference, std::vector<double>* scale,
            std::vector<std::vector<float>>* pulled, std::vector<PartVerdict>* verdicts) {
  if (!(reference > 0)) return;  // most parts equal here: nothing to judge by
  const size_t n = spread.centre.size();
  for (size_t j = 0; j < set.size(); ++j) {
    if (spread.distance[j] <= factor * reference) continue;
    const size_t i = set[j];
    const Values value{parts, *scale, *pulled};
    const double v = static_cast<double>(parts[i].visits);
    const double t = reference / spread.distance[j];
    std::vector<float> out(n);
    for (size_t k = 0; k < n; ++k) {
      const double c = v * spread.centre[k];
      out[k] = static_cast<float>(c + (value(i, k) - c) * t);
    }
    (*pulled)[i] = std::move(out);
    (*scale)[i] = 1.0;
    verdicts->push_back({parts[i].from, PartVerdict::Kind::kOutlier, spread.distance[j], reference});
  }
}

// Note [Robust averaging], centered clipping, per class (Note [Robust
// averaging across subnetworks]): pulls in the outliers among `kept` (the
// finite parts with visits) and names them.
void PullInOutliers(const std::vector<PartInput>& parts, const std::vector<size_t>& kept,
                    const RobustOptions& options, std::vector<double>* scale,
                    std::vector<std::vector<float>>* pulled, std::vector<PartVerdict>* verdicts) {
  const double factor = options.outlier_factor;
  std::map<std::vector<int>, std::vector<size_t>> classes;  // {}: pipeline hosts
  for (size_t i : kept) {
    auto it = options.subnetworks.find(parts[i].from);
    classes[it == options.subnetworks.end() ? std::vector<int>{} : it->second].push_back(i);
  }
  // Within each class of >= 3 parts, that class's own centre and reference.
  for (const auto& [stages, set] : classes) {
    if (set.size() < 3) continue;
    const Spread spread = Measure(parts, set, Values{parts, *scale, *pulled});
    std::vector<double> sorted = spread.distance;
    std::sort(sorted.begin(), sorted.end());
    const double reference = sorted[(sorted.size() - 1) / 2];  // the lower median
    PullIn(parts, set, spread, factor, reference, scale, pulled, verdicts);
  }
  // Across classes: the parts no class of their own judged, against every
  // kept part of the shard.
  if (!options.across_classes || classes.size() < 2) return;
  std::vector<size_t> lone;  // positions in `kept`
  for (size_t j = 0; j < kept.size(); ++j) {
    auto it = options.subnetworks.find(parts[kept[j]].from);
    if (classes[it == options.subnetworks.end() ? std::vector<int>{} : it->second].size() < 3) {
      lone.push_back(j);
    }
  }
  if (lone.empty()) return;
  const Values value{parts, *scale, *pulled};
  const Spread all = Measure(parts, kept, value);
  std::vector<double> distances = all.distance;
  std::vector<double> sizes;
  for (size_t i : kept) {
    double sum = 0;
    for (size_t k = 0; k < all.centre.size(); ++k) sum += value(i, k) * value(i, k);
    sizes.push_back(std::sqrt(sum / static_cast<double>(parts[i].visits)));
  }
  std::sort(distances.begin(), distances.end());
  std::sort(sizes.begin(), sizes.end());
  const double reference = std::max(distances[(distances.size() - 1) / 2],
                                    sizes[(sizes.size() - 1) / 2]);  // the lower medians
  Spread judged;
  judged.centre = all.centre;
  std::vector<size_t> set;
  for (size_t j : lone) {
    // Only a part that also points against the centre: an honest
    // subnetwork's offset moves its part aside, a reversed step moves it back.
    double along = 0;
    for (size_t k = 0; k < all.centre.size(); ++k) along += value(kept[j], k) * all.centre[k];
    if (along >= 0) continue;
    set.push_back(kept[j]);
    judged.distance.push_back(all.distance[j]);
  }
  if (set.empty()) return;
  PullIn(parts, set, judged, factor, reference, scale, pulled, verdicts);
}

}  // namespace

std::vector<float> RobustSum(const std::vector<PartInput>& parts, const RobustOptions& options,
                             std::vector<PartVerdict>* verdicts) {
  const size_t r = parts.size();
  std::vector<double> size(r, 0);
  std::vector<bool> finite(r, true);
  // Banned senders' parts are left out like non-finite ones (Note [Group
  // bans] in grpc_group.h), named kBanned.
  std::vector<bool> banned(r, false);
  size_t finite_count = 0;
  for (size_t i = 0; i < r; ++i) {
    banned[i] = options.banned.count(parts[i].from) > 0;
    if (banned[i]) {
      finite[i] = false;
      continue;
    }
    const double own = L2Norm(*parts[i].data);
    finite[i] = std::isfinite(own);
    if (!finite[i]) continue;
    ++finite_count;
    const double claimed = parts[i].claimed_norm;
    size[i] = std::isfinite(claimed) && claimed > own ? claimed : own;
  }
  std::vector<float> sum;
  if (finite_count == 0) {
    // A shared divergence (Note [Non-finite steps]): the plain sum of the
    // parts not banned (of all, if every one is).
    const bool any_allowed = std::find(banned.begin(), banned.end(), false) != banned.end();
    for (size_t i = 0; i < r; ++i) {
      if (any_allowed && banned[i]) continue;
      const std::vector<float>& p = *parts[i].data;
      if (sum.empty()) {
        sum = p;
      } else {
        for (size_t k = 0; k < sum.size(); ++k) sum[k] += p[k];
      }
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

  // Parts pulled in by centered clipping (empty: the part as sent).
  std::vector<std::vector<float>> pulled(r);
  if (options.outlier_factor > 0) {
    std::vector<size_t> kept;
    for (size_t i = 0; i < r; ++i) {
      if (finite[i] && parts[i].visits > 0) kept.push_back(i);
    }
    if (kept.size() >= 3) {
      PullInOutliers(parts, kept, options, &scale, &pulled, verdicts);
    }
  }

  // Note [Newcomer weight]: which parts count with newcomer_weight (only
  // while a trusted finite part has visits).
  std::vector<bool> newcomer(r, false);
  const double w = std::clamp(options.newcomer_weight, 0.0, 1.0);
  if (!options.newcomers.empty() && w < 1) {
    bool trusted = false;
    for (size_t i = 0; i < r; ++i) {
      newcomer[i] = finite[i] && options.newcomers.count(parts[i].from) > 0;
      trusted |= finite[i] && !newcomer[i] && parts[i].visits > 0;
    }
    if (!trusted) newcomer.assign(r, false);
  }
  std::vector<float> newcomer_sum;  // w x the newcomers' parts
  double newcomer_missing = 0;       // (1 - w) x the newcomers' visits
  int64_t kept_visits = 0, dropped_visits = 0;
  bool first = true;
  for (size_t i = 0; i < r; ++i) {
    if (newcomer[i]) {
      // Its visits' (1 - w) share is filled like a left-out part's below,
      // from the trusted parts alone; its w share is added after the fill.
      newcomer_missing += (1 - w) * static_cast<double>(std::max<int64_t>(0, parts[i].visits));
      if (w == 0) continue;
      const std::vector<float>& p = pulled[i].empty() ? *parts[i].data : pulled[i];
      const double f = w * scale[i];
      if (newcomer_sum.empty()) newcomer_sum.assign(p.size(), 0.0f);
      for (size_t k = 0; k < p.size(); ++k) newcomer_sum[k] += static_cast<float>(p[k] * f);
      continue;
    }
    if (!finite[i]) {
      dropped_visits += std::max<int64_t>(0, parts[i].visits);
      verdicts->push_back({parts[i].from,
                           banned[i] ? PartVerdict::Kind::kBanned : PartVerdict::Kind::kNonFinite,
                           std::nan(""), 0});
      continue;
    }
    kept_visits += std::max<int64_t>(0, parts[i].visits);
    const std::vector<float>& p = pulled[i].empty() ? *parts[i].data : pulled[i];
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
  const double missing = static_cast<double>(dropped_visits) + newcomer_missing;
  if (missing > 0 && kept_visits > 0) {
    // The left-out sender's visits stay in the round's total: its share
    // becomes the kept parts' mean.
    const double kept = static_cast<double>(kept_visits);
    const double up = (kept + missing) / kept;
    for (float& x : sum) x = static_cast<float>(x * up);
  }
  for (size_t k = 0; k < newcomer_sum.size(); ++k) sum[k] += newcomer_sum[k];
  return sum;
}

}  // namespace skipswarm::node
