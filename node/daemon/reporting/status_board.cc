#include "node/daemon/reporting/status_board.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace skipswarm::node {

// Note [Status JSON]: the document GET /status.json answers and the page
// (status_page.cc) renders; fields are added, never renamed.
//   node:    name, id, mode, version, uptime_s, stages[], address,
//            reachable (true/false/null: not checked yet), serving
//            (null: no health), health (the reasons, "" while serving),
//            paused, paused_why, iteration (null before the first)
//   swarm:   available (false: no view yet),
//            view_version, view_age_s, num_stages, live_members,
//            members[] {id, short, name ("" unless known), self, state,
//            addresses[], outbound_only, paused (its volunteer's pause,
//            Note [Paused members]),
//            stages[], iteration (its record's entry iteration: 0 for a
//            founder), seconds_per_layer_sample, memory_slots},
//            stages[] {stage, replicas (live members hosting it),
//            members[] (their names where known, else short ids)}, links[] {from, to, rtt_ms
//            (null: unknown), mbps (null: unknown)}, links_total
//   history: [] {iteration, t, loss, tokens_per_second,
//            iteration_seconds (null on relays), rerouted, dropped}, oldest
//            first, at most max_history
//   events:  [] {t, iteration, kind, text}, newest first, at most
//            max_events; events_total counts every event since start
//   routes:  {window_iterations, micro_batches, skipped, swapped,
//            skip_rate, swap_rate (null: no routed MB)}: the completed
//            MBs this data node originated over the latest route_window
//            iterations, by route shape (Note [Route shapes])
// Times `t` are seconds since the daemon's board was made.

namespace {

constexpr size_t kMaxLinks = 256;  // a large swarm's n^2 links stay out of the page

nlohmann::json OrNull(const std::optional<double>& v) {
  if (!v.has_value() || !std::isfinite(*v)) return nullptr;
  return *v;
}

}  // namespace

StatusBoard::StatusBoard(StatusBoardOptions options, common::Clock* clock)
    : options_(std::move(options)), clock_(clock), started_(clock->SteadyNow()) {}

double StatusBoard::SinceStart() const {
  return absl::ToDoubleSeconds(clock_->SteadyNow() - started_);
}

void StatusBoard::SetHealth(const ServingHealth* health) {
  absl::MutexLock lock(&mu_);
  health_ = health;
}

void StatusBoard::SetStages(std::vector<int> stages) {
  absl::MutexLock lock(&mu_);
  if (!stages_.empty() && stages_ != stages) {
    std::string from, to;
    for (int s : stages_) absl::StrAppend(&from, from.empty() ? "" : "+", s);
    for (int s : stages) absl::StrAppend(&to, to.empty() ? "" : "+", s);
    AddEventLocked("node", absl::StrCat("this node moved from stage ", from, " to ", to));
  }
  stages_ = std::move(stages);
}

void StatusBoard::SetAddress(std::string address) {
  absl::MutexLock lock(&mu_);
  address_ = std::move(address);
}

void StatusBoard::SetReachable(bool reachable) {
  absl::MutexLock lock(&mu_);
  if (reachable_ == reachable) return;
  reachable_ = reachable;
  AddEventLocked("node", reachable ? "peers reached this node's address: reachable"
                                   : "no peer could dial this node: outbound-only (behind NAT)");
}

void StatusBoard::SetPaused(bool paused, const std::string& why) {
  absl::MutexLock lock(&mu_);
  if (paused_ == paused && paused_why_ == why) return;
  paused_ = paused;
  paused_why_ = paused ? why : "";
  AddEventLocked("pause", paused ? absl::StrCat("paused: ", why) : "resumed");
}

void StatusBoard::UpdateView(const membership::View& view) {
  const double t = SinceStart();
  absl::MutexLock lock(&mu_);
  view_ = view;
  view_t_ = t;
}

void StatusBoard::SetMemberNames(std::map<common::NodeId, std::string> names) {
  absl::MutexLock lock(&mu_);
  names_ = std::move(names);
}

