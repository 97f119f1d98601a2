// --advertise=auto: learn the address peers can reach this node at from
// where they see its connections come from. Behind a home router every
// peer sees the router's public address, not the private one this host
// has; with a port forward (the router's port P to this host's listen
// port) that public address is the one to advertise.
//
//   std::vector<Observation> seen = ObserveSelf(peers, reachability_options, timeout);
//   AutoAdvertiseResult r = SettleAutoAdvertise(seen, local, port, [&](const std::string& a) {
//     return CheckReachability(peers, a, reachability_options, timeout);
//   });
//   std::cout << r.line << "\n";  // "advertise=auto: peers see us as X (2 of 2 agree); ..."
//   // advertise r.address; r.report is its dial-back check
//
// Note [Advertise auto]: the host observed by at least kMinAgreeing peers,
// and by more than half of those who answered, is adopted with our listen
// port (or the PORT of --advertise=auto:PORT, for a router that forwards
// another external port). The port peers observe is the router's mapping
// of one outbound connection's source port, which says nothing about the
// forward, so it is not used. Two agreeing peers, not one: a single peer
// cannot steer where the swarm dials us, and the dial-back check (by every
// peer asked) must then still reach us there. The local candidate (the
// interface address) is checked at the same time, so a host whose peers
// see it through a NAT of their own but can dial it directly keeps that
// address; if neither is dialed back, the node goes outbound-only (relayed)
// as before, advertising the observed address (where a forward would go).
//
// Thread rule: ObserveSelf blocks its caller for at most `timeout`;
// SettleAutoAdvertise runs `check` on its own threads, one per candidate.
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_ADVERTISE_AUTO_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_ADVERTISE_AUTO_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "node/daemon/gossip/reachability.h"

namespace skipswarm::node {

inline constexpr int kMinAgreeing = 2;

// --advertise=auto (port 0: the bound port) or auto:PORT; nullopt for
// anything else.
std::optional<int> ParseAutoAdvertise(absl::string_view advertise);

// One peer's answer: where it saw our connection come from ("host:port";
// empty when it did not answer).
struct Observation {
  std::string peer;
  std::string observed;
};

// Asks every peer in `peers` (concurrently) where it sees us; returns
// within `timeout`, one Observation per peer in order.
std::vector<Observation> ObserveSelf(const std::vector<std::string>& peers,
                                     const ReachabilityOptions& options, absl::Duration timeout);

// The host peers agree on (Note [Advertise auto]).
struct ObservedHost {
  std::string host;   // empty: no agreement
  int agreeing = 0;   // peers that saw `host` (or the most common host)
  int observers = 0;  // peers that answered
  std::vector<std::string> hosts;  // every host seen, first-seen order
};
ObservedHost AgreeOnHost(const std::vector<Observation>& seen);

// The dial-back check of one address (CheckReachability in the daemon, a
// fake in tests). Must be thread-safe.
using DialBackCheck = std::function<ReachabilityReport(const std::string& address)>;

struct AutoAdvertiseResult {
  std::string address;        // what to advertise
  ReachabilityReport report;  // `address`'s check
  ObservedHost observed;
  std::string line;           // the one "advertise=auto: ..." line
};

// Checks the observed candidate (agreed host, `port`) and `local` at once
// and chooses (Note [Advertise auto]). `local` is "host:port".
AutoAdvertiseResult SettleAutoAdvertise(const std::vector<Observation>& seen,
                                        const std::string& local, int port,
                                        const DialBackCheck& check);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_ADVERTISE_AUTO_H_
