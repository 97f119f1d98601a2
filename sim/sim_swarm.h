// Test and simulator harness: N Membership instances on one SimClock and
// SimNetwork, with deterministic identities (seeded keys) and addresses
// "node<i>:7000".
//
//   SimSwarm swarm(/*seed=*/1, net_options, membership_options);
//   for (int i = 0; i < 12; ++i) swarm.AddNode();
//   swarm.StartAll(/*bootstrap=*/0);
//   absl::Duration t = swarm.RunUntil([&] { return swarm.Converged(); },
//                                     absl::Seconds(10));
//
// Thread rule: single-threaded, like SimClock and SimNetwork.
#ifndef SKIPSWARM_SIM_SIM_SWARM_H_
#define SKIPSWARM_SIM_SIM_SWARM_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/sim_clock.h"
#include "membership/membership.h"
#include "sim/sim_network.h"

namespace skipswarm::sim {

class SimSwarm {
 public:
  SimSwarm(uint64_t seed, SimNetwork::Options net, membership::MembershipOptions options);
  ~SimSwarm();

  // Adds node i (not started), whose record carries `invite` (Note
  // [Admission] in membership/admission.h). Returns i.
  int AddNode(std::vector<uint32_t> stages = {}, proto::SignedInvite invite = {});
  int size() const { return static_cast<int>(nodes_.size()); }
  membership::Membership& node(int i);
  // Node i's key (tests sign opinions with it).
  const identity::Identity& identity(int i) const;
  const std::string& address(int i) const;
  common::NodeId id(int i) const;

  // Starts node i and joins it through `bootstrap` (-1: none).
  void StartAndJoin(int i, std::vector<int> bootstrap);
  // Starts every node; all but `bootstrap` join through it at once.
  void StartAll(int bootstrap);
  // A crash: stops the node's timers and cuts it off the network.
  void Kill(int i);
  // Restarts a killed node with a fresh Membership (same key) that joins
  // through `bootstrap`.
  void Restart(int i, int bootstrap);
  bool alive(int i) const;
  // From now on node i handles every incoming request, and every reply to
  // its own requests, `delay` late (a starved process, or a queue in front
  // of its handlers); its timers still run on time. Zero: normal again.
  void SetInboundDelay(int i, absl::Duration delay);

  // True when every running node's view has exactly the running nodes as
  // live members (ALIVE or SUSPECT) and all view digests are equal.
  bool Converged();
  // True when every running node other than `victim` sees `victim` as
  // `state`.
  bool AllSee(int victim, proto::MemberState state);

  // Advances the clock in `step`s until `done()` or `limit` elapsed; returns
  // the elapsed time, or InfiniteDuration on timeout.
  absl::Duration RunUntil(const std::function<bool()>& done,
                          absl::Duration limit,
                          absl::Duration step = absl::Milliseconds(10));
  void Run(absl::Duration d) { clock_.Advance(d); }

  // Every (observer, subject, new state) transition seen by listeners.
  struct Transition {
    int observer;
    int subject;
    proto::MemberState state;
    absl::Duration at;
  };
  const std::vector<Transition>& transitions() const { return transitions_; }

  common::SimClock& clock() { return clock_; }
  SimNetwork& net() { return net_; }

 private:
  struct Node;
  class DelayedHandler;
  class DelayedTransport;
  void CreateMembership(int i);
  int IndexOf(const common::NodeId& id) const;

  common::SimClock clock_;
  SimNetwork net_;
  membership::MembershipOptions options_;
  common::Random rng_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<Transition> transitions_;
};

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_SIM_SWARM_H_
