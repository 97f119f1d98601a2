#include "sim/churn.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace skipswarm::sim {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

absl::StatusOr<double> Num(const json& e, const std::string& key,
                           const std::string& where, bool required,
                           double fallback) {
  auto it = e.find(key);
  if (it == e.end() || it->is_null()) {
    if (required) return Bad(absl::StrCat(where, ".", key), "missing");
    return fallback;
  }
  if (!it->is_number()) return Bad(absl::StrCat(where, ".", key), "not a number");
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < 0) {
    return Bad(absl::StrCat(where, ".", key), "must be finite and >= 0");
  }
  return v;
}

absl::StatusOr<std::vector<std::string>> Strings(const json& e,
                                                 const std::string& key,
                                                 const std::string& where) {
  std::vector<std::string> out;
  auto it = e.find(key);
  if (it == e.end()) return out;
  if (it->is_string()) return std::vector<std::string>{it->get<std::string>()};
  if (!it->is_array()) return Bad(absl::StrCat(where, ".", key), "not a list");
  for (const json& s : *it) {
    if (!s.is_string()) {
      return Bad(absl::StrCat(where, ".", key), "must hold strings");
    }
    out.push_back(s.get<std::string>());
  }
  return out;
}

// "non_data" (default) -> {}, "all" -> 0..S-1, [1, 2] -> as given.
absl::StatusOr<std::vector<int>> Stages(const json& e, const std::string& where,
                                        int num_stages) {
  std::vector<int> out;
  auto it = e.find("stages");
  if (it == e.end() || (it->is_string() && *it == "non_data")) return out;
  if (it->is_string() && *it == "all") {
    for (int s = 0; s < num_stages; ++s) out.push_back(s);
    return out;
  }
  if (!it->is_array()) {
    return Bad(where + ".stages", "must be \"non_data\", \"all\" or a list");
  }
  for (const json& s : *it) {
    if (!s.is_number_integer() || s.get<int>() < 0 ||
        s.get<int>() >= num_stages) {
      return Bad(where + ".stages", "stage out of range");
    }
    out.push_back(s.get<int>());
  }
  return out;
}

bool Eligible(const NodeBrief& n, const std::vector<int>& stages) {
  if (stages.empty()) return n.stage != 0;
  return std::find(stages.begin(), stages.end(), n.stage) != stages.end();
}

// Event times in [from, to]: `count` sorted uniforms (a Poisson process
// conditioned on its count) or exponential gaps at `rate`.
std::vector<double> PoissonTimes(double from, double to, int count,
                                 double rate, common::Random& rng) {
  std::vector<double> times;
  if (count >= 0) {
    for (int i = 0; i < count; ++i) times.push_back(rng.Uniform(from, to));
    std::sort(times.begin(), times.end());
    return times;
  }
  if (rate <= 0) return times;
  for (double t = from + rng.Exponential(1 / rate); t <= to;
       t += rng.Exponential(1 / rate)) {
    times.push_back(t);
    if (times.size() > 1000000) break;  // absurd rates: stay bounded
  }
  return times;
}

