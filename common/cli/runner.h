// Entry point of the `skipswarm` binary: picks the subcommand, prints help,
// applies the config file and flags, sets up logging and runs the command.
//
//   int main(int argc, char** argv) {
//     return common::cli::RunCli(argc, argv, {PlanCommand(), NodeCommand()});
//   }
//
//   skipswarm help                   # lists commands
//   skipswarm help plan              # same as: skipswarm plan --help
//   skipswarm plan --config=c.json --budget_ms=50
//
// Common flags, accepted by every command: --config=FILE (JSON, see
// config_file.h; command-line flags override it), --log_level
// (info|warning|error), --verbosity=N (VLOG level).
#ifndef SKIPSWARM_COMMON_CLI_RUNNER_H_
#define SKIPSWARM_COMMON_CLI_RUNNER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/cli/command.h"
#include "common/cli/config_file.h"

namespace skipswarm::common::cli {

// Runs the CLI; returns the process exit code (0 ok, 1 command failure,
// 2 usage error). `on_start`, when given, runs once logging is set up, just
// before the command (not for help or usage errors): `main`'s start-up lines.
int RunCli(int argc, char** argv, const std::vector<Command>& commands,
           const std::function<void()>& on_start = {});

// Text of `skipswarm help`.
// The command that `argv` runs (the word after the binary's name), or null
// for help, --version and unknown words. For the set-up that must happen in
// `main` before RunCli (Command::uses_blas).
const Command* CommandToRun(int argc, char** argv, const std::vector<Command>& commands);

std::string TopLevelHelp(const std::vector<Command>& commands);
// Text of `skipswarm <command> --help`: usage plus the command's flags.
// `full` (--helpfull): also the flags of hidden help groups.
std::string CommandHelp(const Command& command, bool full = false);

// Note [Short flag names]: the flag that `name` stands for on `command`'s
// command line and in its config file:
//  1. `name` itself when it is one of the command's flags (its own or a
//     common one): an exact name always wins, so the prefixed names keep
//     working, and a short name that is also an own flag means that flag
//     (the prefixed one is then reachable by its full name only);
//  2. otherwise what it is an alias of: its Command::flag_aliases entry, or
//     flag_prefix + name when that is an own flag. A flag of the same name
//     that belongs to another command does not count (`skipswarm local
//     --iterations` is --local_iterations; train-ref owns --iterations);
//     InvalidArgument naming the command and both flags when the two
//     disagree;
//  3. neither: `name` unchanged (CheckFlagsBelong / ApplyConfig then report
//     an unknown flag of the command).
absl::StatusOr<std::string> ResolveFlagAlias(const Command& command, const std::string& name);

// How help spells `command`'s own flag `flag`: without the command's
// flag_prefix when that short name resolves back to `flag`.
std::string ShortFlagName(const Command& command, const std::string& flag);

// Whether flag `name` may be used with `command` (its own or a common flag).
bool FlagBelongsTo(const Command& command, const std::string& name);

// Applies config entries to `command`'s flags. Errors name the key.
absl::Status ApplyConfig(const Command& command,
                         const std::vector<ConfigEntry>& entries,
                         const std::string& source);

// Checks that every "--flag" in `args` belongs to `command`.
absl::Status CheckFlagsBelong(const Command& command,
                              const std::vector<std::string>& args);

}  // namespace skipswarm::common::cli

#endif  // SKIPSWARM_COMMON_CLI_RUNNER_H_
