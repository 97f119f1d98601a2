// The config files of `skipswarm local`'s node processes (DIR/NAME.json,
// read by `skipswarm node --config`): membership (gossip: the founder's
// bootstrap address and every node's one address; static: the --swarm
// list, with pinned ids under TLS), the training settings every node
// shares, the model flags as given to the launcher, and a node's own
// additions (caps, status port).
//
//   LocalConfigOptions o = ...;
//   SS_RETURN_IF_ERROR(AssignLocalAddresses(layout, &o));
//   LocalConfigs configs(std::move(o));
//   const std::string path = configs.Write("d0", {0});
//
// Note [One swarm per run]: every node of a gossip run gets the run's own
// swarm name (LocalSwarmName), so its swarm id differs from every other
// run's. With the nodes' default name all `skipswarm local` runs on a
// machine shared one swarm id, and a node of one run reached another run's
// node whenever a port came back into use (a killed node's address that its
// peers still probe, handed by the kernel to the next run's launcher): the
// two memberships admitted each other and merged. A run then saw another
// run's replicas of its stage training ahead of it, and its founders
// entered as joiners of a swarm that was not theirs (Note [Restart behind
// the swarm]) and waited out the start-up deadline, or trained with
// foreign state. Different swarm ids are refused at the first message
// (Membership's CheckRequest, membership/membership.cc).
//
// Thread rule: one caller at a time.
#ifndef SKIPSWARM_LAUNCHER_LOCAL_CONFIG_H_
#define SKIPSWARM_LAUNCHER_LOCAL_CONFIG_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "launcher/local_layout.h"
#include "model/sdp_assignment.h"

namespace skipswarm::launcher {

struct LocalConfigOptions {
  std::string dir;  // the run folder (absolute)
  int64_t iterations = 0;
  int mbs = 4;
  int memory_slots = 4;      // a pipeline node's
  int sdp_memory_slots = 4;  // an SDP node's (a whole route runs there)
  model::SdpMode sdp = model::SdpMode::kOff;
  std::set<std::string> sdp_nodes;  // the nodes that get "sdp"
  std::string planner;
  int path_length = 0;
  bool planner_link_costs = true;
  std::string progress_file;
  bool record_routes = false;  // data nodes write DIR/routes/NAME.routes
  int64_t checkpoint_every = 0;
  // "key": value members of the model flags, passed on to every node.
  std::vector<std::string> model_settings;
  // Per node: members appended last (they win over the defaults).
  std::map<std::string, std::string> extra_config;

  // Membership.
  bool gossip = true;
  bool tls = false;
  int rebalance_every = 0;
  int checkpoint_copies = 0;
  std::string founder;        // the layout's first node (gossip bootstrap)
  std::string swarm_name;     // gossip: Note [One swarm per run]; empty: the nodes' default
  size_t expect_members = 0;  // founders wait for this many
  // Filled by AssignLocalAddresses.
  std::string bootstrap;                         // gossip: the founder's address
  std::map<std::string, std::string> addresses;  // gossip: every node's one address
  std::string swarm;                             // static: the --swarm list
};

// A swarm name no other run on this machine uses (Note [One swarm per
// run]): "local-" and 64 bits from `random` (the launcher passes a
// non-deterministic one: uniqueness, not reproducibility, is the point).
std::string LocalSwarmName(uint64_t random);

// Free loopback ports for every node of `layout` (and, static with TLS,
// each node's key in DIR/keys/, whose id its entry pins).
absl::Status AssignLocalAddresses(const LocalLayout& layout, LocalConfigOptions* o);

class LocalConfigs {
 public:
  explicit LocalConfigs(LocalConfigOptions options) : o_(std::move(options)) {}
  // Writes DIR/NAME.json and returns its path. `joiner`: the node joins
  // the training swarm (hosting `stages` when given, else the allocation's
  // choice) instead of founding it.
  std::string Write(const std::string& name, const std::vector<int>& stages,
                    bool joiner = false) const;
  const LocalConfigOptions& options() const { return o_; }

 private:
  std::string Membership(const std::string& name, const std::vector<int>& stages,
                         bool joiner) const;
  LocalConfigOptions o_;
};

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_LOCAL_CONFIG_H_
