#include "proto/grpc_status.h"

#include <string>

namespace skipswarm::proto {
namespace {

// Codes outside the canonical range (a confused or lying peer) become
// UNKNOWN rather than being cast blindly.
absl::StatusCode CanonicalOrUnknown(int code) {
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return absl::StatusCode::kUnknown;
  }
  return static_cast<absl::StatusCode>(code);
}

}  // namespace

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(CanonicalOrUnknown(status.error_code()),
                      status.error_message());
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Status StatusFromCode(int code, const std::string& message) {
  if (code == 0) return absl::OkStatus();
  return absl::Status(CanonicalOrUnknown(code), message);
}

}  // namespace skipswarm::proto
