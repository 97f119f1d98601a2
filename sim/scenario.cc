#include "sim/scenario.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/bounded_file.h"
#include "common/status_macros.h"
#include "scheduler/planner.h"

namespace skipswarm::sim {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// Scenarios and their tables: bounded regular files (common/bounded_file.h).
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text = common::ReadBoundedFile(path, "scenario file");
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  return text;
}

std::string Resolve(const std::string& base_dir, const std::string& name) {
  if (name.empty() || name[0] == '/' || base_dir.empty()) return name;
  return absl::StrCat(base_dir, "/", name);
}

absl::StatusOr<double> Num(const json& obj, const std::string& key,
                           const std::string& where, double fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_number() || !std::isfinite(it->get<double>()) ||
      it->get<double>() < 0) {
    return Bad(absl::StrCat(where, ".", key), "must be a number >= 0");
  }
  return it->get<double>();
}

// Reads a CSV with a header line into rows of cells; `columns` cells each.
absl::StatusOr<std::vector<std::vector<std::string>>> ReadCsv(
    const std::string& path, size_t columns) {
  SS_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::vector<std::vector<std::string>> rows;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line_no == 1) continue;
    std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (cells.size() != columns) {
      return Bad(absl::StrCat(path, ":", line_no),
                 absl::StrCat("expected ", columns, " columns"));
    }
    rows.push_back(std::move(cells));
  }
  return rows;
}

absl::StatusOr<double> Cell(const std::string& cell, const std::string& where) {
  double v = 0;
  if (!absl::SimpleAtod(cell, &v) || !std::isfinite(v) || v < 0) {
    return Bad(where, absl::StrCat("bad number '", cell, "'"));
  }
  return v;
}

