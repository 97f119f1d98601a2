#include "proto/version.h"

#include "absl/strings/str_cat.h"

namespace skipswarm::proto {

absl::Status CheckProtocolVersion(int theirs) {
  if (theirs == kProtocolVersion) return absl::OkStatus();
  if (theirs == PROTOCOL_VERSION_UNSPECIFIED) {
    return absl::FailedPreconditionError(
        "peer sent no protocol_version (is it a SkipSwarm node?)");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "protocol version mismatch: peer speaks v", theirs, ", this node speaks v",
      static_cast<int>(kProtocolVersion),
      "; upgrade the older node (this is skipswarm ", kSoftwareVersion, ")"));
}

}  // namespace skipswarm::proto
