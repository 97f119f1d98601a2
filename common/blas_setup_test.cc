#include "common/blas_setup.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

CpuFeatures Avx512() {
  CpuFeatures c;
  c.avx2 = c.fma = true;
  c.avx512f = c.avx512cd = c.avx512bw = c.avx512dq = c.avx512vl = true;
  return c;
}

const OpenBlasInfo kPrescott{"Prescott", /*dynamic_arch=*/true};

TEST(BlasSetupTest, EmptyEnvironmentForcesAndItsOwnVariablesStopIt) {
  std::map<std::string, std::string> env;
  const BlasCoreDecision first =
      ChooseBlasCore(BlasCoreInputFrom(FakeEnv(env), kPrescott, Avx512()));
  ASSERT_EQ(first.force, "SkylakeX");
  // What SetUpBlasCore sets before exec, seen by the new image, whose library
  // either took the core or ignored it.
  env[kOpenBlasCoreTypeEnv] = first.force;
  env[kBlasCoreFromEnv] = first.from;
  for (const char* reported : {"SkylakeX", "Prescott"}) {
    const BlasCoreDecision second =
        ChooseBlasCore(BlasCoreInputFrom(FakeEnv(env), OpenBlasInfo{reported, true}, Avx512()));
    EXPECT_EQ(second.force, "") << reported;
  }
}

TEST(BlasSetupTest, CommandsThatDoNotRunTheModelAreLeftAlone) {
  // Returns before any probe or exec: this test process is not replaced.
  char* argv[] = {const_cast<char*>("skipswarm"), nullptr};
  EXPECT_FALSE(SetUpBlasCoreFor(nullptr, argv).has_value());
  cli::Command plan;
  plan.name = "plan";
  EXPECT_FALSE(SetUpBlasCoreFor(&plan, argv).has_value());
}

TEST(BlasSetupTest, ReadsTheUsersVariables) {
  const BlasCoreInput in =
      BlasCoreInputFrom(FakeEnv({{"OPENBLAS_CORETYPE", "Haswell"}, {"SKIPSWARM_BLAS_CORE", "off"}}),
                        kPrescott, Avx512());
  EXPECT_EQ(in.user_coretype, "Haswell");
  EXPECT_EQ(in.mode, "off");
  EXPECT_FALSE(in.reexec_from.has_value());
  EXPECT_EQ(ChooseBlasCore(in).force, "");
  EXPECT_EQ(ChooseBlasCore(
                BlasCoreInputFrom(FakeEnv({{"SKIPSWARM_BLAS_CORE", "off"}}), kPrescott, Avx512()))
                .force,
            "");
}

}  // namespace
}  // namespace skipswarm::common
