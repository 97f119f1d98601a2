#include "scheduler/scenario.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/bounded_file.h"
#include "common/status_macros.h"
#include <nlohmann/json.hpp>

namespace skipswarm::scheduler {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// A number at obj[key]; `required` = false returns `fallback` when absent.
absl::StatusOr<double> Number(const json& obj, const std::string& key,
                              const std::string& where, bool required,
                              double fallback, bool allow_negative = false) {
  const std::string path = absl::StrCat(where, ".", key);
  if (!obj.is_object()) return Bad(where, "must be a JSON object");
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (required) return Bad(path, "missing");
    return fallback;
  }
  if (!it->is_number()) return Bad(path, "must be a number");
  const double value = it->get<double>();
  if (!std::isfinite(value)) return Bad(path, "must be finite");
  if (!allow_negative && value < 0) {
    return Bad(path, absl::StrCat("must not be negative, got ", value));
  }
  return value;
}

absl::StatusOr<int> Integer(const json& obj, const std::string& key,
                            const std::string& where, bool required,
                            int fallback) {
  SS_ASSIGN_OR_RETURN(double value,
                      Number(obj, key, where, required, fallback));
  if (value != std::floor(value) || value > 1e9) {
    return Bad(absl::StrCat(where, ".", key), "must be a whole number");
  }
  return static_cast<int>(value);
}

absl::StatusOr<std::string> String(const json& obj, const std::string& key,
                                   const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string()) {
    return Bad(absl::StrCat(where, ".", key), "missing or not a string");
  }
  return it->get<std::string>();
}

std::string OptString(const json& obj, const std::string& key,
                      const std::string& fallback) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>()
                                            : fallback;
}

const json* Array(const json& obj, const std::string& key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_array() ? &*it : nullptr;
}

absl::Status ParseWorkload(const json& obj, Workload& w) {
  const std::string where = "workload";
  SS_ASSIGN_OR_RETURN(w.mb_per_data_node, Integer(obj, "mb_per_data_node",
                                                  where, false,
                                                  w.mb_per_data_node));
  SS_ASSIGN_OR_RETURN(w.path_length,
                      Integer(obj, "path_length", where, false, w.path_length));
  SS_ASSIGN_OR_RETURN(w.max_swaps,
                      Integer(obj, "max_swaps", where, false, w.max_swaps));
  SS_ASSIGN_OR_RETURN(w.max_jump,
                      Integer(obj, "max_jump", where, false, w.max_jump));
  SS_ASSIGN_OR_RETURN(w.balance_tolerance,
                      Number(obj, "balance_tolerance", where, false,
                             w.balance_tolerance));
  return absl::OkStatus();
}

