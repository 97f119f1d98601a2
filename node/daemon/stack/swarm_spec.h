// The static swarm description a daemon starts from (static mode; a gossip
// swarm discovers its peers instead): one entry per node, the same list in
// every node's config, and --name picks this node's entry.
//
//   Entry:  NAME/STAGES/PIPELINE_ADDR/GROUP_ADDR[/NODE_ID]   STAGES: "0", "1+2", "sdp:0+2+5"
//   e.g.    --swarm=d0/0/127.0.0.1:7400/127.0.0.1:7401,r1/1/127.0.0.1:7402/127.0.0.1:7403
//
// STAGES prefixed "sdp:" marks a subnetwork (SDP) member (PeerInfo::
// subnetwork, as NodeRecord.subnetwork does in a gossip swarm): it trains
// those stages on its own data, runs with --sdp=forward|backward, and is
// never a pipeline hop. Its stages must include stage 0 and the last stage
// (Note [SDP assignment] in model/sdp_assignment.h). When the list has
// pipeline members, they alone must host every stage (routes never pass
// through a subnetwork member); a list of subnetwork members only is a pure
// SDP swarm.
//
// NODE_ID, when given, is the node's key hash as `skipswarm keygen` prints
// it (64 hex digits, identity/identity.h): the node's id, and the
// certificate its peers insist on over mutual TLS (static_security.h).
// Without it the id is NodeId::ForName(NAME), which only plain-text
// (--insecure) swarms accept.
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_DAEMON_STACK_SWARM_SPEC_H_
#define SKIPSWARM_NODE_DAEMON_STACK_SWARM_SPEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "node/stage/swarm_view.h"

namespace skipswarm::node {

struct SwarmMember {
  std::string name;
  PeerInfo info;
  // info.id came from the entry's NODE_ID (a key hash peers can check).
  bool pinned = false;
};

// Parses comma-separated entries. InvalidArgument naming the bad entry:
// wrong field count, duplicate name, bad or repeated stage, stage outside
// [0, num_stages), a subnetwork without stage 0 or the last stage, a
// malformed or duplicate node id, a stage no node (no pipeline node, when
// there are any) hosts, or no data node.
absl::StatusOr<std::vector<SwarmMember>> ParseSwarmSpec(const std::string& spec, int num_stages,
                                                        int memory_slots);
// One entry; with a non-empty `node_id_hex` (Identity::id().Hex()) pinned.
// `subnetwork`: the entry is marked "sdp:".
std::string FormatSwarmEntry(const std::string& name, const std::vector<int>& stages,
                             const std::string& address, const std::string& group_address,
                             const std::string& node_id_hex = "", bool subnetwork = false);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_DAEMON_STACK_SWARM_SPEC_H_