// Expands links_csv / compute_csv / intra_region / groups of a topology in
// scheduler/'s format into its plain "region_links" and "nodes".
absl::Status ExpandGenerators(json& topo, const std::string& base_dir,
                              std::map<std::string, double>& region_speed) {
  if (auto it = topo.find("links_csv"); it != topo.end()) {
    const std::string path = Resolve(base_dir, it->get<std::string>());
    SS_ASSIGN_OR_RETURN(auto rows, ReadCsv(path, 4));
    json& links = topo["region_links"];
    if (!links.is_array()) links = json::array();
    std::set<std::string> regions;
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::string where = absl::StrCat(path, " row ", i + 1);
      SS_ASSIGN_OR_RETURN(double ms, Cell(rows[i][2], where));
      SS_ASSIGN_OR_RETURN(double gib, Cell(rows[i][3], where));
      links.push_back({{"a", rows[i][0]}, {"b", rows[i][1]},
                       {"latency_ms", ms}, {"bandwidth_gib_s", gib}});
      regions.insert(rows[i][0]);
      regions.insert(rows[i][1]);
    }
    json intra = topo.value("intra_region", json::object());
    SS_ASSIGN_OR_RETURN(double ms, Num(intra, "latency_ms", "intra_region", 1));
    SS_ASSIGN_OR_RETURN(double gib,
                        Num(intra, "bandwidth_gib_s", "intra_region", 1));
    for (const std::string& r : regions) {
      links.push_back({{"a", r}, {"b", r}, {"latency_ms", ms},
                       {"bandwidth_gib_s", gib}});
    }
  }
  if (auto it = topo.find("compute_csv"); it != topo.end()) {
    const std::string path = Resolve(base_dir, it->get<std::string>());
    SS_ASSIGN_OR_RETURN(auto rows, ReadCsv(path, 2));
    for (size_t i = 0; i < rows.size(); ++i) {
      SS_ASSIGN_OR_RETURN(region_speed[rows[i][0]],
                          Cell(rows[i][1], absl::StrCat(path, " row ", i + 1)));
    }
  }
  auto groups = topo.find("groups");
  if (groups == topo.end()) return absl::OkStatus();
  if (!groups->is_array()) return Bad("topology.groups", "must be a list");
  json& nodes = topo["nodes"];
  if (!nodes.is_array()) nodes = json::array();
  common::Random rng(static_cast<uint64_t>(topo.value("topology_seed", 1)));
  for (size_t g = 0; g < groups->size(); ++g) {
    const json& grp = (*groups)[g];
    const std::string where = absl::StrCat("topology.groups[", g, "]");
    if (!grp.is_object()) return Bad(where, "must be an object");
    std::vector<std::string> regions;
    if (grp.contains("regions") && grp["regions"].is_array()) {
      for (const json& r : grp["regions"]) regions.push_back(r.get<std::string>());
    } else if (grp.contains("regions") && grp["regions"] == "all") {
      for (const auto& [r, s] : region_speed) regions.push_back(r);
    } else {
      return Bad(where + ".regions", "must be a list of regions or \"all\"");
    }
    std::vector<int> stages;
    if (!grp.contains("stages") || !grp["stages"].is_array()) {
      return Bad(where + ".stages", "must be a list of stage numbers");
    }
    for (const json& s : grp["stages"]) stages.push_back(s.get<int>());
    SS_ASSIGN_OR_RETURN(double count, Num(grp, "count", where, 1));
    SS_ASSIGN_OR_RETURN(double slots, Num(grp, "memory_slots", where, 3));
    // Casts of numbers past int's range are undefined, and each counted
    // node is built here: bound them first.
    if (count != std::floor(count) || count > 10000) {
      return Bad(where + ".count", "must be a whole number in 0..10000");
    }
    if (slots < 1 || slots > 1e6) return Bad(where + ".memory_slots", "must be in 1..1000000");
    SS_ASSIGN_OR_RETURN(double factor, Num(grp, "speed_factor", where, 1));
    SS_ASSIGN_OR_RETURN(double spread, Num(grp, "speed_spread", where, 0));
    SS_ASSIGN_OR_RETURN(double fallback,
                        Num(grp, "sec_per_layer_sample", where, 0));
    // Home uplinks (averaging cost, scheduler/averaging_cost.h): one value,
    // or [low, high] spread evenly over the group's nodes of each stage.
    double up_low = 0, up_high = 0;
    if (auto up = grp.find("uplink_mbit"); up != grp.end()) {
      if (up->is_number() && up->get<double>() > 0) {
        up_low = up_high = up->get<double>();
      } else if (up->is_array() && up->size() == 2 && (*up)[0].is_number() &&
                 (*up)[1].is_number() && (*up)[0].get<double>() > 0 &&
                 (*up)[1].get<double>() >= (*up)[0].get<double>()) {
        up_low = (*up)[0].get<double>();
        up_high = (*up)[1].get<double>();
      } else {
        return Bad(where + ".uplink_mbit", "must be a number > 0 or [low, high]");
      }
    }
    for (const std::string& r : regions) {
      double t = fallback;
      if (t == 0) {
        auto sp = region_speed.find(r);
        if (sp == region_speed.end()) {
          return Bad(where, absl::StrCat("no compute speed for region ", r,
                                         " (compute_csv or "
                                         "sec_per_layer_sample)"));
        }
        t = sp->second;
      }
      std::string lower = absl::AsciiStrToLower(r);
      for (int s : stages) {
        for (int i = 0; i < static_cast<int>(count); ++i) {
          double jitter = spread > 0 ? rng.Uniform(1 - spread, 1 + spread) : 1;
          nodes.push_back({{"name", absl::StrCat(lower, "-s", s, "-", i)},
                           {"stage", s},
                           {"region", r},
                           {"sec_per_layer_sample", t * factor * jitter},
                           {"memory_slots", static_cast<int>(slots)}});
          if (up_low > 0) {
            // Spread over the group's nodes of this stage, all regions.
            const double of = regions.size() * count - 1;
            const double at = &r - regions.data() + 0.0;
            const double f = of > 0 ? (at * count + i) / of : 0.0;
            nodes.back()["uplink_mbit"] = up_low + f * (up_high - up_low);
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

// The "hybrid" object (SimScenario::hybrid); defaults as in HybridInputs.
absl::StatusOr<scheduler::HybridInputs> ParseHybrid(const json& obj) {
  if (!obj.is_object()) return Bad("hybrid", "must be an object");
  static const std::set<std::string> kKeys = {
      "params",      "tokens_per_sample", "activation_gib", "bytes_per_mb",
      "memory_gib",  "uplink_mbit",       "sdp_stages",     "outer_every",
      "avg_codec",   "half_one_stage",    "one_stage_nodes"};
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (kKeys.count(it.key()) == 0) return Bad("hybrid." + it.key(), "unknown key");
  }
  scheduler::HybridInputs in;
  SS_ASSIGN_OR_RETURN(in.params, Num(obj, "params", "hybrid", in.params));
  if (!(in.params > 0)) return Bad("hybrid.params", "must be > 0");
  SS_ASSIGN_OR_RETURN(double tokens, Num(obj, "tokens_per_sample", "hybrid", in.tokens_per_sample));
  if (tokens < 1 || tokens > 1e7) return Bad("hybrid.tokens_per_sample", "must be in 1..1e7");
  in.tokens_per_sample = static_cast<int>(tokens);
  SS_ASSIGN_OR_RETURN(in.activation_gib, Num(obj, "activation_gib", "hybrid", in.activation_gib));
  SS_ASSIGN_OR_RETURN(in.bytes_per_mb, Num(obj, "bytes_per_mb", "hybrid", 0));
  SS_ASSIGN_OR_RETURN(in.memory_gib, Num(obj, "memory_gib", "hybrid", 0));
  SS_ASSIGN_OR_RETURN(double mbit, Num(obj, "uplink_mbit", "hybrid", 0));
  in.uplink_bytes_per_s = mbit * 1e6 / 8;
  SS_ASSIGN_OR_RETURN(double stages, Num(obj, "sdp_stages", "hybrid", 0));
  if (stages > 1e4) return Bad("hybrid.sdp_stages", "too large");
  in.sdp_stages = static_cast<int>(stages);
  SS_ASSIGN_OR_RETURN(double h, Num(obj, "outer_every", "hybrid", 1));
  if (h < 1 || h > 1e6) return Bad("hybrid.outer_every", "must be in 1..1000000");
  in.averaging.outer_every = static_cast<int64_t>(h);
  if (auto c = obj.find("avg_codec"); c != obj.end()) {
    if (!c->is_string()) return Bad("hybrid.avg_codec", "must be a string");
    absl::StatusOr<model::AvgCodecSpec> codec = model::ParseAvgCodec(c->get<std::string>());
    if (!codec.ok()) return Bad("hybrid.avg_codec", std::string(codec.status().message()));
    in.averaging.codec = *codec;
  }
  if (auto b = obj.find("half_one_stage"); b != obj.end()) {
    if (!b->is_boolean()) return Bad("hybrid.half_one_stage", "must be true or false");
    in.half_one_stage = b->get<bool>();
  }
  if (auto list = obj.find("one_stage_nodes"); list != obj.end()) {
    if (!list->is_array()) return Bad("hybrid.one_stage_nodes", "must be a list of node names");
    for (const json& name : *list) {
      if (!name.is_string()) return Bad("hybrid.one_stage_nodes", "must be a list of node names");
      in.one_stage_nodes.push_back(name.get<std::string>());
    }
  }
  return in;
}

absl::Status ApplyWorkloadOverrides(const json& root,
                                    scheduler::Workload& w) {
  auto it = root.find("workload");
  if (it == root.end()) return absl::OkStatus();
  const json& o = *it;
  SS_ASSIGN_OR_RETURN(double m, Num(o, "mb_per_data_node", "workload",
                                    w.mb_per_data_node));
  SS_ASSIGN_OR_RETURN(double p, Num(o, "path_length", "workload", w.path_length));
  SS_ASSIGN_OR_RETURN(double s, Num(o, "max_swaps", "workload", w.max_swaps));
  SS_ASSIGN_OR_RETURN(double j, Num(o, "max_jump", "workload", w.max_jump));
  SS_ASSIGN_OR_RETURN(w.balance_tolerance, Num(o, "balance_tolerance",
                                               "workload", w.balance_tolerance));
  // Casts of numbers past int's range are undefined: bound them first.
  for (const auto& [key, v] : {std::pair<const char*, double>{"mb_per_data_node", m},
                               {"path_length", p}, {"max_swaps", s}, {"max_jump", j}}) {
    if (v > 1e6) return Bad(absl::StrCat("workload.", key), "must be <= 1000000");
  }
  w.mb_per_data_node = static_cast<int>(m);
  w.path_length = static_cast<int>(p);
  w.max_swaps = static_cast<int>(s);
  w.max_jump = static_cast<int>(j);
  return absl::OkStatus();
}

int Median(std::vector<int> v) {
  if (v.empty()) return 1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

static absl::StatusOr<SimScenario> ParseUnsafe(absl::string_view json_text,
                                        const std::string& base_dir,
                                        uint64_t seed) {
  json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return Bad("scenario", "not a JSON object");
  }
  SimScenario sc;
  sc.seed = seed;
  sc.name = root.value("name", std::string("scenario"));
  SS_ASSIGN_OR_RETURN(double iters, Num(root, "iterations", "scenario", 10));
  if (iters < 1 || iters > 1e7) return Bad("scenario.iterations", "must be in 1..10000000");
  sc.iterations = static_cast<int>(iters);
  sc.planner = root.value("planner", std::string("skippipe"));
  if (auto av = root.find("averaging"); av != root.end()) {
    if (!av->is_object()) return Bad("averaging", "must be an object");
    SimScenario::Averaging a;
    SS_ASSIGN_OR_RETURN(a.model_params, Num(*av, "model_params", "averaging", 0));
    if (!(a.model_params > 0)) return Bad("averaging.model_params", "must be > 0");
    auto list = av->find("compare");
    if (list == av->end() || !list->is_array() || list->empty()) {
      return Bad("averaging.compare", "must be a non-empty list");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const json& e = (*list)[i];
      const std::string where = absl::StrCat("averaging.compare[", i, "]");
      if (!e.is_object()) return Bad(where, "must be an object");
      model::AveragingOptions o;
      SS_ASSIGN_OR_RETURN(double h, Num(e, "outer_every", where, 1));
      if (h < 1 || h > 1e6) return Bad(where + ".outer_every", "must be in 1..1000000");
      o.outer_every = static_cast<int64_t>(h);
      absl::StatusOr<model::AvgCodecSpec> codec =
          model::ParseAvgCodec(e.value("avg_codec", std::string("fp32")));
      if (!codec.ok()) return Bad(where + ".avg_codec", std::string(codec.status().message()));
      o.codec = *codec;
      o.overlap = e.value("outer_overlap", false);
      if (o.overlap && o.outer_every < 2) {
        return Bad(where + ".outer_overlap", "needs outer_every > 1");
      }
      a.compare.push_back(o);
    }
    sc.averaging = a;
  }
  if (auto hy = root.find("hybrid"); hy != root.end()) {
    SS_ASSIGN_OR_RETURN(sc.hybrid, ParseHybrid(*hy));
  }
  sc.replay_key = root.value("replay_key", std::string());
  SS_ASSIGN_OR_RETURN(sc.state_transfer_s,
                      Num(root, "state_transfer_s", "scenario", 10));
  SS_ASSIGN_OR_RETURN(sc.reroute_compute_s,
                      Num(root, "reroute_compute_s", "scenario", 0.001));
  sc.protect_last_replica = root.value("protect_last_replica", true);
  json det = root.value("detector", json::object());
  DetectorParams& d = sc.detector;
  for (auto [key, field] : std::vector<std::pair<const char*, double*>>{
           {"probe_interval_s", &d.probe_interval_s},
           {"suspicion_timeout_s", &d.suspicion_timeout_s},
           {"gossip_interval_s", &d.gossip_interval_s},
           {"gossip_fanout", &d.gossip_fanout},
           {"stream_timeout_s", &d.stream_timeout_s}}) {
    SS_ASSIGN_OR_RETURN(*field, Num(det, key, "detector", *field));
  }
  if (d.probe_interval_s <= 0 || d.gossip_interval_s <= 0 ||
      d.gossip_fanout < 1) {
    return Bad("detector", "intervals must be > 0 and gossip_fanout >= 1");
  }

  // The topology: a file (either format) or an inline object.
  json topo;
  std::string topo_text;
  std::string topo_dir = base_dir;
  if (auto it = root.find("topology_file"); it != root.end()) {
    const std::string path = Resolve(base_dir, it->get<std::string>());
    SS_ASSIGN_OR_RETURN(topo_text, ReadFile(path));
    topo = json::parse(topo_text, nullptr, false);
    if (topo.is_discarded()) return Bad(path, "not valid JSON");
    // Another simulation scenario: borrow its topology.
    if (topo.is_object() && topo.contains("topology")) {
      json inner = topo["topology"];
      topo = std::move(inner);
    }
    size_t slash = path.rfind('/');
    topo_dir = slash == std::string::npos ? "" : path.substr(0, slash);
  } else if (auto it = root.find("topology"); it != root.end()) {
    topo = *it;
  } else {
    return Bad("scenario", "needs \"topology\" or \"topology_file\"");
  }
  if (!topo.is_object()) return Bad("topology", "must be an object");
  const bool skippipe_format = topo.contains("delays");
  scheduler::SkipPipeOptions spo;
  if (auto it = root.find("skippipe"); it != root.end()) {
    SS_ASSIGN_OR_RETURN(spo.forward_s,
                        Num(*it, "forward_s", "skippipe", spo.forward_s));
    SS_ASSIGN_OR_RETURN(double p,
                        Num(*it, "path_length", "skippipe", spo.path_length));
    SS_ASSIGN_OR_RETURN(double m, Num(*it, "mb_per_data_node", "skippipe",
                                      spo.mb_per_data_node));
    if (p > 1e6 || m > 1e6) return Bad("skippipe", "path_length and mb_per_data_node must be <= 1000000");
    spo.path_length = static_cast<int>(p);
    spo.mb_per_data_node = static_cast<int>(m);
  }

  std::map<std::string, double> region_speed;
  std::vector<JoinerSpec> joiners;
  const json churn = root.value("churn", json());
  common::Random rng = common::Random(seed).Fork("churn");
  if (skippipe_format) {
    SS_ASSIGN_OR_RETURN(sc.universe,
                        scheduler::ParseScenario(topo.dump(), spo));
    std::vector<NodeBrief> briefs;
    std::set<std::string> regions;
    for (int v = 0; v < sc.universe.view.num_nodes(); ++v) {
      const auto& n = sc.universe.view.node(v);
      briefs.push_back({n.name, n.region, n.stage});
      regions.insert(n.region);
    }
    SS_RETURN_IF_ERROR(ExpandChurn(
        churn, briefs, {regions.begin(), regions.end()},
        sc.universe.view.num_stages(), rng, &sc.churn, &joiners));
    if (!joiners.empty()) {
      return Bad("churn", "joins need a topology with region links "
                          "(SkipPipe's file has per-node delays only)");
    }
  } else {
    SS_RETURN_IF_ERROR(ExpandGenerators(topo, topo_dir, region_speed));
    if (!topo.contains("nodes") || !topo["nodes"].is_array()) {
      return Bad("topology.nodes", "missing (give nodes or groups)");
    }
    std::vector<NodeBrief> briefs;
    std::set<std::string> regions;
    std::vector<int> slots;
    std::map<std::string, double> seen_speed;
    for (const json& n : topo["nodes"]) {
      if (!n.is_object()) return Bad("topology.nodes", "entries must be objects");
      NodeBrief b{n.value("name", ""), n.value("region", ""), n.value("stage", 0)};
      sc.uplinks.push_back({b.name, b.stage, n.value("uplink_mbit", 0.0) * 1e6 / 8});
      briefs.push_back(b);
      regions.insert(b.region);
      slots.push_back(n.value("memory_slots", 1));
      seen_speed.emplace(b.region, n.value("sec_per_layer_sample", 0.0));
    }
    if (auto it = topo.find("region_links"); it != topo.end() && it->is_array()) {
      for (const json& l : *it) {
        regions.insert(l.value("a", ""));
        regions.insert(l.value("b", ""));
      }
    }
    const int num_stages = topo.value("model", json::object()).value("num_stages", 0);
    SS_RETURN_IF_ERROR(ExpandChurn(churn, briefs,
                                   {regions.begin(), regions.end()},
                                   num_stages, rng, &sc.churn, &joiners));
    for (const JoinerSpec& j : joiners) {
      double t = 0;
      if (auto it = region_speed.find(j.region); it != region_speed.end()) {
        t = it->second;
      } else if (auto it = seen_speed.find(j.region); it != seen_speed.end()) {
        t = it->second;
      } else if (!seen_speed.empty()) {
        t = seen_speed.begin()->second;
      }
      // An "auto" joiner's stage is chosen at run time; the universe needs
      // some valid stage to hold its links meanwhile.
      const int stage = j.stage >= 0 ? j.stage : std::min(1, num_stages - 1);
      topo["nodes"].push_back(
          {{"name", j.name}, {"stage", stage}, {"region", j.region},
           {"sec_per_layer_sample", t * j.speed_factor},
           {"memory_slots", j.memory_slots > 0 ? j.memory_slots : Median(slots)}});
    }
    SS_ASSIGN_OR_RETURN(sc.universe, scheduler::ParseScenario(topo.dump()));
    // Parsed above by the scheduler, so the fields are valid here.
    sc.hop_overhead_s = topo.value("hop_overhead_s", 0.0);
    if (auto it = topo.find("region_links"); it != topo.end() && it->is_array()) {
      for (const json& l : *it) {
        std::string a = l.value("a", ""), b = l.value("b", "");
        if (b < a) std::swap(a, b);
        sc.region_links[{a, b}] = {l.value("latency_ms", 0.0) / 1000,
                                   l.value("bandwidth_gib_s", 0.0) * 1024.0 * 1024.0 * 1024.0};
      }
    }
  }
  SS_RETURN_IF_ERROR(ApplyWorkloadOverrides(root, sc.universe.workload));
  const int n = sc.universe.view.num_nodes();
  const int first_joiner = n - static_cast<int>(joiners.size());
  sc.initially_present.assign(n, true);
  sc.auto_stage.assign(n, false);
  for (int v = first_joiner; v < n; ++v) {
    sc.initially_present[v] = false;
    sc.auto_stage[v] = joiners[v - first_joiner].stage < 0;
  }
  if (sc.planner != "replay" && !scheduler::CreatePlanner(sc.planner).ok()) {
    return Bad("scenario.planner",
               absl::StrCat("unknown planner \"", sc.planner, "\" (known: ",
                            absl::StrJoin(scheduler::PlannerNames(), ", "), ", replay)"));
  }
  if (sc.planner == "replay") {
    if (sc.replay_key.empty()) {
      return Bad("scenario.replay_key", "planner \"replay\" needs a route set");
    }
    if (!sc.universe.route_sets.count(sc.replay_key)) {
      return Bad("scenario.replay_key",
                 absl::StrCat("no route set \"", sc.replay_key, "\""));
    }
  }
  SS_RETURN_IF_ERROR(scheduler::ValidateWorkload(sc.universe.view,
                                                 sc.universe.workload));
  return sc;
}

absl::StatusOr<SimScenario> ParseSimScenario(absl::string_view json_text,
                                             const std::string& base_dir,
                                             uint64_t seed) {
  // nlohmann::json throws on a value of the wrong type; no exception leaves
  // this module.
  try {
    return ParseUnsafe(json_text, base_dir, seed);
  } catch (const nlohmann::json::exception& e) {
    return Bad("scenario", absl::StrCat("wrong type: ", e.what()));
  }
}

absl::StatusOr<SimScenario> LoadSimScenario(const std::string& path,
                                            uint64_t seed) {
  SS_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  absl::StatusOr<SimScenario> sc = ParseSimScenario(text, dir, seed);
  if (!sc.ok()) return common::Annotate(sc.status(), path);
  sc->source_path = path;
  return sc;
}

}  // namespace skipswarm::sim