absl::StatusOr<Scenario> ParseOurs(const json& root) {
  Scenario sc;
  sc.name = OptString(root, "name", "scenario");
  auto model_it = root.find("model");
  if (model_it == root.end()) return Bad("model", "missing");
  const json& m = *model_it;
  if (!m.is_object()) return Bad("model", "must be an object");
  ModelShape model;
  SS_ASSIGN_OR_RETURN(model.num_stages,
                      Integer(m, "num_stages", "model", true, 0));
  SS_ASSIGN_OR_RETURN(model.layers_per_stage,
                      Integer(m, "layers_per_stage", "model", false, 1));
  SS_ASSIGN_OR_RETURN(model.samples_per_mb,
                      Integer(m, "samples_per_mb", "model", false, 1));
  SS_ASSIGN_OR_RETURN(model.bytes_per_mb,
                      Number(m, "bytes_per_mb", "model", false, 0));
  SS_ASSIGN_OR_RETURN(double activation_gib,
                      Number(m, "activation_gib_per_mb", "model", false, 0));
  if (auto it = root.find("workload"); it != root.end()) {
    SS_RETURN_IF_ERROR(ParseWorkload(*it, sc.workload));
  }
  SS_ASSIGN_OR_RETURN(double overhead,
                      Number(root, "hop_overhead_s", "scenario", false, 0));

  auto nodes_it = root.find("nodes");
  if (nodes_it == root.end() || !nodes_it->is_array() || nodes_it->empty()) {
    return Bad("nodes", "missing or empty");
  }
  std::vector<NodeSpec> nodes;
  absl::flat_hash_map<std::string, int> index;
  for (size_t i = 0; i < nodes_it->size(); ++i) {
    const json& j = (*nodes_it)[i];
    const std::string where = absl::StrCat("nodes[", i, "]");
    if (!j.is_object()) return Bad(where, "must be an object");
    NodeSpec node;
    SS_ASSIGN_OR_RETURN(node.name, String(j, "name", where));
    const std::string who = absl::StrCat("node '", node.name, "'");
    SS_ASSIGN_OR_RETURN(node.stage, Integer(j, "stage", who, true, 0));
    node.region = OptString(j, "region", "");
    SS_ASSIGN_OR_RETURN(node.sec_per_layer_sample,
                        Number(j, "sec_per_layer_sample", who, true, 0));
    if (j.contains("memory_slots")) {
      SS_ASSIGN_OR_RETURN(node.memory_slots,
                          Integer(j, "memory_slots", who, true, 0));
    } else {
      SS_ASSIGN_OR_RETURN(double gib, Number(j, "memory_gib", who, true, 0));
      if (activation_gib <= 0) {
        return Bad(who, "memory_gib needs model.activation_gib_per_mb");
      }
      node.memory_slots = static_cast<int>(std::floor(gib / activation_gib));
      if (node.memory_slots < 1) {
        return Bad(who, absl::StrCat(gib, " GiB of memory cannot hold one "
                                     "micro-batch of ", activation_gib,
                                     " GiB activations"));
      }
    }
    node.id = common::NodeId::ForName(node.name);
    index[node.name] = static_cast<int>(i);
    nodes.push_back(std::move(node));
  }
  const size_t n = nodes.size();
  std::vector<double> hops(n * n, kNoLink);
  absl::flat_hash_map<std::string, double> region_hop;
  if (const json* it = Array(root, "region_links")) {
    for (size_t i = 0; i < it->size(); ++i) {
      const json& j = (*it)[i];
      const std::string where = absl::StrCat("region_links[", i, "]");
      if (!j.is_object()) return Bad(where, "must be an object");
      SS_ASSIGN_OR_RETURN(std::string a, String(j, "a", where));
      SS_ASSIGN_OR_RETURN(std::string b, String(j, "b", where));
      LinkSpec link;
      SS_ASSIGN_OR_RETURN(double ms, Number(j, "latency_ms", where, true, 0));
      SS_ASSIGN_OR_RETURN(double gib,
                          Number(j, "bandwidth_gib_s", where, true, 0));
      if (gib <= 0) return Bad(where, "bandwidth_gib_s must be positive");
      link.latency_s = ms / 1000;
      link.bandwidth_bytes_per_s = gib * 1024.0 * 1024.0 * 1024.0;
      const double d = HopSeconds(link, model.bytes_per_mb, overhead);
      region_hop[a + "\n" + b] = d;
      region_hop[b + "\n" + a] = d;
    }
  }
  for (size_t u = 0; u < n; ++u) {
    for (size_t v = 0; v < n; ++v) {
      auto it = region_hop.find(nodes[u].region + "\n" + nodes[v].region);
      if (it != region_hop.end()) hops[u * n + v] = it->second;
    }
  }
  if (const json* it = Array(root, "node_links")) {
    for (size_t i = 0; i < it->size(); ++i) {
      const json& j = (*it)[i];
      const std::string where = absl::StrCat("node_links[", i, "]");
      if (!j.is_object()) return Bad(where, "must be an object");
      SS_ASSIGN_OR_RETURN(std::string a, String(j, "a", where));
      SS_ASSIGN_OR_RETURN(std::string b, String(j, "b", where));
      if (!index.contains(a) || !index.contains(b)) {
        return Bad(where, "names an unknown node");
      }
      SS_ASSIGN_OR_RETURN(double d, Number(j, "transfer_s", where, true, 0));
      hops[index[a] * n + index[b]] = d;
      hops[index[b] * n + index[a]] = d;
    }
  }
  SS_ASSIGN_OR_RETURN(sc.view, TopologyView::Create(model, std::move(nodes),
                                                    std::move(hops)));
  SS_RETURN_IF_ERROR(ValidateWorkload(sc.view, sc.workload));

  if (auto it = root.find("routes"); it != root.end() && it->is_object()) {
    for (auto set = it->begin(); set != it->end(); ++set) {
      if (!set.value().is_array()) {
        return Bad(absl::StrCat("routes.", set.key()), "must be a list");
      }
      std::vector<RouteSpec> specs;
      for (size_t i = 0; i < set.value().size(); ++i) {
        const json& j = set.value()[i];
        const std::string where =
            absl::StrCat("routes.", set.key(), "[", i, "]");
        if (!j.is_object()) return Bad(where, "must be an object");
        RouteSpec spec;
        SS_ASSIGN_OR_RETURN(std::string origin, String(j, "origin", where));
        if (!index.contains(origin)) return Bad(where, "unknown origin");
        spec.origin = index[origin];
        const json* route_nodes = Array(j, "nodes");
        if (!route_nodes) return Bad(where, "nodes missing");
        for (const json& name : *route_nodes) {
          if (!name.is_string() || !index.contains(name.get<std::string>())) {
            return Bad(where, "nodes names an unknown node");
          }
          spec.nodes.push_back(index[name.get<std::string>()]);
        }
        SS_ASSIGN_OR_RETURN(spec.mbs, Integer(j, "mbs", where, false, -1));
        SS_ASSIGN_OR_RETURN(spec.priority,
                            Integer(j, "priority", where, false, 0));
        SS_ASSIGN_OR_RETURN(spec.release_s,
                            Number(j, "release_s", where, false, 0));
        specs.push_back(std::move(spec));
      }
      SS_ASSIGN_OR_RETURN(Plan plan,
                          ExpandRoutes(sc.view, sc.workload, specs));
      plan.planner = "replay:" + set.key();
      sc.route_sets[set.key()] = std::move(plan);
    }
  }
  return sc;
}

