// The layout of a `skipswarm local` swarm: which node processes it starts,
// what each hosts, whether it trains a subnetwork (SDP), the per-node
// config additions of --local_caps / --local_sync_caps / --local_node_config,
// and the check that
// every node fits in this machine's memory at once.
//
//   LayoutOptions lo;
//   lo.num_stages = 6;
//   SS_ASSIGN_OR_RETURN(LocalSwarmLayout l, MakeLocalLayout(lo));  // d0, d1, s1r0, ...
//
// Note [Mixed local swarm]: with --sdp and --local_mixed the swarm has both
// kinds of member: the pipeline swarm (d0.. hosting stage 0, sXrY one
// stage each) and, after it, the K SDP nodes (w0.., model::
// AssignSubnetworks), which train their subnetworks on their own data and
// say so in their records (NodeRecord.subnetwork). Pipeline planners and
// repairers read the swarm through PipelineHostsView (node/stage/
// swarm_view.h), so no pipeline micro-batch passes through an SDP node and
// an SDP node sends or receives no pipeline frame; every stage's averaging
// group is all of its hosts, both kinds (Note [SDP averaging]); data order
// is Note [Mixed data order] (node/train/route_planner.h). The launcher
// runs it with gossip membership; a static --swarm list marks subnetwork
// members with "sdp:" (node/daemon/stack/swarm_spec.h).
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_LAUNCHER_LOCAL_LAYOUT_H_
#define SKIPSWARM_LAUNCHER_LOCAL_LAYOUT_H_

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_flags.h"
#include "model/sdp_assignment.h"

namespace skipswarm::launcher {

// Node name -> the stages it hosts.
using LocalLayout = std::vector<std::pair<std::string, std::vector<int>>>;

struct LayoutOptions {
  int num_stages = 1;
  int data_nodes = 2;  // pipeline data nodes d0.. (stage 0)
  int replicas = 2;    // pipeline replicas of every other stage
  // With sdp: one SDP node per subnetwork (w0, w1, ...), instead of the
  // pipeline swarm or, `mixed`, after it (Note [Mixed local swarm]).
  model::SdpOptions sdp;
  bool mixed = false;
};

struct LocalSwarmLayout {
  LocalLayout nodes;               // in start order; nodes.front() founds the swarm
  std::set<std::string> sdp;       // names of the SDP nodes
  model::SdpAssignment assignment; // with sdp: the subnetworks of w0, w1, ...
  int pipeline_data_nodes = 0;
};

// InvalidArgument for counts < 1 or an assignment AssignSubnetworks
// refuses.
absl::StatusOr<LocalSwarmLayout> MakeLocalLayout(const LayoutOptions& options);

// Adds `"key": MBIT` members to `extra_config[NAME]` for every NAME@MBIT of
// `spec` (comma-separated), one member per key; `flag` names the flag in
// errors. InvalidArgument for a malformed entry or an unknown node.
absl::Status AddLinkCaps(const std::string& spec, const std::string& flag,
                         const std::vector<std::string>& keys, const LocalLayout& nodes,
                         std::map<std::string, std::string>* extra_config);

// Adds `"KEY": "VALUE"` to `extra_config[NAME]` for every NAME:KEY=VALUE of
// `spec` (comma-separated; --local_node_config). InvalidArgument for a
// malformed entry (quotes and backslashes are refused) or an unknown node.
absl::Status AddNodeConfig(const std::string& spec, const LocalLayout& nodes,
                           std::map<std::string, std::string>* extra_config);

// FailedPrecondition when the layout's training memory (Note [Memory
// estimate] in model/model_flags.h) plus ~200 MiB per process exceeds this
// machine's physical memory.
absl::Status CheckLayoutFitsInMemory(const model::ModelFlags& flags, const LocalLayout& nodes,
                                     int mbs);

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_LOCAL_LAYOUT_H_
