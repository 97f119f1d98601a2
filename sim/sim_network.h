// An in-memory network for GossipTransport, driven by an injected clock
// (a SimClock in tests and the simulator): per-message latency and jitter,
// random loss, partitions, crashed hosts. Deterministic for a given seed and
// sequence of calls.
//
//   common::SimClock clock;
//   SimNetwork net(&clock, /*seed=*/7, {.latency = absl::Milliseconds(10)});
//   GossipTransport* t = net.AddEndpoint("n1:1", id1);
//   net.Serve("n1:1", membership1.get());     // requests to n1:1 reach it
//   net.SetLoss(0.05);  net.Partition({"n1:1", "n2:1"});  net.Heal();
//
// A request is delivered after the link latency unless it is lost, the two
// ends are in different partitions, or either end is down; the reply travels
// back the same way. A request without a reply fails with DeadlineExceeded
// at its timeout. The network plays the part of mutual TLS: the receiver's
// PeerInfo.authenticated_id is the sender endpoint's id, and a reply from an
// endpoint whose id differs from PeerRef::id fails with Unauthenticated.
//
// Thread rule: not thread-safe. Call it, and advance the clock, from one
// thread (the simulator's). Callbacks run from clock timers.
#ifndef SKIPSWARM_SIM_SIM_NETWORK_H_
#define SKIPSWARM_SIM_SIM_NETWORK_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/random.h"
#include "identity/identity.h"
#include "membership/transport.h"

namespace skipswarm::sim {

class SimNetwork {
 public:
  struct Options {
    absl::Duration latency = absl::Milliseconds(5);  // one way
    absl::Duration jitter = absl::ZeroDuration();    // uniform [0, jitter)
    double loss = 0.0;                               // per message
  };

  // `clock` must outlive the network.
  SimNetwork(common::Clock* clock, uint64_t seed, Options options);
  SimNetwork(common::Clock* clock, uint64_t seed)
      : SimNetwork(clock, seed, Options()) {}
  ~SimNetwork();

  // Creates the endpoint for `address` (owned by the network; valid for its
  // lifetime). REQUIRES: `address` is new.
  membership::GossipTransport* AddEndpoint(const std::string& address,
                               const common::NodeId& id);
  // Routes requests for `address` to `handler` (nullptr: no listener;
  // requests are dropped). `handler` must stay valid until replaced.
  void Serve(const std::string& address, membership::GossipHandler* handler);
  // Forgets every pending callback of requests sent from `address` and stops
  // serving it: after Detach the endpoint's owner may be destroyed.
  void Detach(const std::string& address);

  // A down host neither sends nor receives (a crash or unplugged cable).
  void SetDown(const std::string& address, bool down);
  void SetLoss(double loss) { options_.loss = loss; }
  // Extra one-way latency between two addresses (both directions).
  void SetLinkLatency(const std::string& a, const std::string& b,
                      absl::Duration latency);
  // One-way latency of every pair without a SetLinkLatency entry (the
  // simulator's link table); null: Options::latency. Jitter is added.
  using LatencyFunction =
      std::function<absl::Duration(const std::string& from, const std::string& to)>;
  void SetLatencyFunction(LatencyFunction f) { latency_fn_ = std::move(f); }
  // Whether a message from `from` can reach `to` now (the simulator's
  // partitions, any number of them); null: every link is up. Checked for
  // each message when it is sent, as Partition is.
  using LinkFilter = std::function<bool(const std::string& from, const std::string& to)>;
  void SetLinkFilter(LinkFilter f) { link_filter_ = std::move(f); }
  // Splits the network: `side` on one side, everybody else on the other.
  void Partition(const std::vector<std::string>& side);
  void Heal();

  uint64_t messages_sent() const { return sent_; }
  uint64_t messages_dropped() const { return dropped_; }

 private:
  class Endpoint;
  struct Pending;
  template <typename Resp>
  struct Call;

  bool Deliverable(const std::string& from, const std::string& to);
  absl::Duration Latency(const std::string& from, const std::string& to);
  Endpoint* Find(const std::string& address);

  template <typename Req, typename Resp, typename Dispatch>
  void Send(Endpoint* from, const membership::PeerRef& to, const Req& req,
            absl::Duration timeout,
            absl::AnyInvocable<void(absl::StatusOr<Resp>)> done,
            Dispatch dispatch);

  common::Clock* clock_;
  common::Random rng_;
  Options options_;
  absl::flat_hash_map<std::string, std::unique_ptr<Endpoint>> endpoints_;
  absl::flat_hash_map<std::string, int> side_;
  absl::flat_hash_map<std::pair<std::string, std::string>, absl::Duration>
      link_latency_;
  LatencyFunction latency_fn_;
  LinkFilter link_filter_;
  uint64_t sent_ = 0;
  uint64_t dropped_ = 0;
};

// Simulated node `index`'s key, derived from `rng` (its "key<index>" fork):
// the same seed gives every simulated swarm the same node ids.
std::unique_ptr<identity::Identity> SimIdentity(const common::Random& rng, int index);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_SIM_NETWORK_H_