absl::StatusOr<Scenario> ParseSkipPipe(const json& root,
                                       const SkipPipeOptions& opt) {
  Scenario sc;
  sc.name = "skippipe schedule.json";
  const json* delays_ptr = Array(root, "delays");
  if (!delays_ptr || delays_ptr->empty()) return Bad("delays", "missing");
  const json& delays = *delays_ptr;
  const size_t n = delays.size();
  auto parts = root.find("partitions");
  if (parts == root.end() || !parts->is_array() || parts->empty()) {
    return Bad("partitions", "missing");
  }
  SS_ASSIGN_OR_RETURN(int memory, Integer(root, "memory", "schedule", true, 0));
  if (!(opt.forward_s > 0)) return Bad("forward_s", "must be positive");
  ModelShape model;
  model.num_stages = static_cast<int>(parts->size());
  std::vector<NodeSpec> nodes(n);
  for (size_t v = 0; v < n; ++v) {
    nodes[v].name = absl::StrCat("n", v);
    nodes[v].id = common::NodeId::ForName(nodes[v].name);
    nodes[v].sec_per_layer_sample = opt.forward_s;
    nodes[v].memory_slots = memory;
    if (const json* loc = Array(root, "locations");
        loc && v < loc->size() && (*loc)[v].is_string()) {
      nodes[v].region = (*loc)[v].get<std::string>();
    }
  }
  for (size_t s = 0; s < parts->size(); ++s) {
    if (!(*parts)[s].is_array() || (*parts)[s].empty()) {
      return Bad(absl::StrCat("partitions[", s, "]"),
                 absl::StrCat("stage ", s, " has no node"));
    }
    for (const json& j : (*parts)[s]) {
      if (!j.is_number_integer() || j.get<int>() < 0 ||
          j.get<size_t>() >= n) {
        return Bad(absl::StrCat("partitions[", s, "]"),
                   "names a node outside the delays matrix");
      }
      nodes[j.get<size_t>()].stage = static_cast<int>(s);
    }
  }
  for (size_t v = 0; v < n; ++v) {
    if (nodes[v].stage < 0) {
      return Bad(absl::StrCat("node n", v), "is in no partition (stage)");
    }
  }
  std::vector<double> hops(n * n);
  for (size_t u = 0; u < n; ++u) {
    if (!delays[u].is_array() || delays[u].size() != n) {
      return Bad(absl::StrCat("delays[", u, "]"),
                 absl::StrCat("must be a row of ", n, " numbers"));
    }
    for (size_t v = 0; v < n; ++v) {
      const json& d = delays[u][v];
      if (d.is_null()) {
        hops[u * n + v] = kNoLink;
        continue;
      }
      if (!d.is_number()) {
        return Bad(absl::StrCat("delays[", u, "][", v, "]"), "not a number");
      }
      hops[u * n + v] = d.get<double>();
    }
  }
  SS_ASSIGN_OR_RETURN(sc.view, TopologyView::Create(model, std::move(nodes),
                                                    std::move(hops)));
  sc.workload.path_length = opt.path_length;
  sc.workload.mb_per_data_node = opt.mb_per_data_node;
  SS_RETURN_IF_ERROR(ValidateWorkload(sc.view, sc.workload));

  for (const char* key : {"ca-paths", "non-ca-paths", "random-paths"}) {
    auto it = root.find(key);
    if (it == root.end() || !it->is_object()) continue;
    std::vector<RouteSpec> specs;
    for (auto entry = it->begin(); entry != it->end(); ++entry) {
      const std::string where = absl::StrCat(key, ".", entry.key());
      if (!entry.value().is_object()) return Bad(where, "must map node -> node");
      absl::flat_hash_map<int, int> next;
      absl::flat_hash_map<int, int> has_pred;
      for (auto hop = entry.value().begin(); hop != entry.value().end(); ++hop) {
        int from = 0;
        if (!absl::SimpleAtoi(hop.key(), &from) ||
            !hop.value().is_number_integer()) {
          return Bad(where, "hops must map node -> node");
        }
        next[from] = hop.value().get<int>();
        has_pred[hop.value().get<int>()] = 1;
      }
      int origin = -1;
      for (const auto& [from, to] : next) {
        if (!has_pred.contains(from) && (origin < 0 || from < origin)) {
          origin = from;
        }
      }
      if (origin < 0 || origin >= static_cast<int>(n)) {
        return Bad(where, "has no origin");
      }
      RouteSpec spec;
      spec.origin = origin;
      spec.nodes.push_back(origin);
      for (int v = origin; next.contains(v) && spec.nodes.size() <= n;) {
        v = next[v];
        spec.nodes.push_back(v);
      }
      if (spec.nodes.back() != origin) spec.nodes.push_back(origin);
      specs.push_back(std::move(spec));
    }
    SS_ASSIGN_OR_RETURN(Plan plan, ExpandRoutes(sc.view, sc.workload, specs));
    plan.planner = absl::StrCat("replay:", key);
    sc.route_sets[key] = std::move(plan);
  }
  return sc;
}

}  // namespace

