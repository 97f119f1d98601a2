// The protocol version this build speaks, and the check every service runs
// on the first message of a conversation.
#ifndef SKIPSWARM_PROTO_VERSION_H_
#define SKIPSWARM_PROTO_VERSION_H_

#include "absl/status/status.h"
#include "proto/common.pb.h"

namespace skipswarm::proto {

inline constexpr ProtocolVersion kProtocolVersion = PROTOCOL_VERSION_5;

// The software version, printed by `skipswarm version` and health replies.
inline constexpr char kSoftwareVersion[] = "0.1.0";

// OK if `theirs` is the version we speak; otherwise FAILED_PRECONDITION
// with a message naming both versions and what to do.
absl::Status CheckProtocolVersion(int theirs);

}  // namespace skipswarm::proto

#endif  // SKIPSWARM_PROTO_VERSION_H_
