#include "scheduler/skippipe_planner.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/random.h"
#include "scheduler/evaluator.h"
#include "scheduler/route_search.h"

namespace skipswarm::scheduler {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kEps = 1e-9;

// All mutable state of one planning call. Route of origin index i, MB j is
// routes[i * M + j]; see skippipe_planner.h for the algorithm.
class Search {
 public:
  Search(const PlanRequest& request, const Workload& rules)
      : view_(*request.view),
        request_(request),
        rules_(rules),
        rng_(common::Random(request.seed).Fork("skippipe")),
        searcher_(view_, rules),
        data_(view_.data_nodes()),
        m_(rules.mb_per_data_node),
        n_(view_.num_nodes()) {}

  absl::StatusOr<Plan> Run() {
    if (absl::Status st = Rank(); !st.ok()) return st;
    if (absl::Status st = Greedy(); !st.ok()) return st;
    Repair();
    Improve();
    return plan_;
  }

 private:
  int NumRoutes() const { return static_cast<int>(routes_.size()); }

  absl::Status Rank() {
    const int d = static_cast<int>(data_.size());
    std::vector<double> bound(d);
    for (int i = 0; i < d; ++i) {
      const int o = data_[i];
      std::optional<FoundRoute> best = searcher_.Best(o, BaseQuery());
      if (!best) {
        return absl::FailedPreconditionError(absl::StrCat(
            "data node '", view_.node(o).name, "' has no valid route of length ",
            rules_.path_length));
      }
      const int waves = (m_ + view_.memory_slots(o) - 1) / view_.memory_slots(o);
      bound[i] = std::max(waves * best->latency_s, m_ * 2.75 * view_.forward_s(o));
    }
    order_.resize(d);
    std::iota(order_.begin(), order_.end(), 0);
    std::stable_sort(order_.begin(), order_.end(),
                     [&](int a, int b) { return bound[a] > bound[b]; });
    rank_.assign(d, 0);
    for (int r = 0; r < d; ++r) rank_[order_[r]] = r;
    // An origin with little slack against the worst bound must not be
    // pushed off its fast routes: its penalties shrink with its slack.
    const double worst = bound[order_[0]];
    slack_.assign(d, 1);
    for (int i = 0; i < d; ++i) {
      slack_[i] = std::clamp((worst - bound[i]) / (0.1 * worst), 0.02, 1.0);
    }
    double mean_c = 0;
    for (int v = 0; v < n_; ++v) mean_c += view_.forward_s(v);
    unit_ = 2.5 * mean_c / n_;
    const int total = d * m_ * (rules_.path_length - 1);
    range_ = BalanceRange(view_, rules_, total);
    stage_count_.assign(view_.num_stages(), 0);
    node_work_.assign(n_, 0);
    origin_work_.assign(static_cast<size_t>(d) * n_, 0);
    waves_ = 1;
    for (int o : data_) {
      waves_ = std::max(waves_, (m_ + view_.memory_slots(o) - 1) /
                                    view_.memory_slots(o));
    }
    wave_count_.assign(static_cast<size_t>(d) * waves_ * n_, 0);
    conc_.assign(static_cast<size_t>(d) * n_, 0);
    total_conc_.assign(n_, 0);
    routes_.resize(static_cast<size_t>(d) * m_);
    return absl::OkStatus();
  }

  RouteSearcher::Query BaseQuery() const {
    RouteSearcher::Query q;
    q.max_candidates = request_.candidates_per_stage;
    q.path_length = rules_.path_length;
    q.max_swaps = rules_.max_swaps;
    return q;
  }

