// Process set-up of the BLAS kernels (Note [BLAS core] in common/blas_core.cc):
// the first thing `main` does, before any flag parsing.
//
//   int main(int argc, char** argv) {
//     const common::BlasCoreDecision blas = common::SetUpBlasCore(argv);  // may re-exec
//     return common::cli::RunCli(argc, argv, commands, [&] { common::LogBlasCore(blas); });
//   }
//
// Environment: OPENBLAS_CORETYPE (the user's choice when set),
// SKIPSWARM_BLAS_CORE=auto|off, SKIPSWARM_BLAS_CORE_FROM (set by the
// re-execution itself). This is the one place that reads them.
//
// Thread rule: SetUpBlasCore runs before any thread of ours exists (it sets
// environment variables and may exec).
#ifndef SKIPSWARM_COMMON_BLAS_SETUP_H_
#define SKIPSWARM_COMMON_BLAS_SETUP_H_

#include <functional>
#include <optional>
#include <string>

#include "common/blas_core.h"
#include "common/cli/command.h"

namespace skipswarm::common {

// Looks up one environment variable: nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;

// The rule's input from the environment (`env`) and the probes' results.
BlasCoreInput BlasCoreInputFrom(const EnvLookup& env, std::optional<OpenBlasInfo> openblas,
                                const CpuFeatures& cpu);

// Decides from the real environment and probes. When the rule forces a core,
// sets OPENBLAS_CORETYPE and SKIPSWARM_BLAS_CORE_FROM and re-executes
// /proc/self/exe with `argv` (same pid, fds and the rest of the environment):
// it returns only when it did not re-execute, or when exec failed (the line
// then says so; the variables stay set, so children get the core). Never
// re-executes twice: the re-executed process sees the variables and keeps
// its core (BlasCoreInputFrom + ChooseBlasCore).
BlasCoreDecision SetUpBlasCore(char** argv);

// SetUpBlasCore for a command that runs the model's kernels
// (Command::uses_blas); nullopt, touching nothing, for any other command and
// for null (help, --version, an unknown word): those start without the
// probe and the re-execution.
std::optional<BlasCoreDecision> SetUpBlasCoreFor(const cli::Command* command, char** argv);

// Logs `d`'s line (a warning when it says so): once logging is set up.
// Nothing for nullopt.
void LogBlasCore(const BlasCoreDecision& d);
void LogBlasCore(const std::optional<BlasCoreDecision>& d);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_BLAS_SETUP_H_