void StatusBoard::ObserveIteration(const NodeIterationReport& r) {
  Point p;
  p.iteration = r.iteration;
  p.t = SinceStart();
  p.rerouted = r.rerouted_here;
  if (r.data) {
    const double s = absl::ToDoubleSeconds(r.data->elapsed);
    if (std::isfinite(r.data->loss)) p.loss = r.data->loss;
    p.iteration_seconds = s;
    if (s > 0) p.tokens_per_second = r.data->tokens / s;
    p.dropped = r.data->dropped;
    for (const auto& [shape, n] : r.data->completed_by_route) {
      p.routed += n;
      if (absl::StartsWith(shape, "skip")) p.skipped += n;
      if (absl::EndsWith(shape, "swap")) p.swapped += n;
    }
  }
  absl::MutexLock lock(&mu_);
  last_iteration_ = r.iteration;
  history_.push_back(p);
  while (history_.size() > options_.max_history) history_.pop_front();
  if (r.rerouted_here > 0) {
    AddEventLocked("reroute", absl::StrCat(r.rerouted_here, " hop(s) re-routed by this node (",
                                           r.server.rerouted, " in all)"));
  }
  if (r.data && r.data->dropped > 0) {
    std::string why;
    for (const auto& [reason, n] : r.data->dropped_by_reason) {
      absl::StrAppend(&why, why.empty() ? "" : ", ", reason, " ", n);
    }
    AddEventLocked("drop", absl::StrCat(r.data->dropped, " micro-batch(es) dropped (", why, ")"));
  }
  if (r.data && !std::isfinite(r.data->loss) && r.data->completed > 0) {
    AddEventLocked("error", absl::StrCat("loss ", r.data->loss));
  }
  if (r.data && !r.data->status.ok()) AddEventLocked("error", r.data->status.ToString());
  if (!r.status.ok()) AddEventLocked("error", r.status.ToString());
  for (const auto& [stage, step] : r.stages) {
    if (!step.digests_agree) {
      AddEventLocked("error", absl::StrCat("stage ", stage, ": replicas' digests disagree"));
    }
  }
}

void StatusBoard::AddEvent(const std::string& kind, const std::string& text) {
  absl::MutexLock lock(&mu_);
  AddEventLocked(kind, text);
}

void StatusBoard::AddEventLocked(const std::string& kind, const std::string& text) {
  Event e;
  e.t = SinceStart();
  e.iteration = last_iteration_;
  e.kind = kind;
  e.text = text;
  events_.push_front(std::move(e));
  ++events_total_;
  while (events_.size() > options_.max_events) events_.pop_back();
}