  // Penalties for MB `mb` (origin index i = mb / M) with `placed` MBs
  // already routed. Three terms, all scaled by the origin's slack:
  //  * kBeta x compute other origins already put on the node;
  //  * kGamma x how far the node's stage is ahead of its fair share;
  //  * kMemory x (slots the node would need beyond its memory_slots if the
  //    busiest wave of every origin using it were in flight together).
  //    Slots are what collide hardest: a forward waits for a whole
  //    backward elsewhere, not for a 0.4 s compute.
  void FillPenalty(int mb, int placed, double jitter) {
    const int i = mb / m_;
    const int wave = (mb % m_) / view_.memory_slots(data_[i]);
    penalty_.assign(n_, 0);
    const double expected = static_cast<double>(placed + 1) *
                            (rules_.path_length - 1) / (view_.num_stages() - 1);
    for (int v = 0; v < n_; ++v) {
      const int s = view_.stage(v);
      if (s == 0) continue;
      const double others = node_work_[v] - origin_work_[i * n_ + v];
      double factor = 1;
      if (jitter > 0) factor = rng_.Uniform(1 - jitter, 1 + jitter);
      const int demand = total_conc_[v] - conc_[i * n_ + v] +
                         WaveCount(i, wave, v) + 1;
      const int excess = std::max(0, demand - view_.memory_slots(v));
      penalty_[v] =
          slack_[i] * (kBeta * others * factor +
                       kGamma * unit_ *
                           std::max(0.0, stage_count_[s] + 1 - expected) +
                       kMemory * unit_ * excess);
    }
    allowed_.assign(view_.num_stages(), true);
    for (int s = 1; s < view_.num_stages(); ++s) {
      allowed_[s] = stage_count_[s] < range_.max;
    }
  }

  int& WaveCount(int i, int wave, int v) {
    return wave_count_[(static_cast<size_t>(i) * waves_ + wave) * n_ + v];
  }

  void Account(int mb, int sign) {
    const Route& r = routes_[mb];
    const int i = mb / m_;
    const int wave = (mb % m_) / view_.memory_slots(data_[i]);
    for (size_t h = 1; h + 1 < r.nodes.size(); ++h) {
      const int v = r.nodes[h];
      const double w = sign * 2.5 * view_.forward_s(v);
      node_work_[v] += w;
      origin_work_[i * n_ + v] += w;
      stage_count_[view_.stage(v)] += sign;
      WaveCount(i, wave, v) += sign;
      int conc = 0;
      for (int k = 0; k < waves_; ++k) conc = std::max(conc, WaveCount(i, k, v));
      total_conc_[v] += conc - conc_[i * n_ + v];
      conc_[i * n_ + v] = conc;
    }
  }

  void SetRoute(int mb, std::vector<int> nodes) {
    Route& r = routes_[mb];
    const int i = mb / m_;
    r.mb = mb;
    r.origin = data_[i];
    r.nodes = std::move(nodes);  // priority and release_s stay
  }

  absl::Status Greedy() {
    int placed = 0;
    for (int i : order_) {
      for (int j = 0; j < m_; ++j) {
        const int mb = i * m_ + j;
        FillPenalty(mb, placed, 0);
        RouteSearcher::Query q = BaseQuery();
        q.node_penalty = &penalty_;
        q.stage_allowed = &allowed_;
        std::optional<FoundRoute> found = searcher_.Best(data_[i], q);
        if (!found) {
          q.stage_allowed = nullptr;
          found = searcher_.Best(data_[i], q);
        }
        if (!found) {
          return absl::FailedPreconditionError(absl::StrCat(
              "no valid route for a micro-batch of '", view_.node(data_[i]).name,
              "'"));
        }
        SetRoute(mb, found->nodes);
        routes_[mb].priority = rank_[i];
        Account(mb, +1);
        ++placed;
      }
    }
    return absl::OkStatus();
  }

  bool Balanced() const {
    for (int s = 1; s < view_.num_stages(); ++s) {
      if (stage_count_[s] < range_.min || stage_count_[s] > range_.max) {
        return false;
      }
    }
    return true;
  }

