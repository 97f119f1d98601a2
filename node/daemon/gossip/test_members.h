// Test-only member records and views for the gossip daemon's pure parts
// (training members, behind and join checks, hosted stages).
//
//   membership::MemberInfo a = TestMember("a", {1});
//   a.iteration = 5;  // a joiner's entry
//   TrainingMembers members(d.id);
//   members.Update(TestView({d, a}, /*version=*/1));
#ifndef SKIPSWARM_NODE_DAEMON_GOSSIP_TEST_MEMBERS_H_
#define SKIPSWARM_NODE_DAEMON_GOSSIP_TEST_MEMBERS_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/node_id.h"
#include "membership/view.h"

namespace skipswarm::node::testing {

// A live founder record named `name` hosting `stages`: incarnation 1, two
// memory slots, and addresses "name:g", "name:p", "name:r", "name:s" (the
// gossip, pipeline, replica-group and state-transfer slots).
inline membership::MemberInfo TestMember(const std::string& name, std::vector<uint32_t> stages) {
  membership::MemberInfo m;
  m.id = common::NodeId::ForName(name);
  m.stages = std::move(stages);
  m.incarnation = 1;
  m.memory_slots = 2;
  m.addresses = {name + ":g", name + ":p", name + ":r", name + ":s"};
  return m;
}

// A view of `members` sorted by id, as membership hands them out.
inline membership::View TestView(std::vector<membership::MemberInfo> members,
                                 uint64_t version = 0) {
  membership::View v;
  std::sort(members.begin(), members.end(),
            [](const auto& a, const auto& b) { return a.id < b.id; });
  v.members = std::move(members);
  v.version = version;
  return v;
}

}  // namespace skipswarm::node::testing

#endif  // SKIPSWARM_NODE_DAEMON_GOSSIP_TEST_MEMBERS_H_