absl::Status ExpandEntry(const json& e, const std::string& where,
                         const std::vector<NodeBrief>& nodes,
                         const std::vector<std::string>& regions,
                         int num_stages, common::Random& rng,
                         std::vector<ChurnEvent>& out,
                         std::vector<JoinerSpec>& joiners) {
  if (!e.is_object() || !e.contains("type") || !e["type"].is_string()) {
    return Bad(where, "must be an object with a string \"type\"");
  }
  const std::string type = e["type"];
  auto node_known = [&](const std::string& name) {
    for (const NodeBrief& n : nodes) {
      if (n.name == name) return true;
    }
    for (const JoinerSpec& j : joiners) {
      if (j.name == name) return true;
    }
    return false;
  };
  auto region_known = [&](const std::string& r) {
    return std::find(regions.begin(), regions.end(), r) != regions.end();
  };
  ChurnEvent ev;
  ev.cause = type;
  if (type == "kill") {
    SS_ASSIGN_OR_RETURN(ev.at_s, Num(e, "at_s", where, true, 0));
    SS_ASSIGN_OR_RETURN(ev.nodes, Strings(e, "node", where));
    if (ev.nodes.size() != 1 || !node_known(ev.nodes[0])) {
      return Bad(where + ".node", "missing or not a node of the scenario");
    }
    out.push_back(ev);
  } else if (type == "join" || type == "poisson_arrivals") {
    SS_ASSIGN_OR_RETURN(std::vector<std::string> rs,
                        Strings(e, type == "join" ? "region" : "regions", where));
    if (type == "join" && rs.size() != 1) {
      return Bad(where + ".region", "missing");
    }
    if (rs.empty()) rs = regions;
    for (const std::string& r : rs) {
      if (!region_known(r)) return Bad(where, absl::StrCat("unknown region ", r));
    }
    JoinerSpec spec;
    if (e.contains("stage") && !(e["stage"].is_string() && e["stage"] == "auto")) {
      if (!e["stage"].is_number_integer() || e["stage"].get<int>() < 0 ||
          e["stage"].get<int>() >= num_stages) {
        return Bad(where + ".stage", "must be \"auto\" or a stage number");
      }
      spec.stage = e["stage"].get<int>();
    }
    SS_ASSIGN_OR_RETURN(double slots, Num(e, "memory_slots", where, false, 0));
    spec.memory_slots = static_cast<int>(slots);
    SS_ASSIGN_OR_RETURN(spec.speed_factor,
                        Num(e, "speed_factor", where, false, 1));
    if (spec.speed_factor <= 0) return Bad(where + ".speed_factor", "must be > 0");
    std::vector<double> times;
    if (type == "join") {
      SS_ASSIGN_OR_RETURN(double at, Num(e, "at_s", where, true, 0));
      SS_ASSIGN_OR_RETURN(double count, Num(e, "count", where, false, 1));
      if (count != std::floor(count) || count > static_cast<double>(kMaxJoiners)) {
        return Bad(where + ".count", absl::StrCat("must be a whole number in 0..", kMaxJoiners));
      }
      times.assign(static_cast<size_t>(count), at);
    } else {
      SS_ASSIGN_OR_RETURN(double rate, Num(e, "rate_per_s", where, true, 0));
      SS_ASSIGN_OR_RETURN(double from, Num(e, "from_s", where, false, 0));
      SS_ASSIGN_OR_RETURN(double to, Num(e, "to_s", where, true, 0));
      times = PoissonTimes(from, to, -1, rate, rng);
    }
    if (joiners.size() + times.size() > kMaxJoiners) {
      return Bad(where, absl::StrCat("adds ", times.size(), " nodes after ", joiners.size(),
                                     "; a trace may add at most ", kMaxJoiners));
    }
    for (double t : times) {
      JoinerSpec j = spec;
      j.region = rs[rng.UniformInt(0, static_cast<int64_t>(rs.size()) - 1)];
      j.name = absl::StrCat("join-", joiners.size());
      joiners.push_back(j);
      ChurnEvent je;
      je.at_s = t;
      je.kind = ChurnKind::kJoin;
      je.nodes = {j.name};
      je.cause = type;
      out.push_back(je);
    }
  } else if (type == "poisson_failures" || type == "correlated_failures") {
    SS_ASSIGN_OR_RETURN(std::vector<int> stages, Stages(e, where, num_stages));
    SS_ASSIGN_OR_RETURN(double from, Num(e, "from_s", where, false, 0));
    SS_ASSIGN_OR_RETURN(double to, Num(e, "to_s", where, true, 0));
    if (to < from) return Bad(where + ".to_s", "must be >= from_s");
    int eligible = 0;
    for (const NodeBrief& n : nodes) eligible += Eligible(n, stages);
    int count = -1;
    double rate = 0;
    if (e.contains("fraction")) {
      SS_ASSIGN_OR_RETURN(double f, Num(e, "fraction", where, true, 0));
      if (f > 1) return Bad(where + ".fraction", "must be in [0, 1]");
      count = static_cast<int>(std::lround(f * eligible));
    } else if (type == "poisson_failures") {
      SS_ASSIGN_OR_RETURN(rate, Num(e, "rate_per_s", where, true, 0));
    } else {
      return Bad(where + ".fraction", "missing");
    }
    if (type == "poisson_failures") {
      for (double t : PoissonTimes(from, to, count, rate, rng)) {
        ChurnEvent k;
        k.at_s = t;
        k.kind = ChurnKind::kKillRandom;
        k.stages = stages;
        k.cause = type;
        out.push_back(k);
      }
      return absl::OkStatus();
    }
    // Correlated: whole regions, in a seeded order, until `count` nodes.
    std::vector<std::string> order = regions;
    rng.Shuffle(order);
    int left = count;
    for (const std::string& r : order) {
      if (left <= 0) break;
      ChurnEvent k;
      k.at_s = rng.Uniform(from, to);
      k.kind = ChurnKind::kKill;
      k.cause = absl::StrCat("correlated_failures:", r);
      for (const NodeBrief& n : nodes) {
        if (left > 0 && n.region == r && Eligible(n, stages)) {
          k.nodes.push_back(n.name);
          --left;
        }
      }
      if (!k.nodes.empty()) out.push_back(k);
    }
  } else if (type == "region_outage" || type == "partition") {
    SS_ASSIGN_OR_RETURN(std::vector<std::string> rs, Strings(e, "regions", where));
    if (rs.empty()) return Bad(where + ".regions", "missing or empty");
    for (const std::string& r : rs) {
      if (!region_known(r)) return Bad(where, absl::StrCat("unknown region ", r));
    }
    SS_ASSIGN_OR_RETURN(double at, Num(e, "at_s", where, true, 0));
    const double inf = std::numeric_limits<double>::infinity();
    SS_ASSIGN_OR_RETURN(double dur, Num(e, "duration_s", where, false, inf));
    ChurnEvent a, b;
    a.at_s = at;
    b.at_s = at + dur;
    a.cause = b.cause = absl::StrCat(type, ":", rs[0]);
    if (type == "partition") {
      a.kind = ChurnKind::kPartitionStart;
      b.kind = ChurnKind::kPartitionEnd;
      a.regions = b.regions = rs;
    } else {
      a.kind = ChurnKind::kKill;
      b.kind = ChurnKind::kRevive;
      for (const NodeBrief& n : nodes) {
        if (std::find(rs.begin(), rs.end(), n.region) != rs.end()) {
          a.nodes.push_back(n.name);
        }
      }
      b.nodes = a.nodes;
    }
    out.push_back(a);
    if (std::isfinite(dur)) out.push_back(b);
  } else if (type == "straggler") {
    ChurnEvent a;
    a.kind = ChurnKind::kSlowStart;
    a.cause = type;
    SS_ASSIGN_OR_RETURN(a.at_s, Num(e, "at_s", where, true, 0));
    SS_ASSIGN_OR_RETURN(a.duration_s, Num(e, "duration_s", where, true, 0));
    SS_ASSIGN_OR_RETURN(a.factor, Num(e, "factor", where, true, 0));
    if (a.factor < 1) return Bad(where + ".factor", "must be >= 1");
    SS_ASSIGN_OR_RETURN(a.nodes, Strings(e, "node", where));
    for (const std::string& n : a.nodes) {
      if (!node_known(n)) return Bad(where + ".node", "not a node of the scenario");
    }
    SS_ASSIGN_OR_RETURN(double count, Num(e, "count", where, false, 1));
    a.count = static_cast<int>(count);
    out.push_back(a);
    if (!a.nodes.empty()) {
      ChurnEvent b = a;
      b.kind = ChurnKind::kSlowEnd;
      b.at_s = a.at_s + a.duration_s;
      out.push_back(b);
    }
  } else {
    return Bad(where + ".type", absl::StrCat("unknown churn type \"", type, "\""));
  }
  return absl::OkStatus();
}

}  // namespace