  // Pull visits into stages below the balance floor, taking them from MBs of
  // the least critical origins first.
  void Repair() {
    const int s_count = view_.num_stages();
    for (int guard = 0; guard < NumRoutes() * rules_.path_length; ++guard) {
      int low = -1;
      for (int s = 1; s < s_count; ++s) {
        if (stage_count_[s] < range_.min &&
            (low < 0 || stage_count_[s] < stage_count_[low])) {
          low = s;
        }
      }
      if (low < 0) return;
      bool fixed = false;
      for (int r = static_cast<int>(order_.size()) - 1; r >= 0 && !fixed; --r) {
        const int i = order_[r];
        for (int j = m_ - 1; j >= 0 && !fixed; --j) {
          const int mb = i * m_ + j;
          const std::vector<int> old = routes_[mb].nodes;
          if (std::any_of(old.begin(), old.end(),
                          [&](int v) { return view_.stage(v) == low; })) {
            continue;
          }
          Account(mb, -1);
          FillPenalty(mb, NumRoutes() - 1, 0);
          for (int v : view_.stage_nodes(low)) penalty_[v] -= 1e6;
          for (int s = 1; s < s_count; ++s) {
            allowed_[s] = stage_count_[s] < range_.max;
          }
          RouteSearcher::Query q = BaseQuery();
          q.node_penalty = &penalty_;
          q.stage_allowed = &allowed_;
          std::optional<FoundRoute> found = searcher_.Best(data_[i], q);
          bool ok = found.has_value();
          if (ok) {
            ok = std::any_of(found->nodes.begin(), found->nodes.end(),
                             [&](int v) { return view_.stage(v) == low; });
            for (size_t h = 1; ok && h + 1 < old.size(); ++h) {
              const int s = view_.stage(old[h]);
              const bool kept = std::any_of(
                  found->nodes.begin(), found->nodes.end(),
                  [&](int v) { return view_.stage(v) == s; });
              if (!kept && stage_count_[s] < range_.min) ok = false;
            }
          }
          if (ok) SetRoute(mb, found->nodes);
          Account(mb, +1);
          fixed = ok;
        }
      }
      if (!fixed) return;  // ValidatePlan will report the imbalance
    }
  }

  // Iteration time and sum of MB finish times of the current routes.
  std::pair<double, double> Score() {
    const double t = sim_.Run(view_, plan_, &finish_);
    double sum = 0;
    for (double f : finish_) sum += f;
    ++evaluations_;
    return {t, sum};
  }

  int CriticalOrigin() const {
    int best = 0;
    double latest = -1;
    for (size_t r = 0; r < finish_.size(); ++r) {
      if (finish_[r] > latest) {
        latest = finish_[r];
        best = static_cast<int>(r) / m_;
      }
    }
    return best;
  }

  struct Snapshot {
    std::vector<Route> routes;
    std::vector<int> rank;
    std::vector<int> stage_count;
    std::vector<double> node_work;
    std::vector<double> origin_work;
    std::vector<int> wave_count;
    std::vector<int> conc;
    std::vector<int> total_conc;
  };
  Snapshot Save() const {
    return {routes_,       rank_,       stage_count_, node_work_,
            origin_work_,  wave_count_, conc_,        total_conc_};
  }
  void Restore(Snapshot& s) {
    routes_.swap(s.routes);
    rank_.swap(s.rank);
    stage_count_.swap(s.stage_count);
    node_work_.swap(s.node_work);
    origin_work_.swap(s.origin_work);
    wave_count_.swap(s.wave_count);
    conc_.swap(s.conc);
    total_conc_.swap(s.total_conc);
  }

