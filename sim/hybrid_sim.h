// `skipswarm sim --hybrid`: the scenario's initial swarm as pipeline-only,
// SDP-only and mixed plans (scheduler/hybrid_plan.h, Note [Hybrid cost]),
// with each plan's pipeline part run by the simulator and its SDP nodes
// costed alongside: an SDP node's iteration is its subnetwork's compute
// (M micro-batches one after another on its own compute, no frames) and
// its per-stage averaging traffic, bounded by its uplink (the scenario's
// uplink_mbit) and links.
//
//   SS_ASSIGN_OR_RETURN(HybridInputs in, scheduler::HybridInputsFromFlags(p));
//   SS_ASSIGN_OR_RETURN(std::vector<HybridSimRow> rows,
//                       SimulateHybrid(scenario, in, options));
//   std::cout << FormatHybridSim(rows);
//
// The pipeline part runs on the executor backend (sim/executor.h) with the
// scenario's planner (replay becomes skippipe: recorded routes name nodes
// that may have become SDP nodes), for the scenario's iterations, without
// its churn trace (a mixed plan under churn is not modelled: the trace
// names nodes by their pipeline role). A simulated iteration may differ
// from the evaluator's prediction; both are printed.
//
// Thread rule: single-threaded, like RunSimulation.
#ifndef SKIPSWARM_SIM_HYBRID_SIM_H_
#define SKIPSWARM_SIM_HYBRID_SIM_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/hybrid_compare.h"
#include "sim/driver.h"
#include "sim/scenario.h"

namespace skipswarm::sim {

struct HybridSimRow {
  scheduler::HybridRow row;   // the plan and the evaluator's prediction
  double sim_pipeline_s = 0;  // the simulated pipeline's mean iteration
  double sim_pipeline_mbs = 0;  // its completed MBs per iteration
  double iteration_s = 0;     // max(sim pipeline, SDP compute) + averaging
  double tokens_per_s = 0;
  double bytes_per_token = 0;
};

// The swarm (initially present nodes, with their uplinks) as hybrid_compare
// builds it, then the five plans of CompareHybrid, simulated.
absl::StatusOr<std::vector<HybridSimRow>> SimulateHybrid(const SimScenario& sc,
                                                         const scheduler::HybridInputs& in,
                                                         const SimOptions& options);

// The comparison table (simulated and predicted seconds per iteration).
std::string FormatHybridSim(const SimScenario& sc, const scheduler::HybridInputs& in,
                            const std::vector<HybridSimRow>& rows);

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_HYBRID_SIM_H_
