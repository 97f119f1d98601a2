// Input that used to be accepted and must not be: each run exits non-zero
// before any work, with a message naming the culprit.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/e2e/tiny_model.h"
#include "tests/harness/skipswarm_process.h"

namespace skipswarm::tests {
namespace {

ProcessResult RunIn(const std::string& test, std::vector<std::string> args) {
  const std::string dir = *MakeTestDir(test);
  absl::StatusOr<ProcessResult> r = RunSkipswarm(args, dir);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ProcessResult{};
}

std::vector<std::string> TrainRef(const std::string& extra) {
  std::vector<std::string> args = TinyModelArgs("train-ref");
  args.push_back("--iterations=2");
  args.push_back(extra);
  return args;
}

TEST(RefusedInputTest, AnInfiniteLearningRateIsRefused) {
  const ProcessResult r = RunIn("lr_inf", TrainRef("--lr=inf"));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--lr=inf is not a finite number")) << r.err;
}

TEST(RefusedInputTest, ANanGradientClipIsRefused) {
  const ProcessResult r = RunIn("clip_nan", TrainRef("--grad_clip=nan"));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--grad_clip")) << r.err;
}

TEST(RefusedInputTest, ANegativeThreadCountIsRefused) {
  const ProcessResult r = RunIn("threads_negative", TrainRef("--threads=-5"));
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--threads=-5")) << r.err;
}

TEST(RefusedInputTest, AConfigThatIsNotARegularFileIsRefusedAtOnce) {
  const ProcessResult r = RunIn("config_dev_zero", {"plan", "--config=/dev/zero"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "not a regular file")) << r.err;
}

TEST(RefusedInputTest, AMissingNodeKeyFileIsAnErrorWithoutCreateKey) {
  const ProcessResult r = RunIn("missing_key", {"node", "--name=n", "--host_stages=0",
                                              "--node_key_file=typo.key", "--stages=3",
                                              "--layers=3"});
  EXPECT_NE(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--node_key_file=typo.key does not exist")) << r.err;
}

}  // namespace
}  // namespace skipswarm::tests