  // Re-routes one MB with jittered penalties (and sometimes one of its
  // nodes banned). Balance may break; the caller rebalances.
  bool Reroute(int mb) {
    const int i = mb / m_;
    const std::vector<int> old_nodes = routes_[mb].nodes;
    Account(mb, -1);
    FillPenalty(mb, NumRoutes() - 1, 0.7);
    if (rng_.Bernoulli(0.4)) {
      const int h = static_cast<int>(
          rng_.UniformInt(1, static_cast<int64_t>(old_nodes.size()) - 2));
      penalty_[old_nodes[h]] = kInf;
    }
    RouteSearcher::Query q = BaseQuery();
    q.node_penalty = &penalty_;
    std::optional<FoundRoute> found = searcher_.Best(data_[i], q);
    const bool changed = found && found->nodes != old_nodes;
    if (changed) SetRoute(mb, found->nodes);
    Account(mb, +1);
    return changed;
  }

  // Restores the balance after a move by re-routing other MBs (never
  // `keep`), most slack first: over-full stages are forbidden and
  // under-full stages get a large bonus. Returns Balanced().
  bool Rebalance(int keep) {
    const int num_stages = view_.num_stages();
    for (int attempt = 0; attempt < 8 && !Balanced(); ++attempt) {
      std::vector<int> low;
      std::vector<bool> high(num_stages, false);
      for (int s = 1; s < num_stages; ++s) {
        if (stage_count_[s] < range_.min) low.push_back(s);
        if (stage_count_[s] > range_.max) high[s] = true;
      }
      // A random MB, weighted towards origins with slack, that visits an
      // over-full stage or misses an under-full one.
      int mb = -1;
      for (int tries = 0; tries < 16 && mb < 0; ++tries) {
        const int r = static_cast<int>(rng_.UniformInt(0, NumRoutes() - 1));
        if (r == keep ||
            rng_.UniformDouble() > std::max(0.25, slack_[r / m_])) {
          continue;
        }
        bool useful = false;
        for (size_t h = 1; h + 1 < routes_[r].nodes.size(); ++h) {
          useful = useful || high[view_.stage(routes_[r].nodes[h])];
        }
        for (int s : low) {
          bool visits = false;
          for (int v : routes_[r].nodes) visits = visits || view_.stage(v) == s;
          useful = useful || !visits;
        }
        if (useful) mb = r;
      }
      if (mb < 0) continue;
      const int i = mb / m_;
      Account(mb, -1);
      FillPenalty(mb, NumRoutes() - 1, 0.3);
      for (int s : low) {
        for (int v : view_.stage_nodes(s)) penalty_[v] -= 1e4 * unit_;
      }
      for (int s = 1; s < num_stages; ++s) {
        allowed_[s] = stage_count_[s] < range_.max;
      }
      RouteSearcher::Query q = BaseQuery();
      q.node_penalty = &penalty_;
      q.stage_allowed = &allowed_;
      std::optional<FoundRoute> found = searcher_.Best(data_[i], q);
      if (found) SetRoute(mb, found->nodes);
      Account(mb, +1);
    }
    return Balanced();
  }

  void SetSubPriority(int mb, int sub) {
    routes_[mb].priority = rank_[mb / m_] * 2 * m_ + sub;
  }

  void ApplyStyle(int style) {
    for (int mb = 0; mb < NumRoutes(); ++mb) {
      const int j = mb % m_;
      SetSubPriority(mb, style % 2 == 0 ? m_ + j : m_ - 1 - j);
      Route& r = routes_[mb];
      r.release_s = 0;
      const int slots = view_.memory_slots(r.origin);
      if (style >= 2 && j < slots) {
        double slowest = 0;
        for (int v : r.nodes) slowest = std::max(slowest, view_.forward_s(v));
        r.release_s = j * 2.5 * slowest;
      }
    }
  }

