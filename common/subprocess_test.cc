#include "common/subprocess.h"

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

TEST(SubprocessTest, ReturnsWhatTheProgramPrinted) {
  absl::StatusOr<std::string> out =
      RunSubprocess({"sh", "-c", "echo 12, 34 MiB; echo noise >&2"}, absl::Seconds(20));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "12, 34 MiB\n");
}

TEST(SubprocessTest, BoundsTheOutput) {
  absl::StatusOr<std::string> out =
      RunSubprocess({"sh", "-c", "yes | head -c 100000"}, absl::Seconds(20), 10);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "y\ny\ny\ny\ny\n");
}

TEST(SubprocessTest, NamesAMissingProgram) {
  absl::StatusOr<std::string> out =
      RunSubprocess({"skipswarm-no-such-program"}, absl::Seconds(20));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(out.status().message().find("cannot run skipswarm-no-such-program"),
            std::string::npos)
      << out.status();
  EXPECT_EQ(RunSubprocess({}, absl::Seconds(1)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SubprocessTest, AFailureCarriesTheExitStatusAndStderr) {
  absl::StatusOr<std::string> out =
      RunSubprocess({"sh", "-c", "echo 'NVIDIA-SMI has failed' >&2; exit 9"}, absl::Seconds(20));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(out.status().message().find("sh exited with status 9: NVIDIA-SMI has failed"),
            std::string::npos)
      << out.status();
}

// A hung helper: the child never finishes by itself, so the only way out is
// the deadline (a short one keeps the test fast; the outcome does not
// depend on timing).
TEST(SubprocessTest, AHungProgramIsKilledAtTheDeadline) {
  absl::StatusOr<std::string> out =
      RunSubprocess({"sh", "-c", "exec tail -f /dev/null"}, absl::Milliseconds(100));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(out.status().message().find("did not finish within 100ms; killed"), std::string::npos)
      << out.status();
  // One that closes its output and lingers is caught the same way.
  out = RunSubprocess({"sh", "-c", "exec >/dev/null 2>&1; exec tail -f /dev/null"},
                      absl::Milliseconds(100));
  EXPECT_EQ(out.status().code(), absl::StatusCode::kDeadlineExceeded) << out.status();
}

}  // namespace
}  // namespace skipswarm::common
