// `skipswarm local`: a real swarm of `skipswarm node` processes on
// loopback (fork/exec of this binary), training the default model on the
// default corpus with a live progress line, optional fault injection
// (--kill=NAME@ITER kills a node with SIGKILL once that iteration is
// reported), and a summary at the end: loss curve as CSV and SVG in
// --local_dir. Layout: --local_data_nodes data nodes (d0, d1, ...) and
// --local_replicas replicas of every other stage (s1r0, s1r1, ...).
// Ports are free ports found at start-up; each child gets a config file.
#ifndef SKIPSWARM_LAUNCHER_LOCAL_COMMAND_H_
#define SKIPSWARM_LAUNCHER_LOCAL_COMMAND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/cli/command.h"

namespace skipswarm::launcher {

// WAN emulation (`skipswarm local --wan=SCENARIO`). Scenarios are
// sim/'s; the hook that lays the swarm out from one is made by
// wan_local.h and plugged in by cli/commands.cc, so this launcher builds
// without the simulator.
struct LocalNodePlan {
  std::string name;
  std::vector<int> stages;
  // JSON members ("key": value, ...) appended to the node's config file
  // (later keys win over the launcher's defaults).
  std::string extra_config;
};
struct LocalSwarmPlan {
  std::vector<LocalNodePlan> nodes;
  int64_t iterations = 0;           // > 0: overrides --local_iterations
  std::string description;          // printed at start
  std::function<void()> after_run;  // e.g. compare with the simulator
  // Scheduled kills, as --kill=NAME@ITER (added to the flag's).
  std::map<std::string, int64_t> kills;
};
// Gets the run folder (wiped, exists); nullopt when no WAN run was asked for.
using LocalSwarmPlanner =
    std::function<absl::StatusOr<std::optional<LocalSwarmPlan>>(const std::string& dir)>;

common::cli::Command LocalCommand(LocalSwarmPlanner wan = nullptr);

}  // namespace skipswarm::launcher

#endif  // SKIPSWARM_LAUNCHER_LOCAL_COMMAND_H_
