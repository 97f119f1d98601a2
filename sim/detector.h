// How long the swarm takes to notice a dead node: a model of membership/'s
// SWIM failure detector, with its default timings, for runs that do not
// simulate the gossip itself.
//
// Model (membership/membership.h, Note [SWIM in SkipSwarm]): each of the
// other N-1 members probes one member per probe interval T; the dead node is
// probed by someone in a given interval with p = 1 - (1 - 1/(N-1))^(N-1)
// (about 0.63), so its first probe comes after U(0, T) + T x Geometric(p).
// That probe fails and the prober marks it suspect at the end of the
// interval (+T); the suspicion spreads by gossip, log_{1+fanout}(N) rounds
// of gossip_interval; every member then runs suspicion_timeout and declares
// it dead. With the defaults and N = 20: about 2.5-3 s, which is what
// membership_sim_test measures for the real code.
//
// A hop to a dead or unreachable peer fails faster on the data path: the
// stream breaks or the hop deadline passes after stream_timeout_s.
//
//   common::Random rng(seed);
//   double delay = GossipDetectSeconds(params, /*members=*/20, rng);
//
// Thread rule: pure functions (the Random is the caller's).
#ifndef SKIPSWARM_SIM_DETECTOR_H_
#define SKIPSWARM_SIM_DETECTOR_H_

#include "common/random.h"

namespace skipswarm::sim {

struct DetectorParams {
  // membership::MembershipOptions defaults.
  double probe_interval_s = 0.5;
  double suspicion_timeout_s = 1.2;
  double gossip_interval_s = 0.2;
  double gossip_fanout = 3;
  // Data path: a send to a dead/unreachable peer fails after this.
  double stream_timeout_s = 0.5;
};

// Seconds from a crash until every member's view says "dead".
double GossipDetectSeconds(const DetectorParams& params, int members,
                           common::Random& rng);

// Seconds until news (a join, a speed change) reaches every member.
double GossipSpreadSeconds(const DetectorParams& params, int members);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_DETECTOR_H_
