// The options every in-process gossip-daemon test starts from: the tiny
// 3-stage model over `corpus`, insecure loopback gossip, in-order routes
// (membership is checked by these tests, not planning), no control port.
// Each test sets what it checks on top (iterations, checkpoints, timeouts).
#ifndef SKIPSWARM_TESTS_INTEGRATION_TINY_GOSSIP_OPTIONS_H_
#define SKIPSWARM_TESTS_INTEGRATION_TINY_GOSSIP_OPTIONS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "node/daemon/gossip/gossip_daemon.h"

namespace skipswarm::node {

inline GossipDaemonOptions TinyGossipOptions(const std::string& name, std::vector<int> stages,
                                             const std::string& corpus,
                                             const std::string& swarm_name) {
  GossipDaemonOptions o;
  o.base.name = name;
  o.base.mbs_per_iteration = 2;
  o.base.memory_slots = 2;
  o.base.planner = "inorder";
  o.base.startup_timeout = absl::Seconds(60);
  o.base.model.model.num_layers = 3;
  o.base.model.model.d_model = 16;
  o.base.model.model.num_heads = 2;
  o.base.model.model.ffn_dim = 24;
  o.base.model.model.seq_len = 8;
  o.base.model.model.num_stages = 3;
  o.base.model.samples_per_mb = 2;
  o.base.model.corpus.paths = {corpus};
  o.gossip.insecure = true;
  o.gossip.swarm_name = swarm_name;
  o.stages = std::move(stages);
  o.control_port = -1;
  return o;
}

}  // namespace skipswarm::node

#endif  // SKIPSWARM_TESTS_INTEGRATION_TINY_GOSSIP_OPTIONS_H_