std::string StatusBoard::RenderJson() const {
  const ServingHealth* health;
  {
    absl::MutexLock lock(&mu_);
    health = health_;
  }
  // Read outside our lock (ServingHealth has its own).
  std::optional<bool> serving;
  std::string reasons;
  if (health != nullptr) {
    serving = health->serving();
    reasons = health->Reasons();
  }
  const double now = SinceStart();

  absl::MutexLock lock(&mu_);
  nlohmann::json node = {
      {"name", options_.node_name},
      {"id", options_.node_id},
      {"mode", options_.mode},
      {"version", options_.version},
      {"uptime_s", now},
      {"stages", stages_},
      {"address", address_},
      {"reachable", reachable_.has_value() ? nlohmann::json(*reachable_) : nlohmann::json()},
      {"serving", serving.has_value() ? nlohmann::json(*serving) : nlohmann::json()},
      {"health", reasons},
      {"paused", paused_},
      {"paused_why", paused_why_},
      {"iteration",
       last_iteration_.has_value() ? nlohmann::json(*last_iteration_) : nlohmann::json()},
  };

  nlohmann::json swarm = {{"available", view_.has_value()},
                          {"num_stages", options_.num_stages}};
  if (view_.has_value()) {
    const membership::View& v = *view_;
    nlohmann::json members = nlohmann::json::array();
    std::map<uint32_t, std::vector<std::string>> by_stage;
    int live = 0;
    for (const membership::MemberInfo& m : v.members) {
      const bool self = m.id == v.self;
      const auto name = names_.find(m.id);
      members.push_back({
          {"name", name == names_.end() ? std::string() : name->second},
          {"id", m.id.Hex()},
          {"short", m.id.ShortString()},
          {"self", self},
          {"state", proto::MemberState_Name(m.state)},
          {"addresses", m.addresses},
          {"outbound_only", m.outbound_only},
          {"paused", m.paused},  // Note [Paused members]
          {"stages", m.stages},
          {"iteration", m.iteration},
          {"seconds_per_layer_sample", m.seconds_per_layer_per_sample},
          {"memory_slots", m.memory_slots},
      });
      if (!m.live()) continue;
      ++live;
      for (uint32_t s : m.stages) {
        by_stage[s].push_back(name == names_.end() ? m.id.ShortString() : name->second);
      }
    }
    // Every stage of the model, including ones nobody hosts (replicas 0:
    // the swarm cannot train until one joins).
    std::set<uint32_t> stages;
    for (int s = 0; s < options_.num_stages; ++s) stages.insert(static_cast<uint32_t>(s));
    for (const auto& [s, ids] : by_stage) stages.insert(s);
    nlohmann::json stage_map = nlohmann::json::array();
    for (uint32_t s : stages) {
      const auto it = by_stage.find(s);
      const std::vector<std::string> ids =
          it == by_stage.end() ? std::vector<std::string>() : it->second;
      stage_map.push_back({{"stage", s}, {"replicas", ids.size()}, {"members", ids}});
    }
    nlohmann::json links = nlohmann::json::array();
    for (const membership::LinkInfo& l : v.links) {
      if (links.size() >= kMaxLinks) break;
      links.push_back({
          {"from", l.from.ShortString()},
          {"to", l.to.ShortString()},
          {"rtt_ms", l.rtt == absl::InfiniteDuration()
                         ? nlohmann::json()
                         : nlohmann::json(absl::ToDoubleMilliseconds(l.rtt))},
          {"mbps", l.bytes_per_second > 0 ? nlohmann::json(l.bytes_per_second * 8 / 1e6)
                                          : nlohmann::json()},
      });
    }
    swarm["view_version"] = v.version;
    swarm["view_age_s"] = now - view_t_;
    swarm["live_members"] = live;
    swarm["members"] = std::move(members);
    swarm["stages"] = std::move(stage_map);
    swarm["links"] = std::move(links);
    swarm["links_total"] = v.links.size();
  }

  nlohmann::json history = nlohmann::json::array();
  for (const Point& p : history_) {
    history.push_back({{"iteration", p.iteration},
                       {"t", p.t},
                       {"loss", OrNull(p.loss)},
                       {"tokens_per_second", OrNull(p.tokens_per_second)},
                       {"iteration_seconds", OrNull(p.iteration_seconds)},
                       {"rerouted", p.rerouted},
                       {"dropped", p.dropped}});
  }
  // Note [Route shapes]: the recent rates (null before any routed MB).
  int routed = 0, skipped = 0, swapped = 0;
  size_t window = 0;
  for (auto it = history_.rbegin(); it != history_.rend() && window < options_.route_window;
       ++it, ++window) {
    routed += it->routed;
    skipped += it->skipped;
    swapped += it->swapped;
  }
  const auto rate = [routed](int n) {
    return routed > 0 ? nlohmann::json(static_cast<double>(n) / routed) : nlohmann::json();
  };
  nlohmann::json routes = {{"window_iterations", window}, {"micro_batches", routed},
                           {"skipped", skipped},          {"swapped", swapped},
                           {"skip_rate", rate(skipped)},  {"swap_rate", rate(swapped)}};
  nlohmann::json events = nlohmann::json::array();
  for (const Event& e : events_) {
    events.push_back(
        {{"t", e.t},
         {"iteration", e.iteration.has_value() ? nlohmann::json(*e.iteration) : nlohmann::json()},
         {"kind", e.kind},
         {"text", e.text}});
  }
  nlohmann::json doc = {{"node", std::move(node)},       {"swarm", std::move(swarm)},
                        {"history", std::move(history)}, {"events", std::move(events)},
                        {"events_total", events_total_}, {"routes", std::move(routes)}};
  // Invalid UTF-8 in a peer's address or a status message must not make
  // the whole document fail.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace skipswarm::node
