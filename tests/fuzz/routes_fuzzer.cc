// Fuzz target: the routes file a daemon replays (`skipswarm node
// --node_routes=FILE`, node/daemon/stack/routes_file_planner.h), through
// RoutesFilePlanner::Parse with four known nodes (d0, d1, s1, s2), then
// Plan for each of them and for an unknown one.
//
// Nothing may crash or read out of bounds, and what Parse accepts must hold
// (abort, so both libFuzzer and fuzz_driver.cc report the input): every
// planned route starts at its origin on stage 0, has at least two hops, no
// negative stage, a data slot >= -1, and the routes of one node are indexed
// 0..k-1 in file order.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "node/daemon/stack/routes_file_planner.h"
#include "node/stage/swarm_view.h"

namespace {

namespace node = skipswarm::node;

void Fail(const char* what) {
  std::fprintf(stderr, "routes_fuzzer: %s\n", what);
  std::abort();
}

const std::map<std::string, node::PeerId>& Ids() {
  static const auto* const ids = new std::map<std::string, node::PeerId>{
      {"d0", node::PeerId::ForName("d0")},
      {"d1", node::PeerId::ForName("d1")},
      {"s1", node::PeerId::ForName("s1")},
      {"s2", node::PeerId::ForName("s2")}};
  return *ids;
}

// How far inputs got (printed at exit with FUZZ_STATS=1).
struct Reached {
  long inputs = 0, parsed = 0, routes = 0;
  ~Reached() {
    if (std::getenv("FUZZ_STATS") != nullptr) {
      std::fprintf(stderr, "routes_fuzzer: %ld inputs, %ld parsed, %ld routes planned\n", inputs,
                   parsed, routes);
    }
  }
} reached;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  ++reached.inputs;
  auto planner = node::RoutesFilePlanner::Parse(text, Ids());
  if (!planner.ok()) return 0;
  ++reached.parsed;
  std::vector<node::PeerId> selves;
  for (const auto& [name, id] : Ids()) selves.push_back(id);
  selves.push_back(node::PeerId::ForName("unknown"));
  node::StaticSwarmView view({});
  for (const node::PeerId& self : selves) {
    node::PlanInput input;
    input.self = self;
    auto routes = (*planner)->Plan(input, view);
    if (!routes.ok()) Fail("Plan failed on a parsed file");
    reached.routes += static_cast<long>(routes->size());
    for (size_t i = 0; i < routes->size(); ++i) {
      const node::PlannedRoute& r = (*routes)[i];
      if (r.index != static_cast<int>(i)) Fail("route indices are not 0..k-1");
      if (r.hops.size() < 2) Fail("a route with fewer than two hops");
      if (r.hops[0].node != self || r.hops[0].stage != 0) Fail("a route not from its origin");
      if (r.data_slot < -1) Fail("a data slot below -1");
      for (const auto& hop : r.hops) {
        if (hop.stage < 0) Fail("a negative stage");
      }
    }
  }
  return 0;
}
