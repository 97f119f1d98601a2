// The static swarm description a daemon starts from (until gossip, issue 6,
// discovers peers): one entry per node, the same list in every node's
// config, and --name picks this node's entry.
//
//   Entry:  NAME/STAGES/PIPELINE_ADDR/GROUP_ADDR      STAGES: "0", "1+2"
//   e.g.    --swarm=d0/0/127.0.0.1:7400/127.0.0.1:7401,r1/1/127.0.0.1:7402/127.0.0.1:7403
//
// A node's id is NodeId::ForName(NAME) (keys and signed records replace
// this with the membership work).
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_DAEMON_SWARM_SPEC_H_
#define SKIPSWARM_NODE_DAEMON_SWARM_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct SwarmMember {
  std::string name;
  PeerInfo info;
};

// Parses comma-separated entries. InvalidArgument naming the bad entry:
// wrong field count, duplicate name, bad stage, stage outside
// [0, num_stages), a stage no node hosts, or no data node.
absl::StatusOr<std::vector<SwarmMember>> ParseSwarmSpec(const std::string& spec, int num_stages,
                                                        int memory_slots);
std::string FormatSwarmEntry(const std::string& name, const std::vector<int>& stages,
                             const std::string& address, const std::string& group_address);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_SWARM_SPEC_H_
