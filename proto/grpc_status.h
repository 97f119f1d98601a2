// Conversion between grpc::Status and absl::Status. Both use the same
// canonical codes; messages are kept. Every gRPC boundary in SkipSwarm goes
// through these two functions (docs/ARCHITECTURE.md "Conventions").
#ifndef SKIPSWARM_PROTO_GRPC_STATUS_H_
#define SKIPSWARM_PROTO_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace skipswarm::proto {

absl::Status ToAbslStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

// A canonical code carried as an int in a message (e.g. FrameAck.code).
absl::Status StatusFromCode(int code, const std::string& message);

}  // namespace skipswarm::proto

#endif  // SKIPSWARM_PROTO_GRPC_STATUS_H_