const char* ChurnKindName(ChurnKind kind) {
  switch (kind) {
    case ChurnKind::kKill: return "kill";
    case ChurnKind::kKillRandom: return "kill_random";
    case ChurnKind::kJoin: return "join";
    case ChurnKind::kRevive: return "revive";
    case ChurnKind::kSlowStart: return "slow_start";
    case ChurnKind::kSlowEnd: return "slow_end";
    case ChurnKind::kPartitionStart: return "partition_start";
    case ChurnKind::kPartitionEnd: return "partition_end";
  }
  return "?";
}

absl::Status ExpandChurn(const json& churn, const std::vector<NodeBrief>& nodes,
                         const std::vector<std::string>& regions,
                         int num_stages, common::Random& rng,
                         ChurnTrace* trace, std::vector<JoinerSpec>* joiners) {
  if (churn.is_null()) return absl::OkStatus();
  if (!churn.is_array()) return Bad("churn", "must be a list");
  std::vector<ChurnEvent> events;
  for (size_t i = 0; i < churn.size(); ++i) {
    // Each entry draws from its own stream, so editing one entry does not
    // move the others' random times.
    common::Random entry_rng = rng.Fork(i);
    SS_RETURN_IF_ERROR(ExpandEntry(churn[i], absl::StrCat("churn[", i, "]"),
                                   nodes, regions, num_stages, entry_rng,
                                   events, *joiners));
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const ChurnEvent& a, const ChurnEvent& b) {
                     return a.at_s < b.at_s;
                   });
  trace->events = std::move(events);
  return absl::OkStatus();
}

}  // namespace skipswarm::sim
