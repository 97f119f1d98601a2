// SwimGossip: membership/'s real SWIM code (membership::Membership, one per
// simulated node) on the simulator's clock, over a SimNetwork
// whose links follow the scenario: one-way latency from the scenario's
// region link table, a crashed node neither sends nor answers, a partition
// cuts the links NodeWorld::LinkUp says are cut. The real-node backend
// (sim/node_swarm.h) reads each node's own view through GossipLiveness, as
// the daemon reads its Membership through node/daemon/gossip/training_members.h:
// a member leaves a node's view when that node's Membership holds it DEAD
// or LEFT (SUSPECT still counts as alive).
//
// Note [Founders in the sim's gossip]: at time 0 every initial member
// starts its Membership and joins through the first one; the views converge
// within a few probe periods, while training starts at once. Until a
// founder's Membership has heard of another founder, it counts it alive
// (the swarm's founding list, as a static --swarm config gives it). A
// revived or joining node counts only members its Membership knows of, so
// a dead member it never heard of is never routed to.
//
// Stragglers are compute-slow only: a daemon's gossip runs on its own
// threads, so a straggler answers probes on time here.
//
//   SwimGossip gossip(&clock, &world, &scenario, seed);  // WAN-tuned timers
//   gossip.SetVerdictListener([&](int observer, int subject, proto::MemberState s) { ... });
//   gossip.Start(u, /*founder=*/true);       // every initial member, at time 0
//   gossip.Crash(u);  gossip.Start(u, false);  // a crash and a replacement
//   bool alive = gossip.Live(observer, subject);
//
// Thread rule: single-threaded (the SimClock's thread); the clock, the
// world and the scenario outlive it.
#ifndef SKIPSWARM_SIM_SWIM_GOSSIP_H_
#define SKIPSWARM_SIM_SWIM_GOSSIP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/sim_clock.h"
#include "membership/membership.h"
#include "sim/detector.h"
#include "sim/node_world.h"
#include "sim/scenario.h"
#include "sim/sim_network.h"

namespace skipswarm::sim {

// membership/'s defaults with the scenario's detector timings (probe
// interval, suspicion timeout, gossip interval and fanout), tuned for the
// swarm's WAN as membership/README.md says a WAN swarm must be: the probe
// interval at least 4 x the largest round trip (`max_rtt_s`), the direct
// probe timeout at least 1.5 x it (within 60% of the interval). With the
// LAN defaults on gcp12's links (RTT up to 264 ms) most direct probes time
// out, and the swarm drowns in indirect probes and false suspicions.
membership::MembershipOptions MembershipOptionsFor(const DetectorParams& detector,
                                                   double max_rtt_s);

class SwimGossip final : public GossipLiveness {
 public:
  // Runs when `observer`'s Membership moves `subject` to a new state.
  using VerdictListener =
      std::function<void(int observer, int subject, proto::MemberState state)>;

  // `options`: timers (MembershipOptionsFor); null: MembershipOptionsFor
  // the scenario's detector and the largest round trip of its links.
  SwimGossip(common::SimClock* clock, const NodeWorld* world, const SimScenario* scenario,
             uint64_t seed, const membership::MembershipOptions* options = nullptr);
  ~SwimGossip() override;

  void SetVerdictListener(VerdictListener listener) { listener_ = std::move(listener); }

  // u's daemon starts (a replacement: a fresh Membership with the same key,
  // which outbids its earlier life) and joins through the first started
  // node (a founder) or up to three running nodes it can reach.
  absl::Status Start(int u, bool founder);
  // u's machine dies: its Membership stops and it is off the network.
  void Crash(int u);
  bool running(int u) const { return nodes_[u].running; }

  bool Live(int observer, int subject) const override;
  uint64_t version(int observer) const override { return nodes_[observer].version; }

  uint64_t messages_sent() const { return net_.messages_sent(); }
  const membership::MembershipOptions& options() const { return options_; }
  // The largest one-way latency between two nodes of the universe.
  double max_latency_s() const { return max_latency_s_; }

 private:
  struct Node {
    std::unique_ptr<identity::Identity> identity;
    std::string address;
    membership::GossipTransport* transport = nullptr;  // owned by net_
    std::unique_ptr<membership::Membership> membership;
    bool running = false;
    bool assumes_founders = false;  // Note [Founders in the sim's gossip]
    int generation = 0;
    uint64_t version = 0;
  };
  void OnChange(int observer, int generation, const membership::MemberChange& c);
  int IndexOfAddress(const std::string& address) const;

  common::SimClock* const clock_;
  const NodeWorld* const world_;
  const SimScenario* const sc_;
  membership::MembershipOptions options_;
  common::Random rng_;
  SimNetwork net_;
  const int n_;
  std::vector<Node> nodes_;
  std::vector<bool> founder_;
  // Row-major n x n: what observer's Membership last said of subject
  // (proto::MemberState; 0 = never heard of it).
  std::vector<uint8_t> state_;
  absl::flat_hash_map<common::NodeId, int> by_id_;
  absl::flat_hash_map<std::string, int> by_address_;
  std::vector<double> latency_s_;  // one-way, by (region, region) index pair
  std::vector<int> region_;        // per node: index into the regions
  double max_latency_s_ = 0;
  int first_ = -1;                 // the first node started
  VerdictListener listener_;
};

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_SWIM_GOSSIP_H_
