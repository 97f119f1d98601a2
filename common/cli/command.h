// A `skipswarm` subcommand, as registered by the module that owns it.
//
// The owning module defines the command's ABSL_FLAGs in its own .cc file and
// returns a Command describing it:
//
//   // scheduler/plan_command.cc
//   ABSL_FLAG(std::string, scenario, "", "Scenario file (JSON).");
//   common::cli::Command PlanCommand() {
//     return {"plan", "Plan routes for a scenario and compare planners",
//             "skipswarm plan --scenario=FILE [--planner=NAME]",
//             {"scheduler/plan_command.cc"},
//             [](const std::vector<std::string>& args) { ...; return 0; }};
//   }
//
// The `skipswarm` binary (node/) lists every Command and hands them to
// RunCli (runner.h), which handles help, the config file and flag parsing.
#ifndef SKIPSWARM_COMMON_CLI_COMMAND_H_
#define SKIPSWARM_COMMON_CLI_COMMAND_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace skipswarm::common::cli {

struct Command {
  // The word after `skipswarm`, e.g. "plan".
  std::string name;
  // One line for `skipswarm help`.
  std::string summary;
  // Printed by `skipswarm <name> --help` above the flag list.
  std::string usage;
  // Source files (path suffixes, e.g. "scheduler/plan_command.cc") whose
  // ABSL_FLAGs belong to this command. Only these flags (and the common ones:
  // --config, --log_level, --verbosity) are accepted on its command line and
  // in its config file.
  std::vector<std::string> flag_files;
  // Runs the command once flags and the config file are applied. `args` are
  // the positional arguments after the command name. Returns the exit code.
  std::function<int(const std::vector<std::string>& args)> run;
  // Other names for this command's flags, {alias, flag}, on its command
  // line and in its config file, for names that flag_prefix does not
  // derive (a prefixed flag's short name comes from flag_prefix).
  std::vector<std::pair<std::string, std::string>> flag_aliases = {};
  // How --help lists the command's own flags: each flag goes under the first
  // group that names it (in `flags`) or its file (in `files`); the rest under
  // "flags". A `hidden` group (experiment-only flags) is left out of --help
  // and listed by --helpfull; its flags work the same either way.
  struct HelpGroup {
    std::string title;
    std::vector<std::string> flags;
    std::vector<std::string> files = {};
    bool hidden = false;
  };
  std::vector<HelpGroup> help_groups = {};
  // Note [Short flag names]: the prefix that this command's own flags carry
  // only because Abseil's flag names are global ("local_" for `skipswarm
  // local`: --local_iterations). Its command line and config file accept
  // them without it (--iterations), and --help lists them so; the prefixed
  // names keep working as deprecated aliases. Empty: none.
  std::string flag_prefix = {};
  // Whether the command runs the model's kernels (training, evaluation,
  // export): only such a command sets up the OpenBLAS core before it starts,
  // which may re-execute the binary (Note [BLAS core] in common/blas_core.cc).
  // `help`, `version`, `plan`, `checkpoints` and the rest start without it.
  bool uses_blas = false;
};

}  // namespace skipswarm::common::cli

#endif  // SKIPSWARM_COMMON_CLI_COMMAND_H_
