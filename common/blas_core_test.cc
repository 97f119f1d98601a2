#include "common/blas_core.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

CpuFeatures Avx512() {
  CpuFeatures c;
  c.avx2 = c.fma = true;
  c.avx512f = c.avx512cd = c.avx512bw = c.avx512dq = c.avx512vl = true;
  return c;
}

CpuFeatures Avx2Fma() {
  CpuFeatures c;
  c.avx2 = c.fma = true;
  return c;
}

BlasCoreInput Fallback(const std::string& core, const CpuFeatures& cpu) {
  BlasCoreInput in;
  in.openblas = OpenBlasInfo{core, /*dynamic_arch=*/true};
  in.cpu = cpu;
  return in;
}

TEST(BlasCoreTest, GenericFallbackOnAvx512CpuGetsSkylakeX) {
  const BlasCoreDecision d = ChooseBlasCore(Fallback("Prescott", Avx512()));
  EXPECT_EQ(d.force, "SkylakeX");
  EXPECT_EQ(d.from, "Prescott");
  EXPECT_FALSE(d.warning);
  EXPECT_NE(d.log_line.find("forcing SkylakeX"), std::string::npos) << d.log_line;
}

TEST(BlasCoreTest, GenericFallbackOnAvx2CpuGetsHaswell) {
  EXPECT_EQ(ChooseBlasCore(Fallback("Prescott", Avx2Fma())).force, "Haswell");
  EXPECT_EQ(ChooseBlasCore(Fallback("katmai", Avx2Fma())).force, "Haswell");
}

TEST(BlasCoreTest, NeverForcesACoreTheCpuLacks) {
  // Each AVX-512 subset short of one set falls to Haswell; without AVX2 or
  // FMA to nothing.
  for (int missing = 0; missing < 5; ++missing) {
    CpuFeatures c = Avx512();
    bool* sets[] = {&c.avx512f, &c.avx512cd, &c.avx512bw, &c.avx512dq, &c.avx512vl};
    *sets[missing] = false;
    EXPECT_EQ(ChooseBlasCore(Fallback("Prescott", c)).force, "Haswell") << missing;
  }
  CpuFeatures no_fma = Avx512();
  no_fma.fma = false;
  no_fma.avx512f = false;
  EXPECT_EQ(ChooseBlasCore(Fallback("Prescott", no_fma)).force, "");
  CpuFeatures no_avx2 = Avx2Fma();
  no_avx2.avx2 = false;
  const BlasCoreDecision d = ChooseBlasCore(Fallback("Prescott", no_avx2));
  EXPECT_EQ(d.force, "");
  EXPECT_NE(d.log_line.find("generic"), std::string::npos) << d.log_line;
  EXPECT_EQ(ChooseBlasCore(Fallback("Prescott", CpuFeatures{})).force, "");
}

TEST(BlasCoreTest, RecognisedCoreIsKept) {
  for (const char* core : {"Haswell", "SkylakeX", "Cooperlake", "Zen", "Sandybridge", "Nehalem"}) {
    const BlasCoreDecision d = ChooseBlasCore(Fallback(core, Avx512()));
    EXPECT_EQ(d.force, "") << core;
    EXPECT_NE(d.log_line.find("OpenBLAS's choice"), std::string::npos) << d.log_line;
  }
}

TEST(BlasCoreTest, NotOpenBlasIsLeftAlone) {
  BlasCoreInput in = Fallback("Prescott", Avx512());
  in.openblas.reset();
  EXPECT_EQ(ChooseBlasCore(in).force, "");
}

TEST(BlasCoreTest, OpenBlasWithoutDynamicArchIsLeftAlone) {
  BlasCoreInput in = Fallback("Prescott", Avx512());
  in.openblas->dynamic_arch = false;
  const BlasCoreDecision d = ChooseBlasCore(in);
  EXPECT_EQ(d.force, "");
  EXPECT_NE(d.log_line.find("DYNAMIC_ARCH"), std::string::npos) << d.log_line;
}

TEST(BlasCoreTest, UserCoreTypeWinsEvenWhenEmptyOrGeneric) {
  for (const char* user : {"Prescott", "", "Haswell"}) {
    BlasCoreInput in = Fallback("Prescott", Avx512());
    in.user_coretype = user;
    const BlasCoreDecision d = ChooseBlasCore(in);
    EXPECT_EQ(d.force, "") << user;
    EXPECT_NE(d.log_line.find("the user's choice"), std::string::npos) << d.log_line;
  }
}

TEST(BlasCoreTest, ModeOffKeepsTheLibrarysChoiceAndUnknownModeWarns) {
  BlasCoreInput in = Fallback("Prescott", Avx512());
  in.mode = "off";
  BlasCoreDecision d = ChooseBlasCore(in);
  EXPECT_EQ(d.force, "");
  EXPECT_FALSE(d.warning);
  in.mode = "SkylakeX";
  d = ChooseBlasCore(in);
  EXPECT_EQ(d.force, "");
  EXPECT_TRUE(d.warning) << d.log_line;
  in.mode = "auto";
  EXPECT_EQ(ChooseBlasCore(in).force, "SkylakeX");
}

// The re-exec guard: whatever the library reports after re-execution (the
// forced core, the old one when it ignored the variable, anything else), and
// even if a wrapper dropped OPENBLAS_CORETYPE again, the second decision
// never forces: one re-execution at most.
TEST(BlasCoreTest, ReexecutedProcessNeverForcesAgain) {
  for (const CpuFeatures& cpu : {Avx512(), Avx2Fma()}) {
    for (const char* generic : {"Prescott", "Katmai", "Unknown", ""}) {
      const BlasCoreDecision first = ChooseBlasCore(Fallback(generic, cpu));
      ASSERT_FALSE(first.force.empty()) << generic;
      for (const std::string& reported :
           {first.force, std::string(generic), std::string("Haswell")}) {
        for (bool coretype_kept : {true, false}) {
          BlasCoreInput second = Fallback(reported, cpu);
          if (coretype_kept) second.user_coretype = first.force;
          second.reexec_from = first.from;
          const BlasCoreDecision d = ChooseBlasCore(second);
          EXPECT_EQ(d.force, "") << generic << " -> " << reported;
          EXPECT_EQ(d.warning, !(coretype_kept && reported == first.force)) << d.log_line;
        }
      }
    }
  }
}

TEST(BlasCoreTest, GenericNamesAreCaseInsensitive) {
  EXPECT_TRUE(IsGenericOpenBlasCore("PRESCOTT"));
  EXPECT_TRUE(IsGenericOpenBlasCore("Banias"));
  EXPECT_FALSE(IsGenericOpenBlasCore("Core2"));
  EXPECT_FALSE(IsGenericOpenBlasCore("SkylakeX"));
}

}  // namespace
}  // namespace skipswarm::common
