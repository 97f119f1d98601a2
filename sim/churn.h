// Churn traces: what happens to the swarm while it trains.
//
// A scenario's "churn" array holds entries of these types (times in
// simulated seconds since the run started; sim/README.md has examples):
//   kill             {"node": N, "at_s": T}
//   join             {"at_s": T, "region": R, "stage": S | "auto",
//                     "count": 1, "memory_slots": 3, "speed_factor": 1}
//   poisson_failures {"fraction": F | "rate_per_s": L, "from_s", "to_s",
//                     "stages": "non_data" | "all" | [1, 2]}
//   poisson_arrivals {"rate_per_s": L, "from_s", "to_s", "regions": [...],
//                     "stage": "auto", "memory_slots": 3}
//   region_outage    {"regions": [R...], "at_s": T, "duration_s": D}
//                    (no duration: permanent; otherwise the nodes come back
//                     and rejoin after state transfer)
//   correlated_failures {"fraction": F, "from_s", "to_s", "stages": ...}
//                    (whole regions, chosen by the seed, fail at once until
//                     F of the eligible nodes are gone)
//   straggler        {"node": N | "count": K, "factor": 4, "at_s", "duration_s"}
//   partition        {"regions": [R...], "at_s", "duration_s"}  (links
//                     between those regions and the rest are cut)
//
// ExpandChurn turns them into a time-ordered list of concrete events using
// the run's seed: Poisson times are drawn here; which node a "random" kill
// hits is left to the driver (it depends on who is alive then).
//
// Thread rule: plain values and pure functions.
#ifndef SKIPSWARM_SIM_CHURN_H_
#define SKIPSWARM_SIM_CHURN_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/random.h"
#include <nlohmann/json_fwd.hpp>

namespace skipswarm::sim {

enum class ChurnKind {
  kKill,            // `nodes` die
  kKillRandom,      // one live node of `stages` dies (chosen at run time)
  kJoin,            // `nodes` (universe joiners) join
  kRevive,          // `nodes` come back after an outage and rejoin
  kSlowStart,       // `nodes` (or `count` random live ones) slow by `factor`
  kSlowEnd,         // `nodes` back to normal speed
  kPartitionStart,  // links between `regions` and the rest are cut
  kPartitionEnd,
};
const char* ChurnKindName(ChurnKind kind);

struct ChurnEvent {
  double at_s = 0;
  ChurnKind kind = ChurnKind::kKill;
  std::vector<std::string> nodes;
  std::vector<std::string> regions;
  std::vector<int> stages;  // kKillRandom eligibility (empty = non-data)
  int count = 0;            // kSlowStart with no nodes: pick this many
  double factor = 1;        // kSlowStart
  double duration_s = 0;    // kSlowStart with random nodes: when it ends
  std::string cause;        // the churn entry it came from, for reports
};

struct ChurnTrace {
  std::vector<ChurnEvent> events;  // sorted by (at_s, entry order)
};

// A node as churn expansion sees it.
struct NodeBrief {
  std::string name;
  std::string region;
  int stage = 0;
};

// A node that joins during the run; `stage` -1 means "auto" (the driver
// puts it on the stage with the least compute capacity).
struct JoinerSpec {
  std::string name;
  std::string region;
  int stage = -1;
  int memory_slots = 0;       // 0: the median of the initial nodes
  double speed_factor = 1.0;  // x the region's seconds per layer per sample
};

// The most nodes one trace may add (joins and arrivals together). Every
// joiner joins the universe topology, whose links grow with the square of
// its nodes: a join `count` of 1e18 was an allocation that aborted the
// process, and a few thousand arrivals took seconds and hundreds of MB.
constexpr size_t kMaxJoiners = 1000;

// Expands `churn` (the scenario's array; null = none). `nodes` are the
// initial members, `regions` every region with links. Appends joiners, at
// most kMaxJoiners in all.
// Errors name the entry ("churn[3].at_s: must not be negative").
absl::Status ExpandChurn(const nlohmann::json& churn,
                         const std::vector<NodeBrief>& nodes,
                         const std::vector<std::string>& regions,
                         int num_stages, common::Random& rng,
                         ChurnTrace* trace, std::vector<JoinerSpec>* joiners);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_CHURN_H_
