#include "sim/swim_gossip.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "identity/identity.h"

namespace skipswarm::sim {
namespace {

// One-way latency of a pair the scenario's link table does not name (SkipPipe
// files give only per-MB transfer times, no latency).
constexpr double kDefaultLatencyS = 0.05;

}  // namespace

membership::MembershipOptions MembershipOptionsFor(const DetectorParams& d, double max_rtt_s) {
  membership::MembershipOptions o;
  o.probe_interval = absl::Seconds(std::max(d.probe_interval_s, 4 * max_rtt_s));
  o.probe_timeout = std::min(std::max(o.probe_timeout, absl::Seconds(1.5 * max_rtt_s)),
                             o.probe_interval * 0.6);
  o.suspicion_timeout = absl::Seconds(d.suspicion_timeout_s);
  o.gossip_interval = absl::Seconds(d.gossip_interval_s);
  o.gossip_fanout = static_cast<int>(d.gossip_fanout);
  // The simulator's planners and repairers take link costs from the
  // scenario, not from gossip: no link samples ride on the messages (with
  // them every message copies one sample per member, O(N) per message).
  o.max_links_per_message = 0;
  // Anti-entropy every 30 s instead of the LAN default's 5 s (hashicorp's
  // memberlist uses 60 s for a WAN): each push-pull carries every member's
  // record and digest, O(N) per message, and it plays no part in failure
  // detection (probes and piggy-backed gossip do that).
  o.push_pull_interval = absl::Seconds(30);
  // Push-pull with a DEAD member (to heal partitions) every 10 s instead of
  // 3 s: every crashed node stays a tombstone for the reconnect window, and
  // each attempt builds a request with every member's digest.
  o.reconnect_interval = absl::Seconds(10);
  return o;
}

SwimGossip::SwimGossip(common::SimClock* clock, const NodeWorld* world,
                       const SimScenario* scenario, uint64_t seed,
                       const membership::MembershipOptions* options)
    : clock_(clock),
      world_(world),
      sc_(scenario),
      rng_(common::Random(seed).Fork("swim")),
      net_(clock, seed * 0x9E3779B97F4A7C15ull + 0x5157),
      n_(world->size()),
      nodes_(n_),
      founder_(n_, false),
      state_(static_cast<size_t>(n_) * n_, 0) {
  const scheduler::TopologyView& u = world->universe();
  std::map<std::string, int> regions;
  for (int v = 0; v < n_; ++v) regions.emplace(u.node(v).region, 0);
  for (const auto& [a_b, link] : sc_->region_links) {
    regions.emplace(a_b.first, 0);
    regions.emplace(a_b.second, 0);
  }
  int r = 0;
  for (auto& [name, index] : regions) index = r++;
  latency_s_.assign(static_cast<size_t>(r) * r, kDefaultLatencyS);
  for (const auto& [a_b, link] : sc_->region_links) {
    const int a = regions[a_b.first], b = regions[a_b.second];
    latency_s_[a * r + b] = latency_s_[b * r + a] = link.latency_s;
  }
  std::set<int> used;
  for (int v = 0; v < n_; ++v) used.insert(regions[u.node(v).region]);
  for (int a : used) {
    for (int b : used) max_latency_s_ = std::max(max_latency_s_, latency_s_[a * r + b]);
  }
  options_ = options != nullptr ? *options
                                : MembershipOptionsFor(sc_->detector, 2 * max_latency_s_);
  for (int v = 0; v < n_; ++v) {
    region_.push_back(regions[u.node(v).region]);
    Node& node = nodes_[v];
    node.identity = SimIdentity(rng_, v);
    node.address = absl::StrCat("n", v, ":7000");
    by_id_[node.identity->id()] = v;
    by_address_[node.address] = v;
    node.transport = net_.AddEndpoint(node.address, node.identity->id());
    net_.SetDown(node.address, true);  // not started yet
  }
  net_.SetLatencyFunction([this, r](const std::string& from, const std::string& to) {
    const int a = IndexOfAddress(from), b = IndexOfAddress(to);
    if (a < 0 || b < 0) return absl::Seconds(kDefaultLatencyS);
    return absl::Seconds(latency_s_[region_[a] * r + region_[b]]);
  });
  net_.SetLinkFilter([this](const std::string& from, const std::string& to) {
    const int a = IndexOfAddress(from), b = IndexOfAddress(to);
    return a < 0 || b < 0 || world_->LinkUp(a, b);
  });
}

SwimGossip::~SwimGossip() {
  for (Node& node : nodes_) net_.Detach(node.address);
  for (Node& node : nodes_) node.membership.reset();
}

int SwimGossip::IndexOfAddress(const std::string& address) const {
  auto it = by_address_.find(address);
  return it == by_address_.end() ? -1 : it->second;
}

absl::Status SwimGossip::Start(int u, bool founder) {
  Node& node = nodes_[u];
  // A replacement's Membership is new; requests of the old one are forgotten.
  net_.Detach(node.address);
  node.membership.reset();
  std::fill(state_.begin() + static_cast<size_t>(u) * n_,
            state_.begin() + static_cast<size_t>(u + 1) * n_, 0);
  ++node.version;
  node.assumes_founders = founder;
  if (founder) founder_[u] = true;
  membership::MembershipOptions o = options_;
  o.addresses = {node.address};
  o.stages = {static_cast<uint32_t>(world_->node(u).stage)};
  o.memory_slots = static_cast<uint32_t>(world_->universe().memory_slots(u));
  const int generation = ++node.generation;
  auto m = membership::Membership::Create(o, node.identity.get(),
                                          node.transport, clock_,
                                          rng_.Fork(absl::StrCat("node", u, "/", generation)));
  if (!m.ok()) return m.status();
  node.membership = *std::move(m);
  node.membership->AddListener([this, u, generation](const membership::MemberChange& c) {
    OnChange(u, generation, c);
  });
  net_.Serve(node.address, node.membership.get());
  net_.SetDown(node.address, false);
  node.running = true;
  node.membership->Start();
  std::vector<std::string> bootstrap;
  if (first_ < 0) {
    first_ = u;
  } else if (founder && nodes_[first_].running) {
    bootstrap.push_back(nodes_[first_].address);
  } else {
    for (int v = 0; v < n_ && bootstrap.size() < 3; ++v) {
      if (v != u && nodes_[v].running && world_->LinkUp(u, v)) {
        bootstrap.push_back(nodes_[v].address);
      }
    }
  }
  if (!bootstrap.empty()) node.membership->Join(std::move(bootstrap), [](absl::Status) {});
  return absl::OkStatus();
}

void SwimGossip::Crash(int u) {
  Node& node = nodes_[u];
  if (!node.running) return;
  node.running = false;
  node.membership->Stop();
  net_.SetDown(node.address, true);
}

void SwimGossip::OnChange(int observer, int generation, const membership::MemberChange& c) {
  const Node& node = nodes_[observer];
  if (node.generation != generation || !node.running) return;
  if (c.old_state == c.new_state) return;
  auto it = by_id_.find(c.id);
  if (it == by_id_.end()) return;
  const int subject = it->second;
  uint8_t& slot = state_[static_cast<size_t>(observer) * n_ + subject];
  const bool was = Live(observer, subject);
  slot = static_cast<uint8_t>(c.new_state);
  if (Live(observer, subject) != was) ++nodes_[observer].version;
  if (listener_) listener_(observer, subject, c.new_state);
}

bool SwimGossip::Live(int observer, int subject) const {
  if (observer == subject) return true;
  const uint8_t s = state_[static_cast<size_t>(observer) * n_ + subject];
  if (s == 0) return nodes_[observer].assumes_founders && founder_[subject];
  return s == proto::MEMBER_STATE_ALIVE || s == proto::MEMBER_STATE_SUSPECT;
}

}  // namespace skipswarm::sim
