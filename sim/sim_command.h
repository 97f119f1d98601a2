// `skipswarm sim`: runs a simulation scenario and writes its report.
//
//   skipswarm sim --sim_scenario=sim/scenarios/churn-42.json --sim_seed=7
//       --sim_report=report.json --sim_svg=report.svg   (one line)
//   skipswarm sim sim/scenarios/churn-42.json --sim_seed=7   # same
//
// Flags are prefixed "sim_" because flag names are unique across the
// binary and --scenario (scheduler/plan_command.cc) and --seed
// (model/model_flags.cc) are taken. The seed is logged; the same scenario
// and seed give a byte-identical JSON report. A progress bar goes to
// stderr; a one-paragraph summary to stdout.
//
// Thread rule: runs on the calling thread.
#ifndef SKIPSWARM_SIM_SIM_COMMAND_H_
#define SKIPSWARM_SIM_SIM_COMMAND_H_

#include "common/cli/command.h"

namespace skipswarm::sim {

common::cli::Command SimCommand();

}  // namespace skipswarm::sim

#endif  // SKIPSWARM_SIM_SIM_COMMAND_H_
