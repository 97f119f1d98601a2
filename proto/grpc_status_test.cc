#include "proto/grpc_status.h"

#include "gtest/gtest.h"

namespace skipswarm::proto {
namespace {

TEST(GrpcStatusTest, RoundTripsCodeAndMessage) {
  absl::Status s = absl::ResourceExhaustedError("no free memory slot");
  grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(g.error_message(), "no free memory slot");
  EXPECT_EQ(ToAbslStatus(g), s);
}

TEST(GrpcStatusTest, OkStaysOk) {
  EXPECT_TRUE(ToAbslStatus(grpc::Status::OK).ok());
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(StatusFromCode(0, "ignored").ok());
}

TEST(GrpcStatusTest, OutOfRangeCodesFromPeersBecomeUnknown) {
  EXPECT_EQ(StatusFromCode(999, "x").code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(StatusFromCode(-3, "x").code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(StatusFromCode(14, "x").code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace skipswarm::proto