  void Improve() {
    // Start from the best of four per-origin disciplines: first injected
    // first or later MBs first (a freed slot is refilled before earlier
    // MBs' backwards), each with or without spacing the first wave's
    // injections by 2.5 x the slowest forward on the route - the time a
    // node needs for one MB's forward and backward - so that MBs sharing a
    // pipeline of nodes never queue behind each other's backwards.
    double best_t = kInf;
    double best_sum = kInf;
    int best_style = 0;
    for (int style = 0; style < 4; ++style) {
      ApplyStyle(style);
      const auto [t, sum] = Score();
      if (t < best_t - kEps || (t <= best_t + kEps && sum < best_sum - kEps)) {
        best_t = t;
        best_sum = sum;
        best_style = style;
      }
    }
    ApplyStyle(best_style);
    Score();
    // When the route searches are exact (every replica is a candidate) the
    // evaluator's lower bound is known; a plan that reaches it is optimal.
    double target = -kInf;
    bool exact = request_.candidates_per_stage <= 0;
    if (!exact) {
      exact = true;
      for (int st = 1; st < view_.num_stages(); ++st) {
        exact = exact && static_cast<int>(view_.stage_nodes(st).size()) <=
                             request_.candidates_per_stage;
      }
    }
    if (exact) {
      absl::StatusOr<LowerBound> lb = ComputeLowerBound(view_, rules_);
      if (lb.ok()) target = lb->seconds;
    }
    std::vector<double> best_finish = finish_;
    const bool has_deadline = request_.clock != nullptr;
    const absl::Duration deadline =
        has_deadline ? request_.clock->SteadyNow() + request_.budget
                     : absl::ZeroDuration();
    const int d = static_cast<int>(data_.size());
    int stall = 0;
    int attempts = 0;
    while (attempts < request_.max_evaluations &&
           stall < request_.stall_evaluations && best_t > target + kEps) {
      ++attempts;
      if (has_deadline && attempts % 4 == 0 &&
          request_.clock->SteadyNow() >= deadline) {
        break;
      }
      finish_ = best_finish;
      const int i = rng_.Bernoulli(0.6)
                        ? CriticalOrigin()
                        : static_cast<int>(rng_.UniformInt(0, d - 1));
      const int mb = i * m_ + static_cast<int>(rng_.UniformInt(0, m_ - 1));
      const std::vector<int> old_nodes = routes_[mb].nodes;
      const double u = rng_.UniformDouble();
      Snapshot saved = Save();
      bool changed = false;
      if (u < 0.4) {
        changed = Reroute(mb);
      } else if (u < 0.65) {  // one hop to another replica of its stage
        const int h = static_cast<int>(
            rng_.UniformInt(1, static_cast<int64_t>(old_nodes.size()) - 2));
        const std::vector<int>& replicas =
            view_.stage_nodes(view_.stage(old_nodes[h]));
        const int v = replicas[rng_.UniformInt(0, replicas.size() - 1)];
        if (v != old_nodes[h] &&
            std::isfinite(view_.hop_s(old_nodes[h - 1], v)) &&
            std::isfinite(view_.hop_s(v, old_nodes[h + 1]))) {
          Account(mb, -1);
          routes_[mb].nodes[h] = v;
          Account(mb, +1);
          changed = true;
        }
      } else if (u < 0.85) {  // copy a sibling MB's route
        const int sib = i * m_ + static_cast<int>(rng_.UniformInt(0, m_ - 1));
        if (routes_[sib].nodes != old_nodes) {
          Account(mb, -1);
          routes_[mb].nodes = routes_[sib].nodes;
          Account(mb, +1);
          changed = true;
        }
      } else if (u < 0.9) {  // reorder MBs within their origin
        SetSubPriority(mb, static_cast<int>(rng_.UniformInt(0, 2 * m_ - 1)));
        changed = routes_[mb].priority != saved.routes[mb].priority;
      } else if (u < 0.95) {  // hold an injection back, or release it
        double& release = routes_[mb].release_s;
        release = rng_.Bernoulli(0.3)
                      ? 0.0
                      : std::max(0.0, release + rng_.Uniform(-1, 1) * unit_);
        changed = release != saved.routes[mb].release_s;
      } else if (d > 1) {  // exchange two origins' ranks
        const int other = static_cast<int>(rng_.UniformInt(0, d - 1));
        if (other != i) {
          SwapRanks(i, other);
          changed = true;
        }
      }
      if (changed && !Balanced()) changed = Rebalance(mb);
      if (!changed) {
        Restore(saved);
        ++stall;
        continue;
      }
      auto [t, sum] = Score();
      if (t < best_t - kEps || (t <= best_t + kEps && sum < best_sum - kEps)) {
        stall = (t < best_t - kEps || sum < best_sum - 1e-6) ? 0 : stall + 1;
        best_t = t;
        best_sum = sum;
        best_finish = finish_;
        continue;
      }
      ++stall;
      Restore(saved);
    }
    finish_ = best_finish;
  }

