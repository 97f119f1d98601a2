// Gossip at scale: N real membership::Membership instances (SWIM, signed
// records) on SimNetwork, each behind a byte-counting
// GossipTransport decorator, so the simulator can report convergence time,
// crash-detection time and gossip traffic in bytes per node per second.
//
//   GossipFigures g = MeasureGossip({.nodes = 300, .seed = 1});
//
// Sizes are the serialized protobuf sizes of requests and replies (no
// gRPC/TLS framing). Thread rule: single-threaded; owns its SimClock.
#ifndef SKIPSWARM_SIM_GOSSIP_BENCH_H_
#define SKIPSWARM_SIM_GOSSIP_BENCH_H_

#include <cstdint>

#include "absl/time/time.h"

namespace skipswarm::sim {

struct GossipBenchOptions {
  int nodes = 100;
  uint64_t seed = 1;
  absl::Duration latency = absl::Milliseconds(40);  // one way
  absl::Duration jitter = absl::Milliseconds(20);
  absl::Duration converge_limit = absl::Seconds(300);
  absl::Duration steady_window = absl::Seconds(10);
};

struct GossipFigures {
  double converge_s = -1;  // mass join through node 0 -> all views equal
  double detect_s = -1;    // one crash -> dead in every view
  double msgs_per_node_s = 0;   // steady state, requests + replies
  double bytes_per_node_s = 0;  // steady state, requests + replies
};

GossipFigures MeasureGossip(const GossipBenchOptions& options);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_GOSSIP_BENCH_H_
