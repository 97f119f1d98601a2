#include "common/blas_setup.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace skipswarm::common {

BlasCoreInput BlasCoreInputFrom(const EnvLookup& env, std::optional<OpenBlasInfo> openblas,
                                const CpuFeatures& cpu) {
  BlasCoreInput in;
  in.openblas = std::move(openblas);
  in.cpu = cpu;
  in.user_coretype = env(kOpenBlasCoreTypeEnv);
  in.mode = env(kBlasCoreModeEnv).value_or("");
  in.reexec_from = env(kBlasCoreFromEnv);
  return in;
}

BlasCoreDecision SetUpBlasCore(char** argv) {
  const EnvLookup real_env = [](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
  BlasCoreDecision d =
      ChooseBlasCore(BlasCoreInputFrom(real_env, ProbeOpenBlas(), DetectCpuFeatures()));
  if (d.force.empty()) return d;
  // Both together: either one stops the rule in the new image.
  setenv(kOpenBlasCoreTypeEnv, d.force.c_str(), /*overwrite=*/1);
  setenv(kBlasCoreFromEnv, d.from.c_str(), /*overwrite=*/1);
  execv("/proc/self/exe", argv);
  const int err = errno;
  d.warning = true;
  absl::StrAppend(&d.log_line, ", but re-executing failed (", std::strerror(err),
                  "): this process keeps ", d.from, ", the processes it starts get ", d.force);
  return d;
}

std::optional<BlasCoreDecision> SetUpBlasCoreFor(const cli::Command* command, char** argv) {
  if (command == nullptr || !command->uses_blas) return std::nullopt;
  return SetUpBlasCore(argv);
}

void LogBlasCore(const std::optional<BlasCoreDecision>& d) {
  if (d.has_value()) LogBlasCore(*d);
}

void LogBlasCore(const BlasCoreDecision& d) {
  if (d.warning) {
    LOG(WARNING) << d.log_line;
  } else {
    LOG(INFO) << d.log_line;
  }
}

}  // namespace skipswarm::common