absl::StatusOr<Plan> Scenario::RouteSet(const std::string& key) const {
  auto it = route_sets.find(key);
  if (it == route_sets.end()) {
    std::string known;
    for (const auto& [k, plan] : route_sets) absl::StrAppend(&known, " ", k);
    return absl::NotFoundError(absl::StrCat(
        "scenario has no route set '", key, "'; it has:",
        known.empty() ? " none" : known));
  }
  return it->second;
}

absl::StatusOr<Plan> ExpandRoutes(const TopologyView& view,
                                  const Workload& workload,
                                  const std::vector<RouteSpec>& specs) {
  Plan plan;
  absl::flat_hash_map<int, std::vector<const RouteSpec*>> shared;
  absl::flat_hash_map<int, int> explicit_mbs;
  for (const RouteSpec& spec : specs) {
    if (spec.origin < 0 || spec.origin >= view.num_nodes() ||
        view.stage(spec.origin) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("route origin ", spec.origin, " is not a data node"));
    }
    if (spec.mbs < 0) {
      shared[spec.origin].push_back(&spec);
    } else {
      explicit_mbs[spec.origin] += spec.mbs;
    }
  }
  int mb = 0;
  auto add = [&](const RouteSpec& spec) {
    Route r;
    r.mb = mb++;
    r.origin = spec.origin;
    r.nodes = spec.nodes;
    r.priority = spec.priority;
    r.release_s = spec.release_s;
    plan.routes.push_back(std::move(r));
  };
  // Deterministic order: origins ascending, then the order given.
  for (int o : view.data_nodes()) {
    const int fixed = explicit_mbs.contains(o) ? explicit_mbs[o] : 0;
    for (const RouteSpec& spec : specs) {
      if (spec.origin != o || spec.mbs < 0) continue;
      for (int i = 0; i < spec.mbs; ++i) add(spec);
    }
    auto it = shared.find(o);
    if (it == shared.end()) {
      if (fixed != 0 && fixed != workload.mb_per_data_node) {
        return absl::InvalidArgumentError(absl::StrCat(
            "data node '", view.node(o).name, "' gets ", fixed,
            " micro-batches; the workload says ", workload.mb_per_data_node));
      }
      continue;
    }
    const int left = workload.mb_per_data_node - fixed;
    if (left < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data node '", view.node(o).name, "' routes more micro-batches (",
          fixed, ") than the workload's ", workload.mb_per_data_node));
    }
    for (int i = 0; i < left; ++i) add(*it->second[i % it->second.size()]);
  }
  return plan;
}

absl::StatusOr<Scenario> ParseScenario(absl::string_view json_text,
                                       const SkipPipeOptions& skippipe) {
  json root = json::parse(json_text.begin(), json_text.end(), nullptr,
                          /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError("scenario is not a JSON object");
  }
  if (root.contains("delays")) return ParseSkipPipe(root, skippipe);
  return ParseOurs(root);
}

absl::StatusOr<Scenario> LoadScenarioFile(const std::string& path,
                                          const SkipPipeOptions& skippipe) {
  // Bounded, regular files only (common/bounded_file.h).
  SS_ASSIGN_OR_RETURN(std::string text, common::ReadBoundedFile(path, "scenario file"));
  absl::StatusOr<Scenario> scenario = ParseScenario(text, skippipe);
  if (!scenario.ok()) return common::Annotate(scenario.status(), path);
  return scenario;
}

}  // namespace skipswarm::scheduler
