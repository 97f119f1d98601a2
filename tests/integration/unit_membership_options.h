// The membership options the simulated-network membership tests start from:
// one swarm id ("unit-swarm") and a daemon's default memory slots.
//
//   SimSwarm swarm(42, SimNetwork::Options(), UnitMembershipOptions());
//
// Thread rule: none (plain values).
#ifndef SKIPSWARM_TESTS_INTEGRATION_UNIT_MEMBERSHIP_OPTIONS_H_
#define SKIPSWARM_TESTS_INTEGRATION_UNIT_MEMBERSHIP_OPTIONS_H_

#include "membership/membership.h"

namespace skipswarm::membership {

inline constexpr char kUnitSwarm[] = "unit-swarm";

inline MembershipOptions UnitMembershipOptions() {
  MembershipOptions o;
  o.policy.swarm_id = kUnitSwarm;
  o.memory_slots = 4;  // as a daemon's default
  return o;
}

}  // namespace skipswarm::membership

#endif  // SKIPSWARM_TESTS_INTEGRATION_UNIT_MEMBERSHIP_OPTIONS_H_
