#include "common/status_macros.h"

#include "gtest/gtest.h"

namespace skipswarm::common {
namespace {

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  SS_ASSIGN_OR_RETURN(int half, Half(x));
  SS_ASSIGN_OR_RETURN(int quarter, Half(half));
  return quarter;
}

absl::Status CheckEven(int x) {
  SS_RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacrosTest, AssignOrReturnPassesValuesThrough) {
  auto q = Quarter(12);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(*q, 3);
}

TEST(StatusMacrosTest, AssignOrReturnPropagatesTheFirstError) {
  auto q = Quarter(6);  // 6 -> 3 -> odd
  EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(q.status().message(), "odd");
}

TEST(StatusMacrosTest, ReturnIfErrorReturnsOnlyErrors) {
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), absl::StatusCode::kInvalidArgument);
}

TEST(StatusMacrosTest, AnnotateKeepsCodeAndPrefixesMessage) {
  absl::Status s = Annotate(absl::NotFoundError("no file"), "loading config");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "loading config: no file");
  EXPECT_TRUE(Annotate(absl::OkStatus(), "x").ok());
}

}  // namespace
}  // namespace skipswarm::common