  void SwapRanks(int a, int b) {
    std::swap(rank_[a], rank_[b]);
    for (int j = 0; j < m_; ++j) {
      const int sub_a = routes_[a * m_ + j].priority % (2 * m_);
      const int sub_b = routes_[b * m_ + j].priority % (2 * m_);
      SetSubPriority(a * m_ + j, sub_a);
      SetSubPriority(b * m_ + j, sub_b);
    }
  }

  // Weights tuned on the reference file and on synthetic 100 x 8 and
  // 1000 x 16 swarms (greedy alone: 1.00, 1.32 and 1.66 x lower bound).
  static constexpr double kBeta = 0.1;
  static constexpr double kGamma = 0.5;
  static constexpr double kMemory = 2.0;

  const TopologyView& view_;
  const PlanRequest& request_;
  const Workload rules_;
  common::Random rng_;
  RouteSearcher searcher_;
  const std::vector<int> data_;
  const int m_;
  const int n_;
  std::vector<int> order_;  // origin indices, most critical first
  std::vector<int> rank_;   // origin index -> priority
  std::vector<double> slack_;  // origin index -> penalty scale in (0, 1]
  double unit_ = 1;
  VisitRange range_;
  std::vector<int> stage_count_;
  std::vector<double> node_work_;
  std::vector<double> origin_work_;
  int waves_ = 1;
  std::vector<int> wave_count_;  // [origin][wave][node] MBs through node
  std::vector<int> conc_;        // [origin][node] max over waves
  std::vector<int> total_conc_;  // [node] sum over origins of conc_
  Plan plan_;
  std::vector<Route>& routes_ = plan_.routes;
  IterationSimulator sim_;
  std::vector<double> penalty_;
  std::vector<bool> allowed_;
  std::vector<double> finish_;
  int evaluations_ = 0;
};

class SkipPipePlanner : public Planner {
 public:
  explicit SkipPipePlanner(bool full_routes) : full_(full_routes) {}
  std::string name() const override { return full_ ? "noskip" : "skippipe"; }
  int PathLength(const PlanRequest& request) const override {
    return full_ ? request.view->num_stages() : request.workload.path_length;
  }
  int MaxSwaps(const PlanRequest& request) const override {
    return full_ ? 0 : request.workload.max_swaps;
  }
  absl::StatusOr<Plan> MakePlan(const PlanRequest& request) override {
    if (request.view == nullptr) {
      return absl::InvalidArgumentError("PlanRequest.view is null");
    }
    const Workload rules = RulesFor(*this, request);
    if (absl::Status st = ValidateWorkload(*request.view, rules); !st.ok()) {
      return st;
    }
    Search search(request, rules);
    absl::StatusOr<Plan> plan = search.Run();
    if (!plan.ok()) return plan.status();
    plan->planner = name();
    if (absl::Status st =
            ValidatePlan(*request.view, rules, *plan, rules.path_length);
        !st.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name(), " could not meet the rules: ", st.message()));
    }
    return plan;
  }

 private:
  const bool full_;
};

}  // namespace

std::unique_ptr<Planner> NewSkipPipePlanner(bool full_routes) {
  return std::make_unique<SkipPipePlanner>(full_routes);
}

}  // namespace skipswarm::scheduler
